"""Refresh policies: when a view's refresh may be incremental, and when it must not.

The policy itself, which config and view files name; what a refresh does with it is
``physical.policy``.

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


class RefreshPolicy(Enum):
    AUTO = "auto"
    INCREMENTAL = "incremental"
    INCREMENTAL_STRICT = "incremental strict"
    FULL = "full"

    @classmethod
    def named(cls, words: str) -> RefreshPolicy | None:
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
