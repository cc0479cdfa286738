"""A bag table: rows with their multiplicities (integration, I).

The table is the integral of its input's changes. A view's bag table is a trace of batches,
as DBSP keeps an integral (Feldera's spine, Differential Dataflow's arrangements): a
refresh appends its consolidated change as one batch of weighted rows (``append``), so a
row may be stored more than once and weights may cancel; it is consolidated when read
(``Scan.batches``), and now and then rewritten consolidated (``rewrite``,
``physical.batches`` says when). An append is the cheapest Delta write (it lists no files
and rewrites none); a MERGE, which finds and rewrites the files its rows are in, costs
about three times as much on a small table. Other bag tables (a recursive view's, a
recompute's, a top-k's candidates) keep each distinct row once and take the change with one
MERGE (``merge``): weights add up, a row whose weight reaches zero is deleted.
"""

from __future__ import annotations

from sqlglot import exp

from ivm_sql.algebra.nodes import Node, Scan
from ivm_sql.sqlbuild import (
    WEIGHT,
    col,
    consolidate,
    insert_columns,
    null_safe_eq,
    stored_and_change,
    table,
)

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


def append(table_name: str, input_columns: tuple[str, ...], change_query: exp.Query) -> exp.Insert:
    """INSERT the consolidated change as one more batch of the trace."""
    return insert_columns(table_name, (*input_columns, WEIGHT), change_query)


def rewrite(table_name: str, input_columns: tuple[str, ...], change_query: exp.Query) -> exp.Insert:
    """INSERT OVERWRITE the trace with its batches and the change consolidated: each row once."""
    rows = stored_and_change(table_name, (*input_columns, WEIGHT), change_query)
    return exp.Insert(
        this=table(table_name),
        expression=consolidate(rows, input_columns),
        overwrite=True,
    )


def reader(table_name: str, input: Node, batches: bool = False) -> Scan:
    """Rows with their multiplicity: a view over this table sees the same bag (``batches``:
    the table is a trace, consolidated when read)."""
    return Scan(table_name, input.columns, weight=col(WEIGHT), batches=batches)
