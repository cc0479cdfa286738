"""Bad input: one clear message, a non-zero exit, no traceback, and nothing changed.

A corpus of mistakes in views files, ivm.yaml, migrations, sources and on the command line,
each run through the `ivm` command in-process (typer's CliRunner), on a project of its own.
Every case checks:

- the exit code is not zero;
- standard error holds exactly one message (its first line, then at most a hint), which
  says what is wrong and names the file and line where there is one (``views/v.sql:3``);
- no traceback, and no raw sqlglot, Python or Java object in the output;
- nothing changed: the project's files are as they were, and the catalog's databases and
  tables too (checked where Spark runs; where it need not, it must not even start).

Cases that need no catalog run with Spark's start forbidden, so a views file or ivm.yaml
mistake is known to be reported before Spark is paid for. The others share the test run's
Spark session: the views and command-line cases one migrated database, the migration cases
a database each. The server cases (a server record others could read, a missing or wrong
token) run the `ivm` executable in a process of its own, as a user would, since a Spark
session already in the process would be used instead of the server; those a server must
refuse meet a real one (marked ``server``).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import pytest
from pyspark.sql import SparkSession
from test_cli import keep_current_database, tables_of  # noqa: F401 (autouse fixture)
from typer.testing import CliRunner, Result

import ivm_sql.session
from ivm_sql import server as servers
from ivm_sql.cli import app

SHOP_TABLES = """\
CREATE TABLE customers (id INT, country STRING) USING DELTA;
CREATE TABLE orders (id INT, customer_id INT, amount INT) USING DELTA;
INSERT INTO customers VALUES (1, 'UK');
CREATE TABLE visits (id INT) USING PARQUET;
"""
FINE_VIEW = "CREATE VIEW fine AS SELECT id FROM orders;\n"
RAW = (
    "Traceback",
    "<Token",
    "TokenType",
    "<class '",
    "py4j",
    "java.",
    "org.apache",
    "\tat ",
    "Exception:",
)


@dataclass(frozen=True)
class Case:
    """One mistake: the project's files (text, or bytes), the command line after
    ``ivm -p PROJECT``, words the message says, and the ``file:line`` it names (file relative to
    the project; None where no file is to blame)."""

    id: str
    files: dict[str, str | bytes]
    args: tuple[str, ...]
    says: str
    at: str | None = None
    # migrations: what the database holds after (None: no database)
    tables_after: frozenset[str] | None = None
    # the project gets an ivm.yaml naming its database, unless the case writes one
    config: bool = True

    def __str__(self) -> str:
        return self.id


def views(text: str | bytes, name: str = "v.sql") -> dict[str, str | bytes]:
    return {f"views/{name}": text}


# views files: found before Spark starts -----------------------------------------------------

VIEW_SYNTAX = [
    Case(
        "second-statement-broken",
        views("CREATE VIEW a AS SELECT 1 AS x FROM t;\n\nCREATE VIEW b AS\nSELECT x FROM;\n"),
        ("compile",),
        "expected table name but found the end of the statement",
        "views/v.sql:4",
    ),
    Case(
        "reserved-word-as-view-name",
        views("-- a view\nCREATE VIEW select AS SELECT 1 AS x FROM t;\n"),
        ("compile",),
        "quote it in backticks: `select`",
        "views/v.sql:2",
    ),
    Case(
        "reserved-word-as-alias",
        views("CREATE VIEW v AS\nSELECT 1 AS select\nFROM t;\n"),
        ("compile",),
        "quote it in backticks: `select`",
        "views/v.sql:2",
    ),
    Case(
        "unclosed-string",
        views("CREATE VIEW v AS\nSELECT 'oops FROM t;\n"),
        ("compile",),
        "unclosed quote",
        "views/v.sql:2",
    ),
    Case(
        "unclosed-comment",
        views("CREATE VIEW v AS SELECT 1 AS x FROM t;\n\n/* never closed\n"),
        ("compile",),
        "unclosed quote or comment",
        "views/v.sql:3",
    ),
    Case(
        "unclosed-backtick",
        views("CREATE VIEW v AS\nSELECT `a FROM t;\n"),
        ("compile",),
        "unclosed quote",
        "views/v.sql:2",
    ),
    Case(
        "empty-where",
        views("CREATE VIEW v AS\nSELECT a FROM t\nWHERE;\n"),
        ("compile",),
        "incomplete expression near 'WHERE'",
        "views/v.sql:3",
    ),
    Case(
        "unbalanced-parenthesis",
        views("CREATE VIEW v AS\nSELECT (a FROM t;\n"),
        ("compile",),
        "expected ')'",
        "views/v.sql:2",
    ),
    Case(
        "extra-word",
        views("CREATE VIEW v AS\nSELECT a\nFROM t t2 t3;\n"),
        ("compile",),
        "unexpected token near 't3'",
        "views/v.sql:3",
    ),
    Case(
        "misspelled-select",
        views("CREATE VIEW v AS\nSELEC a FROM t;\n"),
        ("compile",),
        "syntax error",
        "views/v.sql:2",
    ),
    Case(
        "join-without-table",
        views("CREATE VIEW v AS\nSELECT a FROM t JOIN;\n"),
        ("compile",),
        "expected table name",
        "views/v.sql:2",
    ),
    Case(
        "with-without-query",
        views("CREATE VIEW v AS WITH;\n"),
        ("compile",),
        "syntax error",
        "views/v.sql:1",
    ),
    Case(
        "garbled-header",
        views("\nCREATE VIEW a b AS SELECT 1 AS x FROM t;\n"),
        ("compile",),
        "does not read as CREATE VIEW name",
        "views/v.sql:2",
    ),
    Case(
        "incomplete-comparison",
        views("CREATE VIEW v AS\nSELECT a FROM t\nWHERE a =;\n"),
        ("compile",),
        "incomplete expression near '='",
        "views/v.sql:3",
    ),
    Case(
        "not-utf8",
        views(b"CREATE VIEW v AS\nSELECT '\xff' AS x FROM t;\n"),
        ("compile",),
        "not UTF-8",
        "views/v.sql:2",
    ),
]

VIEW_STATEMENTS = [
    Case(
        "create-table-in-views",
        views("CREATE VIEW ok AS SELECT 1 AS x FROM t;\nCREATE TABLE x (a INT);\n"),
        ("compile",),
        "only CREATE VIEW statements belong in a views file, found CREATE",
        "views/v.sql:2",
    ),
    Case(
        "insert-in-views",
        views("\nINSERT INTO t VALUES (1);\n"),
        ("compile",),
        "found INSERT",
        "views/v.sql:2",
    ),
    Case(
        "bare-select-in-views", views("SELECT 1;\n"), ("compile",), "found SELECT", "views/v.sql:1"
    ),
    Case("drop-in-views", views("DROP VIEW v;\n"), ("compile",), "found DROP", "views/v.sql:1"),
    Case(
        "prose-in-views",
        views("these are my views;\n"),
        ("compile",),
        "syntax error: unexpected token near 'my'",
        "views/v.sql:1",
    ),
    Case(
        "unknown-statement-in-views",
        views("\nVACUUM t;\n"),
        ("compile",),
        "found VACUUM",
        "views/v.sql:2",
    ),
    Case(
        "view-without-query",
        views("CREATE VIEW v;\n"),
        ("compile",),
        "a view needs AS SELECT",
        "views/v.sql:1",
    ),
    Case(
        "same-view-twice-in-a-file",
        views("CREATE VIEW v AS SELECT 1 AS x FROM t;\n\nCREATE VIEW V AS SELECT 2 AS x FROM t;\n"),
        ("compile",),
        "view v is defined twice",
        "views/v.sql:3",
    ),
    Case(
        "same-view-in-two-files",
        {
            **views("CREATE VIEW v AS SELECT 1 AS x FROM t;\n", "a.sql"),
            **views("\nCREATE VIEW v AS SELECT 2 AS x FROM t;\n", "b.sql"),
        },
        ("compile",),
        "view v is defined twice",
        "views/b.sql:2",
    ),
    Case(
        "view-name-with-a-space",
        views("CREATE VIEW `my view` AS SELECT 1 AS x FROM t;\n"),
        ("compile",),
        "view name 'my view' is not a name Spark's catalog takes",
        "views/v.sql:1",
    ),
    Case(
        "view-name-not-ascii",
        views("\nCREATE VIEW `übersicht` AS SELECT 1 AS x FROM t;\n"),
        ("compile",),
        "is not a name Spark's catalog takes",
        "views/v.sql:2",
    ),
    Case(
        "view-name-with-a-database",
        views("CREATE VIEW other.v AS SELECT 1 AS x FROM t;\n"),
        ("compile",),
        "view other.v names a database",
        "views/v.sql:1",
    ),
    Case(
        "internal-view-name",
        views("CREATE VIEW __ivm_v AS SELECT 1 AS x FROM t;\n"),
        ("compile",),
        "reserved for ivm",
        "views/v.sql:1",
    ),
    Case(
        "bad-refresh-property",
        views(
            "CREATE VIEW v TBLPROPERTIES ('ivm.refresh' = 'sometimes') AS SELECT 1 AS x FROM t;\n"
        ),
        ("compile",),
        "ivm.refresh must be one of AUTO, INCREMENTAL, INCREMENTAL STRICT, FULL",
        "views/v.sql:1",
    ),
    Case(
        "unknown-refresh-policy",
        views("CREATE MATERIALIZED VIEW v\nREFRESH POLICY EAGER\nAS SELECT 1 AS x FROM t;\n"),
        ("compile",),
        "unknown refresh policy EAGER",
        "views/v.sql:2",
    ),
    Case(
        "forbidden-table-property",
        views(
            "CREATE MATERIALIZED VIEW v\nTBLPROPERTIES ('delta.enableChangeDataFeed' = 'false')\nAS SELECT 1 AS x FROM t;\n"
        ),
        ("compile",),
        "cannot set table property delta.enableChangeDataFeed",
        "views/v.sql:2",
    ),
    Case(
        "refresh-names-a-broken-file",
        views("CREATE VIEW v AS\nSELECT a FROM t\nWHERE;\n"),
        ("refresh",),
        "incomplete expression",
        "views/v.sql:3",
    ),
    Case(
        "status-reads-a-broken-file",
        views("CREATE VIEW v AS\nSELECT a FROM t\nWHERE;\n"),
        ("status",),
        "incomplete expression",
        "views/v.sql:3",
    ),
]

# ivm.yaml: found when the project opens -------------------------------------------------------

CONFIG = [
    Case(
        "unknown-key",
        {"ivm.yaml": "database: shop\nviewz: views\n"},
        ("status",),
        "unknown key 'viewz'",
        "ivm.yaml:2",
    ),
    Case(
        "unknown-spark-key",
        {"ivm.yaml": "spark:\n  memory: 4g\n"},
        ("status",),
        "unknown key 'memory' in spark",
        "ivm.yaml:2",
    ),
    Case(
        "unknown-refresh-key",
        {"ivm.yaml": "refresh:\n  often: yes\n"},
        ("status",),
        "unknown key 'often' in refresh",
        "ivm.yaml:2",
    ),
    Case(
        "views-is-a-list",
        {"ivm.yaml": "views: [a, b]\n"},
        ("status",),
        "views must be a string, not a list",
        "ivm.yaml:1",
    ),
    Case(
        "database-is-a-number",
        {"ivm.yaml": "database: 42\n"},
        ("status",),
        "database must be a string",
        "ivm.yaml:1",
    ),
    Case(
        "database-not-an-identifier",
        {"ivm.yaml": "# shop\ndatabase: my-shop\n"},
        ("status",),
        "not a plain identifier",
        "ivm.yaml:2",
    ),
    Case(
        "spark-is-a-string",
        {"ivm.yaml": "spark: local\n"},
        ("status",),
        "spark must be a mapping",
        "ivm.yaml:1",
    ),
    Case(
        "conf-value-is-a-mapping",
        {"ivm.yaml": "spark:\n  conf:\n    spark.x:\n      nested: 1\n"},
        ("status",),
        "spark.conf value for 'spark.x'",
        "ivm.yaml:4",
    ),
    Case(
        "unclosed-bracket",
        {"ivm.yaml": "database: shop\nspark:\n  master: [local\n  app_name: x\n"},
        ("status",),
        "invalid YAML",
        "ivm.yaml:4",
    ),
    Case(
        "key-given-twice",
        {"ivm.yaml": "database: a\ndatabase: b\n"},
        ("status",),
        "key 'database' is given twice",
        "ivm.yaml:2",
    ),
    Case(
        "recompute-above-negative",
        {"ivm.yaml": "refresh:\n  recompute_above: -1\n"},
        ("status",),
        "positive number or never",
        "ivm.yaml:2",
    ),
    Case(
        "unknown-policy-in-config",
        {"ivm.yaml": "refresh:\n  policy: eager\n"},
        ("status",),
        "refresh.policy must be a refresh policy, not eager",
        "ivm.yaml:2",
    ),
    Case(
        "recompute-above-a-word",
        {"ivm.yaml": "refresh:\n  recompute_above: sometimes\n"},
        ("status",),
        "not sometimes",
        "ivm.yaml:2",
    ),
    Case(
        "views-folder-missing",
        {"ivm.yaml": "views: nowhere\n"},
        ("compile",),
        "does not exist",
        "ivm.yaml:1",
    ),
    Case(
        "views-folder-missing-on-refresh",
        {"ivm.yaml": "# views\nviews: sql/views\n"},
        ("refresh",),
        "does not exist",
        "ivm.yaml:2",
    ),
    Case(
        "views-is-a-file",
        {"ivm.yaml": "views: notes.txt\n", "notes.txt": "CREATE VIEW v AS SELECT 1 AS x"},
        ("status",),
        "notes.txt is not a folder",
        "ivm.yaml:1",
    ),
    Case(
        "key-is-a-number",
        {"ivm.yaml": "1: x\n"},
        ("status",),
        "keys in the top level must be names",
        "ivm.yaml:1",
    ),
    Case(
        "top-level-is-a-list",
        {"ivm.yaml": "- database\n- views\n"},
        ("status",),
        "the top level must be a mapping",
        "ivm.yaml:1",
        config=False,
    ),
    Case(
        "app-name-is-a-number",
        {"ivm.yaml": "spark:\n  app_name: 7\n"},
        ("status",),
        "spark.app_name must be a string",
        "ivm.yaml:2",
    ),
    Case(
        "master-is-empty",
        {"ivm.yaml": "spark:\n  master:\n"},
        ("status",),
        "spark.master must be a string, not empty",
        "ivm.yaml:2",
    ),
    Case(
        "tab-indentation",
        {"ivm.yaml": "spark:\n\tmaster: local\n"},
        ("status",),
        "invalid YAML",
        "ivm.yaml:2",
    ),
    Case(
        "config-not-utf8",
        {"ivm.yaml": b"database: caf\xe9\n"},
        ("status",),
        "not UTF-8",
        "ivm.yaml",
    ),
    Case(
        "token-in-remote-url",
        {"ivm.yaml": "spark:\n  remote: sc://host:15002/;token=s3cret\n"},
        ("status",),
        "spark.remote must not hold the server's token",
        "ivm.yaml:2",
    ),
    Case(
        "token-in-spark-conf",
        {"ivm.yaml": "spark:\n  conf:\n    spark.connect.authenticate.token: s3cret\n"},
        ("status",),
        "spark.conf must not set spark.connect.authenticate.token",
        "ivm.yaml:3",
    ),
    Case(
        "token-env-without-remote",
        {"ivm.yaml": "# mine\nspark:\n  token_env: SHOP_TOKEN\n"},
        ("status",),
        "spark.token_env is set without spark.remote",
        "ivm.yaml:3",
    ),
]

# Spark Declarative Pipelines projects: the spec, its libraries and their statements -----------

SPEC = "name: shop\nstorage: file:///tmp/storage\nlibraries:\n  - glob:\n      include: transformations/**\n"
MV = "CREATE MATERIALIZED VIEW fine AS SELECT id FROM orders;\n"


def pipeline(files: dict[str, str], spec: str = SPEC) -> dict[str, str | bytes]:
    return {"spark-pipeline.yml": spec, **files}


PIPELINES = [
    Case(
        "spec-unknown-field",
        pipeline({"transformations/v.sql": MV}, SPEC + "schedule: hourly\n"),
        ("status",),
        "unknown key 'schedule' in the pipeline spec",
        "spark-pipeline.yml:6",
        config=False,
    ),
    Case(
        "spec-without-storage",
        pipeline({"transformations/v.sql": MV}, "name: shop\n"),
        ("compile",),
        "the pipeline spec has no storage",
        "spark-pipeline.yml:1",
        config=False,
    ),
    Case(
        "spec-other-catalog",
        pipeline({"transformations/v.sql": MV}, "catalog: unity\n" + SPEC),
        ("compile",),
        "catalog 'unity': ivm keeps its tables in Spark's session catalog",
        "spark-pipeline.yml:1",
        config=False,
    ),
    Case(
        "two-spec-files",
        {**pipeline({"transformations/v.sql": MV}), "spark-pipeline.yaml": SPEC},
        ("status",),
        "two pipeline specs",
        "spark-pipeline.yml",
        config=False,
    ),
    Case(
        "library-folder-missing",
        pipeline({"transformationz/v.sql": MV}),
        ("refresh",),
        "library folder transformations does not exist",
        "spark-pipeline.yml:5",
        config=False,
    ),
    Case(
        "library-glob-matches-nothing",
        pipeline({"transformations/v.sql": MV}, SPEC.replace("transformations/**", "extra.sql")),
        ("compile",),
        "library glob 'extra.sql' matches no file",
        "spark-pipeline.yml:5",
        config=False,
    ),
    Case(
        "library-glob-with-a-suffix",
        pipeline(
            {"transformations/v.sql": MV},
            SPEC.replace("transformations/**", "transformations/**/*.sql"),
        ),
        ("compile",),
        "is neither a file path nor a folder/**",
        "spark-pipeline.yml:5",
        config=False,
    ),
    Case(
        "library-holds-a-text-file",
        pipeline({"transformations/v.sql": MV, "transformations/notes.txt": "todo"}),
        ("compile",),
        "notes.txt is neither SQL (.sql) nor Python (.py)",
        "spark-pipeline.yml:5",
        config=False,
    ),
    Case(
        "create-flow",
        pipeline(
            {
                "transformations/f.sql": MV
                + "\nCREATE FLOW more AS INSERT INTO fine BY NAME SELECT id FROM orders;\n"
            }
        ),
        ("compile",),
        "CREATE FLOW",
        "transformations/f.sql:3",
        config=False,
    ),
    Case(
        "set-in-a-pipeline-file",
        pipeline({"transformations/f.sql": "SET spark.sql.ansi.enabled = true;\n" + MV}),
        ("compile",),
        "SET in a pipeline file",
        "transformations/f.sql:1",
        config=False,
    ),
    Case(
        "stream-in-a-materialized-view",
        pipeline(
            {
                "transformations/f.sql": "CREATE MATERIALIZED VIEW m AS\nSELECT id FROM STREAM(orders);\n"
            }
        ),
        ("compile",),
        "only a streaming table does",
        "transformations/f.sql:2",
        config=False,
    ),
    Case(
        "unknown-stream-option",
        pipeline(
            {
                "transformations/f.sql": "CREATE STREAMING TABLE s AS\nSELECT id FROM STREAM(orders) WITH ('maxFilesPerTrigger' = '1');\n"
            }
        ),
        ("compile",),
        "STREAM option 'maxFilesPerTrigger'",
        "transformations/f.sql:2",
        config=False,
    ),
    Case(
        "stream-from-a-view",
        pipeline(
            {
                "transformations/f.sql": MV
                + "CREATE STREAMING TABLE s AS SELECT id FROM STREAM(fine);\n"
            }
        ),
        ("refresh",),
        "streams from view fine",
        "transformations/f.sql:2",
        config=False,
    ),
    Case(
        "ivm-yaml-disagrees-on-database",
        pipeline(
            {"transformations/v.sql": MV, "ivm.yaml": "database: other\n"},
            SPEC + "database: shop\n",
        ),
        ("status",),
        "ivm.yaml's database other is not the pipeline's (shop",
        "ivm.yaml:1",
        config=False,
    ),
    Case(
        "ivm-yaml-names-views",
        pipeline({"transformations/v.sql": MV, "ivm.yaml": "# mine\nviews: views\n"}),
        ("compile",),
        "ivm.yaml names a views folder, but spark-pipeline.yml beside it defines the views",
        "ivm.yaml:2",
        config=False,
    ),
]

# the command line: found before Spark starts --------------------------------------------------

COMMAND_LINE = [
    Case(
        "no-ivm-yaml",
        {"views/v.sql": FINE_VIEW},
        ("status",),
        "no ivm.yaml or dbt_project.yml in",
        config=False,
    ),
    Case(
        "ivm-yaml-is-a-folder",
        {"ivm.yaml/readme.txt": "not a file"},
        ("compile",),
        "no ivm.yaml or dbt_project.yml in",
        config=False,
    ),
    Case(
        "init-over-a-project",
        {"ivm.yaml": "database: mine\n"},
        ("init",),
        "ivm.yaml already exists, and ivm init never overwrites a file",
        "ivm.yaml",
    ),
    Case(
        "init-over-an-example",
        {"views/events.sql": "-- mine\n"},
        ("init",),
        "views/events.sql already exists",
        "views/events.sql",
        config=False,
    ),
]

# Typer refuses these before any command runs (exit code 2, its usage panel).
USAGE = [
    pytest.param(("frobnicate",), "No such command", id="unknown-command"),
    pytest.param(("refresh", "--fulll"), "No such option", id="misspelled-flag"),
    pytest.param(("sql",), "Missing argument", id="sql-without-statement"),
    pytest.param(("graph", "--format", "jpeg"), "Invalid value", id="unknown-graph-format"),
    pytest.param(("--colour", "status"), "No such option", id="unknown-global-option"),
    pytest.param(("compile", "--out"), "requires an argument", id="out-without-folder"),
]

# views that need the catalog, on a migrated database ------------------------------------------

PYTHON_TABLE = (
    "from pyspark import pipelines as dp\n\n@dp.table\ndef {name}():\n    return spark.range(3)\n"
)
CATALOG = [
    Case(
        "missing-table",
        views("CREATE VIEW v AS\nSELECT id FROM nope;\n"),
        ("compile",),
        "reads {db}.nope, which does not exist",
        "views/v.sql:2",
    ),
    Case(
        "missing-table-on-refresh",
        views("CREATE VIEW v AS\nSELECT id FROM nope;\n"),
        ("refresh",),
        "which does not exist",
        "views/v.sql:2",
    ),
    Case(
        "missing-table-in-other-database",
        views("CREATE VIEW v AS SELECT a FROM nodb.t;\n"),
        ("compile",),
        "reads nodb.t, which does not exist",
        "views/v.sql:1",
    ),
    Case(
        "missing-column",
        views("CREATE VIEW v AS\nSELECT id,\n  nope\nFROM orders;\n"),
        ("compile",),
        "column nope does not exist",
        "views/v.sql:3",
    ),
    Case(
        "missing-column-on-refresh",
        views("CREATE VIEW v AS\nSELECT id,\n  nope\nFROM orders;\n"),
        ("refresh",),
        "column nope does not exist",
        "views/v.sql:3",
    ),
    Case(
        "source-not-delta",
        views(
            "CREATE VIEW fine AS SELECT id FROM orders;\n\nCREATE VIEW v AS\nSELECT id FROM visits;\n"
        ),
        ("refresh",),
        "{db}.visits is not a Delta table",
        "views/v.sql:3",
    ),
    Case(
        "view-named-like-a-table",
        views(FINE_VIEW + "\nCREATE VIEW orders AS SELECT id FROM customers;\n"),
        ("compile",),
        "view orders has the name of a table",
        "views/v.sql:3",
    ),
    Case(
        "view-named-like-a-table-on-refresh",
        views("CREATE VIEW customers AS SELECT id FROM orders;\n"),
        ("refresh",),
        "view customers has the name of a table",
        "views/v.sql:1",
    ),
    Case(
        "view-named-like-the-table-it-reads",
        views("CREATE VIEW orders AS SELECT id FROM orders;\n"),
        ("compile",),
        "has the name of a table",
        "views/v.sql:1",
    ),
    Case(
        "incremental-policy-over-a-global-percentile",
        views(
            "CREATE MATERIALIZED VIEW v\nREFRESH POLICY INCREMENTAL AS\nSELECT\npercentile(id, 0.5) AS p FROM orders;\n"
        ),
        ("compile",),
        "REFRESH POLICY INCREMENTAL, but it cannot be maintained incrementally",
        "views/v.sql:4",
    ),
    Case(
        "partitioned-by-a-missing-column",
        views("CREATE MATERIALIZED VIEW v\nPARTITIONED BY (country)\nAS SELECT id FROM orders;\n"),
        ("refresh",),
        "PARTITIONED BY country: view v returns no column country",
        "views/v.sql:2",
    ),
    Case(
        "view-reads-itself",
        views("CREATE VIEW v AS SELECT * FROM v;\n"),
        ("compile",),
        "cycle",
        "views/v.sql:1",
    ),
    Case(
        "views-read-each-other",
        views("CREATE VIEW a AS SELECT * FROM b;\nCREATE VIEW b AS SELECT * FROM a;\n"),
        ("compile",),
        "cycle",
        "views/v.sql:",
    ),
    Case(
        "non-deterministic",
        views("CREATE VIEW v AS\nSELECT id, rand() AS r FROM orders;\n"),
        ("compile",),
        "non-deterministic function RAND()",
        "views/v.sql:2",
    ),
    Case(
        "table-function-of-the-time",
        views(
            "CREATE VIEW v AS\nSELECT o.id, r.id AS n\nFROM orders o JOIN range(0, unix_timestamp(now()) % 10) AS r ON r.id = o.id;\n"
        ),
        ("compile",),
        "whose rows are not fixed (it calls NOW())",
        "views/v.sql:3",
    ),
    Case(
        "order-by-without-limit",
        views("CREATE VIEW v AS\nSELECT id FROM orders\nORDER BY id;\n"),
        ("refresh",),
        "ORDER BY",
        "views/v.sql:3",
    ),
    Case(
        "column-list-too-long",
        views("CREATE VIEW v (a, b) AS SELECT id FROM orders;\n"),
        ("compile",),
        "names 2 columns but its SELECT returns 1",
        "views/v.sql:1",
    ),
    Case(
        "two-columns-one-name",
        views("CREATE VIEW v AS SELECT id, amount AS id FROM orders;\n"),
        ("compile",),
        "two columns named id",
        "views/v.sql:1",
    ),
    Case(
        "internal-column-name",
        views("CREATE VIEW v AS SELECT id AS __ivm_w FROM orders;\n"),
        ("compile",),
        "reserved for ivm",
        "views/v.sql:1",
    ),
    Case(
        "backtick-in-column-name",
        views("CREATE VIEW v AS\nSELECT id AS `a``b` FROM orders;\n"),
        ("compile",),
        "holds a backtick",
        "views/v.sql:2",
    ),
    Case(
        "unknown-function",
        views("CREATE VIEW v AS SELECT nofunc(id) AS x FROM orders;\n"),
        ("compile",),
        "UNRESOLVED_ROUTINE",
        "views/v.sql:1",
    ),
    Case(
        "aggregate-without-group-by",
        views("CREATE VIEW v AS SELECT customer_id, COUNT(*) AS n FROM orders;\n"),
        ("compile",),
        "MISSING_GROUP_BY",
        "views/v.sql:1",
    ),
    Case(
        "hive-grouping-id",
        views(
            "CREATE VIEW v AS\nSELECT customer_id, grouping__id AS g FROM orders GROUP BY customer_id WITH ROLLUP;\n"
        ),
        ("compile",),
        "grouping__id",
        "views/v.sql:2",
    ),
    Case(
        "scalar-subquery-of-many-rows",
        views("CREATE VIEW v AS SELECT id, (SELECT id FROM customers) AS c FROM orders;\n"),
        ("compile",),
        "scalar subquery",
        "views/v.sql:1",
    ),
    Case("unknown-view-compile", views(FINE_VIEW), ("compile", "nope"), "no view named nope"),
    Case("unknown-view-refresh", views(FINE_VIEW), ("refresh", "nope"), "no view named nope"),
    Case("unknown-view-verify", views(FINE_VIEW), ("verify", "nope"), "no view named nope"),
    Case("unknown-view-graph", views(FINE_VIEW), ("graph", "nope"), "no view named nope"),
    Case("sql-syntax-error", views(FINE_VIEW), ("sql", "SELEC 1"), "PARSE_SYNTAX_ERROR"),
    Case(
        "sql-missing-table",
        views(FINE_VIEW),
        ("sql", "SELECT * FROM nope"),
        "TABLE_OR_VIEW_NOT_FOUND",
    ),
    Case(
        "python-dataset-not-run-yet",
        pipeline(
            {
                "transformations/raw.py": PYTHON_TABLE.format(name="raw"),
                "transformations/v.sql": "CREATE MATERIALIZED VIEW v AS\nSELECT id FROM raw;\n",
            },
            SPEC + "database: {db}\n",
        ),
        ("refresh",),
        "view v reads raw, a Python table at",
        "transformations/v.sql:2",
    ),
    Case(
        "python-dataset-not-delta",
        pipeline(
            {
                "transformations/visits.py": PYTHON_TABLE.format(name="visits"),
                "transformations/v.sql": "CREATE MATERIALIZED VIEW v AS\nSELECT id FROM visits;\n",
            },
            SPEC + "database: {db}\n",
        ),
        ("compile",),
        "view v reads visits, a Python table at",
        "transformations/v.sql:2",
    ),
    Case(
        "compile-out-is-a-file",
        {**views(FINE_VIEW), "out.txt": "mine"},
        ("compile", "--out", "{root}/out.txt"),
        "out.txt is not a folder",
    ),
]

# migrations, each on a database of its own ----------------------------------------------------

NOTHING = None  # the database was not even created
MIGRATIONS = [
    Case(
        "migration-name-not-numbered",
        {"migrations/create.sql": "CREATE TABLE a (x INT);\n"},
        ("migrate",),
        "migration file name 'create.sql' is not NNNN_name.sql",
        "migrations/create.sql",
    ),
    Case(
        "migration-name-upper-case",
        {"migrations/0001_Create.sql": "CREATE TABLE a (x INT);\n"},
        ("migrate",),
        "is not NNNN_name.sql",
        "migrations/0001_Create.sql",
    ),
    Case(
        "migrations-share-a-number",
        {
            "migrations/0001_a.sql": "CREATE TABLE a (x INT);\n",
            "migrations/1_b.sql": "CREATE TABLE b (x INT);\n",
        },
        ("migrate",),
        "have the same number 1",
        "migrations/1_b.sql",
    ),
    Case(
        "migration-unclosed-quote",
        {"migrations/0001_a.sql": "CREATE TABLE a (x STRING);\nINSERT INTO a VALUES ('x);\n"},
        ("migrate",),
        "unclosed quote",
        "migrations/0001_a.sql:2",
    ),
    Case(
        "migration-not-utf8",
        {
            "migrations/0001_a.sql": b"CREATE TABLE a (x STRING);\n\nINSERT INTO a VALUES ('\xff');\n"
        },
        ("migrate",),
        "not UTF-8",
        "migrations/0001_a.sql:3",
    ),
    Case(
        "migrations-folder-missing",
        {
            "ivm.yaml": "migrations: migratoins\n",
            "migrations/0001_a.sql": "CREATE TABLE a (x INT);\n",
        },
        ("migrate",),
        "folder",
        "ivm.yaml:1",
    ),
    Case(
        "migrations-is-a-file",
        {"ivm.yaml": "migrations: m.sql\n", "m.sql": "CREATE TABLE a (x INT);\n"},
        ("migrate",),
        "m.sql is not a folder",
        "ivm.yaml:1",
    ),
    Case(
        "migration-fails-half-way",
        {"migrations/0001_a.sql": "CREATE TABLE a (x INT);\n\nCREATE TABEL b (y INT);\n"},
        ("migrate",),
        "statement 2 of 0001_a.sql failed",
        "migrations/0001_a.sql:3",
        frozenset({"ivm_migrations", "a"}),
    ),
    Case(
        "migration-inserts-into-missing-table",
        {"migrations/0001_a.sql": "CREATE TABLE a (x INT);\nINSERT INTO nope VALUES (1);\n"},
        ("migrate",),
        "TABLE_OR_VIEW_NOT_FOUND",
        "migrations/0001_a.sql:2",
        frozenset({"ivm_migrations", "a"}),
    ),
    Case(
        "second-migration-fails",
        {
            "migrations/0001_a.sql": "CREATE TABLE a (x INT);\n",
            "migrations/0002_b.sql": "-- b\nSELECT nope FROM a;\n",
        },
        ("migrate",),
        "statement 1 of 0002_b.sql failed",
        "migrations/0002_b.sql:2",
        frozenset({"ivm_migrations", "a"}),
    ),
]


# running a case ---------------------------------------------------------------------------------


# dbt projects: dbt compiles them, before Spark starts ---------------------------------------

DBT_PROJECT = """name: shop
version: "1.0"
profile: shop
models:
  shop:
    marts:
      +materialized: materialized_view
"""
DBT_PROFILE = "shop:\n  target: dev\n  outputs:\n    dev: {type: spark, method: session, host: NA, schema: shop}\n"


def dbt_project(models: dict[str, str], profile: str = DBT_PROFILE, **files: str) -> dict:
    return {
        "dbt_project.yml": DBT_PROJECT,
        "profiles.yml": profile,
        **{f"models/marts/{name}": text for name, text in models.items()},
        **files,
    }


DBT = [
    Case(
        "dbt-model-does-not-compile",
        dbt_project({"v.sql": "select * from {{ ref('nowhere') }}"}),
        ("compile",),
        "dbt could not compile the project: Compilation Error Model 'model.shop.v' (models/marts/v.sql) depends on a node named 'nowhere'",
        "dbt_project.yml",
        config=False,
    ),
    Case(
        "dbt-profile-missing",
        dbt_project({"v.sql": "select 1 as one"}, profile="other: {}\n"),
        ("refresh",),
        "Could not find profile named 'shop'",
        "dbt_project.yml",
        config=False,
    ),
    Case(
        "dbt-marked-python-model",
        dbt_project(
            {
                "v.py": "def model(dbt, session):\n    dbt.config(materialized='materialized_view')\n"
                "    return session.range(3)\n"
            }
        ),
        ("status",),
        "model v is a python model: ivm keeps SQL models",
        "models/marts/v.py:1",
        config=False,
    ),
    Case(
        "dbt-marked-models-in-two-schemas",
        dbt_project(
            {"a.sql": "select 1 as one", "b.sql": "{{ config(schema='other') }}\nselect 2 as two"}
        ),
        ("compile",),
        "ivm keeps a project's marked models in one schema",
        "models/marts/b.sql:1",
        config=False,
    ),
    Case(
        "dbt-ivm-yaml-names-views",
        dbt_project({"v.sql": "select 1 as one"}, **{"ivm.yaml": "views: views\n"}),
        ("compile",),
        "ivm.yaml names a views folder, but dbt_project.yml beside it makes the marked models the views",
        "ivm.yaml:1",
        config=False,
    ),
]


def write_project(root: Path, files: dict[str, str | bytes], database: str | None) -> Path:
    """The case's files under ``root``; ivm.yaml names ``database`` (if given) unless the case
    writes one that names a database, or one that is not text."""
    root.mkdir(parents=True, exist_ok=True)
    config = files.get("ivm.yaml", "")
    if database and isinstance(config, str) and "database:" not in config:
        files = {**files, "ivm.yaml": f"{config}database: {database}\n"}
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, str) and database:  # a pipeline spec naming the case's database
            content = content.replace("{db}", database)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    return root


def snapshot(root: Path) -> dict[str, bytes | None]:
    """Every file and folder under ``root`` with its contents (None for a folder)."""
    return {
        str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None)
        for p in sorted(root.rglob("*"))
    }


def run(root: Path, case: Case, database: str = "") -> Result:
    args = [a.format(root=root, db=database) for a in case.args]
    return CliRunner().invoke(app, ["-p", str(root), *args], env={"COLUMNS": "250"})


def assert_one_clear_message(result: Result, case: Case, root: Path, database: str = "") -> None:
    output = result.stdout + result.stderr
    assert result.exit_code not in (0, None), f"exit {result.exit_code}:\n{output}"
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(
        result.exception
    )
    for raw in RAW:
        assert raw not in output, f"{raw!r} in the output:\n{output}"
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines, f"no message on standard error; standard output:\n{result.stdout}"
    assert all(line.startswith("  hint: ") for line in lines[1:]), (
        f"more than one message:\n{result.stderr}"
    )
    assert result.stdout.strip() == "", f"standard output besides the message:\n{result.stdout}"
    message = lines[0]
    assert case.says.format(db=database) in " ".join(result.stderr.split()), result.stderr
    if case.at is not None:
        path, colon, line = case.at.partition(":")
        where = f"{root.resolve() / path}{colon}{line}"
        assert message.startswith(where), f"expected {where} at the start of:\n{message}"


@pytest.fixture
def no_spark(monkeypatch: pytest.MonkeyPatch) -> None:
    """Spark must not start: these mistakes are found before it is needed."""

    def refuse(*args, **kwargs):
        raise AssertionError("Spark was started")

    monkeypatch.setattr(ivm_sql.session, "build_session", refuse)


@pytest.mark.parametrize(
    "case", VIEW_SYNTAX + VIEW_STATEMENTS + CONFIG + COMMAND_LINE + PIPELINES, ids=str
)
def test_refused_before_spark_starts(case: Case, tmp_path: Path, no_spark: None) -> None:
    root = write_project(
        tmp_path / "project", case.files, f"t_{uuid.uuid4().hex[:8]}" if case.config else None
    )
    before = snapshot(root)
    result = run(root, case)
    assert_one_clear_message(result, case, root)
    assert snapshot(root) == before
    assert not (root / ".ivm").exists()


@pytest.mark.parametrize("case", DBT, ids=str)
def test_refused_dbt_project(case: Case, tmp_path: Path, no_spark: None) -> None:
    """dbt compiles the project without Spark; what it or ivm refuses leaves nothing behind
    (not even the folder dbt compiles into)."""
    pytest.importorskip("dbt.cli.main", reason="dbt is not installed (pip install 'ivm-sql[dbt]')")
    test_refused_before_spark_starts(case, tmp_path, no_spark)


def test_a_dbt_project_without_dbt_installed_says_what_to_install(
    tmp_path: Path, no_spark: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "dbt.cli.main", None)  # what import finds when it is absent
    case = Case(
        "dbt-not-installed",
        dbt_project({"v.sql": "select 1 as one"}),
        ("compile",),
        "dbt_project.yml makes this a dbt project, and dbt is not installed hint: install dbt for Spark: pip install 'ivm-sql[dbt]'",
        config=False,
    )
    test_refused_before_spark_starts(case, tmp_path, no_spark)


@pytest.mark.parametrize(("args", "says"), USAGE)
def test_command_line_usage_errors(
    args: tuple[str, ...], says: str, tmp_path: Path, no_spark: None
) -> None:
    (tmp_path / "ivm.yaml").write_text("database: shop\n")
    before = snapshot(tmp_path)
    result = CliRunner().invoke(app, ["-p", str(tmp_path), *args], env={"COLUMNS": "250"})
    assert result.exit_code == 2, result.output
    assert says in result.output
    assert not any(raw in result.output for raw in RAW), result.output
    assert snapshot(tmp_path) == before


def databases(spark: SparkSession) -> set[str]:
    return {d.name for d in spark.catalog.listDatabases()}


@pytest.fixture(scope="module")
def shop(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A migrated database (customers, orders) that the catalog cases' projects all point at."""
    database = f"t_{uuid.uuid4().hex[:8]}"
    root = write_project(
        tmp_path_factory.mktemp("shop"), {"migrations/0001_tables.sql": SHOP_TABLES}, database
    )
    result = CliRunner().invoke(app, ["-p", str(root), "migrate"])
    assert result.exit_code == 0, result.output
    return database


@pytest.mark.parametrize("case", CATALOG, ids=str)
def test_refused_with_the_catalog(
    case: Case, spark: SparkSession, shop: str, tmp_path: Path
) -> None:
    root = write_project(tmp_path / "project", case.files, shop)
    before, tables, dbs = snapshot(root), tables_of(spark, shop), databases(spark)
    result = run(root, case, shop)
    assert_one_clear_message(result, case, root, shop)
    assert snapshot(root) == before
    assert tables_of(spark, shop) == tables and databases(spark) == dbs


@pytest.mark.parametrize("case", MIGRATIONS, ids=str)
def test_refused_migration(case: Case, spark: SparkSession, tmp_path: Path) -> None:
    database = f"t_{uuid.uuid4().hex[:8]}"
    root = write_project(tmp_path / "project", case.files, database)
    before = snapshot(root)
    result = run(root, case, database)
    assert_one_clear_message(result, case, root, database)
    assert snapshot(root) == before
    if case.tables_after is NOTHING:
        assert not spark.catalog.databaseExists(database), (
            "the database was created before the mistake was found"
        )
    else:  # statements before the failing one stay applied, as `ivm migrate` promises; nothing after
        assert tables_of(spark, database) == case.tables_after


def test_refused_streamed_delete(spark: SparkSession, tmp_path: Path) -> None:
    """A streaming table's source commit that deletes rows: one error at the table's line, and
    the table as it was (a separate case: the table must have been loaded first)."""
    database = f"t_{uuid.uuid4().hex[:8]}"
    stream = "-- appended orders\nCREATE STREAMING TABLE seen AS\nSELECT id FROM STREAM(orders);\n"
    root = write_project(
        tmp_path / "project",
        pipeline({"transformations/s.sql": stream}, SPEC + f"database: {database}\n"),
        None,
    )
    for statement in (
        f"CREATE DATABASE {database}",
        f"CREATE TABLE {database}.orders (id INT) USING DELTA",
        f"INSERT INTO {database}.orders VALUES (1), (2)",
    ):
        spark.sql(statement)
    case = Case(
        "streamed-delete",
        {},
        ("refresh",),
        "commit 2 of {db}.orders (DELETE) deletes or updates rows",
        "transformations/s.sql:2",
    )
    assert run(root, case).exit_code == 0
    spark.sql(f"DELETE FROM {database}.orders WHERE id = 1")
    before, tables = snapshot(root), tables_of(spark, database)
    assert_one_clear_message(run(root, case), case, root, database)
    assert snapshot(root) == before and tables_of(spark, database) == tables
    assert spark.table(f"{database}.seen").count() == 2


# the project's server record and the tokens: in an `ivm` process of its own -----------------


@dataclass(frozen=True)
class ServerCase:
    """A server record or a token ivm must refuse: the project's ivm.yaml (``{port}``: the
    test server's), its server record if it has one (the test server's pid and port, this
    token, mode and owner), the environment variables set, and words the message says."""

    id: str
    config: str
    says: str
    record: bool = False
    token: str | None = "s3cret-token"
    mode: int = 0o600
    owner: int | None = None  # a uid other than ours
    env: dict[str, str] = field(default_factory=dict)

    def __str__(self) -> str:
        return self.id


REMOTE = "database: shop\nspark:\n  remote: sc://localhost:{port}\n"
# found before any connection: no server needed
SERVER_RECORDS = [
    ServerCase(
        "server-record-readable-by-others",
        "database: shop\n",
        "is not private to you (mode 0644, not 0600)",
        record=True,
        mode=0o644,
    ),
    ServerCase(
        "server-record-writable-by-group",
        "database: shop\n",
        "is not private to you (mode 0620, not 0600)",
        record=True,
        mode=0o620,
    ),
    ServerCase(
        "server-record-of-another-user",
        "database: shop\n",
        "belongs to another user (uid 65534)",
        record=True,
        owner=65534,
    ),
    ServerCase(
        "token-env-unset",
        REMOTE + "  token_env: IVM_TEST_UNSET_TOKEN\n",
        "names the environment variable IVM_TEST_UNSET_TOKEN, which is not set",
    ),
    ServerCase(
        "token-env-empty",
        REMOTE + "  token_env: IVM_TEST_TOKEN\n",
        "names the environment variable IVM_TEST_TOKEN, which is empty",
        env={"IVM_TEST_TOKEN": ""},
    ),
]
# refused by a real server
SERVER_REFUSES = [
    ServerCase(
        "server-record-without-a-token",
        "database: shop\n",
        "has no token in",
        record=True,
        token=None,
    ),
    ServerCase(
        "server-record-with-a-wrong-token",
        "database: shop\n",
        "refused the token from this project's server record",
        record=True,
    ),
    ServerCase(
        "remote-without-a-token",
        REMOTE,
        "refused the connection: it asks for a token, and ivm sent none",
    ),
    ServerCase(
        "remote-with-a-wrong-token",
        REMOTE + "  token_env: IVM_TEST_TOKEN\n",
        "refused the token from the environment variable IVM_TEST_TOKEN",
        env={"IVM_TEST_TOKEN": "s3cret-token"},
    ),
]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[servers.ServerRecord]:
    """A real ivm server, of a project of its own; stopped at the end whatever happened."""
    root = tmp_path_factory.mktemp("served")
    (root / "ivm.yaml").write_text("database: served\n")
    try:
        started = ivm_process(root, ("server", "start"), {}, timeout=400)
        assert started.exit_code == 0, started.stderr
        record = servers.read_record(root)
        assert record is not None
        yield record
    finally:
        servers.stop(root)


def ivm_process(
    root: Path, args: tuple[str, ...], env: dict[str, str], timeout: float = 120
) -> SimpleNamespace:
    """`ivm -p ROOT ARGS` in a process of its own, its outcome shaped as CliRunner's."""
    environment = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "COLUMNS": "250", **env}
    environment.pop("SPARK_CONNECT_AUTHENTICATE_TOKEN", None)  # pyspark's fallback token
    done = subprocess.run(
        [sys.executable, "-m", "ivm_sql.cli", "-p", str(root), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=environment,
    )
    return SimpleNamespace(
        exit_code=done.returncode, stdout=done.stdout, stderr=done.stderr, exception=None
    )


def check_server_case(case: ServerCase, root: Path, pid: int, port: int) -> None:
    """Write the case's project, run a command, and check it is refused in one message that
    names no token, and that nothing changed (the record stays: it is the user's to fix)."""
    (root / "ivm.yaml").write_text(case.config.format(port=port), encoding="utf-8")
    if case.record:
        record = servers.ServerRecord(
            pid,
            "127.0.0.1",
            port,
            str(root),
            "2026-01-01T00:00:00+00:00",
            str(root / "log"),
            case.token,
        )
        (root / ".ivm").mkdir(mode=0o700)
        servers.write_record(record)
        servers.record_path(root).chmod(case.mode)
        if case.owner is not None:
            os.chown(servers.record_path(root), case.owner, -1)
    before = snapshot(root)
    result = ivm_process(root, ("sql", "SELECT 1"), case.env)
    assert_one_clear_message(result, Case(case.id, {}, (), case.says), root)  # type: ignore[arg-type]
    assert "s3cret" not in result.stderr
    assert snapshot(root) == before


@pytest.mark.parametrize("case", SERVER_RECORDS, ids=str)
def test_server_record_or_token_refused_before_connecting(case: ServerCase, tmp_path: Path) -> None:
    if case.owner is not None and os.getuid() != 0:
        pytest.skip("giving a file to another user needs root")
    with closed_port() as port:
        # pid 1 is no server: a record used would be gone
        check_server_case(case, tmp_path, pid=1, port=port)


@pytest.mark.server
@pytest.mark.parametrize("case", SERVER_REFUSES, ids=str)
def test_server_refuses_a_missing_or_wrong_token(
    case: ServerCase, server: servers.ServerRecord, tmp_path: Path
) -> None:
    check_server_case(case, tmp_path, server.pid, server.port)


@contextmanager
def closed_port() -> Iterator[int]:
    """A port of this machine nothing listens on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        yield probe.getsockname()[1]


def test_the_corpus_is_large_and_its_cases_distinct() -> None:
    cases = (
        VIEW_SYNTAX
        + VIEW_STATEMENTS
        + CONFIG
        + COMMAND_LINE
        + PIPELINES
        + DBT
        + CATALOG
        + MIGRATIONS
    )
    assert len({c.id for c in cases}) == len(cases)
    assert len({(tuple(sorted(map(str, c.files.items()))), c.args) for c in cases}) == len(cases)
    assert len(cases) + len(USAGE) >= 60
    server_cases = SERVER_RECORDS + SERVER_REFUSES
    assert len({c.id for c in cases + server_cases}) == len(cases) + len(server_cases)
