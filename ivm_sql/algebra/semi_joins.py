"""EXISTS, NOT EXISTS and IN as joins with a per-key state of the subquery.

A semi-join is a join with the distinct keys of its right side, L ⋉ R = L ⋈ distinct(π_k R),
and an anti-join is what it leaves of L, L ▷ R = L - L ⋉ R (DBSP, Section 4: distinct and
the bilinear join; Z-sets form a group, so the difference is linear). Both are then
(bi)linear in L and in the key state D = distinct(π_k R), a DISTINCT stage kept from R's own
change (a count per key, DBSP Prop. 4.7). A change to R reaches L only through the keys whose
presence flips, and a change to L joins the small table D by its keys; the touched-keys
recompute this replaces read R again for every key a change touched, and L for every key R's
change touched.

One comparison between the subquery and the outer row beside the key equalities (TPC-H
Q21: ``l2.l_suppkey <> l1.l_suppkey``) keeps the extremes of its inner side per key instead,
over the rows where that side is not NULL (a NULL compares as nothing):
``EXISTS (... AND a < x)`` holds exactly when ``MIN(a) < x``; ``a > x`` when ``MAX(a) > x``
(``<=``, ``>=`` alike); ``a <> x`` when ``MIN(a) <> x OR MAX(a) <> x``. MIN and MAX per key
are an aggregate stage, kept from the change (DBSP Section 4.2, ``incremental.extremes``).

Anything else (NOT IN's NULLs, two comparisons, no key at all) stays a touched-keys
recompute (``joins.Inputs.join``).
"""

from __future__ import annotations

from sqlglot import exp

from ivm_sql.algebra.joins import Inputs
from ivm_sql.algebra.nodes import AggCall, Aggregate, Distinct, Node, Select
from ivm_sql.sqlbuild import alias, col

INNER = "__i"
VALUE = "v"  # the compared inner value, beside the keys k0, k1, ...
LOW, HIGH = "lo", "hi"  # its MIN and MAX per key
# `inner <op> outer` read as `outer <flipped op> inner`
FLIPPED = {
    exp.EQ: exp.EQ,
    exp.NEQ: exp.NEQ,
    exp.LT: exp.GT,
    exp.LTE: exp.GTE,
    exp.GT: exp.LT,
    exp.GTE: exp.LTE,
}
# what a comparison needs of the inner values per key
EXTREMES = {
    exp.LT: (LOW,),
    exp.LTE: (LOW,),
    exp.GT: (HIGH,),
    exp.GTE: (HIGH,),
    exp.NEQ: (LOW, HIGH),
}


def keyed(
    builder,
    inputs: Inputs,
    node: exp.Exists | exp.In,
    negated: bool,
    query: exp.Query,
    mine: set[str],
    correlated: list[exp.Expression],
    local: list[exp.Expression],
    ctes,
) -> bool:
    """Join ``inputs`` with the subquery's key state (semi), or subtract the rows that join
    it (anti); False, with ``inputs`` untouched, when the subquery has no such form.
    ``mine`` are the names the subquery defines; ``correlated`` and ``local`` its WHERE's
    conjuncts that read the outer row and those that do not."""
    if isinstance(node, exp.In) and negated:
        return False  # NOT IN is null-aware: a NULL in the set keeps no row
    pairs: list[tuple[exp.Expression | None, exp.Expression]] = []  # (inner, outer) equal
    compared = None
    for conjunct in correlated:
        sides = _sides(conjunct, mine)
        if sides is None:
            return False
        if sides[1] is exp.EQ:
            pairs.append((sides[0], sides[2]))
        elif compared is None:
            compared = sides
        else:
            return False
    if isinstance(node, exp.In):
        if isinstance(node.this, exp.Tuple) or not _outer_only(node.this, mine):
            return False
        listed = query.expressions[0] if correlated else None  # else: the query's one output
        pairs.insert(0, (listed.unalias() if listed is not None else None, node.this))
    if not pairs:
        return False  # no key: one global fact, recomputed whole
    name = f"__e{len(inputs.sources) + inputs.wrapped + 1}"
    keys = tuple(f"k{i}" for i in range(len(pairs)))
    found = exp.and_(
        *(exp.EQ(this=outer.copy(), expression=col(k, name)) for (_, outer), k in zip(pairs, keys))
    )
    if not correlated:
        right = builder.query(query, ctes)
        state: Node = _projected(right, keys, None)
        if not unique(right, right.columns[:1]):
            state = Distinct(state, keys)
    else:
        rewritten = query.copy()
        rewritten.set("where", exp.Where(this=exp.and_(*local)) if local else None)
        outputs = [alias(inner.copy(), key) for (inner, _), key in zip(pairs, keys)]
        if compared is not None:
            outputs.append(alias(compared[0].copy(), VALUE))
        rewritten.set("expressions", outputs)
        right = builder.query(rewritten, ctes)
        if compared is None:
            state = Distinct(_projected(right, keys, None), keys)
        else:
            _, kind, outer = compared
            calls = tuple(
                AggCall("min" if extreme == LOW else "max", VALUE, extreme)
                for extreme in EXTREMES[kind]
            )
            state = Aggregate(_projected(right, keys, VALUE), keys, calls)
            found = exp.and_(found, _finds(kind, outer, name))
    if negated:
        inputs.subtract_matched(name, state, found)
    else:
        inputs.sources.append((name, state))
        inputs.conditions.append(inputs.rename(found))
    return True


def unique(node: Node, columns: tuple[str, ...]) -> bool:
    """Whether ``node`` holds each value of ``columns`` at most once, with weight 1: the
    group keys of an aggregate (TPC-H Q18's ``IN (SELECT l_orderkey ... GROUP BY
    l_orderkey)``), the rows of a DISTINCT, through projections and filters over one input.
    Such a subquery is its own key state: no DISTINCT stage is kept for it."""
    if isinstance(node, Aggregate):
        return set(node.keys) <= set(columns)
    if isinstance(node, Distinct):
        return set(node.columns) <= set(columns)
    if isinstance(node, Select) and len(node.sources) == 1 and not node.laterals:
        ((name, child),) = node.sources
        exprs = dict(zip(node.columns, node.exprs))
        read = [exprs[c] for c in columns]
        return (
            not node.negated
            and all(isinstance(e, exp.Column) and e.table == name for e in read)
            and unique(child, tuple(e.name for e in read))
        )
    return False


def _projected(right: Node, keys: tuple[str, ...], value: str | None) -> Select:
    """The subquery's rows as its keys (its first columns), and the compared ``value`` where
    it is not NULL."""
    names = keys + ((value,) if value else ())
    exprs = tuple(col(c, INNER) for c in right.columns[: len(names)])
    where = exp.not_(exp.Is(this=exprs[-1].copy(), expression=exp.Null())) if value else None
    return Select(((INNER, right),), where, names, exprs)


def _finds(kind: type, outer: exp.Expression, name: str) -> exp.Expression:
    """Some inner value v with ``v <kind> outer``, from the extremes of the values."""
    if kind is exp.NEQ:
        return exp.paren(
            exp.or_(
                exp.NEQ(this=col(LOW, name), expression=outer.copy()),
                exp.NEQ(this=col(HIGH, name), expression=outer.copy()),
            )
        )
    (extreme,) = EXTREMES[kind]
    return kind(this=col(extreme, name), expression=outer.copy())


def _sides(conjunct: exp.Expression, mine: set[str]):
    """``(inner, op, outer)`` for ``inner op outer``, written either way round, where
    ``inner`` reads only the subquery and ``outer`` only the outer row; else None."""
    kind = type(conjunct)
    if kind not in FLIPPED:
        return None
    if _inner_only(conjunct.this, mine) and _outer_only(conjunct.expression, mine):
        return conjunct.this, kind, conjunct.expression
    if _inner_only(conjunct.expression, mine) and _outer_only(conjunct.this, mine):
        return conjunct.expression, FLIPPED[kind], conjunct.this
    return None


def _plain(expression: exp.Expression) -> bool:
    return expression.find(exp.Subquery, exp.AggFunc, exp.Window) is None


def _inner_only(expression: exp.Expression, mine: set[str]) -> bool:
    tables = [c.table.lower() for c in expression.find_all(exp.Column)]
    return _plain(expression) and bool(tables) and all(t in mine for t in tables)


def _outer_only(expression: exp.Expression, mine: set[str]) -> bool:
    tables = [c.table.lower() for c in expression.find_all(exp.Column)]
    return _plain(expression) and all(t and t not in mine for t in tables)
