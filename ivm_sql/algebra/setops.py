"""INTERSECT and EXCEPT (DISTINCT or ALL) -> Recompute keyed by the whole row.

How often a row appears in A INTERSECT/EXCEPT [ALL] B depends only on how often that same
row appears in A and in B, so the touched rows (those in either input's change) are the keys
to recompute (DBSP: distinct and anti/semi-join, here per row value).
"""

from __future__ import annotations

from sqlglot import exp

from ivm_sql.algebra.nodes import Node, Recompute
from ivm_sql.sqlbuild import alias, col, ident, subquery

LEFT, RIGHT = "__l", "__r"


def build(query: exp.Intersect | exp.Except, left: Node, right: Node) -> Recompute:
    def all_of(name: str) -> exp.Select:
        return exp.select(exp.Star()).from_(
            exp.Table(this=ident(name), alias=exp.TableAlias(this=ident(name)))
        )

    combine = exp.intersect if isinstance(query, exp.Intersect) else exp.except_
    distinct = bool(query.args.get("distinct", True))
    combined = combine(all_of(LEFT), all_of(RIGHT), distinct=distinct)
    outputs = [col(c) for c in left.columns] + [
        alias(col(c), f"__ivm_k{i}") for i, c in enumerate(left.columns)
    ]
    operation = f"{query.key.upper()}{'' if distinct else ' ALL'}"
    return Recompute(
        ((LEFT, left), (RIGHT, right)),
        (left.columns, right.columns),
        exp.select(*outputs).from_(subquery(combined, "s")),
        left.columns,
        f"{operation} per row",
    )
