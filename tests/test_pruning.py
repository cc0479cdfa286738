"""Join terms read a large input only where the change's keys are (``physical.pruning``).

The differential oracles check that the bounds never change a result: their even rounds
bound every join term (``oracle.as_large``). Here: which equalities give bounds, which
literals they become, and that Delta reads fewer files for them.
"""

from __future__ import annotations

import datetime
import decimal

import pytest
from sqlglot import exp

from ivm_sql.catalog import StaticCatalog
from ivm_sql.compiler import compile_views, render, symbolic_pins
from ivm_sql.errors import Location
from ivm_sql.physical import execution, pruning
from ivm_sql.sqlbuild import col, to_sql
from ivm_sql.viewdefs import parse_view

CATALOG = StaticCatalog({
    "db.orders": [("id", "int"), ("customer_id", "int"), ("product_id", "int"), ("quantity", "int")],
    "db.customers": [("id", "int"), ("name", "string")],
    "db.products": [("id", "int"), ("price", "decimal(10,2)")],
})


def plan_of(select: str):
    view = parse_view(f"CREATE VIEW v AS {select};", Location("v.sql", 1))
    (plan,) = compile_views([view], CATALOG, "db")
    return plan


def change_of(select: str) -> exp.Query:
    (stage,) = plan_of(select).stages
    return stage.change_query(symbolic_pins([stage]))


def test_each_join_term_bounds_the_other_inputs_by_its_change_keys() -> None:
    change = change_of(
        "SELECT o.id, c.name, p.price FROM orders o JOIN customers c ON o.customer_id = c.id "
        "JOIN products p ON o.product_id = p.id"
    )
    assert sorted(b.describe() for b in pruning.bounds(change)) == [
        "db.customers.id by the change's customer_id",  # the orders term
        "db.orders.customer_id by the change's id",  # the customers term
        "db.orders.product_id by the change's id",  # the products term
        "db.products.id by the change's product_id",  # the orders term
    ]


def test_ivm_compile_names_the_bounds() -> None:
    text = render(plan_of("SELECT o.id, c.name FROM orders o JOIN customers c ON o.customer_id = c.id"))
    assert "-- join terms read a large input only where the change's keys are: " \
           "db.customers.id by the change's customer_id; db.orders.customer_id by the change's id" in text
    assert f"-- pruning: {pruning.describe()};" in text


def test_no_bound_without_an_equality_or_through_an_outer_join() -> None:
    assert pruning.bounds(change_of("SELECT o.id, c.name FROM orders o JOIN customers c ON o.customer_id < c.id")) == []
    assert pruning.bounds(change_of("SELECT id, quantity FROM orders WHERE quantity > 2")) == []
    outer = exp.select("a.k").from_("(SELECT * FROM __ivm_changes1) AS a").join("db.t AS b", on="a.k = b.k", join_type="LEFT")
    assert pruning.bounds(outer) == []
    inner = exp.select("a.k").from_("(SELECT * FROM __ivm_changes1) AS a").join("db.t AS b", on="a.k = b.k")
    assert [(b.change_alias, b.key, b.table_alias, b.column) for b in pruning.bounds(inner)] == [("a", "k", "b", "k")]


def literal(distinct: int, values: list, lo=None, hi=None) -> str | None:
    predicate = pruning._literal_predicate(col("k", "b"), pruning._key_ranges(distinct, values, lo, hi))
    return None if predicate is None else to_sql(predicate, pretty=False)


def test_literals_a_list_ranges_nothing_or_none() -> None:
    assert literal(0, []) == "FALSE"  # no key: no row of the term can join
    assert literal(3, [2, 5, 9]) == "`b`.`k` IN (2, 5, 9)"
    assert literal(2, ["a", "x'y"]) == "`b`.`k` IN ('a', 'x\\'y')"
    slab = list(range(100, 100 + pruning.LISTED + 1))
    assert literal(len(slab), slab) == f"`b`.`k` BETWEEN 100 AND {slab[-1]}"
    # new keys at the top, deleted ones at the bottom: two ranges, the files between skipped
    two = list(range(1, 20)) + list(range(6000, 6020, 2))
    assert literal(len(two), two) == "`b`.`k` BETWEEN 1 AND 19 OR `b`.`k` BETWEEN 6000 AND 6018"
    # evenly spread keys have no hole to split at; too many to fetch: least to greatest
    spread = list(range(0, 700, 7))
    assert literal(len(spread), spread) == "`b`.`k` BETWEEN 0 AND 693"
    assert literal(10**6, two, 1, 10**6) == "`b`.`k` BETWEEN 1 AND 1000000"
    assert pruning._ranges([*range(10), 100, 1000, 10000, 100000]) == [(0, 100), (1000, 1000), (10000, 10000), (100000, 100000)]  # the 3 widest holes
    assert pruning._ranges(["a", "b", "z"]) == [("a", "z")]
    assert to_sql(pruning._literal(decimal.Decimal("12.50")), pretty=False) == "12.50"
    assert to_sql(pruning._literal(datetime.date(2026, 11, 25)), pretty=False) == "CAST('2026-11-25' AS DATE)"
    # no literal for a timestamp (it depends on the session's time zone) or a float: no bound
    assert literal(2, [datetime.datetime(2026, 1, 1), datetime.datetime(2026, 1, 2)]) is None
    assert literal(1, [0.5]) is None


@pytest.fixture
def big_table(spark):
    """db ``pruning_test``: ``big`` holds keys 0-9999 in ten files of 1,000 keys each."""
    spark.sql("CREATE DATABASE IF NOT EXISTS pruning_test")
    spark.sql("CREATE OR REPLACE TABLE pruning_test.big (k INT, v STRING) USING DELTA")
    for slab in range(10):
        spark.sql(f"INSERT INTO pruning_test.big SELECT /*+ COALESCE(1) */ CAST(id AS INT), concat('v', id) FROM range({slab * 1000}, {slab * 1000 + 1000})")
    yield "pruning_test.big"
    spark.sql("DROP DATABASE pruning_test CASCADE")


@pytest.mark.parametrize(("keys", "files"), [([3, 5, 1500], 2), (list(range(2000, 2100)), 1),
                                             (list(range(0, 50)) + list(range(9000, 9050)), 2)],
                         ids=["listed", "range", "two ranges"])
def test_a_bounded_term_reads_the_files_of_its_keys_and_returns_the_same_rows(spark, big_table, keys, files) -> None:
    values = ", ".join(f"({k}, 1)" for k in keys)
    spark.sql(f"SELECT * FROM VALUES {values} AS c(k, __ivm_w)").createOrReplaceTempView("__ivm_changes_test")
    version = spark.sql(f"DESCRIBE HISTORY {big_table}").first()["version"]
    term = (exp.select("a.k", "b.v").from_("(SELECT * FROM __ivm_changes_test) AS a")
            .join(f"{big_table} VERSION AS OF {version} AS b", on="a.k = b.k"))
    bounded = pruning.bounded(spark, term, lambda table, version: pruning.LARGE_TABLE)
    assert bounded.sql() != term.sql()
    with execution.session_settings(spark, {"spark.sql.adaptive.enabled": "false"}):  # leaves in the plan itself
        frame = spark.sql(to_sql(bounded, pretty=False))
        rows = frame.collect()
        assert sorted(rows) == sorted(spark.sql(to_sql(term, pretty=False)).collect())
        assert len(rows) == len(keys)
        read = [leaf.metrics().apply("numFiles").value() for leaf in _leaves(frame) if leaf.metrics().contains("numFiles")]
    assert read == [files]  # of 10 (Delta skips by an IN list's least and greatest value)
    small = pruning.bounded(spark, term, lambda table, version: pruning.LARGE_TABLE - 1)
    assert small.sql() == term.sql()  # a small input is read as it is


def _leaves(frame):
    plan = frame._jdf.queryExecution().executedPlan()
    leaves = plan.collectLeaves()
    return [leaves.apply(i) for i in range(leaves.size())]
