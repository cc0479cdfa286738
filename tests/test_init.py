"""`ivm init`: a new project that works as it is (migrate, refresh, verify), through the CLI
in-process on the test run's Spark session."""

from __future__ import annotations

import uuid
from pathlib import Path

from pyspark.sql import SparkSession
from test_cli import keep_current_database  # noqa: F401 (autouse fixture)
from typer.testing import CliRunner

from ivm_sql.cli import app
from ivm_sql.config import load_config
from ivm_sql.scaffold import FILES


def ivm(*args: str) -> str:
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "250"})
    assert result.exit_code == 0, (
        f"ivm {' '.join(args)} exited {result.exit_code}:\n{result.output}"
    )
    return result.stdout


def test_init_makes_a_project_that_migrates_refreshes_and_verifies(
    spark: SparkSession, tmp_path: Path
) -> None:
    root = tmp_path / f"new-shop-{uuid.uuid4().hex[:8]}"  # its database is named after it
    created = ivm("init", str(root)).splitlines()
    assert created[:-1] == [f"created {root.resolve() / name}" for name in FILES]
    assert "migrate" in created[-1] and "refresh" in created[-1]
    database = load_config(root / "ivm.yaml").database
    assert database == root.name.replace("-", "_")

    assert ivm("-p", str(root), "migrate").split() == ["0001_create_events.sql:", "2", "applied"]
    refreshed = ivm("-p", str(root), "refresh").splitlines()
    assert (
        refreshed[1].split()[0] == f"{database}.events_per_kind" and "created (new)" in refreshed[1]
    )
    assert ivm("-p", str(root), "verify").split() == ["ok", f"{database}.events_per_kind"]
    rows = spark.sql(
        f"SELECT kind, events, total FROM {database}.events_per_kind ORDER BY kind"
    ).collect()
    assert [tuple(r) for r in rows] == [("click", 2, 8), ("view", 1, 1)]


def test_init_where_it_cannot_write_is_one_message_and_exit_1(tmp_path: Path) -> None:
    (tmp_path / "a_file").write_text("", encoding="utf-8")
    folder = tmp_path / "a_file" / "project"
    result = CliRunner().invoke(app, ["init", str(folder)], env={"COLUMNS": "250"})
    assert result.exit_code == 1
    assert result.stderr.strip() == f"error: cannot write {folder}: Not a directory"
    assert result.stdout == ""
