"""Golden files: `ivm compile` output (``compiler.render``) for every view of the demo project.

Each view of ``views/*.sql`` has ``tests/golden/<view>.sql``; the tables are those of
``migrations/0001_create_shop.sql``, given to a ``StaticCatalog`` by hand (database ``shop``).
StaticCatalog types come from sqlglot, so a DECIMAL cast may differ from what real Spark
would infer; that is accepted here.

After an intended change to the emitted SQL, rewrite the files and review the diff:

    IVM_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/test_golden.py
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import sqlglot
from sqlglot import exp

from ivm_sql.catalog import StaticCatalog
from ivm_sql.compiler.order import compile_views
from ivm_sql.compiler.plan import ViewPlan
from ivm_sql.compiler.render import render
from ivm_sql.viewdefs import ViewDef, load_views

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = Path(__file__).resolve().parent / "golden"
UPDATE = os.environ.get("IVM_UPDATE_GOLDEN") == "1"
DATABASE = "shop"

SHOP = {
    "shop.customers": [("id", "int"), ("name", "string"), ("country", "string")],
    "shop.products": [
        ("id", "int"),
        ("name", "string"),
        ("category", "string"),
        ("price", "decimal(10,2)"),
    ],
    "shop.orders": [
        ("id", "int"),
        ("customer_id", "int"),
        ("product_id", "int"),
        ("quantity", "int"),
        ("status", "string"),
    ],
}


def demo_views() -> list[ViewDef]:
    """The demo views, located relative to the project root as `ivm compile` run there prints them."""
    cwd = Path.cwd()
    os.chdir(ROOT)
    try:
        return load_views(Path("views"))
    finally:
        os.chdir(cwd)


def demo_view_names() -> list[str]:
    return [v.name for v in demo_views()]


@pytest.fixture(scope="module")
def plans() -> dict[str, ViewPlan]:
    return {p.view.name: p for p in compile_views(demo_views(), StaticCatalog(SHOP), DATABASE)}


@pytest.mark.parametrize("name", demo_view_names())
def test_compile_output_matches_golden(plans: dict[str, ViewPlan], name: str) -> None:
    actual = render(plans[name])
    path = GOLDEN / f"{name}.sql"
    if UPDATE:
        GOLDEN.mkdir(exist_ok=True)
        path.write_text(actual, encoding="utf-8")
        return
    assert path.exists(), f"no golden file {path}; run with IVM_UPDATE_GOLDEN=1 to create it"
    expected = path.read_text(encoding="utf-8")
    assert actual == expected, (
        f"{name}: compile output changed; if intended, rerun with IVM_UPDATE_GOLDEN=1 and review the diff"
    )


def test_one_golden_file_per_demo_view() -> None:
    names = set(demo_view_names())
    if UPDATE:
        for stale in GOLDEN.glob("*.sql"):
            if stale.stem not in names:
                stale.unlink()
    assert {p.stem for p in GOLDEN.glob("*.sql")} == names


def test_render_is_deterministic(plans: dict[str, ViewPlan]) -> None:
    again = {p.view.name: p for p in compile_views(demo_views(), StaticCatalog(SHOP), DATABASE)}
    for name, plan in plans.items():
        assert render(plan) == render(again[name])


def test_golden_sql_parses(plans: dict[str, ViewPlan]) -> None:
    """Every statement of the output is Spark SQL sqlglot can read back."""
    for plan in plans.values():
        for statement in render(plan).split(";\n"):
            body = "\n".join(
                line for line in statement.splitlines() if not line.startswith("--")
            ).strip()
            if body:
                sqlglot.parse_one(body, read="spark")


def test_hand_written_schemas_match_the_migration() -> None:
    """The catalog above must describe the tables the demo migration creates."""
    text = (ROOT / "migrations" / "0001_create_shop.sql").read_text(encoding="utf-8")
    tables = {}
    for statement in sqlglot.parse(text, read="spark"):
        if isinstance(statement, exp.Create) and statement.kind == "TABLE":
            schema = statement.this
            tables[f"{DATABASE}.{schema.this.name.lower()}"] = [
                (c.name.lower(), c.args["kind"].sql("spark").lower().replace(" ", ""))
                for c in schema.expressions
            ]
    normalized = {t: [(c, ty.replace(" ", "")) for c, ty in cols] for t, cols in SHOP.items()}
    assert tables == normalized
