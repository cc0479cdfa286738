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

A change that lost once is decided before the stages below are refreshed. When the view's
table was last written by a recompute the analytic rules chose (in one statement, or as the
view's last stage: its change found dearer than a recompute, after the stages below the one
that lost had been refreshed for nothing; a choice of a stage's own history, which weighs
its seconds, is left to that history to make anew) and this refresh's change
is at least ``EARLY_SHARE`` as large (rows changed in the base tables below the view, from
Delta's commit metrics: no Spark job), the view's table is written in one statement over its
whole SELECT, from its lowest stage, before any stage is refreshed: what the view's CTAS
costs, where going stage by stage pays each changed stage below and then the recompute
anyway. Its record keeps the rows the recompute was first chosen for (``DECIDED_ON``), so a
change that shrinks to less than that share goes stage by stage again and is weighed anew.

A change that will lose is also foreseen, with no history. As the view's lowest changed
stage is reached (the stages below it up to date: TPC-H Q20's lowest reads tables its update
sets leave alone), each stage above it is weighed as it will be at its turn
(``foreseen_reason``): the rows rule over its base tables' changed rows, then the scans
rule over its change, in which the change data feed of each stage below, not written yet, is
stood in for by that stage's change query (DBSP's chain rule, ``physical.foresight``), its
keys bounded by the values of the base tables' kept feeds. A stage so found dearer than its
recompute would, at its turn, write the view's table from that stage up anyway (or recompute
the view's last stage) after the stages below it had been refreshed for it: the view's table
is written from its whole SELECT at once instead, before any stage pays for a change. Then
the changed stages are weighed together against that one statement, their statements
counted too (``physical.cost``'s statements rule). In TPC-H's first round at SF 1, Q17's,
Q18's, Q20's and Q21's losses are foreseen so, and Q03's, Q04's and Q10's stages weighed so.

Inside the one statement, a stage's rows need not be consolidated (grouped by row, their
weights summed) where what reads them sums weights anyway: consolidation changes how a
Z-set is written, not the Z-set, and an operator that is a function of the Z-set (a linear
aggregate's sums, a DISTINCT's per-row count, a bag's consolidation, each over
joins, filters and projections, which are multilinear) gives the same rows either way
(``read_unconsolidated``: a keyed recompute's rows). So TPC-H Q13's LEFT JOIN is counted per customer straight from
the join, as its SELECT is, not first grouped by every column of its 1.5 M rows at SF 1.

Forced recomputes (a new or changed definition, ``--full``, a source recomputed or its
history gone) still write every stage: those stages' records are not valid state to catch
up from. A recursive stage is never inlined: its content is a loop, not one query.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from datetime import datetime

from ivm_sql.incremental import extremes
from ivm_sql.incremental.stages import (
    AggregateStage,
    BagStage,
    DistinctStage,
    FixpointStage,
    RecomputeStage,
    Stage,
)
from ivm_sql.physical.cost import COST_REASON, EXPLORE_REASON
from ivm_sql.storage.refresh_log import AT_ONCE

INLINED = "inlined"  # the record key: the stage tables a view's table was written through
# the record key: the source rows changed when a recompute in one statement was last chosen
# stage by stage (the change it was weighed against lost)
DECIDED_ON = "decided_on"
# a change at least this share of that one is taken to lose too, and decided before any stage
EARLY_SHARE = 0.5
EARLY = "chosen before its stages are refreshed"  # how the reason of such a write ends
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


def read_unconsolidated(stage: Stage, stages: Sequence[Stage]) -> bool:
    """Whether ``stage``, one of the view's ``stages`` read through its query in one
    statement, is read through its content before consolidation (``content_query``).

    A keyed recompute's rows are read by their weights, so they may come unconsolidated
    where every stage that reads them sums those weights: a DISTINCT, the view's bag, or an
    aggregate without MIN or MAX (which read rows, not only their weights); a top-k or
    another recompute reads rows. A DISTINCT's or an aggregate's table is read one row per
    stored row, so their queries, which group, are always read whole. (A bag is only ever a
    view's last stage, never read through its query.)"""
    if not isinstance(stage, RecomputeStage):
        return False
    readers = [s for s in stages if stage.table in s.sources]
    return bool(readers) and all(_sums_weights(reader) for reader in readers)


def _sums_weights(stage: Stage) -> bool:
    if isinstance(stage, AggregateStage):
        return not extremes.calls(stage.node)
    return isinstance(stage, (BagStage, DistinctStage))


def early_reason(
    record: Mapping,
    defined: Mapping[str, str],
    changed_rows: int,
    stages: Sequence[Stage],
    first: Stage,
) -> str | None:
    """Why the view is written in one statement from ``first``, its lowest changed stage,
    before any of its ``stages`` is refreshed, or None: its table's ``record`` is a
    one-statement write chosen for a change of ``DECIDED_ON`` rows under the definitions
    still ``defined`` (each stage table's plan fingerprint, the view's table last), and this
    refresh's ``changed_rows`` are at least ``EARLY_SHARE`` of those."""
    decided_on = record.get(DECIDED_ON)
    if decided_on is None or not inlinable(stages, first) or not _same_plans(record, defined):
        return None
    if changed_rows < EARLY_SHARE * decided_on:
        return None
    return (
        f"{COST_REASON}: its change lost to a recompute when {decided_on:,} source rows "
        f"had changed, and {changed_rows:,} have now; {EARLY}"
    )


def foreseen_reason(reason: str, table: str) -> str:
    """Why the view is written in one statement from its lowest stage, its stage ``table``'s
    change foreseen to lose to a recompute for ``reason`` (a cost rule's)."""
    return f"{reason} (the change of {table}, foreseen); {EARLY}"


def _same_plans(record: Mapping, defined: Mapping[str, str]) -> bool:
    """Whether the view's table's ``record`` was made under the definitions of the view's
    stages as they are now (``defined``, the view's table last): its own, and those of the
    stages a one-statement write read through."""
    inlined = record.get(INLINED) or {}
    return record.get("plan") == defined[list(defined)[-1]] and all(
        defined.get(table) == fingerprint for table, fingerprint in inlined.items()
    )


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
    if not record.get(INLINED) or not _same_plans(record, defined):
        return False
    covered = {list(defined)[-1], *record[INLINED]}
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
