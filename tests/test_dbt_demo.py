"""The demo dbt project (docs/examples/dbt_shop) under the differential oracle: after random
inserts, updates and deletes to its seeds, with duplicates, NULLs and churn, every model ivm
keeps equals what ``dbt run`` builds from the same rows into a second schema. Then dbt's own
commands on ivm's project: ``dbt run`` builds the other models and leaves the kept ones as
they are, ``dbt test`` passes on them, and ``dbt docs generate`` describes them.

dbt runs in this process (dbt-spark's ``session`` method), on the tests' Spark session.
"""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from oracle import RandomChanges, apply_changes, bag_diffs, describe, table_rows
from test_server import ok, strategies

from ivm_sql.errors import IvmError, SqlError
from ivm_sql.project import Project
from ivm_sql.server import stop

pytest.importorskip("dbt.cli.main", reason="dbt is not installed (pip install 'ivm-sql[dbt]')")

DEMO = Path(__file__).resolve().parent.parent / "docs" / "examples" / "dbt_shop"
MARKED = ("customer_revenue", "revenue_by_status", "revenue_by_country")
ROUNDS = 2
# Every model on its incremental path: at the demo's size the cost model would recompute
# customer_revenue (its change reads more than its recompute), which the other oracles check.
INCREMENTAL = "refresh: {policy: incremental}\nhistory: {learn: false}\n"
# In the copy dbt builds as plain tables: the seeds stay where ivm's project has them.
SEEDS_IN_PLACE = """
{% macro generate_schema_name(custom_schema_name, node) -%}
  {%- if node.resource_type == 'seed' -%}{{ var('seeds_schema') }}{%- else -%}{{ target.schema }}{%- endif -%}
{%- endmacro %}
"""


def profile(schema: str) -> str:
    return (
        "shop:\n  target: dev\n  outputs:\n"
        f"    dev: {{type: spark, method: session, host: NA, schema: {schema}}}\n"
    )


def dbt(root: Path, *command: str) -> list:
    """Run a dbt command on the project at ``root``, in this process; its results."""
    from dbt.cli.main import dbtRunner

    options = ["--project-dir", str(root), "--profiles-dir", str(root), "--log-level", "none"]
    result = dbtRunner().invoke([*command, *options, "--no-send-anonymous-usage-stats"])
    results = list(getattr(result.result, "results", ()))
    failed = [r.message for r in results if r.status in ("error", "fail")]
    assert result.success, f"dbt {' '.join(command)}: {result.exception or failed}"
    return results


def as_tables(root: Path, schema: str, seeds_schema: str) -> Path:
    """A copy of the project that builds the marked models as dbt tables into ``schema``,
    reading the seeds in ``seeds_schema``."""
    copy = root.parent / f"{root.name}_as_tables"
    shutil.copytree(root, copy, ignore=shutil.ignore_patterns(".ivm", "target", "logs"))
    project_file = copy / "dbt_project.yml"
    project_file.write_text(
        project_file.read_text(encoding="utf-8").replace(
            "+materialized: materialized_view", "+materialized: table"
        )
        + f"vars: {{seeds_schema: {seeds_schema}}}\n",
        encoding="utf-8",
    )
    (copy / "macros" / "schema.sql").write_text(SEEDS_IN_PLACE, encoding="utf-8")
    (copy / "profiles.yml").write_text(profile(schema), encoding="utf-8")
    return copy


def test_the_demo_dbt_projects_models_equal_what_dbt_run_builds(spark, tmp_path: Path) -> None:
    schema, built = (f"t_{uuid.uuid4().hex[:8]}" for _ in range(2))
    root = tmp_path / "dbt_shop"
    shutil.copytree(DEMO, root)
    (root / "profiles.yml").write_text(profile(schema), encoding="utf-8")
    (root / "ivm.yaml").write_text(INCREMENTAL, encoding="utf-8")
    compare_project = as_tables(root, built, seeds_schema=schema)
    project = Project.open(root, spark=spark)
    with pytest.raises(
        SqlError, match=r"dbt's seed customers \(seeds/customers.csv\), which is not"
    ):
        project.plans()  # before dbt seed: what to build, at the model that reads it
    assert {r.status for r in dbt(root, "seed")} == {"success"}
    assert sorted(v.name for v in project.views()) == sorted(MARKED)
    changes = RandomChanges(random.Random(47))
    apply_changes(project, changes.initial())
    assert {r.action for r in project.refresh()} == {"created"}
    for round_ in range(1, ROUNDS + 1):
        apply_changes(project, changes.round(table_rows(project)))
        reports = project.refresh()
        recomputed = [(r.view, r.reason) for r in reports if r.action == "recomputed"]
        assert not recomputed, f"round {round_}: every marked model is kept incrementally"
        dbt(compare_project, "run")
        diffs = bag_diffs(
            {
                name: (spark.table(f"{schema}.{name}"), spark.table(f"{built}.{name}"))
                for name in MARKED
            }
        )
        failures = [
            describe(name, f"round {round_}", d) for name, d in diffs.items() if not d.equal
        ]
        assert not failures, "\n\n".join(failures)
    assert all(result.ok for result in project.verify())
    kept = {name: spark.table(f"{schema}.{name}").inputFiles() for name in MARKED}
    ran = {r.node.name: r.status for r in dbt(root, "run")}
    assert ran == dict.fromkeys([*MARKED, "stg_orders", "stg_customers"], "success")
    assert {name: spark.table(f"{schema}.{name}").inputFiles() for name in MARKED} == kept
    assert {r.status for r in dbt(root, "test")} == {"pass"}
    dbt(root, "docs", "generate")
    catalog = json.loads((root / "target" / "catalog.json").read_text(encoding="utf-8"))
    assert {f"model.shop.{name}" for name in MARKED} <= set(catalog["nodes"])


def test_a_table_model_dbt_rebuilds_is_recomputed_with_its_reason_or_refused(
    spark, tmp_path: Path
) -> None:
    """A marked model that reads a ``table`` model: ``dbt run`` replaces that table whole
    (CREATE OR REPLACE), which Delta's change data feed cannot describe. The next refresh
    recomputes the model and says why; under ``INCREMENTAL STRICT`` it refuses instead."""
    schema = f"t_{uuid.uuid4().hex[:8]}"
    root = tmp_path / "dbt_shop"
    shutil.copytree(DEMO, root)
    (root / "profiles.yml").write_text(profile(schema), encoding="utf-8")
    (root / "ivm.yaml").write_text(INCREMENTAL, encoding="utf-8")
    (root / "models" / "staging" / "countries.sql").write_text(
        "{{ config(materialized='table', file_format='delta') }}\n"
        "select distinct country from {{ ref('stg_customers') }}",
        encoding="utf-8",
    )
    (root / "models" / "marts" / "countries_sold.sql").write_text(
        "select c.country, count(r.customer_id) as customers\n"
        "from {{ ref('countries') }} as c left join {{ ref('customer_revenue') }} as r\n"
        "  on r.country = c.country group by c.country",
        encoding="utf-8",
    )
    dbt(root, "seed")
    dbt(root, "run", "--select", "+countries")
    project = Project.open(root, spark=spark)
    assert {r.action for r in project.refresh()} == {"created"}
    project.sql("INSERT INTO customers VALUES (9, 'Lin', 'CN', 4)")
    dbt(root, "run", "--select", "+countries")  # replaced whole
    reports = {r.view.split(".")[-1]: r for r in project.refresh()}
    assert reports["countries_sold"].action == "recomputed"
    assert (
        f"{schema}.countries had a CREATE OR REPLACE TABLE AS SELECT"
        in reports["countries_sold"].reason
    )
    assert reports["customer_revenue"].action == "incremental"
    assert ("CN", 1) in project.sql("SELECT * FROM countries_sold").rows
    (root / "ivm.yaml").write_text("refresh: {policy: incremental strict}\n", encoding="utf-8")
    strict = Project.open(root, spark=spark)
    dbt(root, "run", "--select", "+countries")
    with pytest.raises(IvmError, match="countries had a CREATE OR REPLACE TABLE AS SELECT"):
        strict.refresh()


@pytest.mark.server
def test_dbt_commands_and_ivm_share_the_servers_spark(tmp_path: Path) -> None:
    """The command-line way (docs/dbt.md): ``ivm server start``, then dbt's commands with
    ``eval "$(ivm server env)"``: dbt-spark's ``session`` method runs over Spark Connect in
    the server's Spark, so dbt's seeds are the tables ivm reads, and ``dbt run`` sees the
    models ivm created."""
    root = tmp_path / "dbt_shop"
    shutil.copytree(DEMO, root)
    dbt_command = f"{Path(sys.executable).parent / 'dbt'} --no-send-anonymous-usage-stats"
    env = f'eval "$({sys.executable} -m ivm_sql.client -p {root} server env)" && cd {root}'

    def dbt_over_connect(command: str) -> str:
        result = subprocess.run(
            ["bash", "-c", f"{env} && {dbt_command} {command}"],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert result.returncode == 0, result.stdout + result.stderr
        return result.stdout

    try:
        ok(root, "server", "start")
        assert "PASS=3" in dbt_over_connect("seed")
        assert strategies(ok(root, "refresh")) == ["created (new)"] * 3
        assert "PASS=5" in dbt_over_connect("run")
        ok(root, "sql", "UPDATE orders SET qty = qty + 1 WHERE id = 3")
        refreshed = strategies(ok(root, "refresh"))
        assert len(refreshed) == 3 and "unchanged" not in refreshed, refreshed
        ok(root, "verify")  # exit 1 on any model that differs from its SELECT
        assert "PASS=5" in dbt_over_connect("test")
    finally:
        stop(root)
