"""DISTINCT: an element's output changes only when its accumulated weight crosses zero.

DBSP (Prop. 4.7, distinct_incremental): keep the integral of the input (each row with its
accumulated weight, rows at zero removed; the same table and MERGE as a bag) and read it
with weight 1. In the table's change data feed a row appears (insert) or disappears
(delete) exactly when its weight crosses zero; a weight going from 2 to 3 shows as a pre-
and a post-image that cancel when the reader consolidates.
"""

from __future__ import annotations

from ivm_sql.algebra.nodes import Node, Scan
from ivm_sql.incremental.bag import change, initial, merge

__all__ = ["change", "initial", "merge", "reader"]


def reader(table_name: str, input: Node) -> Scan:
    """The rows with weight 1; their change is read consolidated, so that only the rows that
    appear or disappear reach the operators above (a semi-join's key state: a key's count
    moves on most changes, its presence on few)."""
    return Scan(table_name, input.columns, consolidate_change=True)
