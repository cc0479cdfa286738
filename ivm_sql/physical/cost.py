"""Incremental or recompute: a refresh recomputes a stage when that is cheaper.

Applying a change costs the Delta data its query scans whole (the other side of each join
term, the inputs of a touched-keys recompute), a few statements (plan and compute the
change, then MERGE it), and the MERGE's pass over the stage's table. Recomputing costs the
data its query scans, one statement, and writing the table. Delta offers no index and no
dynamic file pruning, so a join term scans the whole of the other side however small its
change is. Two rules pick the cheaper way, as Databricks' Enzyme does per refresh, and the
refresh says which one fired:

- **rows**: the change is a large share of the rows the stage reads;
- **scans**: the change query scans at least as many bytes as the recompute does (both pay
  for the stage's own table, once read and once written, so the scans decide, and the
  incremental way's extra statements break a tie). An input a join term reads bounded by
  the change's keys (``physical.bounds``) counts only the files whose statistics overlap
  them; any other, whole. A change to both sides of a join with scattered keys does this:
  each side's term reads the other side in full. The rule is weighed twice: before any of
  the change is read, each bounded input counted as its files without statistics (the least
  any keys leave: ``bounds.least_reads``), so that a change whose unbounded reads alone
  outweigh a recompute is never computed; then, if that did not decide, with the keys known.

A view of several stages has a third way, its whole SELECT in one statement
(``physical.one_statement``), and a third rule weighs it, before any stage is refreshed:

- **statements**: a changed stage runs its change and a MERGE into its table, each statement
  with Spark's and Delta's fixed cost (planning, a listing of each scan's files, a snapshot
  state: about a second and a dozen jobs at TPC-H SF 1, whatever the rows). The rule counts
  that fixed cost as ``STATEMENT_BYTES`` read, per statement of a changed stage, and writes
  the view in one statement when its SELECT, with one such cost, reads less than the
  stages' changes, their MERGEs into the tables below the view's (each table read and
  written again), and their fixed costs. A change of at most ``SMALL_CHANGE`` rows leaves
  it quiet, as it leaves the rows rule: there both ways cost fixed costs, and the
  incremental way keeps the stages current. So does a view another view reads, whose
  stages the write in one statement would make recompute (``physical.cascade``): a cost
  the rule cannot see. It runs where the analytic rules choose, before any stage
  (``runtime.refresh``'s foresight, with ``physical.foresight``'s stand-ins).

Sizes come from Delta's checksum files (no Spark job); an unknown size decides nothing.

Both rules are the prior: a stage whose own history has refreshed it both ways is refreshed
the way that history says is cheaper (``physical.learned``), counting what its recompute
forces above it (``physical.cascade``), and the rules stay quiet. No stage below an
INCREMENTAL STRICT view's is recomputed by choice, by any rule: that view would fail.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from sqlglot import exp

from ivm_sql.config import RefreshSettings
from ivm_sql.physical import execution
from ivm_sql.physical.bounds import BoundRead, read_bytes
from ivm_sql.physical.cascade import Above
from ivm_sql.physical.learned import Prediction, predict
from ivm_sql.physical.learned import describe as describe_history
from ivm_sql.refresh_policy import RefreshPolicy
from ivm_sql.storage.refresh_log import StageCosts

# Below this many changed rows both ways cost Spark's fixed cost per statement, and a
# recompute would also make every stage above it recompute: the rows rule stays quiet.
SMALL_CHANGE = 10_000
COST_REASON = "cheaper than incremental"  # how the rules' reasons start
# The statements rule: a statement's fixed cost, as the bytes of Delta tables a scan reads in
# that time. Measured at TPC-H SF 1 on 2 cores (docs/performance.md): a statement costs about
# a second whatever its rows (a MERGE into a small table 0.78-1.13 s, bench/writes.py), and
# the views' CTAS read their tables at 50-90 MB a second (q20 248 MB in 2.7 s, q03 and q10
# 266 MB in 3.5-3.7 s, q18 466 MB in 8.9 s, 2026-12-07).
STATEMENT_BYTES = 64 * 10**6
# a changed stage runs its change and its MERGE (and commits with the MERGE); the view in
# one statement, one
STAGE_STATEMENTS = 2
# how a recompute history.explore chose says so
EXPLORE_REASON = "history.explore, to learn what a recompute costs"


HISTORY = "history"  # what decided: the stage's own history (``physical.learned``)
ANALYTIC = "analytic"  # the rows and scans rules
FORCED = "forced"  # nothing to decide: a recompute that must be, or a policy without a choice


@dataclass(frozen=True)
class Choice:
    """A stage's way for one change: ``reason`` to recompute (None: apply the change), what
    decided (``HISTORY`` or ``ANALYTIC``), and what history predicted, if it could."""

    reason: str | None
    decided_by: str
    prediction: Prediction | None = None


class CheaperToRecompute(Exception):
    """Raised where a rule finds a recompute cheaper once the change is known; its text is the reason."""


@dataclass(frozen=True)
class CostModel:
    """``recompute_above``: the share of a stage's input rows above which a change is
    recomputed (ivm.yaml ``refresh.recompute_above``); None: always incremental, every rule
    off, history too. ``history``: per stage table, its recent costs (the refresh log's
    summary); None: choices are not learned. ``above``: per stage table, the stages its
    recompute forces in this refresh (``physical.cascade``)."""

    recompute_above: float | None
    history: Mapping[str, StageCosts] | None = field(default=None, compare=False)
    explore: bool = False  # history.explore (``physical.learned``)
    above: Mapping[str, Above] = field(default_factory=dict, compare=False)

    @classmethod
    def from_settings(cls, settings: RefreshSettings) -> CostModel:
        return cls(settings.recompute_above)

    def under(self, policy: RefreshPolicy) -> CostModel:
        """The cost model a view's refresh uses: this one under AUTO; none at all (both rules
        off) for an incremental policy, so a large change is applied, never recomputed, and
        for FULL, whose one stage recomputes whole anyway (with the policy as its reason)."""
        if policy is RefreshPolicy.AUTO:
            return self
        return replace(self, recompute_above=None, history=None, explore=False)

    def learning_from(self, history: Mapping[str, StageCosts], explore: bool = False) -> CostModel:
        """This model, its choices learned from ``history`` where a stage has both ways in it;
        ``explore``: a stage recomputed only by its first load may be recomputed to learn."""
        return replace(self, history=history, explore=explore)

    def weighing(self, above: Mapping[str, Above]) -> CostModel:
        """This model, a stage's recompute weighed with the stages it forces ``above`` it."""
        return replace(self, above=above)

    def choose(
        self, table: str, changed_rows: Mapping[str, int], count_rows: Callable[[str], int]
    ) -> Choice:
        """How the stage ``table`` takes a change of ``changed_rows`` (per input): as its
        history says, when it can; else by the rows rule (the scans rule follows, once the
        change's bounds are known)."""
        above = self.above.get(table, Above(()))
        if self.recompute_above is None or above.strict_view is not None:
            return Choice(None, FORCED)
        if self.history is not None:
            prediction = predict(
                self.history.get(table),
                sum(changed_rows.values()),
                self.explore,
                len(above.tables),
                above.extra_seconds(self.history),
            )
            if prediction is not None:
                reason = None
                if prediction.cheaper:
                    reason = f"{COST_REASON}: {prediction.reason()}"
                elif prediction.explore:
                    reason = f"{EXPLORE_REASON}: {prediction.reason()}"
                return Choice(reason, HISTORY, prediction)
        return Choice(self.recompute_reason(changed_rows, count_rows), ANALYTIC)

    def recompute_reason(
        self, changed_rows: Mapping[str, int], count_rows: Callable[[str], int]
    ) -> str | None:
        """The rows rule: why a stage is recomputed instead of refreshed incrementally, or None.

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
            f"{COST_REASON}: {changed:,} changed rows are {changed / max(rows, 1):.0%} "
            f"of the {rows:,} rows it reads (recompute_above: {self.recompute_above:g})"
        )

    def scan_reason(
        self, change_bytes: int | None, recompute_bytes: int | None, least: bool = False
    ) -> str | None:
        """The scans rule: the bytes of Delta tables the change query and the recompute read
        (``scanned_bytes``: each scan counted, repeats too; None: a size is unknown).
        ``least``: ``change_bytes`` is the least the change can read, weighed before its keys
        are known (``bounds.least_reads``), so the rule decides before any of the change is
        computed; the keys could only add to it."""
        if self.recompute_above is None or change_bytes is None or recompute_bytes is None:
            return None
        if recompute_bytes == 0 or change_bytes < recompute_bytes:
            return None
        reads = "reads at least" if least else "reads"
        return (
            f"{COST_REASON}: its change {reads} {_size(change_bytes)} of tables, "
            f"a recompute {_size(recompute_bytes)}"
        )

    def weighs_statements(self, view_table: str, changed_rows: int) -> bool:
        """Whether the statements rule weighs a change of ``changed_rows`` base rows to the
        view whose table is ``view_table``: not when a stage of another view reads that
        table, which a write of it in one statement would make recompute too, a cost the
        rule cannot see."""
        return (
            self.recompute_above is not None
            and changed_rows > SMALL_CHANGE
            and view_table not in self.above
        )

    def statements_reason(
        self,
        view_table: str,
        changed_rows: int,
        change_bytes: Sequence[int | None],
        merged_bytes: Sequence[int | None],
        at_once_bytes: int | None,
    ) -> str | None:
        """The statements rule: why a view of several stages is cheaper to write in one
        statement over its whole SELECT than stage by stage, or None. ``changed_rows``: base
        rows changed below the view; per changed stage, the bytes its change reads
        (``change_bytes``) and its MERGE passes over (``merged_bytes``: its table's, 0 for
        the view's own, which either way writes); ``at_once_bytes``: what the one statement
        reads. None anywhere: a size is unknown, and nothing is decided."""
        if not self.weighs_statements(view_table, changed_rows):
            return None
        if at_once_bytes is None or None in change_bytes or None in merged_bytes:
            return None
        statements = STAGE_STATEMENTS * len(change_bytes)
        # a MERGE reads its table and writes again each file a changed key is in: at a
        # change of this size, scattered over the keys, about every file
        reads = sum(change_bytes) + 2 * sum(merged_bytes)
        if at_once_bytes + STATEMENT_BYTES >= reads + statements * STATEMENT_BYTES:
            return None
        stages = len(change_bytes)
        return (
            f"{COST_REASON}: its {stages} changed stage{'' if stages == 1 else 's'} read "
            f"{_size(sum(change_bytes))} and MERGE into {_size(sum(merged_bytes))} in "
            f"{statements} statements (each counted as {_size(STATEMENT_BYTES)} read), its "
            f"SELECT in one statement reads {_size(at_once_bytes)}"
        )

    def describe_stage(self, table: str) -> str | None:
        """What `ivm compile` says of a stage's history; None when choices are not learned
        or it has none."""
        costs = self.history.get(table) if self.history is not None else None
        if costs is None or self.recompute_above is None or not (costs.incremental or costs.full):
            return None
        return describe_history(costs)

    def describe_above(self, table: str) -> str | None:
        """What `ivm compile` says of the stages a recompute of ``table`` forces; None when
        the model is off or there are none."""
        above = self.above.get(table)
        if above is None or self.recompute_above is None:
            return None
        if above.strict_view is not None:
            return (
                f"never recomputed by choice: view {above.strict_view} above it is "
                "INCREMENTAL STRICT, and a recompute here would make it fail"
            )
        weighed = " (its history weighs them)" if self.history is not None else ""
        return f"a recompute here also recomputes the {above.describe()}: {', '.join(above.tables)}{weighed}"

    def describe(self) -> str:
        if self.recompute_above is None:
            return "always incremental (refresh.recompute_above: never)"
        return (
            f"recomputed instead when a refresh's changed rows exceed {self.recompute_above:.0%} "
            f"of the rows the stage reads (refresh.recompute_above) and {SMALL_CHANGE:,} rows, "
            "or when its change would scan at least the bytes a recompute scans (an input bounded by the change's keys: "
            "the files they open); a view of several stages is written in one statement when its SELECT reads less than "
            f"its changed stages read and MERGE over, each of their statements counted as {_size(STATEMENT_BYTES)} read"
        )


def _size(size: int) -> str:
    for unit, scale in (("GB", 10**9), ("MB", 10**6), ("kB", 10**3)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{size} bytes"


def scanned_bytes(
    query: exp.Query,
    bounded: list[BoundRead],
    size: Callable[[str, int], int | None],
    file_stats: Callable[[str, int], list[tuple[int, dict]] | None],
) -> int | None:
    """Bytes of the Delta table versions ``query`` scans, each scan counted (not the range
    reads of a temporal filter): whole, or, for a table ``bounded`` by the change's keys, the
    files whose statistics overlap the bounds (``file_stats``: each file's size and
    statistics, from Delta's checksum file); None if a size is unknown."""
    bounds = {id(read.table): read for read in bounded}
    sizes = []
    for node, (table, version) in execution.scan_nodes(query, range_reads=False):
        read = bounds.get(id(node))
        files = file_stats(table, version) if read is not None else None
        sizes.append(
            size(table, version) if files is None else read_bytes(files, read.column, read.ranges)
        )
    return None if None in sizes else sum(sizes)
