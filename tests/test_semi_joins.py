"""A view's one statement writes its semi joins as IN (``physical.semi_joins``): the same rows,
and a filter Spark carries across the joins above it."""

from __future__ import annotations

import pytest
import sqlglot

from ivm_sql.physical.semi_joins import written_as_in


def rewritten(sql: str) -> str:
    return written_as_in(sqlglot.parse_one(sql, read="spark")).sql("spark")


def test_a_semi_join_on_column_equalities_becomes_an_in() -> None:
    assert rewritten(
        "SELECT __l.a FROM l AS __l LEFT SEMI JOIN r AS __r ON __l.a = __r.c WHERE __l.b > 0"
    ) == ("SELECT __l.a FROM l AS __l WHERE __l.b > 0 AND __l.a IN (SELECT __r.c FROM r AS __r)")
    assert rewritten(
        "SELECT x.a FROM l AS x JOIN m ON x.a = m.a "
        "LEFT SEMI JOIN (SELECT c, d FROM r) AS __r ON __r.c = x.a AND x.b = __r.d"
    ) == (
        "SELECT x.a FROM l AS x JOIN m ON x.a = m.a "
        "WHERE (x.a, x.b) IN (SELECT __r.c, __r.d FROM (SELECT c, d FROM r) AS __r)"
    )


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT l.a FROM l LEFT SEMI JOIN r ON l.a = r.c AND l.b > r.d",
        "SELECT l.a FROM l LEFT SEMI JOIN r ON l.a + 1 = r.c",
        "SELECT l.a FROM l LEFT SEMI JOIN r ON l.a <=> r.c",
        "SELECT l.a FROM l LEFT ANTI JOIN r ON l.a = r.c",
        "SELECT l.a FROM l LEFT JOIN m ON l.a = m.a LEFT SEMI JOIN r ON l.a = r.c",
        "SELECT l.a FROM l LEFT SEMI JOIN r ON l.a = r.c LEFT JOIN m ON l.a = m.a",
    ],
)
def test_a_semi_join_the_rewrite_does_not_cover_is_kept(sql: str) -> None:
    """Other conditions than column equalities and anti joins, where an IN would not keep the
    same rows, stay as they are; so does a semi join beside an outer join (a WHERE applies
    after every join of its SELECT: an outer join after it would see other rows, and one
    before it is left alone too, to keep the rule simple)."""
    assert rewritten(sql) == sqlglot.parse_one(sql, read="spark").sql("spark")


def test_spark_reads_the_same_rows_and_carries_the_in_below_the_aggregate_it_joins(
    spark,
) -> None:
    """Over duplicates and NULLs on both sides, the IN keeps exactly the semi join's rows; and
    only as an IN does Spark's optimizer also filter the aggregate joined above it (TPC-H
    Q20's lineitem sums, ``bench/one_statement.py``)."""
    spark.createDataFrame(
        [(1, 10), (1, 10), (2, None), (None, 3), (3, 4), (4, 4)], "a INT, b INT"
    ).createOrReplaceTempView("semi_l")
    spark.createDataFrame(
        [(1, 10), (1, 10), (None, 4), (3, None), (4, 4)], "c INT, d INT"
    ).createOrReplaceTempView("semi_r")
    spark.createDataFrame(
        [(1, 5), (1, 6), (2, 7), (3, 8), (None, 9)], "k INT, v INT"
    ).createOrReplaceTempView("semi_big")
    queries = [
        "SELECT __l.a, __l.b FROM semi_l AS __l LEFT SEMI JOIN semi_r AS __r ON __l.a = __r.c",
        "SELECT __l.a, __l.b FROM semi_l AS __l "
        "LEFT SEMI JOIN semi_r AS __r ON __l.a = __r.c AND __l.b = __r.d",
        "SELECT j.a, s.total FROM (SELECT __l.a FROM semi_l AS __l "
        "LEFT SEMI JOIN semi_r AS __r ON __l.a = __r.c) AS j "
        "JOIN (SELECT k, SUM(v) AS total FROM semi_big GROUP BY k) AS s ON j.a = s.k",
    ]
    for sql in queries:
        original, as_in = spark.sql(sql), spark.sql(rewritten(sql))
        assert "LEFT SEMI" not in rewritten(sql)
        assert sorted(original.collect(), key=repr) == sorted(as_in.collect(), key=repr), sql
    kept = sorted(tuple(row) for row in spark.sql(rewritten(queries[0])).collect())
    assert kept == [(1, 10), (1, 10), (3, 4), (4, 4)]  # duplicates kept, NULLs matching nothing

    def semi_joins_in_plan(sql: str) -> int:
        plan = spark.sql(sql)._jdf.queryExecution().optimizedPlan().toString()
        return plan.count("LeftSemi")

    assert semi_joins_in_plan(queries[2]) == 1
    assert semi_joins_in_plan(rewritten(queries[2])) == 2  # one below the SUM's GROUP BY
