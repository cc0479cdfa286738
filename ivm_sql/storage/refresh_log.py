"""The refresh event log: what each refresh did, one row per view and stage it worked on, in
a Delta table of the project's database (``__ivm_refresh_log``), appended once per refresh.

Users query it in plain SQL; ``ivm history`` reads it. A refresh in which no stage ran
appends nothing (an unchanged refresh stays free of Spark jobs).

Each append also carries, in its commit's userMetadata, a summary that the next refresh
reads from the log's last commit without a Spark job: per stage table, the refresh that last
logged it (so a refresh can tell a stage commit that was never logged: its refresh was
killed between the commit and its append, and the next refresh logs it from the commit's
own record), the refresh that last wrote the stage's view's table through it in one
statement (``AT_ONCE`` in the event's reason: it committed nothing to the stage's own
table), and the stage's recent costs.

The summary also keeps, per stage table, the record of a change that came to nothing
(``physical.records``): the versions the stage now reflects, kept here instead of in a
commit to the stage's table. It holds while the table stays at the version it names; any
commit to the table makes it stale, and its own commit's record is read again.

Appends are a compare-and-swap, like a stage's commit (``storage.concurrent``): each is
conditional on the log's version the summary was read at, so two refreshes that finish at
the same moment do not lose each other's summary; the loser reads the new summary and tries
again. Old entries are deleted at most once a day (``history.keep_days`` in ivm.yaml), by a
DELETE that is a compare-and-swap too.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta

from py4j.protocol import Py4JJavaError
from pyspark.errors import PySparkException
from sqlglot import exp

from ivm_sql.catalog import first_line
from ivm_sql.errors import RefreshError
from ivm_sql.sqlbuild import INTERNAL_PREFIX, col, ident, table, to_sql
from ivm_sql.storage import appends, concurrent, delta_log

NAME = f"{INTERNAL_PREFIX}_refresh_log"
# in a recompute's reason: it wrote its view's table in one statement, not its own
# (``physical.one_statement``)
AT_ONCE = "the view's table written in one statement"

# The columns, in order, with their Spark types.
COLUMNS: tuple[tuple[str, str], ...] = (
    ("refresh_id", "STRING"),  # one per refresh: when it started, and a random suffix
    ("refresh_clock", "TIMESTAMP"),  # the refresh's pinned current time
    ("view_name", "STRING"),  # db.view
    ("stage_table", "STRING"),  # the stage's Delta table
    ("stage_kind", "STRING"),  # bag, distinct, aggregate, recompute, fixpoint
    ("action", "STRING"),  # created, recomputed, incremental, failed
    ("strategy", "STRING"),  # incremental or full: what the stage ran
    ("reason", "STRING"),  # why it recomputed (or what its incremental refresh did)
    ("decided_by", "STRING"),  # what chose the strategy: history, analytic, or forced
    ("predicted_incremental_seconds", "DOUBLE"),  # the stage's history's guesses, if any
    ("predicted_full_seconds", "DOUBLE"),
    ("source_versions", "MAP<STRING, BIGINT>"),  # each table the stage reads -> version read
    ("rows_in", "BIGINT"),  # source rows changed since the stage's last refresh
    ("rows_out", "BIGINT"),  # rows of the stage's table inserted, updated or deleted
    ("files_read", "BIGINT"),  # files the change's key bounds opened (NULL: none bounded)
    ("files_total", "BIGINT"),  # files of those bounded tables
    ("plan_seconds", "DOUBLE"),  # reading logs and deciding
    ("change_seconds", "DOUBLE"),  # computing the change (a recompute: one given up for it)
    ("write_seconds", "DOUBLE"),  # the MERGE, or the recompute
    ("seconds", "DOUBLE"),  # all of the stage
    ("statements", "INT"),  # SQL statements sent to Spark
    ("spark_jobs", "INT"),  # Spark jobs run (NULL: not counted)
    ("table_version", "BIGINT"),  # the stage table's version the refresh committed
    ("outcome", "STRING"),  # ok, error, or unlogged (committed by a refresh that never logged it)
    ("error", "STRING"),
    ("logged_at", "TIMESTAMP"),  # when the row was appended
)

OUTCOME_OK = "ok"
OUTCOME_ERROR = "error"
OUTCOME_UNLOGGED = "unlogged"

SAMPLES = 8  # recent incremental refreshes a stage's summary keeps
RECOMPUTES = 4  # recent recomputes it keeps
PRUNE_EVERY = timedelta(days=1)


@dataclass(frozen=True)
class Event:
    """One row of the log: what a refresh did to one stage."""

    refresh_id: str
    refresh_clock: datetime
    view_name: str
    stage_table: str
    stage_kind: str
    action: str
    strategy: str
    reason: str = ""
    decided_by: str | None = None
    predicted_incremental_seconds: float | None = None
    predicted_full_seconds: float | None = None
    source_versions: dict[str, int] = field(default_factory=dict)
    rows_in: int | None = None
    rows_out: int | None = None
    files_read: int | None = None
    files_total: int | None = None
    plan_seconds: float | None = None
    change_seconds: float | None = None
    write_seconds: float | None = None
    seconds: float | None = None
    statements: int | None = None
    spark_jobs: int | None = None
    table_version: int | None = None
    outcome: str = OUTCOME_OK
    error: str | None = None


@dataclass
class StageCosts:
    """What the summary keeps of one stage: the refresh that last logged it, its recent
    incremental refreshes as (source rows changed, seconds), its recent recomputes' seconds,
    and its first load's seconds apart from them (``created``): a first load also creates
    the table, often on a JVM still cold, so it says less of what a recompute costs.
    ``through``: the refresh that last logged a recompute of it that wrote its view's table
    in one statement instead of its own (``AT_ONCE``)."""

    last: str = ""
    incremental: list[list[float]] = field(default_factory=list)
    full: list[float] = field(default_factory=list)
    created: float | None = None
    through: str = ""

    def add(self, event: Event, committed: bool = True) -> None:
        """Add ``event``; not ``committed``: its record was kept beside the stage's table
        (``Summary.recorded``), so the stage's newest commit is still the one logged last."""
        if event.outcome == OUTCOME_OK and AT_ONCE in (event.reason or ""):
            self.through = event.refresh_id
        elif committed:
            self.last = event.refresh_id
        if event.outcome != OUTCOME_OK or event.seconds is None:
            return
        if event.action == "created":
            self.created = _recompute_seconds(event)
        elif event.strategy == "full":
            self.full = [*self.full, _recompute_seconds(event)][-RECOMPUTES:]
        else:
            sample = [float(event.rows_in or 0), event.seconds]
            self.incremental = [*self.incremental, sample][-SAMPLES:]


def _logged_by(costs: StageCosts) -> tuple[str, str]:
    """The refreshes whose events for the stage the summary holds last."""
    return costs.last, costs.through


def _recompute_seconds(event: Event) -> float:
    """A recompute's seconds, less a change computed first and then given up for it (the
    scans rule's, ``physical.cost``): what the recompute costs when chosen before that."""
    return event.seconds - (event.change_seconds or 0.0)


@dataclass
class Summary:
    """The summary an append carries (see the module's docstring). ``version``: the log's
    version it was read at (-1: the log does not exist); ``committed``: when the commit
    holding it was made (ms since the epoch; 0: none)."""

    stages: dict[str, StageCosts] = field(default_factory=dict)
    pruned: int = 0  # when entries were last deleted (ms since the epoch)
    version: int = -1
    committed: int = 0
    # stage table -> {"version": its table's version, "record": the record that holds there}
    recorded: dict[str, dict] = field(default_factory=dict)

    def after(
        self,
        events: list[Event],
        refresh_id: str,
        pruned: int | None = None,
        recorded: dict[str, dict] | None = None,
    ) -> dict:
        """The record of an append of ``events``: this summary with them added, and with the
        records of changes that came to nothing (``recorded``) in place of those of the same
        stages before; a stage the events wrote otherwise loses its own."""
        recorded = recorded or {}
        stages = {name: StageCosts(**asdict(costs)) for name, costs in self.stages.items()}
        for event in events:
            committed = event.stage_table not in recorded
            stages.setdefault(event.stage_table, StageCosts()).add(event, committed)
        written = {event.stage_table for event in events}
        kept = {t: r for t, r in self.recorded.items() if t not in written}
        kept.update(recorded)
        return {
            "log": 1,
            "refresh": refresh_id,
            "pruned": self.pruned if pruned is None else pruned,
            "stages": {name: asdict(costs) for name, costs in sorted(stages.items())},
            "recorded": dict(sorted(kept.items())),
        }

    def record_of(self, table: str, latest: int | None, record: dict) -> dict:
        """The stage's newest record: the one this summary keeps for it, while its table is
        still at the version that one names (``latest``), else ``record``, its commit's."""
        kept = self.recorded.get(table)
        if kept is not None and latest is not None and kept.get("version") == latest:
            return kept["record"]
        return record

    @classmethod
    def from_record(cls, record: dict, version: int, committed: int) -> Summary:
        stages = {
            name: StageCosts(
                str(costs.get("last", "")),
                [list(map(float, s)) for s in costs.get("incremental", [])],
                [float(s) for s in costs.get("full", [])],
                None if costs.get("created") is None else float(costs["created"]),
                str(costs.get("through", "")),
            )
            for name, costs in (record.get("stages") or {}).items()
        }
        return cls(
            stages,
            int(record.get("pruned") or 0),
            version,
            committed,
            dict(record.get("recorded") or {}),
        )


def table_in(database: str) -> str:
    return f"{database}.{NAME}"


def read_summary(log: delta_log.DeltaLog, name: str, look_back: int = 20) -> Summary:
    """The summary of the log's newest append (read from its Delta log: no Spark job)."""
    if not log.exists(name):
        return Summary()
    latest = log.latest_version(name)
    for version in range(latest, max(-1, latest - look_back), -1):
        commit = log.commit(name, version)
        if commit.record is not None and commit.record.get("log") == 1:
            return Summary.from_record(commit.record, latest, commit.timestamp)
    return Summary(version=latest)


@dataclass(frozen=True)
class Batch:
    """One refresh's events, for one append to the log ``name``; ``keep_days``: how long
    entries are kept (None: for ever), before ``clock``, the refresh's; ``properties``: the
    log table's, should this append create it."""

    name: str
    refresh_id: str
    events: list[Event]
    clock: datetime
    keep_days: int | None = None
    properties: dict[str, str] = field(default_factory=dict)
    recorded: dict[str, dict] = field(default_factory=dict)  # ``Summary.recorded``'s new ones


def append(spark, log: delta_log.DeltaLog, batch: Batch) -> None:
    """Append the batch's events in one commit carrying the new summary; first, once a day,
    delete the entries older than its ``keep_days``. A row another refresh already logged
    for this refresh (it found the stage's commit unlogged while this one was still running)
    is left out, so no stage is logged twice."""
    for _ in range(concurrent.ATTEMPTS):
        try:
            if _append_once(spark, log, batch):
                return
        except (PySparkException, Py4JJavaError) as error:
            if not concurrent.is_conflict(error):
                raise RefreshError(
                    f"{batch.name}: the refresh log could not be written: {first_line(error)}",
                    hint="the views were refreshed; to stop logging, set history: {log: false} in ivm.yaml",
                ) from None
    raise RefreshError(
        f"{batch.name}: other refreshes appended to the refresh log first {concurrent.ATTEMPTS} times in a row",
        hint="the views were refreshed; this refresh is missing from the log",
    )


def _append_once(spark, log: delta_log.DeltaLog, batch: Batch) -> bool:
    """One try: False when another refresh's commit landed first."""
    name, refresh_id, clock = batch.name, batch.refresh_id, batch.clock
    created = not log.exists(name)
    if created:
        spark.sql(to_sql(create_statement(name, batch.properties), pretty=False))
    summary = read_summary(log, name)
    pruned = None
    if (
        batch.keep_days is not None
        and _ms(clock) - summary.pruned >= PRUNE_EVERY.total_seconds() * 1000
    ):
        pruned = _ms(clock)
        record = summary.after([], refresh_id, pruned)
        # a DELETE that finds nothing to delete commits nothing: then the append says when;
        # a log this append made holds nothing yet (its DELETE would cost a Spark job)
        if not created and _committed(
            spark, log, name, summary.version, record, _prune(name, clock, batch.keep_days)
        ):
            if not _is_own(log, name, record):
                return False
            summary = read_summary(log, name)
    own = [
        e
        for e in batch.events
        if refresh_id not in _logged_by(summary.stages.get(e.stage_table, StageCosts()))
    ]
    if not own:
        return True
    record = summary.after(own, refresh_id, pruned, batch.recorded)
    insert = insert_statement(name, own, datetime.now(UTC))
    return _committed(spark, log, name, summary.version, record, insert) and _is_own(
        log, name, record
    )


def _committed(
    spark, log: delta_log.DeltaLog, name: str, read_at: int, record: dict, statement: exp.Expression
) -> bool:
    """Run ``statement`` as a compare-and-swap on the log's version ``read_at`` (Delta skips
    it when another commit landed first); whether any commit landed since ``read_at``."""
    with delta_log.commit_record(spark, record, read_at + 1):
        if appends.applies(spark, statement):  # the append, without the id's state computation
            appends.commit(spark, log, statement)
        else:
            spark.sql(to_sql(statement, pretty=False))
    return log.latest_version(name) > read_at


def _is_own(log: delta_log.DeltaLog, name: str, record: dict) -> bool:
    """Whether the log's newest commit is the one carrying ``record``."""
    return log.commit(name, log.latest_version(name)).record == {"ivm": 1, **record}


def create_statement(name: str, properties: dict[str, str] | None = None) -> exp.Create:
    schema = exp.Schema(
        this=table(name),
        expressions=[
            exp.ColumnDef(this=ident(column), kind=exp.DataType.build(kind, dialect="spark"))
            for column, kind in COLUMNS
        ],
    )
    return exp.Create(
        this=schema,
        kind="TABLE",
        exists=True,
        properties=exp.Properties(
            expressions=[
                exp.FileFormatProperty(this=exp.var("DELTA")),
                *(
                    exp.Property(this=exp.Literal.string(key), value=exp.Literal.string(value))
                    for key, value in (properties or {}).items()
                ),
            ]
        ),
    )


def insert_statement(name: str, events: list[Event], logged_at: datetime) -> exp.Insert:
    rows = [
        exp.Tuple(
            expressions=[
                _typed(value, kind)
                for value, (_, kind) in zip(
                    [*asdict(event).values(), logged_at], COLUMNS, strict=True
                )
            ]
        )
        for event in events
    ]
    target = exp.Schema(this=table(name), expressions=[ident(c) for c, _ in COLUMNS])
    return exp.Insert(this=target, expression=exp.Values(expressions=rows))


def _prune(name: str, clock: datetime, keep_days: int) -> exp.Delete:
    oldest = clock - timedelta(days=keep_days)
    return exp.Delete(
        this=table(name),
        where=exp.Where(
            this=exp.LT(this=col("refresh_clock"), expression=_typed(oldest, "TIMESTAMP"))
        ),
    )


def _typed(value: object, kind: str) -> exp.Expression:
    """``value`` as a SQL literal of column type ``kind``."""
    if value is None:
        literal: exp.Expression = exp.null()
    elif isinstance(value, dict):
        literal = (
            exp.VarMap(
                keys=exp.Array(expressions=[exp.Literal.string(k) for k in value]),
                values=exp.Array(expressions=[exp.Literal.number(v) for v in value.values()]),
            )
            if value
            else exp.Anonymous(this="map")
        )
    elif isinstance(value, datetime):  # as microseconds: whatever the session's time zone
        micros = exp.Literal.number(round(value.timestamp() * 1_000_000))
        return exp.Anonymous(this="timestamp_micros", expressions=[micros])
    elif isinstance(value, int | float):
        literal = exp.Literal.number(repr(value))
    else:
        literal = exp.Literal.string(str(value))
    return exp.cast(literal, exp.DataType.build(kind, dialect="spark"))


def _ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)
