"""What a refresh's decisions weigh (``physical.sizes``): rows and bytes from Delta's
checksum files, without a Spark job, equal to what Spark counts."""

from __future__ import annotations

from pathlib import Path

import pytest
from jobs import job_group

from ivm_sql.physical.sizes import TableSizes
from ivm_sql.storage.delta_log import DeltaLog

TABLE = "sizes_test.t"


def run(action, table):
    return action()


@pytest.fixture
def churned(spark):
    """A table with inserts, an update and deletes, deletion vectors on: rows that a file's
    numRecords still counts."""
    spark.sql("CREATE DATABASE IF NOT EXISTS sizes_test")
    spark.sql(
        f"CREATE OR REPLACE TABLE {TABLE} (k INT, v STRING) USING DELTA TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')"
    )
    spark.sql(f"INSERT INTO {TABLE} SELECT CAST(id AS INT), concat('v', id) FROM range(0, 1000)")
    spark.sql(f"INSERT INTO {TABLE} VALUES (NULL, 'n'), (1, 'again')")
    spark.sql(f"DELETE FROM {TABLE} WHERE k BETWEEN 10 AND 19")
    spark.sql(f"UPDATE {TABLE} SET v = 'u' WHERE k = 500")
    yield spark.sql(f"DESCRIBE HISTORY {TABLE}").first()["version"]
    spark.sql("DROP DATABASE sizes_test CASCADE")


def test_rows_come_from_the_checksum_file_without_a_job(spark, churned) -> None:
    counted = [
        spark.sql(f"SELECT count(*) FROM {TABLE} VERSION AS OF {v}").first()[0]
        for v in range(1, churned + 1)
    ]
    sizes = TableSizes(spark, DeltaLog(spark), run)
    with job_group(spark, "sizes-probe") as jobs:
        rows = [sizes.rows(TABLE, v) for v in range(1, churned + 1)]
    assert rows == counted == [1000, 1002, 992, 992]
    assert jobs("sizes-probe") == []


def test_rows_without_a_checksum_file_are_counted_by_spark(spark, churned) -> None:
    location = spark.sql(f"DESCRIBE DETAIL {TABLE}").first()["location"].removeprefix("file:")
    Path(location, "_delta_log", f"{churned:020d}.crc").unlink()
    log = DeltaLog(spark)
    assert log.row_count(TABLE, churned) is None
    assert TableSizes(spark, log, run).rows(TABLE, churned) == 992
