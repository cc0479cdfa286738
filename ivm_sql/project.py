"""Project: the public Python API. Finds ivm.yaml, views and migrations; the CLI is a thin
layer over it.

    >>> project = Project.open("path/to/project")          # doctest: +SKIP
    >>> project.migrate(); project.refresh()                # doctest: +SKIP
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from sqlglot import exp

from ivm_sql import migrate as migrations
from ivm_sql.analysis_cache import FILE as ANALYSIS_FILE
from ivm_sql.analysis_cache import AnalysisCache, spark_identity
from ivm_sql.catalog import SparkCatalog, first_line
from ivm_sql.compiler.order import compile_views
from ivm_sql.compiler.plan import ViewPlan, rows_query, stages_above
from ivm_sql.compiler.reads import check_made_elsewhere
from ivm_sql.compiler.render import render
from ivm_sql.config import Config, load_config
from ivm_sql.dbt.models import DbtModels
from ivm_sql.dbt.settings import dbt_config, in_models_schema
from ivm_sql.errors import ConfigError, IvmError, SqlError
from ivm_sql.graph import Graph, project_graph, view_circuit
from ivm_sql.incremental.temporal import moment
from ivm_sql.locate import (
    CONFIG_FILE,
    DBT_PROJECT_FILE,
    SPEC_FILE_NAMES,
    find_spec,
    is_dbt_project,
    is_ivm_project,
)
from ivm_sql.physical import checkpoints
from ivm_sql.physical.cost import CostModel
from ivm_sql.pipelines import pipeline as pipelines
from ivm_sql.pipelines import streaming
from ivm_sql.pipelines.python_datasets import PythonDataset
from ivm_sql.pipelines.settings import pipeline_config
from ivm_sql.pipelines.sources import check_sources
from ivm_sql.pipelines.spec import PipelineSpec, load_spec
from ivm_sql.runtime import lifecycle, log_events, log_reports, workers
from ivm_sql.runtime import watch as watching
from ivm_sql.runtime.refresh import Refresher, StageStart, ViewReport
from ivm_sql.runtime.status import ViewStatus
from ivm_sql.runtime.verify import VerifyResult, verify_views
from ivm_sql.session import apply_refresh_settings
from ivm_sql.sqlbuild import alias, table, to_sql, use_database
from ivm_sql.storage import appends, concurrent, delta_log, refresh_log
from ivm_sql.viewdefs import ViewDef, load_views


@dataclass(frozen=True)
class CompiledStage:
    table: str
    kind: str  # "bag", "distinct", "aggregate", "recompute", "fixpoint"
    strategy: str  # as `ivm compile` shows it


@dataclass(frozen=True)
class CompiledView:
    view: str
    sql: str
    stages: tuple[CompiledStage, ...] = ()
    policy: str = "AUTO"  # its REFRESH POLICY (or the project's default)


@dataclass(frozen=True)
class QueryResult:
    columns: list[str]
    rows: list[tuple]


def _stored_rows(log: delta_log.DeltaLog, plan: ViewPlan) -> int | None:
    """The view's row count from its table's file statistics, when they give it exactly: the
    view reads every row of its table (no filter), each once (no weight above 1)."""
    output = plan.output
    if (
        output.where is not None
        or output.state is not None  # a trace of state deltas: its rows are not the view's
        or not isinstance(output.weight, (exp.Literal, exp.Column))
    ):
        return None
    once = output.weight.name if isinstance(output.weight, exp.Column) else None
    return log.row_count(output.table, log.latest_version(output.table), once=once)


def _count_key(plan: ViewPlan, log: delta_log.DeltaLog) -> tuple[str, str, int]:
    """What a view's row count depends on: the rows query of the view users read, and the
    version of the table it reads."""
    table_read = plan.output.table
    return to_sql(rows_query(plan.output), pretty=False), table_read, log.latest_version(table_read)


def _row_counts(spark, views: list[str]) -> list[int]:
    """Each view's row count, from one SELECT of one scalar subquery per view."""
    if not views:
        return []
    counts = [
        alias(
            exp.Subquery(this=exp.select(exp.Count(this=exp.Star())).from_(table(view))),
            f"c{i}",
        )
        for i, view in enumerate(views)
    ]
    return list(spark.sql(to_sql(exp.select(*counts), pretty=False)).collect()[0])


class Project:
    def __init__(
        self,
        root: Path,
        config: Config,
        spark=None,
        verbose: bool = False,
        spec: PipelineSpec | None = None,
        dbt: DbtModels | None = None,
    ):
        self.root = root
        self.config = config
        # a Spark Declarative Pipelines project's spec: its libraries are the views
        self.spec = spec
        # a dbt project's models: those marked materialized_view are the views
        self.dbt = dbt
        self.verbose = verbose
        self._spark = spark
        # query schemas analyzed by Spark and (table, Delta id, version) -> its columns, kept
        # across compiles, and across commands in .ivm when ivm builds the session itself
        own_spark = spark is None and config.spark.remote is None
        self._analysis = AnalysisCache(
            root / ".ivm" / ANALYSIS_FILE if own_spark else None,
            spark_identity(dict(config.spark.conf)),
        )
        self._plans: dict = {}  # view name -> (what its plan depends on, plan), kept across compiles
        self._locations: dict[str, str] = {}  # ivm's tables -> their folders, kept across refreshes
        # the version of each table this project's last refresh committed to (its stage tables
        # and its event log): the server has Delta compute their state before the next one
        # (ivm_sql.host.WarmSnapshots)
        self.written_versions: dict[str, int] = {}
        # those of them, and the event log, whose next commit is likely an append through Delta's
        # transaction API again, which reads none of the state: the server leaves it uncomputed
        self.stateless_tables: set[str] = set()
        # the views whose tables the last refresh wrote, for ``count_rows``; and each view's
        # last row count taken, with what it depends on (``_count_key``): one per view, so a
        # long-running server keeps no more than it has views
        self._written_views: list[ViewPlan] = []
        self._counted: dict[str, tuple[tuple[str, str, int], int]] = {}
        # whether what a refresh's next command does not need comes after the command, done by
        # another (``ivm server``'s WarmSnapshots): the tables' Delta checkpoints
        # (``physical.checkpoints``) and the refresh's append to the event log (``flush_log``)
        self.hosted = False
        # the event log append a hosted refresh left for later, run once by ``flush_log``
        self._pending_log: tuple[object, delta_log.DeltaLog, log_events.Recorder] | None = None
        self._log_guard = threading.Lock()
        # a hosted refresh's event log append that failed after its command: the next command
        # of the project says so (``ivm_sql.host``)
        self.log_error: IvmError | None = None

    @classmethod
    def open(cls, path: str | Path = ".", spark=None, verbose: bool = False) -> Project:
        """The project in ``path``: a folder holding ivm.yaml; a dbt project (its
        dbt_project.yml in ``path``: the models marked materialized_view are the views, dbt
        compiles them); or a Spark Declarative Pipelines project (a spark-pipeline.yml in
        ``path`` or, as spark-pipelines finds it, in an ancestor). An ivm.yaml beside a
        dbt_project.yml or a spec adds ivm's own settings. With ``spark``, that session
        (already configured for Delta) is used instead of building one."""
        root = Path(path).resolve()
        config_path = root / CONFIG_FILE
        if is_ivm_project(root):
            return cls(root, load_config(config_path), spark, verbose)
        if is_dbt_project(root):
            config = dbt_config(config_path if config_path.is_file() else None)
            models = DbtModels(root)
            schema, _ = models.views()  # dbt's errors before Spark starts
            return cls(root, in_models_schema(config, schema), spark, verbose, dbt=models)
        spec_path = find_spec(root)
        if spec_path is None:
            raise ConfigError(
                f"no {CONFIG_FILE} or {DBT_PROJECT_FILE} in {root}, nor a {SPEC_FILE_NAMES[1]} here or above",
                hint="run ivm in a project folder, or pass --project DIR",
            )
        spec, beside = load_spec(spec_path), spec_path.parent / CONFIG_FILE
        return cls(
            spec_path.parent,
            pipeline_config(spec, beside if beside.is_file() else None),
            spark,
            verbose,
            spec,
        )

    @property
    def database(self) -> str:
        return self.config.database

    @property
    def spark(self):
        if self._spark is None:
            from ivm_sql.session import build_session

            self._spark = build_session(self.config, self.root, verbose=self.verbose)
        return self._spark

    @property
    def cost_model(self) -> CostModel:
        """When a refresh recomputes a stage instead of applying its change (ivm.yaml refresh:)."""
        return CostModel.from_settings(self.config.refresh)

    def _cost_model(self, summary: refresh_log.Summary | None) -> CostModel:
        """The cost model, learning from the stages' history in the refresh log's summary
        when ivm.yaml's history.learn is on."""
        if summary is None or not self.config.history.learn:
            return self.cost_model
        return self.cost_model.learning_from(summary.stages, self.config.history.explore)

    @property
    def refresh_workers(self) -> int:
        """Views a refresh brings up to date at the same time (ivm.yaml refresh.workers)."""
        return self.config.refresh.workers or workers.default_workers()

    def _use_database(self) -> None:
        use_database(self.spark, self.database)

    def keep_warm(self, earlier: Project) -> None:
        """Take over what an earlier Project of the same folder and settings learned (the
        server's previous command, ``ivm_sql.host``): the compiled plans of views that did not
        change, the schemas Spark's analysis answered, the folders of ivm's tables. Each is
        keyed by what it depends on, as across the rounds of a watch."""
        if (
            earlier.root == self.root
            and earlier.config == self.config
            and earlier.spec == self.spec
            and earlier.dbt == self.dbt
        ):
            self._plans, self._analysis, self._locations, self._counted = (
                earlier._plans,
                earlier._analysis,
                earlier._locations,
                earlier._counted,
            )

    def save_analysis(self) -> None:
        """Keep what Spark's analysis answered in ``.ivm`` for the next command (when ivm
        built the session itself: see ``analysis_cache``)."""
        self._analysis.save()

    # views -----------------------------------------------------------------------------------

    def views(self) -> list[ViewDef]:
        if self.spec is not None:
            return list(self.pipeline().views)
        if self.dbt is not None:
            return list(self.dbt.views()[1])
        folder = self.config.folder(self.root, "views")
        return load_views(folder) if folder is not None else []

    def pipeline(self) -> pipelines.Pipeline:
        """The datasets of a pipeline project's library files, read anew (they may change
        between refreshes of one session)."""
        if self.spec is None:
            raise ConfigError(f"{self.root} is not a Spark Declarative Pipelines project")
        return pipelines.load_pipeline(self.spec)

    def python_datasets(self) -> tuple[PythonDataset, ...]:
        """The datasets of a pipeline project that ivm leaves to spark-pipelines (the Python ones)."""
        return self.pipeline().python if self.spec is not None else ()

    def notes(self) -> list[str]:
        """One line per dataset ivm leaves to spark-pipelines."""
        return [dataset.describe() for dataset in self.python_datasets()]

    def delta_log(self) -> delta_log.DeltaLog:
        """A reader of Delta logs for one command; what never changes is kept across them."""
        return delta_log.DeltaLog(self.spark, self._locations)

    def plans(
        self, names: Iterable[str] | None = None, log: delta_log.DeltaLog | None = None
    ) -> list[ViewPlan]:
        """Plans in dependency order: the named views and every view they read (all if None)."""
        views = self.views()  # first: a mistake in a views file is reported without starting Spark
        self._use_database()
        log = log if log is not None else self.delta_log()
        if self.spec is not None:
            check_sources(log, self.pipeline(), self.database)
        if self.dbt is not None:
            check_made_elsewhere(log, views, self.dbt.made_by_dbt(), self.database)
        catalog = SparkCatalog(self.spark, log, self._analysis.schemas, self._analysis.columns)
        plans = compile_views(
            views, catalog, self.database, self._plans, self.config.refresh.policy
        )
        if names is None:
            return plans
        by_name = {p.view.name: p for p in plans}
        wanted: set[str] = set()
        pending = [n.lower() for n in names]
        while pending:
            name = pending.pop()
            if name not in by_name:
                raise SqlError(
                    f"no view named {name}",
                    hint=f"views of this project: {', '.join(sorted(by_name)) or 'none'}",
                )
            if name not in wanted:
                wanted.add(name)
                pending.extend(by_name[name].depends_on)
        return [p for p in plans if p.view.name in wanted]

    # commands --------------------------------------------------------------------------------

    def migrate(self) -> list[migrations.FileResult]:
        return migrations.migrate(self.spark, self.config, self.root)

    def compile(self, views: str | Iterable[str] | None = None) -> list[CompiledView]:
        """The Spark SQL that maintains each view; nothing runs on data."""
        names = [views] if isinstance(views, str) else views
        selected = {n.lower() for n in names} if names is not None else None
        plans = self.plans(names)
        learning = self.config.history.log and self.config.history.learn
        self.flush_log()  # the last refresh's costs teach this plan's
        cost = self._cost_model(
            log_events.summary_of(self.delta_log(), self.database) if learning else None
        ).weighing(stages_above(plans))
        return [
            CompiledView(
                p.name,
                render(p, cost),
                tuple(CompiledStage(s.table, s.kind, s.strategy) for s in p.stages),
                str(p.policy),
            )
            for p in plans
            if selected is None or p.view.name in selected
        ]

    def graph(self, view: str | None = None) -> Graph:
        """The project's picture (the tables its views read, the views and their stages), or,
        given ``view``, that view's DBSP circuit; built from the plans, nothing runs on data."""
        if view is None:
            return project_graph(self.database, self.plans())
        plans = self.plans([view])
        chosen = next(p for p in plans if p.view.name == view.lower())
        return view_circuit(chosen, {p.table: p.name for p in plans})

    def refresh(
        self,
        views: Iterable[str] | None = None,
        full: bool = False,
        on_view: Callable[[ViewReport], None] | None = None,
        now: datetime | None = None,
        on_stage: Callable[[StageStart], None] | None = None,
    ) -> list[ViewReport]:
        """Bring views (and the views they read) up to date with all source changes.

        ``now``: the time a filter on the current time is evaluated at (default: the clock's).
        ``on_stage(start)`` is called as each stage begins, ``on_view(report)`` as each view ends."""
        return self._refresh(views, full, on_view, now, on_stage)[0]

    def _refresh(
        self,
        views: Iterable[str] | None,
        full: bool = False,
        on_view: Callable[[ViewReport], None] | None = None,
        now: datetime | None = None,
        on_stage: Callable[[StageStart], None] | None = None,
    ) -> tuple[list[ViewReport], watching.Pinned]:
        """``refresh``'s reports, and the version of each base table it brought the views to."""
        self.views()  # a mistake in a views file is reported before Spark starts
        log = self.delta_log()
        streamed, streams = self._refresh_streaming(log, full, on_view)
        names = (
            [n for n in views if n.lower() not in {r.view.rpartition(".")[2] for r in streamed}]
            if views is not None
            else None
        )
        clock = now or datetime.now(UTC)
        self.flush_log()  # an earlier refresh's, in this command: its costs teach this one's
        logging = self.config.history.log
        recorder = log_events.start(log, self.database, clock) if logging else None
        events_table = refresh_log.table_in(self.database)
        # the refresh's own session, its event log append's too: the commit record and txn
        # version are session settings, which a refresh in another thread must not touch
        session = concurrent.own_session(self.spark)
        apply_refresh_settings(session, self.spark)
        refresher = Refresher(
            session,
            full=full,
            cost=self._cost_model(recorder and recorder.summary),
            log=log,
            now=clock,
            project=str(self.root),
            workers=self.refresh_workers,
            recorder=recorder,
            # the server computes the log table's state between commands (``host``)
            commits_after=(events_table,)
            if recorder is not None and not self.hosted and log.exists(events_table)
            else (),
        )
        plans = self.plans(names, log)
        try:
            reports = refresher.refresh(plans, on_view, on_stage)
        except IvmError as error:  # what ran before the error is logged, and the error
            if recorder is not None:
                self._log_refresh(session, log, recorder, failed=error)
            raise
        self.written_versions = {
            stage.table: refresher.current[stage.table]
            for plan in plans
            for stage in plan.stages
            if stage.table in refresher.current
        }
        self._written_views = [p for p in plans if p.output.table in self.written_versions]
        self.stateless_tables = set(refresher.stateless_commits)
        if recorder is not None:
            with self._log_guard:
                self._pending_log = (session, log, recorder)
        if not self.hosted:
            self.written_versions.update(self.flush_log())
            checkpoints.write_due(log, self.written_versions)  # after the refresh's last commit
        return streamed + reports, {
            **streams,
            **{table: refresher.current[table] for plan in plans for table in plan.base_tables},
        }

    def flush_log(self) -> dict[str, int]:
        """Run the event log append the last refresh left (``hosted``: the server runs it
        between commands, and a command that takes this project over first waits for it);
        nothing when there is none. The log table's new version, when the append wrote one, for
        its checkpoint (and its state, where the append is a SQL INSERT whose txn version's
        check reads it: else it is among ``stateless_tables``). A hosted
        append that fails is kept in ``log_error``: its command has ended."""
        with self._log_guard:
            pending, self._pending_log = self._pending_log, None
            if pending is None:
                return {}
            session, log, recorder = pending
            try:
                self._log_refresh(session, log, recorder)
            except IvmError as error:
                if not self.hosted:
                    raise
                self.log_error = error
                return {}
            if not recorder.events:
                return {}
            events_table = refresh_log.table_in(self.database)
            if appends.available(session, events_table):
                self.stateless_tables.add(events_table)
            return {events_table: log.latest_version(events_table)}

    def _log_refresh(
        self,
        session,
        log: delta_log.DeltaLog,
        recorder: log_events.Recorder,
        failed: IvmError | None = None,
    ) -> None:
        """The refresh's append to the event log. When the refresh failed, its own error is
        the one raised, and one from the log is added to its hint."""
        keep_days = self.config.history.keep_days
        try:
            log_events.append(session, log, self.database, recorder, keep_days)
        except IvmError as error:
            if failed is None:
                raise
            failed.hint = "; ".join(filter(None, [failed.hint, str(error)]))

    def _refresh_streaming(
        self, log: delta_log.DeltaLog, full: bool, on_view: Callable[[ViewReport], None] | None
    ) -> tuple[list[ViewReport], watching.Pinned]:
        """Append to every streaming table of a pipeline project, before the views that may
        read them (each costs no Spark job when its source is unchanged); with the version of
        each source read before (a commit landing during the refresh starts the next round)."""
        if self.spec is None:
            return [], {}
        self._use_database()
        # read once: the library files are parsed anew on each call
        tables = self.pipeline().streaming
        sources = {streaming.qualified(t.source, self.database) for t in tables}
        pinned = {source: log.latest_version(source) for source in sources if log.exists(source)}
        reports = []
        for streamed_table in streaming.in_order(tables, self.database):
            reports.append(
                streaming.refresh_streaming(self.spark, log, self.database, streamed_table, full)
            )
            if on_view is not None:
                on_view(reports[-1])
        return reports, pinned

    def watch(
        self,
        views: Iterable[str] | None = None,
        every: float = 10.0,
        until_idle: bool = False,
        stop: threading.Event | None = None,
        on_view: Callable[[ViewReport], None] | None = None,
        on_stage: Callable[[StageStart], None] | None = None,
        clock_every: float | None = 60.0,
    ) -> Iterator[watching.Round]:
        """Refresh now, then each time a source of the views changes, until ``stop`` is set
        (or, with ``until_idle``, until a poll finds nothing changed); yields each round.
        When a view reads the current time, also once ``clock_every`` seconds have passed
        since the last refresh (None: only on a source change).

        Between refreshes it reads only the sources' Delta logs, every ``every`` seconds,
        which runs no Spark job (``runtime.watch``; over Spark Connect, a log this machine
        cannot read is a DESCRIBE HISTORY). The views files are read anew at each
        refresh. ``on_view`` and ``on_stage`` are as for ``refresh``."""
        views = list(views) if views is not None else None  # iterated at every round
        log = self.delta_log()

        def current(tables: Iterable[str]) -> watching.Pinned:
            return {table: log.latest_version(table) for table in tables}

        yield from watching.rounds(
            lambda: self._refresh(views, on_view=on_view, on_stage=on_stage),
            current,
            every,
            until_idle,
            stop,
            clock_every,
        )

    def history(self, view: str | None = None, limit: int = 20) -> log_reports.History:
        """From the refresh event log: the last ``limit`` refreshes of each view (of ``view``
        only, if given), newest first, one entry per refresh and view with its stages, and
        each view's efficiency (median seconds incremental and full)."""
        qualified = None
        if view is not None:
            qualified = f"{self.database}.{view.lower()}"
            known = {v.name for v in self.views()}
            if view.lower() not in known:
                raise SqlError(
                    f"no view named {view}",
                    hint=f"views of this project: {', '.join(sorted(known)) or 'none'}",
                )
        self.flush_log()  # the last refresh is part of its history
        return log_reports.read(self.spark, self.delta_log(), self.database, qualified, limit)

    def status(self) -> list[ViewStatus]:
        """Per view: the source versions it reflects, the newer ones, its row count."""
        plans, log = self._compiled()
        return self._status(plans, log)

    def overview(self) -> tuple[list[ViewStatus], list[lifecycle.ViewState]]:
        """``status()`` and ``orphaned()`` together, from one compile and one listing."""
        plans, log = self._compiled()
        return self._status(plans, log), self._orphaned(plans, log)

    def _compiled(self) -> tuple[list[ViewPlan], delta_log.DeltaLog]:
        """Every plan, and the log reader its compile listed the database with."""
        self.views()  # a mistake in a views file is reported before Spark starts
        log = self.delta_log()
        return self.plans(log=log), log

    def _status(self, plans: list[ViewPlan], log: delta_log.DeltaLog) -> list[ViewStatus]:
        if self.spec is not None:
            result = [
                streaming.streaming_status(self.spark, log, self.database, t)
                for t in self.pipeline().streaming
            ]
        else:
            result = []
        # existence from the catalog listing the plans already read; row counts from Delta's
        # checksum files where they are exact, the others in one statement: over Spark
        # Connect each statement is a round trip to the server
        refreshed = [p for p in plans if log.exists(p.table)]
        rows = {p.name: _stored_rows(log, p) for p in refreshed}
        uncounted = [p for p in refreshed if rows[p.name] is None]
        for plan in uncounted:  # or counted since its table's last commit
            rows[plan.name] = self._counted_rows(plan, log)
        rows.update(self._count(self.spark, log, [p for p in uncounted if rows[p.name] is None]))
        # a view whose last change came to nothing has its record in the event log
        # (``physical.records``)
        summary = log_events.summary_of(log, self.database) if self.config.history.log else None
        for plan in plans:
            if plan.name not in rows:
                result.append(ViewStatus(plan.name, False, {}, {}, None, policy=str(plan.policy)))
                continue
            latest, record = log.last_record(plan.table)
            if summary is not None:
                record = summary.record_of(plan.table, latest, record)
            versions = record.get("base", {})
            latest = {t: log.latest_version(t) for t in versions}
            pending = {t: v for t, v in latest.items() if v != versions[t]}
            now = moment(record["now"]) if "now" in record else None
            result.append(
                ViewStatus(
                    plan.name, True, versions, pending, rows[plan.name], now, str(plan.policy)
                )
            )
        return result

    def count_rows(self, spark, log: delta_log.DeltaLog) -> None:
        """Count, in ``spark``, the rows of the views the last refresh wrote whose count
        Delta's statistics do not give (a trace of batches, a filter above the table), for
        the next ``status``: the server does it between commands (``host.WarmSnapshots``), so
        that a status after a refresh runs no Spark job."""
        written, self._written_views = self._written_views, []
        self._count(
            spark,
            log,
            [
                p
                for p in written
                if _stored_rows(log, p) is None and self._counted_rows(p, log) is None
            ],
        )

    def _counted_rows(self, plan: ViewPlan, log: delta_log.DeltaLog) -> int | None:
        """The view's last count, if its table and rows query are still what it counted."""
        key, rows = self._counted.get(plan.name, (None, None))
        return rows if key == _count_key(plan, log) else None

    def _count(self, spark, log: delta_log.DeltaLog, plans: list[ViewPlan]) -> dict[str, int]:
        """The views' row counts, in one statement; each is kept for the version of the
        view's table it read, unless a commit landed while it ran."""
        keys = {p.name: _count_key(p, log) for p in plans}
        counts = dict(zip(keys, _row_counts(spark, list(keys)), strict=True))
        for plan in plans:
            if _count_key(plan, log) == keys[plan.name]:
                self._counted[plan.name] = (keys[plan.name], counts[plan.name])
        return counts

    def verify(self, views: Iterable[str] | None = None) -> list[VerifyResult]:
        plans = self.plans(views)
        every = {p.view.name: p for p in self.plans()}
        selected = {v.lower() for v in views} if views is not None else None
        streamed = [
            VerifyResult(
                f"{self.database}.{t.name}",
                True,
                problem="streaming table: it keeps every row appended to its source, which no recompute reproduces",
            )
            for t in (
                self.pipeline().streaming if self.spec is not None and selected is None else ()
            )
        ]
        chosen = [p for p in plans if selected is None or p.view.name in selected]
        return streamed + verify_views(self.spark, chosen, every, self.refresh_workers)

    # state lifecycle -------------------------------------------------------------------------

    def orphaned(self) -> list[lifecycle.ViewState]:
        """ivm's tables that no view of the project keeps any more (its file was removed, or
        its definition lost a stage), grouped by the view they belonged to."""
        return self._orphaned(*self._compiled())

    def _orphaned(
        self, plans: list[ViewPlan], log: delta_log.DeltaLog
    ) -> list[lifecycle.ViewState]:
        return lifecycle.orphaned(self.spark, log, self.database, plans, str(self.root))

    def state_of(self, view: str) -> lifecycle.ViewState:
        """The orphaned state of one view, to drop; refuses a view the project still defines."""
        plans, log = self._compiled()
        name = f"{self.database}.{view.lower()}"
        defined = next((p for p in plans if p.name == name), None)
        if defined is not None:
            raise SqlError(
                f"view {view} is still defined ({defined.view.location}); dropping its state would only make the next refresh rebuild it",
                hint=f"remove its CREATE VIEW first, or rebuild it with ivm refresh --full {view}",
            )
        states = self._orphaned(plans, log)
        found = next((s for s in states if s.view == name), None)
        if found is None:
            orphans = (
                ", ".join(s.view.rpartition(".")[2] for s in states if not s.defined) or "none"
            )
            raise SqlError(
                f"no state of a view named {view}", hint=f"views with orphaned state: {orphans}"
            )
        return found

    def drop(self, states: Iterable[lifecycle.ViewState]) -> list[str]:
        """Drop the tables (and user views) of ``states`` (from ``orphaned`` or ``state_of``);
        the names dropped."""
        states = list(states)
        for state in states:
            for name in state.tables:
                self._locations.pop(name, None)
        return lifecycle.drop(self.spark, states)

    def optimize(
        self, retain_hours: float = lifecycle.TOMBSTONE_HOURS
    ) -> list[lifecycle.Compaction]:
        """OPTIMIZE and VACUUM the state tables of every view, keeping the change feed each
        stage still reads (see ``lifecycle.optimize``)."""
        log = self.delta_log()
        return lifecycle.optimize(self.spark, log, self.plans(log=log), retain_hours)

    def sql(self, statement: str) -> QueryResult:
        """Run one Spark SQL statement in the project's database."""
        from pyspark.errors import PySparkException

        self._use_database()
        try:
            frame = self.spark.sql(statement)
            return QueryResult(frame.columns, [tuple(r) for r in frame.collect()])
        except PySparkException as error:
            raise SqlError(first_line(error)) from None


__all__ = ["IvmError", "Project"]
