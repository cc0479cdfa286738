"""Awkward names: what Spark and Delta accept in a user's own tables works in views too.

Delta refuses a column name holding any of `` ,;{}()\\n\\t=`` unless the table has column
mapping, so a user whose base table has such names enabled it; ivm's own tables get it
exactly where a view's columns have such names. Unicode, dots and quoted reserved words need
nothing. (A backtick in a column name is refused: Delta's change data feed cannot write it,
see tests/test_bad_input.py.) One project, real Spark and Delta: a base table with such names (read
through its change data feed), views with such output names (a bag, an aggregate, a
DISTINCT, a view over a view), refreshed, changed by inserts, updates and deletes,
refreshed again and compared with their SELECT.
"""

from __future__ import annotations

from oracle import MakeProject, ViewSpec, compare_views, views_file

from ivm_sql.project import Project

BASE = """\
CREATE TABLE odd (k INT, `a col` STRING, `ü` INT, `a.b` STRING, `select` INT)
USING DELTA TBLPROPERTIES ('delta.columnMapping.mode' = 'name');
INSERT INTO odd VALUES (1, 'x', 10, 'p', 100), (2, 'x', 20, 'q', NULL), (3, 'y', 30, NULL, 300), (4, NULL, 10, 'p', 400);
"""

SPECS = [
    # a bag whose columns Delta refuses without column mapping, and ones it accepts
    ViewSpec("rows", "SELECT k, `a col` AS `x y`, `ü` AS `naïve`, `a.b` AS `q.b`, `select` AS `from`, "
                     "k * 2 AS `(k=2)` FROM odd WHERE k > 1"),
    # an aggregate grouped by an awkward column: its state table keeps internal names
    ViewSpec("totals", "SELECT `a col` AS `the group`, COUNT(*) AS `n,1`, SUM(`ü`) AS `sum(ü)` FROM odd GROUP BY `a col`"),
    ViewSpec("kinds", "SELECT DISTINCT `a.b` AS `a;b`, `ü` % 20 AS `tab\tname` FROM odd"),
    # a view over a view: reads the other view's state table through its change data feed
    ViewSpec("over", "SELECT `x y`, SUM(`from`) AS `total from` FROM `rows` WHERE `from` IS NOT NULL GROUP BY `x y`",
             reads=("rows",)),
]

CHANGES = [
    "INSERT INTO odd VALUES (5, 'z z', 50, 'r', 500), (6, 'x', 60, 'p', 600)",
    "UPDATE odd SET `a col` = 'y', `select` = 222 WHERE k = 2",
    "DELETE FROM odd WHERE k = 3",
]


def test_awkward_names_refresh_incrementally_and_match_their_select(spark, tmp_project: MakeProject) -> None:
    project = Project.open(tmp_project({"migrations/0001_odd.sql": BASE, "views/odd.sql": views_file(SPECS)}), spark=spark)
    project.migrate()
    assert {r.action for r in project.refresh()} == {"created"}
    assert not compare_views(spark, project.database, SPECS, "first refresh")

    for statement in CHANGES:
        project.sql(statement)
    reports = project.refresh()
    assert {r.view.split(".")[-1]: r.action for r in reports} == {s.name: "incremental" for s in SPECS}
    assert not compare_views(spark, project.database, SPECS, "after changes")
    assert all(result.ok for result in project.verify())
