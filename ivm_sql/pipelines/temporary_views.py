"""Temporary views are inlined into the datasets that read them.

A pipeline's ``CREATE TEMPORARY VIEW`` is a named query scoped to the pipeline:
``spark-pipelines`` publishes no table for it, and nothing outside the pipeline can read it.
ivm keeps it that way: each read of it becomes the view's query as a subquery (aliased
with its name), so no table appears in the database that ``spark-pipelines`` would not make,
and the view that reads it is maintained incrementally over the temporary view's sources
(stateless parts cost nothing; only stateful operators keep state, as in any view).
"""

from __future__ import annotations

import dataclasses

from sqlglot import exp

from ivm_sql.errors import SqlError
from ivm_sql.pipelines.sql_datasets import TemporaryView
from ivm_sql.viewdefs import ViewDef


def inline(view: ViewDef, temporary: dict[str, TemporaryView]) -> ViewDef:
    """``view`` with every read of a temporary view replaced by its query."""
    if not temporary:
        return view
    return dataclasses.replace(view, query=_inlined(view.query, temporary, ()))


def _inlined(
    query: exp.Query, temporary: dict[str, TemporaryView], within: tuple[str, ...]
) -> exp.Query:
    """``query`` with temporary views inlined; ``within`` are the ones being inlined already,
    so a temporary view that reads itself is a cycle, not an endless expansion."""
    ctes = {cte.alias_or_name.lower() for cte in query.find_all(exp.CTE)}

    def replace(node: exp.Expression) -> exp.Expression:
        if not isinstance(node, exp.Table) or node.args.get("db") is not None:
            return node
        name = node.name.lower()
        if name in ctes or name not in temporary:
            return node
        if name in within:
            raise SqlError(
                f"temporary view {name} reads itself through {' -> '.join(within)}",
                location=temporary[name].location,
            )
        body = _inlined(temporary[name].query, temporary, (*within, name))
        return exp.Subquery(
            this=body, alias=exp.TableAlias(this=exp.to_identifier(node.alias_or_name, quoted=True))
        )

    return query.copy().transform(replace, copy=False)
