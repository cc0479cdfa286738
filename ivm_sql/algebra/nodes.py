"""Algebra nodes: frozen dataclasses, children by value, no parent pointers.

Every node denotes a Z-set: a bag of rows with integer weights. Its ``columns`` are the
names of its output columns; the weight travels beside them (see ``ivm_sql.sqlbuild.WEIGHT``).
Expressions are sqlglot trees whose column references are qualified by the alias of the
input they read (``alias.column``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlglot import exp


@dataclass(frozen=True, eq=False)
class Scan:
    """A Delta table read as a Z-set.

    ``exprs`` compute the output columns from the stored ones (None: the stored columns as
    they are); ``where`` filters stored rows; ``weight`` is the weight of one stored row (the
    literal 1 for a base table, the multiplicity column for a bag view table). A view's
    output is a Scan of its table, so a view over a view reads it exactly like a base table.
    ``batches``: the table is a trace of appended batches (``incremental.bag``), where a row
    may be stored more than once and weights may cancel, so a snapshot of it is consolidated
    when read.
    ``state``: the table is a trace of an aggregate's per-group state deltas or a DISTINCT's
    per-row count deltas (``incremental.aggregate``, ``incremental.distinct``), and the stored
    rows ``exprs`` and ``where`` read are this query over it, which sums them. Only a view's
    table that no other view reads is kept so: its rows are read through the view users
    query, never as a snapshot or a change.
    """

    table: str
    columns: tuple[str, ...]
    weight: exp.Expression = field(default_factory=lambda: exp.Literal.number(1))
    exprs: tuple[exp.Expression, ...] | None = None
    where: exp.Expression | None = None
    batches: bool = False
    state: exp.Select | None = None

    @property
    def inputs(self) -> tuple[Node, ...]:
        return ()


@dataclass(frozen=True, eq=False)
class Constant:
    """A relation fixed when the view is compiled: literal rows (``VALUES``, a SELECT
    without FROM) or a table function of literals (``range(1, 6)``).

    ``query`` reads no table and is deterministic; it returns (at least) ``columns``, by
    name, each row with weight 1. As a stream it is the same Z-set at every time, so its
    change is zero (DBSP: D of a constant stream is 0 after the first step) and its old
    and new snapshots are the same rows: in the bilinear join expansion every term with
    the constant's Δ vanishes.
    """

    query: exp.Query
    columns: tuple[str, ...]

    @property
    def inputs(self) -> tuple[Node, ...]:
        return ()


@dataclass(frozen=True, eq=False)
class Select:
    """Inner join of its inputs, then a filter, then a projection (select-project-join).

    Multilinear in its inputs: the weight of an output row is the product of the weights of
    the input rows it came from.
    """

    sources: tuple[tuple[str, Node], ...]  # (alias, input)
    condition: exp.Expression | None
    columns: tuple[str, ...]
    exprs: tuple[exp.Expression, ...]
    laterals: tuple[exp.Expression, ...] = ()  # LATERAL VIEW generators: a flat_map, linear

    @property
    def inputs(self) -> tuple[Node, ...]:
        return tuple(node for _, node in self.sources)


@dataclass(frozen=True, eq=False)
class UnionAll:
    """Sum of Z-sets with the same columns (SQL's UNION ALL, positional)."""

    branches: tuple[Node, ...]
    columns: tuple[str, ...]

    @property
    def inputs(self) -> tuple[Node, ...]:
        return self.branches


@dataclass(frozen=True, eq=False)
class Distinct:
    """Each row whose weight is positive, once (SELECT DISTINCT, UNION)."""

    input: Node
    columns: tuple[str, ...]

    @property
    def inputs(self) -> tuple[Node, ...]:
        return (self.input,)


@dataclass(frozen=True)
class AggCall:
    """One aggregate: ``func`` over input column ``arg`` (None for COUNT(*)), output ``name``."""

    func: str  # one of AGGREGATES
    arg: str | None
    name: str


AGGREGATES = ("count_star", "count", "sum", "avg", "min", "max")


@dataclass(frozen=True, eq=False)
class Aggregate:
    """GROUP BY ``keys`` (input column names) computing ``aggs``; no keys: a global aggregate,
    which has exactly one output row even over an empty input."""

    input: Node
    keys: tuple[str, ...]
    aggs: tuple[AggCall, ...]

    @property
    def columns(self) -> tuple[str, ...]:
        return self.keys + tuple(a.name for a in self.aggs)

    @property
    def inputs(self) -> tuple[Node, ...]:
        return (self.input,)


@dataclass(frozen=True, eq=False)
class Recompute:
    """An operator whose output rows for one key depend only on the input rows with that key
    (MIN/MAX and other aggregates per group, window functions per partition, outer and semi
    joins per join key, set operations per row). ``query`` reads each input as a table named
    by its alias and returns ``columns`` followed by the hidden key columns ``__ivm_k<i>``;
    ``keys`` names, per input, its columns holding that key. No keys at all: one global key.
    An input without key columns beside keyed ones is a fact about a whole input that every
    key's output also depends on (NOT IN: is the subquery empty, does it hold a NULL): it is
    read whole, and when its consolidated change is not empty, every key is touched.
    ``every_refresh``: the output changes without any input changing (it compares with the
    current time), so every refresh recomputes it.
    """

    sources: tuple[tuple[str, Node], ...]
    keys: tuple[tuple[str, ...], ...]
    query: exp.Query
    columns: tuple[str, ...]
    reason: str
    every_refresh: bool = False

    @property
    def inputs(self) -> tuple[Node, ...]:
        return tuple(node for _, node in self.sources)

    @property
    def key_width(self) -> int:
        """How many columns the key has (0: one global key)."""
        return max((len(k) for k in self.keys), default=0)


@dataclass(frozen=True)
class SortKey:
    """One item of an ORDER BY: an input column, its direction and where NULLs go."""

    column: str
    descending: bool
    nulls_first: bool


@dataclass(frozen=True, eq=False)
class TopK:
    """``ORDER BY order LIMIT limit`` over ``input``: its first ``limit`` rows, a row of
    weight w counting as w rows. Rows that tie on ``order`` are told apart by every column
    (SQL leaves their choice open; a fixed one keeps the kept rows stable)."""

    input: Node
    order: tuple[SortKey, ...]
    limit: int

    @property
    def columns(self) -> tuple[str, ...]:
        return self.input.columns

    @property
    def inputs(self) -> tuple[Node, ...]:
        return (self.input,)


@dataclass(frozen=True, eq=False)
class Recursive:
    """``WITH RECURSIVE name AS (anchor UNION ALL step)``: the least fixed point of
    R = anchor + step(R), over Z-sets. ``step`` reads R once, as the Scan of the placeholder
    table ``placeholder(name)``, and is linear in it; UNION ALL keeps every derivation, as
    Spark's own recursion does."""

    name: str
    anchor: Node
    step: Node
    columns: tuple[str, ...]

    @property
    def placeholder(self) -> str:
        return placeholder(self.name)

    @property
    def inputs(self) -> tuple[Node, ...]:
        return (self.anchor, self.step)


RECURSIVE_PREFIX = "__ivm_recursive."  # never a table: tables are db.name, and __ivm is reserved


def placeholder(name: str) -> str:
    """The table name a recursive term reads its CTE by."""
    return f"{RECURSIVE_PREFIX}{name}"


Node = Scan | Constant | Select | UnionAll | Distinct | Aggregate | Recompute | TopK | Recursive


def scans(node: Node) -> list[Scan]:
    """All Scans below ``node``, left to right (a table read twice appears twice)."""
    if isinstance(node, Scan):
        return [node]
    return [s for child in node.inputs for s in scans(child)]
