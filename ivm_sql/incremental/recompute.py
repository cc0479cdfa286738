"""Recompute the touched keys: for operators with no cheaper incremental form.

DBSP (Section 4.2: non-linear aggregates; and the general D ∘ Q ∘ I restricted per key):
when an operator's output for a key depends only on its input rows with that key, its
change is Q(I_new|touched) - Q(I_old|touched), where "touched" are the keys present in the
input's change. The new part is computed from the inputs' new versions restricted to the
touched keys; the old part is read from the stage's own table, which stores the output with
its key. Both are consolidated, so unchanged rows of a touched key cost nothing downstream.
With no key, any change recomputes the whole operator (and `ivm compile` says so). An
unkeyed input beside keyed ones (NOT IN's "is the subquery empty, does it hold a NULL") is
read whole; its change is consolidated first, so only a real flip touches every key.
"""

from __future__ import annotations

from sqlglot import exp

from ivm_sql.algebra.nodes import Constant, Node, Recompute, Scan, Select, UnionAll
from ivm_sql.incremental import delta, snapshot
from ivm_sql.incremental.temporal import CLOCK, at_time
from ivm_sql.incremental.versions import Pins
from ivm_sql.sqlbuild import (
    WEIGHT,
    alias,
    col,
    consolidate,
    lit,
    null_safe_eq,
    subquery,
    table,
    union_all,
)

KEY = "__ivm_k"
COPY = "__ivm_copy"
TOUCHED = "__ivm_touched"


def key_name(i: int) -> str:
    return f"{KEY}{i}"


def key_columns(node: Recompute) -> tuple[str, ...]:
    return tuple(key_name(i) for i in range(node.key_width))


def stored_columns(node: Recompute) -> tuple[str, ...]:
    return node.columns + key_columns(node)


def weight_is_one(node: Node) -> bool:
    """True when every row of the node's snapshots has weight 1 (no expansion needed)."""
    if isinstance(node, Scan):
        return isinstance(node.weight, exp.Literal)
    if isinstance(node, Constant):
        return True
    if isinstance(node, (Select, UnionAll)):
        return all(weight_is_one(child) for child in node.inputs)
    return False


def rows(node: Node, pins: Pins) -> exp.Select:
    """The node's new snapshot as plain SQL rows: each row repeated by its weight."""
    contents = subquery(snapshot(node, pins, "new"), "z")
    columns = [col(c) for c in node.columns]
    if weight_is_one(node):
        return exp.select(*columns).from_(contents)
    copies = exp.select(
        *columns, alias(exp.Explode(this=exp.func("sequence", lit(1), col(WEIGHT))), COPY)
    ).from_(contents)
    return exp.select(*(col(c) for c in node.columns)).from_(subquery(copies, "c"))


def touched_keys(node: Recompute, pins: Pins) -> exp.Query | None:
    """The distinct keys present in any input's change; None if no input changed.

    When an input without key columns (a fact about a whole input) has a consolidated
    change, every key is touched: the keys of every keyed input's new rows (a key of a
    stored row either still has input rows, or lost them and is in the change)."""
    parts, facts = [], []
    for (_, child), keys in zip(node.sources, node.keys):
        change = delta(child, pins)
        if change is None:
            continue
        if keys or not node.key_width:
            parts.append(_keys_of(subquery(change, "d"), keys))
        else:
            facts.append(consolidate(change, child.columns))
    if not parts and not facts:
        return None
    if not node.key_width:
        return (
            exp.select(alias(lit(1), f"{KEY}_any")).from_(subquery(union_all(parts), "u")).limit(1)
        )
    if facts:
        flipped = exp.Exists(this=exp.select(lit(1)).from_(subquery(union_all(facts), "f")))
        parts += [
            _keys_of(subquery(rows(child, pins), "n"), keys).where(flipped.copy())
            for (_, child), keys in zip(node.sources, node.keys)
            if keys
        ]
    return (
        exp.select(*(col(c) for c in key_columns(node)))
        .from_(subquery(union_all(parts), "u"))
        .distinct()
    )


def _keys_of(rows_: exp.Subquery, keys: tuple[str, ...]) -> exp.Select:
    return exp.select(*(alias(col(k), key_name(i)) for i, k in enumerate(keys))).from_(rows_)


def _restrict(select: exp.Select, keys: tuple[str, ...], touched: exp.Query) -> exp.Select:
    """Only the rows whose key is touched (null-safe: a NULL key is a key like any other)."""
    if not keys:
        return select
    on = exp.and_(
        *(null_safe_eq(col(k, "r"), col(key_name(i), TOUCHED)) for i, k in enumerate(keys))
    )
    return (
        exp.select(*(col(c, "r") for c in select.named_selects))
        .from_(subquery(select, "r"))
        .join(subquery(touched.copy(), TOUCHED), on=on, join_type="LEFT SEMI")
    )


def output(node: Recompute, inputs: dict[str, exp.Query]) -> exp.Query:
    """The operator's query with each input alias bound to a query."""

    def bind(table_node: exp.Expression) -> exp.Expression:
        if isinstance(table_node, exp.Table) and not table_node.db and table_node.name in inputs:
            return subquery(inputs[table_node.name].copy(), table_node.alias_or_name)
        return table_node

    return node.query.copy().transform(bind)


def content(node: Recompute, pins: Pins) -> exp.Select:
    """The operator's output at the new versions, each row with weight 1 (a row may come
    more than once): the stage's content before it is consolidated."""
    result = output(node, {name: rows(child, pins) for name, child in node.sources})
    if node.every_refresh:  # the current time, read as the time the refresh pinned
        result = at_time(result, pins[CLOCK].new)
    return exp.select(*(col(c) for c in stored_columns(node)), alias(lit(1), WEIGHT)).from_(
        subquery(result, "o")
    )


def change(node: Recompute, table_name: str, pins: Pins) -> exp.Select | None:
    """New output of the touched keys minus their stored output, consolidated."""
    touched = touched_keys(node, pins)
    if touched is None:
        return None
    inputs = {
        name: _restrict(rows(child, pins), keys, touched)
        for (name, child), keys in zip(node.sources, node.keys)
    }
    stored = stored_columns(node)
    new = exp.select(*(col(c) for c in stored), alias(lit(1), WEIGHT)).from_(
        subquery(output(node, inputs), "o")
    )
    old_rows = exp.select(
        *(col(c) for c in stored), alias(exp.Neg(this=col(WEIGHT)), WEIGHT)
    ).from_(table(table_name))
    if not node.key_width:
        old = old_rows
    else:
        on = exp.and_(*(null_safe_eq(col(k, "r"), col(k, TOUCHED)) for k in key_columns(node)))
        old = (
            exp.select(*(col(c, "r") for c in (*stored, WEIGHT)))
            .from_(subquery(old_rows, "r"))
            .join(subquery(touched.copy(), TOUCHED), on=on, join_type="LEFT SEMI")
        )
    return consolidate(union_all([new, old]), stored)


def reader(table_name: str, node: Recompute) -> Scan:
    return Scan(table_name, node.columns, weight=col(WEIGHT))
