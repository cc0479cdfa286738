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
from collections import Counter

from sqlglot import exp

from ivm_sql.compiler.reads import MadeElsewhere
from ivm_sql.dbt.manifest import BaseTable, Compiled, Model
from ivm_sql.errors import UnsupportedError
from ivm_sql.viewdefs import ViewDef, parse_view

INLINED = "view"  # the materialization whose SQL is inlined where it is read
EPHEMERAL = "ephemeral"  # dbt inlines these itself, as CTEs
EPHEMERAL_PREFIX = "__dbt__cte__"  # how dbt names an ephemeral model's CTE


def marked_views(compiled: Compiled) -> tuple[str, list[ViewDef]]:
    """The schema of the marked models, and each as a view, in the manifest's order."""
    marked = compiled.marked()
    if not marked:
        return "", []
    schema = _one_schema(marked)
    by_relation = {m.relation: m for m in compiled.models.values()}
    views = []
    for model in marked:
        if model.language != "sql":
            raise UnsupportedError(
                f"model {model.name} is a {model.language} model: ivm keeps SQL models",
                location=model.location,
                hint="materialize it as a table (dbt builds it, ivm reads its changes) and mark the SQL models that read it",
            )
        name = model.relation.rpartition(".")[2]
        view = _parsed(name, model)
        views.append(dataclasses.replace(view, query=_resolved(view.query, by_relation, schema)))
    return schema, views


def made_by_dbt(compiled: Compiled) -> dict[str, MadeElsewhere]:
    """Every table the marked models read that dbt makes (seeds, sources, snapshots, table
    and incremental models), by relation: what it is and what builds it."""
    tables = list(compiled.others.values()) + [
        BaseTable(m.name, m.materialized, m.relation, m.path.relative_to(compiled.root))
        for m in compiled.models.values()
        if not m.marked and m.materialized not in (INLINED, EPHEMERAL)
    ]
    return {t.relation: MadeElsewhere(t.describe(), t.hint()) for t in tables}


def _one_schema(marked: list[Model]) -> str:
    """The schema of the marked models; one kept elsewhere than most is refused at its file."""
    by_path = sorted(marked, key=lambda m: m.path)
    schemas = Counter(_schema(m) for m in by_path)  # ties: the first model's schema wins
    schema = schemas.most_common(1)[0][0]
    other = next((m for m in by_path if _schema(m) != schema), None)
    if other is not None:
        first = next(m for m in by_path if _schema(m) == schema)
        raise UnsupportedError(
            f"model {other.name} is kept in {_schema(other)}, model {first.name} in "
            f"{schema}: ivm keeps a project's marked models in one schema",
            location=other.location,
            hint="give the marked models one schema (+schema in dbt_project.yml)",
        )
    return schema


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
        inner = _resolved(_parsed(node.name, model).query, by_relation, schema)
        _place_at(inner, node)
        return exp.Subquery(
            this=inner,
            alias=exp.TableAlias(this=exp.to_identifier(node.alias_or_name, quoted=True)),
        )

    return query.copy().transform(replace, copy=False)


def _parsed(name: str, model: Model) -> ViewDef:
    """The model as a view, its lines the model file's: those of dbt's compiled SQL less the
    CTEs dbt put before it (ephemeral models, placed where the model reads them), which are
    the model's own lines unless Jinja added or removed some."""
    view = parse_view(f"CREATE VIEW {name} AS {model.sql}", model.location)
    if model.injected_lines:
        ctes = [
            t
            for t in view.query.find_all(exp.Table)
            if t.name.startswith(EPHEMERAL_PREFIX) and _line(t) > model.injected_lines
        ]
        read_at = min((_line(t) for t in ctes), default=model.injected_lines + 1)
        for identifier in view.query.find_all(exp.Identifier):
            line = identifier.meta.get("line")
            if line is not None:
                identifier.meta["line"] = (
                    line if line > model.injected_lines else read_at
                ) - model.injected_lines
    return view


def _line(node: exp.Expression) -> int:
    return next((i.meta["line"] for i in node.find_all(exp.Identifier) if "line" in i.meta), 0)


def _place_at(inlined: exp.Expression, read: exp.Table) -> None:
    """Give the inlined SQL of a ``view`` model the position of the read it replaces: an
    error inside it is reported at the line of the model that reads it, in that file."""
    line = _line(read)
    for identifier in inlined.find_all(exp.Identifier):
        identifier.meta.pop("line", None)
        if line:
            identifier.meta["line"] = line
