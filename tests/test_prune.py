"""Projection pushdown (``ivm_sql.algebra.prune``): every node outputs only what is read above
it, and the operators that compare whole rows keep their columns. No Spark: views compiled
with a ``StaticCatalog``, stages inspected."""

from __future__ import annotations

from pathlib import Path

import sqlglot
from sqlglot import exp

from ivm_sql.algebra.nodes import (
    Aggregate,
    Distinct,
    Node,
    Recompute,
    Scan,
    Select,
    TopK,
    UnionAll,
)
from ivm_sql.algebra.prune import prune
from ivm_sql.catalog import StaticCatalog
from ivm_sql.compiler.order import compile_views
from ivm_sql.errors import Location
from ivm_sql.incremental.recompute import stored_columns
from ivm_sql.incremental.stages import Stage
from ivm_sql.sqlbuild import col
from ivm_sql.viewdefs import load_views, parse_view

CATALOG = StaticCatalog(
    {
        "db.t": [("a", "int"), ("b", "int"), ("c", "string")],
        "db.u": [("a", "int"), ("d", "int")],
    }
)
TPCH = Path(__file__).resolve().parent / "tpch"


def stages(text: str) -> list[Stage]:
    (plan,) = compile_views([parse_view(text, Location("views/x.sql", 1))], CATALOG, "db")
    return list(plan.stages)


def only(node: Node) -> Node:
    (child,) = node.inputs
    return child


def tpch_stages(name: str) -> list[Stage]:
    tables = {}
    for statement in sqlglot.parse((TPCH / "schema.sql").read_text(encoding="utf-8"), read="spark"):
        if isinstance(statement, exp.Create) and isinstance(statement.this, exp.Schema):
            tables[f"tpch.{statement.this.this.name}"] = [
                (c.name.lower(), c.args["kind"].sql("spark").lower())
                for c in statement.this.expressions
                if isinstance(c, exp.ColumnDef)
            ]
    views = [v for v in load_views(TPCH / "queries") if v.name == name]
    (plan,) = compile_views(views, StaticCatalog(tables), "tpch")
    return list(plan.stages)


# TPC-H ----------------------------------------------------------------------------------


def test_q21_exists_stage_keeps_only_what_the_stages_above_read() -> None:
    """36 columns before (all of supplier, lineitem, orders and nation): the NOT EXISTS
    above reads the order and supplier keys, the GROUP BY above it s_name."""
    first, second, *_ = tpch_stages("q21")
    assert first.node.columns == ("supplier__s_name", "l1__l_orderkey", "l1__l_suppkey")
    assert stored_columns(first.node) == (
        "supplier__s_name",
        "l1__l_orderkey",
        "l1__l_suppkey",
        "__ivm_k0",
    )
    assert second.node.columns == ("__j1__supplier__s_name",)
    assert stored_columns(second.node) == ("__j1__supplier__s_name", "__ivm_k0")


def test_q04_keeps_the_grouped_column_and_the_join_key() -> None:
    first, _ = tpch_stages("q04")
    assert stored_columns(first.node) == ("orders__o_orderpriority", "__ivm_k0")
    left = dict(first.node.sources)["__l"]
    assert left.columns == (
        "orders__o_orderkey",
        "orders__o_orderpriority",
    )  # the key, and what is read
    scan = only(left)
    assert isinstance(scan, Scan) and scan.columns == (
        "o_orderkey",
        "o_orderdate",
        "o_orderpriority",
    )


# select-project-join -------------------------------------------------------------------


def test_select_drops_an_unused_column_and_its_input_columns() -> None:
    inner = Select(
        (("t", Scan("db.t", ("a", "b", "c"))),),
        None,
        ("x", "y", "z"),
        (col("a", "t"), exp.Add(this=col("b", "t"), expression=col("b", "t")), col("c", "t")),
    )
    root = Select(
        (("s", inner),),
        exp.GT(this=col("z", "s"), expression=exp.Literal.number(0)),
        ("x",),
        (col("x", "s"),),
    )
    pruned = prune(root)
    assert pruned.columns == ("x",)
    narrowed = only(pruned)
    assert narrowed.columns == ("x", "z")  # z: read by the condition above
    assert [e.sql("spark") for e in narrowed.exprs] == ["`t`.`a`", "`t`.`c`"]
    assert only(narrowed).columns == ("a", "c")
    assert inner.columns == ("x", "y", "z") and len(inner.exprs) == 3  # the input tree is untouched


def test_the_root_keeps_all_its_columns_in_order() -> None:
    root = Select(
        (("t", Scan("db.t", ("a", "b", "c"))),), None, ("c", "a"), (col("c", "t"), col("a", "t"))
    )
    pruned = prune(root)
    assert pruned.columns == ("c", "a")
    assert only(pruned).columns == ("a", "c")  # a Scan keeps the stored order


def test_scan_expressions_stay_aligned_with_its_columns() -> None:
    scan = Scan("db.g", ("k", "n", "s"), exprs=(col("k"), col("__ivm_count"), col("__ivm_s1")))
    root = Select((("g", scan),), None, ("s",), (col("s", "g"),))
    narrowed = only(prune(root))
    assert narrowed.columns == ("s",)
    assert [e.sql("spark") for e in narrowed.exprs] == ["`__ivm_s1`"]


def test_a_generator_is_kept_even_when_nothing_reads_it() -> None:
    """explode turns one row into several: dropping it would change how many rows there are."""
    inner = Select(
        (("t", Scan("db.t", ("a", "arr"))),),
        None,
        ("a", "e"),
        (col("a", "t"), exp.Explode(this=col("arr", "t"))),
    )
    root = Select((("s", inner),), None, ("a",), (col("a", "s"),))
    narrowed = only(prune(root))
    assert narrowed.columns == ("a", "e")
    assert only(narrowed).columns == ("a", "arr")


def test_lateral_view_keeps_its_generator() -> None:
    (stage,) = stages(
        "CREATE VIEW v AS SELECT t.a FROM t LATERAL VIEW explode(array(t.b, t.b)) g AS item"
    )
    wrapped = only(stage.node)
    assert isinstance(wrapped, Select) and len(wrapped.laterals) == 1
    assert wrapped.columns == ("t__a",)
    assert only(wrapped).columns == ("a", "b")  # b: read by the generator


# stateful operators ---------------------------------------------------------------------


def test_distinct_is_not_narrowed() -> None:
    (first,) = stages("CREATE VIEW v AS SELECT s.a FROM (SELECT DISTINCT a, b FROM t) s")
    assert first.kind == "distinct"
    assert first.node.columns == ("a", "b")  # b is compared, though nothing above reads it
    assert only(first.node).columns == ("a", "b")


def test_intersect_is_not_narrowed() -> None:
    (first,) = stages(
        "CREATE VIEW v AS SELECT s.a FROM (SELECT a, b FROM t INTERSECT SELECT a, d FROM u) s"
    )
    assert isinstance(first.node, Recompute)
    assert first.node.columns == ("a", "b")
    assert [child.columns for _, child in first.node.sources] == [("a", "b"), ("a", "d")]


def test_except_all_is_not_narrowed() -> None:
    (first,) = stages(
        "CREATE VIEW v AS SELECT s.b FROM (SELECT a, b FROM t EXCEPT ALL SELECT a, d FROM u) s"
    )
    assert [child.columns for _, child in first.node.sources] == [("a", "b"), ("a", "d")]


def test_aggregate_keeps_the_results_read_above_and_reads_their_keys_and_arguments() -> None:
    stage, _ = stages(
        "CREATE VIEW v AS SELECT s.b, s.n FROM (SELECT b, SUM(a) AS total, COUNT(*) AS n FROM t GROUP BY b) s"
    )
    assert isinstance(stage.node, Aggregate)
    assert stage.node.columns == ("g0", "agg1")
    assert stage.input.columns == ("g0",)
    assert only(stage.input).columns == ("b",)  # a (for the unread SUM) and c are read by nothing


def test_outer_join_keeps_its_key_columns() -> None:
    """Only t.c is read above the LEFT JOIN; its inputs keep the join key all the same."""
    (stage,) = stages("CREATE VIEW v AS SELECT t.c FROM t LEFT JOIN u ON t.a = u.a")
    assert stored_columns(stage.node) == ("t__c", "__ivm_k0")
    left, right = (child for _, child in stage.node.sources)
    assert left.columns == ("t__a", "t__c")
    assert right.columns == ("u__a",)
    assert stage.node.keys == (("t__a",), ("u__a",))


def test_not_in_keeps_the_facts_and_the_listed_value() -> None:
    _, third = stages("CREATE VIEW v AS SELECT t.c FROM t WHERE t.b NOT IN (SELECT u.d FROM u)")
    sources = dict(third.node.sources)
    assert third.node.columns == ("t__c",)
    assert sources["__l"].columns == ("t__b", "t__c")
    assert sources["__r"].columns == ("__q1__d",)
    assert sources["__f"].columns == ("empty", "holds_null")


def test_top_k_keeps_the_order_by_columns_of_its_input() -> None:
    (first,) = stages(
        "CREATE VIEW v AS SELECT s.a FROM (SELECT a, b, c FROM t ORDER BY b DESC, a LIMIT 3) s"
    )
    assert isinstance(first.node, TopK)
    assert first.node.columns == ("a", "b")  # c ties only rows the view reads as equal
    assert only(first.node).columns == ("a", "b")


def test_max_per_group_drops_an_unread_result() -> None:
    first, _ = stages(
        "CREATE VIEW v AS SELECT s.b, s.hi FROM (SELECT b, MAX(a) AS hi, MIN(c) AS lo FROM t GROUP BY b) s"
    )
    assert isinstance(first.node, Aggregate)
    assert first.node.columns == ("g0", "agg0")
    assert only(first.node).columns == ("g0", "a0")  # a1 (for MIN(c)) is read by nothing


def test_global_aggregate_read_for_its_row_alone_keeps_one_row() -> None:
    """Without GROUP BY the aggregate is one row even with no result read: a global Aggregate."""
    first, top = stages(
        "CREATE VIEW v AS SELECT 1 AS one FROM (SELECT MAX(a) AS hi, MIN(b) AS lo FROM t) s"
    )
    assert isinstance(first.node, Aggregate) and first.node.keys == ()
    assert first.node.columns == ()
    assert top.node.sources[0][1].columns == ()  # the view reads no column of it, only its row


def test_window_with_qualify_reads_through_a_subquery_and_is_kept() -> None:
    """Its query selects unqualified columns of a subquery: not narrowed, nothing guessed."""
    (first,) = stages(
        "CREATE VIEW v AS SELECT s.a FROM (SELECT a, b, c FROM t QUALIFY ROW_NUMBER() OVER (PARTITION BY b ORDER BY a) = 1) s"
    )
    assert first.node.columns == ("a", "b", "c")
    assert only(first.node).columns == first.node.sources[0][1].columns


def test_full_recompute_is_kept_whole() -> None:
    """Its query selects the user's SELECT's unqualified outputs: nothing is guessed."""
    (stage,) = stages(
        "CREATE VIEW v TBLPROPERTIES ('ivm.refresh' = 'full') AS SELECT x.b, COUNT(*) AS n FROM t x GROUP BY x.b"
    )
    assert stage.node.columns == ("b", "n")
    (scan,) = stage.node.inputs
    assert isinstance(scan, Scan) and scan.columns == ("a", "b", "c")


def recompute_over_t(query: str) -> Recompute:
    """A recompute reading db.t as input ``__in``, keyed by a, with ``query`` over it."""
    inner = Select(
        (("t", Scan("db.t", ("a", "b", "c"))),),
        None,
        ("a", "b", "c"),
        (col("a", "t"), col("b", "t"), col("c", "t")),
    )
    parsed = sqlglot.parse_one(query, read="spark")
    columns = tuple(parsed.named_selects[:-1])
    return Recompute((("__in", inner),), (("a",),), parsed, columns, "test")


def test_recompute_input_read_under_another_alias() -> None:
    node = recompute_over_t(
        "SELECT x.b AS b, max(x.c) AS hi, x.a AS __ivm_k0 FROM __in AS x GROUP BY x.a, x.b"
    )
    root = Select((("r", node),), None, ("b",), (col("b", "r"),))
    pruned = only(prune(root))
    assert pruned.columns == ("b",)
    assert (
        pruned.query.sql("spark")
        == "SELECT x.b AS b, x.a AS __ivm_k0 FROM __in AS x GROUP BY x.a, x.b"
    )
    assert only(pruned).columns == ("a", "b")  # a: the key; c was read only by the dropped MAX
    # not modified in place
    assert node.query.sql("spark").startswith("SELECT x.b AS b, MAX(x.c) AS hi")


def test_recompute_query_with_an_alias_bound_twice_is_kept_whole() -> None:
    """``x`` names the input and, in a subquery, something else: references cannot be told apart."""
    node = recompute_over_t(
        "SELECT x.b AS b, x.a AS __ivm_k0 FROM __in AS x WHERE x.a IN (SELECT x.k FROM (SELECT 1 AS k) AS x)"
    )
    root = Select((("r", node),), None, ("b",), (col("b", "r"),))
    assert only(only(prune(root))).columns == ("a", "b", "c")


# UNION ALL ------------------------------------------------------------------------------


def test_union_all_is_narrowed_by_position() -> None:
    (stage,) = stages(
        "CREATE VIEW v AS SELECT s.x FROM (SELECT a AS x, b AS y FROM t UNION ALL SELECT d, a FROM u) s"
    )
    union = only(stage.node)
    assert isinstance(union, UnionAll)
    assert union.columns == ("x",)
    assert [b.columns for b in union.branches] == [("x",), ("d",)]
    assert [only(b).columns for b in union.branches] == [("a",), ("d",)]


def test_union_all_with_a_branch_that_cannot_narrow_keeps_every_position() -> None:
    first, second = stages(
        "CREATE VIEW v AS SELECT s.x FROM (SELECT a AS x, b AS y FROM t UNION ALL SELECT DISTINCT a, d FROM u) s"
    )
    union = only(second.node)
    assert isinstance(union, UnionAll)
    assert union.columns == ("x", "y")
    assert [b.columns for b in union.branches] == [("x", "y"), ("a", "d")]
    assert isinstance(first.node, Select) and first.node.columns == (
        "a",
        "d",
    )  # the DISTINCT's input


def test_union_under_distinct_is_not_narrowed() -> None:
    (first,) = stages(
        "CREATE VIEW v AS SELECT s.x FROM (SELECT a AS x, b AS y FROM t UNION SELECT a, d FROM u) s"
    )
    assert first.kind == "distinct"
    union = first.node
    assert isinstance(union, UnionAll) and union.columns == ("x", "y")
    assert [b.columns for b in union.branches] == [("x", "y"), ("a", "d")]


def test_a_tree_without_anything_to_drop_is_unchanged() -> None:
    scan = Scan("db.t", ("a", "b"))
    root = Distinct(
        Select((("t", scan),), None, ("a", "b"), (col("a", "t"), col("b", "t"))), ("a", "b")
    )
    pruned = prune(root)
    assert pruned.columns == ("a", "b")
    assert only(pruned).columns == ("a", "b") and only(only(pruned)).columns == ("a", "b")
