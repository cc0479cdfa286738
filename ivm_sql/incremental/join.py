"""Select-project-join is multilinear in its inputs: the bilinear join rule, generalized.

DBSP (Theorem 5.5, and its n-way form): Δ(R1 ⋈ ... ⋈ Rn) = Σ_i R1_new ⋈ ... ⋈ R(i-1)_new
⋈ ΔRi ⋈ R(i+1)_old ⋈ ... ⋈ Rn_old. A term whose ΔRi is empty is dropped, so a refresh
whose only changed source is Ri runs one term. An old version is read as the new one minus
the change (``linear.scan_snapshot``), so no term reads a Delta version but the pinned one. A filter or projection is the one-input case
(linear: Q^Δ = Q). The weight of an output row is the product of its input rows' weights.
"""

from __future__ import annotations

from typing import Callable

from sqlglot import exp

from ivm_sql.algebra.nodes import Node, Scan, Select
from ivm_sql.incremental.versions import Pins
from ivm_sql.sqlbuild import WEIGHT, alias, col, lit, product, subquery, union_all

Snapshot = Callable[[Node, Pins, str], exp.Query]
Delta = Callable[[Node, Pins], "exp.Query | None"]


def select_snapshot(node: Select, pins: Pins, when: str, snapshot: Snapshot) -> exp.Select:
    return _assemble(node, [_snapshot_source(name, child, pins, when, snapshot) for name, child in node.sources])


def select_delta(node: Select, pins: Pins, snapshot: Snapshot, delta: Delta) -> exp.Query | None:
    terms = []
    for i, (name, child) in enumerate(node.sources):
        change = delta(child, pins)
        if change is None:
            continue
        sources = []
        for j, (other_name, other) in enumerate(node.sources):
            if j == i:
                sources.append((subquery(change, name), col(WEIGHT, name)))
            else:
                when = "new" if j < i else "old"
                sources.append(_snapshot_source(other_name, other, pins, when, snapshot))
        terms.append(_assemble(node, sources))
    return union_all(terms) if terms else None


def _snapshot_source(name: str, child: Node, pins: Pins, when: str, snapshot: Snapshot):
    """A FROM item and its weight. A plain table is read directly (``t VERSION AS OF v``)."""
    query = snapshot(child, pins, when)
    if isinstance(child, Scan) and child.exprs is None and child.where is None and isinstance(query, exp.Select):
        source = query.args["from_"].this.copy()
        source.set("alias", exp.TableAlias(this=exp.to_identifier(name, quoted=True)))
        weight = child.weight.copy()
        if isinstance(weight, exp.Column):
            weight.set("table", exp.to_identifier(name, quoted=True))
        return source, weight
    return subquery(query, name), col(WEIGHT, name)


def _assemble(node: Select, sources: list[tuple[exp.Expression, exp.Expression]]) -> exp.Select:
    """SELECT exprs, product of weights FROM s1 JOIN s2 ON ... WHERE ...

    Each conjunct of the condition goes to the first join where all inputs it reads are
    present, so Spark sees equi-joins rather than a cross join and a filter.
    """
    weights = [w for _, w in sources if not (isinstance(w, exp.Literal) and w.this == "1")]
    outputs = [alias(e.copy(), name) for e, name in zip(node.exprs, node.columns)]
    outputs.append(alias(product(weights) if weights else lit(1), WEIGHT))
    select = exp.select(*outputs).from_(sources[0][0])
    pending = _conjuncts(node.condition)
    available = {node.sources[0][0]}
    for (name, _), (source, _) in zip(node.sources[1:], sources[1:]):
        available.add(name)
        ready = [c for c in pending if _aliases(c) <= available]
        pending = [c for c in pending if not _aliases(c) <= available]
        on = exp.and_(*ready) if ready else None
        select = select.join(source, on=on, join_type="INNER" if on is not None else "CROSS")
    if node.laterals:  # LATERAL VIEW after the joins: each row's weight goes to all it generates
        select.set("laterals", [lateral.copy() for lateral in node.laterals])
    return select.where(exp.and_(*pending)) if pending else select


def _conjuncts(condition: exp.Expression | None) -> list[exp.Expression]:
    if condition is None:
        return []
    return [c.copy() for c in condition.flatten()] if isinstance(condition, exp.And) else [condition.copy()]


def _aliases(condition: exp.Expression) -> set[str]:
    return {c.table.lower() for c in condition.find_all(exp.Column) if c.table}
