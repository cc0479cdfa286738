"""The `ivm` command line, driven through its commands on temporary projects.

Commands run in-process through typer's CliRunner, so they share the test run's one Spark
session (``build_session`` returns the active session instead of starting another); one
test checks that this really happens. One test runs the real executable in a subprocess
with no Java on the machine, which must fail fast without starting Spark.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import typer.main
from pyspark.sql import SparkSession
from typer.testing import CliRunner, Result

import ivm_sql.session
from ivm_sql.cli import app

MakeProject = Callable[[dict[str, str]], Path]
COMMANDS = {
    "init",
    "migrate",
    "compile",
    "graph",
    "refresh",
    "status",
    "history",
    "verify",
    "sql",
    "server",
    "drop",
    "prune",
    "optimize",
}

TABLES = """\
CREATE TABLE customers (id INT, country STRING);
CREATE TABLE orders (id INT, customer_id INT, amount INT);
"""
SEED = """\
INSERT INTO customers VALUES (1, 'UK'), (2, 'US');
INSERT INTO orders VALUES (1, 1, 5), (2, 1, 20), (3, 2, 30);
"""
VIEWS = """\
-- orders worth at least 10: a filter, kept as a bag
CREATE VIEW big_orders AS
SELECT id, amount FROM orders WHERE amount >= 10;

CREATE VIEW revenue AS
SELECT c.country, COUNT(*) AS n, SUM(o.amount) AS total
FROM orders o JOIN customers c ON o.customer_id = c.id
GROUP BY c.country;

CREATE VIEW uk_customers AS
SELECT id FROM customers WHERE country = 'UK';
"""
SHOP = {
    "migrations/0001_tables.sql": TABLES,
    "migrations/0002_seed.sql": SEED,
    "views/shop.sql": VIEWS,
}
VIEW_NAMES = ("big_orders", "revenue", "uk_customers")

# One line of `ivm refresh`: view, rows in, rows out, seconds, strategy.
REFRESH_LINE = re.compile(
    r"^(?P<view>\S+)\s+(?P<rows_in>\d+)\s+(?P<rows_out>\d+)\s+(?P<seconds>\d+\.\d)s\s+(?P<strategy>.+)$"
)


# helpers ---------------------------------------------------------------------------------


def ivm(project: Path, *args: str, wide: bool = False) -> Result:
    """``ivm -p PROJECT ARGS...`` in this process.

    Output that is not a terminal is 80 columns wide for rich, which cuts long table cells
    short; ``wide`` gives it room (COLUMNS) where a test reads tables.
    """
    env = {"COLUMNS": "250"} if wide else None
    return CliRunner().invoke(app, ["-p", str(project), *args], env=env)


def ok(project: Path, *args: str, wide: bool = False) -> str:
    """Run a command that must succeed; its standard output."""
    result = ivm(project, *args, wide=wide)
    assert result.exit_code == 0, (
        f"ivm {' '.join(args)} exited {result.exit_code}:\n{result.output}"
    )
    assert result.exception is None or isinstance(result.exception, SystemExit)
    return result.stdout


def flat(text: str) -> str:
    """``text`` with every run of whitespace (line breaks included) made one space."""
    return " ".join(text.split())


def refresh_lines(stdout: str) -> dict[str, dict[str, str]]:
    """The per-view lines of `ivm refresh`, by view name without its database."""
    lines = stdout.strip().splitlines()
    assert lines[0].split() == ["view", "rows", "in", "rows", "out", "time", "strategy"]
    rows = {}
    for line in lines[1:]:
        match = REFRESH_LINE.match(line)
        assert match, f"not a refresh line: {line!r}"
        rows[match["view"].split(".")[-1]] = match.groupdict()
    return rows


def table_rows(stdout: str) -> list[list[str]]:
    """The body rows of a table printed by rich (box-drawn), cell texts stripped."""
    rows = []
    for line in stdout.splitlines():
        if line.startswith("│"):
            rows.append([cell.strip() for cell in line.strip("│").split("│")])
    return rows


def assert_no_traceback(result: Result) -> None:
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(
        result.exception
    )


def tables_of(spark: SparkSession, database: str) -> set[str]:
    return {t.name for t in spark.catalog.listTables(database)}


def database_of(project: Path) -> str:
    match = re.search(r"^database: (\w+)$", (project / "ivm.yaml").read_text(), re.MULTILINE)
    assert match
    return match.group(1)


@pytest.fixture(autouse=True)
def keep_current_database(request: pytest.FixtureRequest) -> Iterator[None]:
    """The CLI runs USE <database> on the shared session; give the next test its database back."""
    if "spark" not in request.fixturenames:
        yield
        return
    spark: SparkSession = request.getfixturevalue("spark")
    before = spark.catalog.currentDatabase()
    yield
    spark.catalog.setCurrentDatabase(before)


@pytest.fixture(scope="module")
def migrated(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A migrated, never refreshed shop project shared by the tests that only read it."""
    root = tmp_path_factory.mktemp("cli_shop")
    files = {**SHOP, "ivm.yaml": f"database: t_{uuid.uuid4().hex[:8]}\n"}
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    ok(root, "migrate")
    return root


# help (no Spark) ---------------------------------------------------------------------------


def test_help_lists_every_command_and_each_has_help() -> None:
    runner = CliRunner()
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0
    for option in ("--project", "-p", "--verbose"):
        assert option in result.stdout
    commands = set(typer.main.get_command(app).commands)
    assert commands == COMMANDS
    for command in sorted(commands):
        assert command in result.stdout
        sub = runner.invoke(app, [command, "--help"])
        assert sub.exit_code == 0, sub.output
        assert f"ivm {command}" in sub.stdout or "Usage:" in sub.stdout
        assert len(sub.stdout.strip().splitlines()) > 2  # a description and options, not just usage


def test_no_arguments_shows_help() -> None:
    result = CliRunner().invoke(app, [])
    assert "migrate" in result.output and "refresh" in result.output
    assert_no_traceback(result)


# project and configuration errors (no Spark) ---------------------------------------------


def test_missing_ivm_yaml_is_one_clear_error(tmp_path: Path) -> None:
    result = ivm(tmp_path, "status")
    assert result.exit_code == 1
    assert_no_traceback(result)
    assert f"no ivm.yaml or dbt_project.yml in {tmp_path.resolve()}" in flat(result.stderr)
    assert "--project" in result.stderr  # the hint says how to point at a project


def test_unknown_key_in_ivm_yaml_names_key_and_line(tmp_path: Path) -> None:
    (tmp_path / "ivm.yaml").write_text("database: shop\nviewz: views\n")
    for command in ("status", "migrate", "refresh"):
        result = ivm(tmp_path, command)
        assert result.exit_code == 1, command
        assert_no_traceback(result)
        message = flat(result.stderr)
        assert "ivm.yaml:2:" in message
        assert "unknown key 'viewz'" in message
        assert "valid keys are: database, views, migrations, spark" in message


# the session -------------------------------------------------------------------------------


def test_cli_reuses_the_test_session(
    spark: SparkSession, tmp_project: MakeProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Project.open inside the CLI gets the running session back: no second session, same warehouse."""
    warehouse = spark.conf.get("spark.sql.warehouse.dir")
    built = []
    real = ivm_sql.session.build_session

    def spy(*args, **kwargs):
        session = real(*args, **kwargs)
        built.append(session)
        return session

    monkeypatch.setattr(ivm_sql.session, "build_session", spy)
    project = tmp_project({"ivm.yaml": "spark:\n  conf:\n    spark.sql.shuffle.partitions: 7\n"})
    assert "42" in ok(project, "sql", "SELECT 42 AS answer")

    assert len(built) == 1
    assert built[0]._jsparkSession.equals(spark._jsparkSession)
    assert built[0].sparkContext is spark.sparkContext
    assert spark.conf.get("spark.sql.warehouse.dir") == warehouse
    # the project's conf was not applied
    assert spark.conf.get("spark.sql.shuffle.partitions") == "2"
    assert not (project / ".ivm").exists()  # nothing of a new embedded session was set up


# migrate ------------------------------------------------------------------------------------


def test_migrate_lists_files_then_says_up_to_date(
    spark: SparkSession, tmp_project: MakeProject
) -> None:
    project = tmp_project(SHOP)
    first = ok(project, "migrate")
    assert first.splitlines() == ["0001_tables.sql: 2 applied", "0002_seed.sql: 2 applied"]
    again = ok(project, "migrate")
    assert again.splitlines() == ["0001_tables.sql: up to date", "0002_seed.sql: up to date"]
    assert spark.table(f"{database_of(project)}.orders").count() == 3


def test_migrate_without_migrations(spark: SparkSession, tmp_project: MakeProject) -> None:
    assert ok(tmp_project({}), "migrate").strip() == "no migrations found"


# compile ------------------------------------------------------------------------------------


def test_compile_prints_the_merge_and_strategy_and_creates_nothing(
    spark: SparkSession, migrated: Path
) -> None:
    database = database_of(migrated)
    before = tables_of(spark, database)

    text = flat(ok(migrated, "compile"))
    for view in VIEW_NAMES:
        assert f"-- view {database}.{view} ({migrated.resolve() / 'views' / 'shop.sql'}:" in text
        assert re.search(
            rf"-- stage \d+/\d+: {database}\.__ivm_{view}\S* \[\w+\] incremental", text
        ), view
    # big_orders and uk_customers are bags, appended to; revenue, an aggregate no view reads,
    # appended to as per-group deltas
    assert len(re.findall(r"-- each refresh: INSERT INTO", text)) >= len(VIEW_NAMES)

    one = flat(ok(migrated, "compile", "revenue"))
    assert one.count("-- view ") == 1 and f"-- view {database}.revenue " in one
    assert f"INSERT INTO `{database}`.`__ivm_revenue`" in one
    assert "COUNT/SUM/AVG" in one  # the aggregate's strategy says how it is kept

    assert tables_of(spark, database) == before  # compile runs nothing on data
    assert not any(spark.catalog.tableExists(f"{database}.{view}") for view in VIEW_NAMES)


def test_compile_out_writes_one_file_per_view(
    spark: SparkSession, migrated: Path, tmp_path: Path
) -> None:
    database = database_of(migrated)
    before = tables_of(spark, database)
    out = tmp_path / "compiled"
    stdout = ok(migrated, "compile", "--out", str(out))
    assert f"wrote {len(VIEW_NAMES)} files to" in flat(stdout)
    assert sorted(p.name for p in out.iterdir()) == sorted(f"{v}.sql" for v in VIEW_NAMES)
    for view in VIEW_NAMES:
        sql = (out / f"{view}.sql").read_text()
        assert sql.startswith(f"-- view {database}.{view} ")
        assert re.search(r"-- each refresh:\s+(MERGE|INSERT) INTO", sql)
    assert tables_of(spark, database) == before


def test_compile_prints_exactly_what_out_writes(migrated: Path, tmp_path: Path) -> None:
    """Printed SQL is the SQL: lines are not wrapped at the terminal's (or a pipe's) width.

    Today rich wraps stdout at 80 columns when it is not a terminal, which splits `--`
    comments onto lines that are no longer comments.
    """
    ok(migrated, "compile", "revenue", "--out", str(tmp_path))
    written = (tmp_path / "revenue.sql").read_text()
    printed = ok(migrated, "compile", "revenue")
    assert max(len(line) for line in written.splitlines()) > 80  # the case being checked
    assert printed.rstrip("\n") == written.rstrip("\n")


def test_unknown_view_exits_1_listing_the_views(spark: SparkSession, migrated: Path) -> None:
    for command in ("compile", "refresh", "verify"):
        result = ivm(migrated, command, "nope")
        assert result.exit_code == 1, command
        assert_no_traceback(result)
        message = flat(result.stderr)
        assert "no view named nope" in message
        assert "views of this project: big_orders, revenue, uk_customers" in message


# refresh, status, sql, verify ---------------------------------------------------------------


def test_refresh_status_sql_verify_round_trip(
    spark: SparkSession, tmp_project: MakeProject
) -> None:
    project = tmp_project(SHOP)
    database = database_of(project)
    ok(project, "migrate")

    status = table_rows(ok(project, "status", wide=True))
    assert [row[0] for row in status] == [f"{database}.{v}" for v in VIEW_NAMES]
    assert all(row[2] == "never refreshed" for row in status)

    # first refresh: every view created
    created = refresh_lines(ok(project, "refresh"))
    assert sorted(created) == sorted(VIEW_NAMES)
    assert {v: r["strategy"] for v, r in created.items()} == dict.fromkeys(
        VIEW_NAMES, "created (new)"
    )
    assert created["big_orders"]["rows_out"] == "2"
    assert created["uk_customers"]["rows_out"] == "1"
    assert all(float(r["seconds"]) >= 0 for r in created.values())

    # nothing changed: nothing to do
    unchanged = refresh_lines(ok(project, "refresh"))
    assert {
        v: (r["rows_in"], r["rows_out"], r["strategy"]) for v, r in unchanged.items()
    } == dict.fromkeys(VIEW_NAMES, ("0", "0", "unchanged"))

    # change a row through `ivm sql`
    assert table_rows(
        ok(project, "sql", "UPDATE orders SET amount = 50 WHERE id = 1", wide=True)
    ) == [["1"]]
    status = {row[0].split(".")[-1]: row for row in table_rows(ok(project, "status", wide=True))}
    pending = re.compile(rf"{database}\.orders@\d+")
    assert pending.search(status["big_orders"][2]) and pending.search(status["revenue"][2])
    assert status["uk_customers"][2] == "none"
    assert status["big_orders"][3] == "2"

    # refresh applies the change to the views that read orders, and only to them
    changed = refresh_lines(ok(project, "refresh"))
    assert changed["big_orders"]["strategy"] == "incremental"
    assert changed["revenue"]["strategy"] == "incremental"
    assert changed["uk_customers"]["strategy"] == "unchanged"
    assert changed["big_orders"]["rows_in"] == changed["revenue"]["rows_in"] == "1"
    assert int(changed["big_orders"]["rows_out"]) >= 1 and int(changed["revenue"]["rows_out"]) >= 1

    assert table_rows(ok(project, "sql", "SELECT * FROM revenue ORDER BY country", wide=True)) == [
        ["UK", "2", "70"],
        ["US", "1", "30"],
    ]
    assert table_rows(
        ok(project, "sql", "SELECT id, amount FROM big_orders ORDER BY id", wide=True)
    ) == [
        ["1", "50"],
        ["2", "20"],
        ["3", "30"],
    ]
    status = {row[0].split(".")[-1]: row for row in table_rows(ok(project, "status", wide=True))}
    assert all(row[2] == "none" for row in status.values())
    assert status["big_orders"][3] == "3"

    verified = ok(project, "verify")
    assert sorted(verified.split()) == sorted(["ok"] * 3 + [f"{database}.{v}" for v in VIEW_NAMES])

    # a single view can be named
    one = refresh_lines(ok(project, "refresh", "revenue"))
    assert list(one) == ["revenue"] and one["revenue"]["strategy"] == "unchanged"


def test_change_that_cancels_out_leaves_nothing_pending(
    spark: SparkSession, tmp_project: MakeProject
) -> None:
    """An update no view can see (its change consolidates to nothing) is still recorded.

    Today Delta makes no commit for a MERGE whose source is empty, so the stage's version
    record is not advanced: the view stays pending in `ivm status` forever, every later
    refresh redoes the work as "incremental", and rows out repeats the metrics of an
    older commit.
    """
    project = tmp_project(SHOP)
    ok(project, "migrate")
    ok(project, "refresh")
    ok(project, "sql", "UPDATE orders SET customer_id = 1 WHERE id = 2", wide=True)  # already 1

    first = refresh_lines(ok(project, "refresh"))
    assert first["uk_customers"]["strategy"] == "unchanged"
    assert first["big_orders"]["rows_out"] == first["revenue"]["rows_out"] == "0"

    second = refresh_lines(ok(project, "refresh"))
    assert {v: r["strategy"] for v, r in second.items()} == dict.fromkeys(VIEW_NAMES, "unchanged")
    status = table_rows(ok(project, "status", wide=True))
    assert [row[2] for row in status] == ["none"] * len(VIEW_NAMES)
    assert ok(project, "verify").split().count("ok") == len(VIEW_NAMES)


def test_union_whose_branches_name_columns_differently(
    spark: SparkSession, tmp_project: MakeProject
) -> None:
    """A UNION takes its column names from its first branch, even when only a later branch changed.

    Today a refresh after a change to the second branch's table alone fails with
    UNRESOLVED_COLUMN: the change of the union is named after the branch that changed.
    """
    project = tmp_project(
        {
            "migrations/0001_tables.sql": "CREATE TABLE a (x INT);\nCREATE TABLE b (y INT);\n"
            "INSERT INTO a VALUES (1);\nINSERT INTO b VALUES (2);\n",
            "views/u.sql": "CREATE VIEW u AS SELECT x FROM a UNION SELECT y FROM b;\n"
            "CREATE VIEW ua AS SELECT x FROM a UNION ALL SELECT y FROM b;\n",
        }
    )
    ok(project, "migrate")
    ok(project, "refresh")
    ok(project, "sql", "INSERT INTO b VALUES (3)")
    result = ivm(project, "refresh", wide=True)
    assert result.exit_code == 0, result.output
    assert {v: r["strategy"] for v, r in refresh_lines(result.stdout).items()} == {
        "u": "incremental",
        "ua": "incremental",
    }
    assert table_rows(ok(project, "sql", "SELECT x FROM u ORDER BY x", wide=True)) == [
        ["1"],
        ["2"],
        ["3"],
    ]
    assert ok(project, "verify").split().count("ok") == 2


def test_verify_before_refresh_fails(spark: SparkSession, migrated: Path) -> None:
    result = ivm(migrated, "verify", "big_orders")
    assert result.exit_code == 1
    assert_no_traceback(result)
    assert "never refreshed" in result.stdout


def test_bad_sql_statement_is_one_line_without_traceback(
    spark: SparkSession, migrated: Path
) -> None:
    result = ivm(migrated, "sql", "SELEC 1")
    assert result.exit_code == 1
    assert_no_traceback(result)
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("SQL error:") and "PARSE_SYNTAX_ERROR" in lines[0]


def test_long_error_is_still_one_line(spark: SparkSession, migrated: Path) -> None:
    """Spark's message for an unknown column is longer than 80 characters; it must not be wrapped."""
    result = ivm(migrated, "sql", "SELECT nope FROM orders")
    assert result.exit_code == 1
    assert_no_traceback(result)
    lines = result.stderr.strip().splitlines()
    assert "UNRESOLVED_COLUMN" in lines[0]
    assert len(lines) == 1, lines


@pytest.mark.parametrize(
    ("body", "refused", "line"),
    [
        # non-deterministic: no single correct content to maintain, ever
        (
            "SELECT o.id,\n       o.amount * rand() AS noisy\nFROM orders o",
            "non-deterministic function RAND()",
            4,
        ),
        # an order that a stored table cannot keep
        ("SELECT o.id\nFROM orders o\nORDER BY o.id", "ORDER BY", 5),
    ],
    ids=["rand", "order-by"],
)
def test_unsupported_view_names_file_and_line(
    spark: SparkSession, tmp_project: MakeProject, body: str, refused: str, line: int
) -> None:
    """Compile and refresh both refuse the view, pointing at the line of the construct."""
    project = tmp_project(
        {
            **SHOP,
            "views/shop.sql": "CREATE VIEW fine AS SELECT id FROM orders;\n",
            "views/odd.sql": "-- a view ivm cannot keep\nCREATE VIEW odd AS\n" + body + ";\n",
        }
    )
    ok(project, "migrate")
    database = database_of(project)
    for command in ("compile", "refresh"):
        result = ivm(project, command)
        assert result.exit_code == 1, command
        assert_no_traceback(result)
        message = flat(result.stderr)
        assert (
            f"{project.resolve() / 'views' / 'odd.sql'}:{line}: unsupported: {refused}" in message
        ), message
        assert "in view odd" in message and "hint:" in message
    # refresh refused before doing anything
    assert not spark.catalog.tableExists(f"{database}.fine")


# no Java ------------------------------------------------------------------------------------


def test_without_java_status_fails_fast_with_one_message(tmp_path: Path) -> None:
    """The real executable, with no java on PATH and JAVA_HOME pointing nowhere."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "ivm.yaml").write_text("database: shop\n")
    empty_bin = tmp_path / "bin"
    empty_bin.mkdir()
    script = Path(sys.executable).parent / "ivm"
    command = [str(script)] if script.exists() else [sys.executable, "-m", "ivm_sql.cli"]
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("JAVA_HOME", "SPARK_HOME", "PYSPARK_SUBMIT_ARGS", "COLUMNS")
    }
    env.update(PATH=str(empty_bin), JAVA_HOME=str(tmp_path / "no-jdk"))

    result = subprocess.run(
        [*command, "-p", str(project), "status"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert result.returncode != 0
    assert "Traceback" not in result.stderr + result.stdout
    message = flat(result.stderr)
    assert "Java 17 or newer is required" in message
    assert "Install OpenJDK 17" in message
    assert result.stdout.strip() == ""
    assert not (project / ".ivm").exists()  # Spark was never set up
