"""What the compiler needs to know about tables: their columns, and a query's output schema.

``SparkCatalog`` asks Spark (analysis only: no Spark job runs). ``StaticCatalog`` answers from
a fixed mapping, typed by sqlglot, for compiler tests that need no Spark.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

import sqlglot
from sqlglot import exp
from sqlglot.optimizer.annotate_types import annotate_types
from sqlglot.optimizer.qualify import qualify

from ivm_sql.sqlbuild import DIALECT

Schema = list[tuple[str, str]]  # (column name, Spark type), in order


class QueryError(Exception):
    """The catalog could not analyze a query; the message is the engine's."""


class Catalog(Protocol):
    def columns(self, table: str) -> Schema | None:
        """Columns of ``db.table``, or None if there is no such table."""

    def is_table(self, name: str) -> bool:
        """Whether ``db.name`` is a table (not a view) of the catalog."""

    def output_schema(self, sql: str, inputs: Mapping[str, Schema]) -> Schema:
        """Names and types of the columns ``sql`` (a SELECT) returns; QueryError if invalid.
        ``inputs`` are the columns of the tables it reads."""


class SparkCatalog:
    """Asks Spark. Each table's columns are looked up once per catalog (one compile of all
    views); a query's schema is remembered in ``schemas`` across compiles, keyed by the query
    and the columns of the tables it reads, since analyzing it is most of a compile's time.

    ``log`` (a ``DeltaLog``) says whether a table exists, from one listing of its
    database; a Delta table's columns are remembered in ``columns`` across compiles,
    keyed by its Delta id and latest version: a version's schema never changes, and reading
    the log costs less than Spark's resolving the table again.
    """

    def __init__(self, spark, log, schemas: dict | None = None, columns: dict | None = None):
        self.spark = spark
        self.log = log
        self._columns: dict[str, Schema | None] = {}
        self._databases: dict[str, bool] = {}
        self._schemas = schemas if schemas is not None else {}
        self._versioned = columns if columns is not None else {}

    def columns(self, table: str) -> Schema | None:
        if table not in self._columns:
            self._columns[table] = self._lookup(table)
        return self._columns[table]

    def _lookup(self, table: str) -> Schema | None:
        database = table.rpartition(".")[0]
        if database not in self._databases:  # listing a database that does not exist fails
            self._databases[database] = bool(self.spark.catalog.databaseExists(database))
        if not self._databases[database] or not self.log.in_catalog(table):
            return None
        identity = self.log.identity(table)
        if identity is None:
            return self._read_columns(table)
        key = (table, *identity)
        if key not in self._versioned:
            self._versioned[key] = self._read_columns(table)
        return list(self._versioned[key])

    def is_table(self, name: str) -> bool:
        return self.log.is_table(name)

    def _read_columns(self, table: str) -> Schema:
        return [
            (f.name.lower(), f.dataType.simpleString())
            for f in self.spark.table(table).schema.fields
        ]

    def output_schema(self, sql: str, inputs: Mapping[str, Schema]) -> Schema:
        from pyspark.errors import PySparkException

        key = (sql, tuple(sorted((name, tuple(columns)) for name, columns in inputs.items())))
        if key not in self._schemas:
            try:
                fields = self.spark.sql(sql).schema.fields
            except PySparkException as error:
                raise QueryError(first_line(error)) from None
            self._schemas[key] = [(f.name.lower(), f.dataType.simpleString()) for f in fields]
        return list(self._schemas[key])


class StaticCatalog:
    def __init__(self, tables: Mapping[str, Schema]):
        self.tables = {name.lower(): list(schema) for name, schema in tables.items()}

    def columns(self, table: str) -> Schema | None:
        return self.tables.get(table.lower())

    def is_table(self, name: str) -> bool:
        return name.lower() in self.tables

    def output_schema(self, sql: str, inputs: Mapping[str, Schema] | None = None) -> Schema:
        nested: dict = {}
        for name, schema in self.tables.items():
            db, table = name.split(".")
            nested.setdefault(db, {})[table] = dict(schema)
        try:
            query = annotate_types(
                qualify(sqlglot.parse_one(sql, read=DIALECT), schema=nested, dialect=DIALECT),
                schema=nested,
            )
        except sqlglot.errors.SqlglotError as error:
            raise QueryError(str(error)) from None
        return [column for e in query.selects for column in _columns_of(e)]


def _columns_of(expression: exp.Expression) -> Schema:
    """The columns one SELECT expression produces (a generator may produce several)."""
    if isinstance(expression, exp.Aliases):
        return [(name.name.lower(), "unknown") for name in expression.expressions]
    if isinstance(expression.unalias(), exp.Posexplode):
        return [("pos", "int"), ("col", "unknown")]
    return [(expression.alias_or_name.lower(), expression.type.sql(DIALECT).lower())]


def first_line(error: Exception) -> str:
    """An engine error's first line, without its stack or SQLSTATE noise."""
    try:  # getMessage itself fails on some Delta error classes; str() does not
        text = error.getMessage() if hasattr(error, "getMessage") else str(error)
    except Exception:
        text = str(error)
    text = (text or str(error)).strip()
    return text.splitlines()[0] if text else type(error).__name__
