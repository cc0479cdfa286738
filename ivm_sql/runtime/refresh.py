"""One refresh: pin source versions, then bring every stage of every view up to date.

For each stage: if its sources are at the versions its table records, nothing runs;
otherwise one MERGE applies the consolidated change between the recorded and pinned
versions, and records the pinned ones in the same commit. A stage is recomputed instead,
with the reason shown, when it must be (``physical.recompute``: it is new, its definition
changed, a table it reads was recomputed, a source's history is gone or holds a change the
change data feed does not describe, ...) or when the cost model (``physical.cost``) finds
recomputing cheaper than applying the change. A view's refresh policy (``physical.policy``)
turns the cost model off, or refuses, before any of the view's stages is written, a
recompute an INCREMENTAL STRICT view does not allow.

Each stage's commit lands only if no other refresh committed to the table since the record
it read; when another did, the stage is looked at again (``storage.concurrent``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

from py4j.protocol import Py4JJavaError
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame
from sqlglot import exp

from ivm_sql.catalog import first_line
from ivm_sql.compiler.plan import ViewPlan, overwrite_table, stages_above, stored_columns
from ivm_sql.config import RefreshSettings
from ivm_sql.errors import RefreshError
from ivm_sql.incremental import extremes, top_k
from ivm_sql.incremental.stages import FixpointStage, RecomputeStage, Stage, TopKStage
from ivm_sql.incremental.temporal import CLOCK, clock_versions, micros, moment
from ivm_sql.incremental.versions import Pins, Versions
from ivm_sql.physical import (
    batches,
    bounds,
    execution,
    foresight,
    layout,
    materialize,
    one_statement,
    records,
)
from ivm_sql.physical.changes import SourceChanges
from ivm_sql.physical.cost import (
    ANALYTIC,
    COST_REASON,
    FORCED,
    SMALL_CHANGE,
    CheaperToRecompute,
    Choice,
    CostModel,
)
from ivm_sql.physical.recompute import Recomputes
from ivm_sql.physical.sizes import TableSizes
from ivm_sql.physical.snapshot_state import SnapshotStates
from ivm_sql.physical.view_table import WHOLE_OVERWRITE
from ivm_sql.refresh_policy import RefreshPolicy
from ivm_sql.runtime import fixpoint, workers
from ivm_sql.runtime.extremes import settled as settled_extremes
from ivm_sql.runtime.flagged import Settled
from ivm_sql.runtime.log_events import UNCHANGED, Recorder, StageOutcome
from ivm_sql.runtime.tally import Cost, Tally
from ivm_sql.runtime.top_k import refilled as refilled_top_k
from ivm_sql.sqlbuild import to_sql
from ivm_sql.storage import appends, concurrent, delta_log, history


@dataclass
class ViewReport:
    """What a refresh did to one view."""

    view: str
    action: str  # "created", "recomputed", "incremental", "unchanged"
    reason: str = ""
    rows_in: int = 0  # source rows changed since the view's last refresh
    rows_out: int = 0  # rows of the view's tables inserted, updated or deleted
    seconds: float = 0.0
    versions: dict[str, int] = field(default_factory=dict)  # base table -> version reflected
    now: datetime | None = None  # the time its filters on the current time were evaluated at
    # table -> [files the change's bounds opened, files in the table], over its stages' reads
    files_read: dict[str, list[int]] = field(default_factory=dict)
    # what its changed stages cost in Spark's units (``runtime.tally``); jobs None: not counted
    stages_changed: int = 0
    statements: int = 0
    jobs: int | None = 0

    def add_cost(self, cost: Cost) -> None:
        """Count a stage that changed, with its statements and jobs."""
        self.stages_changed += 1
        self.statements += cost.statements
        self.jobs = None if self.jobs is None or cost.jobs is None else self.jobs + cost.jobs

    def add_files_read(self, tally: dict[str, tuple[int, int]]) -> None:
        for table, (opened, total) in tally.items():
            counts = self.files_read.setdefault(table, [0, 0])
            counts[0] += opened
            counts[1] += total

    @property
    def strategy(self) -> str:
        return f"{self.action}" + (f" ({self.reason})" if self.reason else "")

    @property
    def bounded_reads(self) -> str:
        """``read 1 of 13 files of tpch.lineitem, ...``: what the change's bounds let it skip."""
        if not self.files_read:
            return ""
        return "read " + ", ".join(
            f"{opened} of {total} files of {table}"
            for table, (opened, total) in sorted(self.files_read.items())
        )


@dataclass(frozen=True)
class StageStart:
    """Where a refresh is, passed to ``on_stage`` as each stage begins (for progress)."""

    view: str
    view_number: int  # 1-based, in refresh order
    views: int
    table: str  # the stage's Delta table
    stage_number: int
    stages: int
    kind: str  # "bag", "distinct", "aggregate", "recompute", "fixpoint"


@dataclass(frozen=True)
class StageState:
    """What a stage table's log says as a refresh looks at it: whether it exists, its
    latest version, and the newest ivm record (and the version that holds it)."""

    exists: bool
    latest: int | None
    record_version: int | None
    record: dict


@dataclass
class Decision:
    """What a changed stage needs: a recompute, for ``reason``, or (reason None) the change
    between the recorded versions and the pins, over ``changed_rows`` source rows."""

    cost: CostModel  # the view's, under its refresh policy
    reason: str | None
    pins: Pins = field(default_factory=dict)
    changed_rows: int = 0
    choice: Choice = Choice(None, FORCED)  # how the cost model chose (``physical.cost``)
    change: exp.Query | None = None  # the change query, when the change is applied
    # what a recompute reads, where the scans rule weighs it (``physical.cost``): once per stage
    recompute_bytes: int | None = None
    # a view written in one statement before its stages: the rows that way was first chosen
    # for (``physical.one_statement``), which its record keeps
    decided_on: int | None = None


@dataclass(frozen=True)
class StageRecord:
    """What a stage's commit records in its userMetadata (``storage.delta_log``): the table
    ids and versions of its sources it reflects, its plan's fingerprint, the base tables'
    versions below it, the time its filters were evaluated at, whose project it is, and
    which refresh made it (``runtime.log_events``); for a view's table written in one
    statement, the stage tables it was written through (``physical.one_statement``)."""

    ids: dict[str, str | None]
    plan: str
    sources: dict[str, int]
    base: dict[str, int]
    now: int | None = None
    project: str | None = None
    refresh: str | None = None
    # stage table -> fingerprint: the stages read through their queries (``one_statement``)
    inlined: dict[str, str] = field(default_factory=dict)
    # the source rows changed when the analytic rules chose a recompute that writes the
    # view's table, in one statement or as its last stage (``one_statement``)
    decided_on: int | None = None

    def as_dict(self) -> dict:
        kept = {"ids": self.ids, "plan": self.plan, "sources": self.sources, "base": self.base}
        optional = {"now": self.now, "project": self.project, "refresh": self.refresh}
        if self.inlined:
            optional[one_statement.INLINED] = self.inlined
        optional[one_statement.DECIDED_ON] = self.decided_on
        return {**kept, **{k: v for k, v in optional.items() if v is not None}}

    def is_in(self, committed: dict) -> bool:
        """Whether ``committed``, a record read back from a commit, is this one."""
        return committed == {"ivm": 1, **self.as_dict()}


@contextmanager
def located(plan: ViewPlan) -> Iterator[None]:
    """A refresh error without a place of its own is placed at the view being refreshed."""
    try:
        yield
    except RefreshError as error:
        error.location = error.location or plan.view.location
        raise


class Refresher:
    """Refreshes plans in dependency order against one set of pinned source versions."""

    def __init__(
        self,
        spark,
        full: bool = False,
        cost: CostModel = CostModel.from_settings(RefreshSettings()),
        log: delta_log.DeltaLog | None = None,
        now: datetime | None = None,
        project: str | None = None,
        workers: int = 1,
        recorder: Recorder | None = None,
        commits_after: tuple[str, ...] = (),
    ):
        self.tally = Tally(spark)
        self.recorder = recorder  # the refresh event log's events (None: not logged)
        self._spark = spark
        self._sessions = threading.local()  # a worker thread's own session (``runtime.workers``)
        # views refreshed at once; a Spark Connect session cannot give each worker its own
        self.workers = workers if concurrent.has_own_sessions(spark) else 1
        self.project = project  # the project's folder, written in each record: whose state it is
        # "now" is pinned once per refresh, like the sources' versions: every stage that
        # compares with the current time sees the same instant.
        self.now = micros(now or datetime.now(UTC))
        self.now_of: dict[str, int] = {}  # ivm table -> the time it reflects, if it reads the clock
        self.iterations: dict[str, int] = {}  # recursive stage -> iterations its loop ran
        # MIN/MAX stage -> groups rescanned for a lost extreme; top-k stage -> 1: refilled
        self.reread: dict[str, int] = {}
        self.full = full
        self.cost = cost
        self.current: dict[str, int] = {}  # table -> version this refresh reads
        self.base_of: dict[str, dict[str, int]] = {}  # ivm table -> base versions it reflects
        self.feeds_on: set[str] = set()  # base tables whose change data feed this refresh checked
        self.ahead: set[str] = set()  # ivm tables a refresh that pinned newer versions got to first
        # tables committed to through Delta's transaction API (``storage.appends``), which reads
        # none of a table's state: the server does not compute it for them (``host.WarmSnapshots``)
        self.stateless_commits: set[str] = set()
        self.log = log if log is not None else delta_log.DeltaLog(spark)
        self.recomputes = Recomputes(self.log, self.current, full, self._run)
        self.changes = SourceChanges(self.tally.session(spark))
        self.sizes = TableSizes(self.tally.session(spark), self.log, self._run)
        # of the change data feeds ``changes`` keeps
        self.key_values = bounds.KeyValues(self.tally.session(spark))
        self.plan_of: dict[str, ViewPlan] = {}  # stage table -> the plan of its view
        self.read_above: set[str] = set()  # tables this refresh's stages read (``refresh``)
        # views' tables this refresh wrote in one statement (``physical.one_statement``)
        self.written_at_once: set[str] = set()
        self.lowest_changed: dict[str, str] = {}  # a view's table -> its first stage changed
        self._progress = threading.Lock()  # workers report the stages they begin one at a time
        # tables' snapshot states, computed beside the refresh as it decides to commit to them,
        # and those of the tables outside the plans it commits to after them (its event log)
        # whose commits read them
        self.states = SnapshotStates(spark)
        self.states_after = [t for t in commits_after if not appends.available(spark, t)]

    @property
    def spark(self):
        """This thread's session, its statements counted per stage (``runtime.tally``): the
        caller's, or a worker's own."""
        if not hasattr(self._sessions, "spark"):
            if threading.current_thread() is threading.main_thread() or self.workers == 1:
                self._sessions.spark = self.tally.session(self._spark)
            else:
                self._sessions.spark = self.tally.session(workers.worker_session(self._spark))
        return self._sessions.spark

    def refresh(
        self,
        plans: list[ViewPlan],
        on_view: Callable[[ViewReport], None] | None = None,
        on_stage: Callable[[StageStart], None] | None = None,
    ) -> list[ViewReport]:
        for plan in plans:  # pin every base table once, before any work
            for table in plan.base_tables:
                if table not in self.current:
                    with located(plan):
                        self.current[table] = self._run(
                            lambda: self.log.latest_version(table), table
                        )
        self.cost = self.cost.weighing(stages_above(plans))
        # the tables stages of this refresh read: a batch appended to one is handed up
        self.read_above = {t for plan in plans for stage in plan.stages for t in stage.sources}
        strict = [plan for plan in plans if plan.policy is RefreshPolicy.INCREMENTAL_STRICT]
        for plan in strict:  # before anything is written
            with located(plan):
                self.recomputes.check_strict(plan, self._newest_record)
        numbers = {id(plan): number for number, plan in enumerate(plans, 1)}
        by_name = {plan.view.name.lower(): plan for plan in plans}

        def refresh_one(plan: ViewPlan) -> ViewReport:
            started = (
                None
                if on_stage is None
                else (
                    lambda i, stage: self._started(
                        on_stage,
                        StageStart(
                            plan.name,
                            numbers[id(plan)],
                            len(plans),
                            stage.table,
                            i,
                            len(plan.stages),
                            stage.kind,
                        ),
                    )
                )
            )
            with located(plan):
                if plan in strict:  # again, now that the views it reads are refreshed
                    self.recomputes.check_strict(plan, self._newest_record)
                return self.refresh_view(plan, started)

        try:
            return workers.in_dependency_order(
                plans,
                lambda plan: [by_name[n] for n in plan.depends_on if n in by_name],
                refresh_one,
                self.workers,
                on_view,
            )
        finally:
            self.changes.close()
            self.states.close()

    def _will_write(self, table: str) -> None:
        """Have the state of ``table``, which this refresh has decided to commit to, and of
        the tables it commits to after its plans, computed beside it
        (``physical.snapshot_state``): while it computes the change, or runs the statement."""
        self.states.want(table, *self.states_after)

    def _appends_without_state(self, stage: Stage, state: StageState) -> bool:
        """Whether the stage's next commit is a batch appended through Delta's transaction
        API (``storage.appends``), which reads none of its table's state."""
        return (
            not self.full
            and batches.appends(stage, self.log, state.latest)
            and appends.available(self._spark, stage.table)
        )

    def _started(self, on_stage: Callable[[StageStart], None], start: StageStart) -> None:
        with self._progress:
            on_stage(start)

    def refresh_view(
        self, plan: ViewPlan, on_stage: Callable[[int, Stage], None] | None = None
    ) -> ViewReport:
        """``on_stage(number, stage)`` is called as each stage (numbered from 1) begins."""
        started = time.perf_counter()
        report = ViewReport(plan.name, "unchanged")
        own_tables = {stage.table for stage in plan.stages}
        self.plan_of.update(dict.fromkeys(own_tables, plan))
        for number, stage in enumerate(plan.stages, 1):
            if on_stage is not None:
                on_stage(number, stage)
            outcome = self._logged_stage(plan, stage, report, own_tables)
            action, reason = outcome.action, outcome.reason
            if action != "unchanged" and (
                report.action == "unchanged"
                or (report.action == "incremental" and not report.reason)
            ):
                report.action, report.reason = action, reason
            if plan.table in self.written_at_once:  # the stages above were read, not written
                break
        if plan.table not in self.ahead and (
            any(stage.table in self.recomputes.reshaped for stage in plan.stages)
            or not self.log.in_catalog(plan.name)
        ):
            self._create_user_view(plan)
        report.versions = dict(self.base_of[plan.table])
        if plan.table in self.now_of:
            report.now = moment(self.now_of[plan.table])
        report.seconds = time.perf_counter() - started
        return report

    def _logged_stage(
        self, plan: ViewPlan, stage: Stage, report: ViewReport, own_tables: set[str]
    ) -> StageOutcome:
        """``refresh_stage``, its cost added to the report, and what it did (or the error
        it raised) handed to the event log."""
        try:
            with self.tally.stage(stage.table) as cost:
                outcome = self.refresh_stage(stage, plan.fingerprint(stage), report, own_tables)
        except Exception as error:
            if self.recorder is not None:
                self.recorder.failed(plan.name, stage, error, cost)
            raise
        if outcome.action != "unchanged":
            report.add_cost(cost)
            if self.recorder is not None:
                self.recorder.ran(plan.name, stage, outcome, cost)
        return outcome

    def _create_user_view(self, plan: ViewPlan) -> None:
        """CREATE OR REPLACE VIEW; once more if another refresh created it at the same moment."""
        statement = to_sql(plan.user_view(), pretty=False)
        try:
            self._run(lambda: self.spark.sql(statement), plan.name)
        except concurrent.Overtaken:
            self._run(lambda: self.spark.sql(statement), plan.name)

    def refresh_stage(
        self, stage: Stage, fingerprint: str, report: ViewReport, own_tables: set[str]
    ) -> StageOutcome:
        """Bring one stage up to date; looked at again while other refreshes commit to its
        table first (``storage.concurrent``)."""
        rows_in = report.rows_in
        for _ in range(concurrent.ATTEMPTS):
            try:
                return self._refresh_stage(stage, fingerprint, report, own_tables)
            except concurrent.Overtaken:
                report.rows_in = rows_in
        raise RefreshError(
            f"{stage.table}: other refreshes of the same views committed to it first {concurrent.ATTEMPTS} times in a row",
            hint="run ivm refresh again when they are done",
        )

    def _refresh_stage(
        self, stage: Stage, fingerprint: str, report: ViewReport, own_tables: set[str]
    ) -> StageOutcome:
        """Decide what the stage needs, do it in one compare-and-swap commit, and describe
        what was done."""
        with self.tally.phase("plan"):
            state = self._state_of(stage)
            if self.recorder is not None:
                view = self.plan_of[stage.table].name
                self.recorder.unlogged(self.log, view, stage, state.record_version)
            ahead = self._ahead(stage, state.record)
            decision = (
                None if ahead else self._decide(stage, fingerprint, state, report, own_tables)
            )
        if ahead:
            self.ahead.add(stage.table)
        if decision is None:
            record = state.record if ahead else self._rebased(stage, fingerprint, state)
            self._adopt(stage.table, state.latest, record)
            return UNCHANGED
        rows_out, files = report.rows_out, {t: list(c) for t, c in report.files_read.items()}
        reason = self._execute(stage, fingerprint, state, decision, report, own_tables)
        action, described = self._describe(stage, state.exists, reason)
        return StageOutcome(
            action,
            described,
            decision.changed_rows,
            report.rows_out - rows_out,
            _files_opened(files, report.files_read),
            self.current.get(stage.table),  # None: the view's table was written instead
            {t: self.current[t] for t in stage.sources},
            decision.choice.decided_by,
            decision.choice.prediction and decision.choice.prediction.seconds,
        )

    def _state_of(self, stage: Stage) -> StageState:
        exists = self._run(lambda: self.log.exists(stage.table), stage.table)
        if not exists:
            return StageState(False, None, None, {})
        latest, record_version, record = self.log.recorded(stage.table)
        return StageState(True, latest, record_version, self._newest(stage.table, latest, record))

    def _rebased(self, stage: Stage, fingerprint: str, state: StageState) -> dict:
        """The record of a stage none of whose sources moved, while the base tables below
        them did: a stage below it kept a record beside its table (its change came to
        nothing), so its rows, and this stage's, are right for the new base versions too.
        That record is kept beside this stage's table as well (``physical.records``), or
        ``ivm status`` would show it behind. Else (a stage behind a view written in one
        statement, whose sources did move) the record as it is."""
        recorded = state.record.get("sources", {})
        if (
            not state.exists
            or self.recorder is None
            or any(recorded.get(t) != self.current[t] for t in stage.sources)
            or self._base_versions(stage.sources) == state.record.get("base")
            or not records.kept_beside(True, state.record)
        ):
            return state.record
        record = self._record(stage, fingerprint).as_dict()
        self.recorder.record_beside(stage.table, state.latest, record)
        return record

    def _newest_record(self, stage: Stage) -> dict | None:
        """The stage's newest record; None when its table does not exist."""
        state = self._state_of(stage)
        return state.record if state.exists else None

    def _newest(self, table: str, latest: int | None, record: dict) -> dict:
        """The stage's newest record: one the event log keeps beside its table, while that
        table is at the version it names (``physical.records``), else its commit's. The
        compare-and-swap still counts from the commit's (``StageState.record_version``): a
        record kept beside adds no commit."""
        if self.recorder is None:
            return record
        return self.recorder.summary.record_of(table, latest, record)

    def _decide(
        self,
        stage: Stage,
        fingerprint: str,
        state: StageState,
        report: ViewReport,
        own_tables: set[str],
    ) -> Decision | None:
        """Recompute (and why), apply the change, or None: the stage is up to date. Counts
        the changed source rows into ``report``; refuses a STRICT view's recompute."""
        plan = self.plan_of[stage.table]
        cost = self.cost.under(plan.policy)
        recorded: dict[str, int] = state.record.get("sources", {})
        reason = self.recomputes.forced_reason(stage, fingerprint, state.exists, state.record)
        clock_moved = stage.reads_clock and state.record.get("now") != self.now
        if (
            reason is None
            and not clock_moved
            and all(recorded[t] == self.current[t] for t in stage.sources)
        ):
            return None
        if self._waits_for_view(plan, stage, state):
            return None
        decision = Decision(cost, reason)
        if reason is None and self._lowest_changed(plan, stage):
            self._decide_before_stages(plan, stage, decision, report)
            reason = decision.reason
        if reason is None:
            decision.pins = history.read_pins(self.log, recorded, self.current, stage.sources)
            changed = self._changed_rows(decision.pins)
            decision.changed_rows = sum(changed.values())
            report.rows_in += sum(
                rows for table, rows in changed.items() if table not in own_tables
            )
            decision.choice = cost.choose(
                stage.table, changed, lambda table: self.sizes.rows(table, self.current[table])
            )
            clock = clock_versions(state.record.get("now"), self.now)
            decision.change = stage.change_query({**decision.pins, CLOCK: clock})
            decision.reason = decision.choice.reason or self._least_scans_reason(
                stage, state, decision
            )
        self.recomputes.refuse_strict(plan, decision.reason, own_tables)
        return decision

    def _lowest_changed(self, plan: ViewPlan, stage: Stage) -> bool:
        """Whether ``stage`` is the first of its view's stages this refresh finds changed:
        those below it are up to date (TPC-H Q20's lowest stage reads ``part`` and
        ``partsupp``, which its update sets leave alone; its ``lineitem`` sums change)."""
        return self.lowest_changed.setdefault(plan.table, stage.table) == stage.table

    def _decide_before_stages(
        self, plan: ViewPlan, first: Stage, decision: Decision, report: ViewReport
    ) -> None:
        """Choose, as the view's lowest changed stage (``first``) is reached, to write the
        view's table in one statement over what lies below it before any stage is refreshed
        (``physical.one_statement``): when its last refresh found its change dearer than
        that and this change is as large (``early_reason``), or when a loss is foreseen
        (``_foreseen_loss``). The reason, the rows counted into ``report``, and the rows the
        way was first chosen for, into ``decision``. Only where the cost model chooses, and
        no INCREMENTAL STRICT view above would fail."""
        top = plan.stages[-1]
        above = decision.cost.above.get(first.table)
        if decision.cost.recompute_above is None or (above and above.strict_view is not None):
            return
        record = self._newest_record(top)
        if not record or self._ahead(top, record):
            return
        changed = self._changed_base_rows(record)
        reason = decided_on = None
        if record.get(one_statement.DECIDED_ON) is not None:
            defined = {s.table: plan.fingerprint(s) for s in plan.stages}
            reason = one_statement.early_reason(record, defined, changed, plan.stages, first)
            decided_on = record[one_statement.DECIDED_ON] if reason is not None else None
        if reason is None and not record.get(one_statement.INLINED):
            reason = self._foreseen_loss(plan, first, decision.cost, changed)
        if reason is not None:
            decision.reason, decision.choice = reason, Choice(reason, ANALYTIC)
            decision.changed_rows, decision.decided_on = changed, decided_on
            report.rows_in += changed

    def _foreseen_loss(
        self, plan: ViewPlan, first: Stage, cost: CostModel, changed_base: int
    ) -> str | None:
        """Why a stage above ``first``, the view's lowest changed stage, will lose to a
        recompute at its turn, weighed now by the rules it will meet then
        (``one_statement.foreseen_reason``): its change with each change data feed of a stage
        below stood in for by that stage's change query (``physical.foresight``); or why the
        view's changed stages, all of them together, cost more than its SELECT in one
        statement (the statements rule, ``physical.cost``, over ``changed_base`` rows changed
        in the base tables). None when neither is foreseen, or a record cannot tell (it must
        be recomputed anyway, or a stage below has commits the stages above it have not
        read)."""
        if not one_statement.inlinable(plan.stages, first):
            return None
        written: dict[str, int] = {}  # a stage's latest version, which the stages above read
        below: dict[str, exp.Query] = {}  # a stage's change query, over the kept feeds
        analytic = True  # no stage's history chooses its way at its turn
        reads: dict[str, int | None] = {}  # what each stage's change reads, once weighed
        for stage in plan.stages:
            state = self._state_of(stage)
            if not state.exists or self.recomputes.forced_reason(
                stage, plan.fingerprint(stage), True, state.record
            ):
                return None
            recorded = state.record["sources"]
            if any(recorded[t] != written[t] for t in stage.sources if t in written):
                return None
            base = [t for t in stage.sources if t not in written]
            pins = {
                **history.read_pins(self.log, recorded, self.current, base),
                **{
                    t: Versions.at(v, v + 1 if t in below else v)
                    for t, v in written.items()
                    if t in stage.sources
                },
            }
            written[stage.table] = state.latest
            if not any(versions.changed for versions in pins.values()):
                continue
            clock = clock_versions(state.record.get("now"), self.now)
            change = stage.change_query({**pins, CLOCK: clock})
            if change is None:
                continue
            change = self.changes.rewrite(foresight.stand_in(change, below))
            below[stage.table] = change
            now = {**{t: self.current[t] for t in base}, **written}
            choice = cost.choose(
                stage.table,
                self._changed_rows({t: pins[t] for t in base}),
                lambda t: self.sizes.rows(t, now[t]),
            )
            if choice.decided_by != ANALYTIC:  # its history chooses at its turn
                analytic = False
                continue
            if stage is first:  # weighed at its turn, next
                continue
            reads[stage.table] = self._foreseen_reads(change, written)
            reason = choice.reason or cost.scan_reason(
                reads[stage.table],
                self.sizes.scanned_bytes(stage.initial_query(self._new_pins(stage, now))),
            )
            if reason is not None:
                return one_statement.foreseen_reason(reason, stage.table)
        if not analytic or not cost.weighs_statements(plan.table, changed_base):
            return None
        reason = cost.statements_reason(
            plan.table,
            changed_base,
            [
                reads[t] if t in reads else self._foreseen_reads(change, written)
                for t, change in below.items()
            ],
            [0 if t == plan.table else self.sizes.bytes(t, written[t]) for t in below],
            self.sizes.scanned_bytes(self._at_once_query(plan, first)[0]),
        )
        return None if reason is None else f"{reason}; {one_statement.EARLY}"

    def _foreseen_reads(self, change: exp.Query, written: dict[str, int]) -> int | None:
        """The bytes a stage's foreseen ``change`` reads, bounded by the keys the kept feeds
        hold, its stand-ins' reads left out (``physical.foresight``); a stage's next version
        (the one its write will make) sized as its last (``written``)."""
        size = foresight.as_written(self.sizes.bytes, written)
        files = foresight.as_written(self.sizes.files, written)
        change, bounded = bounds.bounded(self.key_values, change, size, feeds_only=True)
        return foresight.outside(change, bounded, size, files)

    def _changed_base_rows(self, record: dict) -> int:
        """Rows changed in the base tables below a view since the versions its table's
        ``record`` reflects, from Delta's commit metrics."""
        base = {t: v for t, v in record.get("base", {}).items() if t in self.current}
        return sum(
            self._changed_rows(history.read_pins(self.log, base, self.current, base)).values()
        )

    def _execute(
        self,
        stage: Stage,
        fingerprint: str,
        state: StageState,
        decision: Decision,
        report: ViewReport,
        own_tables: set[str],
    ) -> str | None:
        """Apply the change (or recompute) in one commit carrying the stage's new record,
        conditional on the record it read (the compare-and-swap); a change that cannot be
        read or costs more than a recompute falls back to one. Returns the recompute's
        reason, None for an applied change."""
        reason = decision.reason
        plan = self.plan_of[stage.table]
        if self._at_once(plan, stage, reason):
            return self._write_view_at_once(plan, stage, reason, report, decision)
        if state.exists and (reason is not None or not self._appends_without_state(stage, state)):
            self._will_write(stage.table)
        if reason is not None:
            with self.tally.phase("write"):  # part of the recompute (``_recompute``)
                self._enable_change_feeds(stage.sources)
            self.recomputes.note(stage, reason)
        record = self._record(stage, fingerprint)
        if self._lost_at_the_top(plan, stage, decision, reason) and state.exists:
            record = replace(record, decided_on=self._changed_base_rows(state.record))
        before = state.latest if state.exists else -1
        loaded = None  # rows a recompute wrote: a property change may follow it as the last commit
        appended = None  # the rows of an appended batch a stage above reads next
        # The compare-and-swap: this commit's txn version is one above the record's commit.
        txn_version = (state.record_version if state.record_version is not None else before) + 1
        try:
            with delta_log.commit_record(self.spark, record.as_dict(), txn_version):
                if reason is not None:
                    loaded = self._recompute(stage, state.exists, fingerprint)
                else:
                    try:
                        files, appended = self._apply_change(stage, state.latest, decision)
                        report.add_files_read(files)
                    except history.HistoryGone:  # nothing was committed: recompute instead
                        reason = history.gone_reason(history.changed_ranges(decision.pins))
                        self.recomputes.refuse_strict(plan, reason, own_tables)
                        loaded = self._recompute(stage, state.exists, fingerprint)
                    except CheaperToRecompute as cheaper:  # nor here: what the change reads decided
                        reason = str(cheaper)
                        if self._at_once(plan, stage, reason) or self._lost_at_the_top(
                            plan, stage, decision, reason
                        ):
                            raise  # out of this stage's commit, whose record changes
                        loaded = self._recompute(stage, state.exists, fingerprint)
                if self.log.latest_version(stage.table) == before:
                    # The change consolidated to nothing and Delta committed nothing: record the
                    # new versions anyway, or every later refresh would read them again.
                    if records.kept_beside(self.recorder is not None, state.record):
                        self.recorder.record_beside(stage.table, before, record.as_dict())
                        self._adopt(stage.table, before, record.as_dict())
                        return None
                    with self.tally.phase("write"):
                        self._run(lambda: self._record_only(stage.table), stage.table)
        except CheaperToRecompute as cheaper:  # nothing of the stage was committed
            if self._at_once(plan, stage, str(cheaper)):
                return self._write_view_at_once(plan, stage, str(cheaper), report, decision)
            decision.reason = str(cheaper)  # the view's last stage: recomputed, as decided now
            return self._execute(stage, fingerprint, state, decision, report, own_tables)
        last = self._landed(stage.table, before, record)
        if appended is not None and last.version == before + 1:  # that batch, and only it
            self.changes.offer(stage.table, last, appended)
        self.current[stage.table] = last.version
        self.base_of[stage.table] = record.base
        self._keep_time(stage.table, record.now)
        report.rows_out += last.rows_changed if loaded is None else loaded
        if reason is not None:
            self.recomputes.recomputed.add(stage.table)
        return reason

    def _record(self, stage: Stage, fingerprint: str) -> StageRecord:
        """What the stage's commit records: the versions (and time) it will reflect."""
        return StageRecord(
            ids={t: self.log.table_id(t) for t in stage.sources},
            plan=fingerprint,
            sources={t: self.current[t] for t in stage.sources},
            base=self._base_versions(stage.sources),
            now=self._now_for([stage], stage.sources),
            project=self.project,
            refresh=self.recorder.refresh_id if self.recorder is not None else None,
        )

    def _describe(self, stage: Stage, existed: bool, reason: str | None) -> tuple[str, str]:
        """The report's (action, reason) for a stage that was written: a recompute, or any
        partial one, is shown, never silent."""
        if isinstance(stage, FixpointStage):  # how long the loop ran is part of what happened
            iterations = self.iterations.get(stage.table, 0)
            loop = f"fixed point in {iterations} iteration{'' if iterations == 1 else 's'}"
            if reason is None:
                return "incremental", loop
            reason = f"{reason}; {loop}"
        if reason is not None:
            return ("created" if not existed else "recomputed"), reason
        if self.reread.get(stage.table) and isinstance(stage, TopKStage):
            return "incremental", top_k.REFILLED
        if self.reread.get(stage.table):
            groups = self.reread[stage.table]
            return (
                "incremental",
                f"rescanned {groups} group{'' if groups == 1 else 's'} whose MIN/MAX lost its last row",
            )
        if isinstance(stage, RecomputeStage):
            return ("recomputed" if stage.recomputes_all else "incremental"), stage.strategy
        return "incremental", ""

    def _recompute(
        self, stage: Stage, exists: bool, fingerprint: str, initial: exp.Select | None = None
    ) -> int:
        """Load the stage's whole content at the pinned versions into its table (``initial``:
        from that query instead of the stage's own); the rows written. All of it is the
        stage's "write" phase: what a recompute costs when chosen before any change is
        computed (``physical.learned`` learns it apart from a change computed first and then
        given up)."""
        with self.tally.phase("write"):
            initial = self._initial(stage) if initial is None else initial
            small = self.sizes.is_small(initial, recompute=True)
            ordered, order_settings = layout.key_ordered(
                initial, self.plan_of[stage.table].key_order(stage), self.sizes.read_bytes(initial)
            )
            with (
                execution.for_small_data(self.spark, enabled=small),
                execution.session_settings(self.spark, {**WHOLE_OVERWRITE, **order_settings}),
                self._solved(stage, ordered) as initial,
            ):
                created = not exists or stage.table in self.recomputes.reshaped
                statement = (
                    self.plan_of[stage.table].create_table(stage, initial)
                    if created
                    else overwrite_table(stage, initial)
                )
                self._run(lambda: self.spark.sql(to_sql(statement, pretty=False)), stage.table)
            latest = self.log.latest_version(stage.table)
            loaded = self.log.commit(stage.table, latest).rows_changed
            mapped = created and layout.needs_column_mapping(stored_columns(stage, initial))
            properties = layout.properties_after_load(loaded, created_mapped=mapped)
            if properties:
                self._run(
                    lambda: delta_log.set_properties(self.spark, stage.table, properties),
                    stage.table,
                )
            return loaded

    @staticmethod
    def _lost_at_the_top(
        plan: ViewPlan, stage: Stage, decision: Decision, reason: str | None
    ) -> bool:
        """Whether the analytic rules chose to recompute the view's last stage for
        ``reason``, over stages below that its whole SELECT could have read through: its
        record then keeps the rows changed, and a change as large is decided before any
        stage (``one_statement.early_reason``)."""
        return (
            reason is not None
            and reason.startswith(COST_REASON)
            and decision.choice.decided_by == ANALYTIC
            and stage is plan.stages[-1]
            and one_statement.inlinable(plan.stages, plan.stages[0])
        )

    def _at_once(self, plan: ViewPlan, stage: Stage, reason: str | None) -> bool:
        """Whether recomputing ``stage`` for ``reason`` writes the view's table in one
        statement instead (``physical.one_statement``): not when a refresh that pinned newer
        versions wrote the view's table first (this one then goes stage by stage, and finds
        it there)."""
        if not one_statement.writes_view_at_once(reason, plan.stages, stage):
            return False
        state = self._state_of(plan.stages[-1])
        return not (state.exists and self._ahead(plan.stages[-1], state.record))

    def _write_view_at_once(
        self,
        plan: ViewPlan,
        first: Stage,
        reason: str,
        report: ViewReport,
        decision: Decision,
    ) -> str:
        """Write the view's table from its SELECT over what lies below ``first``, in one
        compare-and-swap commit that records the tables that statement read, the stages it
        read through their queries (those stages are left as they are, behind) and, where
        the analytic rules chose this way, the source rows changed it was chosen for: those
        since the view's last record, or those ``decision`` carries from an earlier choice
        (``physical.one_statement``). Returns the recompute's reason, as shown."""
        top = plan.stages[-1]
        written = plan.stages[plan.stages.index(first) :]
        inlined = {stage.table: plan.fingerprint(stage) for stage in written[:-1]}
        query, reads = self._at_once_query(plan, first)
        fingerprint = plan.fingerprint(top)
        state = self._state_of(top)
        decided_on = decision.decided_on
        if decided_on is None and decision.choice.decided_by == ANALYTIC and state.exists:
            decided_on = self._changed_base_rows(state.record)
        record = StageRecord(
            ids={t: self.log.table_id(t) for t in reads},
            plan=fingerprint,
            sources={t: self.current[t] for t in reads},
            base=self._base_versions(reads),
            now=self._now_for(written, reads),
            project=self.project,
            refresh=self.recorder.refresh_id if self.recorder is not None else None,
            inlined=inlined,
            decided_on=decided_on,
        )
        self.recomputes.note(top, reason)
        if state.exists:
            self._will_write(top.table)
        before = state.latest if state.exists else -1
        txn_version = (state.record_version if state.record_version is not None else before) + 1
        with delta_log.commit_record(self.spark, record.as_dict(), txn_version):
            loaded = self._recompute(top, state.exists, fingerprint, query)
        last = self._landed(top.table, before, record)
        self.current[top.table] = last.version
        self.base_of[top.table] = record.base
        self._keep_time(top.table, record.now)
        report.rows_out += loaded
        self.recomputes.recomputed.add(top.table)
        self.written_at_once.add(top.table)
        return f"{reason}; {one_statement.describe(len(inlined))}"

    def _at_once_query(self, plan: ViewPlan, first: Stage) -> tuple[exp.Select, tuple[str, ...]]:
        """The view's SELECT over what lies below ``first``, in one statement at the
        versions pinned now, and the tables it reads."""
        written = plan.stages[plan.stages.index(first) :]
        inlined = {stage.table for stage in written[:-1]}
        # Every table read here was read before, by the stages' last refreshes: their change
        # data feeds are on, and one turned off since is a commit the feed cannot describe,
        # which forces a recompute of every stage instead (``physical.recompute``).
        reads = tuple(dict.fromkeys(t for s in written for t in s.sources if t not in inlined))
        pins = {t: Versions.at(None, self.current[t]) for t in reads}
        query = plan.inlined_query(first, {**pins, CLOCK: clock_versions(None, self.now)})
        return query, reads

    def _waits_for_view(self, plan: ViewPlan, stage: Stage, state: StageState) -> bool:
        """Whether ``stage`` is the view's table, or a stage it was written through, by an
        earlier refresh's one statement (``physical.one_statement``), and every table that
        statement read is still at the version it recorded: the view is up to date, and the
        stages behind it wait until it changes."""
        top = plan.stages[-1]
        if stage is top:
            record = state.record
        elif self.log.exists(top.table):
            record = self.log.last_record(top.table)[1]
            if stage.table not in record.get(one_statement.INLINED, ()):
                return False
        else:
            return False
        return not self.full and one_statement.view_up_to_date(
            record,
            {s.table: plan.fingerprint(s) for s in plan.stages},
            {s.table for s in plan.stages if s.reads_clock},
            self.now,
            self.current,
            self.log.table_id,
        )

    def _ahead(self, stage: Stage, record: dict) -> bool:
        """Whether a refresh that pinned newer versions committed to the stage (its record is
        past this refresh's pins, for the same tables) or below it first. That refresh brings
        this stage and every stage above it further than this one can, so they are its."""
        recorded, ids = record.get("sources", {}), record.get("ids", {})
        # a view's table written in one statement records what that statement read instead
        # of its own sources (``physical.one_statement``): those count too, as far as this
        # refresh has pinned them
        read = [t for t in dict.fromkeys((*stage.sources, *recorded)) if t in self.current]
        return any(
            t in self.ahead
            or (recorded.get(t, -1) > self.current[t] and ids.get(t) == self.log.table_id(t))
            for t in read
        )

    def _adopt(self, table: str, version: int, record: dict) -> None:
        """Take a stage table as it stands at ``version``, with the versions ``record`` says."""
        self.current[table] = version
        self.base_of[table] = record.get("base", {})
        self._keep_time(table, record.get("now"))

    def _record_only(self, table: str) -> None:
        """A commit of no row carrying the stage's record (``storage.appends`` where it can)."""
        if appends.available(self.spark, table):
            appends.record_only(self.spark, self.log, table)
            self.stateless_commits.add(table)
        else:
            delta_log.record_only(self.spark, table)

    def _landed(self, table: str, before: int, record: StageRecord) -> delta_log.Commit:
        """The newest commit since ``before`` holding ``record``, this refresh's. Overtaken
        when another refresh's record is newer: Delta skipped this one's write (or will
        refuse what it builds on), as the txn version said."""
        for version in range(self.log.latest_version(table), before, -1):
            commit = self.log.commit(table, version)
            if commit.record is not None:
                if not record.is_in(commit.record):
                    raise concurrent.Overtaken(table)
                return commit
        raise concurrent.Overtaken(table)

    def _least_scans_reason(
        self, stage: Stage, state: StageState, decision: Decision
    ) -> str | None:
        """The scans rule before any of the change is computed (where the analytic rules
        decide): a recompute, when the change reads at least what a recompute reads whatever
        its keys bound (``bounds.least_reads``). Else None, and the rule weighs the change
        again once its keys are known (``_apply_change``)."""
        if decision.choice.decided_by != ANALYTIC or decision.change is None:
            return None
        decision.recompute_bytes = self.sizes.scanned_bytes(self._initial(stage))
        narrowed = bounds.least_reads(decision.change, self._own_version_sizes(state.latest))
        return decision.cost.scan_reason(
            self.sizes.scanned_bytes(decision.change, narrowed),
            decision.recompute_bytes,
            least=bool(narrowed),
        )

    def _own_version_sizes(self, own_version: int) -> Callable[[str, int | None], int | None]:
        """A table version's bytes, version None being the stage's own table as it stands
        (the one table a change reads so: its stored rows) at ``own_version``."""
        return lambda table, version: self.sizes.bytes(
            table, own_version if version is None else version
        )

    def _apply_change(
        self, stage: Stage, own_version: int, decision: Decision
    ) -> tuple[dict[str, tuple[int, int]], DataFrame | None]:
        """One MERGE of the stage's change (``decision.change``; None: no source changed),
        computed once; nothing when it is empty. A batch appended to a trace that no stage
        above reads in this refresh is computed by its INSERT alone (``materialize.INLINE``). ``own_version``: the stage table's latest
        version, which the MERGE reads. Join terms and touched-keys recomputes read large
        inputs bounded by the change's keys (``physical.bounds``). Raises ``HistoryGone``
        when a file of a source's change data feed is missing (VACUUM removed it), and
        ``CheaperToRecompute`` when the cost model's scans rule, with the bounds known, finds
        a recompute cheaper (where the analytic rules decide). Returns the files the bounds opened
        (``bounds.files_read``), and the rows appended when the write was a batch of them that
        a stage above reads in this refresh (``SourceChanges.offer``)."""
        if decision.change is None:
            return {}, None
        appended = None
        try:
            change, bounded = bounds.bounded(
                self.key_values,
                self.changes.rewrite(decision.change),
                self._own_version_sizes(own_version),
            )
            if decision.choice.decided_by == ANALYTIC:
                cheaper = decision.cost.scan_reason(
                    self.sizes.scanned_bytes(change, bounded), decision.recompute_bytes
                )
                if cheaper is not None:
                    raise CheaperToRecompute(cheaper)
            changed_rows = decision.changed_rows
            small = changed_rows <= SMALL_CHANGE and self.sizes.is_small(
                change, also=[(stage.table, own_version)]
            )
            way = materialize.way_for(
                changed_rows,
                appended_unread=stage.table not in self.read_above
                and batches.appends(stage, self.log, own_version),
            )
            with (
                execution.for_small_data(self.spark, enabled=small),
                self._solved(stage, change) as change,
                self._settled(stage, change, way == materialize.LOCAL) as settled,
                materialize.materialized(
                    self.spark, settled.query, settled.rows, way, settled.settings
                ) as staged,
            ):
                if staged.rows is None or staged.rows:  # None: the write computes it
                    merge_small = (
                        not small
                        and staged.rows is not None
                        and execution.is_small_merge(
                            staged.rows, self.sizes.bytes(stage.table, own_version)
                        )
                    )
                    with (
                        execution.for_small_data(self.spark, enabled=merge_small),
                        # a trace's rewrite replaces the whole table, whatever the session's
                        # partition overwrite mode
                        execution.session_settings(self.spark, WHOLE_OVERWRITE),
                        staged.reading(self.spark),
                        self.tally.phase("write"),
                    ):
                        statement = batches.write(stage, staged.query, self.log, own_version)
                        if appends.applies(self.spark, statement):
                            appends.commit(self.spark, self.log, statement)
                            self.stateless_commits.add(stage.table)
                        else:
                            self.spark.sql(to_sql(statement, pretty=False))
                    if batches.appends_change(stage, statement) and stage.table in self.read_above:
                        appended = staged.frame
            return bounds.files_read(bounded, self.sizes.files), appended
        except (PySparkException, Py4JJavaError) as error:
            if history.is_missing_file(error):
                raise history.HistoryGone() from None
            raise self._error(stage.table, error) from None

    def _changed_rows(self, pins: Pins) -> dict[str, int]:
        """Rows changed per input since the stage's versions, from Delta's commit metrics."""
        changed = dict.fromkeys(pins, 0)
        for table, (old, new) in history.changed_ranges(pins):
            changed[table] = sum(c.rows_changed for c in self.log.commits_between(table, old, new))
        return changed

    def _initial(self, stage: Stage) -> exp.Select:
        """The stage's whole content at the pinned versions and time: what a recompute runs
        (for a recursive stage, its loop's first iteration)."""
        return stage.initial_query(self._new_pins(stage))

    def _new_pins(self, stage: Stage, current: dict[str, int] | None = None) -> Pins:
        """The pins of a recompute: every source at this refresh's version (or ``current``'s)."""
        current = self.current if current is None else current
        pins = {t: Versions.at(None, current[t]) for t in stage.sources}
        return {**pins, CLOCK: clock_versions(None, self.now)}

    @contextmanager
    def _solved(self, stage: Stage, query: exp.Query) -> Iterator[exp.Query]:
        """For a recursive stage, the sum of its loop's iterations from ``query`` (read from
        memory inside the block); for any other, ``query`` itself."""
        if not isinstance(stage, FixpointStage):
            yield query
            return
        with fixpoint.solved(
            self.spark, stage.node, query, self._new_pins(stage), stage.table
        ) as solution:
            self.iterations[stage.table] = solution.iterations
            yield solution.query if solution.query is not None else query

    @contextmanager
    def _settled(self, stage: Stage, change: exp.Query, local: bool) -> Iterator[Settled]:
        """For an aggregate with MIN or MAX, its change with lost extremes rescanned; for a
        top-k, its change or, when its candidates ran out, their refill; with its row count
        when that change is already in memory (as local rows when ``local``). For any other
        stage, ``change``."""
        if isinstance(stage, TopKStage):
            settling = refilled_top_k(self.spark, stage, change, self._new_pins(stage), local)
        elif stage.aggregate is not None and extremes.calls(stage.aggregate):
            pins = self._new_pins(stage)
            settling = settled_extremes(self.spark, stage.aggregate, change, pins, local)
        else:
            yield Settled(change, 0, None)
            return
        with settling as settled:
            self.reread[stage.table] = settled.reread
            yield settled

    def _keep_time(self, table: str, now: int | None) -> None:
        if now is not None:
            self.now_of[table] = now

    def _base_versions(self, sources: Iterable[str]) -> dict[str, int]:
        base: dict[str, int] = {}
        for table in sources:
            base.update(self.base_of.get(table, {table: self.current[table]}))
        return base

    def _now_for(self, stages: Iterable[Stage], sources: Iterable[str]) -> int | None:
        """The time a commit of ``stages`` over ``sources`` reflects: this refresh's if one
        of them reads the clock, else the latest its sources reflect."""
        if any(stage.reads_clock for stage in stages):
            return self.now
        return max((self.now_of[t] for t in sources if t in self.now_of), default=None)

    def _enable_change_feeds(self, sources: Iterable[str]) -> None:
        for table in sources:
            if (
                table not in self.base_of and table not in self.feeds_on
            ):  # a base table, not one ivm writes
                self._run(lambda: delta_log.require_change_feed(self.spark, self.log, table), table)
                self.current[table] = self.log.latest_version(table)
                self.feeds_on.add(table)

    def _run(self, action, table: str):
        try:
            return action()
        except (PySparkException, Py4JJavaError) as error:
            raise self._error(table, error) from None

    @staticmethod
    def _error(table: str, error: PySparkException | Py4JJavaError) -> Exception:
        """Overtaken when a concurrent commit won, else the error as one message."""
        if concurrent.is_conflict(error):
            return concurrent.Overtaken(table)
        return RefreshError(f"{table}: {first_line(error)}")


def _files_opened(
    before: dict[str, list[int]], after: dict[str, list[int]]
) -> tuple[int, int] | None:
    """The files a stage's change bounds opened, of how many, from the view's running
    totals before and after it (None: it bounded no read)."""
    if before == after:
        return None
    opened = sum(c[0] for c in after.values()) - sum(c[0] for c in before.values())
    total = sum(c[1] for c in after.values()) - sum(c[1] for c in before.values())
    return opened, total
