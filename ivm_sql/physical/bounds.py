"""Which literal prunes what: a large table read beside a change, bounded by the change's keys.

The join rule's term ΔA ⋈ B reads B whole for a change to A of a few rows (DBSP's bilinear
expansion, ``incremental.join``). Open-source Delta has no dynamic file pruning: it skips a
file only by a literal predicate on a column it keeps statistics for. But a refresh knows ΔA
before it reads B: the change data feed reads are kept in memory (``physical.changes``). So
for each equality ``a.x = b.y`` between a change's column and a column of another input of
the same term, the values of ``x`` in the change become literals on ``b.y``:

- ``b.y IN (v1, ..., vn)`` for a few distinct values (up to ``LISTED``);
- for more, up to ``RANGES`` ranges ``b.y BETWEEN lo AND hi`` OR ..., split at the widest
  gaps between the values (numbers and dates; one range for other types, or for over
  ``SPLIT_AT_MOST`` values). A slab of keys (TPC-H's refresh functions, an append-only log)
  is one range; new orders at the top of the key range and deleted ones at the bottom are
  two, so the files between them are skipped.

The predicate holds for every row the term outputs: the term is an inner join, and a row of
B joins only where ``b.y = a.x`` for a value ``x`` of the change (never NULL: ``=`` matches
no NULL). So it changes what is read, never the result. Spark pushes it below the term's
projections and UNION ALLs down to B's Delta scan.

The same holds for a LEFT SEMI join, in either direction: a touched-keys recompute
(``incremental.recompute``) reads each input only where its key is among the touched keys,
``r.k <=> touched.k``, and the touched keys come from the change. That equality is
null-safe, so a NULL among the change's keys adds ``OR r.k IS NULL`` (Delta skips by its
null counts too). A LEFT ANTI join or an outer join bounds nothing: its output holds rows
that match no key.

A change counts only when its query reads nothing but kept change data feeds (its bounds are
one small job over memory), and only inputs whose Delta tables hold ``BOUNDED_FROM_BYTES`` bytes or
more are bounded: below that the job costs more than the files it skips.
"""

from __future__ import annotations

import datetime
import decimal
import threading
from collections.abc import Callable
from dataclasses import dataclass

from sqlglot import exp

from ivm_sql.incremental.recompute import TOUCHED
from ivm_sql.physical.changes import GLOBAL_TEMP, is_change_read
from ivm_sql.sqlbuild import col, lit, to_sql

# Bytes of Delta data an input must scan for its read to be bounded by the change's keys.
BOUNDED_FROM_BYTES = 8 * 2**20
# Distinct values of a change's key listed as IN (...); more become ranges.
LISTED = 16
RANGES = 4
SPLIT_AT_MOST = 100_000  # distinct values fetched to split them at gaps; more: one range


@dataclass(frozen=True)
class Bound:
    """In the SELECT ``term``, input ``table_alias``'s column ``column`` is bounded by the
    values of ``change_alias``'s column ``key`` (``null_safe``: and by its NULL, if any)."""

    term: exp.Select
    change_alias: str
    key: str
    table_alias: str
    column: str
    null_safe: bool = False

    def describe(self) -> str:
        """``table.column by the change's key``, for ``ivm compile``."""
        source = _sources(self.term)[self.table_alias]
        tables = sorted(
            {
                ".".join(p.name for p in t.parts)
                for t in source.find_all(exp.Table)
                if not is_change_read(t)
            }
        )
        keys = "the touched keys" if self.change_alias == TOUCHED else f"the change's {self.key}"
        origins = [
            name for table, name in _origins(source, self.column) if not is_change_read(table)
        ]
        return f"{'/'.join(tables) or self.table_alias}.{origins[0] if origins else self.column} by {keys}"


def bounds(query: exp.Query) -> list[Bound]:
    """Every equality between a kept change's column and another input's column, in every
    SELECT of ``query`` whose joins are inner joins or LEFT SEMI joins: stated, or implied by
    a chain of ``=`` (``d.k = o.k AND o.k = l.k`` bounds ``l.k`` by the change's ``k`` too:
    every row the term outputs has ``l.k = o.k = d.k``)."""
    found = []
    for term in query.find_all(exp.Select):
        sources = _sources(term)
        changes = {name for name, source in sources.items() if _reads_only_changes(source)}
        seen = set()
        for left, right, null_safe in _equalities(_conditions(term)):
            a, b = left
            is_change = a in changes or (
                a in sources and _covering_feeds(sources[a], b) is not None
            )
            bounds_a_change = is_change and right[0] in sources and right[0] not in changes
            if bounds_a_change and _reads_a_table(sources[right[0]]) and (left, right) not in seen:
                seen.add((left, right))
                found.append(Bound(term, a, b, right[0], right[1], null_safe))
    return found


def _equalities(
    conditions: list[exp.Expression],
) -> list[tuple[tuple[str, str], tuple[str, str], bool]]:
    """Each pair of columns (table alias, name) the conjuncts make equal, both ways, and
    whether null-safely: those stated (``=`` or ``<=>``), then those a chain of ``=`` implies.
    A NULL never satisfies ``=``, so along such a chain every column holds the same non-NULL
    value; a ``<=>`` is not followed (NULL would match NULL)."""
    stated, classes = [], []
    for condition in conditions:
        if not (
            isinstance(condition, (exp.EQ, exp.NullSafeEQ))
            and isinstance(condition.this, exp.Column)
            and isinstance(condition.expression, exp.Column)
        ):
            continue
        this = (condition.this.table, condition.this.name)
        other = (condition.expression.table, condition.expression.name)
        null_safe = isinstance(condition, exp.NullSafeEQ)
        stated += [(this, other, null_safe), (other, this, null_safe)]
        if not null_safe:
            joined = [c for c in classes if this in c or other in c]
            classes = [c for c in classes if c not in joined] + [
                set().union({this, other}, *joined)
            ]
    implied = [(a, b, False) for c in classes for a in sorted(c) for b in sorted(c) if a != b]
    return stated + implied


@dataclass(frozen=True)
class BoundRead:
    """A Delta table read only where its ``column`` is in ``ranges`` ((least, greatest) pairs,
    inclusive; none: nothing can join): ``table`` is the node that reads it, in the bounded
    query. The cost model counts only the files whose statistics overlap the ranges."""

    table: exp.Table
    column: str
    ranges: tuple[tuple, ...]


def bounded(
    values: KeyValues,
    query: exp.Query,
    table_bytes: Callable[[str, int | None], int | None],
    feeds_only: bool = False,
) -> tuple[exp.Query, list[BoundRead]]:
    """``query`` with each of its ``bounds`` on a large input written as literals, computed
    from the change (``values``: this refresh's, each fetched once; ``table_bytes(table,
    version)``: a Delta table's size, None when unknown, which counts as large; version None
    for a table read as it stands, the stage's own); and the tables those literals reach.
    ``feeds_only``: no change is run for its keys (a query only weighed, never run): a key
    no kept feed covers bounds its reads to the least they can be (``least_reads``)."""
    query = query.copy()
    reads = []
    by_change: dict[
        str, list[Bound]
    ] = {}  # the change's SQL: a touched-keys recompute uses it twice
    for bound in _large_bounds(query, table_bytes):
        change = _sources(bound.term)[bound.change_alias]
        by_change.setdefault(to_sql(change, pretty=False), []).append(bound)
    groups = list(by_change.values())
    wanted = [
        (_sources(group[0].term)[group[0].change_alias], sorted({b.key for b in group}))
        for group in groups
    ]
    for group, known in zip(groups, values.of(wanted, feeds_only), strict=True):
        for bound in group:
            if bound.key not in known:  # not fetched (``feeds_only``)
                reads += _reads_of(bound, ())
                continue
            *key_values, has_null = known[bound.key]
            target = col(bound.column, bound.table_alias)
            ranges = _key_ranges(*key_values)
            predicate = _literal_predicate(target, ranges)
            if predicate is None:
                continue
            if bound.null_safe and has_null:
                predicate = exp.or_(
                    exp.paren(predicate), exp.Is(this=target.copy(), expression=exp.Null())
                )
            else:  # (a NULL's file cannot be told by its least and greatest value: counted whole)
                reads += _reads_of(bound, tuple(ranges))
            bound.term.where(predicate, append=True, copy=False)
    return query, reads


def least_reads(
    query: exp.Query, table_bytes: Callable[[str, int | None], int | None]
) -> list[BoundRead]:
    """The reads ``bounded`` may narrow in ``query``, each bounded to no key at all: the
    least any change's keys can leave of them (the files without statistics), known before
    a row of the change is read. What the cost model weighs a change by before its keys are
    fetched (``physical.cost``): if the change reads as much as a recompute even so, the keys
    cannot change the choice."""
    return [read for bound in _large_bounds(query, table_bytes) for read in _reads_of(bound, ())]


def _large_bounds(
    query: exp.Query, table_bytes: Callable[[str, int | None], int | None]
) -> list[Bound]:
    """The ``bounds`` of ``query`` whose input is large enough to be bounded."""
    return [
        bound
        for bound in bounds(query)
        if _is_large(_sources(bound.term)[bound.table_alias], table_bytes)
    ]


def _reads_of(bound: Bound, ranges: tuple[tuple, ...]) -> list[BoundRead]:
    """The Delta table reads ``bound`` narrows to ``ranges`` of its column."""
    return [
        BoundRead(table, column, ranges)
        for table, column in _origins(_sources(bound.term)[bound.table_alias], bound.column)
        if not is_change_read(table)
    ]


class KeyValues:
    """The values of a change's key columns, for one refresh.

    A key read straight from a kept change data feed (through renames, filters, inner and
    semi joins, aggregates and UNION ALL: operators that only drop rows or pass the column
    on) takes all the values of that feed's column: a superset of the change's own, so the
    bound still holds for every row that can join, and one job per feed, for the columns a
    change asks of it, serves every stage that reads them (TPC-H's 22 views bound their
    reads by a few order and customer keys).
    A key that an outer join or a grouping set may turn NULL, or that is computed, takes the
    change's own values, one job per change."""

    def __init__(self, spark):
        self.spark = spark
        self._of_feeds: dict[tuple[str, str], tuple] = {}  # (kept feed view, column) -> its values
        # worker threads (``runtime.workers``) fetch a feed's values once
        self._lock = threading.Lock()

    def of(
        self, wanted: list[tuple[exp.Expression, list[str]]], feeds_only: bool = False
    ) -> list[dict[str, tuple]]:
        """Per (change, its keys) of ``wanted``, per key: (distinct values, them sorted when at
        most SPLIT_AT_MOST, least, greatest, whether it holds a NULL). The feeds' values that
        any of them needs are fetched together. ``feeds_only``: the keys no feed covers are
        left out, and no change is run."""
        fed: list[dict[str, list[tuple[str, str]]]] = []  # per change: key -> (feed, column)s
        own: list[list[str]] = []  # per change: the keys read from the change itself
        for change, keys in wanted:
            fed.append({})
            own.append([])
            for key in keys:
                feeds = _covering_feeds(change, key)
                if feeds and not any(isinstance(t.this, exp.Anonymous) for t, _ in feeds):
                    fed[-1][key] = [(table.name, column) for table, column in feeds]
                else:
                    own[-1].append(key)
        of_feeds = self._of_feed_columns(
            [pair for covered in fed for pairs in covered.values() for pair in pairs]
        )
        found = []
        for (change, _), covered, keys in zip(wanted, fed, own, strict=True):
            found.append(
                {key: _merged([of_feeds[p] for p in pairs]) for key, pairs in covered.items()}
            )
            if keys and not feeds_only:
                found[-1].update(_values(self.spark, change, keys))
        return found

    def _of_feed_columns(self, pairs: list[tuple[str, str]]) -> dict[tuple[str, str], tuple]:
        """The values of each (feed view, column) of ``pairs``: those not fetched yet in one
        job per feed, all its columns at once (Q03's change binds ``customer`` by the changed
        orders' ``o_custkey``, and ``lineitem`` by their ``o_orderkey``: one job for both)."""
        with self._lock:
            missing: dict[str, list[str]] = {}
            for view, column in pairs:
                if (view, column) not in self._of_feeds and column not in missing.get(view, []):
                    missing.setdefault(view, []).append(column)
            for view, columns in missing.items():
                kept = exp.Table(this=exp.to_identifier(view), db=exp.to_identifier(GLOBAL_TEMP))
                for column, values in _values(self.spark, kept, columns).items():
                    self._of_feeds[(view, column)] = values
            return {pair: self._of_feeds[pair] for pair in pairs}


def _covering_feeds(source: exp.Expression, column: str) -> list[tuple[exp.Table, str]] | None:
    """The kept change data feeds' columns that hold every value of a FROM item's column, NULL
    included, or None: ``_feed_origins`` where the FROM item adds no NULL of its own. Then a
    touched-keys recompute's keys, though their query joins large tables too, bound its reads
    by those feeds' values, fetched without running that query."""
    return None if _may_add_nulls(source) else _feed_origins(source, column)


def _feed_origins(source: exp.Expression, column: str) -> list[tuple[exp.Table, str]] | None:
    """``_origins`` that are kept change data feeds, or None; where the column is read from a
    table, also through a chain of ``=`` in the same SELECT to a column read from a feed.

    That is DBSP's join rule seen from its keys: each term of Δ(A ⋈ B) joins at least one
    change, so a join key of its output equals that change's key in every row (``=`` holds
    no NULL). The touched keys of Q18's IN over ``lineitem ⋈ orders`` are the changed
    orders' and lineitems' order keys, and its HAVING stage's changed groups."""
    return _traced(source, column, feeds_only=True)


def _may_add_nulls(change: exp.Expression) -> bool:
    """Whether a FROM item may output a NULL its inputs do not hold in the same column: an
    outer join's missing side, a grouping set's rolled-up column."""
    outer = any(
        join.side and join.kind not in ("SEMI", "ANTI") for join in change.find_all(exp.Join)
    )
    return outer or any(change.find_all(exp.Rollup, exp.Cube, exp.GroupingSets))


def _merged(known: list[tuple]) -> tuple:
    """The values of several columns as one: their union."""
    if len(known) == 1:
        return known[0]
    fetched = sorted({v for _, few, _, _, _ in known for v in few})
    complete = all(len(few) == distinct for distinct, few, _, _, _ in known)
    lows = [low for _, _, low, _, _ in known if low is not None]
    highs = [high for _, _, _, high, _ in known if high is not None]
    # not every value fetched: a count above the list's (the sum is), so least to greatest is used
    distinct = len(fetched) if complete else sum(distinct for distinct, *_ in known)
    return (
        distinct,
        fetched,
        min(lows, default=None),
        max(highs, default=None),
        any(k[4] for k in known),
    )


def opened_files(
    files: list[tuple[int, dict]], column: str, ranges: tuple[tuple, ...]
) -> list[tuple[int, dict]]:
    """The files (size, Delta statistics) a read bounded to ``ranges`` of ``column`` opens:
    those whose least and greatest value overlap a range, and those without statistics."""
    opened = []
    for size, stats in files:
        low, high = stats.get("minValues", {}).get(column), stats.get("maxValues", {}).get(column)
        try:
            overlaps = (
                low is None
                or high is None
                or any(
                    _comparable(first) <= high and low <= _comparable(last)
                    for first, last in ranges
                )
            )
        except TypeError:  # statistics of another type than the keys: the file counts
            overlaps = True
        if overlaps:
            opened.append((size, stats))
    return opened


def read_bytes(files: list[tuple[int, dict]], column: str, ranges: tuple[tuple, ...]) -> int:
    """Bytes of the files ``opened_files`` opens."""
    return sum(size for size, _ in opened_files(files, column, ranges))


def files_read(
    reads: list[BoundRead], file_stats: Callable[[str, int], list[tuple[int, dict]] | None]
) -> dict[str, tuple[int, int]]:
    """Per bounded table: (files its bounds open, files it has), summed over its reads, for
    ``ivm refresh`` to show (tables read as they stand, or without file statistics, are left out)."""
    tally: dict[str, tuple[int, int]] = {}
    for read in reads:
        name, version = _read_of(read.table)
        files = file_stats(name, version) if version is not None else None
        if files is not None:
            opened, total = tally.get(name, (0, 0))
            tally[name] = (
                opened + len(opened_files(files, read.column, read.ranges)),
                total + len(files),
            )
    return tally


def _comparable(value):
    """A key as Delta's JSON statistics write it: a date as its ISO text, a decimal as a number."""
    if isinstance(value, datetime.date):
        return value.isoformat()
    return float(value) if isinstance(value, decimal.Decimal) else value


def _reads_a_table(source: exp.Expression) -> bool:
    """Whether a FROM item reads a table (a constant, such as VALUES or range(1, 6), reads none)."""
    return any(t.db for t in source.find_all(exp.Table))


def _is_large(source: exp.Expression, table_bytes: Callable[[str, int | None], int | None]) -> bool:
    """Whether the Delta tables a FROM item reads (at a version, or as they stand) hold
    BOUNDED_FROM_BYTES bytes or more."""
    reads = [
        _read_of(t) for t in source.find_all(exp.Table) if t.db and not is_change_read(t)
    ]  # not a CTE's name
    sizes = [table_bytes(t, v) for t, v in reads]
    return (
        bool(sizes)
        and sum(BOUNDED_FROM_BYTES if s is None else s for s in sizes) >= BOUNDED_FROM_BYTES
    )


def _read_of(table: exp.Table) -> tuple[str, int | None]:
    """(the table's name, the version read; None: as it stands)."""
    version = table.args.get("version")
    return ".".join(p.name for p in table.parts), int(
        version.expression.name
    ) if version is not None else None


def _values(spark, change: exp.Expression, keys: list[str]) -> dict[str, tuple]:
    """Per key column of a change: (distinct values, them sorted when at most SPLIT_AT_MOST,
    least, greatest, whether it holds a NULL), in one statement (NULL is none of the others).

    Each key's set of values is collected once and counted by its size: a COUNT(DISTINCT)
    beside it would make Spark expand every row per key and aggregate twice more, three jobs
    with adaptive execution against two, and about 2.4x the time on a kept feed of 15,000
    rows."""
    inner = (
        change.this
        if isinstance(change, exp.Subquery)
        else exp.select(exp.Star()).from_(change.copy())
    )
    gathered, outputs = [], []
    for i, key in enumerate(keys):
        gathered += [
            exp.alias_(exp.func("collect_set", col(key)), f"set{i}"),
            exp.alias_(exp.Min(this=col(key)), f"lo{i}"),
            exp.alias_(exp.Max(this=col(key)), f"hi{i}"),
            exp.alias_(
                exp.func("bool_or", exp.Is(this=col(key), expression=exp.Null())), f"null{i}"
            ),
        ]
        outputs += [
            exp.alias_(exp.func("size", col(f"set{i}")), f"n{i}"),
            exp.alias_(
                exp.func(
                    "slice", exp.func("sort_array", col(f"set{i}")), lit(1), lit(SPLIT_AT_MOST + 1)
                ),
                f"few{i}",
            ),
            *(col(f"{name}{i}") for name in ("lo", "hi", "null")),
        ]
    sets = exp.select(*gathered).from_(inner.subquery("c"))
    row = spark.sql(to_sql(exp.select(*outputs).from_(sets.subquery("s")), pretty=False)).first()
    return {
        key: (row[f"n{i}"], row[f"few{i}"], row[f"lo{i}"], row[f"hi{i}"], bool(row[f"null{i}"]))
        for i, key in enumerate(keys)
    }


def _key_ranges(distinct: int, values: list, lo, hi) -> list[tuple]:
    """The change's key values as ranges: each value its own for up to LISTED, else split at
    the widest gaps, or least to greatest when not all were fetched; none for no value."""
    if distinct == 0:
        return []
    if distinct <= LISTED:
        return [(v, v) for v in values]
    return _ranges(values) if len(values) == distinct else [(lo, hi)]


def _literal_predicate(target: exp.Column, ranges: list[tuple]) -> exp.Expression | None:
    """``target`` IN the values of single-value ranges, else in the ranges; FALSE for none (no
    row of the term can join); None when a value has no literal here."""
    if not ranges:
        return exp.false()
    if all(low == high for low, high in ranges) and len(ranges) <= LISTED:
        literals = [_literal(low) for low, _ in ranges]
        return None if None in literals else exp.In(this=target, expressions=literals)
    between = [(_literal(low), _literal(high)) for low, high in ranges]
    if any(low is None or high is None for low, high in between):
        return None
    return exp.or_(*(exp.Between(this=target.copy(), low=low, high=high) for low, high in between))


def _ranges(values: list) -> list[tuple]:
    """Sorted distinct values as at most RANGES (least, greatest) ranges, split at the widest
    gaps that are more than twice the median gap (holes, not the spacing of the keys); one
    range for values that have no distance here (strings)."""
    if not isinstance(values[0], (int, decimal.Decimal, datetime.date)) or isinstance(
        values[0], (bool, datetime.datetime)
    ):
        return [(values[0], values[-1])]
    distance = (
        (lambda a, b: (b - a).days)
        if isinstance(values[0], datetime.date)
        else (lambda a, b: b - a)
    )
    gaps = {i: distance(values[i - 1], values[i]) for i in range(1, len(values))}
    typical = sorted(gaps.values())[len(gaps) // 2]
    holes = [
        i for i in sorted(gaps, key=gaps.get, reverse=True)[: RANGES - 1] if gaps[i] > 2 * typical
    ]
    starts = [0, *sorted(holes)]
    ends = [*(i - 1 for i in starts[1:]), len(values) - 1]
    return [(values[s], values[e]) for s, e in zip(starts, ends)]


def _literal(value) -> exp.Expression | None:
    """A SQL literal of ``value``'s type, or None for a type this does not write."""
    if isinstance(value, bool):
        return exp.Boolean(this=value)
    if isinstance(value, int):
        return lit(value)
    if isinstance(value, decimal.Decimal) and value.is_finite():
        return exp.Literal.number(str(value))
    if isinstance(value, str):
        return lit(value)
    if isinstance(value, datetime.datetime):
        return None  # a timestamp literal depends on the session's time zone
    if isinstance(value, datetime.date):
        return exp.cast(exp.Literal.string(value.isoformat()), exp.DataType.build("date"))
    return None


def _sources(term: exp.Select) -> dict[str, exp.Expression]:
    """The term's FROM and JOIN inputs by alias."""
    return {item.alias_or_name: item for item in _inputs(term) if item.alias_or_name}


def _inputs(term: exp.Select) -> list[exp.Expression]:
    """The term's FROM and JOIN inputs, named or not (``FROM table_changes(...)``)."""
    items = [term.args["from_"].this] if term.args.get("from_") else []
    return items + [join.this for join in term.args.get("joins") or []]


def _conditions(term: exp.Select) -> list[exp.Expression]:
    """The conjuncts of the term's joins' ON and of its WHERE, when every join is an inner
    join or a LEFT SEMI join (none for an outer or anti join)."""
    joins = term.args.get("joins") or []
    if not all(_filters_both_sides(join) for join in joins):
        return []
    parts = [join.args.get("on") for join in joins] + [
        term.args["where"].this if term.args.get("where") else None
    ]
    return [
        c
        for part in parts
        if part is not None
        for c in (part.flatten() if isinstance(part, exp.And) else [part])
    ]


def _origins(source: exp.Expression, column: str) -> list[tuple[exp.Table, str]]:
    """The tables a FROM item's column is read from, and its name there, as far as plain
    renames through subqueries and UNION ALL branches go (``orders.customer_id AS p0``: the
    ``orders`` node and customer_id; an old snapshot, the new one UNION ALL its change: both)."""
    return _traced(source, column, feeds_only=False) or []


def _traced(
    source: exp.Expression, column: str, feeds_only: bool
) -> list[tuple[exp.Table, str]] | None:
    """``_origins`` (``feeds_only``: ``_feed_origins``); None for none."""
    if isinstance(source, exp.Table):
        return [(source, column)] if not feeds_only or is_change_read(source) else None
    return (
        _query_traced(source.this, column, feeds_only) if isinstance(source, exp.Subquery) else None
    )


def _query_traced(
    query: exp.Expression, column: str, feeds_only: bool
) -> list[tuple[exp.Table, str]] | None:
    """``_traced`` of a query's output column: the nodes themselves, not copies, so the cost
    model finds them among the query's scans. A UNION ALL has them only when every branch
    does: a branch whose column is computed (``qty + 1``) has values no table column holds,
    and the key values of the others alone would leave its rows out of a bound."""
    if isinstance(query, exp.Union):
        branches = _branches(query)
        if column not in branches[0].named_selects:
            return None
        position = branches[0].named_selects.index(column)
        per_branch = [
            _query_traced(branch, branch.named_selects[position], feeds_only) for branch in branches
        ]
        return (
            None if None in per_branch else [found for origins in per_branch for found in origins]
        )
    if not isinstance(query, exp.Select):
        return None
    picked = [e for e in query.expressions if e.alias_or_name == column]
    if len(picked) != 1 or not isinstance(picked[0].unalias(), exp.Column):
        return None
    named, sources, inputs = picked[0].unalias(), _sources(query), _inputs(query)
    if not named.table:  # an unqualified column: plain only over a single input
        return _traced(inputs[0], named.name, feeds_only) if len(inputs) == 1 else None
    candidates = [(named.table, named.name)]
    if feeds_only:  # a column equal to it by ``=`` holds the same values, never NULL
        candidates += [
            other
            for this, other, null_safe in _equalities(_conditions(query))
            if this == candidates[0] and not null_safe
        ]
    for alias_, name in candidates:
        found = _traced(sources[alias_], name, feeds_only) if alias_ in sources else None
        if found is not None:
            return found
    return None


def _branches(query: exp.Expression) -> list[exp.Select]:
    """The SELECTs of a UNION ALL, in order (any other query: none)."""
    if isinstance(query, exp.Union):
        return _branches(query.this) + _branches(query.expression)
    return [query] if isinstance(query, exp.Select) else []


def _filters_both_sides(join: exp.Join) -> bool:
    """Whether every row a join outputs matches its ON condition: inner, cross, LEFT SEMI."""
    if join.side:
        return join.side == "LEFT" and join.kind == "SEMI"
    return join.kind in ("", "INNER", "CROSS")


def _reads_only_changes(source: exp.Expression) -> bool:
    """Whether a FROM item reads kept change data feeds and nothing else."""
    tables = list(source.find_all(exp.Table))
    return bool(tables) and all(is_change_read(t) for t in tables)


def describe() -> str:
    return (
        f"in a join term or a touched-keys recompute, an input that scans {BOUNDED_FROM_BYTES // 2**20} MiB of Delta data "
        f"or more is read only where its join key is among the change's keys (IN a list of up to {LISTED}, or up to {RANGES} BETWEEN ranges "
        "split at the widest gaps): literals Delta skips files by"
    )
