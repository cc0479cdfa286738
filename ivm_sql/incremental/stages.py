"""Cuts a view's algebra at its stateful operators into stages, each kept in a Delta table.

A stage is a stateless tree (scans, select-project-join, UNION ALL) under one stateful
operator: a bag (the view's own rows), DISTINCT or GROUP BY. Its table holds the
operator's state and, read back through a Scan, is the input of what lies above it, the
same way a view over a view reads the other view. The chain rule, (Q2 ∘ Q1)^Δ = Q2^Δ ∘ Q1^Δ,
is what makes refreshing the stages in order correct.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from sqlglot import exp

from ivm_sql.algebra.nodes import Aggregate, Distinct, Node, Scan, Select, UnionAll, scans
from ivm_sql.incremental import aggregate, bag, delta, distinct, snapshot
from ivm_sql.incremental.versions import Pins
from ivm_sql.sqlbuild import INTERNAL_PREFIX, col

STRATEGIES = {
    "bag": "incremental: linear and join changes applied to the stored rows (multiplicity per row)",
    "distinct": "incremental: per-row counts, a row appears or disappears when its count crosses zero",
    "aggregate": "incremental: COUNT/SUM/AVG per group updated from the change alone",
}


@dataclass(frozen=True, eq=False)
class Stage:
    """One Delta table of a view and the stateless query that feeds it."""

    table: str
    kind: str  # "bag" | "distinct" | "aggregate"
    input: Node  # stateless: Scan, Select, UnionAll
    aggregate: Aggregate | None = None

    @property
    def sources(self) -> tuple[str, ...]:
        """The tables this stage reads, each once, in the order they appear."""
        return tuple(dict.fromkeys(s.table for s in scans(self.input)))

    @property
    def strategy(self) -> str:
        return STRATEGIES[self.kind]

    def initial_query(self, pins: Pins) -> exp.Select:
        """The stage's whole content at the pinned versions (first load, or a recompute)."""
        contents = snapshot(self.input, pins, "new")
        if self.aggregate is not None:
            return aggregate.initial(self.aggregate, contents)
        return bag.initial(self.input.columns, contents)

    def merge_statement(self, pins: Pins) -> exp.Merge | None:
        """The MERGE that applies the change between the old and new pins; None if none."""
        changes = delta(self.input, pins)
        if changes is None:
            return None
        if self.aggregate is not None:
            return aggregate.merge(self.table, self.aggregate, aggregate.change(self.aggregate, changes))
        module = distinct if self.kind == "distinct" else bag
        return module.merge(self.table, self.input.columns, module.change(self.input.columns, changes))


class Lowering:
    """Replaces every DISTINCT and GROUP BY by a Scan of a new stage's table."""

    def __init__(self, database: str, view: str):
        self.database = database
        self.view = view
        self.stages: list[Stage] = []

    def table_name(self, final: bool) -> str:
        suffix = "" if final else f"_s{len(self.stages) + 1}"
        return f"{self.database}.{INTERNAL_PREFIX}_{self.view}{suffix}"

    def lower(self, node: Node) -> Node:
        if isinstance(node, Scan):
            return node
        if isinstance(node, Select):
            return replace(node, sources=tuple((a, self.lower(n)) for a, n in node.sources))
        if isinstance(node, UnionAll):
            return replace(node, branches=tuple(self.lower(b) for b in node.branches))
        return self.stage(node, final=False)

    def stage(self, node: Node, final: bool) -> Scan:
        """A new stage for a stateful (or, for the view itself, any) node; returns its reader."""
        lowered = self.lower(node.input if isinstance(node, (Aggregate, Distinct)) else node)
        name = self.table_name(final)  # after lowering: inner stages are numbered first
        if isinstance(node, Aggregate):
            stage = Stage(name, "aggregate", lowered, replace(node, input=lowered))
            output = aggregate.reader(name, node)
        elif isinstance(node, Distinct):
            stage = Stage(name, "distinct", lowered)
            output = distinct.reader(name, node)
        else:
            stage = Stage(name, "bag", lowered)
            output = bag.reader(name, node)
        self.stages.append(stage)
        return output


def plan_stages(database: str, view: str, root: Node) -> tuple[list[Stage], Scan]:
    """The stages of a view, innermost first, and the Scan that reads the view's rows.

    A projection or filter directly above the view's last DISTINCT or GROUP BY is folded
    into the reader instead of being stored again (it is linear, so reading the state's
    changes through it is exact).
    """
    lowering = Lowering(database, view)
    top, above = root, None
    if isinstance(root, Select) and len(root.sources) == 1 and isinstance(root.sources[0][1], (Distinct, Aggregate)):
        above, top = root, root.sources[0][1]
    if isinstance(top, (Distinct, Aggregate)):
        output = lowering.stage(top, final=True)
        if above is not None:
            output = compose(above, output)
    else:
        output = lowering.stage(root, final=True)
    return lowering.stages, output


def compose(above: Select, reader: Scan) -> Scan:
    """The Scan that reads ``reader`` through the single-input Select ``above``."""
    (name, _), = above.sources
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
    return Scan(reader.table, above.columns, reader.weight, tuple(substitute(e) for e in above.exprs), where)
