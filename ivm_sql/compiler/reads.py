"""What a view reads: the tables and views it names, their columns, and the names it may
not take."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from sqlglot import exp

from ivm_sql.catalog import Catalog, Schema
from ivm_sql.compiler.plan import ViewPlan
from ivm_sql.errors import SqlError
from ivm_sql.storage.delta_log import DeltaLog
from ivm_sql.viewdefs import ViewDef


def refuse_table_names(views: list[ViewDef], catalog: Catalog, database: str) -> None:
    """A view must not take the name of a table: ivm creates the view under that name. Checked
    for views compiled anew (a kept plan's view was checked when it was compiled)."""
    for view in views:
        if catalog.is_table(f"{database}.{view.name}"):
            raise SqlError(
                f"view {view.name} has the name of a table of database {database}",
                location=view.location,
                hint="rename the view (or the table, in a migration): a view and a table cannot share a name",
            )


def references(view: ViewDef, database: str) -> list[str]:
    """Names of the tables and views a view reads (views of this project: bare name)."""
    return list(dict.fromkeys(name for name, _ in table_nodes(view, database)))


def table_nodes(view: ViewDef, database: str) -> list[tuple[str, exp.Table]]:
    ctes = {c.alias_or_name.lower() for c in view.query.find_all(exp.CTE)}
    found = []
    for node in view.query.find_all(exp.Table):
        if not isinstance(node.this, exp.Identifier):
            continue
        name, db = node.name.lower(), node.db.lower() if node.db else None
        if db is None and name in ctes:
            continue
        found.append((name if db in (None, database) else f"{db}.{name}", node))
    return found


def input_schemas(
    view: ViewDef, catalog: Catalog, database: str, plans: dict[str, ViewPlan]
) -> dict[str, Schema]:
    """The columns of every table and view ``view`` reads, by qualified name."""
    schemas: dict[str, Schema] = {}
    for name, node in table_nodes(view, database):
        full = name if "." in name else f"{database}.{name}"
        if full in schemas:
            continue
        if name in plans:
            schemas[full] = plans[name].schema
            continue
        columns = catalog.columns(full)
        if columns is None:
            raise SqlError(
                f"view {view.name} reads {full}, which does not exist",
                location=view.locate(node),
                hint="create the table in a migration and run `ivm migrate`, or define the view",
            )
        schemas[full] = columns
    return schemas


@dataclass(frozen=True)
class MadeElsewhere:
    """A table a view reads that another tool makes (a pipeline's Python dataset, a dbt
    seed): what it is, and how to make it."""

    what: str  # "a Python table at raw.py:3", "dbt's seed customers (seeds/customers.csv)"
    hint: str


def check_made_elsewhere(
    log: DeltaLog, views: Iterable[ViewDef], made: dict[str, MadeElsewhere], database: str
) -> None:
    """Raise at the first read of a table of ``made`` (by qualified name, lower case) that
    is not a Delta table yet: one error at the view's line that says who makes it, before
    the generic one of a missing table."""
    for view in views:
        for name, node in table_nodes(view, database):
            full = name if "." in name else f"{database}.{name}"
            table = made.get(full.lower())
            if table is None:
                continue
            if not log.exists(full):
                raise SqlError(
                    f"view {view.name} reads {node.name}, {table.what}, which is not a table yet",
                    location=view.locate(node),
                    hint=table.hint,
                )
            if not log.is_delta(full):
                raise SqlError(
                    f"view {view.name} reads {node.name}, {table.what}, which is not a Delta table",
                    location=view.locate(node),
                    hint="ivm reads a source's changes from Delta's change data feed: write it as Delta",
                )
