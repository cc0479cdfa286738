"""How a semi join is written in a view's one statement: as ``IN``, so Spark carries it across
the joins above it.

Spark plans ``WHERE (x, y) IN (SELECT c, d FROM r)`` as the same left semi join as ``LEFT
SEMI JOIN r ON x = c AND y = d``, and a semi join keeps a row exactly when the other keeps
it (``=`` matches no NULL, and a WHERE drops an IN that is NULL). Only the ``IN`` form is a
constraint Spark's optimizer propagates, though (``InferFiltersFromConstraints``): across an
equi-join above it, ``x = k`` makes ``k IN (SELECT c FROM r)`` a filter of the other side,
pushed below that side's aggregate when ``k`` is one of its groups, onto its scan.

TPC-H Q20 is the case: the stage ``partsupp ⋉ part`` (``ps_partkey IN`` the forest parts)
joins the ``lineitem`` aggregate per ``(l_partkey, l_suppkey)``. As a semi join, that
aggregate runs over every pair shipped in 1994 (about 600,000 at SF 1); written as ``IN``,
over the forest parts' lineitems only, as in the view's own SELECT: at SF 1 the statement
took 1.28 s against its SELECT's 1.25 s (``bench/one_statement.py``).

Only a semi join whose ON is column equalities, and that is its SELECT's last join after
inner ones, is rewritten: a WHERE applies after every join of its SELECT, so an outer join
after it would see different rows. The incremental ways keep their semi joins: their
literal bounds (``physical.bounds``) read the ON conditions.
"""

from __future__ import annotations

from sqlglot import exp


def written_as_in(query: exp.Query) -> exp.Query:
    """``query`` with each rewritable ``LEFT SEMI JOIN`` written as ``WHERE ... IN``."""
    for select in list(query.find_all(exp.Select)):
        while (pairs := _rewritable(select)) is not None:
            join = select.args["joins"][-1]
            lefts, rights = zip(*pairs)
            value = lefts[0] if len(lefts) == 1 else exp.Tuple(expressions=list(lefts))
            listed = exp.select(*rights).from_(join.this.copy())
            join.pop()
            select.where(exp.In(this=value, query=exp.Subquery(this=listed)), copy=False)
    return query


def _rewritable(select: exp.Select) -> list[tuple[exp.Column, exp.Column]] | None:
    """The (outer, listed) column pairs of the SELECT's last join, if it can be an IN."""
    joins = select.args.get("joins") or []
    if not joins or not (joins[-1].side == "LEFT" and joins[-1].kind == "SEMI"):
        return None
    if any(join.side or join.kind in ("SEMI", "ANTI") for join in joins[:-1]):
        return None
    right = joins[-1].this.alias_or_name
    on = joins[-1].args.get("on")
    conjuncts = on.flatten() if isinstance(on, exp.And) else [on]
    pairs = []
    for conjunct in conjuncts:
        if not (
            isinstance(conjunct, exp.EQ)
            and isinstance(conjunct.this, exp.Column)
            and isinstance(conjunct.expression, exp.Column)
        ):
            return None
        sides = sorted((conjunct.this, conjunct.expression), key=lambda c: c.table == right)
        if not right or [c.table == right for c in sides] != [False, True] or not sides[0].table:
            return None
        pairs.append((sides[0].copy(), sides[1].copy()))
    return pairs
