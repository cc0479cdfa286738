"""Constant sources and the SQL around them, on real Spark and Delta: VALUES, table functions
of literals (range, explode), a SELECT without FROM (a CTE of parameters, a scalar subquery
over it), a parenthesized join tree, and aggregates with FILTER.

Each view has its exact rows after the first refresh and after inserts, deletes and updates
of its tables; those refreshes are incremental (a constant has no change: its join terms
vanish), and each view equals its SELECT."""

from __future__ import annotations

from collections import Counter

from oracle import ViewSpec
from test_refresh import MakeProject, actions, assert_correct, open_project

VALUES_JOIN = ViewSpec(
    "values_join",
    """
SELECT o.id, t.label FROM VALUES ('new', 'N'), ('shipped', 'S') AS t(status, label) JOIN orders o ON o.status = t.status""",
)
VALUES_ONLY = ViewSpec(
    "values_only", "SELECT k, v FROM VALUES (1, 'a'), (2, 'b'), (2, 'b') AS t(k, v)"
)
RANGE_LEFT = ViewSpec(
    "range_left",
    """
SELECT r.s, COUNT(o.id) AS n FROM range(1, 5) AS r(s) LEFT JOIN orders o ON o.customer_id = r.s GROUP BY r.s""",
)
RANGES = ViewSpec(
    "ranges",
    """
SELECT id FROM range(3) UNION ALL SELECT id FROM range(10, 20, 4) UNION ALL SELECT id FROM range(0, 4, 2, 2)
UNION ALL SELECT x FROM explode(array(7, 7)) AS e(x)""",
)
PARAMS = ViewSpec(
    "params",
    """
WITH params AS (SELECT 'shipped' AS good, 100 AS bonus)
SELECT o.id, o.qty + (SELECT bonus FROM params) AS q, p.good FROM orders o JOIN params p ON o.status = p.good""",
)
NO_FROM = ViewSpec("no_from", "SELECT (SELECT SUM(qty) FROM orders) AS total, 'x' AS tag")
JOIN_TREE = ViewSpec(
    "join_tree",
    """
SELECT o.id, c.country FROM (orders o LEFT JOIN (customers c JOIN customers c2 ON c2.id = c.id) ON o.customer_id = c.id)""",
)
FILTERED = ViewSpec(
    "filtered",
    """
SELECT status, SUM(qty) FILTER (WHERE qty > 2) AS big, COUNT(*) FILTER (WHERE qty IS NULL) AS unknown,
       MIN(qty) FILTER (WHERE qty > 1) AS lo, MAX(qty) FILTER (WHERE id < 5) AS hi
FROM orders GROUP BY status""",
)
SPECS = [VALUES_JOIN, VALUES_ONLY, RANGE_LEFT, RANGES, PARAMS, NO_FROM, JOIN_TREE, FILTERED]

# orders: (1, 1, 2, new), (2, 1, 3, shipped), (3, 2, NULL, new), (4, NULL, 1, NULL), (5, 3, 4, shipped) twice
SEEDED = {
    "values_join": [(1, "N"), (2, "S"), (3, "N"), (5, "S"), (5, "S")],
    "values_only": [(1, "a"), (2, "b"), (2, "b")],
    "range_left": [(1, 2), (2, 1), (3, 2), (4, 0)],
    "ranges": [(0,), (1,), (2,), (10,), (14,), (18,), (0,), (2,), (7,), (7,)],
    "params": [(2, 103, "shipped"), (5, 104, "shipped"), (5, 104, "shipped")],
    "no_from": [(14, "x")],
    "join_tree": [(1, "DE"), (2, "DE"), (3, "FR"), (4, None), (5, "DE"), (5, "DE")],
    "filtered": [("new", None, 1, 2, 2), ("shipped", 11, 0, 3, 3), (None, None, 0, None, 1)],
}
CHANGES = [
    "INSERT INTO orders VALUES (6, 2, 7, 'new')",
    "DELETE FROM orders WHERE id = 2",  # shipped's MAX ... FILTER (WHERE id < 5) loses its only row
    "UPDATE orders SET qty = 9 WHERE id = 3",
]
# orders: (1, 1, 2, new), (3, 2, 9, new), (4, NULL, 1, NULL), (5, 3, 4, shipped) twice, (6, 2, 7, new)
CHANGED = {
    **SEEDED,
    "values_join": [(1, "N"), (3, "N"), (5, "S"), (5, "S"), (6, "N")],
    "range_left": [(1, 1), (2, 2), (3, 2), (4, 0)],
    "params": [(5, 104, "shipped"), (5, 104, "shipped")],
    "no_from": [(27, "x")],
    "join_tree": [(1, "DE"), (3, "FR"), (4, None), (5, "DE"), (5, "DE"), (6, "FR")],
    "filtered": [("new", 16, 0, 2, 9), ("shipped", 8, 0, 4, None), (None, None, 0, None, 1)],
}


def rows(project, view: str) -> Counter:
    return Counter(tuple(r) for r in project.spark.table(f"{project.database}.{view}").collect())


def test_constant_sources_and_filters_hold_their_exact_rows_refreshed_incrementally(
    spark, tmp_project: MakeProject
) -> None:
    project = open_project(spark, tmp_project, SPECS)
    assert {r.action for r in project.refresh()} == {"created"}
    for name, expected in SEEDED.items():
        assert rows(project, name) == Counter(expected), name
    assert_correct(project, SPECS, "after the first refresh")
    for statement in CHANGES:
        project.sql(statement)
    reports = actions(project.refresh())
    assert reports["values_only"][0] == "unchanged"  # no source at all: nothing to do, ever
    assert {action for action, _ in reports.values()} == {"incremental", "unchanged"}, reports
    assert all(
        reports[name][0] == "incremental"
        for name in reports
        if name not in ("values_only", "ranges")
    ), reports
    for name, expected in CHANGED.items():
        assert rows(project, name) == Counter(expected), name
    assert_correct(project, SPECS, "after changes")
