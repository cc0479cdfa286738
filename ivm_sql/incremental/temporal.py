"""Temporal filters: the clock is an input, and a filter on it is linear.

A condition that compares a column with the current time (``at > current_timestamp() -
INTERVAL 1 DAY``) is a predicate p_T of the time T of the refresh. The clock is read as one
more source whose versions are the times of refreshes: a refresh at T2 after one at T1 pins it
at (T1, T2], as it pins a table between two versions. For a fixed T the filter is linear, and
with the clock as a second input the bilinear rule (DBSP, Theorem 5.5) gives

    σ_{p_T2}(R_new) - σ_{p_T1}(R_old) = σ_{p_T2}(ΔR) + (σ_{p_T2} - σ_{p_T1})(R_old)

The first term is the usual change, filtered at T2. The second holds only the rows whose
bound the clock passed (the temporal filter of differential dataflow): a row enters, weight
+w, where p_T2 holds and p_T1 did not, and leaves, weight -w, the other way round. It reads
the stored rows through a range predicate, the column between a bound's two values, which
Delta's min/max statistics turn into skipped files when the column grows with time: not a
recompute.

The clock's versions are microseconds since the epoch, read back with ``timestamp_micros``,
so they mean the same instant in any session time zone.
"""

from __future__ import annotations

from datetime import UTC, datetime

from sqlglot import exp

from ivm_sql.algebra.clock import is_clock_read, reads_clock
from ivm_sql.incremental.versions import Pins, Versions
from ivm_sql.sqlbuild import lit

CLOCK = "__ivm_clock"  # the clock's key among a stage's pins (tables are always db.name)
CLOCK_TERM = "__ivm_clock_term"  # the alias of the rows the clock moved across a bound
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# `ivm compile` shows the time a stage reflects and the time of the refresh as placeholders.
SYMBOLIC_CLOCK = Versions(
    exp.Placeholder(this="clock_old"), exp.Placeholder(this="clock_new"), True
)


def micros(moment: datetime) -> int:
    """A moment as the clock's version: microseconds since the epoch (naive means UTC)."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return (moment - EPOCH) // (datetime.resolution)


def moment(version: int) -> datetime:
    return EPOCH + version * datetime.resolution


def clock_versions(old: int | None, new: int) -> Versions:
    """The clock pinned from the time a stage reflects (None: never read) to this refresh's."""
    return Versions(
        None if old is None else instant(old), instant(new), old is not None and old != new
    )


def instant(version: int) -> exp.Expression:
    return exp.Anonymous(this="timestamp_micros", expressions=[lit(version)])


def at_time(expression: exp.Expression, now: exp.Expression) -> exp.Expression:
    """``expression`` with every read of the clock replaced by the instant ``now``, typed as
    the function it replaces (a date, a local timestamp in the session's time zone)."""

    def pinned(node: exp.Expression) -> exp.Expression:
        if not is_clock_read(node):
            return node
        if isinstance(node, exp.CurrentDate) or node.name.lower() == "current_date":
            return exp.cast(now.copy(), exp.DataType.Type.DATE)
        if isinstance(node, exp.Localtimestamp) or node.name.lower() == "localtimestamp":
            return exp.cast(now.copy(), exp.DataType.Type.TIMESTAMPNTZ)
        return now.copy()

    return expression.copy().transform(pinned)


def crossed(conjuncts: list[exp.Expression], pins: Pins) -> tuple[exp.Expression, exp.Expression]:
    """For the rows the clock moved across a bound of a filter (its clock-reading
    ``conjuncts``): the predicate that finds them, and the sign of their weight.

    The predicate is exact (the filter holds at one time and not at the other) and starts
    with a range Delta can skip files by: where each conjunct compares an expression over
    columns with a bound that reads only the clock, a flip needs the expression between the
    bound's two values; otherwise, the rows the filter holds at either time."""
    clock = pins[CLOCK]
    condition = exp.and_(*conjuncts)
    before, after = at_time(condition, clock.old), at_time(condition, clock.new)
    holds_before, holds_after = _is_true(before), _is_true(after)
    ranges = [_flip_range(c, clock) for c in conjuncts]
    candidates = exp.or_(*ranges) if all(r is not None for r in ranges) else exp.or_(before, after)
    found = exp.and_(
        candidates, exp.NEQ(this=exp.paren(holds_after), expression=exp.paren(holds_before))
    )
    sign = exp.If(this=holds_after.copy(), true=lit(1), false=lit(-1))
    return found, sign


COMPARISONS = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE)


def _flip_range(conjunct: exp.Expression, clock: Versions) -> exp.Expression | None:
    """Where a comparison of ``subject`` with bounds that read the clock (and no column)
    can change its value between the two times: ``subject`` between each bound's two
    values. None for any other shape."""
    if isinstance(conjunct, exp.Paren):
        return _flip_range(conjunct.this, clock)
    if isinstance(conjunct, exp.Between):
        subject, bounds = conjunct.this, [conjunct.args["low"], conjunct.args["high"]]
    elif isinstance(conjunct, COMPARISONS):
        subject, bounds = conjunct.this, [conjunct.expression]
        if reads_clock(subject):
            subject, bounds = conjunct.expression, [conjunct.this]
    else:
        return None
    if reads_clock(subject) or any(b.find(exp.Column) for b in bounds):
        return None
    return exp.or_(*(_between_times(subject, b, clock) for b in bounds if reads_clock(b)))


def _between_times(
    subject: exp.Expression, bound: exp.Expression, clock: Versions
) -> exp.Expression:
    old, new = at_time(bound, clock.old), at_time(bound, clock.new)
    between = exp.Between(
        this=subject.copy(),
        low=exp.func("least", old, new),
        high=exp.func("greatest", old.copy(), new.copy()),
    )
    # a bound that is NULL at either time leaves no range; Spark folds these tests away
    return exp.or_(
        between,
        exp.Is(this=old.copy(), expression=exp.null()),
        exp.Is(this=new.copy(), expression=exp.null()),
    )


def _is_true(condition: exp.Expression) -> exp.Expression:
    """``condition IS TRUE``: WHERE drops a NULL as it drops FALSE."""
    return exp.Is(this=exp.paren(condition.copy()), expression=exp.true())
