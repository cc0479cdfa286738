"""A stage's change computed once into memory, with the rows that ask for a second look.

Some incremental rules are exact from the change alone except in a case the change itself
reveals: a MIN or MAX that lost its last row (``runtime.extremes``), a top-k whose
candidates ran out (``runtime.top_k``). Their change flags that case; it is computed and
cached in one job that also counts the flags, and only when one is set does a second query
read the stage's input.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from pyspark import StorageLevel
from sqlglot import exp

from ivm_sql.sqlbuild import col, table, to_sql


@dataclass(frozen=True)
class Settled:
    """The change to merge, how many parts of it were read again from the input, and its
    row count when it is already in memory (None: the second query is still to be
    computed)."""

    query: exp.Query
    reread: int
    rows: int | None


@contextmanager
def computed(spark, change: exp.Query, flag: str, view: str) -> Iterator[tuple[int, int]]:
    """Inside the block, ``change`` is in memory as the temporary view ``view``; yields its
    row count and how many of its rows have ``flag`` set."""
    frame = spark.sql(to_sql(change, pretty=False)).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        frame.createOrReplaceTempView(view)
        totals = exp.select(exp.Count(this=exp.Star()), exp.func("count_if", col(flag))).from_(
            table(view)
        )
        rows, flagged = spark.sql(
            to_sql(totals, pretty=False)
        ).first()  # one job computes, caches and counts it
        yield rows, flagged
    finally:
        spark.catalog.dropTempView(view)
        frame.unpersist()


def cached(view: str, rows: int) -> Settled:
    """The change as computed, read from memory."""
    return Settled(exp.select(exp.Star()).from_(table(view)), 0, rows)
