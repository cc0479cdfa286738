"""Small sqlglot builders shared by the emitters. Identifiers are always quoted."""

from __future__ import annotations

from collections.abc import Iterable

import sqlglot
from sqlglot import exp

DIALECT = "spark"
WEIGHT = "__ivm_w"  # the weight (multiplicity) column of every Z-set we emit
INTERNAL_PREFIX = "__ivm"


def is_internal(table: str) -> bool:
    """Whether ``table`` (``db.name`` or ``name``) is one ivm keeps: a stage's or a view's."""
    return table.split(".")[-1].startswith(INTERNAL_PREFIX)


def ident(name: str) -> exp.Identifier:
    return exp.to_identifier(name, quoted=True)


def col(name: str, table: str | None = None) -> exp.Column:
    return exp.Column(this=ident(name), table=ident(table) if table else None)


def table(name: str, alias: str | None = None) -> exp.Table:
    """A (possibly db-qualified) table name, quoted part by part."""
    parts = name.split(".")
    node = exp.Table(this=ident(parts[-1]), db=ident(parts[-2]) if len(parts) > 1 else None)
    if alias:
        node.set("alias", exp.TableAlias(this=ident(alias)))
    return node


def table_at(name: str, version: exp.Expression | None) -> exp.Table:
    """A table read at a version (``t VERSION AS OF v``); the latest with no version."""
    node = table(name)
    if version is not None:
        node.set("version", exp.Version(this="VERSION", kind="AS OF", expression=version.copy()))
    return node


def describe(what: str, name: str) -> str:
    """``DESCRIBE <what> name`` (HISTORY, DETAIL, TABLE EXTENDED) of Delta and Spark SQL."""
    return to_sql(exp.Describe(this=table(name), style=what), pretty=False)


def use_database(spark, name: str) -> None:
    """CREATE SCHEMA IF NOT EXISTS, then USE it."""
    database = exp.Table(this=ident(name))
    spark.sql(to_sql(exp.Create(this=database, kind="SCHEMA", exists=True), pretty=False))
    spark.sql(to_sql(exp.Use(this=database.copy()), pretty=False))


def alias(expression: exp.Expression, name: str) -> exp.Alias:
    return exp.alias_(expression, ident(name))


def lit(value: int | str) -> exp.Literal:
    return exp.Literal.number(value) if isinstance(value, int) else exp.Literal.string(value)


def subquery(query: exp.Query, name: str) -> exp.Subquery:
    return exp.Subquery(this=query, alias=exp.TableAlias(this=ident(name)))


def and_all(conditions: Iterable[exp.Expression | None]) -> exp.Expression | None:
    present = [c for c in conditions if c is not None]
    return exp.and_(*present) if present else None


def null_safe_eq(left: exp.Expression, right: exp.Expression) -> exp.Expression:
    return exp.NullSafeEQ(this=left, expression=right)


def product(factors: list[exp.Expression]) -> exp.Expression:
    result = factors[0]
    for factor in factors[1:]:
        result = exp.Mul(this=result, expression=factor)
    return result


def sum_of(expression: exp.Expression) -> exp.Expression:
    return exp.Sum(this=expression)


def coalesce_zero(expression: exp.Expression) -> exp.Expression:
    return exp.Coalesce(this=expression, expressions=[lit(0)])


def union_all(queries: list[exp.Query]) -> exp.Query:
    result = queries[0]
    for query in queries[1:]:
        result = exp.union(result, query, distinct=False)
    return result


def consolidate(query: exp.Query, columns: tuple[str, ...], alias_name: str = "d") -> exp.Select:
    """Group a Z-set by its row and sum the weights, dropping rows whose weight is zero.

    DBSP's consolidation: it makes a change minimal (churn within a refresh cancels out) and
    leaves at most one source row per target row, which Delta's MERGE requires.
    """
    total = sum_of(col(WEIGHT))
    select = exp.select(*(col(c) for c in columns), alias(total, WEIGHT)).from_(
        subquery(query, alias_name)
    )
    if columns:
        select = select.group_by(*(col(c) for c in columns))
    return select.having(exp.NEQ(this=total.copy(), expression=lit(0)))


def insert_columns(table_name: str, columns: tuple[str, ...], query: exp.Query) -> exp.Insert:
    """INSERT INTO the table's ``columns`` the same-named columns of ``query``'s rows (an
    append: Delta lists and rewrites no file)."""
    return exp.Insert(
        this=exp.Schema(this=table(table_name), expressions=[ident(c) for c in columns]),
        expression=exp.select(*(col(c) for c in columns)).from_(subquery(query, "s")),
    )


def stored_and_change(table_name: str, columns: tuple[str, ...], change: exp.Query) -> exp.Query:
    """The table's rows and ``change``'s, in ``columns`` (UNION ALL): what a trace's
    consolidating rewrite sums."""
    stored = exp.select(*(col(c) for c in columns)).from_(table(table_name))
    changed = exp.select(*(col(c) for c in columns)).from_(subquery(change, "s"))
    return union_all([stored, changed])


def to_sql(expression: exp.Expression, pretty: bool = True) -> str:
    return expression.sql(dialect=DIALECT, pretty=pretty)


def parse_expression(text: str) -> exp.Expression:
    return sqlglot.parse_one(text, read=DIALECT)
