"""The refresh event log (``__ivm_refresh_log``) and `ivm history`, on real Spark and Delta.

Each refresh that runs a stage appends one row per stage it ran, in one commit; a refresh
that runs none appends nothing. A failed stage is logged with its error; a refresh killed
between its stage commits and its append leaves no entry of its own, and the next refresh
logs what it committed from the commits' records. Old entries go after ``keep_days``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from unittest import mock

import pytest
from typer.testing import CliRunner

from ivm_sql.cli import app
from ivm_sql.errors import RefreshError
from ivm_sql.host import WarmProjects, WarmSnapshots
from ivm_sql.project import Project
from ivm_sql.runtime import log_events
from ivm_sql.storage import refresh_log

MakeProject = Callable[[dict[str, str]], Path]

TABLES = """\
CREATE TABLE orders (id INT, customer INT, qty INT) USING DELTA;
INSERT INTO orders VALUES (1, 1, 5), (2, 1, 7), (3, 2, 1);
"""
VIEWS = """\
CREATE VIEW big AS SELECT id, qty FROM orders WHERE qty >= 5;
CREATE VIEW per_customer AS SELECT customer, SUM(qty) AS qty, COUNT(*) AS n FROM orders GROUP BY customer;
-- fails when an order of more than 100 arrives: its refresh raises
CREATE VIEW checked AS SELECT id, assert_true(qty <= 100) AS fine FROM orders;
"""


def opened(spark, tmp_project: MakeProject, yaml: str = "") -> Project:
    project = Project.open(
        tmp_project(
            {"migrations/0001_orders.sql": TABLES, "views/shop.sql": VIEWS, "ivm.yaml": yaml}
        ),
        spark=spark,
    )
    project.migrate()
    return project


def log_rows(project: Project) -> list:
    name = refresh_log.table_in(project.database)
    return project.spark.sql(f"SELECT * FROM {name} ORDER BY refresh_id, stage_table").collect()


def log_version(project: Project) -> int:
    return project.delta_log().latest_version(refresh_log.table_in(project.database))


def test_each_refresh_that_runs_a_stage_logs_its_stages_once(spark, tmp_project) -> None:
    project = opened(spark, tmp_project)
    project.refresh()
    first = log_rows(project)
    stages = {s.table for p in project.plans() for s in p.stages}
    assert {r.stage_table for r in first} == stages
    assert {(r.action, r.strategy, r.outcome) for r in first} == {("created", "full", "ok")}
    assert len({r.refresh_id for r in first}) == 1

    project.sql("INSERT INTO orders VALUES (4, 3, 9)")
    project.refresh()
    second = [r for r in log_rows(project) if r.refresh_id != first[0].refresh_id]
    assert {r.view_name.split(".")[1] for r in second} == {"big", "per_customer", "checked"}
    for row in second:
        assert (row.action, row.strategy, row.outcome) == ("incremental", "incremental", "ok")
        assert row.rows_in == 1 and row.rows_out >= 1, row
        assert row.source_versions == {f"{project.database}.orders": 2}
        assert row.statements >= 1 and row.spark_jobs >= 1
        phases = row.plan_seconds + row.change_seconds + row.write_seconds
        assert row.write_seconds > 0 and abs(phases - row.seconds) < 1e-6, row
        stage_table = project.delta_log().latest_version(row.stage_table)
        assert row.table_version == stage_table

    version = log_version(project)
    project.refresh()  # nothing changed: no stage ran, nothing appended
    assert log_version(project) == version


def test_under_the_server_the_append_comes_after_the_command(spark, tmp_project) -> None:
    """A hosted refresh (``ivm server``'s) leaves its append for after its command; a second
    refresh of the same project appends the first's before it reads the log, and the server's
    thread appends the last one, then computes the log table's state."""
    project = opened(spark, tmp_project)
    project.hosted = True
    project.refresh()
    assert not project.delta_log().exists(refresh_log.table_in(project.database))
    project.sql("INSERT INTO orders VALUES (4, 3, 9)")
    project.refresh()
    first = {r.refresh_id for r in log_rows(project)}
    assert len(first) == 1, "the second refresh did not append the first's events first"
    snapshots = WarmSnapshots(spark)
    snapshots.after_command(project)
    snapshots.wait()
    both = {r.refresh_id for r in log_rows(project)}
    assert len(both) == 2 and first < both
    assert project.flush_log() == {}, "an append was left for later twice"


def test_under_the_server_a_failed_append_is_said_by_the_next_command(
    spark, tmp_project, capsys, monkeypatch
) -> None:
    """The append of a hosted refresh fails after its command has ended: the next command of
    the project says so on its stderr, once, and its refresh logs the stages left out."""
    first = opened(spark, tmp_project)
    first.refresh()  # the log exists: a refresh can tell the stages other refreshes left out
    root = first.root
    open_project = Project.open
    monkeypatch.setattr(
        Project, "open", lambda path, verbose: open_project(path, spark=spark, verbose=verbose)
    )
    projects = WarmProjects(lambda project: None)
    with projects.opened(root, verbose=False) as project:
        project.sql("INSERT INTO orders VALUES (4, 3, 9)")
        project.refresh()
    failure = RefreshError("the refresh log could not be written: disk full")
    with mock.patch.object(log_events, "append", side_effect=failure):
        assert project.flush_log() == {}
    assert project.log_error is failure
    with projects.opened(project.root, verbose=False) as again:
        assert "missing from the refresh log: the refresh log could not be written" in (
            capsys.readouterr().err
        )
        again.sql("INSERT INTO orders VALUES (5, 3, 2)")
        again.refresh()
        again.flush_log()
    logged = log_rows(again)
    assert {r.outcome for r in logged} == {"ok", log_events.OUTCOME_UNLOGGED}, logged


def test_a_recompute_and_an_error_are_logged_with_their_reason(spark, tmp_project) -> None:
    project = opened(spark, tmp_project)
    project.refresh()
    project.refresh(["big"], full=True)
    full = [r for r in log_rows(project) if r.view_name.endswith(".big")][-1]
    assert (full.action, full.strategy, full.reason) == ("recomputed", "full", "--full")

    project.sql("INSERT INTO orders VALUES (5, 1, 500)")
    with pytest.raises(RefreshError):
        project.refresh()
    last = log_rows(project)
    refresh_id = max(r.refresh_id for r in last)
    failed = [r for r in last if r.refresh_id == refresh_id and r.outcome == "error"]
    assert [r.view_name.split(".")[1] for r in failed] == ["checked"]
    assert failed[0].action == "failed" and "is not true" in failed[0].error
    # the stages that ran before the error are logged too, with the failed one, in one append
    done = {r.view_name.split(".")[1] for r in last if r.refresh_id == refresh_id} - {"checked"}
    assert done <= {"big", "per_customer"}


def test_a_killed_refresh_leaves_no_entry_and_the_next_logs_what_it_committed(
    spark, tmp_project
) -> None:
    project = opened(spark, tmp_project, "refresh: {workers: 1}\n")
    project.refresh()
    project.sql("INSERT INTO orders VALUES (6, 2, 8)")
    before = log_version(project)
    real = log_events.Recorder.ran
    ran: list[str] = []

    def killed_after_one_view(recorder, view, stage, outcome, cost):
        real(recorder, view, stage, outcome, cost)
        ran.append(view)
        if len({*ran}) == 2:  # two views committed: the process dies (not an IvmError)
            raise KeyboardInterrupt

    with (
        mock.patch.object(log_events.Recorder, "ran", killed_after_one_view),
        pytest.raises(KeyboardInterrupt),
    ):
        project.refresh()
    assert log_version(project) == before  # no entry, true or false, for the killed refresh

    project.refresh()  # finishes the third view, and logs the two the killed one committed
    rows = log_rows(project)
    unlogged = [r for r in rows if r.outcome == "unlogged"]
    assert sorted({r.view_name for r in unlogged}) == sorted({*ran})
    killed_id = unlogged[0].refresh_id
    assert {r.refresh_id for r in unlogged} == {killed_id}
    for row in unlogged:
        assert row.strategy == "incremental" and row.rows_out >= 1 and row.seconds is None
        assert row.source_versions == {f"{project.database}.orders": 2}
    assert killed_id[:8] == datetime.now(UTC).strftime("%Y%m%d")
    latest = [r for r in rows if r.refresh_id == max(r.refresh_id for r in rows)]
    assert {r.view_name for r in latest if r.outcome == "ok"}.isdisjoint(ran)

    version = log_version(project)
    project.refresh()  # told once: nothing is left unlogged, nothing appended
    assert log_version(project) == version


def test_entries_older_than_keep_days_are_deleted(spark, tmp_project) -> None:
    project = opened(spark, tmp_project, "history: {keep_days: 2}\n")
    long_ago = datetime.now(UTC) - timedelta(days=5)
    with mock.patch.object(refresh_log, "_prune", wraps=refresh_log._prune) as prune:
        project.refresh(now=long_ago)
        assert not prune.called  # the log this append made holds nothing to delete
        assert {r.refresh_clock.date() for r in log_rows(project)} == {long_ago.date()}
        project.sql("INSERT INTO orders VALUES (7, 4, 6)")
        project.refresh()
        assert prune.called
    rows = log_rows(project)
    assert rows and all(r.refresh_clock.date() > long_ago.date() for r in rows)


def test_no_log_when_history_log_is_false(spark, tmp_project) -> None:
    project = opened(spark, tmp_project, "history: {log: false}\n")
    project.refresh()
    assert not project.spark.catalog.tableExists(refresh_log.table_in(project.database))
    assert project.history().refreshes == []


def test_history_text_and_json(spark, tmp_project) -> None:
    project = opened(spark, tmp_project)
    project.refresh()
    project.sql("INSERT INTO orders VALUES (8, 1, 9)")
    project.refresh()
    project.refresh(["per_customer"], full=True)

    def ivm(*args: str) -> str:
        result = CliRunner().invoke(
            app, ["-p", str(project.root), "history", *args], env={"COLUMNS": "250"}
        )
        assert result.exit_code == 0, result.output
        return result.stdout

    document = json.loads(ivm("--json"))
    per_customer = [
        e for e in document["refreshes"] if e["view"] == f"{project.database}.per_customer"
    ]
    assert [e["strategy"] for e in per_customer] == ["full", "incremental", "full"]
    assert per_customer[0]["reason"] == "--full" and per_customer[1]["rows_in"] == 1
    efficiency = {e["view"].split(".")[1]: e for e in document["efficiency"]}
    assert (
        efficiency["per_customer"]["incremental_runs"],
        efficiency["per_customer"]["full_runs"],
    ) == (1, 2)
    assert efficiency["per_customer"]["ratio"] > 0

    text = ivm("per_customer")
    assert "per_customer" in text and "big" not in text.split("full / incremental")[0]
    assert "plan " in text and "write " in text  # a line per stage, with where its time went
    result = CliRunner().invoke(app, ["-p", str(project.root), "history", "nope"])
    assert result.exit_code != 0 and "no view named nope" in result.output


def test_two_appends_at_once_keep_both_rows_and_both_summaries(spark, tmp_project) -> None:
    """One refresh reads the log's summary, another appends, then the first appends: its
    append is a compare-and-swap on the version it read, so Delta skips it, and it tries again
    on the new summary instead of writing one that has lost the other's stages."""
    project = opened(spark, tmp_project)
    name = refresh_log.table_in(project.database)
    clock = datetime.now(UTC)

    def event(refresh_id: str, stage: str) -> refresh_log.Event:
        return refresh_log.Event(
            refresh_id, clock, "db.v", stage, "bag", "incremental", "incremental", seconds=1.0
        )

    real = refresh_log.read_summary
    raced: list[str] = []

    def read_then_overtaken(log, table, look_back=20):
        summary = real(log, table, look_back)
        if not raced:  # the other refresh lands right after this one read the summary
            raced.append("b")
            batch = refresh_log.Batch(name, "b", [event("b", "db.stage_b")], clock)
            refresh_log.append(spark, project.delta_log(), batch)
        return summary

    with mock.patch.object(refresh_log, "read_summary", read_then_overtaken):
        batch = refresh_log.Batch(name, "a", [event("a", "db.stage_a")], clock)
        refresh_log.append(spark, project.delta_log(), batch)
    rows = spark.sql(f"SELECT refresh_id, stage_table FROM {name}").collect()
    assert sorted((r.refresh_id, r.stage_table) for r in rows) == [
        ("a", "db.stage_a"),
        ("b", "db.stage_b"),
    ]
    summary = real(project.delta_log(), name)
    assert {s: c.last for s, c in summary.stages.items()} == {
        "db.stage_a": "a",
        "db.stage_b": "b",
    }


def _event(stage_table: str) -> refresh_log.Event:
    return refresh_log.Event(
        "r",
        datetime(2026, 1, 1, tzinfo=UTC),
        "db.v",
        stage_table,
        "bag",
        "incremental",
        "incremental",
    )


def test_a_record_kept_beside_holds_at_its_version_until_its_stage_is_written() -> None:
    """The summary keeps the record of a change that came to nothing (``physical.records``)
    for the version of the stage's table it names, without taking its event for the
    stage's last logged commit; a later event of that stage that keeps none drops it, and
    the other stages' stay."""
    old, new = {"ivm": 1, "sources": {"t": 1}}, {"ivm": 1, "sources": {"t": 2}}
    beside = {"db.a": {"version": 3, "record": new}, "db.b": {"version": 7, "record": new}}
    after = refresh_log.Summary().after([_event("db.a"), _event("db.b")], "r1", recorded=beside)
    summary = refresh_log.Summary.from_record(after, 0, 0)
    assert summary.record_of("db.a", 3, old) == new
    assert summary.record_of("db.a", 4, old) == old  # the table moved on: its commit's record
    assert summary.record_of("db.c", 3, old) == old
    # its event made no commit: the stage's newest commit is still the one logged last
    assert summary.stages["db.a"].last == ""
    again = refresh_log.Summary.from_record(summary.after([_event("db.a")], "r2"), 0, 0)
    assert again.record_of("db.a", 3, old) == old
    assert again.record_of("db.b", 7, old) == new
    assert again.stages["db.a"].last == "r"
