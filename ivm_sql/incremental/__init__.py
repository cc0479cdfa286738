"""Incrementalization: the snapshot and the change of every stateless node.

Each rule lives in its own module and cites the DBSP result it implements. Stateful
operators (DISTINCT, GROUP BY) never reach these functions: ``stages`` cuts a view at them,
and each keeps its state in a Delta table that the rest reads like any other source.
"""

from __future__ import annotations

from sqlglot import exp

from ivm_sql.algebra.nodes import Constant, Node, Scan, Select, UnionAll
from ivm_sql.incremental import constant, join, linear
from ivm_sql.incremental.versions import Pins


def snapshot(node: Node, pins: Pins, when: str) -> exp.Query:
    """The Z-set ``node`` denotes at the old or new versions of its sources (I(S), z^-1 I(S))."""
    if isinstance(node, Scan):
        return linear.scan_snapshot(node, pins, when)
    if isinstance(node, Constant):
        return constant.snapshot(node)
    if isinstance(node, Select):
        return join.select_snapshot(node, pins, when, snapshot)
    if isinstance(node, UnionAll):
        return linear.union_snapshot(node, pins, when, snapshot)
    raise TypeError(f"stateful node {type(node).__name__} must be cut into a stage first")


def delta(node: Node, pins: Pins) -> exp.Query | None:
    """The change of ``node`` between the old and new versions; None when nothing changed."""
    if isinstance(node, Scan):
        return linear.scan_delta(node, pins)
    if isinstance(node, Constant):
        return constant.delta(node)
    if isinstance(node, Select):
        return join.select_delta(node, pins, snapshot, delta)
    if isinstance(node, UnionAll):
        return linear.union_delta(node, pins, delta)
    raise TypeError(f"stateful node {type(node).__name__} must be cut into a stage first")
