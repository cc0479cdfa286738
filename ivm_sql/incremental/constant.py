"""A constant relation: its change is zero, its snapshot the same rows at every version.

DBSP (Section 3): a relation that does not depend on time is the constant stream c, c, ...;
its derivative D is c at the first step and 0 after. ivm's first refresh reads a stage's
snapshot (all of c); every later refresh reads only changes, and a constant's is empty. So
in the bilinear join expansion (``join``) a term with the constant's Δ is dropped, and the
terms with a table's Δ read the constant's rows as both its old and its new version.
"""

from __future__ import annotations

from sqlglot import exp

from ivm_sql.algebra.nodes import Constant
from ivm_sql.sqlbuild import WEIGHT, alias, col, lit, subquery

ROWS = "__ivm_rows"


def snapshot(node: Constant) -> exp.Select:
    """The constant's rows, each with weight 1: the same at the old and the new versions."""
    outputs = [alias(col(c, ROWS), c) for c in node.columns]
    return exp.select(*outputs, alias(lit(1), WEIGHT)).from_(subquery(node.query.copy(), ROWS))


def delta(node: Constant) -> None:
    """A constant's change between any two versions: zero, said as None (no change)."""
    return
