"""Refresh policies: when a view's refresh may be incremental, and when it must not.

Databricks' ``REFRESH POLICY`` clause of CREATE MATERIALIZED VIEW, with its meanings:

- ``AUTO`` (the default): incremental where the SQL allows it, and the cost model
  (``physical.cost``) recomputes a stage when that is cheaper.
- ``INCREMENTAL``: the view's SQL must be maintainable incrementally (``ivm compile``
  refuses it otherwise), and the cost model never switches a refresh to a recompute; a
  refresh still recomputes where it must (the first load, a redefinition, a source whose
  history is gone or holds a commit the change data feed cannot describe).
- ``INCREMENTAL STRICT``: as INCREMENTAL, but a refresh that must recompute fails instead,
  except for the first load of a definition (a new view, or one whose definition changed):
  ``strict_refusal``.
- ``FULL``: the whole SELECT is recomputed whenever a source changes (what the older
  ``TBLPROPERTIES ('ivm.refresh' = 'full')`` asks for, and the same thing).

A view sets its own; ivm.yaml's ``refresh.policy`` is the project's default.
"""

from __future__ import annotations

from enum import Enum

from ivm_sql.incremental.stages import Stage


class RefreshPolicy(Enum):
    AUTO = "auto"
    INCREMENTAL = "incremental"
    INCREMENTAL_STRICT = "incremental strict"
    FULL = "full"

    @classmethod
    def named(cls, words: str) -> "RefreshPolicy | None":
        """The policy spelled ``words`` (any case, any spaces between words), or None."""
        wanted = " ".join(words.lower().split())
        return next((p for p in cls if p.value == wanted), None)

    @property
    def incremental(self) -> bool:
        """INCREMENTAL or INCREMENTAL STRICT: the SQL must be incremental, the cost model is off."""
        return self in (RefreshPolicy.INCREMENTAL, RefreshPolicy.INCREMENTAL_STRICT)

    def __str__(self) -> str:
        return self.value.upper()


NAMES = ", ".join(str(p) for p in RefreshPolicy)
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


STRICT_HINT = ("nothing was written; run `ivm refresh --full VIEW` once to rebuild it, "
               "or use REFRESH POLICY INCREMENTAL to let a refresh recompute when it must")


def describe(policy: RefreshPolicy) -> str:
    """The policy as `ivm compile` shows it."""
    return {
        RefreshPolicy.AUTO: "AUTO (incremental, recomputed where the cost model finds it cheaper)",
        RefreshPolicy.INCREMENTAL: "INCREMENTAL (never recomputed by the cost model; recomputed only where it must be)",
        RefreshPolicy.INCREMENTAL_STRICT: "INCREMENTAL STRICT (a refresh that cannot be incremental fails, "
                                          "except the first load of its definition)",
        RefreshPolicy.FULL: "FULL (the whole SELECT recomputed whenever a source changes)",
    }[policy]
