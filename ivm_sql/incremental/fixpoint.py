"""Recursive views: the least fixed point R = anchor + step(R), kept incrementally.

DBSP (Section 6, recursive queries: the incremental form of a fixed point is semi-naive
evaluation). With step linear in R and multilinear in its tables T, a change of the sources
changes R by

    ΔR = D + step(ΔR; T_new),    D = Δanchor + Δ_T step(R_old)

where Δ_T step(R_old) is step's change when only its tables change and R is held at its old
value, the stage's own table (the n-way join rule, ``join``). The solution is
ΔR = X_0 + X_1 + ..., with X_0 = D and X_(j+1) = step(X_j; T_new): the same loop that
computes R from scratch from X_0 = anchor. Over Z-sets a deleted fact is a negative weight,
so the loop retracts exactly the derivations it supported (derivation counts; no
delete-and-rederive phase is needed). The loop ends when X_j consolidates to nothing, which
a bounded recursion reaches; ``runtime.fixpoint`` runs it and stops a runaway one.
"""

from __future__ import annotations

from dataclasses import replace

from sqlglot import exp

from ivm_sql.algebra.nodes import Node, Recursive, Scan, Select, UnionAll
from ivm_sql.incremental import delta, snapshot
from ivm_sql.incremental.versions import Pins, Versions
from ivm_sql.sqlbuild import consolidate, union_all

ITERATION_VIEW = "__ivm_fixpoint_x"  # X_j is read as the temporary view __ivm_fixpoint_x<j>
# Spark stops its own WITH RECURSIVE after this many iterations; the loop stops there too.
LIMIT_SETTING = "spark.sql.cteRecursionLevelLimit"
DEFAULT_LIMIT = 100
# a table read as it is now: the stage's own, or an iteration's
AS_IT_IS = Versions(None, None, False)


def seed_initial(node: Recursive, pins: Pins) -> exp.Select:
    """X_0 of a first refresh or recompute: the anchor at the pinned versions."""
    return consolidate(snapshot(node.anchor, pins, "new"), node.columns)


def seed_change(node: Recursive, table: str, pins: Pins) -> exp.Select | None:
    """X_0 of a refresh: D = Δanchor + Δ_T step(R_old), R_old being ``table`` as it is;
    None when no source changed."""
    step = bind(node.step, node.placeholder, table)
    pins = {**pins, table: AS_IT_IS}
    parts = [d for d in (delta(node.anchor, pins), delta(step, pins)) if d is not None]
    return consolidate(union_all(parts), node.columns) if parts else None


def iterate(node: Recursive, previous: str, pins: Pins) -> exp.Select:
    """X_(j+1) = step(X_j) at the pinned versions, X_j being the table or view ``previous``
    (the placeholder's rows with their weights)."""
    return consolidate(
        snapshot(bind(node.step, node.placeholder, previous), {**pins, previous: AS_IT_IS}, "new"),
        node.columns,
    )


def bind(node: Node, placeholder: str, table: str) -> Node:
    """``node`` reading ``table`` where it read the recursive CTE (same columns, weights)."""
    if isinstance(node, Scan):
        return replace(node, table=table) if node.table == placeholder else node
    if isinstance(node, Select):
        return replace(
            node,
            sources=tuple(
                (alias, bind(child, placeholder, table)) for alias, child in node.sources
            ),
        )
    if isinstance(node, UnionAll):
        return replace(node, branches=tuple(bind(b, placeholder, table) for b in node.branches))
    return node  # a stage's table: the step reads the CTE only through linear operators
