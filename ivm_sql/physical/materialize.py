"""A stage's consolidated change, computed once and kept in executor memory.

The change of a stage reads the change data feed and old versions of joined tables.
Computing it once, before the MERGE:

- the MERGE's own copy of its source (Delta materializes a source it cannot prove
  deterministic, and refuses a cached one without that copy) is a copy from memory;
- its row count comes for free, so an empty change (churn that cancels out, a change no
  row of the view depends on) skips the MERGE entirely.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from pyspark import StorageLevel
from sqlglot import exp

from ivm_sql.sqlbuild import table, to_sql

CHANGE_VIEW = "__ivm_change"


@dataclass(frozen=True)
class Change:
    """A materialized change: the query that reads it, and how many rows it has."""

    query: exp.Select
    rows: int


@contextmanager
def materialized(spark, change: exp.Query, rows: int | None = None) -> Iterator[Change]:
    """Compute ``change`` once; inside the block it is a temporary view read from memory.
    ``rows``: its row count, when it already reads from memory only (then it is as it is)."""
    if rows is not None:
        yield Change(change, rows)
        return
    frame = spark.sql(to_sql(change, pretty=False)).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        rows = frame.count()  # computes and caches it in one job
        frame.createOrReplaceTempView(CHANGE_VIEW)
        try:
            yield Change(exp.select(exp.Star()).from_(table(CHANGE_VIEW)), rows)
        finally:
            spark.catalog.dropTempView(CHANGE_VIEW)
    finally:
        frame.unpersist()


def describe() -> str:
    return (
        "the change is computed once and cached before its MERGE; "
        "an empty change skips the MERGE and only records the new versions"
    )
