"""`--json`, refresh progress, and the lifecycle of state (orphans, drop, prune, optimize, a
source's vacuumed history), on real Spark and Delta through the CLI (in-process, sharing
the test run's session)."""

from __future__ import annotations

import io
import json
import os
import pty
import re
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from rich.console import Console
from test_cli import (  # noqa: F401 (keep_current_database: the CLI's USE must not leak into other tests)
    REFRESH_LINE,
    assert_no_traceback,
    database_of,
    ivm,
    keep_current_database,
    ok,
    table_rows,
    tables_of,
)

from ivm_sql.physical.execution import session_settings
from ivm_sql.progress import RefreshProgress
from ivm_sql.runtime.lifecycle import VACUUM_SETTINGS, retention_hours
from ivm_sql.runtime.refresh import StageStart
from ivm_sql.storage.delta_log import DeltaLog
from ivm_sql.storage.history import log_gap

MakeProject = Callable[[dict[str, str]], Path]

BASE = {
    "migrations/0001_t.sql": "CREATE TABLE t (id INT, v INT) USING DELTA;\n"
    "INSERT INTO t VALUES (1, 1), (2, 2), (3, 3);\n",
}
# lo is read by hi: hi's stage reads lo's table through its change data feed
CHAIN = "CREATE VIEW lo AS SELECT id, v FROM t WHERE v > 1;\nCREATE VIEW hi AS SELECT COUNT(*) AS n, SUM(v) AS s FROM lo;\n"


def document(stdout: str) -> dict:
    """The one JSON document a --json command printed: nothing else is on stdout."""
    return json.loads(stdout)


@pytest.fixture
def no_retention_check(spark: SparkSession) -> Iterator[None]:
    """Let VACUUM keep fewer hours than Delta's default 7 days, as the tests need, and list
    folders in few tasks (as ivm's own VACUUM does) when a test vacuums a base table."""
    with session_settings(
        spark, {"spark.databricks.delta.retentionDurationCheck.enabled": "false", **VACUUM_SETTINGS}
    ):
        yield


@pytest.fixture(scope="module")
def chain(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A migrated project of lo and hi, and what its first `ivm refresh --json` printed."""
    root = tmp_path_factory.mktemp("lifecycle")
    # choices not learned: the tiny tables' timings would choose between the ways (conftest)
    settings = f"database: t_{uuid.uuid4().hex[:8]}\nhistory: {{learn: false}}\n"
    files = {**BASE, "views/v.sql": CHAIN, "ivm.yaml": settings}
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    ok(root, "migrate")
    before = spark.catalog.currentDatabase()
    printed = ok(root, "refresh", "--json")
    spark.catalog.setCurrentDatabase(before)
    return root, printed


# --json and plain output ------------------------------------------------------------------


def test_json_documents_hold_the_tables_facts(spark: SparkSession, chain: tuple[Path, str]) -> None:
    project, printed = chain
    database = database_of(project)
    created = document(printed)
    assert [v["view"] for v in created["views"]] == [f"{database}.lo", f"{database}.hi"]
    lo = created["views"][0]
    assert (lo["action"], lo["reason"], lo["strategy"], lo["rows_out"]) == (
        "created",
        "new",
        "created (new)",
        2,
    )
    assert lo["versions"] == {f"{database}.t": 1} and lo["now"] is None and lo["seconds"] > 0
    assert created["totals"]["views"] == 2 and created["totals"]["created"] == 2
    assert created["totals"]["rows_out"] == sum(v["rows_out"] for v in created["views"])

    status = document(ok(project, "status", "--json"))
    assert status["orphaned"] == []
    assert {v["view"]: (v["refreshed"], v["rows"], v["pending"]) for v in status["views"]} == {
        f"{database}.lo": (True, 2, {}),
        f"{database}.hi": (True, 1, {}),
    }

    compiled = document(ok(project, "compile", "--json", "hi"))["views"]
    assert [c["view"] for c in compiled] == [f"{database}.hi"]
    assert f"INSERT INTO `{database}`.`__ivm_hi`" in compiled[0]["sql"]
    assert compiled[0]["stages"] == [
        {
            "table": f"{database}.__ivm_hi",
            "kind": "aggregate",
            "strategy": "incremental: COUNT/SUM/AVG per group updated from the change alone, "
            "appended as a batch of per-group deltas and summed when read (no other view reads this one)",
        }
    ]

    verified = document(ok(project, "verify", "--json"))
    assert verified["ok"] is True
    assert [
        (v["view"], v["ok"], v["skipped"], v["missing"], v["extra"]) for v in verified["views"]
    ] == [
        (f"{database}.lo", True, False, [], []),
        (f"{database}.hi", True, False, [], []),
    ]

    error = ivm(project, "compile", "--json", "nope")
    assert error.exit_code == 1
    assert_no_traceback(error)
    assert document(error.stdout) == {
        "error": "no view named nope",
        "kind": "SQL error",
        "location": None,
        "hint": "views of this project: hi, lo",
    }


def test_plain_refresh_off_a_terminal_prints_only_its_lines(
    spark: SparkSession, chain: tuple[Path, str]
) -> None:
    project, _ = chain
    ok(project, "sql", "UPDATE t SET v = 5 WHERE id = 3")
    lines = ok(project, "refresh").splitlines()
    assert lines[0].split() == ["view", "rows", "in", "rows", "out", "time", "strategy"]
    assert len(lines) == 3 and all(REFRESH_LINE.match(line) for line in lines[1:]), lines
    assert "\x1b" not in "".join(lines)  # no terminal codes: no live progress off a terminal


def test_progress_on_a_terminal_shows_view_stage_and_count() -> None:
    screen = io.StringIO()
    console = Console(file=screen, force_terminal=True, width=120)
    with RefreshProgress(console, live=True) as progress:
        progress.stage(StageStart("db.hi", 2, 3, "db.__ivm_hi_s1", 1, 2, "aggregate"))
        progress.bar.refresh()
        drawn = screen.getvalue()
        progress.view_done("db.hi  done")
    assert "db.hi: stage 1/2 db.__ivm_hi_s1 [aggregate]" in drawn
    assert "0/3" in drawn and re.search(r"\d:\d\d:\d\d", drawn)  # views done of all, time so far
    assert "db.hi  done" in screen.getvalue()


# optimize, and a source whose history was vacuumed -------------------------------------------


def test_optimize_keeps_the_change_feed_a_lagging_view_reads(
    spark: SparkSession, chain: tuple[Path, str], no_retention_check: None
) -> None:
    project, _ = chain
    database = database_of(project)
    ok(project, "sql", "UPDATE t SET v = 6 WHERE id = 2")
    ok(project, "refresh")  # hi's MERGE replaces its one file: an old file for VACUUM
    ok(project, "sql", "UPDATE t SET v = 7 WHERE id = 2")
    ok(project, "refresh", "lo")  # hi now lags behind lo: its next refresh reads lo's change feed
    done = {
        line.split(":")[0]: line for line in ok(project, "optimize", "--retain", "0").splitlines()
    }
    assert set(done) == {f"{database}.__ivm_lo", f"{database}.__ivm_hi"}
    kept = re.search(r"RETAIN (\d+) HOURS", done[f"{database}.__ivm_lo"])
    assert kept and int(kept.group(1)) >= 1, done  # hi still needs lo's recent files
    deleted = re.search(r"RETAIN 0 HOURS: (\d+) files deleted", done[f"{database}.__ivm_hi"])
    assert deleted and int(deleted.group(1)) > 0, done  # nothing reads hi's feed: its old files go

    after = {
        r["view"]: r["strategy"]
        for r in map(REFRESH_LINE.match, ok(project, "refresh").splitlines()[1:])
    }
    assert after == {f"{database}.lo": "unchanged", f"{database}.hi": "incremental"}
    assert ok(project, "verify").split().count("ok") == 2


def test_vacuumed_source_history_recomputes_with_the_reason(
    spark: SparkSession, chain: tuple[Path, str], no_retention_check: None
) -> None:
    project, _ = chain
    database = database_of(project)
    ok(project, "sql", "UPDATE t SET v = 9 WHERE id = 1")
    ok(project, "sql", "VACUUM t RETAIN 0 HOURS")  # deletes the update's change data files
    reports = {r["view"]: r for r in document(ok(project, "refresh", "--json"))["views"]}
    lo = reports[f"{database}.lo"]
    assert lo["action"] == "recomputed", lo
    assert lo["reason"].startswith(f"the change data feed it reads is gone ({database}.t "), lo
    assert reports[f"{database}.hi"]["reason"] == f"{database}.__ivm_lo was recomputed"
    assert ok(project, "verify").split().count("ok") == 2
    expected = spark.sql(f"SELECT COUNT(*) AS n, SUM(v) AS s FROM {database}.t WHERE v > 1").first()
    assert spark.table(f"{database}.hi").first() == expected


# orphaned state ---------------------------------------------------------------------------


def test_orphaned_state_is_listed_then_dropped_and_pruned(
    spark: SparkSession, tmp_project: MakeProject
) -> None:
    project = tmp_project(
        {
            **BASE,
            "views/keep.sql": "CREATE VIEW keep AS SELECT id FROM t;\n",
            "views/gone.sql": "CREATE VIEW gone AS SELECT id FROM t WHERE v > 1;\n"
            "CREATE VIEW gone2 AS SELECT v, COUNT(*) AS n FROM t GROUP BY v;\n",
        }
    )
    database = database_of(project)
    ok(project, "migrate")
    ok(project, "refresh")
    # a user's table with ivm's prefix but not made by ivm: never ivm's to drop
    ok(project, "sql", "CREATE TABLE __ivm_mine (x INT) USING DELTA")
    (project / "views" / "gone.sql").unlink()

    status = document(ok(project, "status", "--json"))
    assert [v["view"] for v in status["views"]] == [f"{database}.keep"]
    assert status["orphaned"] == [
        {
            "view": f"{database}.gone",
            "tables": [f"{database}.__ivm_gone"],
            "user_view": f"{database}.gone",
            "defined": False,
        },
        {
            "view": f"{database}.gone2",
            "tables": [f"{database}.__ivm_gone2"],
            "user_view": f"{database}.gone2",
            "defined": False,
        },
    ]
    plain = ok(project, "status", wide=True)
    assert "orphaned state" in plain
    assert [f"{database}.gone", f"{database}.__ivm_gone", f"{database}.gone"] in table_rows(plain)

    refused = ivm(project, "drop", "gone")  # no terminal to ask on, no --yes
    assert refused.exit_code == 1
    assert_no_traceback(refused)
    assert f"table {database}.__ivm_gone" in refused.stdout  # it said what would go
    assert "pass --yes" in refused.stderr
    defined = ivm(project, "drop", "keep", "--yes")
    assert defined.exit_code == 1 and "still defined" in defined.stderr
    assert {"__ivm_gone", "gone", "__ivm_keep"} <= tables_of(spark, database)

    dropped = ok(project, "drop", "gone", "--yes")
    assert "dropped 2" in dropped
    assert not {"__ivm_gone", "gone"} & tables_of(spark, database)

    pruned = ok(project, "prune", "--yes")
    assert f"view  {database}.gone2" in pruned and "dropped 2" in pruned
    assert tables_of(spark, database) == {
        "t",
        "ivm_migrations",
        "keep",
        "__ivm_keep",
        "__ivm_mine",
        "__ivm_refresh_log",
    }
    assert ok(project, "prune").strip() == "no orphaned state"
    assert document(ok(project, "status", "--json"))["orphaned"] == []


def test_projects_sharing_a_database_leave_each_others_state_alone(
    spark: SparkSession, tmp_project: MakeProject
) -> None:
    shared = f"database: t_{uuid.uuid4().hex[:8]}\n"
    first = tmp_project(
        {**BASE, "ivm.yaml": shared, "views/a.sql": "CREATE VIEW a AS SELECT id FROM t;\n"}
    )
    second = tmp_project(
        {
            **BASE,
            "ivm.yaml": shared,
            "views/b.sql": "CREATE VIEW b AS SELECT v, COUNT(*) AS n FROM t GROUP BY v;\n",
        }
    )
    database = database_of(first)
    ok(first, "migrate")
    ok(second, "migrate")  # the same migration file: already applied by the first
    ok(first, "refresh")
    ok(second, "refresh")

    # each sees only its own views' state; the other's is not orphaned, and prune keeps it
    assert document(ok(second, "status", "--json"))["orphaned"] == []
    assert ok(second, "prune").strip() == "no orphaned state"
    assert {"__ivm_a", "a", "__ivm_b", "b"} <= tables_of(spark, database)

    (first / "views" / "a.sql").unlink()  # the first's own orphan is still the first's to drop
    assert [s["view"] for s in document(ok(first, "status", "--json"))["orphaned"]] == [
        f"{database}.a"
    ]
    assert document(ok(second, "status", "--json"))["orphaned"] == []
    ok(first, "prune", "--yes")
    assert not {"__ivm_a", "a"} & tables_of(spark, database) and {"__ivm_b", "b"} <= tables_of(
        spark, database
    )


def answered_on_a_terminal(
    project: Path,
    answer: str,
    *args: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture,
) -> tuple[int, str]:
    """``ivm ARGS...`` in this process with a pseudo-terminal as its standard input, on which
    ``answer`` is typed; its exit code and standard output."""
    from ivm_sql.cli import app

    leader, follower = pty.openpty()
    os.write(leader, answer.encode())
    with os.fdopen(follower, "r") as terminal:
        monkeypatch.setattr(sys, "stdin", terminal)
        capsys.readouterr()
        code = app(["-p", str(project), *args], standalone_mode=False)
    os.close(leader)
    return code or 0, capsys.readouterr().out


def test_prune_on_a_terminal_asks_and_drops_only_on_yes(
    spark: SparkSession,
    tmp_project: MakeProject,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture,
) -> None:
    project = tmp_project(
        {
            **BASE,
            "views/v.sql": "CREATE VIEW keep AS SELECT id FROM t;\n",
            "views/gone.sql": "CREATE VIEW gone AS SELECT id FROM t WHERE v > 1;\n",
        }
    )
    database = database_of(project)
    ok(project, "migrate")
    ok(project, "refresh")
    (project / "views" / "gone.sql").unlink()

    code, printed = answered_on_a_terminal(
        project, "n\n", "prune", monkeypatch=monkeypatch, capsys=capsys
    )
    assert code == 1 and "drop them? [y/N]" in printed and "nothing dropped" in printed
    assert {"__ivm_gone", "gone"} <= tables_of(spark, database)

    code, printed = answered_on_a_terminal(
        project, "y\n", "drop", "gone", monkeypatch=monkeypatch, capsys=capsys
    )
    assert code == 0 and f"table {database}.__ivm_gone" in printed and "dropped 2" in printed
    assert not {"__ivm_gone", "gone"} & tables_of(spark, database)


# VACUUM's retention, from a Delta log on disk (no Spark) -------------------------------------

HOUR_MS = 3_600_000


def delta_log_at(folder: Path, commit_times_ms: list[int], first: int = 0) -> DeltaLog:
    """A DeltaLog over a ``_delta_log`` holding one commit per time given (versions ``first``,
    ``first + 1``, ...; the older ones as if log cleanup had removed them)."""
    log = folder / "_delta_log"
    log.mkdir(parents=True)
    for version, when in enumerate(commit_times_ms, first):
        info = {"commitInfo": {"timestamp": when, "operation": "WRITE"}}
        (log / f"{version:020d}.json").write_text(json.dumps(info) + "\n")
    return DeltaLog(spark=None, locations={"db.__ivm_v": str(folder)})


def test_vacuum_keeps_the_hours_back_to_the_oldest_version_a_stage_reads(tmp_path: Path) -> None:
    now = 1_000 * HOUR_MS
    log = delta_log_at(tmp_path, [now - 50 * HOUR_MS, now - 30 * HOUR_MS, now - 2 * HOUR_MS])
    assert retention_hours(log, "db.__ivm_v", None, 0, now) == 0  # no stage reads its feed
    assert retention_hours(log, "db.__ivm_v", 2, 0, now) == 0  # the reader is up to date
    # a reader at version 1 reads on from version 2: keep back to an hour before commit 1
    assert retention_hours(log, "db.__ivm_v", 1, 0, now) == 31
    assert retention_hours(log, "db.__ivm_v", 1, 168, now) == 168  # never fewer than asked
    assert retention_hours(log, "db.__ivm_v", 0, 0, now) == 51


def test_vacuum_is_skipped_when_a_stage_lags_beyond_what_delta_remembers(tmp_path: Path) -> None:
    now = 1_000 * HOUR_MS
    log = delta_log_at(tmp_path, [now - 200 * HOUR_MS, now - HOUR_MS])
    assert retention_hours(log, "db.__ivm_v", 0, 0, now) is None


def test_history_cleaned_from_the_log_is_a_reason_to_recompute(tmp_path: Path) -> None:
    log = delta_log_at(tmp_path, [0, 0], first=2)  # versions 0 and 1 are gone
    assert log_gap(log, {"db.__ivm_v": (0, 3)}) == (
        "the history of db.__ivm_v after version 0 is gone: its log starts at version 2 (delta.logRetentionDuration)"
    )
    # its changes start at version 2, still there
    assert log_gap(log, {"db.__ivm_v": (1, 3)}) is None
    assert log_gap(log, {"db.__ivm_v": (0, 0)}) is None  # nothing to read
