"""Reads a top-k's candidates again when deletions use them up (``incremental.top_k``).

The change of a top-k stage is computed once and kept in memory (``runtime.flagged``); only
if it flags the prefix short (fewer than k rows left, others after them) does a second
query read the stage's input at the new versions for its first rows again. So inserts, and
deletions that leave k candidates, cost only the change and the stored candidates.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlglot import exp

from ivm_sql.incremental import top_k
from ivm_sql.incremental.stages import TopKStage
from ivm_sql.incremental.versions import Pins
from ivm_sql.runtime.flagged import Settled, computed

FLAGGED_VIEW = "__ivm_top_k_change"


@contextmanager
def refilled(
    spark, stage: TopKStage, change: exp.Query, pins: Pins, local: bool
) -> Iterator[Settled]:
    """``change``, or, when it leaves the prefix short, the change that reads the prefix
    again from the input at ``pins``; inside the block, the first is a query over memory
    (local rows when ``local``: ``runtime.flagged``)."""
    with computed(spark, change, top_k.SHORT, FLAGGED_VIEW, local) as kept:
        if kept.flagged:
            yield Settled(stage.refill_query(pins), 1, None)
        else:
            yield kept.as_settled()
