"""What one refresh hands to the refresh event log (``storage.refresh_log``): an event for
each stage it ran, and one for each stage commit an earlier refresh made but never logged
(it was killed between that commit and its append).

A stage's commit names the refresh that made it (its record's ``refresh``); the log's
summary names, per stage, the refresh that last logged it. A commit newer than that one, by
another refresh, was never logged: its record and Delta's commit metrics say what it did.
"""

from __future__ import annotations

import secrets
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime

from ivm_sql.incremental.stages import Stage
from ivm_sql.physical import batches, checkpoints, one_statement
from ivm_sql.runtime.tally import Cost
from ivm_sql.storage import delta_log, refresh_log
from ivm_sql.storage.refresh_log import OUTCOME_ERROR, OUTCOME_UNLOGGED, Event, Summary

ID_TIME = "%Y%m%dT%H%M%S%fZ"  # a refresh id starts with its start time, so ids sort by it
LOOK_BACK = 20  # commits of a stage table looked at for unlogged ones


def new_refresh_id(started: datetime) -> str:
    return f"{started.astimezone(UTC).strftime(ID_TIME)}-{secrets.token_hex(4)}"


def started_at(refresh_id: str) -> datetime:
    return datetime.strptime(refresh_id.partition("-")[0], ID_TIME).replace(tzinfo=UTC)


@dataclass(frozen=True)
class StageOutcome:
    """What a refresh did to one stage: ``action`` as the view's report shows it (created,
    recomputed, incremental, unchanged), the source rows it read changed, the rows it
    wrote, the files its change's bounds opened (of how many), and the version committed."""

    action: str
    reason: str = ""
    rows_in: int = 0
    rows_out: int = 0
    files: tuple[int, int] | None = None
    version: int | None = None
    sources: dict[str, int] = field(default_factory=dict)
    decided_by: str | None = None  # history, analytic or forced (``physical.learned``)
    predicted: tuple[float, float] | None = None  # seconds: incremental, full

    @property
    def strategy(self) -> str:
        return "full" if self.action in ("created", "recomputed") else "incremental"


UNCHANGED = StageOutcome("unchanged")


class Recorder:
    """Collects one refresh's events, from any of its worker threads."""

    def __init__(self, refresh_id: str, clock: datetime, summary: Summary):
        self.refresh_id = refresh_id
        self.clock = clock
        self.summary = summary
        self.events: list[Event] = []
        # stage table -> the record of its change that came to nothing (``physical.records``)
        self.recorded: dict[str, dict] = {}
        self._lock = threading.Lock()
        self._told: set[tuple[str, str]] = set()  # (refresh, stage) of the unlogged events

    def ran(self, view: str, stage: Stage, outcome: StageOutcome, cost: Cost) -> None:
        plan, write = cost.phases.get("plan", 0.0), cost.phases.get("write", 0.0)
        opened, total = outcome.files if outcome.files is not None else (None, None)
        predicted = outcome.predicted or (None, None)
        self._add_stage(
            view,
            stage,
            cost,
            action=outcome.action,
            strategy=outcome.strategy,
            reason=outcome.reason,
            decided_by=outcome.decided_by,
            predicted_incremental_seconds=predicted[0],
            predicted_full_seconds=predicted[1],
            source_versions=outcome.sources,
            rows_in=outcome.rows_in,
            rows_out=outcome.rows_out,
            files_read=opened,
            files_total=total,
            plan_seconds=plan,
            change_seconds=max(cost.seconds - plan - write, 0.0),
            write_seconds=write,
            table_version=outcome.version,
        )

    def record_beside(self, table: str, version: int, record: dict) -> None:
        """Keep ``record`` for the stage ``table``, whose table stays at ``version``, in the
        log's summary (``physical.records``)."""
        with self._lock:
            self.recorded[table] = {"version": version, "record": {"ivm": 1, **record}}

    def failed(self, view: str, stage: Stage, error: Exception, cost: Cost) -> None:
        self._add_stage(
            view, stage, cost, action="failed", strategy="", outcome=OUTCOME_ERROR, error=str(error)
        )

    def _add_stage(self, view: str, stage: Stage, cost: Cost, **fields) -> None:
        """An event of this refresh for ``stage``, with its cost's time, statements and jobs."""
        self._add(
            Event(
                self.refresh_id,
                self.clock,
                view,
                stage.table,
                stage.kind,
                seconds=cost.seconds,
                statements=cost.statements,
                spark_jobs=cost.jobs,
                **fields,
            )
        )

    def unlogged(
        self, log: delta_log.DeltaLog, view: str, stage: Stage, record_version: int | None
    ) -> None:
        """Events for the commits to ``stage`` since the one the log last logged, made by
        refreshes that never logged them. Without a log there is nothing to tell apart; a
        stage the log has never seen counts only commits after the log's last append; a
        record that names no refresh is older than the log."""
        if record_version is None or self.summary.version < 0:
            return
        costs = self.summary.stages.get(stage.table)
        last = costs.last if costs is not None else None
        by_refresh: dict[str, list[delta_log.Commit]] = {}
        for version in range(record_version, max(-1, record_version - LOOK_BACK), -1):
            commit = log.commit(stage.table, version)
            if commit.record is None:  # not ivm's (OPTIMIZE, say): look further back
                continue
            made_by = commit.record.get("refresh")
            if (
                made_by is None
                or made_by in (last, self.refresh_id, *self._logged_through(commit.record))
                or (last is None and commit.timestamp <= self.summary.committed)
            ):
                break
            by_refresh.setdefault(made_by, []).append(commit)
        for made_by, commits in sorted(by_refresh.items()):
            if (made_by, stage.table) not in self._told:  # a stage looked at again: once
                self._told.add((made_by, stage.table))
                self._add(_from_commits(made_by, view, stage, commits))

    def _logged_through(self, record: dict) -> list[str | None]:
        """The refreshes that logged a stage a view's table was written through in one
        statement (``physical.one_statement``): such a write is logged as that stage's."""
        inlined = record.get(one_statement.INLINED) or {}
        return [costs.through for t in inlined if (costs := self.summary.stages.get(t)) is not None]

    def _add(self, event: Event) -> None:
        with self._lock:
            self.events.append(event)


def _from_commits(refresh_id: str, view: str, stage: Stage, commits: list) -> Event:
    """An event from one refresh's commits to a stage (a recompute may be followed by a
    commit of table properties): what their records and metrics say."""
    rows = sum(c.rows_changed for c in commits)
    # a MERGE or an appended batch (``physical.batches``) applies a change; a record-only
    # commit (an empty INSERT) records one that came to nothing; any other commit that
    # changes rows is a recompute's (a trace's rewrite, every 16th batch, cannot be told
    # from one, and is told as one)
    applied = any(c.operation == "MERGE" or batches.is_append(c) for c in commits)
    full = not applied and any(c.changes_rows for c in commits)
    newest = max(commits, key=lambda c: c.version)
    try:
        clock = started_at(refresh_id)
    except ValueError:  # an id of another form: when its commit was made
        clock = datetime.fromtimestamp(newest.timestamp / 1000, UTC)
    return Event(
        refresh_id,
        clock,
        view,
        stage.table,
        stage.kind,
        "recomputed" if full else "incremental",
        "full" if full else "incremental",
        reason="committed by a refresh that ended before logging it",
        source_versions=dict(newest.record.get("sources", {})),
        rows_out=rows,
        table_version=newest.version,
        outcome=OUTCOME_UNLOGGED,
    )


def summary_of(log: delta_log.DeltaLog, database: str) -> Summary:
    """The log's summary, read from its last append (no Spark job)."""
    return refresh_log.read_summary(log, refresh_log.table_in(database))


def start(log: delta_log.DeltaLog, database: str, clock: datetime) -> Recorder:
    """The recorder of a refresh starting at ``clock``."""
    return Recorder(new_refresh_id(clock), clock, summary_of(log, database))


def append(
    spark, log: delta_log.DeltaLog, database: str, recorder: Recorder, keep_days: int | None
) -> None:
    """The refresh's one append to the log; none when no stage ran. Entries older than
    ``keep_days`` before the refresh's clock go first, at most once a day."""
    if recorder.events:  # a record kept beside comes with its stage's event
        batch = refresh_log.Batch(
            refresh_log.table_in(database),
            recorder.refresh_id,
            recorder.events,
            recorder.clock,
            keep_days,
            # its checkpoints, too, come after the refresh (``physical.checkpoints``)
            checkpoints.TABLE_PROPERTIES,
            recorder.recorded,
        )
        refresh_log.append(spark, log, batch)
