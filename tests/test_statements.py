"""What a refresh runs, statement by statement: the counts it reports per changed stage
(``runtime.tally``), and the execution settings each statement gets (``physical.execution``).

That the settings never change a result is the differential oracle's job (it refreshes its
views interpreted in some rounds and compiled in others); here, that each statement gets the
settings its own size calls for.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from unittest import mock

from jobs import job_group
from oracle import INCREMENTAL_ONLY, ViewSpec, compare_views, views_file

from ivm_sql.host import WarmSnapshots
from ivm_sql.physical import materialize
from ivm_sql.physical.cost import SMALL_CHANGE
from ivm_sql.physical.execution import SMALL_MERGE_ROWS, SMALL_MERGE_TABLE, is_small_merge
from ivm_sql.physical.snapshot_state import SnapshotStates
from ivm_sql.project import Project
from ivm_sql.runtime import refresh as refresh_module
from ivm_sql.runtime.refresh import Refresher

MakeProject = Callable[[dict[str, str]], Path]

EVENTS = "CREATE TABLE events (k INT, v INT) USING DELTA"
# five groups however many events: a change of many source rows is a change of five rows here
PER_KEY = ViewSpec("per_key", "SELECT k, COUNT(*) AS n, SUM(v) AS total FROM events GROUP BY k")
READS_PER_KEY = ViewSpec("busiest", "SELECT MAX(n) AS n FROM per_key", reads=("per_key",))


class Recording:
    """A Spark session that notes, for each statement it is sent, its first word and whether
    whole-stage code generation was on for it."""

    def __init__(self, spark):
        self._spark = spark
        self.statements: list[tuple[str, str]] = []

    def sql(self, text: str, *args, **kwargs):
        self.statements.append(
            (text.split()[0].upper(), self._spark.conf.get("spark.sql.codegen.wholeStage"))
        )
        return self._spark.sql(text, *args, **kwargs)

    def __getattr__(self, name: str):
        return getattr(self._spark, name)


def open_project(
    spark, tmp_project: MakeProject, rows: int, specs: tuple[ViewSpec, ...] = (PER_KEY,)
) -> Project:
    project = Project.open(
        tmp_project({"views/views.sql": views_file(list(specs)), "ivm.yaml": INCREMENTAL_ONLY}),
        spark=spark,
    )
    project.sql(EVENTS)
    project.sql(
        f"INSERT INTO events SELECT CAST(id % 5 AS INT), CAST(id AS INT) FROM range({rows})"
    )
    return project


def refresh(project: Project, session) -> list:
    refresher = Refresher(
        session, cost=project.cost_model, log=project.delta_log(), project=str(project.root)
    )
    return refresher.refresh(project.plans())


def test_a_merge_of_few_rows_into_a_small_table_is_small_whatever_its_sources() -> None:
    assert is_small_merge(SMALL_MERGE_ROWS, SMALL_MERGE_TABLE - 1)
    assert not is_small_merge(SMALL_MERGE_ROWS + 1, 1_000)
    assert not is_small_merge(5, SMALL_MERGE_TABLE)  # interpreted, a MERGE pays per stored row
    assert not is_small_merge(5, None)  # a table of unknown size: compiled, as Spark would


def test_the_write_runs_interpreted_when_the_change_it_writes_is_small(
    spark, tmp_project: MakeProject
) -> None:
    project = open_project(spark, tmp_project, 50_000, (PER_KEY, READS_PER_KEY))
    project.refresh()
    # more source rows than a small change: the change is computed compiled ...
    project.sql(f"INSERT INTO events SELECT CAST(id % 5 AS INT), 1 FROM range({SMALL_CHANGE + 1})")
    session = Recording(spark)
    reports = refresh(project, session)
    assert [(r.action, r.reason) for r in reports] == [("incremental", "")] * 2
    # a view reads the aggregate, so its table takes its five changed groups with a MERGE
    first_write = next(i for i, (word, _) in enumerate(session.statements) if word == "MERGE")
    computed = [codegen for word, codegen in session.statements[:first_write] if word == "SELECT"]
    # ... and its write, five rows into a table of five, interpreted, as is all of the view
    # above's (five changed rows)
    writes = [codegen for word, codegen in session.statements if word == "MERGE"]
    assert writes == ["false", "false"]
    assert computed and all(codegen != "false" for codegen in computed)
    # the session's own setting is back
    assert spark.conf.get("spark.sql.codegen.wholeStage") != "false"
    failures = compare_views(
        spark, project.database, [PER_KEY, READS_PER_KEY], "after a large change"
    )
    assert not failures, failures


def test_a_refresh_counts_the_statements_and_jobs_of_each_changed_stage(
    spark, tmp_project: MakeProject
) -> None:
    project = open_project(spark, tmp_project, 10)
    (first,) = project.refresh()
    assert (first.action, first.stages_changed) == ("created", 1)
    assert first.statements >= 1 and first.jobs >= 1

    project.sql("INSERT INTO events VALUES (1, 100)")
    (report,) = project.refresh()
    assert report.action == "incremental" and report.stages_changed == 1
    # the source's change data feed kept for the refresh, and the append that computes the
    # change: no view reads the aggregate's trace, so its change is not kept first
    # (``materialize.INLINE``)
    assert report.statements == 2
    assert report.jobs >= 1

    (unchanged,) = project.refresh()
    assert (unchanged.action, unchanged.stages_changed, unchanged.statements, unchanged.jobs) == (
        "unchanged",
        0,
        0,
        0,
    )


def test_a_callers_job_group_keeps_its_jobs_and_the_count_is_unknown(
    spark, tmp_project: MakeProject
) -> None:
    project = open_project(spark, tmp_project, 10)
    with job_group(spark, "callers-group") as jobs:
        (report,) = project.refresh()
    assert report.action == "created" and report.statements >= 1
    assert report.jobs is None
    # the refresh's jobs stayed in it
    assert jobs("callers-group")


def test_a_small_change_kept_as_rows_runs_fewer_jobs_than_one_cached(
    spark, tmp_project: MakeProject, monkeypatch
) -> None:
    """The same one-row change, kept each way (``physical.materialize``): as local rows the
    MERGE reads it from its plan with no copy of its own, so the stage runs fewer jobs (the
    cached change is counted, and Delta copies a cached source before its MERGE). A view
    reads ``per_key``, so its table takes changes with a MERGE, not as a trace."""
    project = open_project(spark, tmp_project, 10, (PER_KEY, READS_PER_KEY))
    project.refresh()
    project.sql("INSERT INTO events VALUES (1, 100)")
    with monkeypatch.context() as patched:
        patched.setattr(materialize, "LOCAL_MOST", 0)  # every change is kept cached
        cached, _ = project.refresh()
    project.sql("INSERT INTO events VALUES (2, 100)")
    local, _ = project.refresh()
    assert cached.action == local.action == "incremental"
    assert cached.statements == local.statements  # the same statements, run differently
    assert local.jobs < cached.jobs, (local.jobs, cached.jobs)
    failures = compare_views(spark, project.database, [PER_KEY, READS_PER_KEY], "after both")
    assert not failures, failures


TOP_EVENTS = ViewSpec("top_events", "SELECT k, v FROM events ORDER BY v DESC, k LIMIT 3")


def test_a_top_ks_small_change_is_kept_as_rows_not_cached_before_its_merge(
    spark, tmp_project: MakeProject, monkeypatch
) -> None:
    """A top-k's change reads its own table's candidates (``runtime.flagged``). Cached, the
    MERGE into that table has Spark plan the cached change again (Delta's ``recacheByPlan``,
    a file listing per scan of the stage's table) and Delta copies the cached source; kept as
    rows, neither: fewer jobs for the same statements and the same rows."""
    project = open_project(spark, tmp_project, 10, (TOP_EVENTS,))
    project.refresh()
    project.sql("INSERT INTO events VALUES (1, 100)")
    with monkeypatch.context() as patched:
        patched.setattr(materialize, "LOCAL_MOST", 0)  # every change is kept cached
        (cached,) = project.refresh()
    project.sql("INSERT INTO events VALUES (2, 200)")
    (local,) = project.refresh()
    assert cached.action == local.action == "incremental"
    assert cached.statements == local.statements
    assert local.jobs < cached.jobs, (local.jobs, cached.jobs)
    failures = compare_views(spark, project.database, [TOP_EVENTS], "after both")
    assert not failures, failures


class NoStatesBeside(SnapshotStates):
    """``SnapshotStates`` undone: computes none of the states it is asked for."""

    def want(self, *tables: str) -> None:
        pass


def test_appends_commit_with_no_job_of_deltas_state_warm_or_not(
    spark, tmp_project: MakeProject
) -> None:
    """Delta checks an idempotent SQL commit against the transactions of the table's snapshot
    state, a job over its log, which the server computes between commands
    (``host.WarmSnapshots``). An append (this view's batch, the event log's rows) commits
    through Delta's transaction API instead (``storage.appends``) and reads none of that
    state: the refresh runs as many jobs whether the server computed it or not. The thread
    that computes states beside a refresh (``physical.snapshot_state``) is turned off here,
    so that the count says what the commits themselves run."""
    project = open_project(spark, tmp_project, 100)
    project.refresh()
    events = f"{project.database}.__ivm_refresh_log"
    rounds = iter(range(3))

    def refresh_after_an_insert() -> int:
        project.sql("INSERT INTO events VALUES (1, 1)")
        group = f"warm-state-{next(rounds)}"
        with (
            mock.patch.object(refresh_module, "SnapshotStates", NoStatesBeside),
            job_group(spark, group) as jobs,
        ):
            [report] = project.refresh()
        assert report.action == "incremental"
        return len(jobs(group))

    def warmed(tables: dict[str, int]) -> None:
        snapshots = WarmSnapshots(spark)
        snapshots.warm(tables)
        snapshots.wait()

    cold = refresh_after_an_insert()
    assert events in project.written_versions
    warmed({t: v for t, v in project.written_versions.items() if t != events})
    stage_warm = refresh_after_an_insert()
    warmed(project.written_versions)
    both_warm = refresh_after_an_insert()
    assert stage_warm == both_warm == cold, (cold, stage_warm, both_warm)
