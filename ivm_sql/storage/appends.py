"""An append, or a record-only commit, through Delta's transaction API: the same commit as
the SQL INSERT's, without the state computation the INSERT's transaction id costs.

Every commit ivm makes to a stage table is a compare-and-swap (``storage.concurrent``). In
SQL that is Delta's idempotent write: the session's ``txnAppId`` and ``txnVersion``, which
Delta checks against the transactions of the table's snapshot, and those are part of the
snapshot's computed state, a Spark job over the table's log for each new version
(``OptimisticTransaction.txnVersion`` reads ``Snapshot.transactions``). An append needs no
other part of that state, so on this 2-core machine the id cost more than the append
(``bench/writes.py``, 2026-12-07: an append of 20 rows 0.66-1.06 s with it, 0.33-0.42 s
without; a record-only commit 0.68-0.75 s).

Here the same two guarantees come from elsewhere, at no Spark job:

- *skip*: Delta skips a write whose id a commit in the snapshot already holds. A commit of
  ivm's carries the id one above the version of the record it follows, so the snapshot
  holds a later one exactly when a commit carrying an ivm record landed after that record:
  read from the JSON of the commits in between (``DeltaLog.commit``, cached), and then
  nothing is written, as Delta would skip it; the refresh finds the newer record and is
  overtaken (``runtime.refresh``'s ``_landed``).
- *conflict*: the transaction is marked as having read the whole table
  (``readWholeTable``), so any commit that adds or removes files after its snapshot fails
  it with ``DELTA_CONCURRENT_APPEND`` (a conflict, ``concurrent.is_conflict``), where the
  SQL INSERT, a blind append, would have landed beside it.

The commit still carries the id as an action (``SetTransaction``), so the SQL statements of
other refreshes (MERGE, rewrites, recomputes) check it as before, and the session's record
as its ``userMetadata``: it is, to Delta's log and the change data feed, the INSERT's
commit (a WRITE in append mode; its files are the batch's inserted rows).

Only in a classic session, for a table of the session catalog: over Spark Connect the JVM
is out of reach, and there the INSERT runs as before.
"""

from __future__ import annotations

import json
import time

from pyspark.sql import DataFrame
from pyspark.sql.types import StructField, StructType
from sqlglot import exp

from ivm_sql.sqlbuild import col, ident, table, to_sql
from ivm_sql.storage import concurrent
from ivm_sql.storage.delta_log import USER_METADATA, DeltaLog

DEFAULT_CATALOG, SESSION_CATALOG = "spark.sql.defaultCatalog", "spark_catalog"


def available(spark, table_name: str) -> bool:
    """Whether ``commit`` and ``record_only`` can write ``table_name`` in this session: a
    classic one, and a table of its session catalog (database.table, where that catalog is
    the session's default)."""
    return (
        concurrent.has_own_sessions(spark)
        and len(table(table_name).parts) <= 2
        and spark.conf.get(DEFAULT_CATALOG, SESSION_CATALOG) == SESSION_CATALOG
    )


def applies(spark, statement: exp.Expression) -> bool:
    """Whether ``statement`` is an append (an INSERT, not an OVERWRITE) that ``commit`` makes."""
    return (
        isinstance(statement, exp.Insert)
        and not statement.args.get("overwrite")
        and available(spark, _name(_target(statement)))
    )


def commit(spark, log: DeltaLog, statement: exp.Insert) -> None:
    """Commit ``statement``'s rows to its table as one append, with the record and
    transaction id the session carries (``delta_log.commit_record``); nothing when a
    commit of ivm's landed after the record the id follows."""
    _commit(spark, log, _target(statement), lambda schema: _rows(spark, statement, schema))


def record_only(spark, log: DeltaLog, table_name: str) -> None:
    """A commit of no row that carries the session's record and id: what
    ``delta_log.record_only``'s empty INSERT commits."""
    _commit(spark, log, table(table_name), lambda _schema: None)


def _commit(spark, log: DeltaLog, target: exp.Table, rows) -> None:
    session, jvm = spark._jsparkSession, spark._jvm
    option, delta = jvm.scala.Option, jvm.org.apache.spark.sql.delta
    state = session.sessionState()
    catalog_table = state.catalog().getTableMetadata(
        state.sqlParser().parseTableIdentifier(to_sql(target))
    )
    transaction = delta.DeltaLog.forTable(session, catalog_table).startTransaction(
        option.apply(catalog_table), option.empty()
    )
    transaction.readWholeTable()
    version = spark.conf.get(concurrent.TXN_VERSION, None)
    name = _name(target)
    if version is not None and _ivm_committed(
        log, name, int(version) - 1, transaction.readVersion()
    ):
        return  # as Delta skips a write whose id the snapshot holds
    kept = rows(StructType.fromJson(json.loads(transaction.metadata().schema().json())))
    actions = (
        transaction.writeFiles(kept._jdf)
        if kept is not None
        else jvm.scala.collection.mutable.ListBuffer().toList()
    )
    if version is not None:
        actions = actions.appended(
            delta.actions.SetTransaction(
                concurrent.APP_ID, int(version), option.apply(int(time.time() * 1000))
            )
        )
    transaction.commit(actions, _append_operation(spark))


def _append_operation(spark):
    """Delta's ``DeltaOperations.Write`` of an append, with the session's record as its
    userMetadata. Delta adds optional fields to it from release to release (4 in 3.x, 9 in
    4.4), the record the fourth: the rest are left None, however many the JVM's Delta has."""
    jvm = spark._jvm
    operation = getattr(jvm.org.apache.spark.sql.delta, "DeltaOperations$Write")
    (constructor,) = operation._java_lang_class.getConstructors()
    none = jvm.scala.Option.empty()
    metadata = spark.conf.get(USER_METADATA, None)
    fields = [none] * (constructor.getParameterCount() - 1)
    fields[2] = jvm.scala.Option.apply(metadata) if metadata is not None else none
    return operation(jvm.org.apache.spark.sql.SaveMode.Append, *fields)


def _name(target: exp.Table) -> str:
    return ".".join(part.name for part in target.parts)


def _target(statement: exp.Insert) -> exp.Table:
    this = statement.this
    return this.this if isinstance(this, exp.Schema) else this


def _ivm_committed(log: DeltaLog, table_name: str, record_version: int, read_version: int) -> bool:
    """Whether a commit after ``record_version``, up to the transaction's snapshot, carries
    an ivm record: its id is then at least the one this commit would carry."""
    return any(
        log.commit(table_name, version).record is not None
        for version in range(record_version + 1, read_version + 1)
    )


def _rows(spark, statement: exp.Insert, schema: StructType) -> DataFrame:
    """The INSERT's rows in the table's columns and types, as the INSERT would store them
    (a column it does not name is NULL, one of another type is cast). The projection is one
    ``selectExpr``: built column by column through Py4J it cost 0.2-0.4 s for the event
    log's 27 columns, as SQL 0.05 s."""
    frame = spark.sql(to_sql(statement.expression, pretty=False))
    this = statement.this
    named = (
        [c.name for c in this.expressions]
        if isinstance(this, exp.Schema)
        else [f.name for f in schema.fields]
    )
    by_name = dict(zip((n.lower() for n in named), frame.schema.fields, strict=True))
    return frame.selectExpr(
        *(
            to_sql(_stored(by_name.get(field.name.lower()), field), pretty=False)
            for field in schema.fields
        )
    )


def _stored(source: StructField | None, field: StructField) -> exp.Expression:
    """The column ``field`` of the table from the query's column ``source`` (None: not
    named), cast to the column's type where the query's differs (its type as the compiler
    writes catalog types, ``simpleString``)."""
    value = col(source.name) if source is not None else exp.null()
    if source is None or source.dataType != field.dataType:
        value = exp.cast(value, exp.DataType.build(field.dataType.simpleString(), dialect="spark"))
    return exp.alias_(value, ident(field.name))
