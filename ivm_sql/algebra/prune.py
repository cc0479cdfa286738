"""Projection pushdown: every node outputs only the columns something above it reads.

Exact because projection is linear (DBSP, Theorem 3.3): π(ΣΔ) = Σπ(Δ) and π(I(S)) = I(π(S)).
Pushing π below an operator whose output depends only on some of its input columns (a
select-project-join's expressions, condition and laterals; a GROUP BY's keys and arguments;
the columns a recompute query names, and its keys) gives the same Z-set: input rows that
become equal add their weights when consolidated, and the operator never looked at what
told them apart. Operators that compare whole rows (DISTINCT; INTERSECT and EXCEPT, whose
queries read ``*``) keep every input column, and so does a recompute query whose column
references cannot all be traced to an input.

Required columns flow top-down. A pruned node outputs its required columns, in their
original order, and possibly a few more (an aggregate keeps all its results, a generator
is never dropped since it changes how many rows there are).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace

from sqlglot import exp

from ivm_sql.algebra.aggregates import calls_in
from ivm_sql.algebra.nodes import (
    Aggregate,
    Constant,
    Distinct,
    Node,
    Recompute,
    Recursive,
    Scan,
    Select,
    TopK,
    UnionAll,
)

# Table functions that Spark accepts in a SELECT list: each turns one row into several.
GENERATORS = (exp.Explode, exp.Inline, exp.Stack, exp.Unnest)
GENERATOR_NAMES = {
    "explode",
    "explode_outer",
    "posexplode",
    "posexplode_outer",
    "inline",
    "inline_outer",
    "stack",
    "json_tuple",
}


def prune(root: Node) -> Node:
    """``root`` computing the same rows, each node outputting only the columns read above it.
    The root keeps all its columns, in their order (they are the user's view)."""
    return _prune(root, set(root.columns))


def _prune(node: Node, required: set[str]) -> Node:
    return RULES[type(node)](node, {c.lower() for c in required})


def _scan(node: Scan, required: set[str]) -> Scan:
    keep = [i for i, c in enumerate(node.columns) if c.lower() in required]
    exprs = tuple(node.exprs[i] for i in keep) if node.exprs is not None else None
    return replace(node, columns=tuple(node.columns[i] for i in keep), exprs=exprs)


def _constant(node: Constant, required: set[str]) -> Constant:
    """Its query is read by column name, so it stays whole; the columns read shrink."""
    return replace(node, columns=tuple(c for c in node.columns if c.lower() in required))


def _select(node: Select, required: set[str]) -> Select:
    keep = [
        i for i, c in enumerate(node.columns) if c.lower() in required or _generates(node.exprs[i])
    ]
    exprs = tuple(node.exprs[i] for i in keep)
    bound: dict[str, str | None] = {
        lateral.alias.lower(): None for lateral in node.laterals
    }  # generated columns
    bound.update({alias.lower(): alias.lower() for alias, _ in node.sources})
    read = _references([*exprs, node.condition, *node.laterals], bound)
    sources = tuple(
        (alias, _prune(child, _needs(child, read, alias))) for alias, child in node.sources
    )
    return replace(node, sources=sources, columns=tuple(node.columns[i] for i in keep), exprs=exprs)


def _union(node: UnionAll, required: set[str]) -> UnionAll:
    """Positional: each branch gives the same positions. When a branch cannot narrow to
    exactly those (an aggregate keeps its results), every branch keeps every position."""
    keep = [i for i, c in enumerate(node.columns) if c.lower() in required]
    branches = tuple(_prune(b, {b.columns[i] for i in keep}) for b in node.branches)
    if any(p.columns != tuple(b.columns[i] for i in keep) for p, b in zip(branches, node.branches)):
        keep = list(range(len(node.columns)))
        branches = tuple(_prune(b, set(b.columns)) for b in node.branches)
    return replace(node, branches=branches, columns=tuple(node.columns[i] for i in keep))


def _distinct(node: Distinct, required: set[str]) -> Distinct:
    # DISTINCT over fewer columns merges rows that differ only in the dropped ones.
    return replace(node, input=_prune(node.input, set(node.input.columns)))


def _top_k(node: TopK, required: set[str]) -> TopK:
    """Keep the ORDER BY's columns and the required ones: rows that differ only in another
    column are the same rows above, wherever the order puts them among their ties."""
    return replace(node, input=_prune(node.input, required | {k.column for k in node.order}))


def _aggregate(node: Aggregate, required: set[str]) -> Aggregate:
    """Keep the keys and the aggregates read above (each keeps state only for itself)."""
    aggs = tuple(call for call in node.aggs if call.name.lower() in required)
    read = set(node.keys) | {call.arg for call in aggs if call.arg is not None}
    return replace(node, input=_prune(node.input, read), aggs=aggs)


def _recompute(node: Recompute, required: set[str]) -> Recompute:
    """Narrow the query's select list to the required outputs (never its keys), then give
    each input the columns the query names under its alias, and its key columns."""
    inputs = {name.lower() for name, _ in node.sources}
    query, columns = node.query, node.columns
    if _query_references(query, inputs) is not None:  # else: read as a whole, kept as it is
        query, columns = _narrow_outputs(node, required)
    read = _query_references(query, inputs)
    sources = []
    for (name, child), keys in zip(node.sources, node.keys):
        needed = _needs(child, read, name) | set(keys)
        # an input read with no column at all would be SELECT FROM ...: keep its first one
        sources.append((name, _prune(child, needed or set(child.columns[:1]))))
    return replace(node, sources=tuple(sources), query=query, columns=columns)


def _narrow_outputs(node: Recompute, required: set[str]) -> tuple[exp.Query, tuple[str, ...]]:
    """The query and its columns with unrequired outputs dropped, when its top level is a
    plain SELECT listing ``columns`` and then the keys, one expression each."""
    query, width = node.query, len(node.columns)
    if not (
        isinstance(query, exp.Select)
        and len(query.expressions) == width + node.key_width
        and [n.lower() for n in query.named_selects[:width]] == [c.lower() for c in node.columns]
        and not query.args.get("distinct")  # DISTINCT over fewer outputs merges rows
        # an aggregate without GROUP BY left with no aggregate would return every row
        and (
            query.args.get("group")
            or all(next(calls_in(e), None) is None for e in query.expressions)
        )
    ):
        return query, node.columns
    keep = [
        i
        for i, c in enumerate(node.columns)
        if c.lower() in required or _generates(query.expressions[i])
    ]
    keep = keep or [0]  # a stage stores at least one column
    if len(keep) == width:
        return query, node.columns
    narrowed = query.copy()
    outputs = narrowed.expressions
    narrowed.set("expressions", [outputs[i] for i in keep] + outputs[width:])
    return narrowed, tuple(node.columns[i] for i in keep)


def _query_references(query: exp.Query, inputs: set[str]) -> dict[str, set[str]] | None:
    """Columns the query reads from each input (a table named like the input, under its
    alias); None when that cannot be told: a name bound to two things, USING or NATURAL
    joins (they read columns no Column names), or what ``_references`` refuses."""
    bound: dict[str, str | None] = {}  # name a column can be qualified with -> input (None: other)
    for table in query.find_all(exp.Table):
        own = (
            table.name.lower() if not table.db and isinstance(table.this, exp.Identifier) else None
        )
        target = own if own in inputs else None
        if bound.setdefault(table.alias_or_name.lower(), target) != target:
            return None
    for alias in query.find_all(exp.TableAlias):  # subqueries, CTEs, laterals
        if (
            not isinstance(alias.parent, exp.Table)
            and bound.setdefault(alias.name.lower(), None) is not None
        ):
            return None
    if any(join.args.get("using") or join.args.get("method") for join in query.find_all(exp.Join)):
        return None
    return _references([query], bound)


def _references(
    expressions: Iterable[exp.Expression | None], bound: dict[str, str | None]
) -> dict[str, set[str]] | None:
    """Columns read per input, from columns qualified by a name in ``bound``; None when a
    column is unqualified or qualified by an unknown name, or a ``*`` (other than COUNT(*))
    reads every column."""
    read: dict[str, set[str]] = {}
    for expression in expressions:
        for node in expression.walk() if expression is not None else ():
            if isinstance(node, exp.Star) and not isinstance(node.parent, exp.Count):
                return None
            if isinstance(node, exp.Column) and not isinstance(node.this, exp.Star):
                qualifier = node.table.lower()
                if not qualifier or node.args.get("db") or qualifier not in bound:
                    return None
                if bound[qualifier] is not None:
                    read.setdefault(bound[qualifier], set()).add(node.name.lower())
    return read


def _needs(child: Node, read: dict[str, set[str]] | None, name: str) -> set[str]:
    """What an input must keep: what is read from it, or everything when that is unknown."""
    return set(child.columns) if read is None else read.get(name.lower(), set())


def _generates(expression: exp.Expression) -> bool:
    """True if the expression turns a row into several: dropping it would change the rows."""
    return any(
        isinstance(node, GENERATORS)
        or (isinstance(node, exp.Anonymous) and node.name.lower() in GENERATOR_NAMES)
        for node in expression.walk()
    )


def _recursive(node: Recursive, required: set[str]) -> Recursive:
    # R's rows feed the step again, so every column of the fixed point is read.
    return replace(
        node,
        anchor=_prune(node.anchor, set(node.anchor.columns)),
        step=_prune(node.step, set(node.step.columns)),
    )


RULES: dict[type, Callable[[Node, set[str]], Node]] = {
    Scan: _scan,
    Constant: _constant,
    Select: _select,
    UnionAll: _union,
    Distinct: _distinct,
    Aggregate: _aggregate,
    Recompute: _recompute,
    TopK: _top_k,
    Recursive: _recursive,
}
