"""A view's bag table as a trace of appended batches (``incremental.bag``,
``physical.batches``), under the differential oracle: random inserts, updates and deletes
with duplicates, NULLs and churn, after which every view equals its SELECT, including views
that read the trace through operators that need it consolidated (DISTINCT, MIN and MAX, an
anti-join, a left join) and the views' own rows. So are the DISTINCT and the aggregate of a
view that no other view reads (``incremental.distinct``, ``incremental.aggregate``): their
per-row count deltas and per-group state deltas appended, summed when read."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path
from unittest import mock

import pytest
from jobs import job_group
from oracle import (
    INCREMENTAL_ONLY,
    MIGRATION,
    RandomChanges,
    ViewSpec,
    apply_changes,
    check_round,
    table_rows,
    views_file,
)

from ivm_sql.host import WarmSnapshots
from ivm_sql.physical import batches
from ivm_sql.physical.changes import SourceChanges
from ivm_sql.project import Project

pytestmark = pytest.mark.spark

MakeProject = Callable[[dict[str, str]], Path]

LINES = ViewSpec(
    "lines",
    "SELECT o.id, o.customer_id, o.qty, c.country FROM orders o "
    "JOIN customers c ON o.customer_id = c.id",
)
OVER_LINES = [
    ViewSpec(
        "line_extremes",
        "SELECT country, MIN(qty) AS lo, MAX(qty) AS hi, COUNT(*) AS n, SUM(qty) AS q "
        "FROM lines GROUP BY country",
        reads=("lines",),
    ),
    ViewSpec(
        "idle_customers",
        "SELECT c.id, c.name FROM customers c "
        "WHERE NOT EXISTS (SELECT 1 FROM lines l WHERE l.customer_id = c.id)",
        reads=("lines",),
    ),
    ViewSpec(
        "customer_lines",
        "SELECT c.id, l.qty FROM customers c LEFT JOIN lines l ON l.customer_id = c.id",
        reads=("lines",),
    ),
]
# DISTINCT and aggregates that no other view reads: their tables are traces of per-row
# count deltas and per-group state deltas
TRACED_STATES = [
    ViewSpec("line_countries", "SELECT DISTINCT country FROM lines", reads=("lines",)),
    ViewSpec(
        "customer_countries", "SELECT DISTINCT customer_id, country FROM lines", reads=("lines",)
    ),
    ViewSpec(
        "customer_totals",
        "SELECT customer_id, COUNT(*) AS n, COUNT(country) AS c, SUM(qty) AS q, AVG(qty) AS a "
        "FROM lines GROUP BY customer_id",
        reads=("lines",),
    ),
    ViewSpec(
        "busy_countries",
        "SELECT country, SUM(qty) AS q FROM lines GROUP BY country HAVING COUNT(*) > 1",
        reads=("lines",),
    ),
    ViewSpec(
        "line_sums",
        "SELECT COUNT(*) AS n, SUM(qty) AS q, AVG(qty) AS a FROM lines",
        reads=("lines",),
    ),
]
EVERY = 3  # a rewrite every third batch, so that the rounds below meet two


def migrated(spark, tmp_project: MakeProject, specs: list[ViewSpec]) -> Project:
    """A project of ``specs`` over the oracle's tables, its views kept incremental, migrated."""
    project = Project.open(
        tmp_project(
            {
                "migrations/0001_tables.sql": MIGRATION,
                "ivm.yaml": INCREMENTAL_ONLY,
                "views/lines.sql": views_file(specs),
            }
        ),
        spark=spark,
    )
    project.migrate()
    return project


def trace_writes(project: Project, view: str) -> list[str]:
    """How each commit of the view's bag table wrote it, oldest first: "created",
    "appended" (rows added, none removed), "rewritten" (files removed), "recorded" (no row),
    or the name of any other operation (a MERGE, say)."""
    table = f"{project.database}.__ivm_{view}"
    kinds = []
    for row in project.spark.sql(f"DESCRIBE HISTORY {table}").orderBy("version").collect():
        metrics = row.operationMetrics or {}
        if row.operation.startswith("CREATE"):
            kinds.append("created")
        elif row.operation != "WRITE":
            kinds.append(row.operation)
        elif int(metrics.get("numRemovedFiles") or 0) > 0:
            kinds.append("rewritten")
        else:
            kinds.append("appended" if int(metrics.get("numOutputRows") or 0) else "recorded")
    return kinds


def test_trace_of_batches_equals_its_select_through_appends_and_rewrites(
    spark, tmp_project: MakeProject
) -> None:
    specs = [LINES, *OVER_LINES, *TRACED_STATES]
    project = migrated(spark, tmp_project, specs)
    changes = RandomChanges(random.Random(11))
    apply_changes(project, changes.initial())
    project.refresh()
    check_round(project, specs, "initial load", verify=False)
    with mock.patch.object(batches, "EVERY", EVERY):
        for round_ in range(1, 5):
            statements = changes.round(table_rows(project))
            apply_changes(project, statements)
            reports = project.refresh()
            assert not [r.view for r in reports if r.action == "recomputed"], [
                (r.view, r.reason) for r in reports
            ]
            check_round(
                project,
                specs,
                f"round {round_}\n  changes:\n    " + ";\n    ".join(statements),
                verify=round_ == 4,
            )
    # every third batch rewrote each trace; the batches between were appended
    for view in ["lines", *(spec.name for spec in TRACED_STATES)]:
        writes = trace_writes(project, view)
        assert writes.count("rewritten") >= 1 and writes.count("appended") >= 2, (view, writes)
        assert "MERGE" not in writes, (view, writes)


def test_a_rewrite_leaves_each_row_once(spark, tmp_project: MakeProject) -> None:
    """Rows that came and went across batches are stored until the rewrite, which keeps each
    row once with its summed weight."""
    project = migrated(spark, tmp_project, [LINES])
    project.sql("INSERT INTO customers VALUES (1, 'ann', 'DE', 1)")
    project.sql("INSERT INTO orders VALUES (1, 1, 1, 2, 'new', NULL), (1, 1, 1, 2, 'new', NULL)")
    project.refresh()
    trace = f"{project.database}.__ivm_lines"
    with mock.patch.object(batches, "EVERY", EVERY):
        project.sql("DELETE FROM orders WHERE id = 1")
        project.refresh()  # appended: the row with weight -2
        project.sql("INSERT INTO orders VALUES (1, 1, 1, 2, 'new', NULL)")
        project.refresh()  # appended: the row with weight 1
        assert project.sql(f"SELECT __ivm_w FROM {trace} ORDER BY __ivm_w").rows == [
            (-2,),
            (1,),
            (2,),
        ]
        assert project.sql("SELECT * FROM lines").rows == [(1, 1, 2, "DE")]
        project.sql("INSERT INTO orders VALUES (2, 1, 1, 5, 'new', NULL)")
        project.refresh()  # the third batch: rewritten
    assert project.sql(f"SELECT id, __ivm_w FROM {trace} ORDER BY id").rows == [(1, 1), (2, 1)]
    assert trace_writes(project, "lines") == [
        "created",
        "appended",
        "appended",
        "rewritten",
    ]


def test_an_aggregate_a_new_view_reads_is_rebuilt_to_keep_its_state_whole(
    spark, tmp_project: MakeProject
) -> None:
    """An aggregate no view reads keeps a trace of state deltas; once a view reads it, its
    table is rebuilt (its plan changed) and takes each change with a MERGE, so that the view
    above reads result rows from its change data feed; once none does, it is rebuilt and
    appended to again. The views equal their SELECT throughout."""
    (totals,) = [spec for spec in TRACED_STATES if spec.name == "customer_totals"]
    above = ViewSpec(
        "big_customers", "SELECT customer_id FROM customer_totals WHERE q > 2", reads=(totals.name,)
    )
    root = tmp_project(
        {
            "migrations/0001_tables.sql": MIGRATION,
            "ivm.yaml": INCREMENTAL_ONLY,
            "views/lines.sql": views_file([LINES, totals]),
        }
    )
    project = Project.open(root, spark=spark)
    project.migrate()
    changes = RandomChanges(random.Random(5))
    apply_changes(project, changes.initial())
    project.refresh()
    apply_changes(project, changes.round(table_rows(project)))
    project.refresh()
    assert trace_writes(project, totals.name)[-1] == "appended"

    (root / "views" / "above.sql").write_text(views_file([above]))
    reports = {r.view.split(".")[-1]: r for r in project.refresh()}
    assert reports[totals.name].action == "recomputed", reports[totals.name]
    assert reports[above.name].action == "created"
    apply_changes(project, changes.round(table_rows(project)))
    project.refresh()
    writes = trace_writes(project, totals.name)
    assert writes[-1] == "MERGE", writes
    check_round(project, [LINES, totals, above], "after the view above came", verify=True)

    # its last reader gone, it is rebuilt again, and appended to
    (root / "views" / "above.sql").unlink()
    (report,) = [r for r in project.refresh() if r.view.endswith(f".{totals.name}")]
    assert report.action == "recomputed", report
    apply_changes(project, changes.round(table_rows(project)))
    project.refresh()
    assert trace_writes(project, totals.name)[-1] == "appended"
    check_round(project, [LINES, totals], "after the view above went", verify=False)


def test_a_batch_appended_is_handed_to_the_views_above_instead_of_read_back(
    spark, tmp_project: MakeProject
) -> None:
    """The views above a bag read the batch it appended from the rows it wrote, not from
    Delta's change data feed (``SourceChanges.offer``); a view that missed a batch (refreshed
    after two) reads both from the feed. Each view equals its SELECT either way, through
    inserts, deletes, updates and a row that comes and goes."""
    specs = [LINES, *OVER_LINES]
    project = migrated(spark, tmp_project, specs)
    project.sql("INSERT INTO customers VALUES (1, 'ann', 'DE', 1), (2, 'bob', NULL, 2)")
    project.sql("INSERT INTO orders VALUES (1, 1, 1, 2, 'new', NULL), (2, 2, 1, 3, 'new', NULL)")
    project.refresh()
    trace = f"{project.database}.__ivm_lines"
    feeds_read: list[str] = []
    offered: list[int] = []
    read_feed, offer = SourceChanges._read, SourceChanges.offer

    def reading(changes: SourceChanges, read):
        feeds_read.append(read.expressions[0].name)
        return read_feed(changes, read)

    def offering(changes: SourceChanges, table: str, commit, rows) -> None:
        if table == trace:
            offered.append(commit.version)
        offer(changes, table, commit, rows)

    rounds = [
        ["INSERT INTO orders VALUES (3, 1, 2, 5, 'new', NULL), (3, 1, 2, 5, 'new', NULL)"],
        ["UPDATE orders SET qty = qty + 1 WHERE id = 2", "DELETE FROM orders WHERE id = 1"],
        ["DELETE FROM orders WHERE id = 3", "INSERT INTO orders VALUES (3, 1, 2, 5, 'new', NULL)"],
    ]
    with (
        mock.patch.object(SourceChanges, "_read", reading),
        mock.patch.object(SourceChanges, "offer", offering),
    ):
        for number, statements in enumerate(rounds, 1):
            apply_changes(project, statements)
            feeds_read.clear()
            project.refresh()
            assert offered[-1] == project.spark.sql(f"DESCRIBE HISTORY {trace}").first().version
            assert trace not in feeds_read, feeds_read
            check_round(project, specs, f"round {number}", verify=False)
        # the views above miss one batch: they read both batches from Delta's feed
        project.sql("DELETE FROM orders WHERE id = 2")
        project.refresh(["lines"])
        project.sql("INSERT INTO orders VALUES (4, 2, 3, 1, 'new', NULL)")
        feeds_read.clear()
        project.refresh()
        assert trace in feeds_read, feeds_read
    check_round(project, specs, "after a batch the views above missed", verify=False)


def test_the_server_counts_the_rows_of_traces_between_commands_for_status(
    spark, tmp_project: MakeProject
) -> None:
    """A trace's row count takes a Spark job (its batches are summed), so under the server
    ``WarmSnapshots`` counts the views a refresh wrote after the command, and the next
    ``status`` runs no job. A count is kept for the table version it read: after a refresh
    the server has not counted yet, or one whose count a command cancelled, ``status``
    counts itself (and keeps what it counted), and every count is the view's."""
    (totals,) = [spec for spec in TRACED_STATES if spec.name == "customer_totals"]
    project = migrated(spark, tmp_project, [LINES, totals])
    project.hosted = True
    project.sql("INSERT INTO customers VALUES (1, 'ann', 'DE', 1), (2, 'bob', NULL, 2)")
    project.sql("INSERT INTO orders VALUES (1, 1, 1, 2, 'new', NULL), (2, 2, 1, 3, 'new', NULL)")

    def counts() -> dict[str, int]:
        return {
            v: project.sql(f"SELECT COUNT(*) FROM {v}").rows[0][0] for v in ("lines", totals.name)
        }

    def status(group: str) -> tuple[dict[str, int | None], list[int]]:
        with job_group(spark, group) as jobs:
            rows = {s.view.split(".")[-1]: s.rows for s in project.status()}
            return rows, jobs(group)

    snapshots = WarmSnapshots(spark)
    project.refresh()
    snapshots.after_command(project)
    snapshots.wait()
    rows, jobs = status("counted")
    assert rows == counts() and jobs == [], (rows, jobs)

    project.sql("INSERT INTO orders VALUES (3, 1, 2, 5, 'new', NULL)")
    project.refresh()  # the server has not counted these versions
    rows, jobs = status("not counted")
    assert rows == counts() == {"lines": 3, totals.name: 2}, rows
    assert jobs, "status did not count the versions the server has not counted"
    rows, jobs = status("counted by the status before")
    assert rows == counts() and jobs == [], (rows, jobs)

    project.sql("DELETE FROM orders WHERE id = 2")
    project.refresh()
    snapshots.after_command(project)
    snapshots.yield_to_command()  # a command came: the count may be cancelled
    snapshots.wait()
    assert status("after a cancel")[0] == counts() == {"lines": 2, totals.name: 1}
