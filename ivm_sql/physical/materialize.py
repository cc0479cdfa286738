"""A stage's consolidated change, computed once, before its MERGE.

The change of a stage reads the change data feed and old versions of joined tables.
Computing it once, before the MERGE, gives its row count for free, so an empty change
(churn that cancels out, a change no row of the view depends on) skips the MERGE entirely.
There are two ways to keep it, chosen by the size the change is expected to have:

- ``LOCAL``, for a change of few rows: collected as rows into the driver's JVM, in one job
  that also counts them, and read by the MERGE as a local relation, the rows in its plan.
  Delta copies a MERGE source it cannot prove unchanging before it reads it twice
  (``merge.materializeSource``, a job of its own); rows in a plan cannot change, so the
  copy is turned off for that MERGE alone. Rows never cross into Python: they stay Spark
  rows, every type as it is.
- ``CACHED``, for a change that may be large: kept in executor memory (spilling to disk)
  and counted, one job. Delta copies the cached source again before its MERGE (it refuses a
  cached source it has not copied); a copy from memory.

A change expected small that turns out to hold more than ``LOCAL_MOST`` rows (a join term
that fans a few changed rows out to many) is kept ``CACHED`` instead: it is then computed
twice, which costs less than a huge plan. Over Spark Connect every change is ``CACHED``: the
rows would have to cross into Python and back.

A change that its stage's write appends as one batch of a trace, and that no stage above
reads in the same refresh, is not kept at all (``INLINE``): the INSERT computes it, one
statement where keeping it took two (a job that counts or collects it, then the append of
what was kept). Its count then comes from the commit's metrics; an empty one appends no row
in a commit that still carries the stage's record, as ``storage.delta_log.record_only``'s
would.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from pyspark import StorageLevel
from pyspark.sql import DataFrame
from sqlglot import exp

from ivm_sql.physical.execution import session_settings
from ivm_sql.sqlbuild import table, to_sql

CHANGE_VIEW = "__ivm_change"
CACHED, LOCAL, INLINE = "cached", "local", "inline"
# The most rows a change is kept as local rows: their plan is sent with each task of the MERGE.
LOCAL_MOST = 20_000
# The MERGE of local rows reads its source as it is (``LOCAL``): Delta's copy is off.
LOCAL_MERGE_SETTINGS = {"spark.databricks.delta.merge.materializeSource": "none"}


@dataclass(frozen=True)
class Change:
    """A materialized change: the query that reads it, how many rows it has, and the
    settings a statement reading it runs with."""

    query: exp.Query
    rows: int | None  # None: not computed (``INLINE``), the statement that reads it computes it
    settings: tuple[tuple[str, str], ...] = ()
    # ``LOCAL``: the rows themselves, a DataFrame over rows in the driver's JVM, which stays
    # readable after the block (``SourceChanges.offer`` hands an appended batch up with it)
    frame: DataFrame | None = None

    @contextmanager
    def reading(self, spark) -> Iterator[None]:
        """Statements run inside read the change with its settings."""
        with session_settings(spark, dict(self.settings)):
            yield


@contextmanager
def materialized(
    spark,
    change: exp.Query,
    rows: int | None = None,
    way: str = CACHED,
    settings: tuple[tuple[str, str], ...] = (),
) -> Iterator[Change]:
    """Compute ``change`` once, ``way``; inside the block it is a temporary view.
    ``rows``: its row count, when it already reads from memory only (then it is as it is,
    read with ``settings``)."""
    if rows is not None or way == INLINE:
        yield Change(change, rows, settings)
        return
    frame = spark.sql(to_sql(change, pretty=False))
    local = kept_local(spark, frame) if way == LOCAL else None
    if local is not None:
        kept, rows = local
        kept.createOrReplaceTempView(CHANGE_VIEW)
        try:
            yield Change(_view(), rows, tuple(LOCAL_MERGE_SETTINGS.items()), kept)
        finally:
            spark.catalog.dropTempView(CHANGE_VIEW)
        return
    frame = frame.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        rows = frame.count()  # computes and caches it in one job
        frame.createOrReplaceTempView(CHANGE_VIEW)
        try:
            yield Change(_view(), rows)
        finally:
            spark.catalog.dropTempView(CHANGE_VIEW)
    finally:
        frame.unpersist()


def way_for(changed_rows: int, appended_unread: bool = False) -> str:
    """How to keep the change of a stage whose inputs changed by ``changed_rows`` rows: a
    stage's change is about as large as its inputs' (smaller after an aggregate).
    ``appended_unread``: its write appends it as a batch that no stage reads next."""
    if appended_unread:
        return INLINE
    return LOCAL if changed_rows <= LOCAL_MOST else CACHED


def kept_local(spark, frame: DataFrame) -> tuple[DataFrame, int] | None:
    """The frame's rows as a local relation (a Dataset of the JVM) and their count, in one
    job; None when it holds over LOCAL_MOST rows, or over Spark Connect (the rows would
    cross into Python and back).

    Rows in a plan are also out of reach of Spark's cache manager: a Delta MERGE, UPDATE or
    DELETE re-plans every cached DataFrame that reads its target (``recacheByPlan``), one
    Delta file listing per scan of that plan, where a local relation has none."""
    if not hasattr(spark, "_jsparkSession"):
        return None
    # the first job of a LIMIT reads every partition, not one first and then more
    with session_settings(spark, {"spark.sql.limit.initialNumPartitions": str(2**20)}):
        rows = frame._jdf.limit(LOCAL_MOST + 1).collectAsList()
    if rows.size() > LOCAL_MOST:
        return None
    kept = spark._jsparkSession.createDataFrame(rows, frame._jdf.schema())
    return DataFrame(kept, frame.sparkSession), rows.size()


def _view() -> exp.Select:
    return exp.select(exp.Star()).from_(table(CHANGE_VIEW))


def describe() -> str:
    return (
        "the change is computed once before its MERGE: a small one collected as rows the MERGE reads "
        f"from its plan (up to {LOCAL_MOST:,} rows), a larger one cached in memory; a batch "
        "appended to a trace that no stage above reads in the same refresh is computed by its INSERT"
    )
