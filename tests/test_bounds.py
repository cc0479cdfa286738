"""Join terms read a large input only where the change's keys are (``physical.bounds``).

The differential oracles check that the bounds never change a result: their even rounds
bound every join term (``oracle.as_large``). Here: which equalities give bounds, which
literals they become, and that Delta reads fewer files for them.
"""

from __future__ import annotations

import datetime
import decimal
import itertools

import pytest
import sqlglot
from jobs import job_group
from sqlglot import exp

from ivm_sql.catalog import StaticCatalog
from ivm_sql.compiler.order import compile_views
from ivm_sql.compiler.plan import symbolic_pins
from ivm_sql.compiler.render import render
from ivm_sql.errors import Location
from ivm_sql.incremental.versions import Versions
from ivm_sql.physical import bounds, cost, execution
from ivm_sql.physical.changes import is_change_read
from ivm_sql.sqlbuild import col, to_sql
from ivm_sql.storage.delta_log import DeltaLog
from ivm_sql.viewdefs import parse_view

CATALOG = StaticCatalog(
    {
        "db.orders": [
            ("id", "int"),
            ("customer_id", "int"),
            ("product_id", "int"),
            ("quantity", "int"),
        ],
        "db.customers": [("id", "int"), ("name", "string")],
        "db.products": [("id", "int"), ("price", "decimal(10,2)")],
    }
)


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
    assert sorted(b.describe() for b in bounds.bounds(change)) == [
        "db.customers.id by the change's customer_id",  # the orders term
        "db.orders.customer_id by the change's id",  # the customers term
        "db.orders.product_id by the change's id",  # the products term
        "db.products.id by the change's product_id",  # the orders term
    ]


def test_a_bound_reaches_the_tables_of_the_query_itself() -> None:
    """The cost model finds a bounded read among the query's scans by the node: an old
    snapshot (the new version UNION ALL the change) must give its own table node, not a copy."""
    change = change_of("SELECT o.id, c.name FROM orders o JOIN customers c ON o.customer_id = c.id")
    nodes = {id(t) for t in change.find_all(exp.Table)}
    origins = [
        (t, name)
        for b in bounds.bounds(change)
        for t, name in bounds._origins(bounds._sources(b.term)[b.table_alias], b.column)
        if not is_change_read(t)
    ]
    assert sorted(name for _, name in origins) == ["customer_id", "id"]
    assert all(id(t) in nodes for t, _ in origins)


def test_ivm_compile_names_the_bounds() -> None:
    text = render(
        plan_of("SELECT o.id, c.name FROM orders o JOIN customers c ON o.customer_id = c.id")
    )
    assert (
        "-- large inputs read only where the change's keys are: "
        "db.customers.id by the change's customer_id; db.orders.customer_id by the change's id"
        in text
    )
    assert f"-- pruning: {bounds.describe()};" in text


def test_no_bound_without_an_equality_or_through_an_outer_join() -> None:
    assert (
        bounds.bounds(
            change_of("SELECT o.id, c.name FROM orders o JOIN customers c ON o.customer_id < c.id")
        )
        == []
    )
    assert bounds.bounds(change_of("SELECT id, quantity FROM orders WHERE quantity > 2")) == []
    outer = (
        exp.select("a.k")
        .from_("(SELECT * FROM global_temp.__ivm_changes1) AS a")
        .join("db.t AS b", on="a.k = b.k", join_type="LEFT")
    )
    assert bounds.bounds(outer) == []
    inner = (
        exp.select("a.k")
        .from_("(SELECT * FROM global_temp.__ivm_changes1) AS a")
        .join("db.t AS b", on="a.k = b.k")
    )
    assert [(b.change_alias, b.key, b.table_alias, b.column) for b in bounds.bounds(inner)] == [
        ("a", "k", "b", "k")
    ]


def test_a_touched_keys_recompute_reads_its_inputs_only_where_the_touched_keys_are() -> None:
    # a window recomputes each touched partition: orders is read only for the touched customers
    change = change_of(
        "SELECT id, customer_id, RANK() OVER (PARTITION BY customer_id ORDER BY quantity) AS r FROM orders"
    )
    # and the stage's stored rows of the touched keys, which its change subtracts
    assert sorted(b.describe() for b in bounds.bounds(change)) == [
        "db.__ivm_v.__ivm_k0 by the touched keys",
        "db.orders.customer_id by the touched keys",
    ]
    # a NULL customer is a partition like any other
    assert all(b.null_safe for b in bounds.bounds(change))


def test_the_touched_keys_of_a_join_bound_its_inputs_when_each_term_binds_them_to_a_change() -> (
    None
):
    """A window over a join recomputes each touched partition: the touched customers come
    from every term of the join's change. The orders term's are its changed orders'; the
    customers term's are orders.customer_id, equal to the changed customers' id. So every
    touched key is a value of a feed, and the join's new rows are read only for them (TPC-H
    Q18's lineitem and orders, by the order keys its IN touches)."""
    window = (
        "SELECT o.id, c.name, RANK() OVER (PARTITION BY o.customer_id ORDER BY o.quantity) AS r "
        "FROM orders o JOIN customers c ON o.customer_id = c.id"
    )
    assert "db.customers/db.orders.customer_id by the touched keys" in [
        b.describe() for b in bounds.bounds(change_of(window))
    ]
    # joined to products by product_id: the products term touches any customer, and bounds nothing
    by_product = (
        "SELECT o.id, p.price, RANK() OVER (PARTITION BY o.customer_id ORDER BY o.quantity) AS r "
        "FROM orders o JOIN products p ON o.product_id = p.id"
    )
    touched = "db.orders/db.products.customer_id by the touched keys"
    assert touched not in [b.describe() for b in bounds.bounds(change_of(by_product))]
    # ...until products has no change in the refresh: its term is left out
    (stage,) = plan_of(by_product).stages
    pins = symbolic_pins([stage])
    pins["db.products"] = Versions.at(3, 3)
    assert touched in [b.describe() for b in bounds.bounds(stage.change_query(pins))]


def test_a_semi_join_bounds_both_ways_an_anti_join_neither() -> None:
    semi = (
        exp.select("b.k")
        .from_("db.t AS b")
        .join(
            "(SELECT * FROM global_temp.__ivm_changes1) AS a",
            on="b.k <=> a.k",
            join_type="LEFT SEMI",
        )
    )
    assert [(b.change_alias, b.table_alias, b.null_safe) for b in bounds.bounds(semi)] == [
        ("a", "b", True)
    ]
    semi = (
        exp.select("a.k")
        .from_("(SELECT * FROM global_temp.__ivm_changes1) AS a")
        .join("db.t AS b", on="a.k = b.k", join_type="LEFT SEMI")
    )
    assert [(b.change_alias, b.table_alias, b.null_safe) for b in bounds.bounds(semi)] == [
        ("a", "b", False)
    ]
    anti = (
        exp.select("b.k")
        .from_("db.t AS b")
        .join(
            "(SELECT * FROM global_temp.__ivm_changes1) AS a", on="b.k = a.k", join_type="LEFT ANTI"
        )
    )
    assert bounds.bounds(anti) == []


def literal(distinct: int, values: list, lo=None, hi=None) -> str | None:
    predicate = bounds._literal_predicate(
        col("k", "b"), bounds._key_ranges(distinct, values, lo, hi)
    )
    return None if predicate is None else to_sql(predicate, pretty=False)


def test_literals_a_list_ranges_nothing_or_none() -> None:
    assert literal(0, []) == "FALSE"  # no key: no row of the term can join
    assert literal(3, [2, 5, 9]) == "`b`.`k` IN (2, 5, 9)"
    assert literal(2, ["a", "x'y"]) == "`b`.`k` IN ('a', 'x\\'y')"
    slab = list(range(100, 100 + bounds.LISTED + 1))
    assert literal(len(slab), slab) == f"`b`.`k` BETWEEN 100 AND {slab[-1]}"
    # new keys at the top, deleted ones at the bottom: two ranges, the files between skipped
    two = list(range(1, 20)) + list(range(6000, 6020, 2))
    assert literal(len(two), two) == "`b`.`k` BETWEEN 1 AND 19 OR `b`.`k` BETWEEN 6000 AND 6018"
    # evenly spread keys have no hole to split at; too many to fetch: least to greatest
    spread = list(range(0, 700, 7))
    assert literal(len(spread), spread) == "`b`.`k` BETWEEN 0 AND 693"
    assert literal(10**6, two, 1, 10**6) == "`b`.`k` BETWEEN 1 AND 1000000"
    assert bounds._ranges([*range(10), 100, 1000, 10000, 100000]) == [
        (0, 100),
        (1000, 1000),
        (10000, 10000),
        (100000, 100000),
    ]  # the 3 widest holes
    assert bounds._ranges(["a", "b", "z"]) == [("a", "z")]
    assert to_sql(bounds._literal(decimal.Decimal("12.50")), pretty=False) == "12.50"
    assert (
        to_sql(bounds._literal(datetime.date(2026, 11, 25)), pretty=False)
        == "CAST('2026-11-25' AS DATE)"
    )
    # no literal for a timestamp (it depends on the session's time zone) or a float: no bound
    assert literal(2, [datetime.datetime(2026, 1, 1), datetime.datetime(2026, 1, 2)]) is None
    assert literal(1, [0.5]) is None


def test_the_cost_model_counts_the_files_a_bound_opens() -> None:
    files = [
        (100, {"minValues": {"k": 0}, "maxValues": {"k": 999}}),
        (200, {"minValues": {"k": 1000}, "maxValues": {"k": 1999}}),
        (400, {"minValues": {"k": 2000}, "maxValues": {"k": 2999}}),
        (800, {}),
    ]  # no statistics: opened
    assert bounds.read_bytes(files, "k", ((5, 5), (2500, 2600))) == 100 + 400 + 800
    assert bounds.read_bytes(files, "k", ()) == 800
    assert bounds.read_bytes(files, "other", ((5, 5),)) == 1500
    dated = [(10, {"minValues": {"d": "2026-01-01"}, "maxValues": {"d": "2026-01-31"}})]
    assert (
        bounds.read_bytes(dated, "d", ((datetime.date(2026, 2, 1), datetime.date(2026, 2, 3)),))
        == 0
    )
    assert (
        bounds.read_bytes(dated, "d", ((datetime.date(2026, 1, 31), datetime.date(2026, 2, 3)),))
        == 10
    )


@pytest.fixture
def big_table(spark):
    """db ``pruning_test``: ``big`` holds keys 0-9999 in ten files of 1,000 keys each."""
    spark.sql("CREATE DATABASE IF NOT EXISTS pruning_test")
    spark.sql("CREATE OR REPLACE TABLE pruning_test.big (k INT, v STRING) USING DELTA")
    for slab in range(10):
        spark.sql(
            f"INSERT INTO pruning_test.big SELECT /*+ COALESCE(1) */ CAST(id AS INT), concat('v', id) FROM range({slab * 1000}, {slab * 1000 + 1000})"
        )
    yield "pruning_test.big"
    spark.sql("DROP DATABASE pruning_test CASCADE")


@pytest.mark.parametrize(
    ("keys", "files"),
    [
        ([3, 5, 1500], 2),
        (list(range(2000, 2100)), 1),
        (list(range(50)) + list(range(9000, 9050)), 2),
    ],
    ids=["listed", "range", "two ranges"],
)
def test_a_bounded_term_reads_the_files_of_its_keys_and_returns_the_same_rows(
    spark, big_table, keys, files
) -> None:
    values = ", ".join(f"({k}, 1)" for k in keys)
    spark.sql(f"SELECT * FROM VALUES {values} AS c(k, __ivm_w)").createOrReplaceGlobalTempView(
        "__ivm_changes_test"
    )
    version = spark.sql(f"DESCRIBE HISTORY {big_table}").first()["version"]
    term = (
        exp.select("a.k", "b.v")
        .from_("(SELECT * FROM global_temp.__ivm_changes_test) AS a")
        .join(f"{big_table} VERSION AS OF {version} AS b", on="a.k = b.k")
    )
    bounded, reads = bounds.bounded(
        bounds.KeyValues(spark), term, lambda table, version: bounds.BOUNDED_FROM_BYTES
    )
    assert bounded.sql() != term.sql() and [r.column for r in reads] == ["k"]
    with execution.session_settings(
        spark, {"spark.sql.adaptive.enabled": "false"}
    ):  # leaves in the plan itself
        frame = spark.sql(to_sql(bounded, pretty=False))
        rows = frame.collect()
        assert sorted(rows) == sorted(spark.sql(to_sql(term, pretty=False)).collect())
        assert len(rows) == len(keys)
        scans = [leaf.metrics() for leaf in _leaves(frame) if leaf.metrics().contains("numFiles")]
        read = [metrics.apply("numFiles").value() for metrics in scans]
    assert read == [files]  # of 10 (Delta skips by an IN list's least and greatest value)
    # what the cost model counts, from the checksum file, is what Delta read
    log = DeltaLog(spark)
    assert (
        cost.scanned_bytes(bounded, reads, log.size_bytes, log.file_stats)
        == scans[0].apply("filesSize").value()
    )
    small, reads = bounds.bounded(
        bounds.KeyValues(spark), term, lambda table, version: bounds.BOUNDED_FROM_BYTES - 1
    )
    assert small.sql() == term.sql() and reads == []  # a small input is read as it is


def _leaves(frame):
    plan = frame._jdf.queryExecution().executedPlan()
    leaves = plan.collectLeaves()
    return [leaves.apply(i) for i in range(leaves.size())]


def test_a_null_safe_bound_reads_the_null_keys_file_too(spark, big_table) -> None:
    """A touched-keys recompute's semi join matches a NULL key with NULL (``<=>``): the bound
    adds ``OR k IS NULL``, and Delta skips the files that hold no NULL."""
    spark.sql(
        f"INSERT INTO {big_table} SELECT /*+ COALESCE(1) */ CAST(NULL AS INT), concat('n', id) FROM range(5)"
    )
    spark.sql("SELECT * FROM VALUES (5), (NULL) AS c(k)").createOrReplaceGlobalTempView(
        "__ivm_changes_test"
    )
    version = spark.sql(f"DESCRIBE HISTORY {big_table}").first()["version"]
    term = (
        exp.select("b.k", "b.v")
        .from_(f"{big_table} VERSION AS OF {version} AS b")
        .join(
            "(SELECT * FROM global_temp.__ivm_changes_test) AS a",
            on="b.k <=> a.k",
            join_type="LEFT SEMI",
        )
    )
    bounded, reads = bounds.bounded(
        bounds.KeyValues(spark), term, lambda table, version: bounds.BOUNDED_FROM_BYTES
    )
    assert "IS NULL" in bounded.sql() and reads == []  # the cost model counts it whole
    with execution.session_settings(spark, {"spark.sql.adaptive.enabled": "false"}):
        frame = spark.sql(to_sql(bounded, pretty=False))
        rows = frame.collect()
        assert sorted(rows, key=str) == sorted(
            spark.sql(to_sql(term, pretty=False)).collect(), key=str
        )
        assert len(rows) == 6  # key 5 and the five NULL keys
        read = [
            leaf.metrics().apply("numFiles").value()
            for leaf in _leaves(frame)
            if leaf.metrics().contains("numFiles")
        ]
    assert read == [2]  # of 11: keys 0-999, and the NULLs


def _feed(spark, name: str, rows: str) -> None:
    """A kept change data feed (``physical.changes``) of ``(k, __ivm_w)`` rows."""
    spark.sql(f"SELECT * FROM VALUES {rows} AS c(k, __ivm_w)").createOrReplaceGlobalTempView(name)


_probes = itertools.count()


def _source(select: str) -> exp.Subquery:
    """A change as a join term reads it: a FROM item."""
    return sqlglot.parse_one(select, dialect="spark").subquery("change")


def _jobs(spark, action) -> tuple[object, int]:
    """What ``action`` returns, and how many Spark jobs it ran."""
    group = f"key-values-probe-{next(_probes)}"
    with job_group(spark, group) as jobs:
        result = action()
    return result, len(jobs(group))


def test_keys_read_straight_from_a_feed_take_its_values_once_per_refresh(spark) -> None:
    """Two stages' changes over one feed, filtered differently: both are bounded by all of the
    feed's keys (a superset of each one's own), fetched by one job."""
    _feed(spark, "__ivm_changes_kv1", "(3, 1), (5, -1), (9, 1)")
    values = bounds.KeyValues(spark)
    small = _source(
        "SELECT c.k, SUM(c.__ivm_w) AS w FROM global_temp.__ivm_changes_kv1 AS c WHERE c.k < 4 GROUP BY c.k"
    )
    renamed = _source(
        "SELECT c.k AS p0 FROM global_temp.__ivm_changes_kv1 AS c WHERE c.__ivm_w > 0"
    )
    first, jobs = _jobs(spark, lambda: values.of([(small, ["k"])])[0])
    assert first["k"] == (3, [3, 5, 9], 3, 9, False) and jobs == 1
    second, jobs = _jobs(spark, lambda: values.of([(renamed, ["p0"])])[0])
    assert second["p0"] == first["k"] and jobs == 0


def test_a_feeds_values_cost_one_aggregation_in_ivms_own_sessions(spark) -> None:
    """In ivm's own sessions (adaptive execution, shuffle partitions 4) a feed of 15,000 rows
    in 4 partitions has its keys' values fetched by one aggregation: two jobs (its shuffle's
    map side and the result). A COUNT(DISTINCT) per key beside the sets would expand every
    row per key and aggregate twice more: three jobs. The values are the feed's all the same."""
    spark.range(0, 15000, numPartitions=4).selectExpr(
        "IF(id % 97 = 0, NULL, id % 5000) AS k", "CAST(id % 7 AS INT) AS j", "1 AS __ivm_w"
    ).createOrReplaceGlobalTempView("__ivm_changes_kv7")
    change = _source("SELECT c.k, c.j FROM global_temp.__ivm_changes_kv7 AS c")
    own_session = {"spark.sql.adaptive.enabled": "true", "spark.sql.shuffle.partitions": "4"}
    with execution.session_settings(spark, own_session):
        values, jobs = _jobs(spark, lambda: bounds.KeyValues(spark).of([(change, ["k", "j"])])[0])
    expected = spark.sql(
        "SELECT COUNT(DISTINCT k) AS n, MIN(k) AS lo, MAX(k) AS hi FROM global_temp.__ivm_changes_kv7"
    ).first()
    distinct, listed, least, greatest, has_null = values["k"]
    assert (distinct, least, greatest, has_null) == (expected.n, expected.lo, expected.hi, True)
    assert listed == sorted(set(listed)) and len(listed) == distinct
    assert values["j"] == (7, list(range(7)), 0, 6, False)
    assert jobs == 2


def test_the_columns_several_changes_ask_of_one_feed_are_fetched_by_one_job(spark) -> None:
    """Q03's change binds ``customer`` by the changed orders' customer keys and ``lineitem``
    by their order keys, and another term's change binds by the same feed's order keys: one
    job reads both columns of the feed, and each change gets its own columns' values."""
    spark.sql(
        "SELECT * FROM VALUES (3, 30, 1), (5, 50, -1), (9, NULL, 1) AS c(k, j, __ivm_w)"
    ).createOrReplaceGlobalTempView("__ivm_changes_kv6")
    both = _source("SELECT c.k, c.j FROM global_temp.__ivm_changes_kv6 AS c")
    keys_only = _source("SELECT c.k AS p FROM global_temp.__ivm_changes_kv6 AS c WHERE c.j > 0")
    values = bounds.KeyValues(spark)
    (first, second), jobs = _jobs(
        spark, lambda: values.of([(both, ["j", "k"]), (keys_only, ["p"])])
    )
    assert jobs == 1
    assert first == {"k": (3, [3, 5, 9], 3, 9, False), "j": (2, [30, 50], 30, 50, True)}
    assert second == {"p": first["k"]}


def test_keys_a_join_binds_to_a_feed_take_its_values_without_reading_the_table(
    spark, big_table
) -> None:
    """A touched key read from a large table, but equal to a feed's column by the join: the
    feed's values hold all of its values, fetched by one job over the feed alone."""
    _feed(spark, "__ivm_changes_kv5", "(3, 1), (1500, -1), (20000, 1)")
    touched = _source(
        f"SELECT DISTINCT b.k AS t FROM {big_table} AS b "
        "JOIN global_temp.__ivm_changes_kv5 AS c ON b.k = c.k"
    )
    values, jobs = _jobs(spark, lambda: bounds.KeyValues(spark).of([(touched, ["t"])])[0])
    assert values["t"] == (3, [3, 1500, 20000], 3, 20000, False) and jobs == 1
    # null-safely equal: a NULL of the table would match a NULL of the feed, not followed
    null_safe = _source(
        f"SELECT DISTINCT b.k AS t FROM {big_table} AS b "
        "JOIN global_temp.__ivm_changes_kv5 AS c ON b.k <=> c.k"
    )
    assert bounds._feed_origins(null_safe, "t") is None


def test_a_key_an_outer_join_may_turn_null_takes_the_changes_own_values(spark) -> None:
    """The feed holds no NULL, the change does (the outer join's missing side): a null-safe
    bound must see it, or a touched-keys recompute would lose the NULL key's rows."""
    _feed(spark, "__ivm_changes_kv2", "(5, 1)")
    change = _source(
        "SELECT x.k FROM (SELECT 1 AS j) AS d LEFT JOIN global_temp.__ivm_changes_kv2 AS x ON d.j = x.k"
    )
    distinct, _, _, _, has_null = bounds.KeyValues(spark).of([(change, ["k"])])[0]["k"]
    assert (distinct, has_null) == (0, True)


def test_a_key_computed_in_one_branch_of_a_union_takes_the_changes_own_values(spark) -> None:
    """A touched-keys recompute's keys are a UNION ALL of each input's change keys; NOT IN's
    are ``qty + 1`` on one side. Bounding by the other branch's feed values alone would leave
    out the computed keys, and the stored rows of those keys would never be taken back (seed
    18 of the long oracle run: an emptied table's rows stayed in the view)."""
    _feed(spark, "__ivm_changes_kv3", "(5, -1), (2, 1)")
    _feed(spark, "__ivm_changes_kv4", "(40, 1)")
    union = _source(
        "SELECT o.k + 1 AS t FROM global_temp.__ivm_changes_kv3 AS o UNION ALL SELECT c.k AS t FROM global_temp.__ivm_changes_kv4 AS c"
    )
    distinct, listed, least, greatest, has_null = bounds.KeyValues(spark).of([(union, ["t"])])[0][
        "t"
    ]
    assert (distinct, listed, least, greatest, has_null) == (3, [3, 6, 40], 3, 40, False)
    plain = _source(
        "SELECT o.k AS t FROM global_temp.__ivm_changes_kv3 AS o UNION ALL SELECT c.k AS t FROM global_temp.__ivm_changes_kv4 AS c"
    )
    assert [(table.name, column) for table, column in bounds._origins(plain, "t")] == [
        ("__ivm_changes_kv3", "k"),
        ("__ivm_changes_kv4", "k"),
    ]  # every branch a column: the feeds' values


def test_values_of_several_feeds_are_their_union() -> None:
    both = bounds._merged([(2, [1, 4], 1, 4, False), (2, [4, 7], 4, 7, True)])
    assert both == (3, [1, 4, 7], 1, 7, True)
    partial = bounds._merged([(2, [1, 4], 1, 4, False), (200_000, [5], 5, 900, False)])
    assert bounds._key_ranges(*partial[:4]) == [(1, 900)]  # not all fetched: least to greatest


def test_a_chain_of_equalities_bounds_every_input_on_it() -> None:
    """``o.customer_id = c.id AND c.id = p.id``: the orders term's change bounds products by
    its customer_id though no condition names both (every row it outputs has p.id equal to
    it), and the products term's bounds orders. Without following the chain, each term
    would read the input at its far end whole (TPC-H Q18's lineitem, Q21's)."""
    change = change_of(
        "SELECT o.id, c.name, p.price FROM orders o JOIN customers c ON o.customer_id = c.id "
        "JOIN products p ON c.id = p.id"
    )
    assert sorted(b.describe() for b in bounds.bounds(change)) == [
        "db.customers.id by the change's customer_id",  # the orders term
        "db.customers.id by the change's id",  # the products term
        "db.orders.customer_id by the change's id",  # the customers term
        "db.orders.customer_id by the change's id",  # the products term, through c.id
        "db.products.id by the change's customer_id",  # the orders term, through c.id
        "db.products.id by the change's id",  # the customers term
    ]


def test_a_chain_is_not_followed_through_a_null_safe_equality() -> None:
    """NULL <=> NULL holds: along ``<=>`` a NULL key would join, and a bound by the change's
    values (which leaves NULL out unless the change holds one) could drop its rows."""
    conditions = [sqlglot.parse_one(c, dialect="spark") for c in ("d.k = o.k", "o.k <=> l.k")]
    pairs = {(a, b, null_safe) for a, b, null_safe in bounds._equalities(conditions)}
    assert (("d", "k"), ("l", "k"), False) not in pairs
    assert (("o", "k"), ("l", "k"), True) in pairs and (("d", "k"), ("o", "k"), False) in pairs
