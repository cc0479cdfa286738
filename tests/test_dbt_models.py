"""A dbt project's marked models, compiled by dbt itself, as ivm views (no Spark needed)."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlglot import exp
from typer.testing import CliRunner

from ivm_sql.cli import app
from ivm_sql.dbt.macro import MACRO, MACRO_FILE
from ivm_sql.dbt.manifest import compile_project
from ivm_sql.dbt.views import marked_views
from ivm_sql.errors import ConfigError, UnsupportedError
from ivm_sql.syntax import DIALECT

pytest.importorskip("dbt.cli.main", reason="dbt is not installed (pip install 'ivm-sql[dbt]')")

PROFILE = """
shop:
  target: dev
  outputs:
    dev: {type: spark, method: session, schema: shop, host: NA}
"""

PROJECT = {
    "dbt_project.yml": """
name: shop
version: "1.0"
profile: shop
vars: {big: 10}
models:
  shop:
    marts:
      +materialized: materialized_view
""",
    "profiles.yml": PROFILE,
    "models/staging/sources.yml": """
version: 2
sources:
  - name: raw
    schema: shop
    tables: [{name: orders}, {name: customers}]
""",
    "models/staging/stg_orders.sql": "select id, customer_id, amount from {{ source('raw', 'orders') }}",
    "models/staging/big_orders.sql": (
        "{{ config(materialized='ephemeral') }}\n"
        "select * from {{ ref('stg_orders') }} where amount > {{ var('big') }}"
    ),
    "models/staging/countries.sql": (
        "{{ config(materialized='table') }}\nselect id, country from {{ source('raw', 'customers') }}"
    ),
    "models/marts/revenue.sql": """
{% set kinds = ['all', 'big'] %}
select o.customer_id, c.country,
{% for kind in kinds %}
  sum({% if kind == 'big' %}case when o.amount > {{ var('big') }} then o.amount end{% else %}o.amount{% endif %}) as {{ kind }}_amount{% if not loop.last %},{% endif %}
{% endfor %}
from {{ ref('stg_orders') }} as o left join {{ ref('countries') }} as c on o.customer_id = c.id
group by o.customer_id, c.country
""",
    "models/marts/big_customers.sql": "select customer_id, count(*) as n from {{ ref('big_orders') }} group by customer_id",
    "models/marts/countries_revenue.sql": "select country, sum(all_amount) as amount from {{ ref('revenue') }} group by country",
    "models/unmarked.sql": "select 1 as x",
}


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    return root


def test_marked_models_become_views_over_what_dbt_compiled(tmp_path: Path) -> None:
    """Jinja, vars, ``ref()`` and ``source()`` are dbt's: a view model is inlined where it is
    read, an ephemeral one is dbt's CTE, a table model and a source are base tables, and a
    marked model read by another is that view, by name."""
    root = write(tmp_path / "shop", PROJECT)
    compiled = compile_project(root, tmp_path / "target", profiles_dir=root)
    schema, views = marked_views(compiled)
    assert schema == "shop"
    by_name = {v.name: v for v in views}
    assert sorted(by_name) == ["big_customers", "countries_revenue", "revenue"]  # not unmarked
    assert str(by_name["revenue"].location) == "models/marts/revenue.sql:1"
    tables = {
        name: sorted(".".join(p.name for p in t.parts) for t in view.query.find_all(exp.Table))
        for name, view in by_name.items()
    }
    assert tables == {
        "revenue": ["shop.countries", "shop.orders"],  # stg_orders inlined, countries a table
        "big_customers": ["__dbt__cte__big_orders", "shop.orders"],
        "countries_revenue": ["revenue"],  # the marked view, unqualified
    }
    assert "amount > 10" in by_name["big_customers"].query.sql(DIALECT)  # var('big')
    assert "big_amount" in by_name["revenue"].query.sql(DIALECT)  # the Jinja loop


def test_a_project_dbt_cannot_compile_is_one_error_with_dbts_reason(tmp_path: Path) -> None:
    broken = write(
        tmp_path / "broken",
        {**PROJECT, "models/marts/broken.sql": "select * from {{ ref('nowhere') }}"},
    )
    with pytest.raises(ConfigError, match="depends on a node named 'nowhere'"):
        compile_project(broken, tmp_path / "t1", profiles_dir=broken)
    no_profile = write(tmp_path / "no_profile", {**PROJECT, "profiles.yml": "other: {}\n"})
    with pytest.raises(ConfigError, match="Could not find profile named 'shop'"):
        compile_project(no_profile, tmp_path / "t2", profiles_dir=no_profile)


def test_marked_models_in_two_schemas_are_refused_at_the_models_file(tmp_path: Path) -> None:
    root = write(
        tmp_path / "two",
        {
            **PROJECT,
            "models/marts/elsewhere.sql": "{{ config(schema='other') }}\nselect 1 as one",
        },
    )
    compiled = compile_project(root, tmp_path / "target", profiles_dir=root)
    with pytest.raises(UnsupportedError, match="in one schema") as raised:
        marked_views(compiled)
    assert str(raised.value.location) == "models/marts/elsewhere.sql:1"


def test_ivm_init_in_a_dbt_project_writes_its_materialization_once(tmp_path: Path) -> None:
    """``ivm init`` in a dbt project writes the materialization that leaves the marked models
    to ivm, and nothing else; a second run leaves it; dbt compiles the project with it."""
    root = write(tmp_path / "shop", PROJECT)
    first = CliRunner().invoke(app, ["-p", str(root), "init"])
    assert first.exit_code == 0, first.output
    assert (root / MACRO_FILE).read_text(encoding="utf-8") == MACRO
    assert not (root / "ivm.yaml").exists() and not (root / "views").exists()
    again = CliRunner().invoke(app, ["-p", str(root), "init"])
    assert again.exit_code == 0 and "already" in again.output
    compiled = compile_project(root, tmp_path / "target", profiles_dir=root)
    assert len(compiled.marked()) == 3
