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
)
from ivm_sql.incremental.versions import Pins, Versions
from ivm_sql.sqlbuild import INTERNAL_PREFIX, col, to_sql

# how each incremental kind of stage applies a change
METHODS = {
    "bag": "linear and join changes applied to the stored rows (multiplicity per row)",
    "distinct": "per-row counts, a row appears or disappears when its count crosses zero",
    "aggregate": "COUNT/SUM/AVG per group updated from the change alone",
    "extremes": "MIN/MAX per group from the change alone, a group rescanned only when its extreme loses its last row",
    "fixpoint": "fixed-point loop, the recursive term iterated over the change until it is empty",
}
TEMPORAL = "temporal filter: rows enter and leave as the clock passes their bounds"


@dataclass(frozen=True, eq=False)
class Stage:
    """One Delta table of a view and what feeds it.

    ``node`` is the stateless input tree for a bag or DISTINCT stage, and the stateful
    operator itself (its inputs lowered) for an aggregate, recompute or fixpoint stage.
    """

    table: str
    kind: str  # "bag" | "distinct" | "aggregate" | "recompute" | "fixpoint"
    node: Node

    @property
    def input(self) -> Node:
        return self.node.input if isinstance(self.node, Aggregate) else self.node

    @property
    def aggregate(self) -> Aggregate | None:
        return self.node if isinstance(self.node, Aggregate) else None

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
    def recomputes_all(self) -> bool:
        """A recompute with one global key: any change recomputes the whole operator."""
        return isinstance(self.node, Recompute) and not any(self.node.keys)

    @property
    def every_refresh(self) -> bool:
        """Recomputed by every refresh, changed sources or not (it reads the current time)."""
        return isinstance(self.node, Recompute) and self.node.every_refresh

    @property
    def reads_clock(self) -> bool:
        """Whether this stage reads the current time: in a filter (``temporal``), or in a
        recompute on every refresh."""
        return node_reads_clock(self.node)

    @property
    def scope(self) -> str:
        """What a refresh redoes: incremental, recompute touched keys, or recompute all."""
        if not isinstance(self.node, Recompute):
            return "incremental"
        if not self.recomputes_all:
            return "recompute touched keys"
        return (
            "recompute all on every refresh"
            if self.every_refresh
            else "recompute all on any change"
        )

    @property
    def strategy(self) -> str:
        """The scope and how, or why: shown by `ivm compile`, `ivm refresh` and `ivm graph`."""
        method = self.node.reason if isinstance(self.node, Recompute) else METHODS[self.kind]
        if self.aggregate is not None and extremes.calls(self.aggregate):
            method = METHODS["extremes"]
        if self.reads_clock and not self.every_refresh:
            method += f"; {TEMPORAL}"
        return f"{self.scope}: {method}"

    def initial_query(self, pins: Pins) -> exp.Select:
        """The stage's whole content at the pinned versions (first load, or a recompute)."""
        if isinstance(self.node, Recompute):
            return recompute.initial(self.node, pins)
        if isinstance(self.node, Recursive):
            return fixpoint.seed_initial(self.node, pins)
        contents = snapshot(self.input, pins, "new")
        if isinstance(self.node, Aggregate):
            return aggregate.initial(self.node, contents)
        return bag.initial(self.node.columns, contents)

    def change_query(self, pins: Pins) -> exp.Select | None:
        """The consolidated change of the stage's table between the old and new pins, in the
        shape its MERGE applies; None when no source changed."""
        if isinstance(self.node, Recompute):
            return recompute.change(self.node, self.table, pins)
        if isinstance(self.node, Recursive):
            return fixpoint.seed_change(self.node, self.table, pins)
        changes = delta(self.input, pins)
        if changes is None:
            return None
        if isinstance(self.node, Aggregate):
            return aggregate.change(self.node, changes, self.table)
        module = distinct if self.kind == "distinct" else bag
        return module.change(self.node.columns, changes)

    def merge(self, change: exp.Query) -> exp.Merge:
        """The MERGE that adds ``change`` (a query in ``change_query``'s shape) to the table."""
        if isinstance(self.node, Recompute):
            return bag.merge(self.table, recompute.stored_columns(self.node), change)
        if isinstance(self.node, Recursive):
            return bag.merge(self.table, self.node.columns, change)
        if isinstance(self.node, Aggregate):
            return aggregate.merge(self.table, self.node, change)
        module = distinct if self.kind == "distinct" else bag
        return module.merge(self.table, self.node.columns, change)

    def merge_statement(self, pins: Pins) -> exp.Merge | None:
        """The MERGE that applies the change between the old and new pins; None if none."""
        change = self.change_query(pins)
        return None if change is None else self.merge(change)


class Lowering:
    """Replaces every DISTINCT and GROUP BY by a Scan of a new stage's table."""

    def __init__(self, database: str, view: str):
        self.database = database
        self.view = view
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
        elif isinstance(node, (Aggregate, Distinct)):
            lowered = replace(node, input=self.lower(node.input))
        else:
            lowered = self.lower(node)
        name = self.table_name(final)  # after lowering: inner stages are numbered first
        computes = (
            _computes(Stage(name, "aggregate", lowered))
            if isinstance(node, Aggregate) and not final
            else None
        )
        kept = self._kept.get(computes) if computes is not None else None
        if kept is not None:  # the same state twice (a WITH read twice, TPC-H Q15): kept once
            return aggregate.reader(kept.table, node)
        if isinstance(node, Aggregate):
            stage, output = Stage(name, "aggregate", lowered), aggregate.reader(name, node)
        elif isinstance(node, Distinct):
            stage, output = Stage(name, "distinct", lowered.input), distinct.reader(name, node)
        elif isinstance(node, Recompute):
            stage, output = Stage(name, "recompute", lowered), recompute.reader(name, node)
        elif isinstance(node, Recursive):
            stage, output = Stage(name, "fixpoint", lowered), bag.reader(name, node)
        else:
            stage, output = Stage(name, "bag", lowered), bag.reader(name, node)
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


def plan_stages(database: str, view: str, root: Node) -> tuple[list[Stage], Scan]:
    """The stages of a view, innermost first, and the Scan that reads the view's rows.

    A projection or filter directly above the view's last DISTINCT or GROUP BY is folded
    into the reader instead of being stored again (it is linear, so reading the state's
    changes through it is exact).
    """
    lowering = Lowering(database, view)
    top, above = root, None
    stateful = (Distinct, Aggregate, Recompute, Recursive)
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
    return Scan(
        reader.table, above.columns, reader.weight, tuple(substitute(e) for e in above.exprs), where
    )
