"""A correlated scalar subquery that looks a value up instead of aggregating (issue 34).

Spark runs ``(SELECT w_name FROM wh WHERE w_id = n)`` and fails only when an outer row's
lookup finds two rows (SCALAR_SUBQUERY_TOO_MANY_ROWS). ivm maintains it as a join with the
value and the row count per key: after each step the view equals its SELECT, and where
Spark's SELECT fails, reading the view fails with Spark's error too (the refresh itself
succeeds: the check is made where the view's rows are read, on outer rows only).
"""

from __future__ import annotations

import pytest
from oracle import INCREMENTAL_ONLY, MakeProject, ViewSpec, compare_views, views_file

from ivm_sql.errors import SqlError
from ivm_sql.project import Project

LOOKUPS = [
    ViewSpec("named", "SELECT n, (SELECT w_name FROM wh WHERE w_id = n) AS wh_name FROM numbers"),
    # the lookup compared in WHERE, over an expression of the inner row
    ViewSpec(
        "long_names",
        "SELECT n FROM numbers WHERE (SELECT length(w_name) FROM wh WHERE wh.w_id = numbers.n) > 2",
    ),
]

TOO_MANY_ROWS = "SCALAR_SUBQUERY_TOO_MANY_ROWS"

# (what happens, statement, whether Spark's SELECT of `named` fails after it)
STEPS = [
    ("a key's name changes", "UPDATE wh SET w_name = 'east' WHERE w_id = 1", False),
    ("an outer row without a match arrives", "INSERT INTO numbers VALUES (7), (NULL)", False),
    ("a key nobody reads gets two rows", "INSERT INTO wh VALUES (9, 'x'), (9, 'y')", False),
    ("a key an outer row reads gets two rows", "INSERT INTO wh VALUES (2, 'south')", True),
    ("the second row leaves again", "DELETE FROM wh WHERE w_name = 'south'", False),
    ("a key loses its row", "DELETE FROM wh WHERE w_id = 3", False),
    (
        "the outer row moves to a key with a NULL name",
        "UPDATE numbers SET n = 4 WHERE n = 2",
        False,
    ),
]


def test_a_lookup_is_maintained_and_fails_where_spark_fails(
    spark, tmp_project: MakeProject
) -> None:
    project = Project.open(
        tmp_project({"views/v.sql": views_file(LOOKUPS), "ivm.yaml": INCREMENTAL_ONLY}),
        spark=spark,
    )
    for statement in (
        "CREATE TABLE wh (w_id INT, w_name STRING) USING DELTA",
        "CREATE TABLE numbers (n INT) USING DELTA",
        "INSERT INTO wh VALUES (1, 'north'), (2, 'west'), (3, 'up'), (4, NULL)",
        "INSERT INTO numbers VALUES (1), (2), (2), (3), (5)",
    ):
        project.sql(statement)
    assert {r.action for r in project.refresh()} == {"created"}
    for step, statement, fails in STEPS:
        project.sql(statement)
        reports = project.refresh()
        assert {r.action for r in reports} <= {"incremental", "unchanged"}, step
        if fails:
            queries = [f"SELECT * FROM {spec.name}" for spec in LOOKUPS]
            for query in queries + [spec.select for spec in LOOKUPS]:
                with pytest.raises(SqlError, match=TOO_MANY_ROWS):
                    project.sql(query)
        else:
            failures = compare_views(spark, project.database, LOOKUPS, step)
            assert not failures, "\n\n".join(failures)
    names = dict(project.sql("SELECT n, wh_name FROM named WHERE n IS NOT NULL").rows)
    assert names == {1: "east", 4: None, 3: None, 5: None, 7: None}
