"""Applying migrations against a real Spark session."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from ivm_sql.config import Config, load_config
from ivm_sql.errors import ConfigError, MigrationError
from ivm_sql.migrate import FileResult, find_migrations, migrate

MakeProject = Callable[[dict[str, str]], Path]


def run(spark: SparkSession, project: Path) -> tuple[Config, list[FileResult]]:
    config = load_config(project / "ivm.yaml")
    return config, migrate(spark, config, project)


def counts(results: list[FileResult]) -> list[tuple[str, int, int]]:
    return [(r.migration.path.name, r.applied_now, r.already_applied) for r in results]


def steps(spark: SparkSession, config: Config) -> list[int]:
    return [row.step for row in spark.table(f"{config.database}.log").orderBy("step").collect()]


def test_applies_in_version_order_once(spark: SparkSession, tmp_project: MakeProject) -> None:
    project = tmp_project(
        {
            "migrations/1_create.sql": "CREATE TABLE log (step INT);",
            # 10 sorts before 2 as text; the numbers decide: 10 must see 2's row.
            "migrations/10_derive.sql": "INSERT INTO log SELECT max(step) * 10 FROM log;",
            "migrations/2_seed.sql": "INSERT INTO log VALUES (2);\n-- done\n",
            "migrations/README.md": "not a migration",
        }
    )
    config, results = run(spark, project)
    assert counts(results) == [
        ("1_create.sql", 1, 0),
        ("2_seed.sql", 1, 0),
        ("10_derive.sql", 1, 0),
    ]
    assert steps(spark, config) == [2, 20]

    _, again = run(spark, project)
    assert counts(again) == [("1_create.sql", 0, 1), ("2_seed.sql", 0, 1), ("10_derive.sql", 0, 1)]
    assert steps(spark, config) == [2, 20]


def test_failure_stops_at_statement_and_rerun_resumes_there(
    spark: SparkSession, tmp_project: MakeProject
) -> None:
    broken = (
        "CREATE TABLE log (step INT);\n"
        "INSERT INTO log VALUES (1);\n"
        "\n"
        "INSERT INTO no_such_table VALUES (2);\n"
        "INSERT INTO log VALUES (3);\n"
    )
    project = tmp_project(
        {
            "migrations/0001_init.sql": broken,
            "migrations/0002_more.sql": "INSERT INTO log VALUES (4);",
        }
    )
    with pytest.raises(MigrationError) as caught:
        run(spark, project)
    error = caught.value
    assert error.location is not None
    assert (error.location.path, error.location.line) == (project / "migrations/0001_init.sql", 4)
    assert "TABLE_OR_VIEW_NOT_FOUND" in error.message
    assert "\n" not in error.message
    assert error.hint is not None and "already applied" in error.hint
    config = load_config(project / "ivm.yaml")
    assert steps(spark, config) == [1]

    (project / "migrations/0001_init.sql").write_text(broken.replace("no_such_table", "log"))
    _, results = run(spark, project)
    assert counts(results) == [("0001_init.sql", 2, 2), ("0002_more.sql", 1, 0)]
    assert steps(spark, config) == [1, 2, 3, 4]


def test_syntax_error_points_at_line_inside_statement(
    spark: SparkSession, tmp_project: MakeProject
) -> None:
    project = tmp_project({"migrations/0001_bad.sql": "-- note\nCREATE TABLE t\n(a INT,, b INT);"})
    with pytest.raises(MigrationError) as caught:
        run(spark, project)
    assert caught.value.location is not None and caught.value.location.line == 3
    assert "PARSE_SYNTAX_ERROR" in caught.value.message


def test_editing_an_applied_statement_is_refused(
    spark: SparkSession, tmp_project: MakeProject
) -> None:
    path = "migrations/0001_init.sql"
    project = tmp_project({path: "CREATE TABLE log (step INT);\nINSERT INTO log VALUES (1);\n"})
    run(spark, project)

    # Whitespace does not count as an edit.
    (project / path).write_text(
        "CREATE TABLE log (step   INT);\n\nINSERT INTO log\n  VALUES (1);\n"
    )
    run(spark, project)

    (project / path).write_text("CREATE TABLE log (step INT);\nINSERT INTO log VALUES (2);\n")
    with pytest.raises(MigrationError) as caught:
        run(spark, project)
    assert caught.value.location is not None and caught.value.location.line == 2
    assert caught.value.hint is not None and "add a new migration" in caught.value.hint

    (project / path).write_text("CREATE TABLE log (step INT);\n")
    with pytest.raises(MigrationError, match="no longer in the file"):
        run(spark, project)


def test_no_migrations_folder_still_creates_database(
    spark: SparkSession, tmp_project: MakeProject
) -> None:
    config, results = run(spark, tmp_project({}))
    assert results == []
    assert spark.catalog.databaseExists(config.database)


@pytest.mark.parametrize("name", ["init.sql", "0001-init.sql", "0001_Init.sql", "01_a b.sql"])
def test_bad_file_names_are_refused(tmp_path: Path, name: str) -> None:
    (tmp_path / name).write_text("SELECT 1;")
    with pytest.raises(ConfigError) as caught:
        find_migrations(tmp_path)
    assert name in caught.value.message


def test_duplicate_numbers_are_refused(tmp_path: Path) -> None:
    (tmp_path / "0001_a.sql").write_text("SELECT 1;")
    (tmp_path / "1_b.sql").write_text("SELECT 1;")
    with pytest.raises(ConfigError, match="same number 1"):
        find_migrations(tmp_path)


def test_missing_folder_has_no_migrations(tmp_path: Path) -> None:
    assert find_migrations(tmp_path / "migrations") == []
