"""Incremental or recompute: a refresh recomputes a stage when its change is large.

Applying a change costs about the change's size times a per-row factor (join terms, a MERGE
that rewrites the files it touches); recomputing costs about the size of the inputs. When a
change is a large share of what a stage reads, recomputing is cheaper, so the stage is
rebuilt from its inputs' new versions instead, and the refresh says why.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ivm_sql.config import RefreshSettings

# Below this many changed rows both ways cost Spark's fixed cost per statement, and a
# recompute would also make every stage above it recompute: stay incremental.
SMALL_CHANGE = 10_000


@dataclass(frozen=True)
class CostModel:
    """``recompute_above``: the share of a stage's input rows above which a change is
    recomputed (ivm.yaml ``refresh.recompute_above``); None: always incremental."""

    recompute_above: float | None

    @classmethod
    def from_settings(cls, settings: RefreshSettings) -> "CostModel":
        return cls(settings.recompute_above)

    def recompute_reason(self, changed_rows: Mapping[str, int], count_rows: Callable[[str], int]) -> str | None:
        """Why a stage is recomputed instead of refreshed incrementally, or None.

        ``changed_rows``: rows changed since the stage's versions, per input it reads;
        ``count_rows(table)``: the rows an input holds now, asked only for a large change."""
        if self.recompute_above is None:
            return None
        changed = sum(changed_rows.values())
        if changed <= SMALL_CHANGE:
            return None
        rows = sum(count_rows(table) for table in changed_rows)
        if changed <= self.recompute_above * rows:
            return None
        return (
            f"cheaper than incremental: {changed:,} changed rows are {changed / max(rows, 1):.0%} "
            f"of the {rows:,} rows it reads (recompute_above: {self.recompute_above:g})"
        )

    def describe(self) -> str:
        if self.recompute_above is None:
            return "always incremental (refresh.recompute_above: never)"
        return (
            f"recomputed instead when a refresh's changed rows exceed {self.recompute_above:.0%} "
            f"of the rows the stage reads (refresh.recompute_above) and {SMALL_CHANGE:,} rows"
        )
