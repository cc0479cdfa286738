"""The life of ivm's state after a refresh made it: which tables are ivm's, which belong to
no view any more (orphaned), dropping them, and compacting the rest.

ivm's own tables are recognised by two marks together, never by their name alone: the name
starts with ``__ivm_`` and the Delta table's properties hold ``ivm.plan``, which ivm sets when
it creates a stage table (``compiler.plan.create_table``) and a user's table does not have. Which
project's they are, when several share a database, says the record of their last refresh
(its ``project``, the project's folder; a record from before ivm wrote it counts as this
project's). The Spark view users query is ivm's when it reads nothing but that view's ivm
tables.
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass

import sqlglot
from py4j.protocol import Py4JJavaError
from pyspark.errors import PySparkException
from sqlglot import exp
from sqlglot.errors import SqlglotError

from ivm_sql.catalog import first_line
from ivm_sql.compiler.plan import ViewPlan
from ivm_sql.errors import IvmError
from ivm_sql.physical import execution, layout
from ivm_sql.sqlbuild import DIALECT, INTERNAL_PREFIX, col, describe, table, to_sql
from ivm_sql.storage.delta_log import DeltaLog

STATE_PREFIX = f"{INTERNAL_PREFIX}_"
PLAN_PROPERTY = "ivm.plan"
INNER_STAGE = re.compile(r"(.+)_s\d+")  # __ivm_<view>_s<n>: an inner stage of <view>


@dataclass(frozen=True)
class ViewState:
    """The state one view keeps, or left behind, in the catalog."""

    view: str  # db.name of the view it belongs (or belonged) to
    tables: tuple[str, ...]  # its Delta tables
    # the Spark view users queried, when ivm made it and it is still there
    user_view: str | None = None
    defined: bool = False  # the view is still defined: these are stages it no longer has

    @property
    def names(self) -> list[str]:
        """Everything dropping this state removes: the user's view first, then the tables."""
        return [*([self.user_view] if self.user_view else []), *self.tables]


def _sql(statement: exp.Expression) -> str:
    return to_sql(statement, pretty=False)


def is_ivm_table(spark, name: str) -> bool:
    """A Delta table ivm created: it carries the plan fingerprint ivm writes at creation."""
    details = spark.sql(describe("DETAIL", name)).select("format", "properties").first()
    return (
        details is not None
        and details.format == "delta"
        and PLAN_PROPERTY in (details.properties or {})
    )


def orphaned(spark, log, database: str, plans: list[ViewPlan], project: str) -> list[ViewState]:
    """ivm's tables in ``database`` that no stage of ``plans`` (all the views of the project
    in folder ``project``) keeps, grouped by the view they belonged to. ``log`` (a
    ``DeltaLog``) lists the database. A table whose last record names another project's
    folder is that project's, not an orphan: two projects may share a database."""
    owned = {stage.table for plan in plans for stage in plan.stages}
    defined = {plan.name for plan in plans}
    candidates = [
        f"{database}.{name}"
        for name in sorted(log.tables_in(database))
        if name.startswith(STATE_PREFIX) and f"{database}.{name}" not in owned
    ]
    tables = [
        t
        for t in candidates
        if log.is_table(t)
        and is_ivm_table(spark, t)
        and log.last_record(t)[1].get("project", project) == project
    ]
    groups: dict[str, list[str]] = {}
    for name in tables:
        groups.setdefault(_owner(name, owned | set(tables)), []).append(name)
    return [
        ViewState(
            view,
            tuple(sorted(names)),
            None if view in defined else _user_view(spark, view, names),
            view in defined,
        )
        for view, names in sorted(groups.items())
    ]


def _owner(name: str, known: set[str]) -> str:
    """The view a state table belongs to: ``__ivm_v_s1`` is v's inner stage when ``__ivm_v``
    exists too; otherwise ``__ivm_x`` is the last stage of view x."""
    database, _, short = name.rpartition(".")
    view = short[len(STATE_PREFIX) :]
    inner = INNER_STAGE.fullmatch(view)
    if inner and f"{database}.{STATE_PREFIX}{inner.group(1)}" in known:
        view = inner.group(1)
    return f"{database}.{view}"


def _user_view(spark, view: str, tables: list[str]) -> str | None:
    """``view`` if it is a Spark view that reads only ``tables``: the one ivm created over them."""
    if not spark.catalog.tableExists(view) or spark.catalog.getTable(view).tableType != "VIEW":
        return None
    rows = spark.sql(describe("TABLE EXTENDED", view)).collect()
    text = next((r.data_type for r in rows if r.col_name == "View Text"), "")
    try:
        read = {
            f"{t.db}.{t.name}".lower()
            for t in sqlglot.parse_one(text, read=DIALECT).find_all(exp.Table)
        }
    except SqlglotError:
        return None
    return view if read and read <= set(tables) else None


def drop(spark, states: list[ViewState]) -> list[str]:
    """Drop the views and tables of ``states``; the names dropped."""
    dropped = []
    for state in states:
        for name in state.names:
            kind = "VIEW" if name == state.user_view else "TABLE"
            spark.sql(_sql(exp.Drop(tables=[table(name)], kind=kind, exists=True)))
            dropped.append(name)
    return dropped


# OPTIMIZE and VACUUM ------------------------------------------------------------------------

# Delta's default delta.deletedFileRetentionDuration, which ivm's tables keep: how long Delta
# keeps a removed file in its state, and the default hours VACUUM keeps.
TOMBSTONE_HOURS = 168
# Files of a commit are written before it is committed, by the time its statement runs.
MARGIN_MS = 3_600_000
# VACUUM lists a table's folders in as many Spark tasks as this setting says, 10,000 by
# default (meant for tables with thousands of partition folders). ivm's tables are not
# partitioned: measured on 2 busy cores, VACUUM of a 3-file table took 50-65 s with the
# default and 11-13 s with 2 tasks.
VACUUM_SETTINGS = {"spark.sql.sources.parallelPartitionDiscovery.parallelism": "8"}


@dataclass(frozen=True)
class Compaction:
    """What `ivm optimize` did to one state table."""

    table: str
    files_compacted: int  # small files OPTIMIZE replaced
    files_written: int  # files it wrote instead
    # the version the furthest-behind stage reading it recorded (its feed is read on from the next)
    needed_from: int | None
    retained_hours: int | None  # VACUUM's RETAIN; None when VACUUM was skipped
    files_deleted: int | None  # files VACUUM deleted (None: not known, or skipped)
    note: str = ""


def needed_versions(log: DeltaLog, plans: list[ViewPlan]) -> dict[str, int]:
    """Per ivm table, the oldest version a stage reading it recorded: its next refresh reads
    the table's change feed from the next version on."""
    state = {stage.table for plan in plans for stage in plan.stages}
    needed: dict[str, int] = {}
    for plan in plans:
        for stage in plan.stages:
            if not log.exists(stage.table):
                continue
            for source, version in log.last_record(stage.table)[1].get("sources", {}).items():
                if source in state:
                    needed[source] = min(version, needed.get(source, version))
    return needed


def retention_hours(
    log: DeltaLog, name: str, needed: int | None, floor: float, now_ms: int
) -> int | None:
    """The hours VACUUM may keep without deleting a file of the change feed from version
    ``needed + 1`` on, and at least ``floor``; None when no retention is safe.

    Delta's VACUUM deletes by time, not by version: a removed file once its removal is older
    than RETAIN hours, a file no commit tracks (a ``_change_data`` file) once it is that old.
    Every file the feed needs from ``needed + 1`` on was written or removed after commit
    ``needed`` (ivm's writes to a table come one after the other), so keeping everything
    from an hour before that commit keeps them all. Beyond ``TOMBSTONE_HOURS``, Delta forgets
    removed files and would judge them by their age alone: VACUUM is then not safe, and is
    skipped until the stage that lags behind is refreshed.
    """
    if needed is None or needed >= log.latest_version(name) or needed < log.earliest_version(name):
        # nothing to keep: no stage reads it, or its history is gone already
        return math.ceil(floor)
    since = log.commit(name, needed).timestamp - MARGIN_MS
    hours = math.ceil((now_ms - since) / 3_600_000)
    return max(math.ceil(floor), hours) if hours <= TOMBSTONE_HOURS else None


def optimize(
    spark, log: DeltaLog, plans: list[ViewPlan], floor: float = TOMBSTONE_HOURS
) -> list[Compaction]:
    """OPTIMIZE, then VACUUM, every existing state table of ``plans``.

    VACUUM keeps at least ``floor`` hours (Delta refuses fewer than the table's
    ``delta.deletedFileRetentionDuration`` unless ``spark.databricks.delta.retentionDurationCheck.enabled``
    is false: ivm does not turn that check off, as it also protects refreshes running at the
    same time), and more when a stage still needs older history (``retention_hours``)."""
    needed = needed_versions(log, plans)
    done = []
    for plan in plans:
        for stage in plan.stages:
            if log.exists(stage.table):
                keys = plan.key_order(stage)
                done.append(_compact(spark, log, stage.table, keys, needed.get(stage.table), floor))
    return done


def _compact(
    spark, log: DeltaLog, name: str, keys: tuple[str, ...], needed: int | None, floor: float
) -> Compaction:
    """OPTIMIZE, then VACUUM, one table; ``keys``: the key it is laid out by, if any."""
    target = _sql(table(name))
    latest = log.latest_version(name)
    clustered, settings = layout.compaction(
        keys, log.row_count(name, latest), log.size_bytes(name, latest)
    )
    optimized = target
    if clustered:
        optimized += f" ZORDER BY ({', '.join(_sql(col(c)) for c in clustered)})"
    with execution.session_settings(spark, settings):
        metrics = (
            spark.sql(_sql(exp.Command(this="OPTIMIZE", expression=exp.Literal.string(optimized))))
            .first()
            .metrics
        )
    hours = retention_hours(log, name, needed, floor, int(time.time() * 1000))
    if hours is None:
        note = f"VACUUM skipped: a stage still reads its change feed from version {needed + 1}, older than Delta keeps removed files"
        return Compaction(
            name, metrics.numFilesRemoved, metrics.numFilesAdded, needed, None, None, note
        )
    vacuum = exp.Command(
        this="VACUUM", expression=exp.Literal.string(f"{target} RETAIN {hours} HOURS")
    )
    try:
        with execution.session_settings(spark, VACUUM_SETTINGS):
            spark.sql(_sql(vacuum))
    except (
        PySparkException,
        Py4JJavaError,
    ) as error:  # Delta's check refuses fewer hours than the table keeps
        raise IvmError(
            f"VACUUM {name} RETAIN {hours} HOURS: {first_line(error)}",
            hint="keep --retain at or above the tables' delta.deletedFileRetentionDuration (168 hours by default), "
            "or set spark.databricks.delta.retentionDurationCheck.enabled: false in ivm.yaml spark.conf",
        ) from None
    last = log.commit(name, log.latest_version(name))
    deleted = (
        int(last.metrics.get("numDeletedFiles", 0)) if last.operation == "VACUUM END" else None
    )
    return Compaction(name, metrics.numFilesRemoved, metrics.numFilesAdded, needed, hours, deleted)
