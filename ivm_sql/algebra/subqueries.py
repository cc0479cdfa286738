"""Subqueries in WHERE and SELECT, decorrelated into joins.

- ``EXISTS`` / ``x IN (SELECT ...)``: a semi-join; ``NOT EXISTS``: an anti-join; both keyed
  by the correlation's equalities (a semi-join is a join with the distinct keys, DBSP 4.x).
- ``x NOT IN (SELECT ...)``: SQL's null-aware anti-join (a NULL in the subquery makes it
  never true), keyed by ``x``, with the subquery's emptiness and NULLs as whole-input facts.
- An uncorrelated scalar subquery (an aggregate without GROUP BY: exactly one row) is
  cross-joined; a correlated one compared in WHERE (TPC-H Q2, Q17, Q20) becomes a join
  with the aggregate grouped by the correlation columns.
- A correlated lookup (``(SELECT name FROM wh WHERE wh.id = t.id)``, no aggregate) is the
  same join, with the value and the number of rows per correlation value; an outer row
  whose value has two rows fails with Spark's own error, as Spark's single join does.
- A subquery in HAVING (TPC-H Q11): the grouped query moves into FROM and HAVING becomes
  the WHERE over it, where the rules above apply.
"""

from __future__ import annotations

from sqlglot import exp

from ivm_sql.algebra import aggregates, constants
from ivm_sql.algebra.joins import Inputs
from ivm_sql.sqlbuild import alias, col, lit, subquery

COMPARISONS = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE)


def apply_where(builder, inputs: Inputs, where: exp.Expression | None, ctes) -> None:
    """Add the WHERE clause to ``inputs``: plain conjuncts as conditions, subqueries as joins.

    The order is plain conditions, then semi and anti joins, then scalar subqueries. A
    conjunction's terms commute, and a semi join on the outer columns commutes with an
    inner join (its rows are a subset of the outer rows, whatever is joined to them), so
    each semi join is keyed over the FROM's own rows: a change of a scalar subquery (a
    global aggregate changes with almost any row of its input) then meets the semi join's
    stored result bilinearly (DBSP's join rule) instead of changing every key of the semi
    join's left side. In a view's one statement the semi join, written as ``IN`` there
    (``physical.semi_joins``), then also filters the aggregate's input, as in the view's own
    SELECT (TPC-H Q20's ``ps_partkey IN (...)`` bounds its lineitem sums).
    """
    conjuncts = (
        (where.flatten() if isinstance(where, exp.And) else [where]) if where is not None else []
    )
    semis, with_scalars = [], []
    for conjunct in conjuncts:
        negated = isinstance(conjunct, exp.Not)
        inner = conjunct.this if negated else conjunct
        if isinstance(inner, exp.Exists) or (isinstance(inner, exp.In) and inner.args.get("query")):
            semis.append((inner, negated))
        elif conjunct.find(exp.Subquery):
            with_scalars.append(conjunct)
        else:  # conditions before joins: a join wraps inputs.conditions into its left side
            inputs.conditions.append(inputs.rename(conjunct))
    for node, negated in semis:
        _semi_join(builder, inputs, node, negated, ctes)
    for conjunct in with_scalars:
        condition = scalars(builder, inputs, conjunct, ctes, in_where=True)
        inputs.conditions.append(inputs.rename(condition))


def having_as_where(builder, select: exp.Select) -> exp.Select:
    """``SELECT g, agg FROM t GROUP BY g HAVING agg2 > (SELECT ...)`` as
    ``SELECT g, agg FROM (SELECT g, agg, agg2 AS __h0 FROM t GROUP BY g) AS __having
    WHERE __h0 > (SELECT ...)``: the same rows, with the subquery now in a WHERE."""
    grouped = select.copy()
    grouped.set("having", None)
    condition = select.args["having"].this.copy()
    outputs = {_unalias(e): e.alias_or_name for e in select.expressions}
    for i, call in enumerate(list(_outside_subqueries(condition, aggregates.calls_in))):
        grouped.append("expressions", alias(call.copy(), f"__h{i}"))
        call.replace(col(f"__h{i}", HAVING))
    for column in list(_outside_subqueries(condition, lambda e: e.find_all(exp.Column))):
        if column.table == HAVING:
            continue
        if column not in outputs:
            original = next(c for c in select.args["having"].find_all(exp.Column) if c == column)
            raise builder.unsupported(
                original,
                "a column in HAVING, next to a subquery, that the SELECT does not output",
                "select the column, or filter it in WHERE",
            )
        column.replace(col(outputs[column], HAVING))
    outer = exp.select(*[col(e.alias_or_name, HAVING) for e in select.expressions]).from_(
        subquery(grouped, HAVING)
    )
    return outer.where(condition, copy=False)


HAVING = "__having"


def _outside_subqueries(expression: exp.Expression, find) -> list[exp.Expression]:
    """What ``find`` yields in ``expression``, except inside its subqueries."""
    return [node for node in find(expression) if node.find_ancestor(exp.Subquery) is None]


def scalars(
    builder, inputs: Inputs, expression: exp.Expression, ctes, in_where: bool = False
) -> exp.Expression:
    """``expression`` with each scalar subquery replaced by a column of a joined input; a
    subquery already joined (the same SQL, met in the SELECT list and again in GROUP BY)
    reads the same input."""
    for sub in list(expression.find_all(exp.Subquery)):
        if isinstance(sub.parent, (exp.Exists, exp.In)) or _inside_a_subquery(sub, expression):
            continue  # a subquery's own FROM or WHERE is built with it
        key = (sub.sql("spark"), in_where)
        if key not in inputs.scalar_columns:
            inputs.scalar_columns[key] = _scalar(builder, inputs, sub, ctes, in_where)
        replacement = inputs.scalar_columns[key].copy()
        if sub is expression:
            return replacement
        sub.replace(replacement)
    return expression


def _inside_a_subquery(node: exp.Expression, top: exp.Expression) -> bool:
    """Whether ``node`` lies inside another subquery of ``top``."""
    parent = node.parent
    while parent is not None and parent is not top:
        if isinstance(parent, exp.Subquery):
            return True
        parent = parent.parent
    return False


def _scalar(builder, inputs: Inputs, sub: exp.Subquery, ctes, in_where: bool) -> exp.Expression:
    """One scalar subquery as a joined input; returns the column that holds its value.

    A subquery that reads no table is a constant of one row holding Spark's own value of
    it (``constants.scalar``); any other must be one aggregate without GROUP BY."""
    query = sub.this
    name = f"__s{len(inputs.sources) + inputs.wrapped + 1}"
    constant = constants.whole(builder, query, ctes)
    if constant is not None:
        node = constants.scalar(constant)
        inputs.sources.append((name, node))
        inputs.one_row.add(name)
        return col(node.columns[0], name)
    if _is_lookup(query):
        correlated, local = _split(query)
        return _correlated_scalar(
            builder, inputs, sub, query, correlated, local, name, ctes, in_where
        )
    if (
        not isinstance(query, exp.Select)
        or query.args.get("group")
        or len(query.expressions) != 1
        or not list(aggregates.calls_in(query.expressions[0]))
    ):
        raise builder.unsupported(
            sub,
            "a scalar subquery that is not one aggregate without GROUP BY",
            "Spark fails at run time when a scalar subquery returns more than one row; ivm keeps those "
            "that always return one (one aggregate without GROUP BY, or no table read) and lookups "
            "correlated by equalities (SELECT name FROM wh WHERE wh.id = t.id)",
        )
    correlated, local = _split(query)
    if correlated:
        return _correlated_scalar(
            builder, inputs, sub, query, correlated, local, name, ctes, in_where
        )
    node = builder.query(query, ctes)
    inputs.sources.append((name, node))
    return col(node.columns[0], name)


def _is_lookup(query: exp.Expression) -> bool:
    """One value, no aggregate, read where the outer row's columns say: at most one row per
    outer row when the data allows it, and Spark's error when it does not."""
    return (
        isinstance(query, exp.Select)
        and len(query.expressions) == 1
        and not list(aggregates.calls_in(query.expressions[0]))
        and not any(query.args.get(k) for k in ("group", "having", "distinct", "limit", "order"))
        and bool(_split(query)[0])
    )


# Spark's SCALAR_SUBQUERY_TOO_MANY_ROWS, raised by a lookup that finds two rows
TOO_MANY_ROWS = (
    "[SCALAR_SUBQUERY_TOO_MANY_ROWS] More than one row returned by a subquery used as an "
    "expression. SQLSTATE: 21000"
)


def _correlated_scalar(
    builder, inputs, sub, query, correlated, local, name, ctes, in_where
) -> exp.Expression:
    """``(SELECT agg FROM t WHERE t.k = outer.k)``: a join with the aggregate grouped by t.k.

    Compared in WHERE, where an outer row without a group gets NULL and is dropped anyway,
    an inner join (bilinear: maintained from the changes). Anywhere else, or when the value
    over no rows is not NULL (COUNT's 0: the COUNT bug), a LEFT JOIN, recomputed per touched
    correlation value, where an outer row without a group takes the subquery's value over no
    rows, as Spark's own decorrelation does (each aggregate's result on an empty input).

    A lookup (``_is_lookup``) is the aggregate ``MAX(value)`` with ``COUNT(*)`` beside it:
    over one row, the value itself; over two, the outer rows that read it fail with
    ``TOO_MANY_ROWS``, and only those, as in Spark (its single join checks matched rows):
    always the LEFT JOIN, whose rows are outer rows."""
    lookup = _is_lookup(query)
    if lookup:
        query = query.copy()
        query.set("expressions", [exp.Max(this=_unalias(query.expressions[0]).copy())])
    pairs = []
    for conjunct in correlated:
        inner_side, outer_side = _sides(conjunct, _aliases(query))
        if not isinstance(conjunct, exp.EQ) or inner_side is None:
            raise builder.unsupported(
                conjunct,
                "a correlated scalar subquery with a condition other than column = outer value",
                "correlate with equalities only",
            )
        pairs.append((inner_side, outer_side))
    value = _unalias(query.expressions[0])
    for call in aggregates.calls_in(value):
        function = call.sql("spark").split("(")[0].upper()
        if function.lower() in OPAQUE_ON_EMPTY:
            raise builder.unsupported(
                call,
                f"a correlated scalar subquery over {function}",
                "over no rows it is an empty sketch ivm cannot write: LEFT JOIN a GROUP BY subquery in FROM",
            )
    grouped = query.copy()
    grouped.set("where", exp.Where(this=exp.and_(*local)) if local else None)
    grouped.set(
        "expressions",
        [alias(inner.copy(), f"k{i}") for i, (inner, _) in enumerate(pairs)]
        + [alias(value.copy(), "v")]
        + ([alias(exp.Count(this=exp.Star()), "n")] if lookup else []),
    )
    grouped.set("group", exp.Group(expressions=[inner.copy() for inner, _ in pairs]))
    node = builder.query(grouped, ctes)
    on = [
        exp.EQ(this=outer.copy(), expression=col(f"k{i}", name))
        for i, (_, outer) in enumerate(pairs)
    ]
    if lookup:
        found = exp.Case(
            ifs=[
                exp.If(this=exp.GT(this=col("n", name), expression=lit(1)), true=_too_many_rows())
            ],
            default=col("v", name),
        )
    else:
        found = col("v", name)
    # a lookup's check must see outer rows only: filtered above an inner join, Spark would
    # push it down onto every key of the lookup's table
    inner = in_where and not lookup and isinstance(sub.parent, COMPARISONS)
    if inner and _null_on_empty(value):
        inputs.sources.append((name, node))
        inputs.conditions.extend(inputs.rename(condition) for condition in on)
        return found
    inputs.join(
        "LEFT OUTER", name, node, exp.and_(*on), "correlated scalar subquery per correlation value"
    )
    empty = _on_empty(value)
    if isinstance(empty, exp.Null):
        return found
    missing = exp.Is(this=col("k0", name), expression=exp.Null())
    return exp.Case(ifs=[exp.If(this=missing, true=empty)], default=col("v", name))


# Aggregates whose result over no rows is not NULL (Spark's defaultResult): counts are 0,
# collected lists and sets are empty.
ZERO_ON_EMPTY = (exp.Count, exp.CountIf, exp.ApproxDistinct, exp.RegrCount)
EMPTY_ARRAY_ON_EMPTY = (exp.ArrayAgg, exp.ArrayUniqueAgg)
# Aggregates whose result over no rows is an empty sketch or bitmap, not a literal.
OPAQUE_ON_EMPTY = ("count_min_sketch", "bitmap_construct_agg", "bitmap_or_agg", "bitmap_and_agg")
# Operators that are NULL when an operand is.
NULL_STRICT = (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Mod, exp.Neg, exp.Paren, exp.Cast)


def _too_many_rows() -> exp.Expression:
    return exp.Anonymous(this="raise_error", expressions=[lit(TOO_MANY_ROWS)])


def _empty_result(call: exp.Expression) -> exp.Expression:
    """What the aggregate ``call`` returns over no rows."""
    if isinstance(call, exp.Filter):
        return _empty_result(call.this)
    if isinstance(call, ZERO_ON_EMPTY):
        return exp.Literal.number(0)
    if isinstance(call, EMPTY_ARRAY_ON_EMPTY):
        return exp.Array(expressions=[])
    return exp.Null()


def _on_empty(value: exp.Expression) -> exp.Expression:
    """The subquery's ``value`` over no rows: each aggregate replaced by its empty result."""
    return value.copy().transform(
        lambda node: _empty_result(node) if aggregates.is_aggregate(node) else node
    )


def _null_on_empty(value: exp.Expression) -> bool:
    """True if ``value`` is surely NULL over no rows: an aggregate whose empty result is
    NULL, or a NULL-strict operator over such a value (TPC-H Q17's ``0.2 * AVG(x)``)."""
    if aggregates.is_aggregate(value):
        return isinstance(_empty_result(value), exp.Null)
    return isinstance(value, NULL_STRICT) and any(
        _null_on_empty(child) for child in value.iter_expressions()
    )


def _semi_join(builder, inputs: Inputs, node: exp.Exists | exp.In, negated: bool, ctes) -> None:
    query = node.this if isinstance(node, exp.Exists) else node.args["query"]
    query = query.this if isinstance(query, exp.Subquery) else query
    name = f"__q{inputs.wrapped + 1}"
    correlated, local = _split(query) if isinstance(query, exp.Select) else ([], [])
    inner_columns: list[exp.Column] = []
    if correlated:
        if any(query.args.get(k) for k in ("group", "having", "distinct", "limit")) or list(
            aggregates.calls_in(query.expressions[0])
        ):
            raise builder.unsupported(
                node,
                "a correlated subquery with GROUP BY, DISTINCT or LIMIT",
                "decorrelate it into a join in FROM",
            )
        mine = _aliases(query)
        for conjunct in correlated:
            for column in conjunct.find_all(exp.Column):
                if column.table.lower() in mine and column not in inner_columns:
                    inner_columns.append(column)
        rewritten = query.copy()
        rewritten.set("where", exp.Where(this=exp.and_(*local)) if local else None)
        outputs = [alias(c.copy(), f"s{i}") for i, c in enumerate(inner_columns)]
        if isinstance(node, exp.In):
            outputs.insert(0, alias(_unalias(query.expressions[0]).copy(), "s_in"))
        rewritten.set("expressions", outputs)
        query = rewritten
    right = builder.query(query, ctes)
    conditions = []
    for conjunct in correlated:

        def to_right(column: exp.Expression) -> exp.Expression:
            if isinstance(column, exp.Column) and column in inner_columns:
                return col(f"s{inner_columns.index(column)}", name)
            return column

        conditions.append(conjunct.copy().transform(to_right))
    if isinstance(node, exp.In):
        value = node.this
        if negated and not correlated:
            inputs.not_in(value, name, right)
            return
        match = exp.EQ(this=value.copy(), expression=col(right.columns[0], name))
        conditions.insert(0, _null_aware(match) if negated else match)
    kind = "LEFT ANTI" if negated else "LEFT SEMI"
    what = ("NOT " if negated else "") + ("IN" if isinstance(node, exp.In) else "EXISTS")
    inputs.join(
        kind, name, right, exp.and_(*conditions) if conditions else None, f"{what} subquery"
    )


def _null_aware(match: exp.EQ) -> exp.Expression:
    """``x = c OR (x = c) IS NULL``: the anti-join condition of a correlated NOT IN.

    ``x NOT IN (SELECT c FROM s WHERE corr)`` is ``NOT EXISTS (SELECT 1 FROM s WHERE corr
    AND (x = c OR (x = c) IS NULL))``, Spark's own null-aware anti-join: a row is dropped
    when its correlated set holds its value (FALSE) or a NULL, or its value is NULL and the
    set is not empty (NULL); an empty set keeps it (TRUE). Keyed by the correlation's
    equalities, it is recomputed per touched correlation value like NOT EXISTS."""
    unknown = exp.Is(this=exp.Paren(this=match.copy()), expression=exp.Null())
    return exp.Paren(this=exp.or_(match, unknown))


def _aliases(query: exp.Expression) -> set[str]:
    """Names the subquery defines itself: its tables' and subqueries' aliases, its CTEs."""
    names = {t.alias_or_name.lower() for t in query.find_all(exp.Table)}
    names |= {s.alias.lower() for s in query.find_all(exp.Subquery) if s.alias}
    names |= {c.alias_or_name.lower() for c in query.find_all(exp.CTE)}
    return names


def _split(query: exp.Select) -> tuple[list[exp.Expression], list[exp.Expression]]:
    """The subquery's WHERE conjuncts that read the outer query, and the others."""
    where = query.args.get("where")
    if where is None:
        return [], []
    mine = _aliases(query)
    conjuncts = list(where.this.flatten()) if isinstance(where.this, exp.And) else [where.this]
    correlated = [
        c
        for c in conjuncts
        if any(col_.table and col_.table.lower() not in mine for col_ in c.find_all(exp.Column))
    ]
    return correlated, [c for c in conjuncts if c not in correlated]


def _sides(
    conjunct: exp.Expression, mine: set[str]
) -> tuple[exp.Expression | None, exp.Expression | None]:
    """(inner column, outer expression) of ``inner.col = outer_expr``, else (None, None)."""

    def is_inner(e: exp.Expression) -> bool:
        return isinstance(e, exp.Column) and e.table.lower() in mine

    def is_outer(e: exp.Expression) -> bool:
        return all(c.table.lower() not in mine for c in e.find_all(exp.Column))

    if isinstance(conjunct, exp.EQ):
        if is_inner(conjunct.this) and is_outer(conjunct.expression):
            return conjunct.this, conjunct.expression
        if is_inner(conjunct.expression) and is_outer(conjunct.this):
            return conjunct.expression, conjunct.this
    return None, None


def _unalias(expression: exp.Expression) -> exp.Expression:
    return expression.this if isinstance(expression, exp.Alias) else expression
