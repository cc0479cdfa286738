"""The view's table as the user asked for it: COMMENT, TBLPROPERTIES, PARTITIONED BY, CLUSTER BY.

They apply to the Delta table behind the view, its last stage's, when ivm creates it (a first
load, or a rebuild), never to the tables of the stages below. That table holds the view's
rows in ivm's shape (a multiplicity column beside each distinct row; an aggregate's sums
and counts): the view reads each column as a stored column, or computes it while it is read
(an average from a sum and a count). A table can only be laid out by what it stores, so
PARTITIONED BY and CLUSTER BY take view columns read straight from a stored column, named
in the table as that column.

A change of these clauses changes the last stage's fingerprint (``compiler.plan.plan_fingerprint``),
so the next refresh rebuilds that table alone: partitioning and clustering are how its files
are written, and one rule for all the clauses keeps the record of what a table holds in one
place (its plan fingerprint).
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from ivm_sql.algebra.nodes import Scan
from ivm_sql.errors import UnsupportedError
from ivm_sql.sqlbuild import col, ident, lit
from ivm_sql.viewdefs import ViewDef

# A recompute's INSERT OVERWRITE must replace the whole table. Under Spark's dynamic partition
# overwrite (spark.sql.sources.partitionOverwriteMode = dynamic, which Delta honours in SQL)
# it would replace only the partitions its result has rows for, and keep a partition the view
# no longer has: a wrong result. Recomputes run with the static mode, whatever the session's.
WHOLE_OVERWRITE = {"spark.sql.sources.partitionOverwriteMode": "static"}


@dataclass(frozen=True)
class TableLayout:
    """What the CREATE of a view's last stage table adds to ivm's own properties."""

    comment: str | None = None
    properties: tuple[tuple[str, str], ...] = ()
    partitioned_by: tuple[str, ...] = ()  # columns of the stage's table
    clustered_by: tuple[str, ...] = ()

    def clauses(self) -> list[exp.Expression]:
        """sqlglot property nodes for CREATE TABLE (before ivm's own TBLPROPERTIES)."""
        nodes: list[exp.Expression] = []
        if self.partitioned_by:
            nodes.append(
                exp.PartitionedByProperty(
                    this=exp.Schema(expressions=[ident(c) for c in self.partitioned_by])
                )
            )
        if self.clustered_by:
            nodes.append(exp.ClusterProperty(expressions=[col(c) for c in self.clustered_by]))
        if self.comment is not None:
            nodes.append(exp.SchemaCommentProperty(this=lit(self.comment)))
        return nodes


def table_layout(view: ViewDef, output: Scan) -> TableLayout:
    """The layout ``view``'s clauses ask of its last stage table, which ``output`` reads;
    a column the table cannot be laid out by is refused at the clause's line."""
    clauses = view.clauses
    return TableLayout(
        clauses.comment,
        clauses.properties,
        _stored(view, output, clauses.partitioned_by, "PARTITIONED BY"),
        _stored(view, output, clauses.clustered_by, "CLUSTER BY"),
    )


def _stored(view: ViewDef, output: Scan, columns: tuple[str, ...], clause: str) -> tuple[str, ...]:
    """The table columns holding the view columns ``columns``."""
    read = dict(zip(output.columns, output.exprs or tuple(col(c) for c in output.columns)))
    stored = []
    for name in columns:
        where = view.locate_word(clause.split()[0])
        if name not in read:
            raise UnsupportedError(
                f"{clause} {name}: view {view.name} returns no column {name}",
                location=where,
                hint=f"name columns the view returns: {', '.join(output.columns)}",
            )
        expression = read[name].this if isinstance(read[name], exp.Cast) else read[name]
        if not isinstance(expression, exp.Column):
            raise UnsupportedError(
                f"{clause} {name}: column {name} of view {view.name} is computed as the view is read, "
                "not stored in its table",
                location=where,
                hint="lay the table out by a column the view returns as it is stored: a GROUP BY key or a selected column",
            )
        stored.append(expression.name)
    return tuple(stored)
