"""The marked models of a compiled dbt project as ivm views.

Each model configured ``materialized='materialized_view'`` is a view ivm keeps, its SQL the
one dbt compiled. What it reads follows dbt's lineage:

- another marked model: that view, by its name (views live in one schema);
- a ``view`` model: its compiled SQL, inlined where it is read (dbt publishes it as a Spark
  view, which has no change data feed; its own sources are what changes);
- an ``ephemeral`` model: dbt has inlined it already, as a CTE;
- anything else (a ``table`` or ``incremental`` model, a seed, a source, a snapshot): a base
  table, whose changes ivm reads from Delta's change data feed.
"""

from __future__ import annotations

import dataclasses

from sqlglot import exp

from ivm_sql.dbt.manifest import Compiled, Model
from ivm_sql.errors import UnsupportedError
from ivm_sql.viewdefs import ViewDef, parse_view

INLINED = "view"  # the materialization whose SQL is inlined where it is read


def marked_views(compiled: Compiled) -> tuple[str, list[ViewDef]]:
    """The schema of the marked models, and each as a view, in the manifest's order."""
    marked = compiled.marked()
    if not marked:
        return "", []
    schema = _one_schema(marked)
    by_relation = {m.relation: m for m in compiled.models.values()}
    views = []
    for model in marked:
        name = model.relation.rpartition(".")[2]
        view = parse_view(f"CREATE VIEW {name} AS\n{model.sql}", model.location)
        views.append(dataclasses.replace(view, query=_resolved(view.query, by_relation, schema)))
    return schema, views


def _one_schema(marked: list[Model]) -> str:
    schemas = {_schema(m) for m in marked}
    if len(schemas) > 1:
        first = marked[0]
        other = next(m for m in marked if _schema(m) != _schema(first))
        raise UnsupportedError(
            f"model {other.name} is kept in {_schema(other)}, model {first.name} in "
            f"{_schema(first)}: ivm keeps a project's marked models in one schema",
            location=other.location,
            hint="give the marked models one schema (+schema in dbt_project.yml)",
        )
    return schemas.pop()


def _schema(model: Model) -> str:
    return model.relation.rpartition(".")[0]


def _resolved(query: exp.Query, by_relation: dict[str, Model], schema: str) -> exp.Query:
    """``query`` with each read of a marked model by its view name, and each read of a
    ``view`` model replaced by its compiled SQL (itself resolved)."""

    def replace(node: exp.Expression) -> exp.Expression:
        if not isinstance(node, exp.Table) or not node.args.get("db"):
            return node
        model = by_relation.get(f"{node.db}.{node.name}".lower())
        if model is None:
            return node
        if model.marked and node.db.lower() == schema:
            return exp.Table(this=exp.to_identifier(node.name), alias=node.args.get("alias"))
        if model.materialized != INLINED:
            return node
        inner = parse_view(f"CREATE VIEW {node.name} AS\n{model.sql}", model.location).query
        return exp.Subquery(
            this=_resolved(inner, by_relation, schema),
            alias=exp.TableAlias(this=exp.to_identifier(node.alias_or_name, quoted=True)),
        )

    return query.copy().transform(replace, copy=False)
