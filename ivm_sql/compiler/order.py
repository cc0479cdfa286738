"""All views compiled, each after the views it reads, with the plans kept across compiles
while nothing they depend on changed."""

from __future__ import annotations

from graphlib import CycleError, TopologicalSorter

from ivm_sql.catalog import Catalog
from ivm_sql.compiler.plan import ViewPlan
from ivm_sql.compiler.reads import input_schemas, references, refuse_table_names
from ivm_sql.compiler.view import compile_view
from ivm_sql.errors import SqlError
from ivm_sql.refresh_policy import RefreshPolicy
from ivm_sql.viewdefs import ViewDef


def compile_views(
    views: list[ViewDef],
    catalog: Catalog,
    database: str,
    cache: dict | None = None,
    default_policy: RefreshPolicy = RefreshPolicy.AUTO,
) -> list[ViewPlan]:
    """Plans for all views, each after the views it reads; ``default_policy`` for a view
    that names no REFRESH POLICY (ivm.yaml's refresh.policy).

    ``cache`` (view name -> (key, plan)), kept by the caller across compiles, returns the
    same plan while the view's text and location, the columns of the tables it reads and
    the plans of the views it reads, and whether a view reads it, are all unchanged:
    compiling is pure in those.
    """
    by_name = {v.name: v for v in views}
    # view -> its text
    kept = {name: key[0] for name, (key, _) in cache.items()} if cache is not None else {}
    refuse_table_names([v for v in views if kept.get(v.name) != v.text], catalog, database)
    graph = {v.name: [d for d in references(v, database) if d in by_name] for v in views}
    try:
        order = list(TopologicalSorter(graph).static_order())
    except CycleError as error:
        cycle = error.args[1]
        raise SqlError(
            f"views read each other in a cycle: {' -> '.join(cycle)}",
            location=by_name[cycle[0]].location,
            hint="a view cannot depend on itself, directly or through others",
        ) from None
    read_by_views = {d for reads in graph.values() for d in reads}
    plans: dict[str, ViewPlan] = {}
    keys: dict[str, tuple] = {}
    for name in order:
        view = by_name[name]
        schemas = input_schemas(view, catalog, database, plans)
        policy = view.policy or default_policy
        keys[name] = (
            view.text,
            str(view.location),
            policy,
            database,
            tuple((t, tuple(c)) for t, c in schemas.items()),
            tuple(keys[d] for d in references(view, database) if d in plans),
            name in read_by_views,
        )
        cached = cache.get(name) if cache is not None else None
        if cached is not None and cached[0] == keys[name]:
            plans[name] = cached[1]
        else:
            plans[name] = compile_view(
                view, catalog, database, plans, schemas, policy, name in read_by_views
            )
        if cache is not None:
            cache[name] = (keys[name], plans[name])
    return [plans[name] for name in order]
