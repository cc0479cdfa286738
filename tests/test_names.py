"""Awkward names: what Spark and Delta accept in a user's own tables works in views too.

Delta refuses a column name holding a space, tab, newline or any of ``,;{}()=`` unless the table has column
mapping, so a user whose base table has such names enabled it; ivm's own tables get it
exactly where a view's columns have such names. Unicode, dots and quoted reserved words need
nothing. (A backtick in a column name is refused: Delta's change data feed cannot write it,
see tests/test_bad_input.py.) One project, real Spark and Delta: a base table with such names (read
through its change data feed), views with such output names (a bag, a DISTINCT, an
aggregate over a view), refreshed, changed by inserts, updates and deletes, refreshed again
and compared with their SELECT.
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
    # a bag whose columns Delta refuses without column mapping, and ones it accepts as they are
    ViewSpec(
        "rows",
        "SELECT k, `a col` AS `x y`, `ü` AS `naïve`, `a.b` AS `q.b`, `select` AS `from`, "
        "k * 2 AS `(k=2)` FROM odd WHERE k > 1",
    ),
    # a quoted reserved word as the view's name
    ViewSpec("`select`", "SELECT DISTINCT `a.b` AS `a;b`, `ü` % 20 AS `tab\tname` FROM odd"),
    # a view over a view, grouped by an awkward column: reads the other view's table through
    # its change data feed; its own table keeps ivm's names for the groups
    ViewSpec(
        "over",
        "SELECT `x y`, COUNT(*) AS `n,1`, SUM(`from`) AS `total from` FROM `rows` GROUP BY `x y`",
        reads=("rows",),
    ),
]

NAMES = [spec.name.strip("`") for spec in SPECS]

CHANGES = [
    "INSERT INTO odd VALUES (5, 'z z', 50, 'r', 500), (6, 'x', 60, 'p', 600)",
    "UPDATE odd SET `a col` = 'y', `select` = 222 WHERE k = 2",
    "DELETE FROM odd WHERE k = 3",
]


def test_awkward_names_refresh_incrementally_and_match_their_select(
    spark, tmp_project: MakeProject
) -> None:
    project = Project.open(
        tmp_project({"migrations/0001_odd.sql": BASE, "views/odd.sql": views_file(SPECS)}),
        spark=spark,
    )
    project.migrate()
    created = project.refresh()
    assert {r.action for r in created} == {"created"}
    # a mapped table's feed is turned on in a commit after its load: the load's rows still count
    assert all(r.rows_out > 0 for r in created), [(r.view, r.rows_out) for r in created]
    assert mapped_with_change_feed(spark, project.database) == {
        "rows": True,
        "select": True,
        "over": False,
    }

    for statement in CHANGES:
        project.sql(statement)
    reports = project.refresh()
    assert {r.view.split(".")[-1]: r.action for r in reports} == dict.fromkeys(NAMES, "incremental")
    assert not compare_views(spark, project.database, SPECS, "after changes")
    assert [result.ok for result in project.verify(["over"])] == [True]  # its SELECT inlines rows'

    # a recompute replaces a mapped table with its feed off (Delta refuses to turn mapping on
    # in a commit that writes files while the feed is on), then turns the feed back on
    assert {r.action for r in project.refresh(full=True)} == {"recomputed"}
    assert mapped_with_change_feed(spark, project.database) == {
        "rows": True,
        "select": True,
        "over": False,
    }


def mapped_with_change_feed(spark, database: str) -> dict[str, bool]:
    """Per view: whether its table has column mapping; every table must have its change feed on."""
    mapped = {}
    for name in NAMES:
        properties = dict(
            tuple(row) for row in spark.sql(f"SHOW TBLPROPERTIES {database}.__ivm_{name}").collect()
        )
        assert properties["delta.enableChangeDataFeed"] == "true", name
        mapped[name] = properties.get("delta.columnMapping.mode") == "name"
    return mapped
