"""The snapshot state a refresh has computed beside it (``physical.snapshot_state``): the tables
it asks for are the ones it then commits to other than by an append (``storage.appends``),
in the order it reaches them, and none when nothing changed. The server's, between commands
(``host.WarmSnapshots``), leaves out the same appended tables."""

from __future__ import annotations

from unittest import mock

from oracle import INCREMENTAL_ONLY, ViewSpec, views_file

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


def test_will_commit_when_a_base_table_below_moved() -> None:
    record = {"sources": {"db.t": 3}, "base": {"db.t": 3, "db.u": 1}}
    assert not snapshot_state.will_commit(record, {"db.t": 3, "db.u": 1})
    assert snapshot_state.will_commit(record, {"db.t": 3, "db.u": 2})
    assert not snapshot_state.will_commit(record, {"db.t": 3})  # db.u not pinned: not read
    assert snapshot_state.will_commit({}, {"db.t": 3})  # no record: ivm's first commit follows


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
    asked: list[list[str]] = []

    class Recording(snapshot_state.SnapshotStates):
        def __init__(self, spark, tables):
            asked.append(list(tables))
            super().__init__(spark, asked[-1])

    log = project.delta_log()
    tables = [s.table for p in project.plans(log=log) for s in p.stages]
    events = refresh_log.table_in(project.database)
    with mock.patch.object(refresh, "SnapshotStates", Recording):
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
