"""Small tables several stages read, kept in memory for the refresh (``physical.kept_tables``):
which are kept, that a kept read returns the version's rows without Delta listing its files
again, and a refresh whose views read a kept table is right over several rounds (the
differential oracles cover it too: most of their projects have several views over one small
table)."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path
from unittest import mock

import pytest
import sqlglot
from jobs import job_group
from oracle import INCREMENTAL_ONLY, ViewSpec, compare_views, views_file

from ivm_sql.physical.kept_tables import KEPT_BELOW_BYTES, KeptTables, worth_keeping
from ivm_sql.project import Project
from ivm_sql.sqlbuild import to_sql

_groups = itertools.count()
MakeProject = Callable[[dict[str, str]], Path]


def test_a_small_table_two_stages_read_is_kept_at_its_pinned_version() -> None:
    sizes = {"db.small": 1_000, "db.large": KEPT_BELOW_BYTES, "db.once": 10, "db.unknown": None}
    readers = [
        {"db.small", "db.large", "db.unknown", "db.__ivm_v_s1"},
        {"db.small", "db.large", "db.once", "db.unknown"},
        {"db.__ivm_v_s1"},  # a stage table: not pinned by the refresh, never kept
    ]
    pinned = {"db.small": 4, "db.large": 2, "db.once": 7, "db.unknown": 1}
    kept = worth_keeping(readers, pinned, lambda table, version: sizes[table])
    assert kept == {"db.small": 4}


@pytest.fixture
def small_table(spark):
    """db ``kept_test``: ``dim`` at version 1 holds keys 1-3, at version 2 also key 4."""
    spark.sql("CREATE DATABASE IF NOT EXISTS kept_test")
    spark.sql("CREATE OR REPLACE TABLE kept_test.dim (k INT, name STRING) USING DELTA")
    spark.sql("INSERT INTO kept_test.dim VALUES (1, 'a'), (2, 'b'), (3, 'c')")
    spark.sql("INSERT INTO kept_test.dim VALUES (4, 'd')")
    yield "kept_test.dim"
    spark.sql("DROP DATABASE kept_test CASCADE")


def _jobs(spark, sql: str) -> tuple[list, int]:
    group = f"kept-tables-probe-{next(_groups)}"
    with job_group(spark, group) as jobs:
        rows = spark.sql(sql).collect()
    return rows, len(jobs(group))


def test_a_kept_read_returns_its_versions_rows_and_lists_no_file_again(spark, small_table):
    """The rewritten query reads the kept version (2, not the latest) under the same alias.
    Its first run lists the table's files (Delta's job) and keeps the rows; a second run
    reads memory: one job, where the same query over Delta runs two every time. Once the
    refresh closes, nothing is kept."""
    spark.sql("INSERT INTO kept_test.dim VALUES (5, 'e')")  # version 3: not what is read
    query = sqlglot.parse_one(
        "SELECT d.k, d.name FROM kept_test.dim VERSION AS OF 2 AS d WHERE d.k > 1", dialect="spark"
    )
    direct = to_sql(query, pretty=False)
    _, direct_jobs = _jobs(spark, direct)
    expected, direct_jobs_again = _jobs(spark, direct)
    assert sorted(tuple(r) for r in expected) == [(2, "b"), (3, "c"), (4, "d")]
    assert direct_jobs == direct_jobs_again == 2  # Delta's listing of the files, then the query
    kept = KeptTables(spark, {small_table: 2})
    try:
        rewritten = to_sql(kept.rewrite(query), pretty=False)
        assert "kept_test" not in rewritten and "AS d" in rewritten
        first, _ = _jobs(spark, rewritten)
        again, jobs = _jobs(spark, rewritten)
        assert sorted(first) == sorted(again) == sorted(expected) and jobs == 1
        other_version = sqlglot.parse_one(
            "SELECT d.k FROM kept_test.dim VERSION AS OF 1 AS d", dialect="spark"
        )
        assert "kept_test.dim" in to_sql(kept.rewrite(other_version), pretty=False)
    finally:
        kept.close()
    _, released = _jobs(spark, direct)
    assert released == 2  # the rows are no longer kept
    assert not [
        t for t in spark.catalog.listTables("global_temp") if t.name.startswith("__ivm_kept")
    ]


SPECS = [
    ViewSpec(
        "by_name",
        "SELECT d.name, SUM(f.amount) AS amount, COUNT(*) AS n FROM facts f JOIN dim d ON f.k = d.k GROUP BY d.name",
    ),
    ViewSpec("named", "SELECT f.id, d.name, f.amount FROM facts f JOIN dim d ON f.k = d.k"),
    ViewSpec(
        "dim_count",
        "SELECT COUNT(*) AS n FROM facts f JOIN dim d ON f.k = d.k WHERE d.name <> 'b'",
    ),
]


@pytest.mark.parametrize("full", [False, True], ids=["changes", "recomputes"])
def test_views_over_a_kept_table_equal_their_selects_round_after_round(
    spark, tmp_project: MakeProject, full: bool
) -> None:
    """Three views read ``dim``; while only ``facts`` changes, each refresh keeps ``dim`` (read
    by three stages) and every change reads it from memory; then ``dim`` changes too, with a
    duplicate key and a NULL name. Recomputed (``refresh --full``), each view reads both
    tables from memory."""
    project = Project.open(
        tmp_project({"views/views.sql": views_file(SPECS), "ivm.yaml": INCREMENTAL_ONLY}),
        spark=spark,
    )
    for statement in (
        "CREATE TABLE dim (k INT, name STRING) USING DELTA",
        "CREATE TABLE facts (id INT, k INT, amount INT) USING DELTA",
        "INSERT INTO dim VALUES (1, 'a'), (2, 'b'), (3, NULL)",
        "INSERT INTO facts VALUES (1, 1, 10), (2, 2, 20), (3, 3, 30)",
    ):
        project.sql(statement)
    project.refresh()
    rounds = [
        ["INSERT INTO facts VALUES (4, 1, 5), (5, 1, 5), (6, NULL, 1)"],
        ["DELETE FROM facts WHERE id = 2", "UPDATE facts SET k = 2 WHERE id = 4"],
        ["INSERT INTO dim VALUES (2, 'b2')", "INSERT INTO facts VALUES (7, 2, 7), (8, 3, 8)"],
        ["DELETE FROM dim WHERE k = 1", "INSERT INTO facts VALUES (9, 1, 9)"],
    ]
    for number, statements in enumerate(rounds, 1):
        for statement in statements:
            project.sql(statement)
        with mock.patch.object(
            KeptTables, "_view", autospec=True, side_effect=KeptTables._view
        ) as kept:  # observed, not replaced
            reports = project.refresh(full=full)
        # the term of a change to dim reads facts at its pinned version: kept as well
        changed_dim = full or "dim" in " ".join(statements)
        read = {"dim", "facts"} if changed_dim else {"dim"}
        assert {call.args[1] for call in kept.call_args_list} == {
            f"{project.database}.{table}" for table in read
        }
        assert {r.action for r in reports} <= {"recomputed" if full else "incremental"}, [
            (r.action, r.reason) for r in reports
        ]
        failures = compare_views(spark, project.database, SPECS, f"round {number}")
        assert not failures, "\n\n".join(failures)
