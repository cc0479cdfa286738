"""Small tables that several stages of a refresh read, read once and kept in memory.

Open-source Delta plans every scan of a statement with a Spark job of its own: the files of
the table version, listed from its log's state (``PrepareDeltaScan``, ``filesForScan``), one
after the other before the statement's first job of its own. A refresh reads its base tables
at the versions it pinned as it started, and a version never changes, yet each stage's
change reads them anew: at TPC-H SF 1, ``nation``, ``region``, ``supplier`` and ``part``
were listed 23 times in a round by the views' changes, 7.3 s of jobs (2026-12-06).

So a base table of fewer than ``KEPT_BELOW_BYTES`` that at least ``READERS`` stages of the
refresh will write from is kept like a change data feed (``physical.changes``): its pinned
version becomes a temporary view of its rows, read on first use and kept in executor memory
until the refresh ends, and each change query of the refresh reads that view instead. Spark
puts the kept rows in place of the table before Delta plans a scan, so only the first read
lists files. The rows are the same version's, so no result changes. Larger tables stay
Delta's: a change bounds them by its keys (``physical.bounds``), which memory would not
serve, and they would crowd it. A table only one stage reads would pay for keeping its rows
and gain nothing.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Iterable

from pyspark import StorageLevel
from sqlglot import exp

from ivm_sql.physical.bounds import BOUNDED_FROM_BYTES
from ivm_sql.physical.changes import GLOBAL_TEMP
from ivm_sql.physical.execution import scan_nodes
from ivm_sql.sqlbuild import INTERNAL_PREFIX, ident, lit, table_at, to_sql

# Below it a change reads a table whole (``bounds.BOUNDED_FROM_BYTES``): kept, it is read once.
KEPT_BELOW_BYTES = BOUNDED_FROM_BYTES
READERS = 2  # stages of the refresh that read a table version for it to be kept
KEPT_PREFIX = f"{INTERNAL_PREFIX}_kept"
_view_numbers = itertools.count()  # unique in the process: refreshes in two threads never share


def worth_keeping(
    readers: Iterable[Iterable[str]],
    pinned: dict[str, int],
    table_bytes: Callable[[str, int], int | None],
) -> dict[str, int]:
    """The base tables (with their pinned versions) to keep: read by at least READERS of
    ``readers`` (each stage's sources), under KEPT_BELOW_BYTES at the pinned version."""
    counts: dict[str, int] = {}
    for sources in readers:
        for table in set(sources) & pinned.keys():
            counts[table] = counts.get(table, 0) + 1
    kept = {}
    for table, count in counts.items():
        if count >= READERS:
            size = table_bytes(table, pinned[table])
            if size is not None and size < KEPT_BELOW_BYTES:
                kept[table] = pinned[table]
    return kept


class KeptTables:
    """The table versions of one refresh kept in memory (``close`` releases them)."""

    def __init__(self, spark, versions: dict[str, int]):
        self.spark = spark
        self.versions = versions  # table -> the version kept
        self._views: dict[str, str] = {}  # table -> its view, once read
        self._frames: list = []
        self._lock = threading.Lock()  # worker threads ask for the same table: kept once

    def rewrite(self, query: exp.Query) -> exp.Query:
        """``query`` (copied) with each read of a kept table version replaced by its view,
        under the read's alias, or the table's name where it has none (the columns of ivm's
        queries name their table by one of them)."""
        if not self.versions:
            return query
        query = query.copy()
        for node, (name, version) in scan_nodes(query):
            if self.versions.get(name) == version:
                node.replace(
                    exp.Table(
                        this=ident(self._view(name)),
                        db=ident(GLOBAL_TEMP),
                        alias=node.args.get("alias") or exp.TableAlias(this=ident(node.name)),
                    )
                )
        return query

    def _view(self, name: str) -> str:
        with self._lock:
            if name not in self._views:
                view = f"{KEPT_PREFIX}{next(_view_numbers)}"
                rows = exp.select(exp.Star()).from_(table_at(name, lit(self.versions[name])))
                frame = self.spark.sql(to_sql(rows, pretty=False))
                frame.persist(StorageLevel.MEMORY_AND_DISK).createOrReplaceGlobalTempView(view)
                self._frames.append(frame)
                self._views[name] = view
            return self._views[name]

    def close(self) -> None:
        for view in self._views.values():
            self.spark.catalog.dropGlobalTempView(view)
        for frame in self._frames:
            frame.unpersist()
        self._views.clear()
        self._frames.clear()


def describe() -> str:
    return (
        f"a base table under {KEPT_BELOW_BYTES // 2**20} MiB that {READERS} or more stages of a refresh "
        "read is read once at its pinned version and kept in memory for all of them"
    )
