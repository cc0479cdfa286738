"""What the Delta log says about a table, read without running a Spark job.

Each table ivm writes records, in the commit that changes it (commit ``userMetadata``), the
versions of its sources it now reflects. That record is the only bookkeeping: a refresh that
dies before its commit left nothing behind, and one that died after it is finished by the
next refresh from the record.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from urllib.parse import unquote, urlparse

from py4j.protocol import Py4JJavaError
from pyspark.errors import PySparkException
from sqlglot import exp

from ivm_sql.errors import IvmError, RefreshError
from ivm_sql.session import is_connect
from ivm_sql.sqlbuild import describe, is_internal, to_sql
from ivm_sql.sqlbuild import table as table_node
from ivm_sql.storage import concurrent

USER_METADATA = "spark.databricks.delta.commitInfo.userMetadata"

# Operations whose changes the change data feed describes row by row. Anything else in a
# source's history (a REPLACE, RESTORE, schema change, ...) forces a recompute.
INCREMENTAL_OPERATIONS = {
    "WRITE",
    "STREAMING UPDATE",
    "MERGE",
    "UPDATE",
    "DELETE",
    "OPTIMIZE",
    "SET TBLPROPERTIES",
    "UNSET TBLPROPERTIES",
    "VACUUM START",
    "VACUUM END",
}
# Operations that never change a row: a table with only these since a version is unchanged.
NO_ROW_CHANGES = {
    "OPTIMIZE",
    "VACUUM START",
    "VACUUM END",
    "SET TBLPROPERTIES",
    "UNSET TBLPROPERTIES",
}
# operationMetrics that count rows changed by a commit
ROW_METRICS = (
    "numOutputRows",
    "numTargetRowsInserted",
    "numTargetRowsUpdated",
    "numTargetRowsDeleted",
    "numUpdatedRows",
    "numDeletedRows",
)


@dataclass(frozen=True)
class Commit:
    version: int
    operation: str
    record: dict | None  # ivm's record, if this commit was written by ivm
    metrics: dict = field(default_factory=dict)
    timestamp: int = 0  # when it was committed, in milliseconds since the epoch

    @property
    def changes_rows(self) -> bool:
        """False for a commit that cannot change any row (compaction, properties, ivm's
        record-only commits: a WRITE of no row that removed no file); True when it may."""
        if self.operation == "WRITE" and self.metrics.get("numOutputRows") == "0":
            return int(self.metrics.get("numRemovedFiles") or 0) > 0
        return self.operation not in NO_ROW_CHANGES

    @property
    def rows_changed(self) -> int:
        keys = ROW_METRICS if self.operation != "MERGE" else ROW_METRICS[1:4]
        if self.operation in ("UPDATE", "DELETE"):
            keys = ("numUpdatedRows", "numDeletedRows")
        return sum(int(self.metrics.get(k) or 0) for k in keys)


def _sql(statement: exp.Expression) -> str:
    return to_sql(statement, pretty=False)


def _information(text: str, field: str) -> str | None:
    """One field of a ``SHOW TABLE EXTENDED`` row's information (``Field: value`` lines)."""
    prefix = f"{field}: "
    return next(
        (line[len(prefix) :] for line in text.splitlines() if line.startswith(prefix)), None
    )


COMMIT_FILE = re.compile(r"^(\d{20})\.json$")
LAST_CHECKPOINT = "_last_checkpoint"  # the log's pointer to its latest checkpoint


class LocalFolder:
    """A ``_delta_log`` on this machine's disk (a ``file:`` location), read with Python's own
    file calls: no round trip to the JVM per file, as reading it through py4j costs."""

    def __init__(self, path: str):
        self.path = Path(path)

    def exists(self, name: str | None = None) -> bool:
        return (self.path / name if name else self.path).exists()

    def names(self) -> list[str]:
        return os.listdir(self.path)

    def read(self, name: str) -> str:
        return (self.path / name).read_text(encoding="utf-8")


class HadoopFolder:
    """A ``_delta_log`` anywhere else (HDFS, S3, ...), read through Hadoop's FileSystem."""

    def __init__(self, spark, location: str):
        jvm = spark._jvm
        self._path_class = jvm.org.apache.hadoop.fs.Path
        self._io_utils = jvm.org.apache.commons.io.IOUtils
        self.path = self._path_class(self._path_class(location), "_delta_log")
        self.fs = self.path.getFileSystem(spark._jsc.hadoopConfiguration())

    def exists(self, name: str | None = None) -> bool:
        return bool(self.fs.exists(self._path_class(self.path, name) if name else self.path))

    def names(self) -> list[str]:
        return [status.getPath().getName() for status in self.fs.listStatus(self.path)]

    def read(self, name: str) -> str:
        stream = self.fs.open(self._path_class(self.path, name))
        try:
            return self._io_utils.toString(stream, "UTF-8")
        finally:
            stream.close()


class HistoryFolder:
    """A table's ``_delta_log`` as Spark SQL reports it, for a Spark Connect session on a
    table this machine cannot read (HDFS, S3, another machine's disk): ``DESCRIBE HISTORY``'s
    rows stand for the commit files they come from (their commitInfo; version 0 also holds
    the table's id, from ``DESCRIBE DETAIL``), and there are no checksum files.

    Chosen over delta-rs (the ``deltalake`` package), which reads a log in about 1 ms against
    0.1-0.9 s for DESCRIBE HISTORY through Connect (docs/performance.md): it would need the
    store's credentials on this machine as well as on the cluster, and covers fewer file
    systems than Hadoop does. Tables on local disk, the usual case, are read with Python's
    file calls either way.
    """

    def __init__(self, spark, table: str):
        self.spark = spark
        self.table = table
        self._commits: dict[int, dict] = {}

    def exists(self, name: str | None = None) -> bool:
        if name is None:
            return self._detail().format == "delta"
        version, kind = self._parse(name)
        return kind == "json" and (version in self._commits or version in self._versions())

    def names(self) -> list[str]:
        return [f"{version:020d}.json" for version in self._versions()]

    def read(self, name: str) -> str:
        version, kind = self._parse(name)
        if kind != "json" or not self.exists(name):
            raise RefreshError(f"{self.table} has no commit {name} in its history")
        actions = {"commitInfo": self._commits[version]}
        if version == 0:
            actions["metaData"] = {"id": self._detail().id}
        return "\n".join(json.dumps({kind: value}) for kind, value in actions.items())

    def _versions(self) -> list[int]:
        """Every version in the history, read anew (the table may have moved on)."""
        for row in self.spark.sql(describe("HISTORY", self.table)).collect():
            self._commits[row.version] = {
                "operation": row.operation,
                "operationMetrics": dict(row.operationMetrics or {}),
                "userMetadata": row.userMetadata,
                # Delta's history time (the commit file's, made monotonic): within moments of
                # the commitInfo time a file read gives; only retention hours are built on it
                "timestamp": int(row.timestamp.timestamp() * 1000),
            }
        return sorted(self._commits)

    def _detail(self):
        return self.spark.sql(describe("DETAIL", self.table)).select("format", "id").collect()[0]

    @staticmethod
    def _parse(name: str) -> tuple[int, str]:
        stem, _, kind = name.partition(".")
        return int(stem), kind


Folder = LocalFolder | HadoopFolder | HistoryFolder


def log_folder(spark, location: str, table: str) -> Folder:
    """The table's ``_delta_log`` folder, read directly when it is on local disk.

    Over Spark Connect the JVM is out of reach, and the endpoint may be on another machine:
    a ``file:`` table is read directly when its log is on this machine's disk too (ivm's own
    server), and any other through Spark SQL."""
    parsed = urlparse(location)
    if parsed.scheme == "file" or (not parsed.scheme and location.startswith("/")):
        folder = LocalFolder(os.path.join(unquote(parsed.path), "_delta_log"))
        if not is_connect(spark) or folder.exists():
            return folder
    return HistoryFolder(spark, table) if is_connect(spark) else HadoopFolder(spark, location)


class DeltaLog:
    """Reads a table's ``_delta_log`` directly: from local disk with Python's file calls,
    from anywhere else through Hadoop's FileSystem.

    Listing the log and reading a commit's JSON runs no Spark job, unlike DESCRIBE HISTORY
    (which reconstructs a snapshot): this is what lets an unchanged refresh run no job.
    Table locations come from the session catalog and are cached.
    """

    def __init__(self, spark, locations: dict[str, str] | None = None):
        self.spark = spark
        # ivm's own tables -> their folder, kept by the caller across refreshes: ivm creates
        # them as managed tables, whose folder follows from their name and never moves
        self._locations = locations if locations is not None else {}
        self._names: dict[str, set[str]] = {}  # database -> its tables and views, listed once
        self._listed: dict[
            str, str | None
        ] = {}  # over Spark Connect: db.table -> its folder (None: a view)
        self._types: dict[
            str, str | None
        ] = {}  # over Spark Connect: db.table -> VIEW, MANAGED or EXTERNAL
        self._folders: dict[str, Folder] = {}  # table -> its _delta_log
        self._ids: dict[str, str | None] = {}
        self._commits: dict[tuple[str, int], Commit] = {}  # a commit file never changes
        self._sizes: dict[tuple[str, int], int | None] = {}  # nor does a checksum file

    @cached_property
    def _session_catalog(self):
        return self.spark._jsparkSession.sessionState().catalog()

    def _log(self, table: str) -> Folder:
        """The table's ``_delta_log`` folder."""
        if table not in self._folders:
            self._folders[table] = log_folder(self.spark, self._table_location(table), table)
        return self._folders[table]

    def _table_location(self, table: str) -> str:
        """The table's folder: kept for ivm's own tables, whose folder never moves."""
        location = self._locations.get(table)
        if location is None:
            location = self._location(table)
            if is_internal(table):
                self._locations[table] = location
        return location

    def last_checkpoint(self, table: str) -> int | None:
        """The version of the table's latest checkpoint; None when it has none, or when its
        log is read through Spark SQL (``HistoryFolder``), which does not say."""
        folder = self._log(table)
        if isinstance(folder, HistoryFolder) or not folder.exists(LAST_CHECKPOINT):
            return None
        return int(json.loads(folder.read(LAST_CHECKPOINT))["version"])

    def write_checkpoint(self, table: str) -> None:
        """Have Delta write a checkpoint of the table's latest version: its state as Parquet,
        where a reader of the table starts instead of replaying each commit's JSON (a Spark
        job). Delta's Scala API does it; a Spark Connect session cannot reach it."""
        jvm = self.spark._jvm
        jvm.org.apache.spark.sql.delta.DeltaLog.forTable(
            self.spark._jsparkSession, self._table_location(table)
        ).checkpoint()

    def _location(self, table: str) -> str:
        """Where the catalog keeps ``db.table``: asked of the JVM's catalog, or over Spark
        Connect taken from the database's listing (listed anew for a table new since)."""
        if not is_connect(self.spark):
            identifier = (
                self.spark._jsparkSession.sessionState().sqlParser().parseTableIdentifier(table)
            )
            return self._session_catalog.getTableMetadata(identifier).location().toString()
        if table.lower() not in self._listed:
            self._names[table.rpartition(".")[0]] = self._listing(table.rpartition(".")[0])
        location = self._listed.get(table.lower())
        if location is None:
            raise RefreshError(f"{table} has no folder: it is not a table")
        return location

    def _listing(self, database: str) -> set[str]:
        """The tables and views of ``database``, in one call: names joined in the JVM, or over
        Spark Connect one ``SHOW TABLE EXTENDED``, which also gives every table's folder (a
        round trip to the server costs more than the listing's size)."""
        if not is_connect(self.spark):
            listed = self._session_catalog.externalCatalog().listTables(database).mkString("\0")
            return {n.lower() for n in listed.split("\0") if n}
        quoted = _sql(exp.to_identifier(database))
        names = set()
        for row in self.spark.sql(f"SHOW TABLE EXTENDED IN {quoted} LIKE '*'").collect():
            if not row.isTemporary:
                names.add(row.tableName.lower())
                name = f"{database}.{row.tableName}".lower()
                self._listed[name] = _information(row.information, "Location")
                self._types[name] = _information(row.information, "Type")
        return names

    def in_catalog(self, name: str) -> bool:
        """Whether ``db.name`` is a table or view of the catalog. Each database is listed once,
        instead of one lookup per table; a name missing from that listing is looked up, as
        it may have been created since."""
        database, _, short = name.rpartition(".")
        if short.lower() in self.tables_in(database):
            return True
        return bool(self.spark.catalog.tableExists(name))

    def tables_in(self, database: str) -> set[str]:
        """The names (lower case, unqualified) of the tables and views of ``database``."""
        if database not in self._names:
            self._names[database] = self._listing(database)
        return self._names[database]

    def is_table(self, name: str) -> bool:
        """Whether ``db.name`` is a table of the catalog, not a view; over Spark Connect
        the listing's type says so without another round trip."""
        if not self.in_catalog(name):
            return False
        kind = self._types.get(name.lower()) or self.spark.catalog.getTable(name).tableType
        return kind != "VIEW"

    def exists(self, table: str) -> bool:
        """Whether the catalog knows the table; a table ivm made and then lost (dropped by
        hand) is forgotten, so its folder is looked up again once it is made anew."""
        if self.in_catalog(table):
            return True
        self._locations.pop(table, None)
        self._folders.pop(table, None)
        return False

    def latest_version(self, table: str) -> int:
        return max(self._versions(table))

    def is_delta(self, table: str) -> bool:
        """Whether the catalog's table ``db.name`` keeps a Delta log."""
        return self._log(table).exists()

    def earliest_version(self, table: str) -> int:
        """The oldest version whose commit file is still there (log cleanup removes old ones)."""
        return min(self._versions(table))

    def _versions(self, table: str) -> list[int]:
        folder = self._log(table)
        if not folder.exists():
            raise RefreshError(
                f"{table} is not a Delta table (it has no _delta_log); ivm reads changes from Delta's change data feed",
                hint=f"convert it: CONVERT TO DELTA {table}, or recreate it USING DELTA in a migration",
            )
        versions = [int(m.group(1)) for name in folder.names() if (m := COMMIT_FILE.match(name))]
        if not versions:
            raise RefreshError(f"{table} has no Delta log", hint="is it a Delta table?")
        return versions

    def table_id(self, table: str) -> str | None:
        """The table's Delta id (from its first commit's metaData), new when it is recreated."""
        if table not in self._ids:
            self._ids[table] = (
                self._actions(table, 0).get("metaData", {}).get("id")
                if self._exists(table, 0)
                else None
            )
        return self._ids[table]

    def identity(self, table: str) -> tuple[str | None, int] | None:
        """(Delta table id, latest version), which a schema read from the table stays true
        for; None for anything that is not a Delta table with a folder (a Spark view, say)."""
        try:
            return self.table_id(table), self.latest_version(table)
        except (IvmError, Py4JJavaError, PySparkException):
            return None

    def _exists(self, table: str, version: int) -> bool:
        return self._log(table).exists(f"{version:020d}.json")

    def size_bytes(self, table: str, version: int) -> int | None:
        """The table's size at a version, from the checksum file Delta writes beside each
        commit (None when there is none: a writer may skip it)."""
        if (table, version) not in self._sizes:
            size = self._checksum(table, version).get("tableSizeBytes")
            self._sizes[(table, version)] = size if isinstance(size, int) else None
        return self._sizes[(table, version)]

    def _checksum(self, table: str, version: int) -> dict:
        """The checksum file Delta writes beside a commit (its table's size, metadata and
        files); empty when there is none (a writer may skip it) or it cannot be read."""
        folder, name = self._log(table), f"{version:020d}.crc"
        try:
            checksum = json.loads(folder.read(name)) if folder.exists(name) else {}
        except ValueError:
            return {}
        return checksum if isinstance(checksum, dict) else {}

    def properties(self, table: str) -> dict[str, str] | None:
        """The table properties of a Delta table's latest version, from its checksum file
        (no Spark job); None when it is no Delta table with a folder this machine reads, or
        the checksum file does not hold them."""
        try:
            folder = self._log(table)
            if isinstance(folder, HistoryFolder) or not folder.exists():
                return None
            metadata = self._checksum(table, self.latest_version(table)).get("metadata")
        except (IvmError, Py4JJavaError, PySparkException):
            return None
        configuration = metadata.get("configuration") if isinstance(metadata, dict) else None
        return configuration if isinstance(configuration, dict) else None

    def files(self, table: str, version: int) -> list[dict] | None:
        """The table's files at a version (path, size, stats, deletionVector), from the file
        list in the checksum file Delta writes beside each commit; None when there is none."""
        files = self._checksum(table, version).get("allFiles")
        return (
            files if isinstance(files, list) and all(isinstance(f, dict) for f in files) else None
        )

    def file_stats(self, table: str, version: int) -> list[tuple[int, dict]] | None:
        """Each file's size and statistics (minValues, maxValues, ...) at a version; None
        when the checksum file holds no file list."""
        files = self.files(table, version)
        try:
            return (
                None
                if files is None
                else [(int(f.get("size") or 0), json.loads(f.get("stats") or "{}")) for f in files]
            )
        except (ValueError, TypeError):
            return None

    def row_count(self, table: str, version: int, once: str | None = None) -> int | None:
        """The table's rows at a version, from the file list in the checksum file Delta writes
        beside each commit (a file's ``numRecords`` less the rows its deletion vector
        removed). With ``once``, a column every row must hold 1 in (as its statistics show:
        minimum and maximum 1, no NULL), else the count is not certain. None when the
        checksum file, its file list or a file's statistics are missing."""
        files = self.files(table, version)
        if files is None:
            return None
        try:
            count = 0
            for file in files:
                stats = json.loads(file.get("stats") or "{}")
                if "numRecords" not in stats:
                    return None
                if once is not None and not (
                    stats.get("minValues", {}).get(once)
                    == 1
                    == stats.get("maxValues", {}).get(once)
                    and stats.get("nullCount", {}).get(once) == 0
                ):
                    return None
                count += stats["numRecords"] - (file.get("deletionVector") or {}).get(
                    "cardinality", 0
                )
            return count
        except (ValueError, TypeError, AttributeError):
            return None

    def _actions(self, table: str, version: int) -> dict:
        """The actions of one commit file, by kind (commitInfo, metaData, ...)."""
        text = self._log(table).read(f"{version:020d}.json")
        actions: dict = {}
        for line in text.splitlines():
            for kind, value in (json.loads(line) if line.strip() else {}).items():
                actions.setdefault(kind, value)
        return actions

    def commit(self, table: str, version: int) -> Commit:
        if (table, version) not in self._commits:
            info = self._actions(table, version).get("commitInfo", {})
            self._commits[(table, version)] = Commit(
                version,
                info.get("operation", ""),
                _parse_record(info.get("userMetadata")),
                info.get("operationMetrics") or {},
                int(info.get("timestamp") or 0),
            )
        return self._commits[(table, version)]

    def removes_rows(self, table: str, version: int) -> bool:
        """Whether a commit removes (or rewrites) rows: a ``remove`` action marked as a data
        change, which is how Delta's streaming source tells a commit it cannot stream."""
        return bool(self._actions(table, version).get("remove", {}).get("dataChange"))

    def commits_between(self, table: str, old: int, new: int) -> list[Commit]:
        """Commits with old < version <= new, oldest first."""
        return [self.commit(table, v) for v in range(old + 1, new + 1)]

    def last_record(self, table: str, look_back: int = 50) -> tuple[int, dict]:
        """The table's latest version and the newest ivm record in its history ({} if none)."""
        latest, _, record = self.recorded(table, look_back)
        return latest, record

    def recorded(self, table: str, look_back: int = 50) -> tuple[int, int | None, dict]:
        """The table's latest version, the version of the commit holding its newest ivm
        record (None if none) and that record ({} if none)."""
        latest = self.latest_version(table)
        for version in range(latest, max(-1, latest - look_back), -1):
            record = self.commit(table, version).record
            if record is not None:
                return latest, version, record
        return latest, None, {}


def _parse_record(text: str | None) -> dict | None:
    if not text:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) and "ivm" in value else None


@contextmanager
def commit_record(spark, record: dict, txn_version: int | None = None) -> Iterator[None]:
    """Every Delta commit made inside carries ``record`` as its userMetadata and, given
    ``txn_version``, lands only if it is the first ivm commit since the record it follows
    (``storage.concurrent``)."""
    settings = {USER_METADATA: json.dumps({"ivm": 1, **record}, sort_keys=True)}
    if txn_version is not None:
        settings.update(
            {concurrent.TXN_APP_ID: concurrent.APP_ID, concurrent.TXN_VERSION: str(txn_version)}
        )
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key in settings:
            spark.conf.unset(key)


def require_change_feed(spark, log: DeltaLog, table: str) -> None:
    """Refuse a source that is not a Delta table; turn its change data feed on if it is off.

    The properties come from the checksum file of the table's latest commit when it has one
    (``DeltaLog.properties``); DESCRIBE DETAIL, the way without it, computes the table's
    state, a Spark job of about 0.5 s a table on this machine, paid per source per refresh."""
    properties = log.properties(table)
    if properties is None:
        details = spark.sql(describe("DETAIL", table)).select("format", "properties").collect()[0]
        if details.format != "delta":
            raise RefreshError(
                f"{table} is a {details.format} table; ivm reads changes from Delta's change data feed",
                hint=f"convert it: CONVERT TO DELTA {table}, or recreate it USING DELTA in a migration",
            )
        properties = details.properties or {}
    if properties.get("delta.enableChangeDataFeed", "false").lower() != "true":
        set_properties(spark, table, {"delta.enableChangeDataFeed": "true"})


def compute_state(spark, table: str) -> None:
    """Have Delta compute the state of ``table``'s latest snapshot (its files, sizes and
    transactions: a Spark job over its log), which Delta keeps with the snapshot until the
    next commit. DESCRIBE DETAIL reads the sizes, so it computes it, and nothing else."""
    spark.sql(describe("DETAIL", table)).collect()


def set_properties(spark, table: str, properties: dict[str, str]) -> None:
    """ALTER TABLE ... SET TBLPROPERTIES: a commit that changes no row."""
    statement = exp.AlterSet(
        expressions=[
            exp.Properties(
                expressions=[
                    exp.Property(this=exp.Literal.string(key), value=exp.Literal.string(value))
                    for key, value in properties.items()
                ]
            )
        ]
    )
    spark.sql(_sql(exp.Alter(this=table_node(table), kind="TABLE", actions=[statement])))


def record_only(spark, table: str) -> None:
    """A commit that changes no row, to carry a new record: an INSERT of no row, which, unlike
    ALTER TABLE, Delta makes conditional on the txn version (``storage.concurrent``)."""
    nothing = exp.select(exp.Star()).from_(table_node(table)).where(exp.false())
    spark.sql(_sql(exp.Insert(this=table_node(table), expression=nothing)))
