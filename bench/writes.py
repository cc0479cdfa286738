"""What each Delta primitive a refresh could use costs on this machine, side by side.

For tables of several sizes, laid out as ivm lays out a bag stage (rows with a weight,
change data feed on, no deletion vectors), a change of --change rows (half add a weight to
stored rows, half are new rows) is written each way in turn, --repeats times after one
warm-up round; the medians are printed. Every statement runs with the settings a refresh
would give it (``physical.execution``), and every write carries a transaction id as
ivm's commits do (``storage.concurrent``), except the plain append, which shows what that
id costs:

- MERGE: ivm's MERGE of a consolidated change (``incremental.bag.merge``), with the
  transaction id and without (what Delta's check of it costs), and compiled whatever the
  table's size (what small-data execution saves a MERGE);
- a change computed and MERGEd, each way ``physical.materialize`` has: cached in executor
  memory and counted (Delta then copies it again before its MERGE), or collected as rows in
  one job (the MERGE reads them from the plan, with no copy);
- overwrite: the table rewritten whole, stored rows and change consolidated;
- append: an INSERT of the change's rows (what a view's bag table, a trace of batches, writes
  each refresh: ``physical.batches``), with the transaction id and without;
- record: ivm's record-only commit (an INSERT of no row);
- the append and the record through Delta's transaction API (``DeltaLog.startTransaction``,
  the candidate design of docs/performance.md's "A commit's transaction id"): the files
  written by the transaction, which is marked as having read the whole table
  (``readWholeTable``), so that any commit landing after its snapshot fails it as a
  concurrent append, and which carries the same transaction id as an action: the check of
  that id against the snapshot's transactions, the state computation the SQL path pays, is
  left out (the bench does not check it; the design checks the commits since the record in
  the JSON log instead). Not over Spark Connect;
- read: a COUNT of the table at the version just written, and at the version before;
- scan: an aggregate that reads every row of the table (what a recompute pays per byte):
  its growth with the table's bytes, set against a statement's fixed cost, says how many
  bytes of scanning one statement is worth.

The last line gives each size's bytes, from Delta's checksum file.

    SPARK_LOCAL_IP=127.0.0.1 .venv/bin/python bench/writes.py --rows 6,200,5000,100000 --change 20
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import tempfile
import time
from contextlib import nullcontext
from pathlib import Path

from sqlglot import exp

from ivm_sql.config import Config
from ivm_sql.incremental import bag
from ivm_sql.physical import execution, materialize
from ivm_sql.session import build_session
from ivm_sql.sqlbuild import WEIGHT, consolidate, lit, table, table_at, to_sql
from ivm_sql.storage import concurrent
from ivm_sql.storage.delta_log import DeltaLog, record_only

NAME, CHANGE, COLUMNS = "bench.t", "bench_change", ("k", "v")
# the change's query, not yet computed: for the two ways of computing it
UNCOMPUTED = "bench_change_query"
API_TXN = itertools.count(1)  # the transaction ids of the commits through Delta's API


def make_table(spark, rows: int) -> None:
    spark.sql(
        f"CREATE OR REPLACE TABLE {NAME} (k BIGINT, v STRING, {WEIGHT} BIGINT) USING DELTA "
        "TBLPROPERTIES ('delta.enableChangeDataFeed' = 'true', 'delta.enableDeletionVectors' = 'false')"
    )
    spark.sql(f"INSERT INTO {NAME} SELECT id, concat('v', id), 1 FROM range(0, {rows})")


def make_change(spark, rows: int, size: int, round_: int) -> None:
    """``size`` change rows, cached: half add a weight to stored rows (distinct ones: a MERGE
    refuses two changes to one row), half are new rows."""
    half = max(size // 2, 1)
    updated = min(half, rows)
    new = rows + 10**9 + round_ * half
    query = spark.sql(
        f"SELECT k, concat('v', k) AS v, CAST(1 AS BIGINT) AS {WEIGHT} "
        f"FROM (SELECT (id + {round_ * updated}) % {max(rows, 1)} AS k FROM range(0, {updated})) "
        f"UNION ALL SELECT id AS k, concat('new', id) AS v, CAST(1 AS BIGINT) AS {WEIGHT} FROM range({new}, {new + half})"
    )
    query.createOrReplaceTempView(UNCOMPUTED)
    query.cache().createOrReplaceTempView(CHANGE)
    spark.table(CHANGE).count()


def through_transaction(spark, query: exp.Query | None, txn_version: int) -> None:
    """Commit ``query``'s rows (None: no row) to NAME through Delta's transaction API: a
    transaction that read the whole table, its files, and the transaction id as an action."""
    jvm, session = spark._jvm, spark._jsparkSession
    option = jvm.scala.Option
    identifier = session.sessionState().sqlParser().parseTableIdentifier(NAME)
    catalog_table = session.sessionState().catalog().getTableMetadata(identifier)
    transaction = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(
        session, catalog_table
    ).startTransaction(option.apply(catalog_table), option.empty())
    transaction.readWholeTable()
    actions = (
        transaction.writeFiles(spark.sql(to_sql(query, pretty=False))._jdf)
        if query is not None
        else jvm.scala.collection.mutable.ListBuffer().toList()
    )
    mark = jvm.org.apache.spark.sql.delta.actions.SetTransaction(
        "bench", txn_version, option.empty()
    )
    none = option.empty()
    write = getattr(jvm.org.apache.spark.sql.delta, "DeltaOperations$Write")(
        jvm.org.apache.spark.sql.SaveMode.Append, *[none] * 8
    )
    transaction.commit(actions.appended(mark), write)


def statements(log: DeltaLog) -> dict:
    """Each primitive: (what it runs, whether it carries a transaction id)."""
    change = exp.select(exp.Star()).from_(table(CHANGE))
    everything = exp.union(exp.select(exp.Star()).from_(table(NAME)), change.copy(), distinct=False)
    overwrite = exp.Insert(
        this=table(NAME), expression=consolidate(everything, COLUMNS), overwrite=True
    )
    append = exp.Insert(this=table(NAME), expression=change.copy())

    def count_at(back: int):
        def run(spark):
            version = log.latest_version(NAME) - back
            spark.sql(
                to_sql(
                    exp.select(exp.Count(this=exp.Star())).from_(table_at(NAME, lit(version))),
                    pretty=False,
                )
            ).collect()

        return run

    def sql(statement: exp.Expression):
        text = to_sql(statement, pretty=False)
        return lambda spark: spark.sql(text)

    def computed(way):
        """The change computed the way ``materialize`` would (``way``: cached or local rows), then MERGEd."""

        def run(spark):
            with (
                materialize.materialized(
                    spark, exp.select(exp.Star()).from_(table(UNCOMPUTED)), way=way
                ) as staged,
                staged.reading(spark),
            ):
                spark.sql(to_sql(bag.merge(NAME, COLUMNS, staged.query), pretty=False))

        return run

    return {
        "MERGE": (sql(bag.merge(NAME, COLUMNS, change)), True),
        "MERGE, no txn id": (sql(bag.merge(NAME, COLUMNS, change)), False),
        "MERGE, compiled": (sql(bag.merge(NAME, COLUMNS, change)), True),
        "change cached and counted, MERGE": (computed(materialize.CACHED), True),
        "change collected as rows, MERGE": (computed(materialize.LOCAL), True),
        "overwrite": (sql(overwrite), True),
        "append": (sql(append), True),
        "append, no txn id": (sql(append), False),
        "record": (lambda spark: record_only(spark, NAME), True),
        "append, Delta's transaction API": (
            lambda spark: through_transaction(spark, change, next(API_TXN)),
            False,
        ),
        "record, Delta's transaction API": (
            lambda spark: through_transaction(spark, None, next(API_TXN)),
            False,
        ),
        "read just written": (count_at(0), False),
        "read version before": (count_at(1), False),
        "scan": (
            lambda spark: spark.sql(
                f"SELECT k % 100, sum(length(v)), sum({WEIGHT}) FROM {NAME} GROUP BY 1"
            ).collect(),
            False,
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="6,200,5000,100000", help="table sizes, comma-separated")
    parser.add_argument("--change", type=int, default=20, help="rows in each change")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ivm_writes_") as folder:
        spark = build_session(Config(), Path(folder))
        log = DeltaLog(spark)
        spark.sql("CREATE DATABASE IF NOT EXISTS bench")
        sizes = [int(r) for r in args.rows.split(",")]
        kinds = list(statements(log))
        print(
            f"seconds, median of {args.repeats}; a change of {args.change} rows; columns: table rows"
        )
        print("| primitive | " + " | ".join(f"{rows:,}" for rows in sizes) + " |")
        print("|---|" + "---|" * len(sizes))
        medians: dict[str, list[float]] = {kind: [] for kind in kinds}
        table_bytes = []
        txn = 0
        for rows in sizes:
            make_table(spark, rows)
            times: dict[str, list[float]] = {kind: [] for kind in kinds}
            for round_ in range(args.repeats + 1):  # the first round warms each up
                for kind, (run, with_txn) in statements(log).items():
                    make_change(spark, rows, args.change, round_)
                    small = execution.is_small(
                        [log.size_bytes(NAME, log.latest_version(NAME))]
                    ) and not kind.endswith("compiled")
                    txn += 1
                    ids = (
                        {concurrent.TXN_APP_ID: "bench", concurrent.TXN_VERSION: str(txn)}
                        if with_txn
                        else {}
                    )
                    with (
                        execution.for_small_data(spark, enabled=small),
                        execution.session_settings(spark, ids) if ids else nullcontext(),
                    ):
                        started = time.perf_counter()
                        run(spark)
                        seconds = time.perf_counter() - started
                    if round_:
                        times[kind].append(seconds)
            for kind in kinds:
                medians[kind].append(statistics.median(times[kind]))
            table_bytes.append(log.size_bytes(NAME, log.latest_version(NAME)))
        for kind in kinds:
            print(f"| {kind} | " + " | ".join(f"{m:.2f}" for m in medians[kind]) + " |")
        print(
            "| table bytes at the end | "
            + " | ".join(f"{b:,}" if b is not None else "?" for b in table_bytes)
            + " |"
        )
        spark.stop()


if __name__ == "__main__":
    main()
