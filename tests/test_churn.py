"""Churn: rows and keys that come and go between two refreshes, on real Spark and Delta.

A change data feed read across several commits holds both the arrival and the departure;
consolidated, they cancel. A stateful operator must then write nothing for that key: no
empty group, no zero-weight row. The oracles (``oracle.Churn``) run these
patterns in every round; this file keeps the reductions of bugs they found.
"""

from __future__ import annotations

import random
import sqlite3

import pytest
import sqlglot
import test_oracle
from oracle import (
    INCREMENTAL_ONLY,
    Churn,
    ChurnTable,
    MakeProject,
    RandomChanges,
    ViewSpec,
    compare_views,
    views_file,
)

from ivm_sql.project import Project

MM = ViewSpec(
    "mm", "SELECT cid, MIN(amount) AS mn, MAX(amount) AS mx, MAX(status) AS ms FROM o GROUP BY cid"
)


@pytest.mark.parametrize("amount", ["10.00", "NULL"])
def test_group_born_and_emptied_between_refreshes_leaves_no_phantom_row(
    spark, tmp_project: MakeProject, amount: str
) -> None:
    """Issue 21's reproduction: on e48d844 the MIN/MAX view kept ``(2, NULL, NULL, NULL)``,
    because the change query called a new count of 0 against no stored row a change and the
    MERGE inserted it."""
    project = Project.open(
        tmp_project({"views/mm.sql": views_file([MM]), "ivm.yaml": INCREMENTAL_ONLY}), spark=spark
    )
    project.sql(
        "CREATE TABLE o (oid INT, cid INT, amount DECIMAL(10,2), status STRING, qty INT) USING DELTA"
    )
    project.sql("INSERT INTO o VALUES (1, 1, 25.25, 'x', 1), (2, 3, 15.00, 'x', 2)")
    project.refresh()
    project.sql(f"INSERT INTO o VALUES (3, 2, {amount}, 'x', 3)")
    project.sql("DELETE FROM o WHERE oid = 3")
    reports = project.refresh()
    assert [r.action for r in reports] == ["incremental"]
    assert sorted(project.sql("SELECT cid FROM mm").rows) == [(1,), (3,)]
    state = project.sql(f"SELECT * FROM {project.database}.__ivm_mm").rows
    assert len(state) == 2, f"the state holds an empty group: {state}"
    assert not compare_views(spark, project.database, [MM], "after the churn")


def test_a_row_updated_twice_ends_as_its_table_allows() -> None:
    """Seed 13 of issue 21's long run: a tree row updated twice ended as (4, 4), a cycle
    that the unbounded ``ancestors`` cannot end on (Spark's own recursion fails there too).
    Churn must keep to what a table allows. The blocks run on SQLite: no Spark needed."""
    allows = lambda row: row[1] is None or row[1] < row[0]  # noqa: E731 - a parent below its child
    tree = [(1, None), (2, 1), (3, 1), (4, 2), (5, 4), (6, 3), (7, 5)]
    for seed in range(300):
        rng = random.Random(seed)
        churn = Churn(
            rng,
            [
                ChurnTable(
                    "tree", ("id", "parent"), (12, 11), lambda: (12, 11), {"parent": 99}, allows
                )
            ],
        )
        db = sqlite3.connect(":memory:")
        db.execute("CREATE TABLE tree (id INT, parent INT)")
        db.executemany("INSERT INTO tree VALUES (?, ?)", tree)
        for statement in churn.updated_twice({"tree": tree}):
            db.execute(sqlglot.transpile(statement, read="spark", write="sqlite")[0])
        assert all(allows(row) for row in db.execute("SELECT id, parent FROM tree")), f"seed {seed}"


def test_the_unlogged_rounds_move_changes_the_stages_over_countries_in_every_seed() -> None:
    """The view oracle's unlogged round relies on ``RandomChanges.moved_compatriot`` to
    change ``countries`` and ``compatriots`` (whose records kept beside must go stale), with
    or without two customers sharing a country. On SQLite: no Spark needed."""
    specs = {spec.name: spec for spec in [*test_oracle.LINEAR, *test_oracle.JOINS]}
    queries = [
        sqlglot.transpile(specs[name].select, read="spark", write="sqlite")[0]
        for name in ("countries", "compatriots")
    ]
    alone = [(1, "ann", "DE", 3), (2, "bob", "FR", 5), (3, None, None, 7), (None, "Cy", "US", 0)]
    shared = [*alone, (4, "dee", "DE", 9), (5, "", "DE", None)]
    for customers in (alone, shared, []):
        for seed in range(50):
            db = sqlite3.connect(":memory:")
            db.execute("CREATE TABLE customers (id INT, name TEXT, country TEXT, score INT)")
            db.executemany("INSERT INTO customers VALUES (?, ?, ?, ?)", customers)
            before = [sorted(db.execute(q).fetchall(), key=repr) for q in queries]
            moves = RandomChanges(random.Random(seed)).moved_compatriot({"customers": customers})
            for statement in moves:
                db.execute(sqlglot.transpile(statement, read="spark", write="sqlite")[0])
            after = [sorted(db.execute(q).fetchall(), key=repr) for q in queries]
            unchanged = [q for q, old, new in zip(queries, before, after) if old == new]
            assert not unchanged, f"{len(customers)} customers, seed {seed}: {unchanged} unchanged"
