"""Each source's change data feed is read once per refresh, however many stages read it.

A refresh's stages read the same changes over and over: every stage over ``orders`` reads
``table_changes('orders', v0 + 1, v1)``, a join stage reads it in several terms, and a
stage that recomputes touched keys reads its inputs' changes once for the keys and again
for the rows. Each such read is planned by Delta anew (the commits of the range listed and
read, the change files found) before a row is read. Here each distinct read (table and
version range) becomes one temporary view of the change, computed on first use and kept in
executor memory until the refresh ends; every query of the refresh reads that view instead.
The rows are the same, so no result changes: this only decides how often they are fetched.

The views are global temporary views, read as ``global_temp.<name>``: the worker threads of
a refresh (``runtime.workers``) each have a session of their own, and all of them read the
same kept changes.

A stage that appends its change as one batch (a bag's trace, ``physical.batches``) hands
those rows to the stages above, which read that commit's change data feed next
(``offer``): the feed of an append is its rows, each an insert, so the stage above computes
its change from rows already in memory instead of having Delta plan and read the feed back
(about 0.3 s on the demo's path). That is DBSP's chain rule, (Q2 ∘ Q1)^Δ = Q2^Δ ∘ Q1^Δ
(Proposition 3.2): the change a stage writes is the change the stage above reads.
"""

from __future__ import annotations

import itertools
import threading

from pyspark import StorageLevel
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from sqlglot import exp

from ivm_sql.sqlbuild import INTERNAL_PREFIX, ident, lit, to_sql
from ivm_sql.storage.delta_log import Commit

CHANGE_FUNCTION = "table_changes"
KEPT_PREFIX = f"{INTERNAL_PREFIX}_changes"  # the temporary views the reads are kept in
GLOBAL_TEMP = "global_temp"  # the database of global temporary views (spark.sql.globalTempDatabase)
# unique in the process, so refreshes in two threads never share a name
_view_numbers = itertools.count()


class SourceChanges:
    """The change data feed reads of one refresh, each kept once (``close`` releases them)."""

    def __init__(self, spark):
        self.spark = spark
        self._views: dict[tuple[str, ...], str] = {}  # (table, first, last) as SQL -> its view
        self._frames: list = []
        self._lock = threading.Lock()  # worker threads ask for the same read: it is kept once

    def rewrite(self, query: exp.Query) -> exp.Query:
        """``query`` (copied) with each ``table_changes(...)`` read replaced by its kept view."""

        def swap(node: exp.Expression) -> exp.Expression:
            if (
                isinstance(node, exp.Table)
                and isinstance(node.this, exp.Anonymous)
                and is_change_read(node)
            ):
                return exp.Table(
                    this=ident(self._view(node.this)),
                    db=ident(GLOBAL_TEMP),
                    alias=node.args.get("alias"),
                )
            return node

        return query.transform(swap)

    def offer(self, table: str, commit: Commit, rows: DataFrame) -> None:
        """Keep ``rows``, which ``commit`` appended to ``table``, as that commit's change data
        feed: a later read of ``table_changes(table, v, v)`` in this refresh reads them. The
        columns take the table's types, as the append stored them; rows whose columns are
        not the table's are not kept (that read then asks Delta)."""
        types = {field.name: field.dataType for field in rows.sparkSession.table(table).schema}
        if sorted(types) != sorted(rows.columns):  # not the table's rows: its feed is read
            return
        feed = rows.select(
            *(F.col(_quoted(name)).cast(types[name]).alias(name) for name in types),
            F.lit("insert").alias("_change_type"),
            F.lit(commit.version).cast("bigint").alias("_commit_version"),
            F.timestamp_millis(F.lit(commit.timestamp)).alias("_commit_timestamp"),
        )
        version = to_sql(lit(commit.version), pretty=False)
        key = (to_sql(lit(table), pretty=False), version, version)
        with self._lock:
            name = f"{KEPT_PREFIX}{next(_view_numbers)}"
            feed.createOrReplaceGlobalTempView(name)
            self._views[key] = name

    def _view(self, read: exp.Anonymous) -> str:
        key = tuple(to_sql(argument, pretty=False) for argument in read.expressions)
        with self._lock:
            if key not in self._views:
                self._views[key] = self._read(read)
            return self._views[key]

    def _read(self, read: exp.Anonymous) -> str:
        """The view that keeps Delta's change data feed ``read`` in memory, read on first use."""
        name = f"{KEPT_PREFIX}{next(_view_numbers)}"
        query = exp.select(exp.Star()).from_(exp.Table(this=read.copy()))
        frame = self.spark.sql(to_sql(query, pretty=False)).persist(StorageLevel.MEMORY_AND_DISK)
        frame.createOrReplaceGlobalTempView(name)
        self._frames.append(frame)
        return name

    def close(self) -> None:
        for name in self._views.values():
            self.spark.catalog.dropGlobalTempView(name)
        for frame in self._frames:
            frame.unpersist()
        self._views.clear()
        self._frames.clear()


def _quoted(name: str) -> str:
    """A column name as Spark's DataFrame API reads it whatever it holds (dots, spaces)."""
    return "`" + name.replace("`", "``") + "`"


def is_change_read(node: exp.Table) -> bool:
    """Whether a table read is a change data feed: ``table_changes(...)``, or the view a
    refresh keeps it in."""
    if isinstance(node.this, exp.Anonymous):
        return node.this.name.lower() == CHANGE_FUNCTION
    return node.name.startswith(KEPT_PREFIX) and node.db == GLOBAL_TEMP


def describe() -> str:
    return (
        "each source's change data feed is read once per refresh and kept in memory for every stage "
        "that reads it; a batch a bag view appends is handed to the views above as that feed, not read back"
    )
