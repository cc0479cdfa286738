"""Linear operators pass changes through: Q^Δ = Q (DBSP, Theorem 3.3 / Prop. 3.4).

A Scan's change is its Delta change data feed, weighted +1 for inserts and update
post-images and -1 for deletes and update pre-images; UNION ALL is the sum of its branches'
changes.
"""

from __future__ import annotations

from sqlglot import exp

from ivm_sql.algebra.nodes import Scan, UnionAll
from ivm_sql.incremental.versions import Pins
from ivm_sql.sqlbuild import WEIGHT, alias, col, consolidate, lit, table_at, union_all

CHANGE_TYPE = "_change_type"
POSITIVE_CHANGES = ("insert", "update_postimage")


def scan_projection(scan: Scan, weight: exp.Expression) -> list[exp.Expression]:
    exprs = scan.exprs or tuple(col(c) for c in scan.columns)
    return [alias(e.copy(), name) for e, name in zip(exprs, scan.columns)] + [alias(weight, WEIGHT)]


def scan_snapshot(scan: Scan, pins: Pins, when: str) -> exp.Query:
    """The table at the pinned version (``when`` = "new") or the state's version ("old").

    The old version of a changed table is read as its new version minus its change:
    z^-1 I(S) = I(S) - ΔS, since I(S) = z^-1 I(S) + ΔS (DBSP, Definition 3.17). The result is
    the same Z-set; but Delta rebuilds a snapshot's file list for each old version a query
    reads (about 0.5 s each), while the pinned version is the snapshot it already holds,
    and the change is the small change data feed the refresh reads anyway.

    A trace of batches (``scan.batches``) is consolidated as it is read: the same Z-set with
    each row once, as every operator above expects of a stored table.
    """
    assert scan.state is None, "a trace of state deltas is read only by the view users query"
    versions = pins[scan.table]
    if when == "old" and versions.changed:
        return union_all([scan_snapshot(scan, pins, "new"), scan_delta(scan, pins, negated=True)])
    source = table_at(scan.table, versions.new if when == "new" else versions.old)
    select = exp.select(*scan_projection(scan, scan.weight.copy())).from_(source)
    if scan.where is not None:
        select = select.where(scan.where.copy())
    return consolidate(select, scan.columns) if scan.batches else select


def scan_delta(scan: Scan, pins: Pins, negated: bool = False) -> exp.Select | None:
    """The table's change data feed between the pinned versions as a Z-set (``negated``:
    with every weight's sign flipped, -ΔS)."""
    assert scan.state is None, "a trace of state deltas is read only by the view users query"
    versions = pins[scan.table]
    if not versions.changed:
        return None
    changes = exp.Table(
        this=exp.Anonymous(
            this="table_changes",
            expressions=[lit(scan.table), versions.first_change(), versions.new.copy()],
        )
    )
    sign = exp.If(
        this=exp.In(this=col(CHANGE_TYPE), expressions=[lit(t) for t in POSITIVE_CHANGES]),
        true=lit(-1 if negated else 1),
        false=lit(1 if negated else -1),
    )
    weight = sign if _is_one(scan.weight) else exp.Mul(this=sign, expression=scan.weight.copy())
    select = exp.select(*scan_projection(scan, weight)).from_(changes)
    return select.where(scan.where.copy()) if scan.where is not None else select


def union_snapshot(node: UnionAll, pins: Pins, when: str, snapshot) -> exp.Query:
    return union_all(
        [_named_as(node, branch, snapshot(branch, pins, when)) for branch in node.branches]
    )


def union_delta(node: UnionAll, pins: Pins, delta) -> exp.Query | None:
    changes = [
        _named_as(node, b, d)
        for b, d in ((b, delta(b, pins)) for b in node.branches)
        if d is not None
    ]
    return union_all(changes) if changes else None


def _named_as(node: UnionAll, branch, query: exp.Query) -> exp.Query:
    """A branch with the union's column names: UNION is positional, and the first branch,
    which names the columns, may have no change."""
    if branch.columns == node.columns:
        return query
    outputs = [alias(col(b), u) for b, u in zip(branch.columns, node.columns)] + [col(WEIGHT)]
    return exp.select(*outputs).from_(
        exp.Subquery(this=query, alias=exp.TableAlias(this=exp.to_identifier("b", quoted=True)))
    )


def _is_one(expression: exp.Expression) -> bool:
    return isinstance(expression, exp.Literal) and expression.this == "1"
