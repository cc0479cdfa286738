"""Refresh behaviour end to end, on real Spark and Delta: no work for no change, recovery
from a refresh that died half way, forced and definition-driven recomputes, sources changed
by non-DML operations, non-Delta sources, bag views, and refreshing one named view."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable
from pathlib import Path
from unittest import mock

import pytest
from jobs import job_group
from oracle import INCREMENTAL_ONLY, ViewSpec, compare_views, views_file
from sqlglot import exp

from ivm_sql.compiler.routing import EVERY_REFRESH_REASON
from ivm_sql.errors import IvmError, SqlError
from ivm_sql.physical import bounds, layout
from ivm_sql.physical.changes import SourceChanges
from ivm_sql.project import Project
from ivm_sql.runtime.refresh import Refresher, ViewReport
from ivm_sql.sqlbuild import to_sql
from ivm_sql.storage import refresh_log
from ivm_sql.storage.delta_log import DeltaLog

MakeProject = Callable[[dict[str, str]], Path]

ORDERS = "CREATE TABLE orders (id INT, customer_id INT, qty INT, status STRING) USING DELTA"
CUSTOMERS = "CREATE TABLE customers (id INT, country STRING) USING DELTA"
SEED = [
    "INSERT INTO orders VALUES (1, 1, 2, 'new'), (2, 1, 3, 'shipped'), (3, 2, NULL, 'new'), (4, NULL, 1, NULL), "
    "(5, 3, 4, 'shipped'), (5, 3, 4, 'shipped')",
    "INSERT INTO customers VALUES (1, 'DE'), (2, 'FR'), (3, 'DE'), (4, NULL)",
]

# A join against an aggregated subquery under a GROUP BY: three stages in one view.
ROLLUP = ViewSpec(
    "rollup",
    """
SELECT c.country, SUM(t.total_qty) AS q, COUNT(*) AS n
FROM customers c
JOIN (SELECT customer_id, SUM(qty) AS total_qty FROM orders GROUP BY customer_id) t ON t.customer_id = c.id
GROUP BY c.country""",
)
LINES = ViewSpec(
    "lines", "SELECT o.id, o.qty, c.country FROM orders o JOIN customers c ON o.customer_id = c.id"
)
BY_COUNTRY = ViewSpec(
    "by_country",
    "SELECT country, SUM(qty) AS q, COUNT(*) AS n FROM lines GROUP BY country",
    reads=("lines",),
)
STATUSES = ViewSpec("statuses", "SELECT DISTINCT status FROM orders", materialized=True)
COUNTRIES = ViewSpec("countries", "SELECT country, COUNT(*) AS n FROM customers GROUP BY country")


def open_project(
    spark,
    tmp_project: MakeProject,
    specs: list[ViewSpec],
    setup=(ORDERS, CUSTOMERS, *SEED),
    config: str = INCREMENTAL_ONLY,
) -> Project:
    """A project of ``specs`` over seeded tables; the cost model is off unless ``config``
    says otherwise, since these tests check what the incremental rules do."""
    project = Project.open(
        tmp_project({"views/views.sql": views_file(specs), "ivm.yaml": config}), spark=spark
    )
    for statement in setup:
        project.sql(statement)
    return project


def assert_correct(project: Project, specs: list[ViewSpec], label: str = "") -> None:
    failures = compare_views(project.spark, project.database, specs, label)
    assert not failures, "\n\n".join(failures)
    bad = [r for r in project.verify() if not r.ok]
    assert not bad, bad


def actions(reports: list[ViewReport]) -> dict[str, tuple[str, str]]:
    return {r.view.split(".")[-1]: (r.action, r.reason) for r in reports}


def test_refresh_without_changes_runs_no_spark_job(spark, tmp_project: MakeProject) -> None:
    specs = [ROLLUP, LINES, BY_COUNTRY, STATUSES]
    project = open_project(spark, tmp_project, specs)
    project.refresh()
    with job_group(spark, "probe") as jobs_of:
        reports = project.refresh()
    jobs = jobs_of("probe")
    assert {r.action for r in reports} == {"unchanged"}, actions(reports)
    assert list(jobs) == [], f"a refresh with nothing to do ran {len(jobs)} Spark job(s)"


def test_view_whose_sources_did_not_change_runs_no_spark_job(
    spark, tmp_project: MakeProject
) -> None:
    specs = [STATUSES, COUNTRIES, LINES]
    # one view at a time, so that the probe's job group, switched as each view ends, is the
    # group of the next view's jobs (with workers, test_parallel_refresh.py)
    project = open_project(
        spark, tmp_project, specs, config="refresh: {recompute_above: never, workers: 1}\n"
    )
    project.refresh()
    project.sql("INSERT INTO orders VALUES (9, 2, 7, 'lost')")
    context = spark.sparkContext
    groups: list[str] = []

    def next_group(report: ViewReport) -> None:  # jobs after this report belong to the next view
        groups.append(report.view)
        context.setJobGroup(f"view-{len(groups)}", "probe")

    with job_group(spark, "view-0") as jobs_of:
        reports = project.refresh(on_view=next_group)
    jobs = {r.view.split(".")[-1]: jobs_of(f"view-{i}") for i, r in enumerate(reports)}
    assert actions(reports)["countries"] == ("unchanged", "")
    assert jobs["countries"] == [], (
        f"countries reads only customers, which did not change, yet ran jobs {jobs['countries']}"
    )
    assert jobs["statuses"] and jobs["lines"]  # the probe does see jobs where work was done
    assert_correct(project, specs)


class Crash(Exception):
    pass


@pytest.mark.parametrize("when", ["first refresh", "incremental refresh"])
def test_refresh_that_died_half_way_is_finished_by_the_next(
    spark, tmp_project: MakeProject, monkeypatch, when
) -> None:
    specs = [ROLLUP]
    project = open_project(spark, tmp_project, specs)
    if when == "incremental refresh":
        project.refresh()
        project.sql("INSERT INTO orders VALUES (6, 2, 5, 'new'), (7, 4, 1, 'new')")
        project.sql("UPDATE orders SET customer_id = 2 WHERE id = 1")
        project.sql("DELETE FROM customers WHERE id = 3")
    assert len(project.plans()[0].stages) >= 2
    real = Refresher.refresh_stage
    calls = []

    def dies_on_second_stage(self, stage, *args, **kwargs):
        calls.append(stage.table)
        if len(calls) == 2:
            raise Crash(f"injected crash before {stage.table}")
        return real(self, stage, *args, **kwargs)

    monkeypatch.setattr(Refresher, "refresh_stage", dies_on_second_stage)
    with pytest.raises(Crash):
        project.refresh()
    monkeypatch.setattr(Refresher, "refresh_stage", real)

    # more changes before the next refresh
    project.sql("INSERT INTO orders VALUES (8, 1, 10, 'late')")
    reports = project.refresh()
    assert reports[0].action in ("incremental", "created"), actions(reports)
    assert_correct(project, specs, f"after a crash in the {when}")
    assert {r.action for r in project.refresh()} == {"unchanged"}


def test_full_refresh_recomputes_every_view(spark, tmp_project: MakeProject) -> None:
    specs = [ROLLUP, LINES, BY_COUNTRY, STATUSES]
    project = open_project(spark, tmp_project, specs)
    project.refresh()
    project.sql("UPDATE orders SET qty = qty + 1 WHERE status = 'new'")
    reports = project.refresh(full=True)
    assert actions(reports) == {s.name: ("recomputed", "--full") for s in specs}
    assert_correct(project, specs)


def test_view_comparing_with_the_current_time_is_recomputed_by_every_refresh(
    spark, tmp_project: MakeProject
) -> None:
    """The current time in an outer join's ON, where no temporal filter keeps it: its rows
    can change with no source changing, so it is never "unchanged"; the others are. Verify
    reads the current time as the refresh did."""
    recent = ViewSpec(
        "recent",
        "SELECT o.id, o.qty, c.country FROM orders o LEFT JOIN customers c "
        "ON o.customer_id = c.id AND o.id + 1700000000 > unix_timestamp(current_timestamp()) - 86400",
    )
    project = open_project(spark, tmp_project, [recent, STATUSES])
    project.refresh()
    reports = project.refresh()
    assert actions(reports) == {
        "recent": ("recomputed", EVERY_REFRESH_REASON),
        "statuses": ("unchanged", ""),
    }
    assert not compare_views(spark, project.database, [recent, STATUSES], "second refresh")
    assert all(r.ok and not r.problem for r in project.verify())
    # an edit that changes its columns rebuilds the table and the view, not an overwrite in the old shape
    edited = ViewSpec(
        "recent", recent.select.replace("SELECT o.id, o.qty", "SELECT o.id, o.qty, o.status")
    )
    (project.root / "views/views.sql").write_text(views_file([edited, STATUSES]))
    assert actions(project.refresh())["recent"] == ("recomputed", "definition changed")
    assert project.sql("SELECT * FROM recent").columns == ["id", "qty", "status", "country"]
    assert not compare_views(spark, project.database, [edited, STATUSES], "after the edit")


def test_edited_view_and_its_dependents_are_recomputed(spark, tmp_project: MakeProject) -> None:
    specs = [LINES, BY_COUNTRY, STATUSES]
    project = open_project(spark, tmp_project, specs)
    project.refresh()
    edited = ViewSpec("lines", LINES.select + " WHERE o.qty > 1")
    specs = [edited, BY_COUNTRY, STATUSES]
    (project.root / "views/views.sql").write_text(views_file(specs))
    done = actions(project.refresh())
    assert done["lines"] == ("recomputed", "definition changed")
    assert done["by_country"][0] == "recomputed", done
    assert done["statuses"] == ("unchanged", "")
    assert_correct(project, specs)


def restore_customers(project: Project) -> None:
    before = project.sql("DESCRIBE HISTORY customers LIMIT 1").rows[0][0]
    project.sql("DELETE FROM customers WHERE country = 'DE'")
    project.sql("INSERT INTO customers VALUES (1, 'US')")
    project.sql(f"RESTORE TABLE customers TO VERSION AS OF {before}")
    project.sql("INSERT INTO customers VALUES (6, 'FR')")


NON_DML = {
    "add columns": [
        "INSERT INTO customers VALUES (5, 'FR')",
        "ALTER TABLE customers ADD COLUMNS (vip BOOLEAN)",
        "INSERT INTO customers VALUES (2, 'US', TRUE)",
    ],
    "restore": restore_customers,
    "replace": [
        "CREATE OR REPLACE TABLE customers (id INT, country STRING) USING DELTA",
        "INSERT INTO customers VALUES (1, 'IT'), (2, 'FR'), (2, 'FR')",
    ],
    # commits made while the change feed was off are not in the feed
    "change feed off and on": [
        "ALTER TABLE customers SET TBLPROPERTIES ('delta.enableChangeDataFeed' = 'false')",
        "INSERT INTO customers VALUES (2, 'US')",
        "DELETE FROM customers WHERE id = 1",
        "ALTER TABLE customers SET TBLPROPERTIES ('delta.enableChangeDataFeed' = 'true')",
    ],
    # a new table under the same name, whose version happens to equal the recorded one (1)
    "drop and recreate": [
        "DROP TABLE customers",
        "CREATE TABLE customers (id INT, country STRING) USING DELTA",
        "INSERT INTO customers VALUES (1, 'IT'), (2, 'IT')",
    ],
}


@pytest.mark.parametrize("operation", list(NON_DML))
def test_source_changed_by_non_dml_is_recomputed(
    spark, tmp_project: MakeProject, operation
) -> None:
    specs = [ROLLUP, COUNTRIES]
    project = open_project(spark, tmp_project, specs)
    project.refresh()
    change = NON_DML[operation]
    if callable(change):
        change(project)
    else:
        for statement in change:
            project.sql(statement)
    done = actions(project.refresh())
    for name in ("rollup", "countries"):
        action, reason = done[name]
        assert action == "recomputed", done
        assert "customers" in reason, done
    assert_correct(project, specs, operation)


def test_change_feed_turned_off_is_turned_back_on(spark, tmp_project: MakeProject) -> None:
    """A refresh turns a source's change data feed back on (read from its latest commit's
    checksum file, ``DeltaLog.properties``), so the next change is read from the feed."""
    specs = [COUNTRIES]
    project = open_project(spark, tmp_project, specs)
    project.refresh()
    project.sql("ALTER TABLE customers SET TBLPROPERTIES ('delta.enableChangeDataFeed' = 'false')")
    project.sql("INSERT INTO customers VALUES (5, 'US')")
    assert actions(project.refresh())["countries"][0] == "recomputed"
    properties = dict(project.sql("SHOW TBLPROPERTIES customers").rows)
    assert properties.get("delta.enableChangeDataFeed") == "true", properties
    project.sql("INSERT INTO customers VALUES (6, 'US')")
    assert actions(project.refresh())["countries"][0] == "incremental"
    assert_correct(project, specs)


def test_non_delta_source_is_a_clear_error(spark, tmp_project: MakeProject) -> None:
    specs = [ViewSpec("pv", "SELECT x, x * 2 AS y FROM plain")]
    project = open_project(
        spark,
        tmp_project,
        specs,
        setup=["CREATE TABLE plain (x INT) USING parquet", "INSERT INTO plain VALUES (1), (2)"],
    )
    with pytest.raises(IvmError) as caught:
        project.refresh()
    message = caught.value.message
    assert "plain" in message, message
    assert "\n" not in message and "Traceback" not in message and "at org." not in message, message
    assert "delta" in str(caught.value).lower(), str(caught.value)


def test_bag_view_returns_each_row_as_often_as_it_occurs(spark, tmp_project: MakeProject) -> None:
    bag = ViewSpec("bag", "SELECT status, qty FROM orders WHERE id <> 3")
    project = open_project(spark, tmp_project, [bag])
    project.refresh()
    project.sql(
        "INSERT INTO orders VALUES (5, 3, 4, 'shipped'), (10, 9, 4, 'shipped'), (11, NULL, NULL, NULL)"
    )
    project.refresh()
    result = project.sql("SELECT * FROM bag")
    assert result.columns == ["status", "qty"]
    rows = sorted(result.rows, key=repr)
    # two seeded, one exact duplicate row, one from another order
    assert rows.count(("shipped", 4)) == 4
    assert rows.count((None, None)) == 1 and rows.count((None, 1)) == 1
    assert len(rows) == 8
    assert not [
        c for c in project.spark.table(f"{project.database}.bag").columns if c.startswith("__ivm")
    ]
    project.sql("DELETE FROM orders WHERE id = 5")  # both copies of the duplicate go
    project.refresh()
    assert project.sql("SELECT * FROM bag WHERE status = 'shipped' AND qty = 4").rows == [
        ("shipped", 4)
    ]
    assert_correct(project, [bag])

    # the oracle and verify() both see a multiplicity that is off by one
    stage = project.plans()[0].stages[-1].table
    project.sql(f"UPDATE {stage} SET __ivm_w = __ivm_w + 1 WHERE status = 'new'")
    failures = compare_views(project.spark, project.database, [bag], "tampered")
    assert (
        len(failures) == 1
        and "view bag, tampered" in failures[0]
        and "('new', 2): 1" in failures[0]
    ), failures
    assert [r.ok for r in project.verify()] == [False]


def test_refreshing_one_view_refreshes_the_views_it_reads(spark, tmp_project: MakeProject) -> None:
    specs = [LINES, BY_COUNTRY, STATUSES]
    project = open_project(spark, tmp_project, specs)
    project.refresh()
    project.sql("INSERT INTO orders VALUES (12, 2, 9, 'gone')")
    reports = project.refresh(["by_country"])
    assert [r.view.split(".")[-1] for r in reports] == ["lines", "by_country"]
    assert {r.action for r in reports} == {"incremental"}, actions(reports)
    failures = compare_views(project.spark, project.database, [LINES, BY_COUNTRY], "one view")
    assert not failures, "\n\n".join(failures)
    pending = {s.view.split(".")[-1]: s.pending for s in project.status()}
    assert pending["lines"] == {} and pending["by_country"] == {}
    assert pending["statuses"], pending  # not asked for: still behind


def test_delta_error_is_an_ivm_error(spark, tmp_project: MakeProject) -> None:
    """Delta's own errors (error classes Spark's message reader does not know) come out as
    an IvmError with Delta's message, not as a Py4J failure inside the error handler."""
    project = Project.open(tmp_project({}), spark=spark)
    project.sql("CREATE TABLE t (x INT) USING DELTA")
    with pytest.raises(SqlError) as caught:
        project.sql("SELECT * FROM table_changes('t', 5, 6)")
    assert "Start version 5" in caught.value.message, caught.value.message


def test_large_change_is_recomputed_and_says_why(spark, tmp_project: MakeProject) -> None:
    """A change that is a large share of what a view reads is recomputed (the cost model),
    a small one is applied; with recompute_above: never, even a large one is applied."""
    specs = [
        ViewSpec(
            "per_status", "SELECT status, COUNT(*) AS n, SUM(qty) AS q FROM orders GROUP BY status"
        )
    ]
    fill = "INSERT INTO orders SELECT CAST(id AS INT), CAST(id % 7 AS INT), CAST(id % 5 AS INT), element_at(array('new', 'shipped'), CAST(id % 2 + 1 AS INT)) FROM range({0}, {1}) AS r(id)"
    for setting, large in (
        ("", "recomputed"),
        ("refresh: {recompute_above: never}\n", "incremental"),
    ):
        project = Project.open(
            tmp_project({"views/views.sql": views_file(specs), "ivm.yaml": setting}), spark=spark
        )
        project.sql(ORDERS)
        project.sql(fill.format(0, 40_000))
        project.refresh()
        project.sql(fill.format(40_000, 60_000))  # 20,000 new rows: a third of the table
        (report,) = project.refresh()
        assert report.action == large, report
        if large == "recomputed":
            assert report.reason.startswith(
                "cheaper than incremental: 20,000 changed rows are 33% of the 60,000 rows"
            ), report
        project.sql("UPDATE orders SET qty = qty + 1 WHERE id < 100")
        assert [r.action for r in project.refresh()] == ["incremental"]
        assert_correct(project, specs, setting)


def test_change_to_both_sides_of_a_join_is_recomputed_when_that_scans_no_more(
    spark, tmp_project: MakeProject
) -> None:
    """The cost model's scans rule: a change to both orders and customers makes each join
    term scan the other table whole, as much as a recompute scans, so the join is
    recomputed (an INSERT OVERWRITE: the user's view is left as it is) and the view over it
    follows; a change to orders alone scans only customers and is applied. With
    recompute_above: never both are applied."""
    specs = [LINES, BY_COUNTRY]
    for config, both in (("", "recomputed"), (INCREMENTAL_ONLY, "incremental")):
        project = open_project(spark, tmp_project, specs, config=config)
        project.refresh()
        project.sql("INSERT INTO orders VALUES (6, 2, 5, 'new')")
        project.sql("UPDATE customers SET country = 'NL' WHERE id = 3")
        with feeds_read() as kept:
            reports = actions(project.refresh())
        assert [action for action, _ in reports.values()] == [both, both], reports
        if both == "recomputed":
            # no input is large enough to bound: the rule weighs the whole reads, exactly,
            # before a row of the change is read
            assert reports["lines"][1].startswith("cheaper than incremental: its change reads "), (
                reports
            )
            assert "at least" not in reports["lines"][1], reports
            assert kept.call_count == 0, "the change was read before the scans rule chose"
            assert reports["by_country"][1].endswith("__ivm_lines was recomputed"), reports
            history = project.sql(
                f"DESCRIBE HISTORY {project.plans(['lines'])[0].table} LIMIT 1"
            ).rows[0]
            assert history[4] == "WRITE", history  # overwritten in place, not replaced
        assert_correct(project, specs, config)
        project.sql("DELETE FROM orders WHERE id = 6")
        assert [r.action for r in project.refresh()] == ["incremental", "incremental"]
        assert_correct(project, specs, config)


def test_a_change_to_both_sides_bounded_to_few_files_is_applied(
    spark, tmp_project: MakeProject, monkeypatch
) -> None:
    """The scans rule counts, for an input bounded by the change's keys, only the files whose
    statistics overlap the bounds: a change to both sides of the join at one end of the key
    range reads one file of each side's ten, so it is applied, where counting whole tables
    would recompute it (as the test above shows for tables of one file)."""
    monkeypatch.setattr(bounds, "BOUNDED_FROM_BYTES", 0)  # every input counts as large
    slabs = [
        f"INSERT INTO {t} SELECT CAST(id AS INT), {v} FROM range({n * 100}, {n * 100 + 100})"
        for n in range(10)
        for t, v in (("orders", "CAST(id AS INT), 1, 'new'"), ("customers", "'DE'"))
    ]
    project = open_project(
        spark, tmp_project, [LINES], setup=(ORDERS, CUSTOMERS, *slabs), config=""
    )
    project.refresh()
    project.sql("INSERT INTO orders VALUES (1000, 5, 5, 'new')")
    project.sql("UPDATE customers SET country = 'NL' WHERE id = 3")
    (report,) = project.refresh()
    assert (report.action, report.reason) == ("incremental", "")
    # each side's term opened one file of the other side (ten slabs, and the new row's file)
    assert sorted((t.split(".")[-1], opened) for t, (opened, _) in report.files_read.items()) == [
        ("customers", 1),
        ("orders", 1),
    ]
    assert all(total >= 10 for _, total in report.files_read.values()), report.files_read
    assert report.bounded_reads.startswith("read 1 of "), report.bounded_reads
    assert_correct(project, [LINES], "")


def feeds_read():
    """Counts (without changing them) the refresh's reads of change data feeds
    (``SourceChanges.rewrite``, which every change query passes through before it runs)."""
    return mock.patch.object(
        SourceChanges, "rewrite", autospec=True, side_effect=SourceChanges.rewrite
    )


def test_a_change_that_reads_what_a_recompute_reads_whatever_its_keys_is_never_read(
    spark, tmp_project: MakeProject, monkeypatch
) -> None:
    """The scans rule decides before any of the change is computed when the reads no key of
    the change can bound already weigh what a recompute reads: a change to both orders and
    customers makes the two terms that do not read customers' change read customers whole
    as ``r`` (a non-equi join bounds nothing), and with the third read of orders or
    customers that is at least the recompute's orders and two customers, so no change data
    feed is read and the reason says "at least". A change to orders alone reads customers
    twice, bounded once: less than the recompute, so its keys are fetched and it is applied."""
    monkeypatch.setattr(bounds, "BOUNDED_FROM_BYTES", 0)  # every input counts as large
    pairs = ViewSpec(
        "pairs",
        "SELECT o.id, c.country, r.id AS later FROM orders o "
        "JOIN customers c ON o.customer_id = c.id JOIN customers r ON r.id > c.id",
    )
    project = open_project(spark, tmp_project, [pairs], config="")
    project.refresh()
    project.sql("INSERT INTO orders VALUES (6, 2, 5, 'new')")
    project.sql("UPDATE customers SET country = 'NL' WHERE id = 3")
    with feeds_read() as kept:
        ((action, reason),) = actions(project.refresh()).values()
    assert action == "recomputed", reason
    assert reason.startswith("cheaper than incremental: its change reads at least "), reason
    assert kept.call_count == 0, "the change was read before the scans rule chose"
    assert_correct(project, [pairs], "both sides")
    project.sql("INSERT INTO orders VALUES (7, 1, 1, 'new')")
    with feeds_read() as kept:
        ((action, reason),) = actions(project.refresh()).values()
    assert (action, reason) == ("incremental", ""), reason
    assert kept.call_count > 0
    assert_correct(project, [pairs], "orders alone")


def _stage_versions(project: Project) -> dict[str, int]:
    log = project.delta_log()
    return {plan.table: log.latest_version(plan.table) for plan in project.plans()}


def test_change_that_consolidates_to_nothing_is_recorded_in_the_event_log(
    spark, tmp_project: MakeProject
) -> None:
    """A change no row of the view depends on is computed once and found empty: nothing is
    committed to the views' tables, and their new versions are recorded in the event log's
    append (``physical.records``); the view above has nothing to read. The next refresh
    finds them up to date, ``status`` shows nothing pending, and once a real change commits
    to a table, its commit's record is the one read again."""
    shipped = ViewSpec("shipped", "SELECT id, qty FROM orders WHERE status = 'shipped'")
    totals = ViewSpec(
        "totals", "SELECT COUNT(*) AS n, SUM(qty) AS q FROM shipped", reads=("shipped",)
    )
    project = open_project(spark, tmp_project, [shipped, totals])
    project.refresh()
    before = _stage_versions(project)
    project.sql("INSERT INTO orders VALUES (20, 1, 1, 'new')")
    reports = project.refresh()
    # the view above finds its source's table where it was: nothing to do, and its record
    # moves beside its table too
    assert [(r.action, r.rows_out) for r in reports] == [("incremental", 0), ("unchanged", 0)], (
        actions(reports)
    )
    assert _stage_versions(project) == before  # no commit: no MERGE, no empty INSERT
    assert {r.action for r in project.refresh()} == {"unchanged"}
    assert all(not s.pending for s in project.status()), project.status()
    assert_correct(project, [shipped, totals])
    # The tables move on by a refresh that never appends to the log (as one killed before
    # its append would): the records kept beside name versions that are gone, and each
    # commit's own is read, or the UPDATE would be applied twice.
    logged = project.config
    project.config = dataclasses.replace(
        logged, history=dataclasses.replace(logged.history, log=False)
    )
    project.sql("UPDATE orders SET status = 'shipped' WHERE id = 20")
    project.refresh()
    project.config = logged
    project.sql("INSERT INTO orders VALUES (21, 2, 3, 'shipped')")
    project.refresh()
    assert_correct(project, [shipped, totals])
    # a change that comes to nothing again, recorded beside those commits
    project.sql("INSERT INTO orders VALUES (22, 1, 1, 'new')")
    project.refresh()
    assert {r.action for r in project.refresh()} == {"unchanged"}
    assert_correct(project, [shipped, totals])
    # no commit was made, so none is taken for one a killed refresh never logged
    log_table = refresh_log.table_in(project.database)
    assert project.sql(f"SELECT DISTINCT outcome FROM {log_table}").rows == [("ok",)]


def test_without_an_event_log_a_change_that_came_to_nothing_is_recorded_by_a_commit(
    spark, tmp_project: MakeProject
) -> None:
    """With the event log off, the new versions go into a record-only commit: an INSERT of
    no row, conditional like every ivm commit."""
    shipped = ViewSpec("shipped", "SELECT id, qty FROM orders WHERE status = 'shipped'")
    project = open_project(
        spark, tmp_project, [shipped], config=INCREMENTAL_ONLY + "history: {log: false}\n"
    )
    project.refresh()
    project.sql("INSERT INTO orders VALUES (20, 1, 1, 'new')")
    assert [(r.action, r.rows_out) for r in project.refresh()] == [("incremental", 0)]
    (plan,) = project.plans()
    last = spark.sql(f"DESCRIBE HISTORY {plan.table} LIMIT 1").first()
    assert (last.operation, last.operationMetrics["numOutputRows"]) == ("WRITE", "0"), last
    assert {r.action for r in project.refresh()} == {"unchanged"}
    assert_correct(project, [shipped])


def test_stage_table_gets_deletion_vectors_only_when_its_load_is_large(
    spark, tmp_project: MakeProject, monkeypatch
) -> None:
    """Small stage tables MERGE faster without deletion vectors; a large one gets them after
    its first load (the threshold is lowered here to the seeded rows)."""
    monkeypatch.setattr(layout, "DELETION_VECTORS_ABOVE_ROWS", 3)
    specs = [LINES, COUNTRIES]
    project = open_project(spark, tmp_project, specs)
    project.refresh()
    enabled = {
        plan.view.name: dict(project.sql(f"SHOW TBLPROPERTIES {plan.table}").rows).get(
            "delta.enableDeletionVectors"
        )
        for plan in project.plans()
    }
    assert enabled == {"lines": "true", "countries": "false"}  # 5 joined rows, 3 countries
    project.sql("UPDATE orders SET qty = 9 WHERE id = 5")
    project.sql("DELETE FROM customers WHERE id = 2")
    assert {r.action for r in project.refresh()} == {"incremental"}
    assert_correct(project, specs)


def key_ranges(project: Project, table: str, key: str) -> list[tuple]:
    """Each file's (rows, smallest key, largest key) at the table's latest version, in the
    order of their keys (a file of NULL keys only: (rows, None, None), first)."""
    log = DeltaLog(project.spark)
    files = log.file_stats(table, log.latest_version(table))
    ranges = [
        (s["numRecords"], s.get("minValues", {}).get(key), s.get("maxValues", {}).get(key))
        for _, s in files
    ]
    return sorted(ranges, key=lambda r: (r[1] is not None, r[1] or 0))


def test_a_large_load_writes_a_keyed_stage_in_key_order_a_file_per_range(
    spark, tmp_project: MakeProject, monkeypatch
) -> None:
    """A full load that reads at least ``KEY_ORDER_FROM_BYTES`` (lowered here to nothing)
    writes a stage whose MERGE matches a key in that key's order, ``FILE_ROWS`` rows a file
    (lowered to 2): one file's keys end before the next one's begin. The first load, and a
    forced recompute (INSERT OVERWRITE), both; and the MERGEs that follow keep the views right.
    `ivm optimize` keeps the order (a compaction would pack every range into one file).
    (A view no other reads keeps a trace, appended to: not laid out by key.)"""
    monkeypatch.setattr(layout, "KEY_ORDER_FROM_BYTES", 0)
    monkeypatch.setattr(layout, "FILE_ROWS", 2)
    statuses = ViewSpec("statuses", "SELECT DISTINCT status FROM orders")
    counted = ViewSpec("counted", "SELECT COUNT(*) AS n FROM statuses", reads=("statuses",))
    # a table laid out as its CREATE VIEW asks is left so: Delta refuses to ZORDER a table
    # by its partition column
    by_status = ViewSpec(
        "by_status",
        "SELECT status, COUNT(*) AS n FROM orders GROUP BY status",
        clauses="PARTITIONED BY (status)",
    )
    total = ViewSpec("total", "SELECT SUM(n) AS n FROM by_status", reads=("by_status",))
    specs = [ROLLUP, statuses, counted, by_status, total]
    more = "INSERT INTO orders SELECT id, id % 13, id % 5, concat('s', id % 9) FROM range(10, 60)"
    customers = "INSERT INTO customers SELECT id, concat('c', id % 3) FROM range(5, 13)"
    project = open_project(
        spark, tmp_project, specs, setup=(ORDERS, CUSTOMERS, *SEED, more, customers)
    )

    def assert_in_key_order(exactly: bool = True) -> None:
        """``exactly``: 2 rows a file, as a load writes them; else ranges apart, in several
        files (OPTIMIZE's range partitioning splits at sampled keys)."""
        plans = project.plans()
        keyed = [s for plan in plans for s in plan.stages if plan.key_order(s)]
        assert len([s for plan in plans for s in plan.stages if s.merge_keys]) == 3
        # the rollup's orders per customer (0-12 and NULL), the distinct statuses (9, 2, NULL)
        files = [len(key_ranges(project, s.table, s.merge_keys[0])) for s in keyed]
        assert files == [7, 6] if exactly else all(n >= 3 for n in files), files
        for stage in keyed:
            ranges = key_ranges(project, stage.table, stage.merge_keys[0])
            assert not exactly or all(rows <= 2 for rows, _, _ in ranges), (stage.table, ranges)
            bounded = [(lo, hi) for _, lo, hi in ranges if lo is not None]
            ordered = all(hi < lo for (_, hi), (lo, _) in itertools.pairwise(bounded))
            assert ordered, (stage.table, ranges)

    project.refresh()
    assert_in_key_order()
    project.sql("UPDATE orders SET qty = qty + 1 WHERE id % 4 = 0")
    project.sql("DELETE FROM orders WHERE customer_id = 7 OR status = 's3'")
    project.sql("INSERT INTO orders VALUES (99, NULL, 5, NULL), (100, 40, 1, 'late')")
    assert {r.action for r in project.refresh()} == {"incremental"}
    assert_correct(project, specs)
    project.optimize()
    assert_in_key_order(exactly=False)
    assert_correct(project, specs)
    project.sql("DELETE FROM orders WHERE id >= 99")
    project.sql("INSERT INTO orders VALUES (7, 7, 1, 's3')")
    assert {r.action for r in project.refresh(full=True)} == {"recomputed"}
    assert_in_key_order()
    assert_correct(project, specs)


def test_a_stage_is_laid_out_by_key_only_when_its_load_reads_enough_and_it_has_a_key() -> None:
    query = exp.select("k", "n").from_("t")
    assert layout.key_ordered(query, ("k",), layout.KEY_ORDER_FROM_BYTES - 1) == (query, {})
    assert layout.key_ordered(query, (), None) == (query, {})  # appended to, or whole rows
    ordered, settings = layout.key_ordered(query, ("k",), None)  # unknown: as large
    assert to_sql(ordered, pretty=False) == (
        "SELECT `k`, `n` FROM (SELECT k, n FROM t) AS `loaded` ORDER BY `k`"
    )
    assert settings == {"spark.sql.files.maxRecordsPerFile": str(layout.FILE_ROWS)}


def test_min_max_rescan_a_group_only_when_its_extreme_loses_its_last_row(
    spark, tmp_project: MakeProject
) -> None:
    """Inserts, and deletes of other rows, are applied from the change alone; deleting the
    last row at a group's extreme rescans that group, and the refresh says so."""
    extremes = ViewSpec(
        "extremes", "SELECT MAX(qty) AS hi, MIN(qty) AS lo, COUNT(*) AS n FROM orders"
    )
    per_status = ViewSpec(
        "per_status", "SELECT status, MAX(qty) AS hi, MIN(id) AS first FROM orders GROUP BY status"
    )
    specs = [extremes, per_status]
    project = open_project(spark, tmp_project, specs)
    project.refresh()
    steps = [  # (statement, what each view's refresh says)
        ("INSERT INTO orders VALUES (6, 1, 9, 'new'), (7, 2, 0, 'new')", ("", "")),
        (
            "DELETE FROM orders WHERE id = 1",
            ("", "rescanned 1 group"),
        ),  # qty 2 is no extreme; id 1 was MIN(id) of 'new'
        ("DELETE FROM orders WHERE qty = 9", ("rescanned 1 group", "rescanned 1 group")),
        (
            "UPDATE orders SET qty = qty + 1 WHERE status = 'shipped'",
            ("", ""),
        ),  # 'shipped' max 4 -> 5 (two rows)
    ]
    for statement, expected in steps:
        project.sql(statement)
        reported = actions(project.refresh())
        for view, reason in zip(("extremes", "per_status"), expected):
            action, said = reported[view]
            assert action == "incremental" and (
                said.startswith(reason) if reason else said == ""
            ), (statement, reported)
        assert_correct(project, specs, statement)
