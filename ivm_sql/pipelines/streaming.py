"""Streaming tables: append-only flows, kept by appending the source's new rows.

``CREATE STREAMING TABLE t AS SELECT ... FROM STREAM(src)`` holds every row ever appended to
``src``, passed through its query (a projection and filter: linear, so each appended row is
passed through alone). The first refresh loads ``src`` whole at the version it pins; each
later one appends the inserts of ``src``'s change data feed since the version ``t`` records
(in the commit's userMetadata, as every table ivm writes), through the same query.

A source commit that removes or rewrites rows (DELETE, UPDATE, MERGE, an overwrite) cannot be
streamed, as in Spark: the refresh stops with one error naming it, unless the definition opts
out the way Spark's does, ``STREAM(src) WITH ('skipChangeCommits' = 'true')``, which skips such
commits whole (their inserted rows too). ``--full`` reloads the table from the source.
"""

from __future__ import annotations

import time

from sqlglot import exp

from ivm_sql.errors import RefreshError
from ivm_sql.pipelines.sql_datasets import SKIP_CHANGE_COMMITS, StreamingTable
from ivm_sql.runtime.refresh import ViewReport
from ivm_sql.runtime.status import ViewStatus
from ivm_sql.sqlbuild import col, ident, lit, table_at, to_sql
from ivm_sql.sqlbuild import table as table_node
from ivm_sql.storage.delta_log import DeltaLog, commit_record, require_change_feed

CHANGE_COLUMNS = ("_change_type", "_commit_version", "_commit_timestamp")


def qualified(name: exp.Table, database: str) -> str:
    """``db.name`` of a table read, in the project's database when it names none."""
    return f"{(name.db or database).lower()}.{name.name.lower()}"


def in_order(tables: tuple[StreamingTable, ...], database: str) -> list[StreamingTable]:
    """Streaming tables after the streaming tables they read."""
    pending, done, ordered = list(tables), set(), []
    while pending:
        ready = [
            t
            for t in pending
            if qualified(t.source, database) in done
            or qualified(t.source, database) not in {f"{database}.{p.name}" for p in pending}
        ]
        if not ready:
            raise RefreshError(
                f"streaming tables stream from each other in a cycle: {', '.join(t.name for t in pending)}",
                hint="one of them must read a table outside the cycle",
            )
        for item in ready:
            pending.remove(item)
            done.add(f"{database}.{item.name}")
            ordered.append(item)
    return ordered


def refresh_streaming(
    spark, log: DeltaLog, database: str, stream: StreamingTable, full: bool = False
) -> ViewReport:
    """Bring one streaming table up to date with its source (reload it whole with ``full``)."""
    start = time.monotonic()
    target, source = f"{database}.{stream.name}", qualified(stream.source, database)
    if not log.exists(source):
        raise RefreshError(
            f"streaming table {stream.name} streams from {source}, which does not exist",
            location=stream.location,
            hint="create the source table first (a migration, or spark-pipelines run)",
        )
    require_change_feed(spark, log, source)
    latest = log.latest_version(source)
    if full or not log.exists(target):
        with commit_record(spark, {"base": {source: latest}}):
            query = exp.Create(
                this=table_node(target),
                kind="TABLE",
                replace=full,
                expression=_through(stream, table_at(source, lit(latest))),
                properties=exp.Properties(
                    expressions=[exp.FileFormatProperty(this=exp.var("DELTA"))]
                ),
            )
            spark.sql(to_sql(query))
        return _report(
            log,
            target,
            "created",
            f"loaded {source} whole at version {latest}",
            latest,
            source,
            start,
        )
    _, record = log.last_record(target)
    since = record.get("base", {}).get(source)
    if since is None:
        raise RefreshError(
            f"{target} holds no record of the {source} version it reflects",
            location=stream.location,
            hint="reload it: ivm refresh --full (it was not made by ivm, or its source changed name)",
        )
    if latest < since:  # the source was dropped and made anew: its history is another table's
        raise RefreshError(
            f"{source} is at version {latest}, older than the {since} that {target} reflects: it was made anew",
            location=stream.location,
            hint=f"reload it from {source} as it is now: ivm refresh --full",
        )
    if since == latest:
        return ViewReport(
            target, "unchanged", versions={source: latest}, seconds=time.monotonic() - start
        )
    changing = [
        c for c in log.commits_between(source, since, latest) if log.removes_rows(source, c.version)
    ]
    if changing and not stream.skip_change_commits:
        first = changing[0]
        raise RefreshError(
            f"streaming table {stream.name}: commit {first.version} of {source} ({first.operation or 'a rewrite'}) deletes or updates rows, "
            "and a streaming table only takes appended rows",
            location=stream.location,
            hint=f"to skip such commits as Spark does, write STREAM({stream.source.name}) WITH ('{SKIP_CHANGE_COMMITS}' = 'true'); "
            f"to reload it from {source} as it is now, ivm refresh --full",
        )
    with commit_record(spark, {"base": {source: latest}}):
        appended = _appended(spark, source, since, latest, [c.version for c in changing])
        spark.sql(to_sql(exp.insert(_through(stream, appended), table_node(target))))
    skipped = f"; skipped {len(changing)} commits that change rows" if changing else ""
    return _report(
        log,
        target,
        "appended",
        f"the rows appended to {source} since version {since}{skipped}",
        latest,
        source,
        start,
    )


def _appended(spark, source: str, since: int, latest: int, skipped: list[int]) -> exp.Subquery:
    """The rows inserted into ``source`` after ``since`` up to ``latest`` (outside the
    ``skipped`` commits), with the source's columns only."""
    changes = exp.Table(
        this=exp.Anonymous(
            this="table_changes", expressions=[lit(source), lit(since + 1), lit(latest)]
        )
    )
    inserted = exp.EQ(this=col("_change_type"), expression=lit("insert"))
    if skipped:
        inserted = exp.and_(
            inserted,
            exp.Not(
                this=exp.In(this=col("_commit_version"), expressions=[lit(v) for v in skipped])
            ),
        )
    columns = [col(name) for name in spark.table(source).columns if name not in CHANGE_COLUMNS]
    return exp.select(*columns).from_(changes).where(inserted).subquery()


def _through(stream: StreamingTable, rows: exp.Expression) -> exp.Select:
    """The streaming table's query reading ``rows`` where it reads its source (same alias)."""
    query = stream.query.copy()
    source = query.args["from_"].this
    rows.set("alias", exp.TableAlias(this=ident(source.alias_or_name)))
    source.replace(rows)
    return query


def _report(
    log: DeltaLog, target: str, action: str, reason: str, latest: int, source: str, start: float
) -> ViewReport:
    """What the write did, from its commit's metrics (no count job)."""
    written = int(log.commit(target, log.latest_version(target)).metrics.get("numOutputRows", 0))
    return ViewReport(
        target,
        action,
        reason,
        rows_in=written,
        rows_out=written,
        seconds=time.monotonic() - start,
        versions={source: latest},
    )


def streaming_status(spark, log: DeltaLog, database: str, stream: StreamingTable):
    """The ``ivm status`` line of a streaming table: the source version it holds the rows of,
    a newer one not yet appended, its row count (from Delta's checksum, else counted)."""

    target, source = f"{database}.{stream.name}", qualified(stream.source, database)
    if not log.exists(target):
        return ViewStatus(target, False, {}, {}, None)
    latest, record = log.last_record(target)
    versions = record.get("base", {})
    pending = (
        {t: v for t in versions if (v := log.latest_version(t)) != versions[t]}
        if log.exists(source)
        else {}
    )
    rows = log.row_count(target, latest)
    if rows is None:
        rows = spark.table(target).count()
    return ViewStatus(target, True, versions, pending, rows)
