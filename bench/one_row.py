"""One changed row of the demo, refreshed in one warm process: what each choice on its path saves.

Issue 33 asks for a one-row refresh of about a second, and for each setting on that path to
be measured and kept only where it pays. This compares, side by side in one process and one
Spark session, rounds as ivm runs them against rounds with one choice undone (``--compare``):

- ``warm-state``: the server (``ivm_sql.host.WarmSnapshots``) has Delta compute the
  snapshot state of each stage table a refresh committed to before the next refresh, since
  each commit ivm makes is checked against it (``storage.concurrent``); undone, the refresh
  computes it itself: beside its work (``state-beside``), or in its commits.
- ``state-beside``: with nothing computed between commands (a refresh outside the server), a
  thread of the refresh's own computes the state of each table it will commit to while it
  computes the changes (``physical.snapshot_state``); undone, each commit computes it.
- ``inline``: a batch appended to a trace that no stage above reads is computed by its INSERT
  (``physical.materialize.INLINE``); undone, the change is collected first and its rows are
  appended, two statements.
- ``codegen``, ``adaptive``, ``partitions``: the small-data settings a tiny change runs with
  (``physical.execution.SMALL_DATA_SETTINGS``): interpreted, no adaptive re-planning, one
  shuffle partition; undone, that one is left at the session's own value.
- ``cloned``: a refresh's session, and each worker's, is Spark's copy of the session it
  comes from, made in one call (``storage.concurrent.own_session``); undone, a new session
  with each setting of that one copied over, two calls to the JVM per setting.
- ``api-appends``: a batch appended to a trace, a record-only commit and the event log's rows
  are committed through Delta's transaction API (``storage.appends``), whose compare-and-swap
  reads none of the table's state; undone, each is its SQL INSERT with the transaction id,
  which Delta checks against the state. Both ways as outside the server (nothing computed
  between commands; the states a refresh needs computed beside it).
- ``pools``: each view refreshed beside another runs its jobs in a FAIR scheduler pool of its
  own (``runtime.workers.worker_session``); undone, every view's jobs queue in Spark's default
  pool, first come first served, as under Spark's FIFO scheduler.

``--jobs`` then runs one more round ivm's way with Spark's UI on and lists that refresh's
Spark jobs in order: when each started and how long it ran, where Spark says it was called
from, and the description ivm gives it (the stage it refreshes); the gaps between them are
planning, commits and Python.

The demo project is copied to a temporary folder, migrated and refreshed. Each round changes
one order, waits ``--pause`` seconds and times the refresh; rounds alternate between ivm's way
and the choice undone. The first ``--warm-up`` rounds are left out (the JIT warms); the
medians of the rest are printed, with the Spark jobs the refreshes ran.

    .venv/bin/python bench/one_row.py --compare warm-state,state-beside,codegen,adaptive,partitions --rounds 16
"""

from __future__ import annotations

import argparse
import calendar
import json
import shutil
import statistics
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from unittest import mock

import yaml

from ivm_sql import Project
from ivm_sql.physical import execution, materialize
from ivm_sql.physical.snapshot_state import SnapshotStates
from ivm_sql.runtime import refresh as refresh_module
from ivm_sql.runtime import workers
from ivm_sql.storage import appends, concurrent
from ivm_sql.storage.concurrent import own_session
from ivm_sql.storage.delta_log import compute_state

REPO = Path(__file__).resolve().parent.parent
ONE_ORDER = "UPDATE orders SET quantity = quantity + 1 WHERE id = 102"
SETTING_OF = {
    "codegen": ("spark.sql.codegen.wholeStage", "spark.sql.codegen.factoryMode"),
    "adaptive": ("spark.sql.adaptive.enabled",),
    "partitions": ("spark.sql.shuffle.partitions",),
}
CHOICES = (
    "warm-state",
    "state-beside",
    "api-appends",
    "cloned",
    "pools",
    "inline",
    *SETTING_OF,
)
KEPT_WAY = materialize.way_for
UI_PORT = 4077


def without_setting(name: str) -> AbstractContextManager:
    """SMALL_DATA_SETTINGS without the named ones: the session's own values apply."""
    kept = {
        key: value
        for key, value in execution.SMALL_DATA_SETTINGS.items()
        if key not in SETTING_OF[name]
    }
    return mock.patch.object(execution, "SMALL_DATA_SETTINGS", kept)


def one_pool(spark):
    """``workers.worker_session`` undone: the worker's jobs in Spark's default pool."""
    spark.sparkContext.setLocalProperty(workers.POOL, None)
    return own_session(spark)


def kept_first(changed_rows: int, appended_unread: bool = False) -> str:
    """``materialize.INLINE`` undone: every change is kept before its write."""
    return KEPT_WAY(changed_rows)


def settings_copied(spark):
    """``own_session`` as it was before it cloned: a new session, each setting of ``spark``
    that differs copied over one by one, and its current database."""
    session = spark.newSession()
    for key, value in spark.conf.getAll.items():
        if spark.conf.isModifiable(key) and session.conf.get(key, None) != value:
            session.conf.set(key, value)
    session.catalog.setCurrentDatabase(spark.catalog.currentDatabase())
    return session


@contextmanager
def old_sessions() -> Iterator[None]:
    """``settings_copied`` for ``own_session``, where the refresh's session and each
    worker's are made."""
    with (
        mock.patch.object(workers, "own_session", settings_copied),
        mock.patch.object(concurrent, "own_session", settings_copied),
    ):
        yield


def no_states_beside(spark, tables) -> SnapshotStates:
    """``SnapshotStates`` undone: asked for none."""
    return SnapshotStates(spark, ())


def refresh_round(
    project: Project, pause: float, before: Callable[[], None], around: AbstractContextManager
) -> tuple[float, int]:
    """Seconds and Spark jobs of a refresh after one changed order."""
    project.sql(ONE_ORDER)
    before()
    time.sleep(pause)
    with around:
        started = time.perf_counter()
        reports = project.refresh()
        elapsed = time.perf_counter() - started
    return elapsed, sum(report.jobs or 0 for report in reports)


def no_api(_spark, _table: str) -> bool:
    return False


def compare(project: Project, choice: str, rounds: int, warm_up: int, pause: float) -> None:
    def compute_states() -> None:
        for table in project.written_versions:
            compute_state(project.spark, table)

    ivms_way = (compute_states, nullcontext)  # as in the server, between commands
    undone = (compute_states, lambda: without_setting(choice))
    if choice == "warm-state":
        undone = (lambda: None, nullcontext)
    elif choice == "inline":
        undone = (compute_states, lambda: mock.patch.object(materialize, "way_for", kept_first))
    elif choice == "cloned":
        undone = (compute_states, old_sessions)
    elif choice == "pools":
        undone = (compute_states, lambda: mock.patch.object(workers, "worker_session", one_pool))
    elif choice == "api-appends":  # as outside the server: nothing between commands
        ivms_way = (lambda: None, nullcontext)
        undone = (lambda: None, lambda: mock.patch.object(appends, "available", no_api))
    elif choice == "state-beside":  # as outside the server: nothing between commands
        ivms_way = (lambda: None, nullcontext)
        undone = (
            lambda: None,
            lambda: mock.patch.object(refresh_module, "SnapshotStates", no_states_beside),
        )
    kept: dict[str, list[tuple[float, int]]] = {"ivm's way": [], "undone": []}
    for number in range(rounds):
        label, (before, around) = ("ivm's way", ivms_way) if number % 2 == 0 else ("undone", undone)
        seconds, jobs = refresh_round(project, pause, before, around())
        print(
            f"  {choice} round {number + 1}, {label:<9}: {seconds:5.2f} s, {jobs} jobs", flush=True
        )
        if number >= warm_up:
            kept[label].append((seconds, jobs))
    way, off = (statistics.median(s for s, _ in kept[k]) for k in ("ivm's way", "undone"))
    jobs_way, jobs_off = (statistics.median(j for _, j in kept[k]) for k in ("ivm's way", "undone"))
    print(
        f"{choice}: ivm's way {way:.2f} s ({jobs_way:g} jobs), undone {off:.2f} s ({jobs_off:g} jobs): "
        f"undoing it costs {off / way:.2f}x (median of {len(kept['undone'])} rounds each)",
        flush=True,
    )


def spark_jobs(spark) -> list[dict]:
    """Every job of the application so far, from Spark UI's REST API, oldest first."""
    address = (
        f"http://127.0.0.1:{UI_PORT}/api/v1/applications/{spark.sparkContext.applicationId}/jobs"
    )
    with urllib.request.urlopen(address) as answer:
        return sorted(json.load(answer), key=lambda job: job["jobId"])


def list_jobs(project: Project) -> None:
    """One more round ivm's way, and each Spark job of its refresh: start, run time, call site,
    description."""
    project.sql(ONE_ORDER)
    for table in project.written_versions:  # as the server does between commands
        compute_state(project.spark, table)
    time.sleep(1.0)  # the UI learns of a job's end from Spark's listener bus, a moment later
    seen = {job["jobId"] for job in spark_jobs(project.spark)}
    started = time.time()  # an epoch's seconds, as the UI's times are
    project.refresh()
    seconds = time.time() - started
    time.sleep(1.0)
    jobs = [job for job in spark_jobs(project.spark) if job["jobId"] not in seen]
    print(
        f"the round's refresh: {seconds:.2f} s, {len(jobs)} jobs (start, from the refresh's, and run time in s)"
    )
    times = [(moment(job["submissionTime"]), moment(job["completionTime"])) for job in jobs]
    for job, (began, ended) in zip(jobs, times, strict=True):
        print(
            f"  {began - started:6.2f} {ended - began:5.2f}  "
            f"{job['name'][:60]:<60}  {job.get('description') or ''}"
        )


def moment(stamp: str) -> float:
    """Seconds of a Spark UI time, ``2026-12-02T21:14:40.807GMT``, to the millisecond."""
    whole = calendar.timegm(time.strptime(stamp[:19], "%Y-%m-%dT%H:%M:%S"))
    return whole + int(stamp[20:23]) / 1000


def with_ui(root: Path) -> None:
    """The copied ivm.yaml with Spark's UI on, on a known port, for ``--jobs``."""
    settings = yaml.safe_load((root / "ivm.yaml").read_text())
    settings["spark"]["conf"].update({"spark.ui.enabled": "true", "spark.ui.port": str(UI_PORT)})
    (root / "ivm.yaml").write_text(yaml.safe_dump(settings))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--compare",
        default=",".join(CHOICES),
        help=f"comma-separated, of {', '.join(CHOICES)} (default all)",
    )
    parser.add_argument(
        "--rounds", type=int, default=16, help="rounds per choice, half of them with it undone"
    )
    parser.add_argument(
        "--warm-up", type=int, default=4, help="first rounds of each choice left out of the medians"
    )
    parser.add_argument(
        "--pause", type=float, default=1.0, help="seconds between the change and the refresh"
    )
    parser.add_argument(
        "--jobs", action="store_true", help="then list each Spark job of one more round"
    )
    args = parser.parse_args()
    choices = [choice for choice in args.compare.split(",") if choice]
    if unknown := set(choices) - set(CHOICES):
        parser.error(f"unknown {', '.join(sorted(unknown))}; the choices are {', '.join(CHOICES)}")
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        shutil.copy(REPO / "ivm.yaml", root)
        if args.jobs:
            with_ui(root)
        for name in ("views", "migrations"):
            shutil.copytree(REPO / name, root / name)
        project = Project.open(root)
        project.migrate()
        project.refresh()
        for choice in choices:
            compare(project, choice, args.rounds, args.warm_up, args.pause)
        if args.jobs:
            list_jobs(project)
        project.spark.stop()  # before the folder goes: Spark holds the metastore in it


if __name__ == "__main__":
    main()
