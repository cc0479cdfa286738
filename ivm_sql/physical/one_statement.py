"""When a chosen recompute writes only the view's table, from one statement over its SELECT.

A stage's table is the integral of its query's output; a recompute restarts that integral
from the query over its sources (DBSP's Q^Δ = D ∘ Q ∘ I, Theorem 3.3: I(Q^Δ(ΔS)) = Q(I(S))).
A view is the composition of its stages, Q = Q_n ∘ ... ∘ Q_k, so the view's table is just as
well Q_n over Q_{n-1} ... over Q_k, evaluated in one statement, as Q_n over the tables of the
stages below it written one by one. The one statement costs what the view's CTAS costs; the
stage by stage recompute plans, writes and commits every stage (1.6-2.2x the view's CTAS at
TPC-H SF 0.1, ``bench/recompute_shape.py``).

So when the cost model chooses to recompute a stage below the view's table (its reason
starts with ``physical.cost.COST_REASON``, or history.explore's), the stages from it up to
the view's table are not written: the view's table is written from its whole SELECT, with
those stages inlined, and its commit records them as ``inlined``. Their tables keep their
own records, each still the integral of its query at the versions it recorded: valid state,
only behind. They are caught up from the change data feeds the next time the view changes
and they are maintained incrementally, after which the view's table, which then reflects
newer versions than their old ones, is recomputed from the caught-up stage below it alone
(``CAUGHT_UP``). While nothing the one statement read has moved, the view is up to date and
the stages behind it wait, so a refresh with no change still runs nothing.

Forced recomputes (a new or changed definition, ``--full``, a source recomputed or its
history gone) still write every stage: those stages' records are not valid state to catch
up from. A recursive stage is never inlined: its content is a loop, not one query.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from datetime import datetime

from ivm_sql.incremental.stages import FixpointStage, Stage
from ivm_sql.physical.cost import COST_REASON, EXPLORE_REASON
from ivm_sql.storage.refresh_log import AT_ONCE

INLINED = "inlined"  # the record key: the stage tables a view's table was written through
CAUGHT_UP = "its stages below caught up after a recompute in one statement"


def writes_view_at_once(reason: str | None, stages: Sequence[Stage], first: Stage) -> bool:
    """Whether a recompute of ``first``, one of the view's ``stages``, for ``reason``, writes
    the view's table in one statement instead of every stage from ``first`` up."""
    if reason is None or not reason.startswith((COST_REASON, EXPLORE_REASON)):
        return False
    return inlinable(stages, first)


def inlinable(stages: Sequence[Stage], first: Stage) -> bool:
    """Whether ``first`` is below the view's table and it and every stage above it can be
    read through its query."""
    at = list(stages).index(first)
    return at < len(stages) - 1 and not any(isinstance(s, FixpointStage) for s in stages[at:])


def view_up_to_date(
    record: Mapping,
    defined: Mapping[str, str],
    read_clock: Collection[str],
    now: datetime | None,
    current: Mapping[str, int],
    table_id: Callable[[str], str | None],
) -> bool:
    """Whether a view's table whose commit ``record`` an earlier refresh's one statement
    wrote is up to date, so that it and the stages it was written through wait: the view's
    stages are still defined as then (``defined``: each stage table's plan fingerprint now,
    the view's table last), and every table the statement read is the same table at the
    same version (``current``: each table's version now; ``table_id``: its id), and the
    time it read at is ``now`` where a stage it covered reads the clock (``read_clock``:
    the tables of the stages that do)."""
    inlined = record.get(INLINED) or {}
    top = list(defined)[-1]
    if not inlined or record.get("plan") != defined[top]:
        return False
    if any(defined.get(table) != fingerprint for table, fingerprint in inlined.items()):
        return False
    covered = {top, *inlined}
    if not covered.isdisjoint(read_clock) and record.get("now") != now:
        return False
    ids = record.get("ids", {})
    return all(
        current.get(table) == version and ids.get(table) == table_id(table)
        for table, version in record.get("sources", {}).items()
    )


def describe(behind: int) -> str:
    """What a refresh's reason adds: the view written at once, how many stages wait."""
    return f"{AT_ONCE}, {behind} stage{'' if behind == 1 else 's'} below left to catch up"
