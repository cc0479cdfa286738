"""Reads of the current time in a view, and where the algebra may keep them.

A view that compares a column with the current time is a function of its sources and of the
time of the refresh. The time is read as one more input, the clock. Inside a filter (a
Select's condition) that input is linear like any other, and ``incremental.temporal``
maintains it from the rows whose bound the clock passed. Anywhere else (a projection, an
outer join's ON, a keyed recompute) the view is recomputed on every refresh instead.
"""

from __future__ import annotations

from sqlglot import exp

from ivm_sql.algebra.nodes import (
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
)

CLOCK_FUNCTIONS = (exp.CurrentTimestamp, exp.CurrentDate, exp.Localtimestamp)
CLOCK_NAMES = {"now", "current_timestamp", "current_date", "localtimestamp"}


def is_clock_read(node: exp.Expression) -> bool:
    """``current_timestamp()``, ``now()``, ``current_date()`` or ``localtimestamp()``."""
    name = node.name.lower() if isinstance(node, exp.Anonymous) else ""
    return isinstance(node, CLOCK_FUNCTIONS) or name in CLOCK_NAMES


def reads_clock(expression: exp.Expression | None) -> bool:
    return expression is not None and any(is_clock_read(node) for node in expression.walk())


def clock_only_in_filters(node: Node) -> bool:
    """Whether every read of the clock below ``node`` is in a Select's condition, the one
    place the temporal rule maintains incrementally."""
    if isinstance(node, Scan):
        return not any(reads_clock(e) for e in [*(node.exprs or ()), node.where])
    if isinstance(node, Select):
        if any(reads_clock(e) for e in [*node.exprs, *node.laterals]):
            return False
    elif isinstance(node, Recompute):
        if reads_clock(node.query):
            return False
    elif isinstance(node, Recursive):  # a loop at one time; the clock's own change is not iterated
        if any(node_reads_clock(child) for child in node.inputs):
            return False
    elif not isinstance(
        node, (UnionAll, Distinct, Aggregate, TopK, Constant)
    ):  # a constant never reads the clock
        raise TypeError(f"unknown node {type(node).__name__}")
    return all(clock_only_in_filters(child) for child in node.inputs)


def node_reads_clock(node: Node) -> bool:
    """Whether a stage's tree (cut at stage tables) reads the clock: in a filter, or in the
    query of a recompute on every refresh."""
    if (isinstance(node, Select) and reads_clock(node.condition)) or (
        isinstance(node, Recompute) and reads_clock(node.query)
    ):
        return True
    return any(node_reads_clock(child) for child in node.inputs)
