"""The datasets of a pipeline's SQL files, each statement read as ``spark-pipelines`` reads it.

- ``CREATE MATERIALIZED VIEW`` (and a persisted ``CREATE VIEW``): an ivm view.
- ``CREATE TEMPORARY VIEW``: a query other datasets of the pipeline read by name
  (``temporary_views`` inlines it into them).
- ``CREATE STREAMING TABLE t AS SELECT ... FROM STREAM(src)``: an append-only flow
  (``streaming``).
Anything else a pipeline file may hold (``CREATE FLOW``, ``SET``, a plain ``CREATE TABLE``)
ivm does not run: one error at its file and line.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sqlglot import exp

from ivm_sql.errors import Location, SqlError, UnsupportedError
from ivm_sql.pipelines.stream_reads import StreamRead, cut_stream_reads
from ivm_sql.sqlfiles import Statement, read_sql, split_statements
from ivm_sql.syntax import parse_statement
from ivm_sql.viewdefs import ViewDef, parse_view

SKIP_CHANGE_COMMITS = "skipChangeCommits"
# what a streaming table's query may hold besides columns, literals and scalar functions
NOT_LINEAR = (
    exp.AggFunc,
    exp.Window,
    exp.Subquery,
    exp.Exists,
    exp.Join,
    exp.Group,
    exp.Having,
    exp.Distinct,
    exp.Order,
    exp.Limit,
    exp.With,
    exp.Lateral,
)


@dataclass(frozen=True)
class TemporaryView:
    name: str
    query: exp.Query
    location: Location


@dataclass(frozen=True)
class StreamingTable:
    """``CREATE STREAMING TABLE name AS SELECT ... FROM STREAM(source)``: its rows are the
    source's appended rows passed through ``query`` (whose FROM names the source)."""

    name: str
    query: exp.Select
    source: exp.Table
    skip_change_commits: bool
    location: Location


@dataclass(frozen=True)
class SqlDatasets:
    views: tuple[ViewDef, ...]
    temporary: tuple[TemporaryView, ...]
    streaming: tuple[StreamingTable, ...]


def sql_datasets(paths: list[Path]) -> SqlDatasets:
    views, temporary, streaming = [], [], []
    for path in paths:
        for statement in split_statements(read_sql(path), path):
            found = _dataset(statement)
            {ViewDef: views, TemporaryView: temporary, StreamingTable: streaming}[
                type(found)
            ].append(found)
    return SqlDatasets(tuple(views), tuple(temporary), tuple(streaming))


def _dataset(statement: Statement) -> ViewDef | TemporaryView | StreamingTable:
    if [w.upper() for w in statement.text.split()[:2]] == [
        "CREATE",
        "FLOW",
    ]:  # sqlglot cannot parse it
        raise UnsupportedError(
            "CREATE FLOW: ivm maintains a dataset from its one defining query",
            location=statement.location,
            hint="define the rows in the CREATE STREAMING TABLE ... AS SELECT itself, or in a materialized view over a UNION ALL",
        )
    text, reads = cut_stream_reads(statement.text, statement.location)
    parsed = parse_statement(text, statement.location)
    if (
        isinstance(parsed, exp.Create)
        and parsed.kind == "TABLE"
        and _has(parsed, exp.StreamingTableProperty)
    ):
        return _streaming_table(parsed, reads, statement.location)
    if reads:
        raise UnsupportedError(
            "STREAM reads a source as a stream, which only a streaming table does",
            location=Location(statement.location.path, reads[0].line),
            hint="read the table without STREAM here, or make this a CREATE STREAMING TABLE",
        )
    if (
        isinstance(parsed, exp.Create)
        and parsed.kind == "VIEW"
        and _has(parsed, exp.TemporaryProperty)
    ):
        return TemporaryView(
            _plain_name(parsed.this, statement.location), parsed.expression, statement.location
        )
    if isinstance(parsed, exp.Create) and parsed.kind == "VIEW":
        return parse_view(text, statement.location)
    if isinstance(parsed, exp.Set):
        raise UnsupportedError(
            "SET in a pipeline file",
            location=statement.location,
            hint="put Spark settings in the spec's configuration:",
        )
    raise UnsupportedError(
        f"{' '.join(text.split()[:2]).upper()} is not a pipeline dataset ivm maintains",
        location=statement.location,
        hint="use CREATE MATERIALIZED VIEW, CREATE TEMPORARY VIEW or CREATE STREAMING TABLE; base tables belong in migrations",
    )


def _streaming_table(
    create: exp.Create, reads: list[StreamRead], location: Location
) -> StreamingTable:
    query = create.expression
    if isinstance(create.this, exp.Schema):
        raise UnsupportedError(
            "a streaming table with a column list",
            location=location,
            hint="name the columns in its SELECT instead",
        )
    if not isinstance(query, exp.Select) or len(reads) != 1:
        raise UnsupportedError(
            "a streaming table must read exactly one STREAM(source) in one SELECT",
            location=location,
            hint="CREATE STREAMING TABLE t AS SELECT ... FROM STREAM(source) [WHERE ...]",
        )
    read = reads[0]
    unknown = sorted(set(read.options) - {SKIP_CHANGE_COMMITS})
    if unknown:
        raise UnsupportedError(
            f"STREAM option {unknown[0]!r}",
            location=Location(location.path, read.line),
            hint=f"ivm understands only {SKIP_CHANGE_COMMITS}",
        )
    source = query.args["from_"].this if query.args.get("from_") else None
    problem = next((node for node in query.find_all(*NOT_LINEAR)), None)
    if problem is not None or not isinstance(source, exp.Table):
        what = problem.key.upper() if problem is not None else "its FROM"
        raise UnsupportedError(
            f"{what} in a streaming table: ivm appends each new source row through a query of one row at a time",
            location=location,
            hint="keep to SELECT columns FROM STREAM(source) WHERE ...; aggregate in a materialized view over it",
        )
    skip = read.options.get(SKIP_CHANGE_COMMITS, "false").lower()
    if skip not in ("true", "false"):
        raise SqlError(
            f"{SKIP_CHANGE_COMMITS} must be 'true' or 'false', not {skip!r}",
            location=Location(location.path, read.line),
        )
    return StreamingTable(
        _plain_name(create.this, location), query, source, skip == "true", location
    )


def _plain_name(target: exp.Expression, location: Location) -> str:
    if isinstance(target, exp.Table) and target.args.get("db") is not None:
        raise SqlError(
            f"dataset {target.sql('spark')} names a database",
            location=location,
            hint="datasets live in the pipeline's database (the spec's database:)",
        )
    return target.name.lower()


def _has(create: exp.Create, kind: type[exp.Expression]) -> bool:
    properties = create.args.get("properties")
    return properties is not None and any(isinstance(p, kind) for p in properties.expressions)
