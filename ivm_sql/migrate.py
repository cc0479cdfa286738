"""Applying the project's migrations (``<migrations>/NNNN_name.sql``) in order, once each.

Every statement that succeeds is recorded at once in the ledger table
``<database>.ivm_migrations``, so a file that fails half way resumes at the failing
statement when ``ivm migrate`` runs again. The ledger keeps a checksum of each applied
statement, and editing an applied statement is refused.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from py4j.protocol import Py4JJavaError
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession

from ivm_sql.config import Config
from ivm_sql.errors import ConfigError, Location, MigrationError
from ivm_sql.sqlbuild import use_database
from ivm_sql.sqlfiles import Statement, read_sql, split_statements

LEDGER_TABLE = "ivm_migrations"
FILE_NAME = re.compile(r"(?P<version>\d+)_(?P<name>[a-z0-9_]+)\.sql")
# Where Spark's messages point inside a statement: "(line 2, pos 7)" or "line 2 pos 7".
SPARK_POSITION = re.compile(r"line (\d+),? pos \d+")


@dataclass(frozen=True)
class Migration:
    """One migration file."""

    version: int
    name: str
    path: Path


@dataclass(frozen=True)
class FileResult:
    """What ``migrate`` did with one file: statements applied now and in earlier runs."""

    migration: Migration
    applied_now: int
    already_applied: int


def find_migrations(directory: Path) -> list[Migration]:
    """The migration files in ``directory`` in version order; none if it does not exist."""
    if not directory.is_dir():
        return []
    by_version: dict[int, Migration] = {}
    for path in sorted(directory.glob("*.sql")):
        match = FILE_NAME.fullmatch(path.name)
        if not match:
            raise ConfigError(
                f"migration file name {path.name!r} is not NNNN_name.sql",
                location=Location(path),
                hint="name migrations like 0001_create_orders.sql (digits, '_', then a-z, 0-9 and '_')",
            )
        migration = Migration(int(match["version"]), match["name"], path)
        if migration.version in by_version:
            raise ConfigError(
                f"migrations {by_version[migration.version].path.name} and {path.name} "
                f"have the same number {migration.version}",
                location=Location(path),
                hint="give every migration its own number",
            )
        by_version[migration.version] = migration
    return [by_version[version] for version in sorted(by_version)]


def checksum(sql: str) -> str:
    """The sha256 of a statement with its whitespace normalized."""
    return hashlib.sha256(" ".join(sql.split()).encode("utf-8")).hexdigest()


def migrate(spark: SparkSession, config: Config, project_dir: Path) -> list[FileResult]:
    """Create the database if needed and apply every pending migration statement in order."""
    # Read every file before anything is made: a typo in a name or path changes nothing.
    folder = config.folder(project_dir, "migrations")
    plan: list[tuple[Migration, list[Statement]]] = [
        (migration, split_statements(read_sql(migration.path), migration.path))
        for migration in (find_migrations(folder) if folder is not None else [])
    ]
    db = quote(config.database)
    ledger = f"{db}.{LEDGER_TABLE}"
    use_database(spark, config.database)
    spark.sql(
        f"CREATE TABLE IF NOT EXISTS {ledger} (version INT, name STRING, statement INT, "
        "checksum STRING, applied_at TIMESTAMP) USING DELTA"
    )
    applied = {
        (row.version, row.statement): row.checksum
        for row in spark.table(ledger).select("version", "statement", "checksum").collect()
    }

    for migration, statements in plan:
        _refuse_edits(migration, statements, applied)

    results: list[FileResult] = []
    for migration, statements in plan:
        done_before = 0
        for number, statement in enumerate(statements, start=1):
            if (migration.version, number) in applied:
                done_before += 1
                continue
            _run(spark, migration, number, statement)
            spark.sql(
                f"INSERT INTO {ledger} VALUES ({migration.version}, '{migration.name}', {number}, "
                f"'{checksum(statement.text)}', current_timestamp())"
            )
        results.append(FileResult(migration, len(statements) - done_before, done_before))
    return results


def quote(identifier: str) -> str:
    """A Spark SQL identifier in backticks."""
    return "`" + identifier.replace("`", "``") + "`"


def _refuse_edits(
    migration: Migration, statements: list[Statement], applied: dict[tuple[int, int], str]
) -> None:
    """Raise MigrationError if a statement of ``migration`` changed or vanished since it was applied."""
    hint = "applied migrations must not be edited; undo the change and add a new migration instead"
    for (version, number), recorded in sorted(applied.items()):
        if version != migration.version:
            continue
        if number > len(statements):
            raise MigrationError(
                f"statement {number} of {migration.path.name} was applied but is no longer in the file",
                location=Location(migration.path),
                hint=hint,
            )
        statement = statements[number - 1]
        if checksum(statement.text) != recorded:
            raise MigrationError(
                f"statement {number} of {migration.path.name} was changed after it was applied",
                location=statement.location,
                hint=hint,
            )


def _run(spark: SparkSession, migration: Migration, number: int, statement: Statement) -> None:
    """Execute one statement; a failure becomes a MigrationError at the statement's line."""
    try:
        spark.sql(statement.text)
    except (PySparkException, Py4JJavaError) as exc:
        message = _first_line(exc)
        line = statement.location.line or 1
        position = SPARK_POSITION.search(message)
        if position:
            line += int(position.group(1)) - 1
        raise MigrationError(
            f"statement {number} of {migration.path.name} failed: {message}",
            location=Location(migration.path, line),
            hint="fix the statement and run `ivm migrate` again; "
            "statements before it are already applied and will not run again",
        ) from exc


def _first_line(exc: Exception) -> str:
    """Spark's own message for ``exc``, first line only, without the Java stack."""
    if isinstance(exc, Py4JJavaError):
        text = str(exc.java_exception.getMessage() or exc.java_exception.toString())
    else:
        text = str(exc)
    return next((line.strip() for line in text.splitlines() if line.strip()), type(exc).__name__)
