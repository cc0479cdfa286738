"""`ivm compile`'s text: the SQL that maintains a view, and the physical decisions a
refresh takes around it."""

from __future__ import annotations

from dataclasses import replace

from sqlglot import exp

from ivm_sql.compiler.plan import ViewPlan, overwrite_table, symbolic_pins
from ivm_sql.config import RefreshSettings
from ivm_sql.incremental import aggregate, extremes, fixpoint, snapshot, top_k
from ivm_sql.incremental.stages import TRACES, FixpointStage, Stage, TopKStage
from ivm_sql.incremental.temporal import CLOCK
from ivm_sql.incremental.versions import Versions
from ivm_sql.physical import (
    batches,
    bounds,
    changes,
    execution,
    layout,
    materialize,
    one_statement,
    records,
)
from ivm_sql.physical import policy as policies
from ivm_sql.physical.cost import STATEMENT_BYTES, CostModel
from ivm_sql.sqlbuild import (
    INTERNAL_PREFIX,
    table,
    to_sql,
)


def render(plan: ViewPlan, cost: CostModel = CostModel.from_settings(RefreshSettings())) -> str:
    """The SQL that maintains a view, for `ivm compile`: tables, refresh statements, view,
    and the physical decisions a refresh takes around them."""
    symbolic = symbolic_pins(plan.stages)
    cost = cost.under(plan.policy)
    lines = [
        f"-- view {plan.name}  ({plan.view.location})",
        f"-- reads: {', '.join(plan.base_tables + tuple(plan.depends_on)) or 'nothing'}",
        f"-- refresh policy: {policies.describe(plan.policy)}",
        "-- :<table>_old is the version a stage reflects, :<table>_new the version pinned by the refresh;",
        "-- terms for sources without changes are left out at run time, and an unchanged view runs nothing.",
        f"-- each refresh: {changes.describe()}; {materialize.describe()}; {records.describe()};",
        f"-- layout: {layout.describe()}; {batches.describe()};",
        f"-- execution: {execution.describe()};",
        f"-- pruning: {bounds.describe()};",
        f"-- each incremental stage: {cost.describe()}.",
    ]
    if CLOCK in symbolic:
        lines.insert(
            4,
            "-- :clock_old is the time a stage reflects, :clock_new the time this refresh reads the clock at.",
        )
    for number, stage in enumerate(plan.stages, 1):
        lines += [
            "",
            f"-- stage {number}/{len(plan.stages)}: {stage.table} [{stage.kind}] {stage.strategy}",
        ]
        history = cost.describe_stage(stage.table)
        if history is not None:
            lines.append(f"-- its refresh history: {history}")
        above = cost.describe_above(stage.table)
        if above is not None:
            lines.append(f"-- {above}")
        initial = stage.initial_query({t: replace(v, old=None) for t, v in symbolic.items()})
        if isinstance(stage, FixpointStage):
            lines += _fixpoint_lines(plan, stage, initial, symbolic)
            continue
        write = stage.write_statement(symbolic)
        lines += [
            "-- first refresh (or recompute):",
            to_sql(plan.create_table(stage, initial)) + ";",
            "-- each refresh:",
            to_sql(write) + ";"
            if write is not None
            else "-- nothing: the stage reads no table, so no change ever reaches it",
        ]
        if isinstance(stage, TRACES) and write is not None:
            lines += [
                f"-- every {batches.EVERY}th batch instead, the table rewritten consolidated:",
                to_sql(stage.rewrite(stage.change_query(symbolic))) + ";",
            ]
        change = stage.change_query(symbolic)
        pruned = (
            sorted({bound.describe() for bound in bounds.bounds(change)})
            if change is not None
            else []
        )
        if pruned:
            lines.append(
                f"-- large inputs read only where the change's keys are: {'; '.join(pruned)}"
            )
        if stage.aggregate is not None and extremes.calls(stage.aggregate):
            lines += _rescan_lines(stage, symbolic)
        if isinstance(stage, TopKStage):
            lines += _refill_lines(stage, symbolic)
        if cost.recompute_above is not None and one_statement.inlinable(plan.stages, stage):
            lines += _at_once_lines(plan, stage, symbolic)
    lines += ["", "-- what users query:", to_sql(plan.user_view()) + ";"]
    return "\n".join(lines) + "\n"


def _at_once_lines(plan: ViewPlan, stage: Stage, symbolic: dict[str, Versions]) -> list[str]:
    """What a recompute the cost model chooses for ``stage`` runs instead of recomputing it
    and every stage above it (``physical.one_statement``)."""
    first = plan.stages.index(stage)
    behind = len(plan.stages) - 1 - first
    query = plan.inlined_query(stage, {t: replace(v, old=None) for t, v in symbolic.items()})
    kept = (
        "this stage is read through its query, not written, and catches up"
        if behind == 1
        else f"stages {first + 1}-{first + behind} are read through their queries, not written, and catch up"
    )
    early = [
        "-- when this is the lowest stage a refresh finds changed: once the analytic rules have "
        f"chosen such a recompute at any stage, a change at least {one_statement.EARLY_SHARE:.0%} "
        "as large (rows changed in the base tables) runs this statement before any stage is "
        "refreshed, as does a change foreseen to read, at a stage above, what that stage's "
        "recompute reads, or, over all the stages, more than this statement with each of their "
        f"statements counted as {STATEMENT_BYTES // 10**6} MB read (the statements rule):"
    ]
    return [
        "-- a recompute the cost model chooses here writes only the view's table, in one statement over what lies "
        f"below this stage; {kept} from the change data feeds when the view next changes:",
        *early,
        to_sql(overwrite_table(plan.stages[-1], query)) + ";",
    ]


def _rescan_lines(stage: Stage, symbolic: dict[str, Versions]) -> list[str]:
    """The query that replaces the MERGE's source when a MIN or MAX lost its last row."""
    node = stage.aggregate
    flagged = f"{INTERNAL_PREFIX}_change"
    contents = snapshot(node.input, {t: replace(v, old=None) for t, v in symbolic.items()}, "new")
    return [
        f"-- only when the change flags a group whose MIN/MAX lost its last row ({extremes.LOST}), the MERGE's source is",
        f"-- the change (`{flagged}`) with those groups' extremes recomputed from the input:",
        to_sql(extremes.rescanned(node, flagged, aggregate.change_columns(node), contents)) + ";",
    ]


def _refill_lines(stage: TopKStage, symbolic: dict[str, Versions]) -> list[str]:
    """The query that replaces the MERGE's source when a top-k's candidates ran out."""
    return [
        f"-- only when the change flags the candidates short ({top_k.SHORT}: fewer than {stage.node.limit} left, "
        "others after them), the MERGE's source reads the first rows again from the input:",
        to_sql(stage.refill_query({t: replace(v, old=None) for t, v in symbolic.items()})) + ";",
    ]


def _fixpoint_lines(
    plan: ViewPlan, stage: Stage, initial: exp.Query, symbolic: dict[str, Versions]
) -> list[str]:
    """A recursive stage's loop: where it starts, what each iteration runs, what is stored."""
    iteration, total = f"{fixpoint.ITERATION_VIEW}j", table(f"{INTERNAL_PREFIX}_fixpoint_sum")
    return [
        "-- first refresh (or recompute), the loop starts from X_0 =",
        to_sql(initial) + ";",
        "-- each refresh, the loop starts from X_0 = the anchor's change and the recursive term's change over its tables:",
        to_sql(stage.change_query(symbolic)) + ";",
        f"-- then, until X_j is empty (at most spark.sql.cteRecursionLevelLimit = {fixpoint.DEFAULT_LIMIT} iterations by default), "
        f"X_(j+1) = the recursive term over X_j (`{iteration}`):",
        to_sql(fixpoint.iterate(stage.node, iteration, symbolic)) + ";",
        f"-- the table is created from, or merged with, the sum X_0 + X_1 + ... (`{total.name}`):",
        to_sql(plan.create_table(stage, exp.select(exp.Star()).from_(total))) + ";",
        to_sql(stage.write(exp.select(exp.Star()).from_(total))) + ";",
    ]
