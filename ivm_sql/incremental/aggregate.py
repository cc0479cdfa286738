"""GROUP BY with COUNT, SUM and AVG (and MIN and MAX): updated from the change alone.

DBSP (Section 4.2, incremental aggregation of a linear aggregate): COUNT(*), COUNT(x) and
SUM(x) are linear in the input's weights, so the change of a group's result is the same
aggregate over the group's change. The state table keeps, per group, the row count and per
aggregate its non-NULL count and weighted sum; AVG is SUM / COUNT. A group is deleted when
its row count reaches zero; a global aggregate (no GROUP BY) keeps its single row always,
so COUNT over no rows is 0 and SUM over no rows is NULL, exactly as SQL says. MIN and MAX
keep their extreme and its count beside these (``incremental.extremes``).

Since the state is linear in the input, the table of a view that no other view reads may
keep it as a trace instead, as ``incremental.bag`` keeps a bag (DBSP's integral as a trace
of batches): each refresh appends its per-group state deltas as one batch (``append``),
the view users query sums them per group as it reads them (``summed``), and now and then
the trace is rewritten summed (``rewrite``). An append costs a third of a MERGE. A view
above could not take the trace's change data feed as its change, since its rows are state
deltas, not result rows, so a view that another reads keeps the MERGE.
"""

from __future__ import annotations

from dataclasses import replace

from sqlglot import exp

from ivm_sql.algebra.nodes import Aggregate, Scan
from ivm_sql.incremental import extremes
from ivm_sql.sqlbuild import (
    WEIGHT,
    alias,
    coalesce_zero,
    col,
    insert_columns,
    lit,
    null_safe_eq,
    stored_and_change,
    subquery,
    sum_of,
    table,
)

COUNT = "__ivm_count"
TARGET, CHANGE = "t", "s"


def nonnull_count(j: int) -> str:
    return f"__ivm_n{j}"


def weighted_sum(j: int) -> str:
    return f"__ivm_s{j}"


def partials(node: Aggregate) -> list[tuple[str, exp.Expression]]:
    """(state column, its aggregate over a weighted Z-set) for the row count and every call."""
    weight = col(WEIGHT)
    result = [(COUNT, sum_of(weight))]
    for j, call in enumerate(node.aggs):
        if call.func == "count_star" or call.func in extremes.EXTREMES:  # the row count; kept apart
            continue
        arg = col(call.arg)
        counted = exp.If(
            this=exp.Is(this=arg, expression=exp.Null()), true=lit(0), false=weight.copy()
        )
        result.append((nonnull_count(j), sum_of(counted)))
        if call.func in ("sum", "avg"):
            result.append(
                (weighted_sum(j), sum_of(exp.Mul(this=arg.copy(), expression=weight.copy())))
            )
    return result


def _aggregate(node: Aggregate, rows: exp.Query, drop_zero: bool) -> exp.Select:
    outputs = [col(k) for k in node.keys]
    outputs += [alias(coalesce_zero(expression), name) for name, expression in partials(node)]
    select = exp.select(*outputs).from_(subquery(rows, "d"))
    if node.keys:
        select = select.group_by(*(col(k) for k in node.keys))
    if drop_zero:  # a group (or the global row) whose change sums to nothing needs no update
        select = select.having(
            exp.or_(*(exp.NEQ(this=coalesce_zero(e), expression=lit(0)) for _, e in partials(node)))
        )
    return select


def initial(node: Aggregate, contents: exp.Query) -> exp.Select:
    if not extremes.calls(node):
        return _aggregate(node, contents, drop_zero=False)
    select = _aggregate(node, extremes.with_extremes(node, contents), drop_zero=False)
    return select.select(*extremes.initial_outputs(node))


def change(node: Aggregate, changes: exp.Query, table_name: str) -> exp.Select:
    """The change of each touched group's state; with MIN or MAX, also their new values (read
    against the stored ones) and whether a group must be rescanned (``extremes.LOST``)."""
    if not extremes.calls(node):
        return _aggregate(node, changes, drop_zero=True)
    return extremes.change(
        node, table_name, _aggregate(node, changes, drop_zero=False), changes, COUNT
    )


def state_columns(node: Aggregate) -> tuple[str, ...]:
    """The group keys and the partials: a trace's columns (its aggregate has no MIN or MAX)."""
    return (*node.keys, *(name for name, _ in partials(node)))


def change_columns(node: Aggregate) -> tuple[str, ...]:
    """The columns of ``change``'s rows."""
    columns = state_columns(node)
    return (
        (*columns, *extremes.state_columns(node), extremes.LOST)
        if extremes.calls(node)
        else columns
    )


def merge(table_name: str, node: Aggregate, change_query: exp.Query) -> exp.Merge:
    """Add each group's change to its state; delete a group whose row count reaches zero,
    and insert a new group only with rows."""
    on = (
        exp.and_(*(null_safe_eq(col(k, TARGET), col(k, CHANGE)) for k in node.keys))
        if node.keys
        else exp.true()
    )
    state = [name for name, _ in partials(node)]
    replaced = extremes.state_columns(node)  # the change holds their new values
    whens = []
    if node.keys:
        emptied = exp.EQ(
            this=exp.Add(this=col(COUNT, TARGET), expression=col(COUNT, CHANGE)), expression=lit(0)
        )
        whens.append(exp.When(matched=True, condition=emptied, then=exp.var("DELETE")))
    updates = [
        exp.EQ(
            this=col(name, TARGET),
            expression=exp.Add(this=col(name, TARGET), expression=col(name, CHANGE)),
        )
        for name in state
    ]
    updates += [exp.EQ(this=col(name, TARGET), expression=col(name, CHANGE)) for name in replaced]
    whens.append(exp.When(matched=True, then=exp.Update(expressions=updates)))
    columns = [*node.keys, *state, *replaced]
    # DBSP: a group exists while its weight is positive; a new group whose change sums to no
    # rows (born and emptied between two refreshes) is never written
    whens.append(
        exp.When(
            matched=False,
            condition=exp.GT(this=col(COUNT, CHANGE), expression=lit(0)) if node.keys else None,
            then=exp.Insert(
                this=exp.Tuple(expressions=[col(c) for c in columns]),
                expression=exp.Tuple(expressions=[col(c, CHANGE) for c in columns]),
            ),
        )
    )
    return exp.Merge(
        this=table(table_name, TARGET),
        using=subquery(change_query, CHANGE),
        on=on,
        whens=exp.Whens(expressions=whens),
    )


def summed(node: Aggregate, trace: exp.Expression) -> exp.Select:
    """Each group's state from ``trace`` (a table or a subquery of state deltas): its
    partials summed, the groups whose row count is positive (DBSP: a group exists while its
    weight is positive; one that came and went sums to a count of zero). A global aggregate
    keeps its one row: the trace always holds the first load's."""
    select = exp.select(
        *(col(k) for k in node.keys),
        *(alias(sum_of(col(name)), name) for name, _ in partials(node)),
    ).from_(trace)
    if not node.keys:
        return select
    return select.group_by(*(col(k) for k in node.keys)).having(
        exp.GT(this=sum_of(col(COUNT)), expression=lit(0))
    )


def append(table_name: str, node: Aggregate, change_query: exp.Query) -> exp.Insert:
    """INSERT each touched group's state delta as one more batch of the trace."""
    return insert_columns(table_name, state_columns(node), change_query)


def rewrite(table_name: str, node: Aggregate, change_query: exp.Query) -> exp.Insert:
    """INSERT OVERWRITE the trace with its batches and the change summed: each group once."""
    rows = stored_and_change(table_name, state_columns(node), change_query)
    return exp.Insert(
        this=table(table_name),
        expression=summed(node, subquery(rows, "d")),
        overwrite=True,
    )


def trace_reader(table_name: str, node: Aggregate) -> Scan:
    """The groups' results read from a trace: ``reader``'s, over the state summed."""
    return replace(reader(table_name, node), state=summed(node, table(table_name)))


def reader(table_name: str, node: Aggregate) -> Scan:
    """Each group once (weight 1), its results computed from the state columns."""
    exprs: list[exp.Expression] = [col(k) for k in node.keys]
    for j, call in enumerate(node.aggs):
        count = col(COUNT if call.func == "count_star" else nonnull_count(j))
        if call.func in extremes.EXTREMES:
            exprs.append(col(extremes.extreme(j)))
            continue
        if call.func in ("count_star", "count"):
            exprs.append(count)
            continue
        value = col(weighted_sum(j))
        if call.func == "avg":
            value = exp.Div(this=value, expression=count.copy())
        # SQL: SUM and AVG over no non-NULL values are NULL.
        exprs.append(exp.Case().when(exp.GT(this=count.copy(), expression=lit(0)), value))
    return Scan(table_name, node.columns, exprs=tuple(exprs))
