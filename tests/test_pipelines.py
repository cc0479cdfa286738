"""Spark Declarative Pipelines projects: a folder with a spark-pipeline.yml is an ivm project.

The spec, the statements and the Python datasets are read without Spark; the refreshes run
on real Spark and Delta. The tests marked ``server`` run the real ``spark-pipelines``
command against an ``ivm server`` of the project (one catalog, one warehouse, shared by both
tools: Derby admits one process, the server is it) and compare its results with ivm's.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from typer.testing import CliRunner

from ivm_sql.cli import app
from ivm_sql.errors import ConfigError, RefreshError, SqlError, UnsupportedError
from ivm_sql.locate import find_spec
from ivm_sql.pipelines.pipeline import load_pipeline
from ivm_sql.pipelines.python_datasets import python_datasets
from ivm_sql.pipelines.spec import load_spec
from ivm_sql.project import Project

VENV_BIN = Path(sys.executable).parent
SPEC = """\
name: shop
storage: file://{root}/storage
database: {database}
configuration:
  spark.sql.shuffle.partitions: "2"
libraries:
  - glob:
      include: transformations/**
"""
# the pipeline's SQL, in folders: a temporary view, materialized views over it and over each
# other, a streaming table and a materialized view over the streaming table
TRANSFORMATIONS = {
    "transformations/staging/big_orders.sql": (
        "-- orders worth looking at\n"
        "CREATE TEMPORARY VIEW big_orders AS\n"
        "SELECT id, customer_id, amount FROM orders WHERE amount >= 10;\n"
    ),
    "transformations/marts/totals.sql": (
        "CREATE MATERIALIZED VIEW customer_totals AS\n"
        "SELECT customer_id, COUNT(*) AS n, SUM(amount) AS total FROM big_orders GROUP BY customer_id;\n\n"
        "CREATE MATERIALIZED VIEW top_customers AS\n"
        "SELECT customer_id, total FROM customer_totals WHERE total > 45;\n"
    ),
    "transformations/streams/events.sql": (
        "CREATE STREAMING TABLE positive_events AS\n"
        "SELECT id, amount * 2 AS doubled FROM STREAM(events) WHERE amount > 0;\n\n"
        "CREATE MATERIALIZED VIEW event_summary AS\n"
        "SELECT COUNT(*) AS n, SUM(doubled) AS total FROM positive_events;\n"
    ),
}
SQL_DATASETS = ("customer_totals", "top_customers", "positive_events", "event_summary")
ROUNDS = [  # each round's source changes, after which both tools refresh
    [
        "INSERT INTO orders VALUES (1, 1, 10), (2, 1, 40), (3, 2, 5), (4, 2, 70)",
        "INSERT INTO events VALUES (1, 3), (2, -1)",
    ],
    [
        "INSERT INTO orders VALUES (5, 3, 100), (6, 1, 12)",
        "UPDATE orders SET amount = 1 WHERE id = 2",
        "DELETE FROM orders WHERE id = 4",
        "INSERT INTO events VALUES (3, 5), (4, 0), (5, 7)",
    ],
]


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def shop(root: Path, database: str) -> Path:
    return write(
        root, {"spark-pipeline.yml": SPEC.format(root=root, database=database), **TRANSFORMATIONS}
    )


def rows(spark: SparkSession, frame) -> list[tuple]:
    return sorted(tuple(r) for r in frame.collect())


# reading the project: no Spark ------------------------------------------------------------------


def test_the_spec_is_found_in_the_folder_or_above_and_read(tmp_path: Path) -> None:
    root = shop(tmp_path, "shop")
    assert find_spec(root / "transformations" / "marts") == root / "spark-pipeline.yml"
    spec = load_spec(root / "spark-pipeline.yml")
    assert (spec.name, spec.database, dict(spec.configuration)) == (
        "shop",
        "shop",
        {"spark.sql.shuffle.partitions": "2"},
    )
    assert [g.pattern for g in spec.libraries] == ["transformations/**/*"]
    pipeline = load_pipeline(spec)
    assert [v.name for v in pipeline.views] == ["customer_totals", "top_customers", "event_summary"]
    assert "FROM (SELECT" in pipeline.views[0].query.sql("spark")  # the temporary view, inlined
    (stream,) = pipeline.streaming
    assert (stream.name, stream.source.name, stream.skip_change_commits) == (
        "positive_events",
        "events",
        False,
    )


def test_two_specs_in_one_folder_are_an_error(tmp_path: Path) -> None:
    (tmp_path / "spark-pipeline.yml").write_text("name: a\nstorage: s\n")
    (tmp_path / "spark-pipeline.yaml").write_text("name: b\nstorage: s\n")
    with pytest.raises(ConfigError, match="two pipeline specs"):
        find_spec(tmp_path / "sub")


def test_skip_change_commits_is_spelled_as_spark_reads_it(tmp_path: Path) -> None:
    root = write(
        tmp_path,
        {
            "spark-pipeline.yml": "name: a\nstorage: s\nlibraries:\n  - glob:\n      include: st.sql\n",
            "st.sql": "CREATE STREAMING TABLE s AS\nSELECT a FROM STREAM src WITH ('skipChangeCommits' = 'true') AS x WHERE x.a > 1;\n",
        },
    )
    (stream,) = load_pipeline(load_spec(root / "spark-pipeline.yml")).streaming
    assert stream.skip_change_commits and stream.source.name == "src"
    assert stream.query.sql("spark") == "SELECT a FROM src AS x WHERE x.a > 1"


def test_python_datasets_are_read_with_ast_never_run(tmp_path: Path) -> None:
    source = tmp_path / "datasets.py"
    source.write_text(
        "import sys\nsys.exit('never run')\n"
        "from pyspark import pipelines as dp\nfrom pyspark.pipelines import table as tbl\n\n"
        "@dp.materialized_view\ndef daily(): ...\n\n"
        "@dp.table(name='Raw_Events', comment='x')\ndef f(): ...\n\n"
        "@tbl\ndef other(): ...\n\n"
        "@dp.temporary_view()\ndef scratch(): ...\n\n"
        "@property\ndef not_a_dataset(): ...\n"
    )
    found = [(d.name, d.kind, d.location.line) for d in python_datasets(source)]
    assert found == [
        ("daily", "materialized view", 6),
        ("raw_events", "table", 9),
        ("other", "table", 12),
        ("scratch", "temporary view", 15),
    ]


@pytest.mark.parametrize(
    ("text", "error", "says"),
    [
        (
            "CREATE FLOW f AS INSERT INTO s BY NAME SELECT * FROM STREAM(x);",
            UnsupportedError,
            "CREATE FLOW",
        ),
        ("SET spark.sql.ansi.enabled = true;", UnsupportedError, "SET in a pipeline file"),
        (
            "CREATE MATERIALIZED VIEW m AS SELECT * FROM STREAM(x);",
            UnsupportedError,
            "only a streaming table does",
        ),
        (
            "CREATE STREAMING TABLE s AS SELECT a, COUNT(*) AS n FROM STREAM(x) GROUP BY a;",
            UnsupportedError,
            "in a streaming table",
        ),
        (
            "CREATE STREAMING TABLE s AS SELECT * FROM STREAM(x) WITH ('startingVersion' = '3');",
            UnsupportedError,
            "STREAM option 'startingVersion'",
        ),
        (
            "CREATE TEMPORARY VIEW t AS SELECT 1 AS a FROM u;\nCREATE MATERIALIZED VIEW t AS SELECT 2 AS a FROM u;",
            SqlError,
            "defined twice",
        ),
    ],
)
def test_statements_ivm_does_not_run_are_one_error_at_their_line(
    tmp_path: Path, text: str, error: type, says: str
) -> None:
    root = write(
        tmp_path,
        {
            "spark-pipeline.yml": "name: a\nstorage: s\nlibraries:\n  - glob:\n      include: t/**\n",
            "t/a.sql": "-- header\n" + text + "\n",
        },
    )
    with pytest.raises(error, match=says) as raised:
        load_pipeline(load_spec(root / "spark-pipeline.yml"))
    assert str(raised.value.location).startswith(str(root / "t" / "a.sql") + ":")


# refreshing: real Spark and Delta ----------------------------------------------------------------


def test_a_pipeline_project_refreshes_incrementally_and_refuses_a_streamed_delete(
    spark: SparkSession, tmp_path: Path
) -> None:
    database = f"t_{uuid.uuid4().hex[:8]}"
    root = shop(tmp_path, database)
    # found from a folder below
    project = Project.open(root / "transformations" / "streams", spark=spark)
    assert (project.root, project.database) == (root, database)
    project.sql("CREATE TABLE orders (id INT, customer_id INT, amount INT) USING DELTA")
    project.sql("CREATE TABLE events (id INT, amount INT) USING DELTA")
    for statements in ROUNDS:
        for statement in statements:
            project.sql(statement)
        reports = {r.view.rpartition(".")[2]: r for r in project.refresh()}
        assert set(reports) == set(SQL_DATASETS)
        assert all(v.ok for v in project.verify())  # every view equals its SELECT recomputed
    assert (
        reports["customer_totals"].action == "incremental"
        and reports["positive_events"].action == "appended"
    )
    assert project.sql("SELECT * FROM customer_totals ORDER BY 1").rows == [(1, 2, 22), (3, 1, 100)]
    assert project.sql("SELECT * FROM positive_events ORDER BY 1").rows == [
        (1, 6),
        (3, 10),
        (5, 14),
    ]
    assert project.sql("SELECT * FROM event_summary").rows == [(3, 30)]
    assert {c.view for c in project.compile()} == {
        f"{database}.{v}" for v in ("customer_totals", "top_customers", "event_summary")
    }
    assert {f"table {database}.{n}" for n in ("orders", "positive_events")} <= {
        n.id for n in project.graph().nodes
    }
    statuses = {s.view.rpartition(".")[2]: s for s in project.status()}
    assert statuses["positive_events"].rows == 3 and not statuses["positive_events"].pending

    project.sql("DELETE FROM events WHERE id = 1")
    with pytest.raises(
        RefreshError, match=r"commit \d+ of .*events \(DELETE\) deletes or updates rows"
    ) as raised:
        project.refresh()
    assert raised.value.location.line == 1 and "skipChangeCommits" in raised.value.hint
    assert project.sql("SELECT COUNT(*) FROM positive_events").rows == [(3,)]  # nothing appended

    # opting out as Spark does: the commit is skipped, later appends still arrive
    streams = root / "transformations" / "streams" / "events.sql"
    streams.write_text(
        streams.read_text().replace(
            "STREAM(events)", "STREAM(events) WITH ('skipChangeCommits' = 'true')"
        )
    )
    project.sql("INSERT INTO events VALUES (6, 1)")
    reports = {r.view.rpartition(".")[2]: r for r in project.refresh()}
    assert "skipped 1 commits" in reports["positive_events"].reason
    assert project.sql("SELECT * FROM positive_events ORDER BY 1").rows == [
        (1, 6),
        (3, 10),
        (5, 14),
        (6, 2),
    ]
    assert project.sql("SELECT * FROM event_summary").rows == [(4, 32)]


def test_a_view_reading_a_missing_python_dataset_is_an_error_at_its_line(
    spark: SparkSession, tmp_path: Path
) -> None:
    database = f"t_{uuid.uuid4().hex[:8]}"
    root = write(
        tmp_path,
        {
            "spark-pipeline.yml": f"name: a\nstorage: s\ndatabase: {database}\nlibraries:\n  - glob:\n      include: t/**\n",
            "t/raw.py": "from pyspark import pipelines as dp\n\n@dp.table\ndef raw():\n    return spark.range(3)\n",
            "t/v.sql": "CREATE MATERIALIZED VIEW v AS\nSELECT id FROM raw;\n",
        },
    )
    project = Project.open(root, spark=spark)
    note = f"raw: Python table ({root / 't' / 'raw.py'}:3), not ivm's: spark-pipelines runs it; SQL views read it as a source table"
    assert project.notes() == [note]
    with pytest.raises(
        SqlError, match=r"reads raw, a Python table at .*raw\.py:3, which is not a table yet"
    ) as raised:
        project.refresh()
    assert str(raised.value.location) == f"{root / 't' / 'v.sql'}:2"
    project.sql("CREATE TABLE raw USING PARQUET AS SELECT id FROM range(3)")
    with pytest.raises(SqlError, match="which is not a Delta table"):
        project.compile()
    project.sql("DROP TABLE raw")
    project.sql("CREATE TABLE raw USING DELTA AS SELECT id FROM range(3)")
    project.refresh()
    assert project.sql("SELECT * FROM v ORDER BY id").rows == [(0,), (1,), (2,)]
    # --json says the note too
    status = CliRunner().invoke(app, ["-p", str(root), "status", "--json"])
    assert status.exit_code == 0, status.output
    assert json.loads(status.stdout)["python_datasets"] == [
        {"name": "raw", "kind": "table", "location": f"{root / 't' / 'raw.py'}:3", "note": note}
    ]


# against the real spark-pipelines command -------------------------------------------------------


def environment(token: str | None = None) -> dict[str, str]:
    """What both commands need: this venv's executables first, this worktree's ivm_sql, the
    loopback address, and (for spark-pipelines) the project's server token."""
    env = {
        **os.environ,
        "PATH": f"{VENV_BIN}:{os.environ['PATH']}",
        "PYSPARK_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYTHONPATH": str(Path(__file__).resolve().parents[1]),
        "COLUMNS": "250",
    }
    env.pop("SPARK_CONNECT_AUTHENTICATE_TOKEN", None)
    if token is not None:
        # what pyspark's client sends when the URL holds none
        env["SPARK_CONNECT_AUTHENTICATE_TOKEN"] = token
    return env


def command(
    args: list[str], cwd: Path, token: str | None = None, timeout: float = 900
) -> subprocess.CompletedProcess:
    return subprocess.run(
        args, cwd=cwd, env=environment(token), capture_output=True, text=True, timeout=timeout
    )


def ivm(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    """`ivm ARGS` run inside ``cwd`` (no --project: the project is found from there)."""
    return command([sys.executable, "-m", "ivm_sql.cli", *args], cwd)


def sdp(cwd: Path, *args: str, token: str | None = None) -> subprocess.CompletedProcess:
    return command([str(VENV_BIN / "spark-pipelines"), *args], cwd, token)


class Served:
    """The project's `ivm server`, for `spark-pipelines --remote` and ivm's commands alike."""

    def __init__(self, root: Path):
        self.root = root

    def __enter__(self) -> Served:
        from ivm_sql import server as servers

        started = ivm(self.root, "server", "start")
        assert started.returncode == 0, started.stderr
        record = servers.read_record(self.root)
        self.remote, self.token = f"sc://localhost:{record.port}", record.token
        return self

    def __exit__(self, *exc) -> None:
        ivm(self.root, "server", "stop")

    def pipelines(self, *args: str) -> subprocess.CompletedProcess:
        return sdp(self.root, "--remote", self.remote, *args, token=self.token)


@pytest.mark.server
def test_the_project_spark_pipelines_init_writes(tmp_path: Path) -> None:
    made = sdp(tmp_path, "init", "--name", "demo")
    assert made.returncode == 0, made.stderr
    root = tmp_path / "demo"
    python_mv, sql_mv = "example_python_materialized_view", "example_sql_materialized_view"
    with Served(root) as served:
        before = ivm(root / "transformations", "refresh")  # found from a folder inside the project
        assert before.returncode == 1
        assert (
            f"{root / 'transformations' / (sql_mv + '.sql')}:2: SQL error: view {sql_mv} reads {python_mv}, a Python materialized view"
            in before.stderr
        )
        assert f"spark-pipelines run --refresh {python_mv}" in before.stderr
        # spark-pipelines runs its Python dataset into the same catalog (the server's), as Delta
        ran = served.pipelines("run", "--refresh", python_mv)
        assert ran.returncode == 0, ran.stdout + ran.stderr
        refreshed = ivm(root, "refresh")
        assert refreshed.returncode == 0, refreshed.stderr
        assert f"default.{sql_mv}" in refreshed.stdout and "created" in refreshed.stdout
        assert (
            f"{python_mv}: Python materialized view ({root / 'transformations' / (python_mv + '.py')}:4), not ivm's"
            in refreshed.stdout
        )
        answer = ivm(
            root,
            "sql",
            f"SELECT collect_list(id) AS ids FROM (SELECT id FROM {sql_mv} ORDER BY id)",
        )
        assert "[0, 2, 4, 6, 8]" in answer.stdout, answer.stdout + answer.stderr
        for checked in (ivm(root, "verify"), ivm(root, "compile"), ivm(root, "graph")):
            assert checked.returncode == 0 and sql_mv in checked.stdout, checked.stderr
        status = ivm(root, "status")
        assert (
            f"default.{sql_mv}" in status.stdout
            and f"{python_mv}: Python materialized view" in status.stdout
        )


def table_location(spark: SparkSession, name: str) -> str:
    return spark.sql(f"DESCRIBE DETAIL {name}").collect()[0].location


@pytest.mark.server
def test_sql_datasets_equal_what_spark_pipelines_run_produces(
    spark: SparkSession, tmp_path: Path
) -> None:
    """ivm (in this process) and spark-pipelines (on its own server and catalog) keep the same
    pipeline over the same Delta files, round after round; both refuse a streamed delete."""
    ours, theirs = f"t_{uuid.uuid4().hex[:8]}", f"t_{uuid.uuid4().hex[:8]}"
    project = Project.open(shop(tmp_path / "ivm", ours), spark=spark)
    project.sql("CREATE TABLE orders (id INT, customer_id INT, amount INT) USING DELTA")
    project.sql("CREATE TABLE events (id INT, amount INT) USING DELTA")
    # the other project's catalog names the same Delta folders as its sources
    sources = "".join(
        f"CREATE TABLE {t} USING DELTA LOCATION '{table_location(spark, f'{ours}.{t}')}';\n"
        for t in ("orders", "events")
    )
    other = write(
        shop(tmp_path / "sdp", theirs),
        {"ivm.yaml": "migrations: migrations\n", "migrations/0001_sources.sql": sources},
    )
    warehouse = other / ".ivm" / "warehouse" / f"{theirs}.db"
    with Served(other) as served:
        migrated = ivm(other, "migrate")
        assert migrated.returncode == 0, migrated.stderr
        for statements in ROUNDS:
            for statement in statements:
                project.sql(statement)
            project.refresh()
            ran = served.pipelines("run")
            assert ran.returncode == 0, ran.stdout + ran.stderr
            for name in SQL_DATASETS:
                expected = rows(spark, spark.read.format("delta").load(str(warehouse / name)))
                assert rows(spark, spark.table(f"{ours}.{name}")) == expected, name
        project.sql("DELETE FROM events WHERE id = 1")
        with pytest.raises(RefreshError, match="deletes or updates rows"):
            project.refresh()
        refused = served.pipelines("run")
        said = refused.stdout + refused.stderr
        (tmp_path / "refused.log").write_text(said)  # to read when the next assertion fails
        assert refused.returncode != 0 and re.search(r"positive_events\W.*FAILED", said), said[
            -3000:
        ]
