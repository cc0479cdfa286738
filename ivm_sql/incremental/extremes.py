"""MIN and MAX per group: kept from the change alone, unless an extreme loses its last row.

MIN and MAX are not invertible, so DBSP (Section 4.2) computes them from the integrated
input, indexed by group. But they are monotone under insertion, max(I + Δ⁺) =
max(max I, max Δ⁺), and a deletion changes the result only when it removes the last row
holding the extreme. So the aggregate's state keeps, per group and per MIN/MAX call, the
extreme ``m`` and the number ``c`` of rows holding it (weights summed). A change then needs
only the group's stored row and its own rows:

- a value inserted beyond ``m`` becomes the extreme, with its own count;
- rows inserted or deleted at ``m`` add to ``c``;
- any other deletion leaves ``(m, c)`` as they are.

When ``c`` reaches zero while the group still has rows, the extreme is *lost*: the group is
recomputed from its input restricted to that group (D ∘ Q ∘ I per key, as
``incremental.recompute`` does for every touched key). The change query flags such groups;
``runtime.extremes`` rescans them, and only when there are any.
"""

from __future__ import annotations

from sqlglot import exp

from ivm_sql.algebra.nodes import AggCall, Aggregate
from ivm_sql.sqlbuild import (
    WEIGHT,
    alias,
    and_all,
    coalesce_zero,
    col,
    lit,
    null_safe_eq,
    subquery,
    sum_of,
    table,
)

EXTREMES = ("min", "max")
LOST = "__ivm_lost"  # in a change: the group's extreme lost its last row, rescan it
OLD, DELTA = "o", "d"


def extreme(j: int) -> str:
    return f"__ivm_m{j}"


def extreme_count(j: int) -> str:
    return f"__ivm_c{j}"


def _top(j: int) -> str:
    return f"__ivm_top{j}"


def calls(node: Aggregate) -> list[tuple[int, AggCall]]:
    """The MIN and MAX calls of an aggregate, with their positions."""
    return [(j, call) for j, call in enumerate(node.aggs) if call.func in EXTREMES]


def state_columns(node: Aggregate) -> list[str]:
    return [name for j, _ in calls(node) for name in (extreme(j), extreme_count(j))]


def _best(call: AggCall, values: exp.Expression) -> exp.Expression:
    return exp.Max(this=values) if call.func == "max" else exp.Min(this=values)


def _beyond(call: AggCall, value: exp.Expression, than: exp.Expression) -> exp.Expression:
    return (
        exp.GT(this=value, expression=than)
        if call.func == "max"
        else exp.LT(this=value, expression=than)
    )


def with_extremes(node: Aggregate, rows: exp.Query) -> exp.Select:
    """``rows`` with each group's extreme of every MIN/MAX argument beside each row."""
    over = [col(k) for k in node.keys]
    tops = [
        alias(
            exp.Window(this=_best(call, col(call.arg)), partition_by=[c.copy() for c in over]),
            _top(j),
        )
        for j, call in calls(node)
    ]
    return exp.select(exp.Star(), *tops).from_(subquery(rows, "x"))


def initial_outputs(node: Aggregate) -> list[exp.Expression]:
    """Per MIN/MAX call, over ``with_extremes`` rows grouped by key: the extreme and how many
    rows (by weight) hold it."""
    outputs = []
    for j, call in calls(node):
        holds = exp.If(
            this=exp.EQ(this=col(call.arg), expression=col(_top(j))), true=col(WEIGHT), false=lit(0)
        )
        outputs += [
            alias(exp.Max(this=col(_top(j))), extreme(j)),
            alias(coalesce_zero(sum_of(holds)), extreme_count(j)),
        ]
    return outputs


def change(
    node: Aggregate, table_name: str, grouped: exp.Select, changes: exp.Query, count: str
) -> exp.Select:
    """Per touched group: the change of the invertible state (``grouped``: keys and their
    sums over the change), the new extreme and count of every MIN/MAX call, and ``LOST``.
    Groups where nothing changed are left out. ``count``: the row count column."""
    keys = node.keys
    sums = [c for c in grouped.named_selects if c not in keys]
    query = exp.select(*(col(k, DELTA) for k in keys), *(col(c, DELTA) for c in sums)).from_(
        subquery(grouped, DELTA)
    )
    query = query.join(table(table_name, OLD), on=_same_group(keys, OLD, DELTA), join_type="LEFT")
    emptied = exp.EQ(
        this=exp.Add(this=coalesce_zero(col(count, OLD)), expression=col(count, DELTA)),
        expression=lit(0),
    )
    changed = [exp.NEQ(this=col(c, DELTA), expression=lit(0)) for c in sums]
    lost = []
    for j, call in calls(node):
        best, at_stored = f"b{j}", f"x{j}"
        query = query.join(
            subquery(_inserted_best(node, call, changes), best),
            on=_same_group(keys, best, DELTA),
            join_type="LEFT",
        )
        on_stored = exp.and_(
            _same_group(keys, at_stored, DELTA),
            exp.EQ(this=col("v", at_stored), expression=col(extreme(j), OLD)),
        )
        # _values again, as _inserted_best reads it: Spark plans the two identically and
        # reuses the first one's shuffle (a ReusedExchange, checked with EXPLAIN), so the
        # change is scanned and summed once
        query = query.join(
            subquery(_values(node, call, changes), at_stored), on=on_stored, join_type="LEFT"
        )
        stored = coalesce_zero(col(extreme_count(j), OLD))
        inserted = {
            field: exp.Dot(this=col("top", best), expression=exp.to_identifier(field))
            for field in ("v", "w")
        }
        # a value beyond the stored extreme (or the first non-NULL value) becomes the extreme
        better = exp.and_(
            _not(exp.Is(this=col("top", best), expression=exp.Null())),
            exp.or_(
                exp.EQ(this=stored.copy(), expression=lit(0)),
                _beyond(call, inserted["v"], col(extreme(j), OLD)),
            ),
        )
        kept = exp.Add(this=stored.copy(), expression=coalesce_zero(col("w", at_stored)))
        new_extreme = (
            exp.Case()
            .when(emptied.copy(), exp.Null())
            .when(better.copy(), inserted["v"].copy())
            .else_(col(extreme(j), OLD))
        )
        new_count = (
            exp.Case()
            .when(emptied.copy(), lit(0))
            .when(better.copy(), inserted["w"])
            .else_(kept.copy())
        )
        query = query.select(alias(new_extreme, extreme(j)), alias(new_count, extreme_count(j)))
        lost.append(
            exp.and_(
                _not(better),
                exp.GT(this=stored, expression=lit(0)),
                exp.LTE(this=kept, expression=lit(0)),
            )
        )
        changed.append(
            _not(
                exp.and_(
                    null_safe_eq(new_extreme.copy(), col(extreme(j), OLD)),
                    null_safe_eq(new_count.copy(), col(extreme_count(j), OLD)),
                )
            )
        )
    query = query.select(alias(exp.and_(_not(emptied), exp.or_(*lost)), LOST))
    # a group born and emptied since the last refresh (its rows came and went) has no stored
    # row and a new count of 0: nothing to write, although its NULL extreme differs from none
    born_empty = exp.and_(exp.Is(this=col(count, OLD), expression=exp.Null()), emptied.copy())
    return query.where(exp.and_(exp.or_(*changed), _not(born_empty)))


def _not(condition: exp.Expression) -> exp.Expression:
    return exp.Not(this=exp.paren(condition, copy=False))


def _same_group(keys: tuple[str, ...], left: str, right: str) -> exp.Expression:
    return and_all(null_safe_eq(col(k, left), col(k, right)) for k in keys) or exp.true()


def _values(node: Aggregate, call: AggCall, changes: exp.Query) -> exp.Select:
    """Per group and non-NULL value of the call's argument: its weight in the change."""
    weight = sum_of(col(WEIGHT))
    return (
        exp.select(*(col(k) for k in node.keys), alias(col(call.arg), "v"), alias(weight, "w"))
        .from_(subquery(changes.copy(), "c"))
        .where(_not(exp.Is(this=col(call.arg), expression=exp.Null())))
        .group_by(*(col(k) for k in node.keys), col(call.arg))
        .having(exp.NEQ(this=weight.copy(), expression=lit(0)))
    )


def _inserted_best(node: Aggregate, call: AggCall, changes: exp.Query) -> exp.Select:
    """Per group: the extreme value the change adds rows of, and how many (``top.v``, ``top.w``)."""
    pair = exp.func("named_struct", lit("v"), col("v"), lit("w"), col("w"))
    select = exp.select(*(col(k) for k in node.keys), alias(_best(call, pair), "top")).from_(
        subquery(_values(node, call, changes), "i")
    )
    select = select.where(exp.GT(this=col("w"), expression=lit(0)))
    return select.group_by(*(col(k) for k in node.keys)) if node.keys else select


def rescanned(
    node: Aggregate, change_view: str, columns: tuple[str, ...], contents: exp.Query
) -> exp.Select:
    """The change (``columns``, read from ``change_view``) with the extremes of its lost
    groups recomputed from ``contents`` (the aggregate's input at the new versions)
    restricted to those groups; every other group as it is."""
    keys = node.keys
    restricted = exp.select(exp.Star()).from_(subquery(contents, "n"))
    if keys:
        lost_keys = exp.select(*(col(k) for k in keys)).from_(table(change_view)).where(col(LOST))
        on = and_all(null_safe_eq(col(k, "n"), col(k, "l")) for k in keys)
        restricted = restricted.join(subquery(lost_keys, "l"), on=on, join_type="LEFT SEMI")
    rescan = exp.select(*(col(k) for k in keys), *initial_outputs(node)).from_(
        subquery(with_extremes(node, restricted), "r")
    )
    if keys:
        rescan = rescan.group_by(*(col(k) for k in keys))
    replaced = set(state_columns(node))
    picks = []
    for name in columns:
        if name in replaced:
            picks.append(
                alias(exp.If(this=col(LOST, "c"), true=col(name, "r"), false=col(name, "c")), name)
            )
        else:
            picks.append(alias(exp.false(), LOST) if name == LOST else col(name, "c"))
    return (
        exp.select(*picks)
        .from_(table(change_view, "c"))
        .join(subquery(rescan, "r"), on=_same_group(keys, "c", "r"), join_type="LEFT")
    )
