"""A dbt project's marked models, compiled by dbt itself, as ivm views (no Spark needed)."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlglot import exp
from typer.testing import CliRunner

from ivm_sql.cli import app
from ivm_sql.dbt.macro import MACRO, MACRO_FILE
from ivm_sql.dbt.manifest import compile_project
from ivm_sql.dbt.views import made_by_dbt, marked_views
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
    assert str(by_name["revenue"].location) == f"{root / 'models/marts/revenue.sql'}:1"
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
    assert str(raised.value.location) == f"{root / 'models/marts/elsewhere.sql'}:1"


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


def test_errors_name_the_model_file_and_line_and_what_dbt_must_build(tmp_path: Path) -> None:
    """A model's lines are its file's: dbt's CTEs of ephemeral models put before it do not
    count, and SQL inlined from a ``view`` model or an ephemeral one is placed at the line
    that reads it. A table dbt makes is described as dbt's, with the command that builds it.
    A marked Python model is refused at its file."""
    files = {
        **PROJECT,
        "models/marts/lines.sql": "-- one\n-- two\nselect b.id,\n  c.country\nfrom {{ ref('big_orders') }} as b\n"
        "join {{ ref('countries') }} as c on b.customer_id = c.id",
    }
    root = write(tmp_path / "shop", files)
    compiled = compile_project(root, tmp_path / "target", profiles_dir=root)
    view = {v.name: v for v in marked_views(compiled)[1]}["lines"]
    by_name = {t.name: t for t in view.query.find_all(exp.Table)}
    lines = root / "models/marts/lines.sql"
    assert str(view.locate(by_name["countries"])) == f"{lines}:6"
    assert str(view.locate(by_name["orders"])) == f"{lines}:5"  # big_orders' CTE
    column = next(c for c in view.query.find_all(exp.Column) if c.name == "country")
    assert str(view.locate(column)) == f"{lines}:4"
    made = made_by_dbt(compiled)
    assert (
        made["shop.countries"].what == "dbt's table model countries (models/staging/countries.sql)"
    )
    assert made["shop.countries"].hint == "build it first: dbt run --select countries"
    assert made["shop.orders"].what == "dbt's source raw.orders (models/staging/sources.yml)"
    python = write(
        tmp_path / "python",
        {
            **PROJECT,
            "models/marts/scores.py": "def model(dbt, session):\n"
            "    dbt.config(materialized='materialized_view')\n"
            "    return dbt.ref('stg_orders')\n",
        },
    )
    with pytest.raises(UnsupportedError, match="scores is a python model") as raised:
        marked_views(compile_project(python, tmp_path / "t2", profiles_dir=python))
    assert str(raised.value.location) == f"{python / 'models/marts/scores.py'}:1"
