"""Rescans the groups whose MIN or MAX lost its last row (``incremental.extremes``).

The change of an aggregate with MIN or MAX is computed once and kept in memory; only if
it flags a lost extreme does a second query read the aggregate's input, restricted to the
flagged groups. So inserts, and deletes of rows other than the extreme, cost only the
change.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from pyspark import StorageLevel
from sqlglot import exp

from ivm_sql.algebra.nodes import Aggregate
from ivm_sql.incremental import aggregate, extremes, snapshot
from ivm_sql.incremental.versions import Pins
from ivm_sql.sqlbuild import col, table, to_sql

FLAGGED_VIEW = "__ivm_extremes_change"


@dataclass(frozen=True)
class Settled:
    """The change to merge, how many groups it rescanned, and its row count when it is
    already in memory (None: the rescan's query is still to be computed)."""

    query: exp.Query
    rescanned: int
    rows: int | None


@contextmanager
def settled(spark, node: Aggregate, change: exp.Query, pins: Pins) -> Iterator[Settled]:
    """``change`` with every lost extreme recomputed; inside the block, a query over memory.
    ``pins``: the new versions of the aggregate's input."""
    frame = spark.sql(to_sql(change, pretty=False)).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        frame.createOrReplaceTempView(FLAGGED_VIEW)
        totals = exp.select(
            exp.Count(this=exp.Star()), exp.func("count_if", col(extremes.LOST))
        ).from_(table(FLAGGED_VIEW))
        rows, lost = spark.sql(
            to_sql(totals, pretty=False)
        ).first()  # one job computes, caches and counts it
        if lost:
            contents = snapshot(node.input, pins, "new")
            yield Settled(
                extremes.rescanned(node, FLAGGED_VIEW, aggregate.change_columns(node), contents),
                lost,
                None,
            )
        else:
            yield Settled(exp.select(exp.Star()).from_(table(FLAGGED_VIEW)), 0, rows)
    finally:
        spark.catalog.dropTempView(FLAGGED_VIEW)
        frame.unpersist()
