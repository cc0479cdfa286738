"""A chosen recompute below a view's table writes that table in one statement and leaves the
stages between behind (``physical.one_statement``), on real Spark and Delta: the view equals
its SELECT, a refresh with no change runs nothing, and the stages left behind catch up from
their change data feeds when the view next changes."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from unittest import mock

import pytest
from jobs import job_group
from oracle import ViewSpec
from sqlglot import exp, parse_one
from test_refresh import ORDERS, SEED, MakeProject, actions, assert_correct, open_project

from ivm_sql.catalog import StaticCatalog
from ivm_sql.compiler.order import compile_views
from ivm_sql.compiler.render import render
from ivm_sql.incremental.versions import Versions
from ivm_sql.locate import Location
from ivm_sql.physical import bounds, foresight, one_statement
from ivm_sql.physical.changes import KEPT_PREFIX
from ivm_sql.physical.cost import ANALYTIC, COST_REASON, FORCED, HISTORY, Choice, CostModel
from ivm_sql.project import Project
from ivm_sql.runtime import log_events
from ivm_sql.sqlbuild import to_sql
from ivm_sql.storage import refresh_log
from ivm_sql.viewdefs import parse_view

# three stages: the total per customer, the total per country over it, the top two countries
TOP_COUNTRIES = ViewSpec(
    "top_countries",
    """
SELECT c.country, SUM(t.total_qty) AS q, COUNT(*) AS n
FROM customers c
JOIN (SELECT customer_id, SUM(qty) AS total_qty FROM orders GROUP BY customer_id) t ON t.customer_id = c.id
GROUP BY c.country
ORDER BY q DESC NULLS LAST, country
LIMIT 2""",
)
# a view over it: recomputed whenever its table is
ABOVE = ViewSpec(
    "above",
    "SELECT COUNT(*) AS countries, SUM(q) AS q FROM top_countries",
    reads=("top_countries",),
)
SPECS = [TOP_COUNTRIES, ABOVE]
# customers are set apart from ``test_refresh.CUSTOMERS`` by a country per id, so the top moves
CUSTOMERS = "CREATE TABLE customers (id INT, country STRING) USING DELTA"
COUNTRIES = "INSERT INTO customers VALUES (1, 'DE'), (2, 'FR'), (3, 'IT'), (4, NULL), (5, 'FR')"
CHANGES = [
    [
        "INSERT INTO orders VALUES (6, 2, 9, 'new'), (7, 5, 4, 'new'), (8, NULL, 3, 'new')",
        "UPDATE orders SET qty = qty + 10 WHERE id = 1",
    ],
    ["DELETE FROM orders WHERE customer_id = 2", "INSERT INTO orders VALUES (9, 3, 1, NULL)"],
    ["UPDATE orders SET customer_id = 4 WHERE id = 5", "INSERT INTO orders VALUES (10, 1, 2, 'x')"],
]


@contextlib.contextmanager
def recomputed_by_choice(*tables: str, decided_by: str = HISTORY) -> Iterator[None]:
    """Inside, the cost model chooses a recompute for the stages ``tables`` and applies every
    other stage's change (none given: every stage's); ``decided_by``: which of its rules chose.
    The analytic rules choose so only at the stage's turn, once a stage below it has
    changed: a loss they do not foresee before the stages (``_foreseen_loss``)."""

    def choose(_model, stage: str, changed, _count_rows) -> Choice:
        below_changed = any(rows for t, rows in changed.items() if "__ivm_" in t)
        if stage in tables and (decided_by != ANALYTIC or below_changed):
            return Choice(f"{COST_REASON}: the test's choice", decided_by)
        return Choice(None, FORCED)

    with mock.patch.object(CostModel, "choose", choose):
        yield


def opened(spark, tmp_project: MakeProject, config: str = "") -> Project:
    """The project of ``SPECS``, the cost model on (its choices made by ``recomputed_by_choice``)."""
    return open_project(
        spark, tmp_project, SPECS, setup=[ORDERS, CUSTOMERS, SEED[0], COUNTRIES], config=config
    )


def changed_and_refreshed(
    project: Project, changes: list[str], chosen: str | None, decided_by: str = HISTORY
) -> tuple[dict[str, tuple[str, str]], dict[str, int], dict[str, int]]:
    """Apply ``changes`` and refresh, a recompute chosen for the stage ``chosen`` (by the
    rules ``decided_by`` names): what each view did, and the stage tables' versions before
    and after."""
    before = latest_versions(project)
    for statement in changes:
        project.sql(statement)
    with recomputed_by_choice(*([chosen] if chosen else []), decided_by=decided_by):
        done = actions(project.refresh())
    return done, before, latest_versions(project)


def latest_versions(project: Project) -> dict[str, int]:
    """The latest Delta version of each stage table of ``top_countries``."""
    (plan,) = project.plans(["top_countries"])
    return {
        stage.table.split(".")[-1]: project.sql(f"DESCRIBE HISTORY {stage.table} LIMIT 1").rows[0][
            0
        ]
        for stage in plan.stages
    }


def test_a_chosen_recompute_writes_the_views_table_at_once_and_the_stages_between_catch_up(
    spark, tmp_project: MakeProject
) -> None:
    project = opened(spark, tmp_project)
    (plan,) = project.plans(["top_countries"])
    assert [s.kind for s in plan.stages] == ["aggregate", "aggregate", "top_k"]
    lowest, between, top = (stage.table.split(".")[-1] for stage in plan.stages)
    project.refresh()
    assert_correct(project, SPECS, "first refresh")

    # round 1: the lowest stage's recompute is chosen; only the view's table is written
    done, before, after = changed_and_refreshed(project, CHANGES[0], plan.stages[0].table)
    assert done["top_countries"][0] == "recomputed", done
    assert done["top_countries"][1] == (
        f"{COST_REASON}: the test's choice; {one_statement.describe(2)}"
    ), done
    assert done["above"][0] == "recomputed", done
    assert (after[lowest], after[between]) == (before[lowest], before[between]), (before, after)
    assert after[top] == before[top] + 1, (before, after)
    assert_correct(project, SPECS, "round 1: written at once")

    # nothing changed: the stages left behind wait, and nothing runs
    with job_group(spark, "probe") as jobs_of:
        reports = project.refresh()
    assert {r.action for r in reports} == {"unchanged"}, actions(reports)
    assert list(jobs_of("probe")) == [], "a refresh with nothing to do ran Spark jobs"
    assert latest_versions(project) == after

    # round 2: every change applied; the stages behind catch up over both rounds' changes,
    # and the view's table is recomputed from the stage below it
    done, _, caught_up = changed_and_refreshed(project, CHANGES[1], None)
    assert done["top_countries"] == ("recomputed", one_statement.CAUGHT_UP), done
    assert caught_up[lowest] > after[lowest] and caught_up[between] > after[between], caught_up
    assert_correct(project, SPECS, "round 2: caught up")

    # round 3: incremental again, the view's table too
    done, _, _ = changed_and_refreshed(project, CHANGES[2], None)
    assert done["top_countries"] == ("incremental", ""), done  # its top-k from the change too
    assert_correct(project, SPECS, "round 3: incremental")


def test_a_recompute_chosen_for_the_stage_between_reads_the_lowest_from_its_table(
    spark, tmp_project: MakeProject
) -> None:
    """A recompute chosen for the middle stage inlines it alone: the lowest stage is applied
    as usual and read as a table, and the middle one waits."""
    project = opened(spark, tmp_project)
    (plan,) = project.plans(["top_countries"])
    lowest, between, _ = (stage.table.split(".")[-1] for stage in plan.stages)
    project.refresh()
    done, before, after = changed_and_refreshed(project, CHANGES[0], plan.stages[1].table)
    assert done["top_countries"][1].endswith(one_statement.describe(1)), done
    assert after[lowest] == before[lowest] + 1 and after[between] == before[between], after
    assert_correct(project, SPECS, "the middle stage inlined")
    done, _, _ = changed_and_refreshed(project, CHANGES[1], None)
    assert done["top_countries"] == ("recomputed", one_statement.CAUGHT_UP), done
    assert_correct(project, SPECS, "caught up")


def test_a_change_as_large_as_one_that_lost_is_recomputed_before_any_stage(
    spark, tmp_project: MakeProject
) -> None:
    """The analytic rules find the middle stage's change dearer than a recompute: the lowest
    stage was applied for nothing, and the view's table written in one statement, its record
    keeping the rows changed. The next change at least half as large is decided before any
    stage: the view's table is written from its whole SELECT and neither stage below is
    written, whatever the rules would say of it (they are not asked). A change smaller than
    half goes stage by stage again: the stages behind catch up over all three rounds."""
    project = opened(spark, tmp_project)
    (plan,) = project.plans(["top_countries"])
    lowest, between, top = (stage.table.split(".")[-1] for stage in plan.stages)
    project.refresh()

    # round 1: 3 inserts and 1 update, the middle stage's recompute chosen by the rules
    done, before, after = changed_and_refreshed(project, CHANGES[0], plan.stages[1].table, ANALYTIC)
    assert done["top_countries"][1].endswith(one_statement.describe(1)), done
    assert after[lowest] == before[lowest] + 1 and after[between] == before[between], after
    record = project.delta_log().last_record(plan.table)[1]
    assert record[one_statement.DECIDED_ON] == 4, record
    assert_correct(project, SPECS, "round 1: the middle stage inlined")

    # round 2: 2 deleted and 1 inserted, at least half of 4: decided before any stage
    done, before, after = changed_and_refreshed(project, CHANGES[1], None)
    action, reason = done["top_countries"]
    assert action == "recomputed", done
    assert reason.startswith(COST_REASON) and one_statement.EARLY in reason, done
    assert reason.endswith(one_statement.describe(2)), done
    assert (after[lowest], after[between]) == (before[lowest], before[between]), (before, after)
    assert after[top] == before[top] + 1, (before, after)
    record = project.delta_log().last_record(plan.table)[1]
    assert record[one_statement.DECIDED_ON] == 4, "the rows it was first chosen for are kept"
    assert_correct(project, SPECS, "round 2: decided before its stages")

    # round 3: one row, under half of 4: stage by stage, every change applied
    done, _, caught_up = changed_and_refreshed(
        project, ["UPDATE orders SET qty = qty + 1 WHERE id = 1"], None
    )
    assert done["top_countries"] == ("recomputed", one_statement.CAUGHT_UP), done
    assert caught_up[lowest] > after[lowest] and caught_up[between] > after[between], caught_up
    assert_correct(project, SPECS, "round 3: caught up over three rounds")


def test_a_change_as_large_as_one_that_lost_at_the_views_last_stage_is_recomputed_first(
    spark, tmp_project: MakeProject
) -> None:
    """The rules find the change of the view's last stage dearer than its recompute, after
    both stages below were applied: its record keeps the rows changed, and the next change
    as large writes the view's table from its whole SELECT before any stage."""
    project = opened(spark, tmp_project)
    (plan,) = project.plans(["top_countries"])
    lowest, between, _ = (stage.table.split(".")[-1] for stage in plan.stages)
    project.refresh()
    done, before, after = changed_and_refreshed(project, CHANGES[0], plan.table, ANALYTIC)
    assert done["top_countries"] == ("recomputed", f"{COST_REASON}: the test's choice"), done
    assert (after[lowest], after[between]) == (before[lowest] + 1, before[between] + 1), after
    record = project.delta_log().last_record(plan.table)[1]
    assert record[one_statement.DECIDED_ON] == 4, record
    done, before, after = changed_and_refreshed(project, CHANGES[1], None)
    assert done["top_countries"][1].endswith(one_statement.describe(2)), done
    assert (after[lowest], after[between]) == (before[lowest], before[between]), (before, after)
    assert_correct(project, SPECS, "decided before its stages")


# the countries' totals over the orders under twice their customer's average, as TPC-H's
# Q17: an aggregate stage per customer, below a stage that joins it with ``orders``
UNDER_TWICE_AVERAGE = ViewSpec(
    "under_twice_average",
    """
SELECT c.country, SUM(o.qty) AS q, COUNT(*) AS n
FROM orders o JOIN customers c ON c.id = o.customer_id
WHERE o.qty < (SELECT 2 * AVG(o2.qty) FROM orders o2 WHERE o2.customer_id = o.customer_id)
GROUP BY c.country""",
)


def test_a_stage_foreseen_to_lose_writes_the_view_at_once_before_any_stage(
    spark, tmp_project: MakeProject
) -> None:
    """No history, the analytic rules as they are (tables this small are never bounded by
    keys, so a term reads its other inputs whole). A change to ``orders`` gives the join
    stage a term of its own, which reads less than its recompute, and one that the change of
    the stage below (the averages) drives, which reads ``orders`` again: together more than
    its recompute. Foreseen with that stage's change query standing in for its change data
    feed, the loss writes the view's table from its whole SELECT before any stage, and no
    stage below is written. The next, smaller change goes stage by stage again, and the
    stages behind catch up; at every round the view equals its SELECT."""
    project = open_project(
        spark, tmp_project, [UNDER_TWICE_AVERAGE], setup=[ORDERS, CUSTOMERS, *SEED], config=""
    )
    (plan,) = project.plans(["under_twice_average"])
    assert len(plan.stages) > 1 and one_statement.inlinable(plan.stages, plan.stages[0])
    project.refresh()

    def versions() -> list[int]:
        return [project.delta_log().latest_version(stage.table) for stage in plan.stages]

    before = versions()
    project.sql("INSERT INTO orders VALUES (6, 2, 9, 'new'), (7, 4, 1, NULL)")
    project.sql("UPDATE orders SET qty = 7 WHERE id = 1")
    action, reason = actions(project.refresh())["under_twice_average"]
    assert action == "recomputed", reason
    assert "foreseen" in reason and one_statement.EARLY in reason, reason
    assert reason.endswith(one_statement.describe(len(plan.stages) - 1)), reason
    after = versions()
    assert after[:-1] == before[:-1] and after[-1] == before[-1] + 1, (before, after)
    record = project.delta_log().last_record(plan.table)[1]
    assert record[one_statement.DECIDED_ON] == 3, record  # 2 inserted, 1 updated
    assert_correct(project, [UNDER_TWICE_AVERAGE], "foreseen, written at once")

    project.sql("UPDATE orders SET qty = qty + 5 WHERE id = 3")
    action, reason = actions(project.refresh())["under_twice_average"]
    assert "foreseen" not in reason, reason
    assert versions()[0] > after[0], "the stage of averages caught up"
    assert_correct(project, [UNDER_TWICE_AVERAGE], "caught up")


# orders of 500 customers, some without one, quantities with NULLs, some rows twice
MANY_ORDERS = (
    "INSERT INTO orders SELECT CAST(id AS INT), "
    "CASE WHEN id % 97 = 0 THEN NULL ELSE CAST(id % 500 AS INT) END, "
    "CASE WHEN id % 89 = 0 THEN NULL ELSE CAST(id % 7 AS INT) END, 'new' "
    "FROM range({start}, {end}) UNION ALL "
    "SELECT CAST(id AS INT), CAST(id % 500 AS INT), 3, 'twice' FROM range({start}, {end}) "
    "WHERE id % 1000 = 0"
)
# three stages, the lowest over ``customers`` alone: a change to ``orders`` leaves it as it is,
# and the stage above it is the lowest that changes (as TPC-H Q20's ``lineitem`` sums are)
TOP_KNOWN_COUNTRIES = ViewSpec(
    "top_known_countries",
    """
SELECT c.country, SUM(o.qty) AS q, COUNT(*) AS n
FROM orders o JOIN (SELECT DISTINCT id, country FROM customers WHERE country IS NOT NULL) c
  ON c.id = o.customer_id
GROUP BY c.country
ORDER BY q DESC NULLS LAST, country
LIMIT 2""",
)
MANY_CUSTOMERS = (
    "INSERT INTO customers SELECT CAST(id AS INT), "
    "element_at(array('DE', 'FR', 'IT', 'ES', 'PL', NULL), CAST(id % 6 AS INT) + 1) "
    "FROM range(500)"
)


def test_a_change_whose_stages_cost_more_than_one_statement_writes_the_view_at_once(
    spark, tmp_project: MakeProject
) -> None:
    """The statements rule (``physical.cost``), no history, no rule mocked: a change to
    ``orders`` of more than ``SMALL_CHANGE`` rows, weighed at the lowest stage it changes (the
    one above the DISTINCT over ``customers``), under half of what that stage reads (the rows
    rule at ``recompute_above: 0.5`` quiet) and with no stage above reading what its
    recompute reads (the scans rule quiet), still costs three stages' statements and MERGEs
    over tables of a few MB, more than the view's SELECT in one: the view's table is written
    at once before any stage. Small changes then go stage by stage and catch up; a large one
    again at once; churn (rows inserted, updated and deleted, customers that leave and come
    back) and NULLs throughout; the view equals its SELECT every round."""
    project = open_project(
        spark,
        tmp_project,
        [TOP_KNOWN_COUNTRIES],
        setup=[ORDERS, CUSTOMERS, MANY_ORDERS.format(start=0, end=30_000), MANY_CUSTOMERS],
        config="refresh: {recompute_above: 0.5}\n",
    )
    (plan,) = project.plans(["top_known_countries"])
    assert [t.split(".")[-1] for t in plan.stages[0].sources] == ["customers"], plan.stages
    project.refresh()

    def versions() -> list[int]:
        return [project.delta_log().latest_version(stage.table) for stage in plan.stages]

    def refreshed(*changes: str) -> str:
        for change in changes:
            project.sql(change)
        action, reason = actions(project.refresh())["top_known_countries"]
        assert_correct(project, [TOP_KNOWN_COUNTRIES], reason)
        return reason if action == "recomputed" else action

    before = versions()
    reason = refreshed(MANY_ORDERS.format(start=30_000, end=41_000))
    assert "statements" in reason and one_statement.EARLY in reason, reason
    assert versions()[:-1] == before[:-1], "no stage below was written"
    assert versions()[-1] == before[-1] + 1

    reason = refreshed(
        "UPDATE orders SET qty = NULL WHERE id IN (3, 30003)",
        "DELETE FROM orders WHERE id IN (5, 30005, 40000)",
        "DELETE FROM customers WHERE id = 7",
    )
    # stage by stage: the DISTINCT takes the change to ``customers``; the stage of sums,
    # behind, catches up or chooses its own recompute at its turn (read through, again)
    assert "statements" not in reason, reason
    assert versions()[0] > before[0], reason
    assert versions()[1] > before[1] or one_statement.describe(1) in reason, reason

    caught_up = versions()
    reason = refreshed(
        "INSERT INTO customers VALUES (7, 'FR'), (501, NULL)",
        "UPDATE orders SET customer_id = 501 WHERE id % 20 = 1",  # about 2,000 rows
        "DELETE FROM orders WHERE id >= 31000 AND id < 40000",
    )
    # at once again, from the lowest stage (``customers`` changed too), before any stage:
    # by the statements rule, or by the rows the last one-statement write was chosen for
    # (``early_reason``) when the stage between chose one
    assert one_statement.EARLY in reason, reason
    assert versions()[:-1] == caught_up[:-1], "no stage below was written"
    caught_up = versions()
    reason = refreshed(
        "INSERT INTO orders VALUES (5, 7, 2, 'back'), (40000, NULL, NULL, NULL)",
        "DELETE FROM customers WHERE id = 501",
    )
    assert "statements" not in reason and versions()[0] > caught_up[0], reason
    assert versions()[1] > caught_up[1] or one_statement.describe(1) in reason, reason


def test_a_feed_stood_in_for_is_bounded_by_the_base_feeds_and_its_reads_are_not_counted(
    spark,
) -> None:
    """``foresight.stand_in`` replaces a stage's change data feed read by that stage's
    change query; the bounds trace its key to the base feed it comes from and take that
    feed's values, without running the change; ``outside`` counts the query's reads without
    the stand-in's own."""
    feed = f"{KEPT_PREFIX}_foreseen_test"  # a kept base feed (``physical.changes``)
    spark.createDataFrame([(3, 1), (5, 2), (5, 4)], "k INT, q INT").createOrReplaceGlobalTempView(
        feed
    )
    below = parse_one(
        f"SELECT k, SUM(q) AS s FROM (SELECT f.k, f.q FROM global_temp.{feed} AS f "
        "JOIN db.dim VERSION AS OF 3 AS d ON d.id = f.k) AS c GROUP BY k"
    )
    change = parse_one(
        "SELECT t.k, t.s, b.x FROM (SELECT k, s FROM table_changes('db.stage', 5, 5)) AS t "
        "JOIN db.big VERSION AS OF 9 AS b ON b.k = t.k"
    )
    stood = foresight.stand_in(change, {"db.stage": below})
    assert "table_changes" not in stood.sql() and foresight.STAND_IN in stood.sql()
    assert foresight.stand_in(change, {}).sql() == change.sql(), "only the stages named"
    sizes = {("db.big", 9): 10 * 2**20, ("db.dim", 3): 7}
    with job_group(spark, "keys") as jobs_of:
        query, reads = bounds.bounded(
            bounds.KeyValues(spark), stood, lambda t, v: sizes[(t, v)], feeds_only=True
        )
    assert len(list(jobs_of("keys"))) == 1, "one job, over the feed: no change is run"
    assert [(r.table.name, r.column, r.ranges) for r in reads] == [("big", "k", ((3, 3), (5, 5)))]
    assert '"b"."k" IN (3, 5)' in query.sql(), query.sql()
    counted = foresight.outside(query, reads, lambda t, v: sizes[(t, v)], lambda t, v: None)
    assert counted == 10 * 2**20, "the stand-in's read of db.dim is the stage below's"
    # a key computed from the feed's: no feed holds its values, and the change is not run
    computed = parse_one(
        f"SELECT t.k, b.x FROM (SELECT f.k + 1 AS k FROM global_temp.{feed} AS f) AS t "
        "JOIN db.big VERSION AS OF 9 AS b ON b.k = t.k"
    )
    with job_group(spark, "computed") as jobs_of:
        query, reads = bounds.bounded(
            bounds.KeyValues(spark), computed, lambda t, v: sizes[(t, v)], feeds_only=True
        )
    assert list(jobs_of("computed")) == [] and "WHERE" not in query.sql(), query.sql()
    assert [(r.table.name, r.ranges) for r in reads] == [("big", ())], "the least it can read"
    written = foresight.as_written(lambda t, v: (t, v), {"db.stage": 4})
    assert written("db.stage", 5) == ("db.stage", 4) and written("db.stage", None)[1] == 4
    assert written("db.big", 9) == ("db.big", 9)
    spark.catalog.dropGlobalTempView(feed)


def test_a_way_a_stages_history_chose_is_not_taken_before_the_stages() -> None:
    """``one_statement.early_reason``: only a record that keeps the rows a recompute in one
    statement was chosen for, under the same definitions, with a change at least half as
    large, and a view whose lowest stage can be read through its query."""
    catalog = StaticCatalog(
        {
            "db.orders": [("id", "int"), ("customer_id", "int"), ("qty", "int")],
            "db.customers": [("id", "int"), ("country", "string")],
        }
    )
    (plan,) = compile_views(
        [parse_view(TOP_COUNTRIES.create_statement(), Location("v.sql", 1))], catalog, "db"
    )
    defined = {stage.table: plan.fingerprint(stage) for stage in plan.stages}
    lowest, between = plan.stages[0].table, plan.stages[1].table
    record = {
        one_statement.INLINED: {between: defined[between]},
        one_statement.DECIDED_ON: 10,
        "plan": defined[plan.table],
    }

    def reason(record=record, defined=defined, rows=5):
        return one_statement.early_reason(record, defined, rows, plan.stages, plan.stages[0])

    assert reason() is not None and reason(rows=50) is not None
    assert reason(rows=4) is None, "under half of the rows it was chosen for"
    assert reason(record={**record, one_statement.DECIDED_ON: None}) is None
    assert reason(record={k: v for k, v in record.items() if k != one_statement.DECIDED_ON}) is None
    assert reason(defined={**defined, between: "changed"}) is None
    assert reason(defined={**defined, plan.table: "changed"}) is None
    assert reason(record={**record, one_statement.INLINED: {}}) is not None, (
        "the view's last stage recomputed by the rules, written through no stage"
    )
    assert reason(defined={**defined, lowest: "changed"}) is not None, (
        "the lowest stage was not read through: its own record says what it is"
    )


def test_a_refresh_killed_after_writing_the_view_at_once_loses_and_doubles_nothing(
    spark, tmp_project: MakeProject
) -> None:
    """The process dies right after the view's table was written in one statement, before
    anything else: the next refresh finds the view written (and logs that commit as one the
    killed refresh never logged), brings the view above it up to date, and a refresh after
    that runs nothing and logs nothing."""
    project = opened(spark, tmp_project, "refresh: {workers: 1}\n")  # dies in this thread
    (plan,) = project.plans(["top_countries"])
    project.refresh()
    for statement in CHANGES[0]:
        project.sql(statement)

    def killed(_recorder, view, _stage, _outcome, _cost):
        if view.endswith("top_countries"):
            raise KeyboardInterrupt

    with (
        recomputed_by_choice(plan.stages[0].table),
        mock.patch.object(log_events.Recorder, "ran", killed),
        pytest.raises(KeyboardInterrupt),
    ):
        project.refresh()
    written = latest_versions(project)
    with recomputed_by_choice():
        done = actions(project.refresh())
    # the view above reads the view's table's change data feed since the version it recorded
    assert done["top_countries"] == ("unchanged", "") and done["above"][0] != "unchanged", done
    assert latest_versions(project) == written
    assert_correct(project, SPECS, "after the killed refresh")
    log = refresh_log.table_in(project.database)
    unlogged = project.sql(
        f"SELECT stage_table, action FROM {log} WHERE outcome = '{refresh_log.OUTCOME_UNLOGGED}'"
    ).rows
    assert [tuple(row) for row in unlogged] == [(plan.table, "recomputed")], unlogged
    version = project.delta_log().latest_version(log)
    with job_group(spark, "probe") as jobs_of:
        assert {r.action for r in project.refresh()} == {"unchanged"}
    assert list(jobs_of("probe")) == [], "a refresh with nothing to do ran Spark jobs"
    assert project.delta_log().latest_version(log) == version


def test_compile_shows_the_statement_a_chosen_recompute_runs() -> None:
    """Under each stage below the view's table, `ivm compile` prints the one statement a
    recompute chosen there runs; with the cost model off (INCREMENTAL) there is none."""
    catalog = StaticCatalog(
        {
            "db.orders": [("id", "int"), ("customer_id", "int"), ("qty", "int")],
            "db.customers": [("id", "int"), ("country", "string")],
        }
    )
    (plan,) = compile_views(
        [parse_view(TOP_COUNTRIES.create_statement(), Location("v.sql", 1))], catalog, "db"
    )
    text = render(plan)
    headers = text.count("-- a recompute the cost model chooses here writes only the view's table")
    assert headers == 2, text
    assert "stages 1-2 are read through their queries" in text
    assert "this stage is read through its query" in text  # the stage just below the view's
    assert f"INSERT OVERWRITE TABLE `db`.`{plan.table.split('.')[-1]}`" in text
    assert "WITH `__ivm_inlined_1` AS" in text and "`__ivm_inlined_2`" in text
    assert "chooses here" not in render(plan, CostModel(None))


def test_a_view_written_at_once_waits_only_while_nothing_it_read_moved() -> None:
    """``one_statement.view_up_to_date``, each condition broken once from a record that is
    up to date: a stage redefined (the view's table or one read through), a table it read at
    another version or replaced (another id), the clock moved under a stage that reads it,
    and a record that is not a one-statement write."""
    record = {
        one_statement.INLINED: {"db.s1": "f1"},
        "plan": "f2",
        "sources": {"db.orders": 4},
        "ids": {"db.orders": "id-a"},
        "now": "t1",
    }
    defined = {"db.s1": "f1", "db.top": "f2"}

    def up_to_date(
        record=record, defined=defined, read_clock=(), now="t1", version=4, table_id="id-a"
    ) -> bool:
        return one_statement.view_up_to_date(
            record, defined, read_clock, now, {"db.orders": version}, lambda _: table_id
        )

    assert up_to_date()
    assert up_to_date(now="t2"), "no stage it covered reads the clock"
    assert not up_to_date(read_clock={"db.s1"}, now="t2")
    assert not up_to_date(version=5)
    assert not up_to_date(table_id="id-b")
    assert not up_to_date(defined={**defined, "db.top": "f3"})
    assert not up_to_date(defined={**defined, "db.s1": "f3"})
    assert not up_to_date(record={**record, one_statement.INLINED: {}})


# a semi join (IN) in the stage below the view's table: inlined, it is written as IN
BUYERS = ViewSpec(
    "buyers_per_country",
    """
SELECT c.country, COUNT(*) AS n FROM customers c
WHERE c.id IN (SELECT customer_id FROM orders WHERE qty > 2)
GROUP BY c.country""",
)


def test_a_semi_join_in_the_one_statement_keeps_the_rows_its_stage_keeps(
    spark, tmp_project: MakeProject
) -> None:
    """The stage of the ``IN`` is read through its query, its semi join written as ``IN``
    (``physical.semi_joins``): the view equals its SELECT after each round of changes."""
    project = open_project(
        spark, tmp_project, [BUYERS], setup=[ORDERS, CUSTOMERS, SEED[0], COUNTRIES], config=""
    )
    (plan,) = project.plans(["buyers_per_country"])
    lowest = plan.stages[0]
    assert lowest.kind == "recompute" and "IN subquery" in lowest.method
    assert "`__l`.`c__id` IN (" in render(plan)  # `ivm compile` shows the IN
    project.refresh()
    for i, changes in enumerate(CHANGES):
        for statement in changes:
            project.sql(statement)
        with recomputed_by_choice(lowest.table):
            done = actions(project.refresh())
        assert "one statement" in done["buyers_per_country"][1], done
        assert_correct(project, [BUYERS], f"round {i + 1}")


# a LEFT JOIN's recompute stage read by a GROUP BY (TPC-H Q13's shape), and by a DISTINCT
# whose stage a GROUP BY reads: in one statement the join's rows are read unconsolidated,
# the DISTINCT's consolidated (its table holds each row once, read with weight 1)
ORDER_COUNTS = ViewSpec(
    "customers_per_order_count",
    """
SELECT n, COUNT(*) AS customers, SUM(total) AS total FROM (
  SELECT c.id, COUNT(o.id) AS n, SUM(o.qty) AS total
  FROM customers c LEFT JOIN orders o ON o.customer_id = c.id AND o.qty > 1
  GROUP BY c.id
) t GROUP BY n""",
)
PAIRS = ViewSpec(
    "quantities_per_country",
    """
SELECT country, COUNT(*) AS quantities FROM (
  SELECT DISTINCT c.country, o.qty FROM customers c LEFT JOIN orders o ON o.customer_id = c.id
) d GROUP BY country""",
)
# customers come twice, go and come back, one within a round; orders change as in ``CHANGES``
CUSTOMER_CHANGES = [
    ["INSERT INTO customers VALUES (2, 'FR'), (6, NULL), (7, 'DE')"],
    [
        "DELETE FROM customers WHERE id = 2 OR country IS NULL",
        "INSERT INTO customers VALUES (4, 'IT')",
    ],
    [
        "INSERT INTO customers VALUES (2, 'FR'), (2, 'FR'), (8, 'DE')",
        "UPDATE customers SET country = 'FR' WHERE id = 7",
        "DELETE FROM customers WHERE id = 8",
    ],
]


def inlined_ctes(plan) -> dict[str, exp.Select]:
    """The CTEs of the view's one statement from its lowest stage, by name."""
    statement = plan.inlined_query(plan.stages[0], symbolic_pins(plan))
    return {cte.alias: cte.this for cte in statement.args["with_"].expressions}


def symbolic_pins(plan) -> dict:
    return {t: Versions.symbolic(t) for s in plan.stages for t in s.sources}


def test_a_stage_read_by_sums_is_read_unconsolidated_in_the_one_statement() -> None:
    """``one_statement.read_unconsolidated``: the LEFT JOIN's rows are grouped by the GROUP BY
    and the DISTINCT above them only, not by every column first; the DISTINCT's rows, read one
    row per stored row, stay grouped; and `ivm compile` shows it."""
    catalog = StaticCatalog(
        {
            "db.orders": [("id", "int"), ("customer_id", "int"), ("qty", "int")],
            "db.customers": [("id", "int"), ("country", "string")],
        }
    )
    counts, pairs = compile_views(
        [
            parse_view(spec.create_statement(), Location("v.sql", 1))
            for spec in (ORDER_COUNTS, PAIRS)
        ],
        catalog,
        "db",
    )
    assert [s.kind for s in counts.stages] == ["recompute", "aggregate", "aggregate"]
    assert [s.kind for s in pairs.stages] == ["recompute", "distinct", "aggregate"]
    ctes = inlined_ctes(counts)
    join, grouped = ctes.values()
    assert join.args.get("group") is None and join.args.get("having") is None, join.sql()
    assert grouped.args.get("group") is not None
    join, distinct = inlined_ctes(pairs).values()
    assert join.args.get("group") is None, join.sql()
    assert distinct.args.get("having") is not None, distinct.sql()  # each row once
    # the stage by stage recompute and the first load write each table consolidated
    assert counts.stages[0].initial_query(symbolic_pins(counts)).args.get("having") is not None
    # `ivm compile` prints the statement one level indented
    assert to_sql(ctes["__ivm_inlined_1"]) in render(counts).replace("\n  ", "\n")


def test_stages_read_unconsolidated_in_the_one_statement_keep_the_views_rows(
    spark, tmp_project: MakeProject
) -> None:
    """Both views written in one statement from their lowest stage, over duplicated orders
    and customers that come twice, go and come back, NULL keys and countries: each equals
    its SELECT after every round."""
    specs = [ORDER_COUNTS, PAIRS]
    project = open_project(
        spark, tmp_project, specs, setup=[ORDERS, CUSTOMERS, SEED[0], COUNTRIES], config=""
    )
    lowest = [plan.stages[0].table for plan in project.plans([s.name for s in specs])]
    project.refresh()
    assert_correct(project, specs, "first refresh")
    for i, changes in enumerate(CHANGES):
        for statement in changes + CUSTOMER_CHANGES[i]:
            project.sql(statement)
        with recomputed_by_choice(*lowest):
            done = actions(project.refresh())
        for spec in specs:
            assert one_statement.describe(2) in done[spec.name][1], done
        assert_correct(project, specs, f"round {i + 1}")
