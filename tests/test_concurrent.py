"""Two refreshes of the same views at the same time, from two threads sharing one Spark
session: neither loses nor doubles a change (``storage.concurrent``)."""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from oracle import (
    INCREMENTAL_ONLY,
    MIGRATION,
    RandomChanges,
    ViewSpec,
    compare_views,
    values_clause,
    views_file,
)

from ivm_sql.project import Project
from ivm_sql.runtime.refresh import ViewReport
from ivm_sql.storage import concurrent, delta_log

MakeProject = Callable[[dict[str, str]], Path]

PAIRS = 20
# a join (three stages: its integral below the bag of rows) and an aggregate over it
LINES = ViewSpec(
    "lines", "SELECT o.id, o.qty, c.country FROM orders o JOIN customers c ON o.customer_id = c.id"
)
BY_COUNTRY = ViewSpec(
    "by_country",
    "SELECT country, COUNT(*) AS n, SUM(qty) AS q FROM lines GROUP BY country",
    reads=("lines",),
)
SPECS = [LINES, BY_COUNTRY]


def some_change(changes: RandomChanges, rng: random.Random) -> str:
    """An insert holding a duplicate (rows with NULLs now and then), or an update or delete."""
    if rng.random() < 0.5:
        table, make = rng.choice([("orders", changes.order), ("customers", changes.customer)])
        rows = [make() for _ in range(rng.randint(1, 3))]
        return f"INSERT INTO {table} VALUES {values_clause([*rows, rows[0]])}"
    return rng.choice([changes.update_orders, changes.update_customers, changes.delete_some])()


def refresh_pair(projects: tuple[Project, Project], late: list[str]) -> list[list[ViewReport]]:
    """Both projects refresh at once; the second runs ``late`` first, so it pins newer
    versions than the first. Each thread's reports; an error either raised is raised here."""
    start = threading.Barrier(2)
    results: list = [None, None]

    def run(index: int) -> None:
        try:
            start.wait()
            for statement in late if index else ():
                projects[index].sql(statement)
            results[index] = projects[index].refresh()
        except Exception as error:  # handed to the test thread
            results[index] = error

    threads = [threading.Thread(target=run, args=(i,)) for i in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for result in results:
        if isinstance(result, Exception):
            raise result
    return results


def test_concurrent_refreshes_neither_lose_nor_double_a_change(
    spark, tmp_project: MakeProject
) -> None:
    root = tmp_project(
        {
            "migrations/0001_tables.sql": MIGRATION,
            "views/views.sql": views_file(SPECS),
            "ivm.yaml": INCREMENTAL_ONLY,
        }
    )
    projects = (Project.open(root, spark=spark), Project.open(root, spark=spark))
    projects[0].migrate()
    rng = random.Random(12)
    changes = RandomChanges(rng)
    for statement in changes.initial():
        projects[0].sql(statement)
    seen: Counter = Counter()
    for pair in range(PAIRS):  # the first pair creates the views' tables
        started = time.perf_counter()
        if pair:
            projects[0].sql(some_change(changes, rng))
        late = [some_change(changes, rng)] if pair % 2 else []
        for reports in refresh_pair(projects, late):
            seen.update(r.action for r in reports)
        if (
            pair % 5 == 4
        ):  # a doubled or lost change stays in a view: comparing now and then finds it
            failures = compare_views(spark, projects[0].database, SPECS, f"after pair {pair}")
            assert not failures, "\n\n".join(failures)
        print(f"  pair {pair}: {time.perf_counter() - started:.1f}s", flush=True)
    print(f"  actions over {PAIRS} pairs: {dict(seen)}")
    assert seen["incremental"] and seen["unchanged"]  # in some pairs one did the work, in some both


def test_a_refresh_commits_its_event_log_append_in_its_own_session(
    spark, tmp_project: MakeProject, monkeypatch
) -> None:
    """The commit record and txn version are session settings: a refresh that set them on the
    session it shares with another refresh's thread would unset the other's mid-commit
    (DELTA_INVALID_IDEMPOTENT_WRITES_OPTIONS, seen once in CI). Every commit of a refresh,
    its event log append included, is made in the refresh's own session."""
    root = tmp_project(
        {
            "migrations/0001_tables.sql": MIGRATION,
            "views/views.sql": views_file(SPECS),
            "ivm.yaml": INCREMENTAL_ONLY,
        }
    )
    project = Project.open(root, spark=spark)
    project.migrate()
    for statement in RandomChanges(random.Random(3)).initial():
        project.sql(statement)
    sessions: list = []
    commit_record = delta_log.commit_record

    def noted(session, *args, **kwargs):
        sessions.append(session)
        return commit_record(session, *args, **kwargs)

    monkeypatch.setattr(delta_log, "commit_record", noted)
    project.refresh()
    assert sessions, "the refresh committed nothing"
    shared = [s for s in sessions if getattr(s, "_spark", s) is project.spark]
    assert not shared, f"{len(shared)} of {len(sessions)} commits used the project's session"


def test_a_refreshs_own_session_starts_as_its_parents_and_is_independent_from_then_on(
    spark,
) -> None:
    """``own_session`` gives a refresh (or a worker) what its parent session has: a setting
    made on it since the start, its current database, its temporary views; what either
    sets afterwards stays its own."""
    parent = spark.newSession()
    parent.sql("CREATE DATABASE IF NOT EXISTS own_session_db")
    parent.catalog.setCurrentDatabase("own_session_db")
    parent.conf.set("spark.sql.cteRecursionLevelLimit", "123")
    parent.range(3).createOrReplaceTempView("parents_view")
    try:
        own = concurrent.own_session(parent)
        assert own is not parent
        assert own.conf.get("spark.sql.cteRecursionLevelLimit") == "123"
        assert own.catalog.currentDatabase() == "own_session_db"
        assert own.sql("SELECT count(*) FROM parents_view").collect()[0][0] == 3
        own.conf.set("spark.sql.cteRecursionLevelLimit", "7")
        own.range(1).createOrReplaceTempView("owns_view")
        parent.conf.set(delta_log.USER_METADATA, "the parent's")
        assert parent.conf.get("spark.sql.cteRecursionLevelLimit") == "123"
        assert not parent.catalog.tableExists("owns_view")
        assert own.conf.get(delta_log.USER_METADATA, None) is None
    finally:
        parent.sql("DROP DATABASE own_session_db CASCADE")
