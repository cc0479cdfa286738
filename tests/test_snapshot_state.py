"""The snapshot state a refresh has computed beside it (``physical.snapshot_state``): the tables
it asks for are the ones it then commits to other than by an append (``storage.appends``),
in the order it reaches them, none when nothing changed, and none of the stages a view
written in one statement leaves behind (``physical.one_statement``). The server's, between
commands (``host.WarmSnapshots``), leaves out the same appended tables."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from unittest import mock

from oracle import INCREMENTAL_ONLY, ViewSpec, views_file
from test_one_statement import CHANGES, latest_versions, opened, recomputed_by_choice

from ivm_sql import host
from ivm_sql.physical import batches, snapshot_state
from ivm_sql.project import Project
from ivm_sql.runtime import refresh
from ivm_sql.storage import refresh_log

LINES = ViewSpec(
    "lines", "SELECT o.id, o.qty, c.country FROM orders o JOIN customers c ON o.customer_id = c.id"
)
BY_COUNTRY = ViewSpec(
    "by_country", "SELECT country, SUM(qty) AS q FROM lines GROUP BY country", reads=("lines",)
)
# a view over BY_COUNTRY: its aggregate, read by a view, is MERGEd, not appended to
BUSY = ViewSpec(
    "busy_country_names", "SELECT country FROM by_country WHERE q > 1", reads=("by_country",)
)
COUNTRIES = ViewSpec("countries", "SELECT country, COUNT(*) AS n FROM customers GROUP BY country")


@contextlib.contextmanager
def asked_for() -> Iterator[list[list[str]]]:
    """Inside, each refresh's ``SnapshotStates`` records the tables it is asked for, in order,
    as one list per refresh, and computes their states."""
    asked: list[list[str]] = []

    class Recording(snapshot_state.SnapshotStates):
        def __init__(self, spark):
            super().__init__(spark)
            asked.append([])
            self._mine = asked[-1]

        def want(self, *tables: str) -> None:
            self._mine.extend(t for t in dict.fromkeys(tables) if t not in self._mine)
            super().want(*tables)

    with mock.patch.object(refresh, "SnapshotStates", Recording):
        yield asked


def test_states_asked_for_are_the_tables_committed_to(spark, tmp_project) -> None:
    project = Project.open(
        tmp_project(
            {
                "views/v.sql": views_file([LINES, BY_COUNTRY, BUSY, COUNTRIES]),
                "ivm.yaml": INCREMENTAL_ONLY,
            }
        ),
        spark=spark,
    )
    for statement in (
        "CREATE TABLE orders (id INT, customer_id INT, qty INT) USING DELTA",
        "CREATE TABLE customers (id INT, country STRING) USING DELTA",
        "INSERT INTO orders VALUES (1, 1, 2), (2, 2, 3)",
        "INSERT INTO customers VALUES (1, 'DE'), (2, 'FR')",
    ):
        project.sql(statement)
    project.refresh()
    log = project.delta_log()
    tables = [s.table for p in project.plans(log=log) for s in p.stages]
    events = refresh_log.table_in(project.database)
    with asked_for() as asked:
        project.refresh()  # nothing changed: no table, no job beside the refresh
        project.sql("INSERT INTO orders VALUES (3, 1, 5)")
        before = {t: project.delta_log().latest_version(t) for t in [*tables, events]}
        project.refresh()
    after = {t: project.delta_log().latest_version(t) for t in before}
    committed = [t for t in tables if after[t] > before[t]]
    log = project.delta_log()
    appended = [t for t in committed if batches.is_append(log.commit(t, after[t]))]
    assert asked[0] == [], asked
    # the views over orders, in the order they are refreshed; not the tables a batch is
    # appended to, nor the event log, whose appends read no state (``storage.appends``)
    assert appended and len(appended) < len(committed), (appended, committed)
    assert asked[1] == [t for t in committed if t not in appended], (asked, before, after)
    assert after[events] > before[events]
    assert not any(t.endswith("countries") for t in committed), committed
    # the server, after the command: the states of the MERGEd tables, none of the appended
    computed: list[str] = []

    def recording(spark_, table: str) -> None:
        computed.append(table)
        compute_state(spark_, table)

    compute_state = host.compute_state
    with mock.patch.object(host, "compute_state", recording):
        snapshots = host.WarmSnapshots(spark)
        snapshots.warm(project.written_versions, project.stateless_tables)
        snapshots.wait()
    assert events in project.written_versions and events not in computed, computed
    assert set(asked[1]) <= set(computed), (computed, asked)
    assert not set(appended) & set(computed), (computed, appended)


def test_the_stages_a_view_written_at_once_leaves_behind_are_not_asked_for(
    spark, tmp_project
) -> None:
    """A recompute chosen at a view's lowest stage writes the view's table in one statement
    and commits to none of the stages below it: their states are not computed beside the
    refresh, the view's table's is."""
    project = opened(spark, tmp_project)
    project.refresh()
    (plan,) = project.plans(["top_countries"])
    lowest, top = plan.stages[0].table, plan.stages[-1].table
    before = latest_versions(project)
    for statement in CHANGES[0]:
        project.sql(statement)
    with asked_for() as asked, recomputed_by_choice(lowest):
        project.refresh()
    after = latest_versions(project)
    behind = [s.table for s in plan.stages[:-1]]
    assert all(after[t.split(".")[-1]] == before[t.split(".")[-1]] for t in behind), (before, after)
    assert after[top.split(".")[-1]] > before[top.split(".")[-1]], (before, after)
    (refreshed,) = asked
    assert top in refreshed, refreshed
    assert not set(behind) & set(refreshed), (behind, refreshed)
