"""Views refreshed at the same time on worker threads (``runtime.workers``), on real Spark
and Delta: a view over another view waits for it, each worker keeps its own session (its
commit record, settings and temporary views), and every view equals its SELECT."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

from oracle import ViewSpec, compare_views, views_file

from ivm_sql.project import Project
from ivm_sql.runtime.refresh import StageStart

MakeProject = Callable[[dict[str, str]], Path]

SETUP = [
    "CREATE TABLE orders (id INT, customer_id INT, qty INT) USING DELTA",
    "CREATE TABLE customers (id INT, country STRING) USING DELTA",
    "INSERT INTO orders VALUES (1, 1, 2), (2, 1, 3), (3, 2, NULL), (4, NULL, 1), (5, 3, 4), (5, 3, 4)",
    "INSERT INTO customers VALUES (1, 'DE'), (2, 'FR'), (3, 'DE'), (4, NULL)",
]
LINES = ViewSpec(
    "lines", "SELECT o.id, o.qty, c.country FROM orders o JOIN customers c ON o.customer_id = c.id"
)
BY_COUNTRY = ViewSpec(
    "by_country",
    "SELECT country, SUM(qty) AS q, COUNT(*) AS n FROM lines GROUP BY country",
    reads=("lines",),
)
TOTALS = ViewSpec("totals", "SELECT customer_id, SUM(qty) AS q FROM orders GROUP BY customer_id")
COUNTRIES = ViewSpec("countries", "SELECT DISTINCT country FROM customers")
SPECS = [LINES, BY_COUNTRY, TOTALS, COUNTRIES]
CHANGES = [
    [
        "INSERT INTO orders VALUES (6, 2, 7), (7, 4, 1)",
        "UPDATE customers SET country = 'IT' WHERE id = 3",
    ],
    [
        "DELETE FROM orders WHERE id = 5",
        "INSERT INTO customers VALUES (5, 'FR')",
        "UPDATE orders SET customer_id = 5 WHERE id = 1",
    ],
]


def test_views_refresh_at_the_same_time_and_a_view_waits_for_the_view_it_reads(
    spark, tmp_project: MakeProject
) -> None:
    config = "refresh: {recompute_above: never, workers: 3}\n"
    project = Project.open(
        tmp_project({"views/views.sql": views_file(SPECS), "ivm.yaml": config}), spark=spark
    )
    for statement in SETUP:
        project.sql(statement)
    assert project.refresh_workers == 3
    for number, changes in enumerate([[], *CHANGES]):
        for statement in changes:
            project.sql(statement)
        threads: dict[str, set[str]] = {}
        started: list[str] = []

        def on_stage(start: StageStart) -> None:
            threads.setdefault(start.view.split(".")[-1], set()).add(
                threading.current_thread().name
            )
            started.append(start.view.split(".")[-1])

        reports = project.refresh(on_stage=on_stage)
        assert [r.view for r in reports] == [
            plan.name for plan in project.plans()
        ]  # the plans' order
        assert {r.action for r in reports} == ({"created"} if number == 0 else {"incremental"})
        # the views ran on worker threads, and by_country began after every stage of lines
        assert len(
            set().union(*threads.values())
        ) >= 2 and threading.current_thread().name not in set().union(*threads.values())
        assert started.index("by_country") > max(
            i for i, view in enumerate(started) if view == "lines"
        )
        failures = compare_views(spark, project.database, SPECS, f"round {number}")
        assert not failures, "\n\n".join(failures)
    # no worker's record leaked
    assert spark.conf.get("spark.databricks.delta.commitInfo.userMetadata", None) is None
    verified = project.verify()
    assert all(r.ok for r in verified), verified
