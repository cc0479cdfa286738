"""Refresh policies and the view table's clauses end to end, on real Spark and Delta."""

from __future__ import annotations

import pytest
from oracle import ViewSpec, views_file
from test_refresh import CUSTOMERS, ORDERS, SEED, MakeProject, actions, assert_correct, open_project

from ivm_sql.errors import RefreshError
from ivm_sql.physical.policy import FULL_REASON
from ivm_sql.project import Project

FILL = (
    "INSERT INTO orders SELECT CAST(id AS INT), CAST(id % 7 AS INT), CAST(id % 5 AS INT), "
    "element_at(array('new', 'shipped'), CAST(id % 2 + 1 AS INT)) FROM range({0}, {1}) AS r(id)"
)
PER_STATUS = "SELECT status, COUNT(*) AS n, SUM(qty) AS q FROM orders GROUP BY status"
COUNTRIES = ViewSpec(
    "countries",
    "SELECT country, COUNT(*) AS n FROM customers GROUP BY country",
    materialized=True,
    clauses="REFRESH POLICY INCREMENTAL STRICT",
)
STATUSES = ViewSpec("statuses", "SELECT DISTINCT status FROM orders")


def versions(project: Project, names: list[str]) -> dict[str, int]:
    """The latest Delta version of each view's stage tables."""
    tables = [stage.table for plan in project.plans(names) for stage in plan.stages]
    return {t: project.sql(f"DESCRIBE HISTORY {t} LIMIT 1").rows[0][0] for t in tables}


def test_a_large_change_is_recomputed_under_auto_and_applied_under_incremental(
    spark, tmp_project: MakeProject
) -> None:
    """The same view twice, over a change that is a third of its table: AUTO's cost model
    recomputes it, INCREMENTAL applies it, and both equal the SELECT."""
    specs = [
        ViewSpec("auto_counts", PER_STATUS),
        ViewSpec(
            "incremental_counts",
            PER_STATUS,
            materialized=True,
            clauses="REFRESH POLICY INCREMENTAL",
        ),
    ]
    project = open_project(
        spark, tmp_project, specs, setup=[ORDERS, FILL.format(0, 40_000)], config=""
    )
    project.refresh()
    project.sql(FILL.format(40_000, 60_000))
    done = actions(project.refresh())
    assert done["auto_counts"][0] == "recomputed" and done["auto_counts"][1].startswith(
        "cheaper than incremental"
    ), done
    assert done["incremental_counts"] == ("incremental", ""), done
    assert_correct(project, specs)


def test_strict_refuses_before_anything_is_written_and_full_rebuilds(
    spark, tmp_project: MakeProject
) -> None:
    """A RESTORE of customers leaves no change data feed to apply: the STRICT view's refresh
    fails with that reason, and neither it nor the other view (whose source changed too)
    gets a commit. ``--full`` rebuilds it; after that it is incremental again."""
    specs = [COUNTRIES, STATUSES]
    project = open_project(spark, tmp_project, specs)
    assert {s.view.split(".")[-1]: s.policy for s in project.status()} == {
        "countries": "INCREMENTAL STRICT",
        "statuses": "AUTO",
    }
    project.refresh()
    before = versions(project, ["countries", "statuses"])
    first = project.sql("DESCRIBE HISTORY customers LIMIT 1").rows[0][0]
    project.sql("INSERT INTO customers VALUES (9, 'PL')")
    project.sql(f"RESTORE TABLE customers TO VERSION AS OF {first}")
    project.sql("INSERT INTO orders VALUES (9, 1, 1, 'lost')")
    with pytest.raises(RefreshError) as caught:
        project.refresh()
    assert "INCREMENTAL STRICT" in caught.value.message and "RESTORE" in caught.value.message, (
        caught.value
    )
    assert caught.value.location == project.plans(["countries"])[0].view.location
    assert versions(project, ["countries", "statuses"]) == before
    assert actions(project.refresh(full=True))["countries"] == ("recomputed", "--full")
    project.sql("INSERT INTO customers VALUES (10, 'PL')")
    assert actions(project.refresh())["countries"] == ("incremental", "")
    assert_correct(project, specs)


def test_strict_applies_a_large_change(spark, tmp_project: MakeProject) -> None:
    specs = [ViewSpec("counts", PER_STATUS, clauses="REFRESH POLICY INCREMENTAL STRICT")]
    project = open_project(
        spark, tmp_project, specs, setup=[ORDERS, FILL.format(0, 30_000)], config=""
    )
    project.refresh()
    project.sql(FILL.format(30_000, 60_000))
    assert actions(project.refresh()) == {"counts": ("incremental", "")}
    assert_correct(project, specs)


def test_a_large_change_below_a_strict_view_is_applied_not_recomputed(
    spark, tmp_project: MakeProject
) -> None:
    """The cost model would recompute the AUTO view over a change of a third of its rows
    (as in the first test), and that would make the STRICT view over it recompute too,
    which it refuses: no rule recomputes a stage below a STRICT view, and compile says so."""
    specs = [
        ViewSpec("auto_counts", PER_STATUS),
        ViewSpec(
            "strict_busy",
            "SELECT status, n FROM auto_counts WHERE n > 1",
            reads=("auto_counts",),
            clauses="REFRESH POLICY INCREMENTAL STRICT",
        ),
    ]
    project = open_project(
        spark, tmp_project, specs, setup=[ORDERS, FILL.format(0, 40_000)], config=""
    )
    project.refresh()
    project.sql(FILL.format(40_000, 60_000))
    assert actions(project.refresh()) == {
        "auto_counts": ("incremental", ""),
        "strict_busy": ("incremental", ""),
    }
    assert_correct(project, specs)
    compiled = {view.view: view.sql for view in project.compile()}
    auto = compiled[f"{project.database}.auto_counts"]
    assert (
        f"never recomputed by choice: view {project.database}.strict_busy above it is "
        "INCREMENTAL STRICT" in auto
    ), auto


def test_full_recomputes_on_a_change_with_its_reason(spark, tmp_project: MakeProject) -> None:
    """REFRESH POLICY FULL in the view, or as the project's default: recomputed when a
    source changed, unchanged otherwise."""
    for spec, config in (
        (ViewSpec("full_counts", PER_STATUS, clauses="REFRESH POLICY FULL"), ""),
        (ViewSpec("full_counts", PER_STATUS), "refresh: {policy: full}\n"),
    ):
        project = open_project(spark, tmp_project, [spec], config=config)
        assert project.refresh()[0].action == "created"
        assert actions(project.refresh()) == {"full_counts": ("unchanged", "")}
        project.sql("UPDATE orders SET qty = 7 WHERE id = 1")
        (report,) = project.refresh()
        assert report.action == "recomputed" and report.reason.endswith(FULL_REASON), report
        assert project.compile()[0].policy == "FULL"
        assert_correct(project, [spec], config)


LAYOUT = """CREATE MATERIALIZED VIEW shipped (id, status, qty COMMENT 'units')
COMMENT 'orders by status'
PARTITIONED BY (status)
TBLPROPERTIES ('delta.logRetentionDuration' = 'interval 60 days', 'team' = 'sales')
AS SELECT id, status, qty FROM orders WHERE status IS NOT NULL;
"""
CLUSTERED = ViewSpec(
    "per_country",
    "SELECT c.country, COUNT(*) AS n FROM orders o JOIN customers c ON o.customer_id = c.id GROUP BY c.country",
    materialized=True,
    clauses="CLUSTER BY (country)",
)


def detail(project: Project, view: str) -> dict:
    table = project.plans([view])[0].table
    result = project.sql(f"DESCRIBE DETAIL {table}")
    return dict(zip(result.columns, result.rows[0]))


def test_clauses_lay_out_the_views_table_and_comment_its_view(
    spark, tmp_project: MakeProject
) -> None:
    project = Project.open(
        tmp_project({"views/views.sql": LAYOUT + views_file([CLUSTERED])}), spark=spark
    )
    for statement in (ORDERS, CUSTOMERS, *SEED):
        project.sql(statement)
    project.refresh()
    shipped = detail(project, "shipped")
    assert (
        shipped["partitionColumns"] == ["status"] and shipped["description"] == "orders by status"
    ), shipped
    assert (
        shipped["properties"]["team"] == "sales"
        and shipped["properties"]["delta.enableChangeDataFeed"] == "true"
    ), shipped
    assert shipped["properties"]["delta.logRetentionDuration"] == "interval 60 days", shipped
    assert detail(project, "per_country")["clusteringColumns"] == ["g0"]
    described = {row[0]: row[1:] for row in project.sql("DESCRIBE TABLE EXTENDED shipped").rows}
    assert described["Comment"][0] == "orders by status", described
    assert described["qty"][1] == "units", described
    project.sql("INSERT INTO orders VALUES (7, 2, 5, 'returned')")
    assert actions(project.refresh()) == {
        "shipped": ("incremental", ""),
        "per_country": ("incremental", ""),
    }
    assert all(r.ok for r in project.verify())
    # a changed comment redefines the view's table: rebuilt, the view over it created again
    (project.root / "views/views.sql").write_text(
        LAYOUT.replace("'orders by status'", "'orders, by status'") + views_file([CLUSTERED])
    )
    assert actions(project.refresh())["shipped"] == ("recomputed", "definition changed")
    assert detail(project, "shipped")["description"] == "orders, by status"
    assert {row[0]: row[1] for row in project.sql("DESCRIBE TABLE EXTENDED shipped").rows}[
        "Comment"
    ] == "orders, by status"
    assert all(r.ok for r in project.verify())


def test_status_and_compile_json_show_the_policy(spark, tmp_project: MakeProject) -> None:
    from ivm_sql import report_json

    project = open_project(spark, tmp_project, [COUNTRIES], setup=[CUSTOMERS, SEED[1]])
    assert (
        report_json.compile_document(project.compile())["views"][0]["policy"]
        == "INCREMENTAL STRICT"
    )
    assert (
        report_json.status_document(project.status(), [])["views"][0]["policy"]
        == "INCREMENTAL STRICT"
    )


def test_a_recompute_of_a_partitioned_view_drops_its_emptied_partitions_under_dynamic_overwrite(
    spark, tmp_project: MakeProject
) -> None:
    """A user who sets Spark's dynamic partition overwrite (a common session default) must
    not make a recompute's INSERT OVERWRITE keep the partitions its result has no rows for
    (Delta honours the setting in SQL): a recompute replaces the whole table."""
    spec = ViewSpec("per_status", PER_STATUS, materialized=True, clauses="PARTITIONED BY (status)")
    project = open_project(
        spark, tmp_project, [spec], setup=[ORDERS, FILL.format(0, 40_000)], config=""
    )
    spark.conf.set("spark.sql.sources.partitionOverwriteMode", "dynamic")
    try:
        project.refresh()
        # half the rows: the cost model recomputes
        project.sql("DELETE FROM orders WHERE status = 'new'")
        action, reason = actions(project.refresh())["per_status"]
        assert action == "recomputed" and reason.startswith("cheaper than incremental"), reason
        assert_correct(project, [spec])
    finally:
        spark.conf.unset("spark.sql.sources.partitionOverwriteMode")
