"""Small-data execution: the sizes it is decided from, and the settings it leaves behind.

That both ways give the same view is the differential oracle's job: it refreshes its views
interpreted in some rounds and compiled in others (tests/oracle.py).
"""

from __future__ import annotations

import uuid
from unittest import mock

import sqlglot

from ivm_sql import project as project_module
from ivm_sql.physical.execution import (
    SMALL_DATA,
    SMALL_DATA_SETTINGS,
    SMALL_RECOMPUTE,
    for_small_data,
    is_small,
    scanned_versions,
)
from ivm_sql.project import Project
from ivm_sql.runtime.refresh import Refresher
from ivm_sql.session import REFRESH_SETTINGS
from ivm_sql.storage.delta_log import DeltaLog


def test_small_only_when_every_size_is_known_and_the_sum_is_under_the_limit() -> None:
    assert is_small([1_000, 2_000])
    assert not is_small([SMALL_DATA // 2, SMALL_DATA // 2])
    assert not is_small([1_000, None])  # unknown: compiled, as Spark would by default
    assert is_small([])  # a stage that reads no table


def test_scanned_versions_are_the_whole_table_reads_not_the_change_feeds() -> None:
    query = sqlglot.parse_one(
        "SELECT * FROM table_changes('db.orders', 4, 6) AS d JOIN db.customers VERSION AS OF 3 AS c ON d.c = c.id"
        " UNION ALL SELECT * FROM db.orders VERSION AS OF 3 JOIN db.customers VERSION AS OF 3 ON true",
        read="spark",
    )
    assert scanned_versions(query) == [("db.customers", 3), ("db.orders", 3)]


def test_a_recompute_has_a_lower_limit_than_a_change() -> None:
    size = (SMALL_RECOMPUTE + SMALL_DATA) // 2
    assert is_small([size]) and not is_small([size], recompute=True)
    assert is_small([SMALL_RECOMPUTE - 1], recompute=True)


def test_small_data_settings_hold_inside_and_the_sessions_own_come_back(spark) -> None:
    spark.conf.set("spark.sql.codegen.wholeStage", "true")  # as a user's ivm.yaml might
    spark.conf.unset("spark.sql.codegen.factoryMode")
    partitions = spark.conf.get("spark.sql.shuffle.partitions")
    try:
        with for_small_data(spark):
            assert {key: spark.conf.get(key) for key in SMALL_DATA_SETTINGS} == SMALL_DATA_SETTINGS
            assert spark.sql("SELECT sum(id * 2) FROM range(10)").first()[0] == 90
        assert spark.conf.get("spark.sql.codegen.wholeStage") == "true"
        assert spark.conf.get("spark.sql.codegen.factoryMode", None) is None
        assert spark.conf.get("spark.sql.shuffle.partitions") == partitions
        with for_small_data(spark, enabled=False):
            assert spark.conf.get("spark.sql.codegen.factoryMode", None) is None
    finally:
        spark.conf.unset("spark.sql.codegen.wholeStage")


def test_table_size_comes_from_the_commits_checksum_file(spark, tmp_path) -> None:
    table = f"default.sizes_{uuid.uuid4().hex[:8]}"
    spark.sql(f"CREATE TABLE {table} (id INT, name STRING) USING DELTA LOCATION '{tmp_path / 't'}'")
    spark.sql(f"INSERT INTO {table} SELECT id, repeat('x', id) FROM range(100) AS r(id)")
    try:
        log = DeltaLog(spark)
        expected = spark.sql(f"DESCRIBE DETAIL {table}").first().sizeInBytes
        assert log.size_bytes(table, 1) == expected > 0
        assert log.size_bytes(table, 0) == 0  # created empty
        (tmp_path / "t" / "_delta_log" / f"{1:020d}.crc").unlink()
        assert DeltaLog(spark).size_bytes(table, 1) is None  # no checksum: size unknown
    finally:
        spark.sql(f"DROP TABLE {table}")


# a harmless setting no session of the run sets, standing in for REFRESH_SETTINGS' own (which
# the run's sessions all start with, as ivm started their JVM)
STAND_IN = "spark.sql.maxMetadataStringLength"


@mock.patch.dict(REFRESH_SETTINGS, {STAND_IN: "101"})
def test_a_refresh_in_a_users_own_session_has_ivms_refresh_settings_and_leaves_it_as_it_was(
    spark, tmp_project
) -> None:
    """``Project.open(spark=...)`` with a session that does not set REFRESH_SETTINGS (such as
    Delta's check of each commit against a replay of the log, off UTC): each refresh runs
    in a session of its own that has them; the user's session is left as it was, and a
    value it sets wins."""
    users = spark.newSession()
    project = Project.open(
        tmp_project(
            {
                "migrations/0001_t.sql": "CREATE TABLE t (k INT) USING DELTA;",
                "views/v.sql": "CREATE VIEW v AS SELECT k, count(*) AS n FROM t GROUP BY k;",
            }
        ),
        spark=users,
    )
    project.migrate()
    project.sql("INSERT INTO t VALUES (1), (1), (2)")
    sessions = []
    with mock.patch.object(project_module, "Refresher", side_effect=spy(sessions)):
        project.refresh()
    assert sessions[-1] is not users
    assert sessions[-1].conf.get(STAND_IN, None) == "101"
    assert users.conf.get(STAND_IN, None) is None
    users.conf.set(STAND_IN, "102")
    project.sql("INSERT INTO t VALUES (3)")
    with mock.patch.object(project_module, "Refresher", side_effect=spy(sessions)):
        project.refresh()
    assert sessions[-1].conf.get(STAND_IN) == "102"
    assert sorted(project.sql("SELECT k, n FROM v").rows) == [(1, 2), (2, 1), (3, 1)]


def spy(sessions: list):
    """A stand-in for ``Refresher`` that keeps the session it is given and builds the real one."""

    def build(session, **options):
        sessions.append(session)
        return Refresher(session, **options)

    return build
