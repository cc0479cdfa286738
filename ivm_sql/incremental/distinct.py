"""DISTINCT: an element's output changes only when its accumulated weight crosses zero.

DBSP (Prop. 4.7, distinct_incremental): keep the integral of the input (each row with its
accumulated weight, rows at zero removed; the same table and MERGE as a bag) and read it
with weight 1. In the table's change data feed a row appears (insert) or disappears
(delete) exactly when its weight crosses zero; a weight going from 2 to 3 shows as a pre-
and a post-image that cancel when the reader consolidates.

The table of a view that no other view reads may keep that integral as a trace of appended
batches instead, as ``incremental.bag`` keeps a bag: the view users query sums each row's
weights and shows the rows whose sum is above zero (``summed``). A view above could not take
such a table's change data feed as its change (a batch's rows are weight deltas, not rows
that appear or disappear), so a view that another reads keeps the MERGE.
"""

from __future__ import annotations

from sqlglot import exp

from ivm_sql.algebra.nodes import Node, Scan
from ivm_sql.incremental.bag import change, initial, merge
from ivm_sql.sqlbuild import WEIGHT, col, lit, sum_of, table

__all__ = ["change", "initial", "merge", "reader", "summed", "trace_reader"]


def reader(table_name: str, input: Node) -> Scan:
    return Scan(table_name, input.columns)


def summed(table_name: str, columns: tuple[str, ...]) -> exp.Select:
    """Each row of a trace of weight deltas once, while its summed weight is above zero
    (DBSP: distinct keeps the rows of positive weight)."""
    select = exp.select(*(col(c) for c in columns)).from_(table(table_name))
    if columns:
        select = select.group_by(*(col(c) for c in columns))
    return select.having(exp.GT(this=sum_of(col(WEIGHT)), expression=lit(0)))


def trace_reader(table_name: str, input: Node) -> Scan:
    """The rows of a trace: ``reader``'s, over the weights summed."""
    return Scan(table_name, input.columns, state=summed(table_name, input.columns))
