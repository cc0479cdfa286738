"""What the Delta log says about a table, read without running a Spark job.

Each table ivm writes records, in the commit that changes it (commit ``userMetadata``), the
versions of its sources it now reflects. That record is the only bookkeeping: a refresh that
dies before its commit left nothing behind, and one that died after it is finished by the
next refresh from the record.
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Iterator

from sqlglot import exp

from ivm_sql.errors import RefreshError
from ivm_sql.sqlbuild import table as table_node, to_sql

USER_METADATA = "spark.databricks.delta.commitInfo.userMetadata"

# Operations whose changes the change data feed describes row by row. Anything else in a
# source's history (a REPLACE, RESTORE, schema change, ...) forces a recompute.
INCREMENTAL_OPERATIONS = {
    "WRITE", "STREAMING UPDATE", "MERGE", "UPDATE", "DELETE", "OPTIMIZE",
    "SET TBLPROPERTIES", "UNSET TBLPROPERTIES", "VACUUM START", "VACUUM END",
}
# operationMetrics that count rows changed by a commit
ROW_METRICS = (
    "numOutputRows", "numTargetRowsInserted", "numTargetRowsUpdated", "numTargetRowsDeleted",
    "numUpdatedRows", "numDeletedRows",
)


@dataclass(frozen=True)
class Commit:
    version: int
    operation: str
    record: dict | None  # ivm's record, if this commit was written by ivm
    metrics: dict = field(default_factory=dict)

    @property
    def rows_changed(self) -> int:
        keys = ROW_METRICS if self.operation != "MERGE" else ROW_METRICS[1:4]
        if self.operation in ("UPDATE", "DELETE"):
            keys = ("numUpdatedRows", "numDeletedRows")
        return sum(int(self.metrics.get(k) or 0) for k in keys)


def _sql(statement: exp.Expression) -> str:
    return to_sql(statement, pretty=False)


def history(spark, table: str, limit: int | None = None) -> list[Commit]:
    """The table's commits, newest first (DESCRIBE HISTORY is a command: no Spark job)."""
    statement = f"DESCRIBE HISTORY {_sql(table_node(table))}"
    if limit is not None:
        statement += f" LIMIT {int(limit)}"
    rows = spark.sql(statement).select("version", "operation", "userMetadata", "operationMetrics").collect()
    return [Commit(r.version, r.operation, _parse_record(r.userMetadata), dict(r.operationMetrics or {})) for r in rows]


def latest_version(spark, table: str) -> int:
    return history(spark, table, limit=1)[0].version


def commits_between(spark, table: str, old: int, new: int) -> list[Commit]:
    """Commits with old < version <= new, oldest first."""
    newest = latest_version(spark, table)
    if newest <= old:
        return []
    return [c for c in reversed(history(spark, table, limit=newest - old)) if old < c.version <= new]


def last_record(spark, table: str) -> tuple[int, dict]:
    """The table's latest version and the newest ivm record in its history ({} if none)."""
    commits = history(spark, table, limit=50)
    record = next((c.record for c in commits if c.record is not None), {})
    return commits[0].version, record


def _parse_record(text: str | None) -> dict | None:
    if not text:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) and "ivm" in value else None


@contextmanager
def commit_record(spark, record: dict) -> Iterator[None]:
    """Every Delta commit made inside carries ``record`` as its userMetadata."""
    spark.conf.set(USER_METADATA, json.dumps({"ivm": 1, **record}, sort_keys=True))
    try:
        yield
    finally:
        spark.conf.unset(USER_METADATA)


def require_change_feed(spark, table: str) -> None:
    """Refuse a source that is not a Delta table; turn its change data feed on if it is off."""
    details = spark.sql(f"DESCRIBE DETAIL {_sql(table_node(table))}").select("format", "properties").collect()[0]
    if details.format != "delta":
        raise RefreshError(
            f"{table} is a {details.format} table; ivm reads changes from Delta's change data feed",
            hint=f"convert it: CONVERT TO DELTA {table}, or recreate it USING DELTA in a migration",
        )
    if (details.properties or {}).get("delta.enableChangeDataFeed", "false").lower() != "true":
        spark.sql(
            f"ALTER TABLE {_sql(table_node(table))} SET TBLPROPERTIES ('delta.enableChangeDataFeed' = 'true')"
        )
