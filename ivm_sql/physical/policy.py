"""What a refresh does with a view's refresh policy (``ivm_sql.refresh_policy``): the
recompute reasons a STRICT view accepts, its refusal, and how `ivm compile` shows a policy."""

from __future__ import annotations

from ivm_sql.incremental.stages import Stage
from ivm_sql.refresh_policy import RefreshPolicy

FULL_REASON = "its refresh policy is FULL"

# Recompute reasons a STRICT refresh accepts: a first load of the view's definition, or the
# user's own --full. Any other reason means the change could not be applied.
FIRST_LOAD = ("new", "definition changed", "no ivm record in the table's history", "--full")


def whole_recompute(stages: tuple[Stage, ...]) -> Stage | None:
    """The first stage that recomputes its whole operator on a change (one global key:
    ORDER BY ... LIMIT over all rows, a filter on the current time no temporal rule keeps, an
    aggregate without GROUP BY that is not maintained from the change, ...); touched-keys
    recomputes are incremental."""
    return next((s for s in stages if s.recomputes_all), None)


def strict_refusal(policy: RefreshPolicy, reason: str | None) -> str | None:
    """Why a STRICT view's refresh fails, when ``reason`` says it must recompute; else None."""
    if policy is not RefreshPolicy.INCREMENTAL_STRICT or reason is None or reason in FIRST_LOAD:
        return None
    return f"its refresh policy is INCREMENTAL STRICT and it cannot be refreshed incrementally: {reason}"


STRICT_HINT = (
    "nothing was written; run `ivm refresh --full VIEW` once to rebuild it, "
    "or use REFRESH POLICY INCREMENTAL to let a refresh recompute when it must"
)


def describe(policy: RefreshPolicy) -> str:
    """The policy as `ivm compile` shows it."""
    return {
        RefreshPolicy.AUTO: "AUTO (incremental, recomputed where the cost model finds it cheaper)",
        RefreshPolicy.INCREMENTAL: "INCREMENTAL (never recomputed by the cost model; recomputed only where it must be)",
        RefreshPolicy.INCREMENTAL_STRICT: "INCREMENTAL STRICT (a refresh that cannot be incremental fails, "
        "except the first load of its definition)",
        RefreshPolicy.FULL: "FULL (the whole SELECT recomputed whenever a source changes)",
    }[policy]
