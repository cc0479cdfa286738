"""ORDER BY ... LIMIT kept from a prefix of candidates (``incremental.top_k``), on real Spark
and Delta: the view equals its SELECT after each kind of change, the candidates stay a
bounded prefix whose weights with the count after them add up to the input, a change never
reads the input unless deletions use the candidates up, and a view over a top-k reads only
its first k rows."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from oracle import ViewSpec, compare_views
from test_build import CATALOG, views
from test_refresh import ORDERS, MakeProject, actions, assert_correct, open_project

from ivm_sql.algebra.windows import with_tiebreak
from ivm_sql.compiler.order import compile_views
from ivm_sql.compiler.plan import symbolic_pins
from ivm_sql.compiler.render import render
from ivm_sql.incremental import top_k
from ivm_sql.incremental.stages import TopKStage
from ivm_sql.incremental.versions import Versions
from ivm_sql.project import Project
from ivm_sql.sqlbuild import WEIGHT, parse_expression, to_sql

TOP = ViewSpec("top", "SELECT id, qty FROM orders ORDER BY qty DESC NULLS LAST, id LIMIT 3")
# a projection: equal quantities are one row of weight w, which the cut may split
QUANTITIES = ViewSpec("quantities", "SELECT qty FROM orders ORDER BY qty DESC LIMIT 4")
ABOVE = ViewSpec(
    "above",
    "SELECT COUNT(*) AS n, SUM(qty) AS total FROM quantities",
    reads=("quantities",),
)
SPECS = [TOP, QUANTITIES, ABOVE]
SEED = (
    "INSERT INTO orders VALUES (1, 1, 5, 'a'), (2, 1, 9, 'a'), (3, 2, NULL, 'b'), (4, 2, 7, 'b'), "
    "(5, 3, 7, 'c'), (6, 3, 2, 'c'), (7, 4, 9, 'd'), (8, 4, 1, 'd'), (9, 5, 7, 'e'), "
    "(10, 5, 3, 'e'), (11, 6, 4, 'f'), (12, 6, 6, 'f')"
)
# (what happens, statements, whether the candidates are read again from the input)
STEPS = [
    (
        "rows enter above the last candidate",
        ["INSERT INTO orders VALUES (13, 7, 8, 'g'), (14, 7, 20, 'g')"],
        False,
    ),
    (
        "rows enter after the candidates: only the count grows",
        ["INSERT INTO orders VALUES (15, 8, 0, 'h')"],
        False,
    ),
    (
        "a row waiting after the candidates moves to the top",
        ["UPDATE orders SET qty = 30 WHERE id = 8"],
        False,
    ),
    ("deletions leave at least k candidates", ["DELETE FROM orders WHERE id IN (8, 14)"], False),
    ("deletions use the candidates up", ["DELETE FROM orders WHERE qty >= 7"], True),
    (
        "a duplicate and a NULL quantity",
        ["INSERT INTO orders VALUES (10, 5, 3, 'e'), (16, 9, NULL, 'i')"],
        False,
    ),
    ("every row leaves", ["DELETE FROM orders"], False),
    (
        "two rows: the candidates are the whole input",
        ["INSERT INTO orders VALUES (1, 1, 5, 'a'), (2, 1, 9, 'a')"],
        False,
    ),
    (
        "a row after the last candidate joins them: none waits after it",
        ["INSERT INTO orders VALUES (6, 3, 2, 'c')"],
        False,
    ),
    ("fewer than k candidates left, and none waits", ["DELETE FROM orders WHERE id = 2"], False),
    ("rows come back, two of them again", [SEED], False),
    (
        "churn: a row in and out again, another out and back",
        [
            "INSERT INTO orders VALUES (17, 9, 50, 'j')",
            "DELETE FROM orders WHERE id = 17",
            "DELETE FROM orders WHERE id = 2",
            "INSERT INTO orders VALUES (2, 1, 9, 'a')",
        ],
        False,
    ),
]


@pytest.fixture
def small_margin() -> Iterator[None]:
    """One candidate beyond k, at least: the test's dozen rows overflow the candidates."""
    original, top_k.MARGIN = top_k.MARGIN, 1
    try:
        yield
    finally:
        top_k.MARGIN = original


def opened(spark, tmp_project: MakeProject) -> Project:
    return open_project(spark, tmp_project, SPECS, setup=[ORDERS, SEED])


def assert_prefix(project: Project) -> None:
    """Each top-k table holds at most K positioned rows, in a row of the order, and one
    marker at most; with the marker their weights add up to the input's rows."""
    orders = project.sql("SELECT COUNT(*) FROM orders").rows[0][0]
    for plan in project.plans(["top", "quantities"]):
        (stage,) = plan.stages
        positioned, markers, weight, last = project.sql(
            f"SELECT count_if({top_k.BEFORE} IS NOT NULL), count_if({top_k.BEFORE} IS NULL), "
            f"coalesce(SUM({WEIGHT}), 0), MAX({top_k.BEFORE} + {WEIGHT}) FROM {stage.table}"
        ).rows[0]
        assert positioned <= top_k.capacity(stage.node) and markers <= 1, (plan.name, positioned)
        assert weight == orders, (
            f"{plan.name}: the candidates and the count hold {weight} of {orders}"
        )
        if positioned:  # the positions run from 0 without a gap
            assert (
                last
                == project.sql(
                    f"SELECT SUM({WEIGHT}) FROM {stage.table} WHERE {top_k.BEFORE} IS NOT NULL"
                ).rows[0][0]
            )


def test_a_top_k_follows_every_kind_of_change_from_its_candidates(
    spark, tmp_project: MakeProject, small_margin
) -> None:
    project = opened(spark, tmp_project)
    assert [r.action for r in project.refresh()] == ["created"] * 3
    assert_correct(project, SPECS, "first refresh")
    assert_prefix(project)
    for what, statements, refills in STEPS:
        for statement in statements:
            project.sql(statement)
        done = actions(project.refresh())
        assert done["top"][0] == "incremental", (what, done)
        assert (done["top"][1] == top_k.REFILLED) == refills, (what, done)
        failures = compare_views(project.spark, project.database, SPECS, what)
        assert not failures, "\n\n".join(failures)
        assert_prefix(project)
    assert_correct(project, SPECS, "last step, verified")  # and `ivm verify` agrees


def test_a_change_reads_the_candidates_and_only_a_refill_reads_the_input() -> None:
    """The change's SQL reads the input's change data feed and the stage's own table; the
    input itself (a version of orders) only in the refill."""
    (plan,) = compile_views(
        views("CREATE VIEW v AS SELECT a, b FROM t ORDER BY b DESC LIMIT 5"), CATALOG, "db"
    )
    (stage,) = plan.stages
    assert isinstance(stage, TopKStage)
    pins = symbolic_pins(plan.stages)
    change = to_sql(stage.change_query(pins), pretty=False)
    refill = to_sql(stage.refill_query(pins), pretty=False)
    assert "TABLE_CHANGES('db.t'" in change and "VERSION AS OF" not in change, change
    assert "VERSION AS OF :db_t_new" in refill and "TABLE_CHANGES" not in refill, refill
    shown = render(plan)
    assert "the first 105 rows in order kept as candidates, the view the first 5" in shown
    assert f"only when the change flags the candidates short ({top_k.SHORT}" in shown


def test_rows_that_tie_at_the_limit_are_chosen_by_every_column(
    spark, tmp_project: MakeProject, small_margin
) -> None:
    """SQL lets LIMIT pick any of the rows that tie; a refresh picks them by every column in
    turn, and `ivm verify` compares with the SELECT ordered so too (``with_tiebreak``)."""
    ties = ViewSpec("ties", "SELECT status, qty FROM orders ORDER BY qty LIMIT 2")
    project = open_project(
        spark,
        tmp_project,
        [ties],
        setup=[
            ORDERS,
            "INSERT INTO orders VALUES (1, 1, 1, 'z'), (2, 1, 1, 'b'), (3, 1, 1, 'y'), (4, 1, 2, 'a')",
        ],
    )
    project.refresh()
    assert sorted(project.sql("SELECT * FROM ties").rows) == [("b", 1), ("y", 1)]
    project.sql("DELETE FROM orders WHERE status = 'b'")
    project.refresh()
    assert sorted(project.sql("SELECT * FROM ties").rows) == [("y", 1), ("z", 1)]
    assert all(r.ok for r in project.verify())
    tiebroken = with_tiebreak(
        parse_expression("SELECT status, qty FROM orders ORDER BY qty LIMIT 2")
    )
    assert to_sql(tiebroken, pretty=False).endswith("ORDER BY qty, 1, 2 LIMIT 2")


def _executed(project: Project, query) -> tuple[str, list]:
    """Spark's executed plan of ``query``, and its rows."""
    frame = project.spark.sql(to_sql(query))
    rows = frame.collect()
    return frame._jdf.queryExecution().executedPlan().toString(), rows


def test_a_top_k_over_a_stage_reads_what_lies_below_once_in_one_statement(
    spark, tmp_project: MakeProject
) -> None:
    """In the view's one statement (``physical.one_statement``), B and the classified rows
    read the aggregate below through one shuffle of its rows, which Spark reuses: the
    aggregate's final step (its groups' sums, ``g0`` its key) runs once, where without the
    shuffle Spark reuses only the exchange below it and runs it twice. A top-k straight
    over a base table reads the table twice instead of shuffling it."""
    best = ViewSpec(
        "best",
        "SELECT customer_id, SUM(qty) AS total FROM orders GROUP BY customer_id "
        "ORDER BY total DESC NULLS LAST, customer_id LIMIT 2",
    )
    project = open_project(spark, tmp_project, [best, TOP], setup=[ORDERS, SEED])
    project.refresh()
    (version,) = project.sql("DESCRIBE HISTORY orders LIMIT 1").rows[0][:1]
    pins = {f"{project.database}.orders": Versions.at(None, version)}
    grouped, listed = project.plans(["best", "top"])
    assert [s.kind for s in grouped.stages] == ["aggregate", "top_k"]
    executed, rows = _executed(project, grouped.inlined_query(grouped.stages[0], pins))
    final_sums = re.findall(r"HashAggregate\(keys=\[g0#\d+\], functions=\[sum\(", executed)
    assert len(final_sums) == 1, f"the aggregate below the top-k ran {len(final_sums)} times"
    stored = project.sql(f"SELECT * FROM {grouped.stages[-1].table}").rows
    assert sorted(map(tuple, rows), key=repr) == sorted(map(tuple, stored), key=repr)
    (stage,) = listed.stages
    executed, _ = _executed(project, stage.initial_query(pins))
    scans = re.findall(r"FileScan \w+ [\w.]*orders\b", executed)
    assert len(scans) == 2, "a top-k over a base table shuffled its rows to read them once"
