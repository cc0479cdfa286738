"""Cuts a view's algebra at its stateful operators into stages, each kept in a Delta table.

A stage is a stateless tree (scans, select-project-join, UNION ALL) under one stateful
operator: a bag (the view's own rows), DISTINCT, GROUP BY, a keyed recompute, or the fixed
point of a recursive CTE. Its table holds the
operator's state and, read back through a Scan, is the input of what lies above it, the
same way a view over a view reads the other view. The chain rule, (Q2 ∘ Q1)^Δ = Q2^Δ ∘ Q1^Δ,
is what makes refreshing the stages in order correct.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar

from sqlglot import exp

from ivm_sql.algebra.clock import node_reads_clock, reads_clock
from ivm_sql.algebra.nodes import (
    RECURSIVE_PREFIX,
    Aggregate,
    Constant,
    Distinct,
    Node,
    Recompute,
    Recursive,
    Scan,
    Select,
    TopK,
    UnionAll,
    scans,
)
from ivm_sql.incremental import (
    aggregate,
    bag,
    delta,
    distinct,
    extremes,
    fixpoint,
    recompute,
    snapshot,
    top_k,
)
from ivm_sql.incremental.versions import Pins, Versions
from ivm_sql.sqlbuild import INTERNAL_PREFIX, col, consolidate, to_sql

# how each incremental kind of stage applies a change
METHODS = {
    "bag": "linear and join changes appended to the stored rows as a batch (multiplicity per row)",
    "distinct": "per-row counts, a row appears or disappears when its count crosses zero",
    "distinct_trace": "per-row counts appended as a batch, a row shown while its summed count is above zero (no other view reads this one)",
    "aggregate": "COUNT/SUM/AVG per group updated from the change alone",
    "aggregate_trace": "COUNT/SUM/AVG per group updated from the change alone, appended as a batch of per-group deltas and summed when read (no other view reads this one)",
    "extremes": "MIN/MAX per group from the change alone, a group rescanned only when its extreme loses its last row",
    "fixpoint": "fixed-point loop, the recursive term iterated over the change until it is empty",
    "top_k": "ORDER BY ... LIMIT from a prefix of candidates",
}
TEMPORAL = "temporal filter: rows enter and leave as the clock passes their bounds"


@dataclass(frozen=True, eq=False)
class Stage:
    """One Delta table of a view and what feeds it; one subclass per kind of operator
    kept in the table, each with DBSP's rule for it (``initial_query``, ``change_query``,
    ``merge``).

    ``node`` is the stateless input tree for a bag or DISTINCT stage, and the stateful
    operator itself (its inputs lowered) for an aggregate, recompute or fixpoint stage.
    """

    table: str
    node: Node
    kind: ClassVar[str]  # its name in `ivm compile`, `--json` and the plan's fingerprint

    @property
    def input(self) -> Node:
        return self.node

    @property
    def aggregate(self) -> Aggregate | None:
        return None

    @property
    def sources(self) -> tuple[str, ...]:
        """The tables this stage reads, each once, in the order they appear (a recursive
        term's reads of its own CTE are the stage's loop, not a source)."""
        return tuple(
            dict.fromkeys(
                s.table for s in scans(self.node) if not s.table.startswith(RECURSIVE_PREFIX)
            )
        )

    @property
    def merge_keys(self) -> tuple[str, ...]:
        """The columns by which its MERGE finds a group's or a key's stored rows, by which a
        full load lays its table out (``physical.layout``); none for a table its writes
        append to, or one whose MERGE matches whole rows of a bag."""
        return ()

    @property
    def recomputes_all(self) -> bool:
        """A recompute with one global key: any change recomputes the whole operator."""
        return False

    @property
    def every_refresh(self) -> bool:
        """Recomputed by every refresh, changed sources or not (it reads the current time)."""
        return False

    @property
    def reads_clock(self) -> bool:
        """Whether this stage reads the current time: in a filter (``temporal``), or in a
        recompute on every refresh."""
        return node_reads_clock(self.node)

    @property
    def scope(self) -> str:
        """What a refresh redoes: incremental, recompute touched keys, or recompute all."""
        return "incremental"

    @property
    def method(self) -> str:
        """How a change is applied, or why the stage recomputes."""
        return METHODS[self.kind]

    @property
    def strategy(self) -> str:
        """The scope and how, or why: shown by `ivm compile`, `ivm refresh` and `ivm graph`."""
        method = self.method
        if self.reads_clock and not self.every_refresh:
            method += f"; {TEMPORAL}"
        return f"{self.scope}: {method}"

    def initial_query(self, pins: Pins) -> exp.Select:
        """The stage's whole content at the pinned versions (first load, or a recompute)."""
        return bag.initial(self.node.columns, snapshot(self.node, pins, "new"))

    def content_query(self, pins: Pins) -> exp.Query:
        """The same Z-set as ``initial_query``, maybe not consolidated (a row may come more
        than once, each weight positive): what a stage above that sums weights reads in one
        statement (``physical.one_statement.read_unconsolidated``). Here, consolidated."""
        return self.initial_query(pins)

    def change_query(self, pins: Pins) -> exp.Select | None:
        """The consolidated change of the stage's table between the old and new pins, in the
        shape its MERGE applies; None when no source changed."""
        changes = delta(self.node, pins)
        return None if changes is None else bag.change(self.node.columns, changes)

    def write(self, change: exp.Query) -> exp.Expression:
        """The statement (a MERGE, unless the stage says otherwise) that adds ``change`` (a
        query in ``change_query``'s shape) to the table."""
        return bag.merge(self.table, self.node.columns, change)

    def write_statement(self, pins: Pins) -> exp.Expression | None:
        """The statement that applies the change between the old and new pins; None if none."""
        change = self.change_query(pins)
        return None if change is None else self.write(change)


class BagStage(Stage):
    """The view's own rows with their multiplicities: linear and join operators pass their
    change through (DBSP: a linear operator is its own incremental version; a join expands
    bilinearly), and the table integrates it as a trace of appended batches
    (``incremental.bag``)."""

    kind = "bag"

    def write(self, change: exp.Query) -> exp.Expression:
        """The INSERT that appends ``change`` to the trace as one batch."""
        return bag.append(self.table, self.node.columns, change)

    def rewrite(self, change: exp.Query) -> exp.Insert:
        """The INSERT OVERWRITE that writes the trace and ``change`` consolidated."""
        return bag.rewrite(self.table, self.node.columns, change)


class DistinctStage(Stage):
    """DISTINCT over its input: a count per row, a row in or out as its count crosses zero
    (DBSP, Prop. 4.7: distinct_incremental)."""

    kind = "distinct"

    @property
    def merge_keys(self) -> tuple[str, ...]:
        return self.node.columns

    def change_query(self, pins: Pins) -> exp.Select | None:
        changes = delta(self.node, pins)
        return None if changes is None else distinct.change(self.node.columns, changes)

    def write(self, change: exp.Query) -> exp.Expression:
        return distinct.merge(self.table, self.node.columns, change)


class DistinctTraceStage(DistinctStage):
    """DISTINCT of a view no other view reads, its table a trace of appended per-row count
    deltas (``incremental.distinct``): the same counts, summed when read."""

    @property
    def method(self) -> str:
        return METHODS["distinct_trace"]

    @property
    def merge_keys(self) -> tuple[str, ...]:
        return ()

    def write(self, change: exp.Query) -> exp.Expression:
        """The INSERT that appends ``change`` to the trace as one batch."""
        return bag.append(self.table, self.node.columns, change)

    def rewrite(self, change: exp.Query) -> exp.Insert:
        """The INSERT OVERWRITE that writes the trace and ``change`` consolidated."""
        return bag.rewrite(self.table, self.node.columns, change)


class AggregateStage(Stage):
    """GROUP BY with aggregates kept from the change alone (COUNT, SUM, AVG; MIN and MAX with
    the extreme's count): DBSP, Section 4.2, over the group's state."""

    kind = "aggregate"
    node: Aggregate

    @property
    def input(self) -> Node:
        return self.node.input

    @property
    def aggregate(self) -> Aggregate:
        return self.node

    @property
    def merge_keys(self) -> tuple[str, ...]:
        return self.node.keys

    @property
    def method(self) -> str:
        return METHODS["extremes" if extremes.calls(self.node) else "aggregate"]

    def initial_query(self, pins: Pins) -> exp.Select:
        return aggregate.initial(self.node, snapshot(self.node.input, pins, "new"))

    def change_query(self, pins: Pins) -> exp.Select | None:
        changes = delta(self.node.input, pins)
        return None if changes is None else aggregate.change(self.node, changes, self.table)

    def write(self, change: exp.Query) -> exp.Expression:
        return aggregate.merge(self.table, self.node, change)


class AggregateTraceStage(AggregateStage):
    """An aggregate (no MIN or MAX) of a view no other view reads, its table a trace of
    appended per-group state deltas (``incremental.aggregate``): the same state, summed
    when read."""

    @property
    def method(self) -> str:
        return METHODS["aggregate_trace"]

    @property
    def merge_keys(self) -> tuple[str, ...]:
        return ()

    def write(self, change: exp.Query) -> exp.Expression:
        """The INSERT that appends ``change`` to the trace as one batch."""
        return aggregate.append(self.table, self.node, change)

    def rewrite(self, change: exp.Query) -> exp.Insert:
        """The INSERT OVERWRITE that writes the trace and ``change`` summed per group."""
        return aggregate.rewrite(self.table, self.node, change)


# the stages whose table is a trace of appended batches, now and then rewritten consolidated
TRACES = (BagStage, DistinctTraceStage, AggregateTraceStage)


class RecomputeStage(Stage):
    """An operator without an incremental rule, recomputed for the keys a change touches
    (or whole, with one global key), and the rows it stored for them replaced."""

    kind = "recompute"
    node: Recompute

    @property
    def recomputes_all(self) -> bool:
        return not any(self.node.keys)

    @property
    def merge_keys(self) -> tuple[str, ...]:
        """Its hidden key columns: a touched key's rows are replaced together."""
        return recompute.key_columns(self.node)

    @property
    def every_refresh(self) -> bool:
        return self.node.every_refresh

    @property
    def scope(self) -> str:
        if not self.recomputes_all:
            return "recompute touched keys"
        if self.every_refresh:
            return "recompute all on every refresh"
        return "recompute all on any change"

    @property
    def method(self) -> str:
        return self.node.reason

    def initial_query(self, pins: Pins) -> exp.Select:
        return consolidate(self.content_query(pins), recompute.stored_columns(self.node))

    def content_query(self, pins: Pins) -> exp.Select:
        """The recomputed rows, each with weight 1, before they are consolidated."""
        return recompute.content(self.node, pins)

    def change_query(self, pins: Pins) -> exp.Select | None:
        return recompute.change(self.node, self.table, pins)

    def write(self, change: exp.Query) -> exp.Expression:
        return bag.merge(self.table, recompute.stored_columns(self.node), change)


class TopKStage(Stage):
    """ORDER BY ... LIMIT k from a stored prefix of the input's order, kept from the change
    alone until deletions use up its margin (``incremental.top_k``)."""

    kind = "top_k"
    node: TopK

    @property
    def input(self) -> Node:
        return self.node.input

    @property
    def method(self) -> str:
        return top_k.describe(self.node)

    def initial_query(self, pins: Pins) -> exp.Query:
        return top_k.initial(self.node, snapshot(self.node.input, pins, "new"))

    def change_query(self, pins: Pins) -> exp.Select | None:
        changes = delta(self.node.input, pins)
        return None if changes is None else top_k.change(self.node, changes, self.table)

    def refill_query(self, pins: Pins) -> exp.Select:
        """The change that reads the prefix again from the input at the new pins."""
        return top_k.replacement(self.node, self.initial_query(pins), self.table)

    def write(self, change: exp.Query) -> exp.Expression:
        return bag.merge(self.table, top_k.stored_columns(self.node), change)


class FixpointStage(Stage):
    """A recursive CTE's fixed point: the recursive term iterated over the change until it is
    empty (DBSP, Section 6: recursive queries, semi-naive evaluation), its rows kept as a bag."""

    kind = "fixpoint"
    node: Recursive

    def initial_query(self, pins: Pins) -> exp.Select:
        return fixpoint.seed_initial(self.node, pins)

    def change_query(self, pins: Pins) -> exp.Select | None:
        return fixpoint.seed_change(self.node, self.table, pins)


class Lowering:
    """Replaces every DISTINCT and GROUP BY by a Scan of a new stage's table."""

    def __init__(self, database: str, view: str, traced: bool):
        self.database = database
        self.view = view
        self.traced = traced  # its last DISTINCT or aggregate may be a trace (no view reads it)
        self.stages: list[Stage] = []
        self._kept: dict[
            str, Stage
        ] = {}  # what an aggregate stage computes (``_computes``) -> its stage

    def table_name(self, final: bool) -> str:
        suffix = "" if final else f"_s{len(self.stages) + 1}"
        return f"{self.database}.{INTERNAL_PREFIX}_{self.view}{suffix}"

    def lower(self, node: Node) -> Node:
        if isinstance(node, (Scan, Constant)):
            return node
        if isinstance(node, Select):
            return replace(node, sources=tuple((a, self.lower(n)) for a, n in node.sources))
        if isinstance(node, UnionAll):
            return replace(node, branches=tuple(self.lower(b) for b in node.branches))
        return self.stage(node, final=False)

    def stage(self, node: Node, final: bool) -> Scan:
        """A new stage for a stateful (or, for the view itself, any) node; returns its reader."""
        if isinstance(node, Recompute):
            lowered: Node = replace(
                node, sources=tuple((a, self.lower(n)) for a, n in node.sources)
            )
        elif isinstance(node, Recursive):
            lowered = replace(node, anchor=self.lower(node.anchor), step=self.lower(node.step))
        elif isinstance(node, (Aggregate, Distinct, TopK)):
            lowered = replace(node, input=self.lower(node.input))
        else:
            lowered = self.lower(node)
        name = self.table_name(final)  # after lowering: inner stages are numbered first
        computes = (
            _computes(AggregateStage(name, lowered))
            if isinstance(node, Aggregate) and not final
            else None
        )
        kept = self._kept.get(computes) if computes is not None else None
        if kept is not None:  # the same state twice (a WITH read twice, TPC-H Q15): kept once
            return aggregate.reader(kept.table, node)
        stage: Stage
        if isinstance(node, Aggregate) and final and self.traced and not extremes.calls(node):
            stage, output = AggregateTraceStage(name, lowered), aggregate.trace_reader(name, node)
        elif isinstance(node, Aggregate):
            stage, output = AggregateStage(name, lowered), aggregate.reader(name, node)
        elif isinstance(node, Distinct) and final and self.traced:
            stage = DistinctTraceStage(name, lowered.input)
            output = distinct.trace_reader(name, node)
        elif isinstance(node, Distinct):
            stage, output = DistinctStage(name, lowered.input), distinct.reader(name, node)
        elif isinstance(node, Recompute):
            stage, output = RecomputeStage(name, lowered), recompute.reader(name, node)
        elif isinstance(node, TopK):
            stage, output = TopKStage(name, lowered), top_k.reader(name, node)
        elif isinstance(node, Recursive):
            stage, output = FixpointStage(name, lowered), bag.reader(name, node)
        else:
            stage, output = BagStage(name, lowered), bag.reader(name, node, batches=True)
        self.stages.append(stage)
        if computes is not None:
            self._kept.setdefault(computes, stage)
        return output


def _computes(stage: Stage) -> str | None:
    """What an aggregate stage's table holds, whatever it is named: its whole content's query
    over placeholder versions (None for one that reads the clock: not compared). Two stages
    of one view that compute the same are one operator read twice, and its table is kept
    once."""
    if stage.reads_clock:
        return None
    return to_sql(
        stage.initial_query({t: Versions.symbolic(t) for t in stage.sources}), pretty=False
    )


def plan_stages(
    database: str, view: str, root: Node, traced: bool = False
) -> tuple[list[Stage], Scan]:
    """The stages of a view, innermost first, and the Scan that reads the view's rows;
    ``traced``: no other view reads it, so a DISTINCT or an aggregate (no MIN or MAX) as its
    last stage keeps its table as a trace (``DistinctTraceStage``, ``AggregateTraceStage``).

    A projection or filter directly above the view's last DISTINCT or GROUP BY is folded
    into the reader instead of being stored again (it is linear, so reading the state's
    changes through it is exact).
    """
    lowering = Lowering(database, view, traced)
    top, above = root, None
    stateful = (Distinct, Aggregate, Recompute, TopK, Recursive)
    # A filter on the clock stays a stage: a reader is evaluated when queried, not at a refresh.
    foldable = isinstance(root, Select) and not reads_clock(root.condition)
    if foldable and len(root.sources) == 1 and isinstance(root.sources[0][1], stateful):
        above, top = root, root.sources[0][1]
    if isinstance(top, stateful):
        output = lowering.stage(top, final=True)
        if above is not None:
            output = compose(above, output)
    else:
        output = lowering.stage(root, final=True)
    return lowering.stages, output


def compose(above: Select, reader: Scan) -> Scan:
    """The Scan that reads ``reader`` through the single-input Select ``above``."""
    ((name, _),) = above.sources
    stored = dict(zip(reader.columns, reader.exprs or tuple(col(c) for c in reader.columns)))

    def substitute(expression: exp.Expression) -> exp.Expression:
        def swap(node: exp.Expression) -> exp.Expression:
            if isinstance(node, exp.Column) and node.table.lower() == name:
                return stored[node.name].copy()
            return node

        return expression.copy().transform(swap)

    where = substitute(above.condition) if above.condition is not None else None
    if reader.where is not None:
        where = exp.and_(reader.where.copy(), where) if where is not None else reader.where.copy()
    return replace(
        reader, columns=above.columns, exprs=tuple(substitute(e) for e in above.exprs), where=where
    )
