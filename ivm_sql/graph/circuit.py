"""One view's DBSP circuit, drawn from its compiled plan (`ivm graph VIEW`).

Each source is a ``scan``: its change stream ΔS, read from Delta's change data feed (a
``constant``, literal rows or a table function of literals, has none). Stateless
operators pass changes through: ``linear`` (filter, project, flat_map, UNION ALL; Q^Δ = Q).
An inner join of n inputs is n ``join term`` operators, term i joining ΔR_i with the
``integrate``-d other inputs, R_j new for j < i and old for j > i (DBSP Theorem 5.5, as
``incremental/join.py`` computes it), summed by a ``linear`` node; those integrals keep no
state of their own, Delta's time travel reads them. Each stage ends in its stateful
operator, drawn with the Delta table that keeps its state and the stage's strategy:
``integrate`` (the view's rows with their multiplicities), ``distinct``, ``aggregate``,
``recompute touched keys``, ``recompute all``, or a recursive CTE's ``fixed-point loop``,
whose output feeds its recursive term back (the cycle of DBSP's recursive subcircuit).
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Mapping

from sqlglot import exp

from ivm_sql.algebra.nodes import (
    RECURSIVE_PREFIX,
    Aggregate,
    Constant,
    Node,
    Scan,
    Select,
    UnionAll,
    scans,
)
from ivm_sql.compiler.plan import ViewPlan
from ivm_sql.graph.model import Graph, GraphBuilder, Kind
from ivm_sql.incremental import join
from ivm_sql.incremental.stages import (
    AggregateStage,
    AggregateTraceStage,
    BagStage,
    DistinctStage,
    DistinctTraceStage,
    FixpointStage,
    RecomputeStage,
    Stage,
    TopKStage,
)
from ivm_sql.sqlbuild import DIALECT

STAGE_OPERATORS = {
    BagStage: Kind.INTEGRATE,
    DistinctStage: Kind.DISTINCT,
    DistinctTraceStage: Kind.DISTINCT,
    AggregateStage: Kind.AGGREGATE,
    AggregateTraceStage: Kind.AGGREGATE,
    FixpointStage: Kind.FIXED_POINT,
    TopKStage: Kind.TOP_K,
}
CALLS = {
    "count_star": "COUNT(*)",
    "count": "COUNT({})",
    "sum": "SUM({})",
    "avg": "AVG({})",
    "min": "MIN({})",
    "max": "MAX({})",
}
SQL_WIDTH = 100  # longer conditions and column lists are cut, with an ellipsis
PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def stage_operator(stage: Stage) -> Kind:
    """The DBSP operator that keeps a stage's state."""
    if isinstance(stage, RecomputeStage):
        return Kind.RECOMPUTE_ALL if stage.recomputes_all else Kind.RECOMPUTE_KEYS
    return STAGE_OPERATORS[type(stage)]


def view_circuit(plan: ViewPlan, view_tables: Mapping[str, str]) -> Graph:
    """The circuit of ``plan``'s view: sources, then one cluster per stage (innermost first),
    then the view users query. ``view_tables`` maps the tables of the views it reads to their
    names."""
    return _Circuit(plan, view_tables).build()


class _Circuit:
    def __init__(self, plan: ViewPlan, view_tables: Mapping[str, str]):
        self.plan = plan
        self.view_tables = view_tables
        self.builder = GraphBuilder()
        self.streams: dict[str, str] = {}  # table -> the node whose change stream it is

    def build(self) -> Graph:
        own = {stage.table for stage in self.plan.stages}
        for table in dict.fromkeys(
            t for stage in self.plan.stages for t in stage.sources if t not in own
        ):
            self.streams[table] = self.scan(table)
        for number, stage in enumerate(self.plan.stages, 1):
            with self.builder.cluster(f"stage {number}/{len(self.plan.stages)}: {stage.table}"):
                self.streams[stage.table] = self.stage(stage)
        view = self.builder.add(Kind.VIEW, self.plan.name, ("the view users query",))
        filtered = self.plan.output.where is not None  # a HAVING, or a filter over the last stage
        self.builder.connect(self.streams[self.plan.table], view, "filter" if filtered else "")
        return self.builder.build(self.plan.view.name, f"{self.plan.name}: its DBSP circuit")

    def scan(self, table: str) -> str:
        view = self.view_tables.get(table)
        what = (f"view {view}", f"read from its table {table}") if view else (table,)
        return self.builder.add(Kind.SCAN, "scan", (*what, "Δ: its change data feed"))

    def stage(self, stage: Stage) -> str:
        """The stage's operators; returns its stateful operator, which keeps the stage's table."""
        kind = stage_operator(stage)
        details = (*_summary(stage), stage.strategy)
        if isinstance(stage, FixpointStage):
            anchor = self.operator(stage.node.anchor)
            node = self.builder.add(kind, kind.value, details, state=stage.table)
            # each iteration's rows go round the loop again
            self.streams[stage.node.placeholder] = node
            inputs = [anchor, self.operator(stage.node.step)]
        else:
            inputs = (
                [self.operator(child) for child in stage.node.inputs]
                if isinstance(stage, RecomputeStage)
                else [self.operator(stage.input)]
            )
            node = self.builder.add(kind, kind.value, details, state=stage.table)
        for source in inputs:
            self.builder.connect(source, node)
        return node

    def operator(self, node: Node) -> str:
        """The node whose output is ``node``'s change stream, adding the operators below it."""
        if isinstance(node, Scan):
            return self.streams[node.table]
        if isinstance(node, Constant):
            return self.builder.add(
                Kind.SCAN,
                "constant",
                ("rows fixed by the view's SQL", "Δ: none, a constant never changes"),
            )
        if isinstance(node, UnionAll):
            union = self.builder.add(
                Kind.LINEAR, "linear", (f"UNION ALL of {len(node.branches)} inputs",)
            )
            for branch in node.branches:
                self.builder.connect(self.operator(branch), union)
            return union
        if isinstance(node, Select) and len(node.sources) > 1:
            return self.join(node)
        if isinstance(node, Select):
            linear = self.builder.add(Kind.LINEAR, "linear", tuple(_select_details(node)))
            self.builder.connect(self.operator(node.sources[0][1]), linear)
            return linear
        raise TypeError(f"stateful node {type(node).__name__} must be cut into a stage first")

    def join(self, node: Select) -> str:
        """Bilinear expansion: one term per input, each summed into the join's output."""
        aliases = [alias for alias, _ in node.sources]
        changes = [self.operator(child) for child in node.inputs]
        integrals = []
        for alias, child, change in zip(aliases, node.inputs, changes):
            tables = ", ".join(dict.fromkeys(s.table for s in scans(child)))
            details = (f"I({alias}): time travel on {tables}", "no state of its own")
            if tables.startswith(
                RECURSIVE_PREFIX
            ):  # the recursive CTE: the loop's own table, or its last iteration
                details = (f"I({alias}): the fixed point so far, or its last iteration",)
            elif not tables:
                details = (f"I({alias}): the constant's rows, the same old and new",)
            integral = self.builder.add(Kind.INTEGRATE, "integrate", details)
            self.builder.connect(change, integral)
            integrals.append(integral)
        total = self.builder.add(
            Kind.LINEAR, "linear", (f"sum of the {len(aliases)} join terms", *_select_details(node))
        )
        for i, reads in enumerate(join.term_inputs(len(aliases))):
            term = self.builder.add(Kind.JOIN_TERM, f"join term {i + 1}", (_term(aliases, reads),))
            self.builder.connect(changes[reads.index(join.CHANGE)], term, join.CHANGE)
            for read, integral in zip(reads, integrals):
                if read != join.CHANGE:
                    self.builder.connect(integral, term, read)
            self.builder.connect(term, total)
        return total


def _term(aliases: list[str], reads: tuple[str, ...]) -> str:
    """A term of the n-way join as it reads its inputs: ``a_new ⋈ Δb ⋈ c_old``."""
    return " ⋈ ".join(
        f"{join.CHANGE}{a}" if read == join.CHANGE else f"{a}_{read}"
        for a, read in zip(aliases, reads)
    )


def _select_details(node: Select) -> list[str]:
    details = []
    if node.condition is not None:
        details.append(f"filter: {_readable(node.condition)}")
    details += [f"flat_map: {_readable(lateral)}" for lateral in node.laterals]
    details.append(_brief(f"project: {', '.join(map(_projected, node.exprs, node.columns))}"))
    return details


def _projected(expression: exp.Expression, name: str) -> str:
    """``expr AS name``, or just ``expr`` when it is a column of that name."""
    shown = _readable(expression)
    return (
        shown
        if isinstance(expression, exp.Column) and expression.name == name
        else f"{shown} AS {name}"
    )


def _summary(stage: Stage) -> list[str]:
    """What the stateful operator computes, before its strategy."""
    if stage.aggregate is not None:
        return _aggregate_summary(stage.aggregate)
    if isinstance(stage, DistinctStage):
        return [_brief(f"each row of ({', '.join(stage.node.columns)}) once")]
    if isinstance(stage, BagStage):
        return ["the view's rows, each with its multiplicity"]
    if isinstance(stage, FixpointStage):
        return [
            f"WITH RECURSIVE {stage.node.name}: anchor + recursive term, repeated until nothing changes"
        ]
    if isinstance(stage, TopKStage):
        order = ", ".join(
            f"{key.column}{' DESC' if key.descending else ''}" for key in stage.node.order
        )
        return [
            _brief(
                f"ORDER BY {order} LIMIT {stage.node.limit}"
                if order
                else f"LIMIT {stage.node.limit}"
            )
        ]
    return []


def _aggregate_summary(node: Aggregate) -> list[str]:
    """GROUP BY and the aggregates, over the expressions the input computes for them."""
    named = (
        dict(zip(node.input.columns, map(_readable, node.input.exprs)))
        if isinstance(node.input, Select)
        else {}
    )
    keys = ", ".join(named.get(k, k) for k in node.keys)
    calls = ", ".join(CALLS[a.func].format(named.get(a.arg, a.arg)) for a in node.aggs)
    return [
        _brief(f"GROUP BY {keys}" if keys else "global: one row, even over no rows"),
        _brief(calls),
    ]


def _readable(expression: exp.Expression) -> str:
    """Spark SQL without quotes around plain names, cut at SQL_WIDTH characters."""
    plain = expression.copy()
    for identifier in plain.find_all(exp.Identifier):
        if PLAIN_NAME.fullmatch(identifier.name):
            identifier.set("quoted", False)
    return _brief(plain.sql(dialect=DIALECT))


def _brief(text: str) -> str:
    return textwrap.shorten(text, SQL_WIDTH, placeholder=" …")
