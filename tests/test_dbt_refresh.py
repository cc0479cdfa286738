"""A dbt project opened as an ivm project: its marked models refreshed incrementally."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from ivm_sql.dbt.macro import write_macro
from ivm_sql.project import Project

pytest.importorskip("dbt.cli.main", reason="dbt is not installed (pip install 'ivm-sql[dbt]')")


def dbt_project(root: Path, schema: str) -> Path:
    files = {
        "dbt_project.yml": """
name: shop
version: "1.0"
profile: shop
models:
  shop:
    marts:
      +materialized: materialized_view
""",
        "profiles.yml": f"""
shop:
  target: dev
  outputs:
    dev: {{type: spark, method: session, schema: {schema}, host: NA}}
""",
        "ivm.yaml": "history: {learn: false}\nrefresh: {recompute_above: never}\n",
        "models/sources.yml": f"""
version: 2
sources:
  - name: raw
    schema: {schema}
    tables: [{{name: orders}}, {{name: customers}}]
""",
        "models/stg_orders.sql": "select id, customer_id, amount from {{ source('raw', 'orders') }} where amount is not null",
        "models/marts/revenue.sql": """
select c.country, count(*) as orders, sum(o.amount) as amount
from {{ ref('stg_orders') }} as o join {{ source('raw', 'customers') }} as c on o.customer_id = c.id
group by c.country
""",
        "models/marts/big_countries.sql": "select country from {{ ref('revenue') }} where amount > 10",
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    return root


def test_a_dbt_projects_marked_models_are_kept_incrementally(spark, tmp_path: Path) -> None:
    schema = f"t_{uuid.uuid4().hex[:8]}"
    project = Project.open(dbt_project(tmp_path / "shop", schema), spark=spark)
    assert project.database == schema
    assert sorted(v.name for v in project.views()) == ["big_countries", "revenue"]
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {schema}")
    project.sql("CREATE TABLE orders (id INT, customer_id INT, amount INT) USING DELTA")
    project.sql("CREATE TABLE customers (id INT, country STRING) USING DELTA")
    project.sql("INSERT INTO customers VALUES (1, 'NL'), (2, 'FR'), (3, 'NL')")
    project.sql("INSERT INTO orders VALUES (1, 1, 5), (2, 2, 20), (3, 3, 7), (4, 1, NULL)")
    assert {r.action for r in project.refresh()} == {"created"}
    assert sorted(project.sql("SELECT * FROM revenue").rows) == [("FR", 1, 20), ("NL", 2, 12)]
    project.sql("UPDATE orders SET amount = 1 WHERE id = 2")
    project.sql("DELETE FROM orders WHERE id = 3")
    project.sql("INSERT INTO orders VALUES (5, 3, 30)")
    reports = project.refresh()
    assert {r.action for r in reports} == {"incremental"}, [(r.view, r.reason) for r in reports]
    assert sorted(project.sql("SELECT * FROM revenue").rows) == [("FR", 1, 1), ("NL", 2, 35)]
    assert project.sql("SELECT * FROM big_countries").rows == [("NL",)]
    assert all(result.ok for result in project.verify())


def test_dbt_run_leaves_the_marked_models_to_ivm_and_dbt_test_reads_them(
    spark, tmp_path: Path
) -> None:
    """With ``ivm init``'s materialization, ``dbt run`` (dbt-spark's session method, in this
    process: the same Spark) builds the other models and runs none of the marked ones'
    statements; ``dbt test`` runs the project's tests on the models ivm keeps."""
    from dbt.cli.main import dbtRunner

    schema = f"t_{uuid.uuid4().hex[:8]}"
    root = dbt_project(tmp_path / "shop", schema)
    (root / "models/marts/schema.yml").write_text(
        "version: 2\nmodels:\n  - name: revenue\n    columns:\n"
        "      - name: country\n        data_tests: [unique, not_null]\n",
        encoding="utf-8",
    )
    write_macro(root)
    project = Project.open(root, spark=spark)
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {schema}")
    project.sql("CREATE TABLE orders (id INT, customer_id INT, amount INT) USING DELTA")
    project.sql("CREATE TABLE customers (id INT, country STRING) USING DELTA")
    project.sql("INSERT INTO customers VALUES (1, 'NL'), (2, 'FR')")
    project.sql("INSERT INTO orders VALUES (1, 1, 5), (2, 2, 20)")
    project.refresh()
    kept = {v: spark.table(f"{schema}.{v}").inputFiles() for v in ("revenue", "big_countries")}
    options = ["--project-dir", str(root), "--profiles-dir", str(root)]
    options += ["--target-path", str(tmp_path / "dbt_target"), "--log-level", "none"]
    ran = dbtRunner().invoke(["run", *options])
    assert ran.success, ran.exception
    assert {r.node.name: r.status for r in ran.result.results} == {
        "stg_orders": "success",
        "revenue": "success",
        "big_countries": "success",
    }
    assert spark.catalog.tableExists(f"{schema}.stg_orders")  # dbt's own view model
    assert {v: spark.table(f"{schema}.{v}").inputFiles() for v in kept} == kept  # untouched
    tested = dbtRunner().invoke(["test", *options])
    assert tested.success and {r.status for r in tested.result.results} == {"pass"}
