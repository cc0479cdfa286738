"""A view's SELECT qualified against the columns it reads, and its output schema as Spark
names and types it (views it reads inlined)."""

from __future__ import annotations

import re
from dataclasses import replace

from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.optimizer.qualify import qualify

from ivm_sql.algebra import constants
from ivm_sql.algebra.nodes import Scan
from ivm_sql.catalog import Catalog, QueryError, Schema
from ivm_sql.compiler.plan import ViewPlan
from ivm_sql.errors import SqlError, UnsupportedError
from ivm_sql.sqlbuild import (
    DIALECT,
    INTERNAL_PREFIX,
    col,
    ident,
    to_sql,
)
from ivm_sql.viewdefs import ViewDef


def qualify_view(view: ViewDef, schemas: dict[str, Schema], database: str) -> exp.Query:
    nested: dict = {}
    for name, columns in schemas.items():
        db, name_ = name.split(".")
        nested.setdefault(db, {})[name_] = dict(columns)
    try:
        return qualify(
            constants.name_columns(view.query.copy()),
            schema=nested,
            db=database,
            dialect=DIALECT,
            quote_identifiers=True,
            validate_qualify_columns=True,
        )
    except SqlglotError as error:
        unknown = re.match(r"Column '([^']+)' could not be resolved", str(error))
        if unknown is None:
            raise SqlError(f"{error} (in view {view.name})", location=view.location) from None
        column = unknown.group(1)
        if column.lower() == "grouping__id":
            raise UnsupportedError(
                f"Hive's grouping__id column in view {view.name}",
                location=view.locate_word(column),
                hint="write grouping_id(), its value",
            ) from None
        available = sorted({c for columns in schemas.values() for c, _ in columns})
        raise SqlError(
            f"column {column} does not exist in the tables view {view.name} reads",
            location=view.locate_word(column.split(".")[-1]),
            hint=f"columns there: {', '.join(available)}",
        ) from None


def output_schema(
    view: ViewDef,
    catalog: Catalog,
    database: str,
    plans: dict[str, ViewPlan],
    inputs: dict[str, Schema],
) -> Schema:
    """The view's columns as Spark's own SELECT names and types them (views inlined)."""
    try:
        schema = catalog.output_schema(
            to_sql(inline_views(view, database, plans), pretty=False), inputs
        )
    except QueryError as error:
        raise SqlError(f"{error} (in view {view.name})", location=view.location) from None
    if view.column_names is not None:
        if len(view.column_names) != len(schema):
            raise SqlError(
                f"view {view.name} names {len(view.column_names)} columns but its SELECT returns {len(schema)}",
                location=view.location,
            )
        schema = [(name, type_) for name, (_, type_) in zip(view.column_names, schema)]
    names = [name for name, _ in schema]
    duplicated = sorted({n for n in names if names.count(n) > 1})
    if duplicated:
        raise SqlError(
            f"view {view.name} has two columns named {duplicated[0]}",
            location=view.location,
            hint="give each output column its own name with AS",
        )
    if any(n.startswith(INTERNAL_PREFIX) for n in names):
        raise SqlError(
            f"column names starting with {INTERNAL_PREFIX} are reserved for ivm (view {view.name})",
            location=view.location,
            hint="rename the column with AS",
        )
    quoted = [n for n in names if "`" in n]
    if quoted:
        # Delta's change data feed writes its rows through a column path it does not quote:
        # a MERGE or UPDATE of a table with such a column fails (INVALID_ATTRIBUTE_NAME_SYNTAX).
        raise UnsupportedError(
            f"column name {quoted[0]!r} of view {view.name} holds a backtick, which Delta cannot "
            "keep in a table with a change data feed",
            location=view.locate(
                next((e for e in view.query.selects if e.alias_or_name.lower() == quoted[0]), None)
            ),
            hint="rename the column with AS; spaces, punctuation, unicode and quoted reserved words all work",
        )
    return schema


def inline_views(view: ViewDef, database: str, plans: dict[str, ViewPlan]) -> exp.Query:
    """The view's SELECT with every view it reads replaced by that view's SELECT, and every
    table qualified by its database: a query over base tables only."""
    ctes = {c.alias_or_name.lower() for c in view.query.find_all(exp.CTE)}

    def expand(node: exp.Expression) -> exp.Expression:
        if not isinstance(node, exp.Table) or not isinstance(node.this, exp.Identifier):
            return node
        name, db = node.name.lower(), node.db.lower() if node.db else None
        if db not in (None, database) or (db is None and name in ctes):
            return node
        if name not in plans:
            qualified = node.copy()
            qualified.set("db", ident(database))
            return qualified
        other = plans[name].view
        inner = inline_views(other, database, plans)
        alias_ = exp.TableAlias(this=ident(node.alias_or_name))
        if other.column_names:
            alias_.set("columns", [ident(c) for c in other.column_names])
        return exp.Subquery(this=inner, alias=alias_)

    return view.query.copy().transform(expand)


def with_schema(output: Scan, schema: Schema) -> Scan:
    """Name the output columns as the SELECT does; cast DECIMALs to the SELECT's exact type
    (a SUM kept as a weighted sum is wider than SQL's SUM of the same column)."""
    exprs = []
    for expression, (_, type_) in zip(output.exprs or [col(c) for c in output.columns], schema):
        if type_.startswith("decimal"):
            expression = exp.Cast(
                this=expression.copy(), to=exp.DataType.build(type_, dialect=DIALECT)
            )
        exprs.append(expression)
    return replace(output, columns=tuple(n for n, _ in schema), exprs=tuple(exprs))
