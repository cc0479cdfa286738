"""The project's picture (`ivm graph`): the base tables its views read, then each view, in
dependency order, as a cluster of its stages (the Delta tables that keep it, each named by
its stateful operator, with "incremental" or what it recomputes and why) and the view users
query. A view read by another view feeds that view's stages like a base table."""

from __future__ import annotations

from collections.abc import Sequence

from ivm_sql.compiler.plan import ViewPlan
from ivm_sql.graph.circuit import stage_operator
from ivm_sql.graph.model import Graph, GraphBuilder, Kind
from ivm_sql.incremental.stages import Stage


def project_graph(database: str, plans: Sequence[ViewPlan]) -> Graph:
    """The picture of ``plans`` (all of a project's, in dependency order) in ``database``."""
    builder = GraphBuilder()
    holders: dict[str, str] = {}  # table -> the node of what it holds (a base table, stage or view)
    for table in dict.fromkeys(t for plan in plans for t in plan.base_tables):
        holders[table] = builder.add(Kind.TABLE, table, id=f"table {table}")
    for plan in plans:
        with builder.cluster(f"view {plan.view.name}"):
            for stage in plan.stages:
                node = builder.add(
                    Kind.STAGE,
                    stage_operator(stage).value,
                    (_strategy(stage),),
                    state=stage.table,
                    id=f"stage {stage.table}",
                )
                for source in stage.sources:
                    builder.connect(holders[source], node)
                holders[stage.table] = node
            view = builder.add(Kind.VIEW, plan.name, id=f"view {plan.name}")
            builder.connect(holders[plan.table], view)
        holders[plan.table] = view  # other views read this one through its table
    return builder.build(database, f"{database}: tables, views and the stages that keep them")


def _strategy(stage: Stage) -> str:
    """ "incremental", or what is recomputed and why: a recompute is never drawn silently."""
    return stage.scope if stage.scope == "incremental" else stage.strategy
