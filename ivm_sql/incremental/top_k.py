"""ORDER BY ... LIMIT k: the first k rows, kept from a stored prefix of candidates.

DBSP keeps a top-k from its integrated input (Feldera's TopK reads the input's trace), and
Materialize and Feldera bound that state to the head of the order. Here the stage's table
stores a prefix of the input in a total order (the ORDER BY, then every column, so rows
that are equal are never split): the first K = k + margin rows, each with the weight of
the rows before it (``BEFORE``), and one marker row (every column NULL, no position) whose
weight counts the input rows after them.

With B the last stored row, the stored rows are exactly the input rows ≤ B, and a filter is
linear (DBSP, Theorem 3.3): for a change Δ of the input, the new prefix is the stored one
plus σ_{≤B}(Δ), and the marker adds the weight of σ_{>B}(Δ). Rows inserted after B wait in
the count; rows inserted before it push the prefix's tail past K into the count. While the
count is zero the prefix is the whole input, B bounds nothing, and every changed row joins
it. So a change reads its own rows and the K stored ones, never the input.

The view reads the stored rows with fewer than k rows before them, each at most k - before
times (``reader``). Only when deletions leave fewer than k rows in the prefix while rows
wait after it (``SHORT`` in the change) is the prefix read again from the input
(``runtime.top_k`` refills it, in the same commit).
"""

from __future__ import annotations

from sqlglot import exp

from ivm_sql.algebra.nodes import Node, Scan, Select, SortKey, TopK
from ivm_sql.sqlbuild import (
    WEIGHT,
    alias,
    col,
    consolidate,
    is_internal,
    lit,
    subquery,
    sum_of,
    table,
    union_all,
)

BEFORE = "__ivm_before"  # a stored row's position: the weight of the rows before it
SHORT = "__ivm_short"  # in a change: too few candidates left, read the input again
KEPT = "__ivm_kept"  # while classifying: the row is in the prefix (at or before B)
BOUND = "__ivm_bound"  # B is there: the prefix is not empty, and rows wait after it
# how `ivm refresh` says a refresh read the prefix again
REFILLED = (
    "read its first rows again from its input: deletions left fewer candidates than its LIMIT"
)
MARGIN = 100  # candidates kept beyond k, at least (and at least k of them)
ROW, LAST = "__ivm_r", "__ivm_b"  # a row, and B, side by side


def capacity(node: TopK) -> int:
    """K: how many rows the prefix keeps."""
    return node.limit + max(node.limit, MARGIN)


def stored_columns(node: TopK) -> tuple[str, ...]:
    """What the table stores beside the weight: the input's columns and the position."""
    return (*node.columns, BEFORE)


def describe(node: TopK) -> str:
    return (
        f"the first {capacity(node)} rows in order kept as candidates, the view the first "
        f"{node.limit} of them; the input read again only when deletions leave fewer than "
        f"{node.limit}"
    )


def total_order(node: TopK) -> tuple[SortKey, ...]:
    """The ORDER BY, then every other column ascending: no two different rows tie."""
    named = {key.column for key in node.order}
    return node.order + tuple(SortKey(c, False, True) for c in node.columns if c not in named)


def _ordered(keys: tuple[SortKey, ...], reverse: bool = False) -> list[exp.Ordered]:
    return [
        exp.Ordered(
            this=col(key.column),
            desc=key.descending != reverse,
            nulls_first=key.nulls_first != reverse,
        )
        for key in keys
    ]


def _precedes(keys: tuple[SortKey, ...], first: str, then: str) -> exp.Expression:
    """Whether row ``first`` comes strictly before row ``then`` in ``keys``' order: at the
    first key where they differ (NULL equal to NULL), in its direction, NULLs where the key
    puts them."""
    result: exp.Expression = exp.false()
    for key in reversed(keys):
        a, b = col(key.column, first), col(key.column, then)
        nulls = (
            exp.and_(_is_null(a), exp.not_(_is_null(b)))
            if key.nulls_first
            else exp.and_(exp.not_(_is_null(a)), _is_null(b))
        )
        smaller = exp.GT(this=a, expression=b) if key.descending else exp.LT(this=a, expression=b)
        before = exp.or_(nulls, exp.Coalesce(this=smaller, expressions=[exp.false()]))
        result = exp.or_(
            before, exp.and_(exp.NullSafeEQ(this=a.copy(), expression=b.copy()), result)
        )
    return exp.paren(result)


def _is_null(expression: exp.Expression) -> exp.Expression:
    return exp.Is(this=expression, expression=exp.Null())


def _last(node: TopK, rows: exp.Query) -> exp.Select:
    """B, the last of ``rows`` in the total order, flagged as there: one row, or none when
    ``rows`` is empty."""
    return (
        exp.select(*(col(c) for c in node.columns), alias(exp.true(), BOUND))
        .from_(subquery(rows, "p"))
        .order_by(*_ordered(total_order(node), reverse=True))
        .limit(1)
    )


def _classified(node: TopK, records: exp.Query, last: exp.Select) -> exp.Select:
    """``records`` (a Z-set) with ``KEPT`` true at or before B (everything when there is no
    B), the columns of the others NULL: they only add to the count after the prefix."""
    kept = exp.or_(
        _is_null(col(BOUND, LAST)),
        exp.not_(_precedes(total_order(node), LAST, ROW)),
    )
    return exp.select(
        *(alias(exp.If(this=col(KEPT), true=col(c), false=exp.Null()), c) for c in node.columns),
        col(KEPT),
        col(WEIGHT),
    ).from_(
        subquery(
            exp.select(
                *(col(c, ROW) for c in node.columns),
                alias(exp.paren(kept), KEPT),
                col(WEIGHT, ROW),
            )
            .from_(subquery(records, ROW))
            .join(subquery(last, LAST), on=exp.true(), join_type="LEFT"),
            "__ivm_c",
        )
    )


def _prefix(node: TopK, classified: exp.Query) -> exp.Query:
    """The table's content from classified rows: the kept ones consolidated, each with its
    position, up to K; the marker row with the weight of all the others. One pass: every
    row past K folds into the marker in the same GROUP BY, since a second branch would run
    whatever computes ``classified`` again (Spark inlines a ``WITH`` at each reference: a
    view's whole SELECT, when it is written in one statement, ``physical.one_statement``)."""
    columns = [col(c) for c in node.columns]
    grouped = (
        exp.select(*columns, col(KEPT), alias(sum_of(col(WEIGHT)), WEIGHT))
        .from_(subquery(classified, "k"))
        .group_by(*(c.copy() for c in columns), col(KEPT))
        .having(exp.NEQ(this=sum_of(col(WEIGHT)), expression=lit(0)))
    )
    window = exp.Window(
        this=sum_of(col(WEIGHT)),
        partition_by=[col(KEPT)],
        order=exp.Order(expressions=_ordered(total_order(node))),
        spec=exp.WindowSpec(
            kind="ROWS", start="UNBOUNDED", start_side="PRECEDING", end=lit(1), end_side="PRECEDING"
        ),
    )
    positioned = subquery(
        exp.select(
            *(c.copy() for c in columns),
            col(KEPT),
            col(WEIGHT),
            alias(exp.Coalesce(this=window, expressions=[lit(0)]), BEFORE),
        ).from_(subquery(grouped, "g")),
        "q",
    )
    within = exp.and_(col(KEPT), exp.LT(this=col(BEFORE), expression=lit(capacity(node))))
    # a kept row keeps its columns and position (never NULL), the others are all NULL: the
    # marker's group, apart from every kept row's
    names = (*node.columns, BEFORE)
    keys = [exp.If(this=within.copy(), true=col(name), false=exp.Null()) for name in names]
    return (
        exp.select(
            *(alias(key, name) for key, name in zip(keys, names)),
            alias(sum_of(col(WEIGHT)), WEIGHT),
        )
        .from_(positioned)
        .group_by(*(key.copy() for key in keys))
        .having(exp.NEQ(this=sum_of(col(WEIGHT)), expression=lit(0)))
    )


def initial(node: TopK, contents: exp.Query) -> exp.Query:
    """The content at the input's snapshot ``contents``: B is the K-th row of its first K
    (each row weighs at least 1, so the prefix up to B holds at least K).

    B and the classified rows both read ``contents``. Unless it is a base table read as it
    is, its rows are shuffled once (``DISTRIBUTE BY``), so that Spark reuses that exchange
    for the second read instead of running everything below it again: a join or an
    aggregate, or, in one statement, the view's whole SELECT (``physical.one_statement``).
    """
    if not _reads_a_base_table(node.input):
        contents = exp.select(*(col(c) for c in (*node.columns, WEIGHT))).from_(
            subquery(contents, "x")
        )
        contents.set("distribute", exp.Distribute(expressions=[col(c) for c in node.columns]))
    first = (
        exp.select(*(col(c) for c in node.columns))
        .from_(subquery(contents, "i"))
        .order_by(*_ordered(total_order(node)))
        .limit(capacity(node))
    )
    return _prefix(node, _classified(node, contents.copy(), _last(node, first)))


def _reads_a_base_table(node: Node) -> bool:
    """Whether ``node`` only filters and projects one base table: reading that twice costs
    less than shuffling its rows. A table ivm keeps is not one: a stage's stands for its
    query, which a statement over the whole view inlines, and for another view's table the
    shuffle costs about what a second read would."""
    if isinstance(node, Select) and len(node.sources) == 1 and not node.laterals:
        return _reads_a_base_table(node.sources[0][1])
    return isinstance(node, Scan) and not is_internal(node.table)


def _stored(table_name: str, node: TopK) -> exp.Select:
    return exp.select(*(col(c) for c in (*stored_columns(node), WEIGHT))).from_(table(table_name))


def change(node: TopK, changes: exp.Query, table_name: str) -> exp.Select:
    """The change of the table for the input's change ``changes``: the prefix plus the
    changed rows at or before B, the count plus the others; with ``SHORT`` on every row
    when fewer than k rows are left in the prefix while others wait after it."""
    stored = _stored(table_name, node)
    positioned = exp.not_(_is_null(col(BEFORE)))
    candidates = (
        exp.select(*(col(c) for c in (*node.columns, WEIGHT)))
        .from_(subquery(stored, "s"))
        .where(positioned)
    )
    records = union_all(
        [
            candidates,
            exp.select(*(col(c) for c in (*node.columns, WEIGHT))).from_(subquery(changes, "d")),
        ]
    )
    waiting = (
        exp.select(*(col(c) for c in node.columns), alias(exp.false(), KEPT), col(WEIGHT))
        .from_(subquery(stored.copy(), "s"))
        .where(exp.not_(positioned.copy()))
    )
    # no row waits after the prefix: it is the whole input, and every changed row is in it
    last = _last(node, candidates.copy()).where(exp.Exists(this=waiting.copy()))
    content = _prefix(node, union_all([_classified(node, records, last), waiting]))
    short = exp.and_(
        exp.LT(this=_weight_where(positioned.copy()), expression=lit(node.limit)),
        exp.GT(this=_weight_where(exp.not_(positioned.copy())), expression=lit(0)),
    )
    summary = exp.select(alias(short, SHORT)).from_(subquery(content.copy(), "n"))
    return (
        exp.select(exp.Star())
        .from_(subquery(replacement(node, content, table_name), "d"))
        .join(subquery(summary, "f"), join_type="CROSS")
    )


def _weight_where(condition: exp.Expression) -> exp.Expression:
    return exp.Coalesce(
        this=sum_of(exp.If(this=condition, true=col(WEIGHT), false=lit(0))),
        expressions=[lit(0)],
    )


def replacement(node: TopK, content: exp.Query, table_name: str) -> exp.Select:
    """The change that turns the stored content into ``content``, consolidated: only the
    rows that moved, entered or left, and the marker's new count."""
    stored = stored_columns(node)
    old = exp.select(*(col(c) for c in stored), alias(exp.Neg(this=col(WEIGHT)), WEIGHT)).from_(
        table(table_name)
    )
    new = exp.select(*(col(c) for c in (*stored, WEIGHT))).from_(subquery(content, "n"))
    return consolidate(union_all([new, old]), stored)


def reader(table_name: str, node: TopK) -> Scan:
    """The first k rows: stored rows with fewer than k before them, each at most k - before
    times (the marker has no position, so it is never read)."""
    room = exp.Sub(this=lit(node.limit), expression=col(BEFORE))
    return Scan(
        table_name,
        node.columns,
        weight=exp.Least(this=col(WEIGHT), expressions=[room]),
        where=exp.LT(this=col(BEFORE), expression=lit(node.limit)),
    )
