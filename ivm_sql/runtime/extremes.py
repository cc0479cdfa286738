"""Rescans the groups whose MIN or MAX lost its last row (``incremental.extremes``).

The change of an aggregate with MIN or MAX is computed once and kept in memory
(``runtime.flagged``); only if it flags a lost extreme does a second query read the
aggregate's input, restricted to the flagged groups. So inserts, and deletes of rows other
than the extreme, cost only the change.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlglot import exp

from ivm_sql.algebra.nodes import Aggregate
from ivm_sql.incremental import aggregate, extremes, snapshot
from ivm_sql.incremental.versions import Pins
from ivm_sql.runtime.flagged import Settled, computed

FLAGGED_VIEW = "__ivm_extremes_change"


@contextmanager
def settled(
    spark, node: Aggregate, change: exp.Query, pins: Pins, local: bool
) -> Iterator[Settled]:
    """``change`` with every lost extreme recomputed; inside the block, a query over memory
    (local rows when ``local``: ``runtime.flagged``). ``pins``: the new versions of the
    aggregate's input."""
    with computed(spark, change, extremes.LOST, FLAGGED_VIEW, local) as kept:
        if kept.flagged:
            contents = snapshot(node.input, pins, "new")
            yield Settled(
                extremes.rescanned(node, FLAGGED_VIEW, aggregate.change_columns(node), contents),
                kept.flagged,
                None,
            )
        else:
            yield kept.as_settled()
