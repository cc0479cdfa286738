"""What a stage's recompute costs above it: the stages it makes recompute too.

A stage's table is the integral of its output; a refresh adds to it the change of its
output over its sources' changes (DBSP's Q^Δ = D ∘ Q ∘ I, Theorem 3.3). A recompute writes
the table whole, and that write is no change a stage reading it can apply: every stage
above it in the same refresh, in its own view and in the views that read it, is recomputed
too (``physical.recompute``: "<table> was recomputed"). A stage's own two times do not show
that. Measured on the demo: the history of ``order_lines`` found its own recompute faster,
and every round it also recomputed the two views over it. So a chosen recompute is weighed
with what it forces:

- a stage above it costs what its recompute takes beyond its incremental refresh, by its own
  history (the median of its recent recomputes, or its first load, less the median of its
  recent incremental refreshes), and nothing when its recompute is the faster way anyway (a
  stage with no history of both ways counts nothing: nothing is known);
- a stage above it of an INCREMENTAL STRICT view would fail the refresh (a recompute it did
  not ask for, ``physical.policy``): no stage below one is recomputed by choice.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ivm_sql.physical.learned import recompute_seconds, stages_above_it
from ivm_sql.storage.refresh_log import StageCosts


@dataclass(frozen=True)
class StageEdges:
    """One stage of a refresh as the cascade sees it: its table, the tables it reads, and
    its view's name when that view is INCREMENTAL STRICT (None: it accepts a recompute)."""

    table: str
    sources: tuple[str, ...]
    strict_view: str | None = None


@dataclass(frozen=True)
class Above:
    """The stages a recompute of one stage makes recompute in the same refresh, and the
    first INCREMENTAL STRICT view among theirs (None: there is none)."""

    tables: tuple[str, ...]
    strict_view: str | None = None

    def extra_seconds(self, history: Mapping[str, StageCosts]) -> float:
        """Seconds these recomputes are expected to add to the refresh, by their history."""
        return sum(_extra(history.get(table)) for table in self.tables)

    def describe(self) -> str:
        """How `ivm compile` and a refresh's reason name them."""
        return stages_above_it(len(self.tables))


def stages_above(stages: Iterable[StageEdges]) -> dict[str, Above]:
    """Per stage table, the stages of ``stages`` that read it, directly or through others."""
    stages = list(stages)
    readers: dict[str, list[StageEdges]] = {}
    for stage in stages:
        for source in stage.sources:
            readers.setdefault(source, []).append(stage)
    above = {}
    for stage in stages:
        found: dict[str, StageEdges] = {}
        waiting = list(readers.get(stage.table, []))
        while waiting:
            reader = waiting.pop()
            if reader.table not in found and reader.table != stage.table:
                found[reader.table] = reader
                waiting += readers.get(reader.table, [])
        if found:
            strict = next((s.strict_view for s in found.values() if s.strict_view), None)
            above[stage.table] = Above(tuple(sorted(found)), strict)
    return above


def _extra(costs: StageCosts | None) -> float:
    """What a stage's recompute takes beyond its incremental refresh, by its history."""
    if costs is None or not costs.incremental:
        return 0.0
    full = recompute_seconds(costs)
    if full is None:
        return 0.0
    return max(0.0, full - statistics.median(seconds for _, seconds in costs.incremental))
