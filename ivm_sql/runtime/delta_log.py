"""What the Delta log says about a table, read without running a Spark job.

Each table ivm writes records, in the commit that changes it (commit ``userMetadata``), the
versions of its sources it now reflects. That record is the only bookkeeping: a refresh that
dies before its commit left nothing behind, and one that died after it is finished by the
next refresh from the record.
"""

from __future__ import annotations

import json
import re
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from typing import Iterator

from py4j.protocol import Py4JJavaError
from pyspark.errors import PySparkException
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
# Operations that never change a row: a table with only these since a version is unchanged.
NO_ROW_CHANGES = {"OPTIMIZE", "VACUUM START", "VACUUM END", "SET TBLPROPERTIES", "UNSET TBLPROPERTIES"}
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
    def changes_rows(self) -> bool:
        """False for a commit that cannot change any row (compaction, properties, ivm's
        record-only commits); True when it may."""
        return self.operation not in NO_ROW_CHANGES

    @property
    def rows_changed(self) -> int:
        keys = ROW_METRICS if self.operation != "MERGE" else ROW_METRICS[1:4]
        if self.operation in ("UPDATE", "DELETE"):
            keys = ("numUpdatedRows", "numDeletedRows")
        return sum(int(self.metrics.get(k) or 0) for k in keys)


def _sql(statement: exp.Expression) -> str:
    return to_sql(statement, pretty=False)


COMMIT_FILE = re.compile(r"^(\d{20})\.json$")


class DeltaLog:
    """Reads a table's ``_delta_log`` directly through Hadoop's FileSystem.

    Listing the log and reading a commit's JSON runs no Spark job, unlike DESCRIBE HISTORY
    (which reconstructs a snapshot): this is what lets an unchanged refresh run no job.
    Table locations come from the session catalog and are cached.
    """

    def __init__(self, spark):
        self.spark = spark
        self._dirs: dict[str, tuple[object, object]] = {}  # table -> (its _delta_log, that folder's FileSystem)
        self._ids: dict[str, str | None] = {}
        self._commits: dict[tuple[str, int], Commit] = {}  # a commit file never changes
        self._sizes: dict[tuple[str, int], int | None] = {}  # nor does a checksum file

    # Each py4j call is a round trip to the JVM, and naming a Java class through
    # ``spark._jvm.a.b.C`` is one per package level: the classes are looked up once.
    @cached_property
    def _path_class(self):
        return self.spark._jvm.org.apache.hadoop.fs.Path

    @cached_property
    def _io_utils(self):
        return self.spark._jvm.org.apache.commons.io.IOUtils

    def _log_dir(self, table: str) -> tuple[object, object]:
        """The table's ``_delta_log`` folder and its FileSystem."""
        if table not in self._dirs:
            session = self.spark._jsparkSession
            identifier = session.sessionState().sqlParser().parseTableIdentifier(table)
            location = session.sessionState().catalog().getTableMetadata(identifier).location()
            log_dir = self._path_class(self._path_class(location), "_delta_log")
            self._dirs[table] = (log_dir, log_dir.getFileSystem(self.spark._jsc.hadoopConfiguration()))
        return self._dirs[table]

    def _log_file(self, table: str, name: str) -> tuple[object, object]:
        """A file of the table's ``_delta_log`` and its FileSystem."""
        log_dir, fs = self._log_dir(table)
        return self._path_class(log_dir, name), fs

    def exists(self, table: str) -> bool:
        """Whether the catalog knows the table (one lookup, which also finds its log)."""
        try:
            self._log_dir(table)
        except (PySparkException, Py4JJavaError) as error:
            if "TABLE_OR_VIEW_NOT_FOUND" in str(error) or "NoSuchTableException" in str(error):
                return False
            raise
        return True

    def latest_version(self, table: str) -> int:
        path, fs = self._log_dir(table)
        if not fs.exists(path):
            raise RefreshError(
                f"{table} is not a Delta table (it has no _delta_log); ivm reads changes from Delta's change data feed",
                hint=f"convert it: CONVERT TO DELTA {table}, or recreate it USING DELTA in a migration",
            )
        versions = [int(m.group(1)) for f in fs.listStatus(path) if (m := COMMIT_FILE.match(f.getPath().getName()))]
        if not versions:
            raise RefreshError(f"{table} has no Delta log", hint="is it a Delta table?")
        return max(versions)

    def table_id(self, table: str) -> str | None:
        """The table's Delta id (from its first commit's metaData), new when it is recreated."""
        if table not in self._ids:
            self._ids[table] = self._actions(table, 0).get("metaData", {}).get("id") if self._exists(table, 0) else None
        return self._ids[table]

    def _exists(self, table: str, version: int) -> bool:
        path, fs = self._log_file(table, f"{version:020d}.json")
        return bool(fs.exists(path))

    def size_bytes(self, table: str, version: int) -> int | None:
        """The table's size at a version, from the checksum file Delta writes beside each
        commit (None when there is none: a writer may skip it)."""
        if (table, version) not in self._sizes:
            path, fs = self._log_file(table, f"{version:020d}.crc")
            try:
                checksum = json.loads(self._read(fs, path)) if fs.exists(path) else {}
            except ValueError:
                checksum = {}
            size = checksum.get("tableSizeBytes")
            self._sizes[(table, version)] = size if isinstance(size, int) else None
        return self._sizes[(table, version)]

    def _read(self, fs, path) -> str:
        stream = fs.open(path)
        try:
            return self._io_utils.toString(stream, "UTF-8")
        finally:
            stream.close()

    def _actions(self, table: str, version: int) -> dict:
        """The actions of one commit file, by kind (commitInfo, metaData, ...)."""
        path, fs = self._log_file(table, f"{version:020d}.json")
        text = self._read(fs, path)
        actions: dict = {}
        for line in text.splitlines():
            for kind, value in (json.loads(line) if line.strip() else {}).items():
                actions.setdefault(kind, value)
        return actions

    def commit(self, table: str, version: int) -> Commit:
        if (table, version) not in self._commits:
            info = self._actions(table, version).get("commitInfo", {})
            self._commits[(table, version)] = Commit(
                version, info.get("operation", ""), _parse_record(info.get("userMetadata")), info.get("operationMetrics") or {}
            )
        return self._commits[(table, version)]

    def commits_between(self, table: str, old: int, new: int) -> list[Commit]:
        """Commits with old < version <= new, oldest first."""
        return [self.commit(table, v) for v in range(old + 1, new + 1)]

    def last_record(self, table: str, look_back: int = 50) -> tuple[int, dict]:
        """The table's latest version and the newest ivm record in its history ({} if none)."""
        latest = self.latest_version(table)
        for version in range(latest, max(-1, latest - look_back), -1):
            record = self.commit(table, version).record
            if record is not None:
                return latest, record
        return latest, {}


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


def set_properties(spark, table: str, properties: dict[str, str]) -> None:
    """ALTER TABLE ... SET TBLPROPERTIES: a commit that changes no row."""
    statement = exp.AlterSet(expressions=[exp.Properties(expressions=[
        exp.Property(this=exp.Literal.string(key), value=exp.Literal.string(value)) for key, value in properties.items()
    ])])
    spark.sql(_sql(exp.Alter(this=table_node(table), kind="TABLE", actions=[statement])))


def record_only(spark, table: str) -> None:
    """A commit that changes no row, to carry a new record."""
    set_properties(spark, table, {"ivm.recorded": "true"})
