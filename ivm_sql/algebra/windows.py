"""Window functions and ORDER BY ... LIMIT -> Recompute.

A window function's value for a row depends only on the rows of its partition, so a
change recomputes just the touched partitions (DBSP: the per-key restriction of D ∘ Q ∘ I).
Top-k per key (QUALIFY, or a filter on ROW_NUMBER above) is a window plus a linear filter.
A global ORDER BY ... LIMIT k is kept from a prefix of candidates (``incremental.top_k``).
Windows over grouped rows run over the grouped query in FROM (``over_groups``).
"""

from __future__ import annotations

from sqlglot import exp

from ivm_sql.algebra import aggregates
from ivm_sql.algebra.nodes import Node, Recompute, Select, SortKey, TopK
from ivm_sql.sqlbuild import alias, col, ident, lit, subquery

WINDOW_INPUT = "__in"
KEEP = "__ivm_keep"
GROUPED = "__grouped"


def _input_table() -> exp.Table:
    return exp.Table(this=ident(WINDOW_INPUT), alias=exp.TableAlias(this=ident(WINDOW_INPUT)))


def group_calls(expression: exp.Expression) -> list[exp.Expression]:
    """The aggregate calls of the GROUP BY in ``expression``: outermost, and inside window
    functions (``RANK() OVER (ORDER BY COUNT(*))``, ``SUM(SUM(x)) OVER ()``), but not a
    window's own function (``SUM(x) OVER (...)``)."""
    if isinstance(expression, exp.Window):
        function = expression.this
        spec = [child for child in expression.iter_expressions() if child is not function]
        return [
            call for child in [*function.iter_expressions(), *spec] for call in group_calls(child)
        ]
    if aggregates.is_aggregate(expression):
        return [expression]
    return [c for child in expression.iter_expressions() for c in group_calls(child)]


def over_groups(select: exp.Select) -> bool:
    """True if the SELECT has window functions and groups its rows."""
    qualify = select.args.get("qualify")
    windowed = qualify is not None or any(e.find(exp.Window) for e in select.expressions)
    grouped = select.args.get("group") is not None or select.args.get("having") is not None
    return windowed and (grouped or any(group_calls(e) for e in select.expressions))


def grouped_first(builder, select: exp.Select) -> exp.Select:
    """``SELECT g, agg, w(agg) OVER (...) FROM t GROUP BY g HAVING h QUALIFY q`` as
    ``SELECT __grouped.__g0 AS g, __grouped.__a0 AS agg, w(__grouped.__a0) OVER (...)
    FROM (SELECT g AS __g0, agg AS __a0 FROM t GROUP BY g HAVING h) AS __grouped QUALIFY q``.

    SQL runs windows after GROUP BY and HAVING, over the grouped rows, reading only the
    group keys and aggregates: the same rows. The grouped query is then kept like any
    aggregate (from the change, or per touched group), and the windows per partition."""
    keys = list(select.args["group"].expressions) if select.args.get("group") is not None else []
    qualify = select.args.get("qualify")
    calls: list[exp.Expression] = []
    for expression in [*select.expressions, *([qualify.this] if qualify is not None else [])]:
        calls.extend(c for c in group_calls(expression) if c not in calls)
    grouped = select.copy()
    for key in ("with_", "qualify", "distinct"):
        grouped.set(key, None)
    grouped.set(
        "expressions",
        [alias(k.copy(), f"__g{i}") for i, k in enumerate(keys)]
        + [alias(c.copy(), f"__a{j}") for j, c in enumerate(calls)],
    )

    def over_grouped(expression: exp.Expression) -> exp.Expression:
        def replace(node: exp.Expression) -> exp.Expression:
            if node in keys:
                return col(f"__g{keys.index(node)}", GROUPED)
            window_function = isinstance(node.parent, exp.Window) and node.arg_key == "this"
            if node in calls and not window_function:
                return col(f"__a{calls.index(node)}", GROUPED)
            return node

        result = expression.copy().transform(replace)
        aggregates.require_grouped(builder, result, GROUPED)
        return result

    outer = exp.select(
        *(alias(over_grouped(e.unalias()), e.alias_or_name) for e in select.expressions)
    )
    outer = outer.from_(subquery(grouped, GROUPED))
    if qualify is not None:
        outer.set("qualify", exp.Qualify(this=over_grouped(qualify.this)))
    if select.args.get("distinct") is not None:
        outer.set("distinct", select.args["distinct"].copy())
    return outer


def build(builder, select: exp.Select, sources, condition) -> Node:
    """SELECT with window functions: a Select of the columns they read, then a Recompute
    keyed by the PARTITION BY expressions every window shares."""
    qualify = select.args.get("qualify")
    scope = [*select.expressions, *([qualify.this] if qualify is not None else [])]
    windows = [w for e in scope for w in e.find_all(exp.Window)]
    shared: list[exp.Expression] = list(windows[0].args.get("partition_by") or [])
    for window in windows[1:]:
        partition = window.args.get("partition_by") or []
        shared = [p for p in shared if p in partition]
    columns: list[exp.Column] = []
    for expression in scope:
        for column in expression.find_all(exp.Column):
            if column not in columns:
                columns.append(column)
    names = tuple(f"c{n}" for n in range(len(columns)))
    keys = tuple(f"p{i}" for i in range(len(shared)))
    inner = Select(
        sources,
        condition,
        names + keys,
        tuple(c.copy() for c in columns) + tuple(p.copy() for p in shared),
    )

    def over_input(expression: exp.Expression) -> exp.Expression:
        def swap(node: exp.Expression) -> exp.Expression:
            if isinstance(node, exp.Column) and node in columns:
                return col(names[columns.index(node)], WINDOW_INPUT)
            return node

        return expression.copy().transform(swap)

    outputs = builder.output_names(select)
    query = exp.select(
        *(
            alias(over_input(e.this if isinstance(e, exp.Alias) else e), n)
            for e, n in zip(select.expressions, outputs)
        ),
        *(alias(col(k, WINDOW_INPUT), f"__ivm_k{i}") for i, k in enumerate(keys)),
    ).from_(_input_table())
    reason = "window functions per partition"
    if qualify is not None:  # top-k: keep the rows passing QUALIFY, a filter on the windows
        query = query.select(alias(over_input(qualify.this), KEEP))
        hidden = [f"__ivm_k{i}" for i in range(len(keys))]
        query = (
            exp.select(*(col(n) for n in (*outputs, *hidden)))
            .from_(subquery(query, "q"))
            .where(col(KEEP))
        )
        reason = "window functions and QUALIFY per partition"
    return Recompute(((WINDOW_INPUT, inner),), (keys,), query, outputs, reason)


def top_k(builder, query: exp.Query, inner: Node) -> TopK:
    """ORDER BY ... LIMIT k over ``inner`` (the query without them), kept from a prefix of
    candidates (``incremental.top_k``)."""
    if query.args.get("offset"):
        raise builder.unsupported(
            query.args["offset"], "OFFSET", "keep the first rows with LIMIT alone"
        )
    limit = query.args["limit"].expression
    if not (isinstance(limit, exp.Literal) and not limit.is_string and limit.this.isdigit()):
        raise builder.unsupported(
            query.args["limit"],
            f"LIMIT {limit.sql('spark')}",
            "write the number of rows as a whole number",
        )
    selects = (
        query.selects
        if isinstance(query, exp.Select)
        else query.left.selects
        if isinstance(query, exp.Union)
        else []
    )
    order = query.args.get("order")
    keys = []
    for item in order.expressions if order is not None else []:
        position = _output_position(item.this, selects, inner.columns)
        if position is None:
            raise builder.unsupported(
                item,
                f"ORDER BY {item.this.sql('spark')} with LIMIT",
                "order by columns the view returns (add the column to the SELECT)",
            )
        keys.append(
            SortKey(
                inner.columns[position],
                bool(item.args.get("desc")),
                bool(item.args.get("nulls_first")),
            )
        )
    return TopK(inner, tuple(keys), int(limit.this))


def with_tiebreak(query: exp.Expression) -> exp.Expression:
    """``query`` with every ORDER BY ... LIMIT ordering the rows it ties on by each output
    column, ascending (by position): the one answer, of the several SQL allows, that a top-k
    keeps (``incremental.top_k.total_order``). `ivm verify` compares a view with it."""

    def tiebroken(node: exp.Expression) -> exp.Expression:
        if not (isinstance(node, (exp.Select, exp.Union)) and node.args.get("limit")):
            return node
        width = len(node.selects if isinstance(node, exp.Select) else node.left.selects)
        order = node.args.get("order")
        items = [item.copy() for item in order.expressions] if order is not None else []
        ordered = node.copy()
        ordered.set(
            "order",
            exp.Order(
                expressions=items
                + [exp.Ordered(this=lit(i), nulls_first=True) for i in range(1, width + 1)]
            ),
        )
        return ordered

    return query.transform(tiebroken)


def _output_position(
    expression: exp.Expression, selects: list[exp.Expression], columns: tuple[str, ...]
) -> int | None:
    if (
        isinstance(expression, exp.Column)
        and not expression.table
        and expression.name.lower() in columns
    ):
        return columns.index(expression.name.lower())
    for i, select in enumerate(selects):
        if (select.this if isinstance(select, exp.Alias) else select) == expression:
            return i
    return None
