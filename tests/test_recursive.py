"""Recursive views under the differential oracle: random graphs with cycles, self-loops,
duplicate and NULL edges, and a hierarchy, changed by random inserts, updates and deletes
(deletes that split components included) and churn (edges and parents that come and go,
a table emptied and refilled) over several refreshes; after each, every view
must equal its SELECT evaluated by Spark's own WITH RECURSIVE at the same versions."""

from __future__ import annotations

import random

import pytest
from oracle import (
    INCREMENTAL_ONLY,
    SEEDS,
    Churn,
    ChurnTable,
    MakeProject,
    ViewSpec,
    churned,
    compare_views,
    values_clause,
    views_file,
)

from ivm_sql.errors import IvmError, RefreshError
from ivm_sql.incremental.fixpoint import LIMIT_SETTING
from ivm_sql.project import Project

TABLES = """
CREATE TABLE edges (src INT, dst INT, weight INT) USING DELTA;
CREATE TABLE tree (id INT, parent INT) USING DELTA;
"""

SPECS = [
    # every path of up to 3 hops, with multiplicities: one row per derivation, as Spark's
    ViewSpec(
        "paths",
        """WITH RECURSIVE r(a, b, hops, cost) AS (
  SELECT src, dst, 1, weight FROM edges
  UNION ALL
  SELECT r.a, e.dst, r.hops + 1, r.cost + e.weight FROM r JOIN edges e ON r.b = e.src WHERE r.hops < 3
) SELECT a, b, hops, cost FROM r""",
    ),
    # transitive closure within 3 hops, over the recursive view
    ViewSpec("reachable", "SELECT DISTINCT a, b FROM paths WHERE a IS NOT NULL", reads=("paths",)),
    # shortest hop count and cheapest cost with a depth bound, over the recursive view
    ViewSpec(
        "shortest",
        "SELECT a, b, MIN(hops) AS hops, MIN(cost) AS cost FROM paths GROUP BY a, b",
        reads=("paths",),
    ),
    # ancestors in a hierarchy (parents have smaller ids, so no cycle): no bound needed
    ViewSpec(
        "ancestors",
        """WITH RECURSIVE up AS (
  SELECT id, parent AS ancestor, 1 AS depth FROM tree WHERE parent IS NOT NULL
  UNION ALL
  SELECT up.id, t.parent, up.depth + 1 FROM up JOIN tree t ON up.ancestor = t.id WHERE t.parent IS NOT NULL
) SELECT id, ancestor, depth FROM up""",
    ),
    # a view over a recursive view
    ViewSpec(
        "reach_counts", "SELECT a, COUNT(*) AS n FROM reachable GROUP BY a", reads=("reachable",)
    ),
]
NODES = [1, 2, 3, 4, 5, 6]


def random_edges(rng: random.Random, count: int) -> list[tuple]:
    """Edges between a few nodes: cycles, self-loops and duplicates come by themselves."""
    edges = [(rng.choice(NODES), rng.choice(NODES), rng.randint(1, 5)) for _ in range(count)]
    if rng.random() < 0.3:
        edges.append((None, rng.choice(NODES), 1))
    return edges + edges[:1]  # an exact duplicate


def random_tree(rng: random.Random, count: int) -> list[tuple]:
    return [
        (node, rng.choice([None, *range(1, node)]) if node > 1 else None)
        for node in rng.sample(range(1, 12), count)
    ]


def churn(rng: random.Random) -> Churn:
    """Edges between new nodes 7 and 8 come and go; edges and parents move to node 99 and back."""
    return Churn(
        rng,
        [
            ChurnTable(
                "edges",
                ("src", "dst", "weight"),
                (7, 8, 9),
                lambda: (rng.choice([7, 8]), rng.choice([*NODES, 7, 8]), rng.randint(1, 5)),
                {"src": 99, "dst": 99},
            ),
            ChurnTable(
                "tree",
                ("id", "parent"),
                (12, 11),
                lambda: (rng.choice([12, 13]), rng.choice([None, 1, 2, 11])),
                {"parent": 99},
                allows=lambda row: row[1] is None or row[1] < row[0],
            ),  # no cycle: ancestors has no bound
        ],
    )


def changes(rng: random.Random) -> list[str]:
    statements = [
        f"INSERT INTO edges VALUES {values_clause(random_edges(rng, rng.randint(1, 3)))}",
        f"DELETE FROM edges WHERE src = {rng.choice(NODES)} AND dst = {rng.choice(NODES)}",  # splits a component, perhaps
        f"DELETE FROM edges WHERE src = {rng.choice(NODES)}",
        f"UPDATE edges SET dst = {rng.choice(NODES)} WHERE src = {rng.choice(NODES)}",
        f"UPDATE edges SET weight = weight + 1 WHERE dst = {rng.choice(NODES)}",
        f"INSERT INTO tree VALUES {values_clause(random_tree(rng, 2))}",
        f"DELETE FROM tree WHERE id = {rng.randint(2, 11)}",  # a subtree loses its ancestors
        f"UPDATE tree SET parent = {rng.randint(1, 3)} WHERE id > 4 AND id % {rng.randint(2, 3)} = 0",  # a subtree moves
    ]
    return rng.sample(statements, rng.randint(3, 5))


@pytest.mark.parametrize("seed", SEEDS)
def test_recursive_views_equal_spark_recursion_after_random_changes(
    spark, tmp_project: MakeProject, seed: int
) -> None:
    rng = random.Random(seed)
    project = Project.open(
        tmp_project(
            {
                "migrations/0001_graph.sql": TABLES,
                "ivm.yaml": INCREMENTAL_ONLY,
                "views/graph.sql": views_file(SPECS),
            }
        ),
        spark=spark,
    )
    project.migrate()
    project.sql(f"INSERT INTO edges VALUES {values_clause(random_edges(rng, 8))}")
    project.sql(f"INSERT INTO tree VALUES {values_clause(random_tree(rng, 9))}")
    strategies = {plan.view.name: [s.kind for s in plan.stages] for plan in project.plans()}
    assert strategies["paths"] == strategies["ancestors"] == ["fixpoint"]
    reports = project.refresh()
    assert all(
        "fixed point in" in r.reason
        for r in reports
        if r.view.split(".")[-1] in ("paths", "ancestors")
    )
    assert not compare_views(spark, project.database, SPECS, "first refresh")
    churning = churn(rng)
    for round_ in range(1, 4):
        current = {t: project.sql(f"SELECT * FROM {t}").rows for t in ("edges", "tree")}
        statements = churned(rng, churning, current, changes(rng) if round_ < 3 else [])
        if round_ == 3:
            statements += ["DELETE FROM edges", "DELETE FROM tree WHERE parent IS NOT NULL"]
        for statement in statements:
            project.sql(statement)
        reports = {r.view.split(".")[-1]: r for r in project.refresh()}
        label = f"seed {seed}, round {round_}\n  changes:\n    " + ";\n    ".join(statements)
        assert all(r.action in ("incremental", "unchanged") for r in reports.values()), (
            label,
            {v: r.strategy for v, r in reports.items()},
        )
        failures = compare_views(spark, project.database, SPECS, label)
        assert not failures, "\n\n".join(failures)
    assert all(r.ok for r in project.verify())


def test_recursion_without_a_fixed_point_stops_with_one_error(
    spark, tmp_project: MakeProject
) -> None:
    """A cycle the recursive term does not bound: Spark's WITH RECURSIVE fails too. The
    refresh stops at the recursion limit, says what to do, and leaves no table behind."""
    spec = ViewSpec(
        "loop",
        """WITH RECURSIVE r AS (
  SELECT src, dst FROM edges UNION ALL SELECT r.src, e.dst FROM r JOIN edges e ON r.dst = e.src
) SELECT src, dst FROM r""",
    )
    project = Project.open(
        tmp_project({"migrations/0001_graph.sql": TABLES, "views/v.sql": views_file([spec])}),
        spark=spark,
    )
    project.migrate()
    project.sql("INSERT INTO edges VALUES (1, 2, 1), (2, 3, 1)")
    (report,) = project.refresh()
    assert report.reason == "new; fixed point in 2 iterations"
    project.sql("INSERT INTO edges VALUES (3, 1, 1)")  # now a cycle
    spark.conf.set(LIMIT_SETTING, "12")
    try:
        with pytest.raises(
            RefreshError, match=r"did not reach a fixed point in 12 iterations.*Bound the depth"
        ):
            project.refresh()
    finally:
        spark.conf.unset(LIMIT_SETTING)
    assert project.sql("SELECT COUNT(*) FROM loop").rows == [(3,)]  # as the last refresh left it


def test_recursion_over_no_table_is_loaded_once_or_stops_with_one_error(
    spark, tmp_project: MakeProject
) -> None:
    """A recursive view that reads no table is a constant: loaded by its first refresh, never
    changed after. One without a bound fails as Spark's WITH RECURSIVE does, with one error."""
    bounded = ViewSpec(
        "counted",
        "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 5) SELECT n FROM r",
    )
    project = Project.open(
        tmp_project({"migrations/0001_graph.sql": TABLES, "views/v.sql": views_file([bounded])}),
        spark=spark,
    )
    project.migrate()
    (report,) = project.refresh()
    assert report.action == "created" and project.sql("SELECT SUM(n) FROM counted").rows == [(15,)]
    (again,) = project.refresh()
    assert again.action == "unchanged"

    endless = ViewSpec(
        "endless", "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT n FROM r"
    )
    (project.root / "views" / "v.sql").write_text(views_file([bounded, endless]))
    spark.conf.set(LIMIT_SETTING, "12")
    try:
        with pytest.raises(IvmError) as raised:
            Project.open(project.root, spark=spark).refresh()
    finally:
        spark.conf.unset(LIMIT_SETTING)
    assert "endless" in str(raised.value)
