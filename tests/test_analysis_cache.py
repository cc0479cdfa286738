"""What Spark's analysis answered, kept in .ivm for the next command. (The row counts
`ivm status` takes from Delta's checksum files are checked by the differential oracle, on
every view of tests/test_oracle*.py.)"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from ivm_sql.analysis_cache import FILE, AnalysisCache, spark_identity
from ivm_sql.catalog import SparkCatalog
from ivm_sql.project import Project

MakeProject = Callable[[dict[str, str]], Path]

FILES = {
    "migrations/0001_t.sql": "CREATE TABLE p (id INT, category STRING, price INT) USING DELTA;\n"
    "INSERT INTO p VALUES (1, 'a', 10), (2, 'a', 20), (3, 'b', 30), (4, NULL, NULL);\n",
    "views/v.sql": "CREATE VIEW plain AS SELECT id, price FROM p WHERE id > 1;\n"
    "CREATE VIEW kinds AS SELECT category FROM p;\n"
    "CREATE VIEW busy AS SELECT category, COUNT(*) AS n FROM p GROUP BY category HAVING COUNT(*) > 1;\n"
    "CREATE VIEW tags AS SELECT DISTINCT category FROM p;\n",
}


def test_a_new_project_object_reuses_the_analysis_kept_in_its_folder(
    spark: SparkSession,
    tmp_project: MakeProject,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    root = tmp_project(FILES)
    first = Project.open(root)  # builds its session (the test run's): its analysis is kept
    first.migrate()
    plans = [p.schema for p in first.plans()]
    first.save_analysis()  # as each command of the CLI does when it succeeds
    assert (root / ".ivm" / FILE).is_file()

    asked = []
    monkeypatch.setattr(SparkCatalog, "_read_columns", lambda self, table: asked.append(table))
    original = SparkSession.sql

    def spy(session, statement, *args, **kwargs):
        if statement.lstrip().upper().startswith(("SELECT", "WITH")):
            asked.append(statement)
        return original(session, statement, *args, **kwargs)

    monkeypatch.setattr(SparkSession, "sql", spy)
    assert [p.schema for p in Project.open(root).plans()] == plans
    assert asked == []  # neither a table's columns nor a view's schema was asked of Spark

    # other settings may analyze differently: the kept answers are not used
    (root / "ivm.yaml").write_text(
        (root / "ivm.yaml").read_text() + "spark:\n  conf:\n    spark.sql.ansi.enabled: 'false'\n"
    )
    monkeypatch.undo()
    again = Project.open(root)
    assert [p.schema for p in again.plans()] == plans
    again.save_analysis()
    assert json.loads((root / ".ivm" / FILE).read_text())["identity"] == spark_identity(
        {"spark.sql.ansi.enabled": "false"}
    )


def test_an_unreadable_or_foreign_analysis_file_is_an_empty_cache(tmp_path: Path) -> None:
    path = tmp_path / ".ivm" / FILE
    kept = AnalysisCache(path, "one")
    kept.schemas[("SELECT 1", (("db.t", (("a", "int"),)),))] = [("x", "int")]
    kept.columns[("db.t", "id", 3)] = [("a", "int")]
    kept.save()
    again = AnalysisCache(path, "one")
    assert again.schemas == kept.schemas and again.columns == kept.columns
    assert AnalysisCache(path, "two").schemas == {}  # another Spark or other settings
    path.write_text("{not json")
    assert AnalysisCache(path, "one").schemas == {}
    read_only = AnalysisCache(None, "one")
    read_only.schemas["q"] = []
    read_only.save()  # no file: nothing written, no error
