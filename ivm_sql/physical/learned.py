"""Incremental or recompute, predicted from the stage's own history.

The analytic rules (``physical.cost``) see rows and bytes; they cannot see the fixed cost of
a MERGE, what file skipping saved, or what a statement costs on this cluster. The stage's
past refreshes do: the refresh event log's summary (``storage.refresh_log``) keeps, per stage,
its recent incremental refreshes as (source rows changed, seconds) and its recent
recomputes' seconds. As Databricks' Enzyme grounds its estimates in past executions, a
stage with both kinds of history is refreshed the way its history says is cheaper:

- **a recompute** costs the median of its recent recomputes (a recompute reads everything,
  whatever the change);
- **an incremental refresh** of ``n`` changed rows costs the median of its past refreshes of
  about that size (``n`` within a factor of ``NEAR``), when at least two were; otherwise the
  straight line through its past refreshes (fixed cost plus a cost per row, Theil-Sen:
  medians, which one slow refresh does not tilt, of slopes weighted by rows apart; neither
  below zero), when at least ``LINE_POINTS`` of them span sizes ``LINE_SPAN`` apart and
  ``n`` is at most ``LINE_REACH`` times the largest;
- **a change larger than any it has applied** (beyond the line's reach, or with no line)
  costs at least what the fastest of its largest past refreshes took, and at least what the
  line expects at the edge of its reach: a larger change is not cheaper. That floor is the
  guess. A recompute below it is a sure saving; otherwise the change is applied, and the
  history learns a size it had not seen (optimism in the face of uncertainty, as in
  Auer et al.'s UCB, 2002): without it, a stage whose large changes the analytic rules
  recompute would never learn that applying them is faster (measured at TPC-H SF 0.1: 7 of
  the 9 views of a round of 8.8% were faster applying it);
- otherwise (a change smaller than the ones it has seen, no line) the history cannot say.

The stage is recomputed when that, with what its recompute forces above it (the stages
it makes recompute, ``physical.cascade``), is expected to take at most ``RECOMPUTE_SHARE``
of the incremental time. A recompute's cost is what the recent recomputes took, or the first load's
until there is one: a first load also creates the table, often on a JVM still cold, so a
stage whose only recompute was its first load can look dearer to recompute than it is, and
then is never recomputed to find out. With ``history.explore`` on, such a stage is
recomputed once, to learn, after ``EXPLORE_AFTER`` incremental refreshes, when the first
load took at most ``EXPLORE_COST`` times what the change is expected to take: a wrong guess
then costs one refresh, at most that much slower (measured at TPC-H SF 0.1: two views whose
first loads looked dear applied every small change at 1.5-2.4x a recompute's time). A stage without both (new, or one way never run) is left to the analytic
rules, which are the prior. A wrong guess costs time, never correctness: both ways give the same rows.
"""

from __future__ import annotations

import bisect
import itertools
import statistics
from dataclasses import dataclass

from ivm_sql.storage.refresh_log import StageCosts

NEAR = 2.0  # past refreshes within this factor of the change's rows are "of about this size"
MIN_NEAR = 2  # of them, needed for their median to stand on its own
# A line through past refreshes needs sizes this far apart (largest over smallest), and this
# many of them: through a few small changes, noise alone makes a steep line.
LINE_SPAN = 10.0
LINE_POINTS = 3
# ... and is followed up to this many times the largest of them, no further
LINE_REACH = 4.0
# A recompute is chosen only when it (and the recomputes it forces above, ``physical.cascade``)
# is expected to take at most this share of the incremental time: on small tables the two
# ways differ by little more than noise.
RECOMPUTE_SHARE = 0.8
# history.explore: a stage recomputed only by its first load is recomputed once to learn,
# after this many incremental refreshes, when that load took at most this many times what
# the change is expected to take
EXPLORE_AFTER = 3
EXPLORE_COST = 2.0


@dataclass(frozen=True)
class Prediction:
    """Seconds the stage's history expects each way, and the facts they come from."""

    incremental: float
    full: float
    basis: str  # which past refreshes the incremental guess comes from
    recomputes: int  # the recomputes the full guess is the median of (0: the first load's)
    explore: bool = False  # recomputed to learn what a recompute costs now (history.explore)
    # what a recompute adds above the stage: stages it makes recompute, seconds they add
    # (``physical.cascade``)
    above_stages: int = 0
    above: float = 0.0

    @property
    def seconds(self) -> tuple[float, float]:
        """(incremental, full)."""
        return self.incremental, self.full

    @property
    def cheaper(self) -> bool:
        """Whether a recompute, with the recomputes it forces above, is expected to be the
        cheaper way."""
        return self.full + self.above <= RECOMPUTE_SHARE * self.incremental

    @property
    def recompute(self) -> bool:
        return self.cheaper or self.explore

    def reason(self) -> str:
        """What `ivm refresh` says decided, e.g. ``3 past incremental refreshes of about this
        size took 6.1 s median, the last recompute 2.4 s``."""
        if self.recomputes == 0:
            reason = f"{self.basis}, the first load {self.full:.1f} s"
        else:
            recomputes = "the last recompute" if self.recomputes == 1 else "recomputes"
            median = "" if self.recomputes == 1 else " median"
            reason = f"{self.basis}, {recomputes} {self.full:.1f} s{median}"
        if not self.above_stages:
            return reason
        return f"{reason}, and recomputing the {stages_above_it(self.above_stages)} {self.above:.1f} s more"


def stages_above_it(count: int) -> str:
    """``2 stages above it``: how a reason and `ivm compile` name the stages a recompute
    forces above it (``physical.cascade``)."""
    return f"{count} stage{'' if count == 1 else 's'} above it"


def describe(costs: StageCosts) -> str:
    """A stage's history as `ivm compile` shows it."""
    parts = []
    if costs.incremental:
        sizes = [int(rows) for rows, _ in costs.incremental]
        median = statistics.median(s for _, s in costs.incremental)
        parts.append(
            f"{len(sizes)} incremental refreshes (median {median:.1f} s, "
            f"{min(sizes):,} to {max(sizes):,} rows changed)"
        )
    if costs.full:
        parts.append(f"{len(costs.full)} recomputes (median {statistics.median(costs.full):.1f} s)")
    elif costs.created is not None:
        parts.append(f"its first load ({costs.created:.1f} s)")
    both = costs.incremental and (costs.full or costs.created is not None)
    return ", ".join(parts) + (": it chooses" if both else ": one way only, the rules above decide")


def predict(
    costs: StageCosts | None,
    changed_rows: int,
    explore: bool = False,
    above_stages: int = 0,
    above: float = 0.0,
) -> Prediction | None:
    """What the stage's history expects a refresh of ``changed_rows`` rows to cost each
    way; None when it cannot say (the analytic rules decide). ``explore``: a stage recomputed
    only by its first load may be recomputed to learn (``history.explore``). ``above``:
    the seconds the ``above_stages`` stages a recompute forces above it add (``physical.cascade``)."""
    if costs is None or not costs.incremental:
        return None
    full = recompute_seconds(costs)
    if full is None:
        return None
    incremental = _incremental(costs.incremental, changed_rows)
    if incremental is None:
        return None
    seconds, basis = incremental
    explored = (
        explore
        and not costs.full
        and len(costs.incremental) >= EXPLORE_AFTER
        and full + above <= EXPLORE_COST * seconds
    )
    return Prediction(seconds, full, basis, len(costs.full), explored, above_stages, above)


def recompute_seconds(costs: StageCosts) -> float | None:
    """What a recompute of the stage costs by its history: the median of its recent
    recomputes, or its first load until there is one; None: neither is known."""
    return statistics.median(costs.full) if costs.full else costs.created


def _incremental(samples: list[list[float]], rows: int) -> tuple[float, str] | None:
    """Seconds an incremental refresh of ``rows`` rows should take, and why."""
    near = [seconds for then, seconds in samples if _near(then, rows)]
    if len(near) >= MIN_NEAR:
        median = statistics.median(near)
        return (
            median,
            f"{len(near)} past incremental refreshes of about this size took {median:.1f} s median",
        )
    sizes = [max(then, 1.0) for then, _ in samples]
    largest = max(sizes)
    line = None
    if len(samples) >= LINE_POINTS and largest >= LINE_SPAN * min(sizes):
        line = _line(samples)
    if line is not None and rows <= LINE_REACH * largest:
        slope, intercept = line
        guess = intercept + slope * rows
        return guess, (
            f"{len(samples)} past incremental refreshes ({intercept:.1f} s + {slope * 1000:.3f} s "
            f"per 1,000 rows) put this one at {guess:.1f} s"
        )
    if rows > largest:
        return _floor(samples, largest, line)
    return None


def _floor(
    samples: list[list[float]], largest: float, line: tuple[float, float] | None
) -> tuple[float, str]:
    """Seconds a change larger than every past one takes at least, and why: the fastest of
    the past refreshes of about the largest size, or the line at the edge of its reach."""
    fastest = min(seconds for then, seconds in samples if _near(then, int(largest)))
    if line is not None:
        slope, intercept = line
        edge = intercept + slope * LINE_REACH * largest
        if edge > fastest:
            return edge, (
                f"{len(samples)} past incremental refreshes ({intercept:.1f} s + "
                f"{slope * 1000:.3f} s per 1,000 rows) put one of "
                f"{int(LINE_REACH * largest):,} rows at {edge:.1f} s, and this one is larger"
            )
    return fastest, (
        f"its largest past incremental refreshes ({int(largest):,} rows) took "
        f"{fastest:.1f} s or more, and this one is larger"
    )


def _near(then: float, now: int) -> bool:
    low, high = sorted((max(then, 1.0), max(float(now), 1.0)))
    return high <= NEAR * low


def _line(samples: list[list[float]]) -> tuple[float, float]:
    """The Theil-Sen line of seconds over rows, its slopes weighted by how far apart in rows
    each two refreshes are (Sievers' weighted median, 1978), neither below zero; its
    intercept the median of what each refresh leaves. A median, not least squares: one slow
    refresh among a few small ones tilts a least-squares line steeply, and the line is then
    followed far beyond them. Weighted: two small refreshes a few rows apart differ by noise
    alone, and the slope between them is as steep as the noise over those few rows (measured:
    three refreshes of 33-96 rows set the plain median's slope 5x steeper than the two of
    thousands of rows showed)."""
    slopes = sorted(
        ((y2 - y1) / (x2 - x1), abs(x2 - x1))
        for i, (x1, y1) in enumerate(samples)
        for x2, y2 in samples[i + 1 :]
        if x2 != x1
    )
    slope = max(_weighted_median(slopes), 0.0)
    intercept = statistics.median(y - slope * x for x, y in samples)
    if intercept < 0:  # a fixed cost cannot be negative: the line through the origin instead
        slope, intercept = statistics.median(y / x for x, y in samples if x > 0), 0.0
    return slope, intercept


def _weighted_median(ranked: list[tuple[float, float]]) -> float:
    """The value at half the total weight of ``ranked`` (value, weight) pairs, in order."""
    cumulative = list(itertools.accumulate(weight for _, weight in ranked))
    return ranked[bisect.bisect_left(cumulative, cumulative[-1] / 2)][0]
