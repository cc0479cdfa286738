"""Select-project-join is multilinear in its inputs: the bilinear join rule, generalized.

DBSP (Theorem 5.5, and its n-way form): Δ(R1 ⋈ ... ⋈ Rn) = Σ_i R1_new ⋈ ... ⋈ R(i-1)_new
⋈ ΔRi ⋈ R(i+1)_old ⋈ ... ⋈ Rn_old. A term whose ΔRi is empty is dropped, so a refresh
whose only changed source is Ri runs one term. An old version is read as the new one minus
the change (``linear.scan_snapshot``), so no term reads a Delta version but the pinned one. A filter or projection is the one-input case
(linear: Q^Δ = Q). The weight of an output row is the product of its input rows' weights.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

from ivm_sql.algebra.clock import reads_clock
from ivm_sql.algebra.nodes import Node, Scan, Select
from ivm_sql.incremental.temporal import CLOCK, CLOCK_TERM, at_time, crossed
from ivm_sql.incremental.versions import Pins
from ivm_sql.sqlbuild import WEIGHT, alias, col, lit, product, subquery, union_all

Snapshot = Callable[[Node, Pins, str], exp.Query]
Delta = Callable[[Node, Pins], "exp.Query | None"]

CHANGE = "Δ"  # an input read as its change; "new" and "old" are its versions


def term_inputs(count: int) -> list[tuple[str, ...]]:
    """How each term of the n-way rule reads each input: term i reads input j at its new
    version before i, as its change at i, at its old version after i. The refresh's SQL
    (``select_delta``) and `ivm graph`'s circuit are both built from this."""
    return [
        tuple("new" if j < i else CHANGE if j == i else "old" for j in range(count))
        for i in range(count)
    ]


def select_snapshot(node: Select, pins: Pins, when: str, snapshot: Snapshot) -> exp.Select:
    sources = [_snapshot_source(name, child, pins, when, snapshot) for name, child in node.sources]
    return _assemble(node, sources, _conditions(node, pins, when))


def select_delta(node: Select, pins: Pins, snapshot: Snapshot, delta: Delta) -> exp.Query | None:
    """The terms of the n-way rule, filtered at the new time, and, for a filter on the clock
    that moved, the rows whose bound it passed (``temporal``)."""
    terms = []
    for (name, child), reads in zip(node.sources, term_inputs(len(node.sources))):
        change = delta(child, pins)
        if change is None:
            continue
        sources = []
        for (other_name, other), read in zip(node.sources, reads):
            if read == CHANGE:
                sources.append((subquery(change, name), col(WEIGHT, name)))
            else:
                sources.append(_snapshot_source(other_name, other, pins, read, snapshot))
        terms.append(_assemble(node, sources, _conditions(node, pins, "new")))
    if reads_clock(node.condition) and pins[CLOCK].changed:
        terms.append(_clock_term(node, pins, snapshot))
    return union_all(terms) if terms else None


def _clock_term(node: Select, pins: Pins, snapshot: Snapshot) -> exp.Select:
    """(σ_{p_T2} - σ_{p_T1})(R_old): the old rows whose bound the clock passed, signed.
    Aliased CLOCK_TERM, so the cost model knows its scans are range reads (``execution``)."""
    sources = [_snapshot_source(name, child, pins, "old", snapshot) for name, child in node.sources]
    steady = [c for c in _conjuncts(node.condition) if not reads_clock(c)]
    found, sign = crossed([c for c in _conjuncts(node.condition) if reads_clock(c)], pins)
    term = _assemble(node, sources, [*steady, found], sign)
    return exp.select(*(col(c) for c in node.columns), col(WEIGHT)).from_(
        subquery(term, CLOCK_TERM)
    )


def _conditions(node: Select, pins: Pins, when: str) -> list[exp.Expression]:
    """The filter's conjuncts, the clock read at the old or new time."""
    conjuncts = _conjuncts(node.condition)
    if not reads_clock(node.condition):
        return conjuncts
    now = pins[CLOCK].new if when == "new" else pins[CLOCK].old
    return [at_time(c, now) for c in conjuncts]


def _snapshot_source(name: str, child: Node, pins: Pins, when: str, snapshot: Snapshot):
    """A FROM item and its weight. A plain table is read directly (``t VERSION AS OF v``)."""
    query = snapshot(child, pins, when)
    if (
        isinstance(child, Scan)
        and not child.batches
        and child.exprs is None
        and child.where is None
        and isinstance(query, exp.Select)
    ):
        source = query.args["from_"].this.copy()
        source.set("alias", exp.TableAlias(this=exp.to_identifier(name, quoted=True)))
        weight = child.weight.copy()
        if isinstance(weight, exp.Column):
            weight.set("table", exp.to_identifier(name, quoted=True))
        return source, weight
    return subquery(query, name), col(WEIGHT, name)


def _assemble(
    node: Select,
    sources: list[tuple[exp.Expression, exp.Expression]],
    conditions: list[exp.Expression],
    sign: exp.Expression | None = None,
) -> exp.Select:
    """SELECT exprs, product of weights (times ``sign``) FROM s1 JOIN s2 ON ... WHERE ...

    Each of the ``conditions`` (the node's conjuncts) goes to the first join where all inputs it reads are
    present, so Spark sees equi-joins rather than a cross join and a filter.
    """
    weights = [w for _, w in sources if not (isinstance(w, exp.Literal) and w.this == "1")] + (
        [sign] if sign is not None else []
    )
    outputs = [alias(e.copy(), name) for e, name in zip(node.exprs, node.columns)]
    outputs.append(alias(product(weights) if weights else lit(1), WEIGHT))
    select = exp.select(*outputs).from_(sources[0][0])
    pending = conditions
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
    return (
        [c.copy() for c in condition.flatten()]
        if isinstance(condition, exp.And)
        else [condition.copy()]
    )


def _aliases(condition: exp.Expression) -> set[str]:
    return {c.table.lower() for c in condition.find_all(exp.Column) if c.table}
