"""One view compiled: qualified, built into algebra by the route its policy takes, pruned,
and cut into stages (``incremental.stages``)."""

from __future__ import annotations

from sqlglot import exp

from ivm_sql.algebra.build import Builder, compares_with_current_time
from ivm_sql.algebra.nodes import Scan
from ivm_sql.algebra.prune import prune
from ivm_sql.catalog import Catalog, Schema
from ivm_sql.compiler.plan import ViewPlan
from ivm_sql.compiler.qualify import output_schema, qualify_view, with_schema
from ivm_sql.compiler.reads import input_schemas, references
from ivm_sql.compiler.routing import full_recompute, refuse_whole_recompute, temporal
from ivm_sql.errors import UnsupportedError
from ivm_sql.incremental.stages import plan_stages
from ivm_sql.physical.view_table import table_layout
from ivm_sql.refresh_policy import RefreshPolicy
from ivm_sql.viewdefs import ViewDef


def compile_view(
    view: ViewDef,
    catalog: Catalog,
    database: str,
    plans: dict[str, ViewPlan],
    schemas: dict[str, Schema] | None = None,
    policy: RefreshPolicy = RefreshPolicy.AUTO,
    read_by_views: bool = True,
) -> ViewPlan:
    """``view``'s plan; ``read_by_views``: another view of the project reads it, so its
    table must hold its state as it is (no trace of deltas: ``incremental.stages.TRACES``)."""
    if schemas is None:
        schemas = input_schemas(view, catalog, database, plans)
    qualified = qualify_view(view, schemas, database)
    schema = output_schema(view, catalog, database, plans, schemas)

    def resolve(node: exp.Table) -> Scan:
        db = node.db.lower() if node.db else database
        name = f"{db}.{node.name.lower()}"
        if db == database and node.name.lower() in plans:
            return plans[node.name.lower()].output
        return Scan(name, tuple(c for c, _ in schemas[name]))

    if policy is RefreshPolicy.FULL:
        root = full_recompute(qualified, schema, resolve)
    elif compares_with_current_time(qualified):
        root = temporal(view, qualified, resolve) or full_recompute(
            qualified, schema, resolve, every_refresh=True
        )
    else:
        root = Builder(view, resolve).query(qualified, {})
    if len(root.columns) != len(schema):
        raise UnsupportedError(
            f"view {view.name} returns {len(schema)} columns from {len(root.columns)} expressions",
            location=view.location,
            hint="name the columns of a generator with several columns: posexplode(x) AS (pos, item), "
            "or move it into LATERAL VIEW",
        )
    stages, output = plan_stages(database, view.name, prune(root), traced=not read_by_views)
    output = with_schema(output, schema)
    if policy.incremental:
        refuse_whole_recompute(view, policy, stages)
    depends = tuple(n for n in references(view, database) if n in plans)
    return ViewPlan(
        view, database, tuple(stages), output, schema, depends, policy, table_layout(view, output)
    )
