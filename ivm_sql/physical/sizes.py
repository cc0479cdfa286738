"""How big the tables a refresh reads are: what its physical decisions weigh.

Bytes and each file's statistics come from the checksum file Delta writes beside each
commit (``storage.delta_log``), read without a Spark job, and so do rows, from each file's
``numRecords``; only when that file says nothing does a ``COUNT(*)`` ask Spark (which answers
it from the same statistics, after a snapshot of the table: seconds on a busy machine). Each
answer is kept for the rest of the refresh.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlglot import exp

from ivm_sql.physical import bounds, execution
from ivm_sql.physical.cost import scanned_bytes
from ivm_sql.sqlbuild import lit, table_at, to_sql


class TableSizes:
    """Sizes of table versions, for one refresh. ``run(action, table)`` runs ``action`` and
    turns a Spark error into the refresh's error about ``table``."""

    def __init__(self, spark, log, run: Callable[[Callable[[], Any], str], Any]):
        self.spark = spark
        self.log = log
        self.run = run
        self.row_counts: dict[tuple[str, int], int | None] = {}

    def bytes(self, table: str, version: int) -> int | None:
        """Bytes of a table version's files; None when its checksum file does not say."""
        return self.run(lambda: self.log.size_bytes(table, version), table)

    def files(self, table: str, version: int) -> list[tuple[int, dict]] | None:
        """Each file's size and statistics; None when its checksum file does not list them."""
        return self.run(lambda: self.log.file_stats(table, version), table)

    def scanned_bytes(self, query: exp.Query, bounded: list[bounds.BoundRead] = ()) -> int | None:
        """``cost.scanned_bytes``: what ``query`` reads, a bounded table by the files it opens."""
        return scanned_bytes(query, list(bounded), self.bytes, self.files)

    def read_bytes(self, query: exp.Query) -> int | None:
        """Bytes of the table versions ``query`` scans whole; None when one's size is unknown."""
        sizes = [self.bytes(t, v) for t, v in execution.scanned_versions(query)]
        return None if None in sizes else sum(sizes)

    def is_small(
        self, query: exp.Query, recompute: bool = False, also: list[tuple[str, int]] = ()
    ) -> bool:
        """Whether the Delta data a statement reads is small enough for small-data execution
        (``physical.execution``): the table versions ``query`` scans whole and the tables in
        ``also`` (its change data feed reads are as small as the stage's change, which the
        caller checks)."""
        reads = execution.scanned_versions(query)
        return execution.is_small([self.bytes(t, v) for t, v in [*reads, *also]], recompute)

    def rows(self, table: str, version: int) -> int:
        """Rows of a table version."""
        if (table, version) not in self.row_counts:
            self.row_counts[(table, version)] = self.run(
                lambda: self.log.row_count(table, version), table
            )
        if self.row_counts[(table, version)] is None:
            query = exp.select(exp.Count(this=exp.Star())).from_(table_at(table, lit(version)))
            self.row_counts[(table, version)] = self.run(
                lambda: self.spark.sql(to_sql(query, pretty=False)).first()[0], table
            )
        return self.row_counts[(table, version)]
