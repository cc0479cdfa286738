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
    return Scan(table_name, input.columns)
