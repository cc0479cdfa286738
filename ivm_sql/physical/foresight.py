"""A stage's change as it will be, before the stages below it are written.

Whether a stage above a view's lowest will lose to a recompute is weighed before any stage
is refreshed (``physical.one_statement``): its change reads the change data feed of each
stage below it, which does not exist yet. By DBSP's chain rule (Proposition 3.2,
(Q2 ∘ Q1)^Δ = Q2^Δ ∘ Q1^Δ), the change that feed will hold is the lower stage's change
query itself, over the kept feeds of the base tables. So each such read is stood in for by
that query (``stand_in``), under the version the lower stage's write will have, and the
scans rule weighs the stage's change as its keys will bound it: a key of the lower stage's
change traced to the base feed it comes from takes that feed's values (``bounds.KeyValues``),
a superset of the changed groups'. The stand-ins are never run: a key they cannot trace is
counted as the least it can read, and their own reads are the lower stage's cost, not this
one's (``outside``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from sqlglot import exp

from ivm_sql.physical import bounds
from ivm_sql.physical.changes import CHANGE_FUNCTION
from ivm_sql.physical.cost import scanned_bytes
from ivm_sql.sqlbuild import ident

STAND_IN = "__ivm_foreseen"  # the alias of a stand-in for a stage's change data feed


def stand_in(change: exp.Query, below: Mapping[str, exp.Query]) -> exp.Query:
    """``change`` (copied) with each read of the change data feed of a table in ``below``
    replaced by that table's change query (the rows of its next write)."""

    def swap(node: exp.Expression) -> exp.Expression:
        if not (
            isinstance(node, exp.Table)
            and isinstance(node.this, exp.Anonymous)
            and node.this.name.lower() == CHANGE_FUNCTION
        ):
            return node
        table = node.this.expressions[0].name
        if table not in below:
            return node
        rows = below[table]
        outputs = [exp.column(ident(name)) for name in rows.named_selects]
        query = exp.select(*outputs).from_(exp.Subquery(this=rows.copy(), alias=ident("r")))
        return exp.Subquery(this=query, alias=exp.TableAlias(this=ident(STAND_IN)))

    return change.transform(swap)


def outside(
    query: exp.Query,
    bounded: list[bounds.BoundRead],
    size: Callable[[str, int], int | None],
    file_stats: Callable[[str, int], list[tuple[int, dict]] | None],
) -> int | None:
    """``cost.scanned_bytes`` of ``query`` without the reads of its stand-ins."""
    total = scanned_bytes(query, bounded, size, file_stats)
    inside = [
        scanned_bytes(node, bounded, size, file_stats)
        for node in query.find_all(exp.Subquery)
        if _is_stand_in(node) and not any(_is_stand_in(above) for above in _ancestors(node))
    ]
    if total is None or None in inside:
        return None
    return total - sum(inside)


def _is_stand_in(node: exp.Expression) -> bool:
    return isinstance(node, exp.Subquery) and node.alias == STAND_IN


def _ancestors(node: exp.Expression):
    above = node.parent
    while above is not None:
        yield above
        above = above.parent


def as_written(
    measure: Callable[[str, int | None], object], written: Mapping[str, int]
) -> Callable[[str, int | None], object]:
    """``measure(table, version)`` where the next version of a table in ``written`` (the
    version each was last written at), or the table as it stands (version None), is
    measured as that one: what its next write will hold is not known, and a change moves
    it little."""

    def at(table: str, version: int | None):
        if table in written and version in (None, written[table] + 1):
            version = written[table]
        return measure(table, version)

    return at
