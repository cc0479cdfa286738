"""A stage's change computed once into memory, with the rows that ask for a second look.

Some incremental rules are exact from the change alone except in a case the change itself
reveals: a MIN or MAX that lost its last row (``runtime.extremes``), a top-k whose
candidates ran out (``runtime.top_k``). Their change flags that case; it is computed once
and its flags counted, and only when one is set does a second query read the stage's input.

A change expected small is kept as rows in the driver's JVM (``materialize.kept_local``), as
a stage's change is before its MERGE: such a change reads the stage's own table (a top-k's
candidates), and a cached one would be planned again, Delta's file listings and all, by the
MERGE into that table (about 0.5 s of a TPC-H top-k's 1.5 s MERGE at SF 1). A larger one is
cached in executor memory.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from pyspark import StorageLevel
from sqlglot import exp

from ivm_sql.physical.materialize import LOCAL_MERGE_SETTINGS, kept_local
from ivm_sql.sqlbuild import col, table, to_sql


@dataclass(frozen=True)
class Settled:
    """The change to merge, how many parts of it were read again from the input, and its
    row count when it is already in memory (None: the second query is still to be
    computed)."""

    query: exp.Query
    reread: int
    rows: int | None
    settings: tuple[tuple[str, str], ...] = ()  # a statement reading ``query`` runs with them


@dataclass(frozen=True)
class Computed:
    """A change in memory as a temporary view: its rows, how many are flagged, and the
    settings a MERGE reading it runs with."""

    view: str
    rows: int
    flagged: int
    settings: tuple[tuple[str, str], ...]

    def as_settled(self) -> Settled:
        """The change as computed, read from memory."""
        return Settled(exp.select(exp.Star()).from_(table(self.view)), 0, self.rows, self.settings)


@contextmanager
def computed(spark, change: exp.Query, flag: str, view: str, local: bool) -> Iterator[Computed]:
    """Inside the block, ``change`` is in memory as the temporary view ``view``, as local
    rows when ``local`` and it holds few enough, else cached."""
    frame = spark.sql(to_sql(change, pretty=False))
    kept = kept_local(spark, frame) if local else None
    settings = tuple(LOCAL_MERGE_SETTINGS.items()) if kept is not None else ()
    frame = kept[0] if kept is not None else frame.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        frame.createOrReplaceTempView(view)
        totals = exp.select(exp.Count(this=exp.Star()), exp.func("count_if", col(flag))).from_(
            table(view)
        )
        # cached: one job computes, caches and counts it; local: a job over rows in memory
        rows, flagged = spark.sql(to_sql(totals, pretty=False)).first()
        yield Computed(view, rows, flagged, settings)
    finally:
        spark.catalog.dropTempView(view)
        if kept is None:
            frame.unpersist()
