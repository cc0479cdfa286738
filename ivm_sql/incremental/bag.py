"""A bag table: each distinct row stored once with its multiplicity (integration, I).

The table is the integral of its input's changes; a refresh adds the consolidated change
with one MERGE: weights add up, a row whose weight reaches zero is deleted.
"""

from __future__ import annotations

from sqlglot import exp

from ivm_sql.algebra.nodes import Node, Scan
from ivm_sql.sqlbuild import WEIGHT, col, consolidate, null_safe_eq, table

TARGET, CHANGE = "t", "s"


def initial(input_columns: tuple[str, ...], contents: exp.Query) -> exp.Select:
    return consolidate(contents, input_columns)


def change(input_columns: tuple[str, ...], changes: exp.Query) -> exp.Select:
    return consolidate(changes, input_columns)


def merge(table_name: str, input_columns: tuple[str, ...], change_query: exp.Query) -> exp.Merge:
    """MERGE the consolidated change: rows match null-safely on every column."""
    on = (
        exp.and_(*(null_safe_eq(col(c, TARGET), col(c, CHANGE)) for c in input_columns))
        if input_columns
        else exp.true()
    )
    summed = exp.Add(this=col(WEIGHT, TARGET), expression=col(WEIGHT, CHANGE))
    return exp.Merge(
        this=table(table_name, TARGET),
        using=exp.Subquery(
            this=change_query, alias=exp.TableAlias(this=exp.to_identifier(CHANGE, quoted=True))
        ),
        on=on,
        whens=exp.Whens(
            expressions=[
                exp.When(
                    matched=True,
                    condition=exp.EQ(this=summed, expression=exp.Literal.number(0)),
                    then=exp.var("DELETE"),
                ),
                exp.When(
                    matched=True,
                    then=exp.Update(
                        expressions=[exp.EQ(this=col(WEIGHT, TARGET), expression=summed.copy())]
                    ),
                ),
                exp.When(
                    matched=False,
                    then=exp.Insert(
                        this=exp.Tuple(expressions=[col(c) for c in (*input_columns, WEIGHT)]),
                        expression=exp.Tuple(
                            expressions=[col(c, CHANGE) for c in (*input_columns, WEIGHT)]
                        ),
                    ),
                ),
            ]
        ),
    )


def reader(table_name: str, input: Node) -> Scan:
    """Rows with their multiplicity: a view over this table sees the same bag."""
    return Scan(table_name, input.columns, weight=col(WEIGHT))
