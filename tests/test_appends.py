"""Appends and record-only commits through Delta's transaction API (``storage.appends``):
the compare-and-swap of ``storage.concurrent`` without the transaction id's state
computation. The differential oracles refresh every trace through it; here, its two
guarantees, each against a real Delta table."""

from __future__ import annotations

import pytest
from py4j.protocol import Py4JJavaError
from pyspark.errors import PySparkException
from sqlglot import parse_one

from ivm_sql.sqlbuild import insert_columns, to_sql
from ivm_sql.storage import appends, concurrent
from ivm_sql.storage.delta_log import DeltaLog, commit_record

ROWS = "SELECT k, CAST(1 AS BIGINT) AS w FROM VALUES (1), (2) AS v(k)"


@pytest.fixture
def trace(spark):
    """A table as a trace of batches, its version 1 a commit of ivm's (record "a")."""
    spark.sql("CREATE DATABASE IF NOT EXISTS appends")
    spark.sql("DROP TABLE IF EXISTS appends.t")
    spark.sql("CREATE TABLE appends.t (k BIGINT, w BIGINT) USING DELTA")
    with commit_record(spark, {"r": "a"}, txn_version=1):
        spark.sql("INSERT INTO appends.t VALUES (0, 1)")
    yield "appends.t"
    spark.sql("DROP TABLE appends.t")


def append(spark, table: str, record: str, txn_version: int) -> None:
    statement = insert_columns(table, ("k", "w"), parse_one(ROWS, dialect="spark"))
    assert appends.applies(spark, statement)
    with commit_record(spark, {"r": record}, txn_version):
        appends.commit(spark, DeltaLog(spark), statement)


def rows(spark, table: str) -> list[tuple]:
    return sorted(tuple(r) for r in spark.sql(f"SELECT k, w FROM {table}").collect())


def test_an_append_lands_as_the_inserts_commit_would(spark, trace) -> None:
    log = DeltaLog(spark)
    append(spark, trace, "b", txn_version=2)  # follows record "a" at version 1
    assert rows(spark, trace) == [(0, 1), (1, 1), (2, 1)]
    landed = log.commit(trace, log.latest_version(trace))
    assert landed.record == {"ivm": 1, "r": "b"} and landed.operation == "WRITE"
    assert landed.rows_changed == 2
    # its rows are the change data feed's inserts, as an INSERT's are
    feed = spark.sql(
        f"SELECT k, _change_type FROM table_changes('{trace}', {landed.version}, {landed.version})"
    ).collect()
    assert sorted((r.k, r._change_type) for r in feed) == [(1, "insert"), (2, "insert")]
    # and it carries the transaction id, which a SQL statement of another refresh checks
    with commit_record(spark, {"r": "late"}, txn_version=2):
        spark.sql(to_sql(insert_columns(trace, ("k", "w"), parse_one(ROWS, dialect="spark"))))
    assert rows(spark, trace) == [(0, 1), (1, 1), (2, 1)], (
        "Delta did not skip the INSERT with the same id"
    )


def test_an_append_after_another_refreshs_commit_writes_nothing(spark, trace) -> None:
    """Two refreshes read record "a"; the second to commit finds the first's commit in the
    log and writes nothing, as Delta skips a write whose id it holds."""
    log = DeltaLog(spark)
    append(spark, trace, "b", txn_version=2)
    latest = log.latest_version(trace)
    append(spark, trace, "c", txn_version=2)
    assert log.latest_version(trace) == latest
    assert rows(spark, trace) == [(0, 1), (1, 1), (2, 1)]
    # a record-only commit that follows the same record writes nothing either
    with commit_record(spark, {"r": "d"}, txn_version=2):
        appends.record_only(spark, log, trace)
    assert log.latest_version(trace) == latest


def test_an_append_fails_as_a_conflict_when_a_commit_lands_during_it(
    spark, trace, monkeypatch
) -> None:
    """A commit that lands after the transaction's snapshot, while its files are written,
    fails it: the append read the whole table."""
    written = appends._rows

    def with_a_commit_beside(spark_, statement, schema):
        spark.sql(f"INSERT INTO {trace} VALUES (9, 1)")  # another writer's blind append
        return written(spark_, statement, schema)

    monkeypatch.setattr(appends, "_rows", with_a_commit_beside)
    with pytest.raises((PySparkException, Py4JJavaError)) as raised:
        append(spark, trace, "b", txn_version=2)
    assert concurrent.is_conflict(raised.value)
    assert rows(spark, trace) == [(0, 1), (9, 1)]


def test_an_append_stores_its_rows_as_the_insert_would(spark) -> None:
    """Columns of other types are cast and a column the INSERT leaves out is NULL, in the
    table's types: the rows and schema equal what the same SQL INSERT stores."""
    spark.sql("CREATE DATABASE IF NOT EXISTS appends")
    columns = "k BIGINT, amount DECIMAL(10, 2), tags ARRAY<BIGINT>, note STRING"
    query = parse_one(
        "SELECT CAST(k AS INT) AS k, k * 1.25 AS amount, array(CAST(k AS INT)) AS tags "
        "FROM VALUES (1), (2), (NULL) AS v(k)",
        dialect="spark",
    )
    for name in ("by_api", "by_sql"):
        spark.sql(f"DROP TABLE IF EXISTS appends.{name}")
        spark.sql(f"CREATE TABLE appends.{name} ({columns}) USING DELTA")
    try:
        statement = insert_columns("appends.by_api", ("k", "amount", "tags"), query)
        assert appends.applies(spark, statement)
        appends.commit(spark, DeltaLog(spark), statement)
        spark.sql(to_sql(insert_columns("appends.by_sql", ("k", "amount", "tags"), query)))
        api, sql = (spark.table(f"appends.{name}") for name in ("by_api", "by_sql"))
        assert api.schema == sql.schema
        assert sorted(map(tuple, api.collect()), key=str) == sorted(
            map(tuple, sql.collect()), key=str
        )
        assert sorted(api.collect(), key=str)[0] == (1, 1.25, [1], None)
    finally:
        for name in ("by_api", "by_sql"):
            spark.sql(f"DROP TABLE appends.{name}")
