"""`ivm refresh --watch` and ``Project.watch``: refresh whenever a source changes.

The interval's parsing needs no Spark. The rest runs on real Spark and Delta: the poll
between refreshes runs no Spark job; a watch sees each round of source changes and stops
when idle; and the real executable, watching in a subprocess with its own embedded Spark,
stops cleanly on SIGTERM (letting the refresh in progress finish, or abandoning it at a
second signal) with every view equal to its SELECT afterwards. The subprocess's catalog is
its own (Derby allows one JVM), so this test writes to the source table by its path.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from jobs import job_group
from pyspark.sql import SparkSession
from typer.testing import CliRunner

from ivm_sql.cli import app
from ivm_sql.errors import IvmError
from ivm_sql.incremental.temporal import micros
from ivm_sql.progress import round_line
from ivm_sql.project import Project
from ivm_sql.runtime.refresh import ViewReport
from ivm_sql.runtime.watch import changed_sources, parse_clock_interval, parse_interval, rounds

MakeProject = Callable[[dict[str, str]], Path]

SHOP = {
    "migrations/0001_tables.sql": """\
CREATE TABLE customers (id INT, country STRING);
CREATE TABLE orders (id INT, customer_id INT, amount INT);
INSERT INTO customers VALUES (1, 'UK'), (2, 'US');
INSERT INTO orders VALUES (1, 1, 5), (2, 1, 20), (3, 2, 30);
""",
    "views/shop.sql": """\
CREATE VIEW big_orders AS SELECT id, amount FROM orders WHERE amount >= 10;

CREATE VIEW revenue AS
SELECT c.country, COUNT(*) AS n, SUM(o.amount) AS total
FROM orders o JOIN customers c ON o.customer_id = c.id
GROUP BY c.country;
""",
}


# the interval (no Spark) -------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, seconds", [("500ms", 0.5), ("10s", 10.0), ("2m", 120.0), ("1.5s", 1.5), (" 1h ", 3600.0)]
)
def test_intervals_are_numbers_with_a_unit(text: str, seconds: float) -> None:
    assert parse_interval(text) == seconds


@pytest.mark.parametrize("text", ["10", "0s", "-1s", "ten seconds", "5 days", "", "1e3ms"])
def test_a_bad_interval_is_one_clear_error(text: str) -> None:
    with pytest.raises(IvmError, match="is not an interval") as raised:
        parse_interval(text)
    assert "500ms, 10s, 2m" in str(raised.value)


def test_bad_options_fail_before_spark_starts(tmp_path: Path) -> None:
    (tmp_path / "ivm.yaml").write_text("database: shop\n")
    for args, message in (
        (["--watch", "--every", "10"], "--every '10' is not an interval"),
        (["--every", "5s"], "--every, --clock-every and --until-idle go with --watch"),
        (["--watch", "--clock-every", "soon"], "--clock-every 'soon' is not an interval"),
        (["--watch", "--full"], "--full cannot be combined with --watch"),
    ):
        result = CliRunner().invoke(app, ["-p", str(tmp_path), "refresh", *args])
        assert result.exit_code == 1 and message in result.stderr, result.output
        assert "Traceback" not in result.output
    assert not (tmp_path / ".ivm").exists()  # Spark never started


def test_changed_sources_are_those_whose_version_moved() -> None:
    assert changed_sources({"db.a": 3, "db.b": 1}, {"db.a": 5, "db.b": 1}) == {"db.a": (3, 5)}


@pytest.mark.parametrize(
    "reads_clock, clock_every, clock_rounds", [(True, 0.05, 2), (True, None, 0), (False, 0.05, 0)]
)
def test_the_clock_alone_starts_a_refresh_only_of_views_reading_it(
    reads_clock: bool, clock_every: float | None, clock_rounds: int
) -> None:
    """No source ever changes: only the clock can start a refresh after the first, and only
    when a view read it (its report has a ``now``) and ``clock_every`` is set."""
    now = datetime.now(UTC) if reads_clock else None
    refreshes = []

    def refresh() -> tuple[list[ViewReport], dict[str, int]]:
        refreshes.append(time.perf_counter())
        return [ViewReport("db.v", "incremental", now=now)], {"db.t": 1}

    stop = threading.Event()
    threading.Timer(0.5, stop.set).start()
    watched = list(rounds(refresh, dict, every=0.01, stop=stop, clock_every=clock_every))
    assert [r.clock for r in watched] == [False] + [True] * (len(watched) - 1)
    assert all(r.changed == {} for r in watched)
    if clock_rounds:
        assert len(watched) >= clock_rounds
        assert all(
            later - earlier >= 0.9 * clock_every for earlier, later in itertools.pairwise(refreshes)
        )
    else:
        assert len(watched) == 1
    assert round_line(watched[-1]).endswith(
        "changed: the clock (a view filters on the current time)"
        if clock_rounds
        else "first refresh of the watch"
    )


@pytest.mark.parametrize("text, seconds", [("off", None), ("OFF", None), ("30s", 30.0)])
def test_clock_every_is_an_interval_or_off(text: str, seconds: float | None) -> None:
    assert parse_clock_interval(text) == seconds


# on Spark ----------------------------------------------------------------------------------


@pytest.fixture
def shop(spark: SparkSession, tmp_project: MakeProject) -> Project:
    project = Project.open(tmp_project(SHOP), spark=spark)
    project.migrate()
    return project


def jobs_of(
    spark: SparkSession, group: str, action: Callable[[], object]
) -> tuple[object, list[int]]:
    """What ``action`` returns, and the Spark jobs it ran (under job group ``group``)."""
    with job_group(spark, group) as jobs:
        result = action()
    return result, jobs(group)


def test_watch_refreshes_each_round_of_changes_and_polls_without_a_job(
    spark: SparkSession, shop: Project
) -> None:
    before = spark.catalog.currentDatabase()
    try:
        rounds = shop.watch(every=0.05, until_idle=True)
        first = next(rounds)
        assert (
            first.number == 1
            and first.changed == {}
            and {r.action for r in first.reports} == {"created"}
        )
        orders = f"{shop.database}.orders"
        version = first.reports[0].versions[orders]

        shop.sql("INSERT INTO orders VALUES (4, 2, 40)")
        second = next(rounds)
        assert second.changed == {orders: (version, version + 1)}
        assert {r.view.split(".")[-1]: r.action for r in second.reports} == {
            "big_orders": "incremental",
            "revenue": "incremental",
        }

        shop.sql("UPDATE customers SET country = 'FR' WHERE id = 2")
        third = next(rounds)
        assert list(third.changed) == [f"{shop.database}.customers"]
        assert {r.view.split(".")[-1]: r.action for r in third.reports} == {
            "big_orders": "unchanged",
            "revenue": "incremental",
        }

        # the poll that finds nothing: reads the logs only, and ends an --until-idle watch
        ended, jobs = jobs_of(spark, "idle-poll", lambda: next(rounds, None))
        assert ended is None
        assert jobs == [], f"polling the sources ran Spark jobs {jobs}"
        assert all(r.ok for r in shop.verify())
        assert sorted(tuple(r) for r in spark.sql("SELECT * FROM revenue").collect()) == [
            ("FR", 2, 70),
            ("UK", 2, 25),
        ]
    finally:
        spark.catalog.setCurrentDatabase(before)


def test_watch_ends_when_asked_between_refreshes(spark: SparkSession, shop: Project) -> None:
    before = spark.catalog.currentDatabase()
    stop = threading.Event()
    try:
        rounds = shop.watch(every=3600, stop=stop)  # would wait an hour for the next poll
        next(rounds)
        threading.Timer(0.2, stop.set).start()
        started = time.monotonic()
        assert next(rounds, None) is None
        # not the hour's wait for the next poll, on any machine
        assert time.monotonic() - started < 1800
    finally:
        spark.catalog.setCurrentDatabase(before)


ARRIVALS = {
    "migrations/0001_events.sql": """\
CREATE TABLE events (id INT, at TIMESTAMP);
INSERT INTO events VALUES (1, TIMESTAMP '2020-01-01 00:00:00');
""",
    "views/arrived.sql": "CREATE VIEW arrived AS SELECT id FROM events WHERE at <= current_timestamp();\n",
}


def test_watch_refreshes_a_view_on_the_current_time_when_only_the_clock_moved(
    spark: SparkSession, tmp_project: MakeProject
) -> None:
    """A row stamped a few seconds ahead enters ``arrived`` once the clock passes it, with no
    source changed after its insert: a refresh the clock alone started brings it in."""
    project = Project.open(tmp_project(ARRIVALS), spark=spark)
    project.migrate()
    before = spark.catalog.currentDatabase()
    stop = threading.Event()
    try:
        watched = project.watch(every=0.1, clock_every=1.0, stop=stop)
        assert next(watched).reports[0].now is not None  # the view reads the clock
        due = datetime.now(UTC) + timedelta(seconds=4)
        project.sql(f"INSERT INTO events SELECT 2, timestamp_micros({micros(due)})")

        def arrived() -> list[int]:
            return sorted(
                row.id for row in spark.sql(f"SELECT id FROM {project.database}.arrived").collect()
            )

        changed = next(watched)
        assert changed.changed and not changed.clock
        assert changed.reports[0].now < due, (
            "the refresh of the insert began after the row's moment: nothing left to test"
        )
        assert arrived() == [1]
        give_up = threading.Timer(120, stop.set)  # without the clock, the watch would wait forever
        give_up.start()
        while arrived() == [1]:
            ticked = next(watched, None)
            assert ticked is not None, "the row never arrived: the clock started no refresh"
            assert ticked.clock and ticked.changed == {}
            assert arrived() == ([1, 2] if ticked.reports[0].now >= due else [1])
        give_up.cancel()
        stop.set()
        assert next(watched, None) is None
        assert all(r.ok for r in project.verify())
    finally:
        stop.set()
        spark.catalog.setCurrentDatabase(before)


def test_cli_prints_one_json_line_per_refresh_and_stops_when_idle(
    spark: SparkSession, shop: Project
) -> None:
    before = spark.catalog.currentDatabase()
    try:
        result = CliRunner().invoke(
            app,
            [
                "-p",
                str(shop.root),
                "refresh",
                "--watch",
                "--until-idle",
                "--every",
                "100ms",
                "--json",
            ],
        )
        assert result.exit_code == 0, result.output
        lines = result.stdout.splitlines()
        assert len(lines) == 1
        document = json.loads(lines[0])
        assert (
            document["round"] == 1
            and document["changed"] == {}
            and document["totals"]["created"] == 2
        )
        assert "idle: no source changed since the last refresh; 1 refreshes" in result.stderr

        shop.sql("INSERT INTO orders VALUES (5, 1, 50)")
        text = CliRunner().invoke(
            app, ["-p", str(shop.root), "refresh", "--watch", "--until-idle", "--every", "100ms"]
        )
        assert text.exit_code == 0, text.output
        (line,) = text.stdout.splitlines()
        assert line.startswith("refresh 1 at ") and "2 views (2 incremental), 2 rows in" in line, (
            line
        )
    finally:
        spark.catalog.setCurrentDatabase(before)


# the real executable, stopped by SIGTERM -----------------------------------------------------


def ivm(root: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    result = subprocess.run(
        [sys.executable, "-m", "ivm_sql.cli", "-p", str(root), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=ENVIRONMENT,
    )
    assert "Traceback" not in result.stdout + result.stderr, result.stderr
    return result


ENVIRONMENT = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
SETTINGS = (
    "spark:\n  conf:\n    spark.sql.shuffle.partitions: 2\n    spark.sql.adaptive.enabled: false\n"
)


class Watching:
    """`ivm refresh --watch` running in a subprocess; its lines read as they come."""

    def __init__(self, root: Path):
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "ivm_sql.cli",
                "-p",
                str(root),
                "refresh",
                "--watch",
                "--every",
                "200ms",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=ENVIRONMENT,
        )
        self.lines: list[str] = []
        self.errors: list[str] = []
        self._readers = [
            threading.Thread(target=lambda: self.lines.extend(self.process.stdout), daemon=True),
            threading.Thread(target=lambda: self.errors.extend(self.process.stderr), daemon=True),
        ]
        for reader in self._readers:
            reader.start()

    def wait_for(self, count: int, timeout: float = 300) -> None:
        deadline = time.monotonic() + timeout
        while len(self.lines) < count:
            assert self.process.poll() is None, f"the watch ended early: {''.join(self.errors)}"
            assert time.monotonic() < deadline, f"no refresh {count} in {timeout}s: {self.lines}"
            time.sleep(0.1)

    def wait_for_error(self, text: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while not any(text in line for line in self.errors):
            assert time.monotonic() < deadline, f"no {text!r} in {timeout}s: {self.errors}"
            time.sleep(0.05)

    def spark_driver(self) -> int:
        """The pid of the watch's JVM: the child of its process that runs java."""
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
                command = (stat.parent / "cmdline").read_bytes()
            except OSError:
                continue
            if int(fields[1]) == self.process.pid and b"java" in command:
                return int(stat.parent.name)
        raise AssertionError("the watch has no JVM child")

    def end(self, timeout: float = 300) -> tuple[int, str]:
        code = self.process.wait(timeout)
        for reader in self._readers:
            reader.join(10)
        return code, "".join(self.errors)


def commits_of_state(root: Path) -> set[Path]:
    """Every commit file of ivm's own tables in the project's warehouse."""
    return set((root / ".ivm" / "warehouse").glob("*.db/__ivm_*/_delta_log/*.json"))


def test_sigterm_finishes_or_abandons_the_refresh_and_views_stay_consistent(
    spark: SparkSession, tmp_path_factory: pytest.TempPathFactory
) -> None:
    root = tmp_path_factory.mktemp("watched")
    database = f"t_{uuid.uuid4().hex[:8]}"
    for name, text in {**SHOP, "ivm.yaml": f"database: {database}\n{SETTINGS}"}.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    assert ivm(root, "migrate").returncode == 0
    orders = f"delta.`{root / '.ivm' / 'warehouse' / f'{database}.db' / 'orders'}`"

    def change(i: int) -> None:  # from this test's own Spark: the subprocess holds the catalog
        spark.sql(f"INSERT INTO {orders} VALUES ({100 + i}, {1 + i % 2}, {10 * i})")

    # two rounds of changes, then a SIGTERM while the refresh of a third runs: it finishes
    watching = Watching(root)
    watching.wait_for(1)
    for i in (1, 2):
        change(i)
        watching.wait_for(1 + i)
        assert (
            watching.lines[i].startswith(f"refresh {1 + i} at ")
            and f"changed: {database}.orders" in watching.lines[i]
        )
    before = commits_of_state(root)
    change(3)
    deadline = time.monotonic() + 300
    while (
        commits_of_state(root) == before and len(watching.lines) < 4
    ):  # the refresh has begun committing
        assert time.monotonic() < deadline
        time.sleep(0.05)
    watching.process.send_signal(signal.SIGTERM)
    code, errors = watching.end()
    assert code == 0, errors
    assert (
        "SIGTERM: stopping after the refresh in progress" in errors
        and "stopped by SIGTERM; 4 refreshes" in errors
    )
    assert len(watching.lines) == 4 and watching.lines[3].startswith("refresh 4 at ")

    # a second SIGTERM abandons the refresh in progress. Its JVM is stopped (SIGSTOP) once the
    # refresh has begun committing, so the refresh is surely in progress when both signals
    # come: the first is taken, the second abandons it; the JVM resumes for the cancel.
    watching = Watching(root)
    watching.wait_for(1)
    before = commits_of_state(root)
    change(4)
    while commits_of_state(root) == before:
        assert time.monotonic() < deadline + 300 and len(watching.lines) < 2, watching.lines
        time.sleep(0.02)
    driver = watching.spark_driver()
    os.kill(driver, signal.SIGSTOP)
    try:
        watching.process.send_signal(signal.SIGTERM)
        watching.wait_for_error("SIGTERM: stopping after the refresh in progress")
        watching.process.send_signal(signal.SIGTERM)
        time.sleep(1)  # the second handler is waiting on its cancel, which waits on the JVM
    finally:
        os.kill(driver, signal.SIGCONT)
    code, errors = watching.end()
    assert (code, errors.strip().splitlines()[-1]) == (130, "interrupted"), errors
    assert len(watching.lines) == 1 and "Traceback" not in errors

    # consistent as the abandoned refresh left them: each table at the versions it records
    # (that the next refresh finishes the work: test_refresh's refresh that died half way)
    checked = ivm(root, "verify")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.split().count("ok") == 2
