"""When a stage must be recomputed whatever the cost, and why.

A stage is maintained by DBSP's incremental form of its query, Q^Δ = D ∘ Q ∘ I (Budiu et
al., "DBSP", Theorem 3.3): its table is the integral of its output, and a refresh adds the
output's change over the sources' changes since the versions it recorded. That holds only
while the table is the integral of *this* query over *those* versions, and while each
source's change is the one its change data feed describes. Where either fails, the stage
is loaded again from its whole SELECT (the integral starts over), for a reason shown to the
user:

- its definition: the table is new, holds no ivm record, or was built by another definition;
- the user asked (``--full``), or the stage recomputes on every refresh (``Stage.every_refresh``);
- a table it reads was recomputed in this refresh (so its change is not a delta);
- it is a view's table written in one statement, and the stages it was written through have
  since been caught up (``physical.one_statement``);
- a source was dropped and created again (its versions restarted), its log lost the commits
  since the recorded version, or holds a commit the feed cannot describe (``storage.history``).

The cost model's recomputes (``physical.cost``) are the other kind: chosen, not forced.
``forced_reason`` reads only the stage's record and its sources' logs, so a refresh can ask
it before anything is written, which is how an INCREMENTAL STRICT view (``physical.policy``)
fails without a commit.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from ivm_sql.errors import RefreshError
from ivm_sql.incremental.stages import Stage
from ivm_sql.physical import one_statement
from ivm_sql.physical import policy as policies
from ivm_sql.physical.cost import COST_REASON
from ivm_sql.refresh_policy import RefreshPolicy
from ivm_sql.storage import delta_log, history
from ivm_sql.viewdefs import ViewDef

# the reason of a stage over a recomputed table: "<table> was recomputed"
RECOMPUTED_BELOW = " was recomputed"


class PlannedView(Protocol):
    """What a STRICT check reads of a view's plan (``compiler.plan.ViewPlan`` is one): a layer
    below the compiler names only the shape it needs."""

    view: ViewDef
    policy: RefreshPolicy
    stages: tuple[Stage, ...]

    @property
    def name(self) -> str: ...

    def fingerprint(self, stage: Stage) -> str: ...


class Recomputes:
    """The forced recomputes of one refresh, over the versions it pinned (``current``, which
    the refresh keeps filling in as it pins sources and writes stages)."""

    def __init__(self, log: delta_log.DeltaLog, current: dict[str, int], full: bool, run: Callable):
        self.log = log
        self.current = current
        self.full = full
        self.run = run  # runs a log read, turning a Spark error into the refresh's own
        self.recomputed: set[str] = set()  # stage tables this refresh recomputed
        # tables recomputed for a reason that may change their columns
        self.reshaped: set[str] = set()

    def forced_reason(
        self, stage: Stage, fingerprint: str, exists: bool, record: dict
    ) -> str | None:
        """Why a stage must be recomputed, from its record and the logs of its sources (those
        this refresh has pinned so far): nothing else is read or written."""
        reason = self._definition_reason(
            stage, fingerprint, exists, record
        ) or self._identity_reason(stage, record)
        recorded = record.get("sources", {})
        pinned = [t for t in stage.sources if t in self.current]
        if reason is None:
            reason = history.log_gap(self.log, {t: (recorded[t], self.current[t]) for t in pinned})
        return reason or history.undescribed_commit(
            self.log, history.read_pins(self.log, recorded, self.current, pinned)
        )

    def note(self, stage: Stage, reason: str) -> None:
        """Remember that ``stage`` is recomputed for ``reason``: the stages over it follow."""
        if not self._same_shape(stage, reason):
            self.reshaped.add(stage.table)

    def refuse_strict(self, plan: PlannedView, reason: str | None, own_tables: set[str]) -> None:
        """Fail, before anything of the stage is written, a STRICT view's recompute for a
        reason other than a first load (``physical.policy``); a stage over one of its view's
        own stages that was loaded anew is part of that load."""
        below = (
            reason is not None
            and reason.endswith(RECOMPUTED_BELOW)
            and reason[: -len(RECOMPUTED_BELOW)] in own_tables
        )
        refusal = None if below else policies.strict_refusal(plan.policy, reason)
        if refusal is not None:
            raise RefreshError(
                f"view {plan.name}: {refusal}",
                location=plan.view.location,
                hint=policies.STRICT_HINT,
            )

    def check_strict(self, plan: PlannedView, newest: Callable[[Stage], dict | None]) -> None:
        """Refuse a STRICT view whose refresh could not be incremental, by what the logs say
        (``forced_reason``), before any of its stages is written. ``newest``: a stage's newest
        record (None: its table does not exist)."""
        own_tables = {stage.table for stage in plan.stages}
        for stage in plan.stages:
            record = newest(stage)
            reason = self.forced_reason(
                stage, plan.fingerprint(stage), record is not None, record or {}
            )
            self.refuse_strict(plan, reason, own_tables)

    def _definition_reason(
        self, stage: Stage, fingerprint: str, exists: bool, record: dict
    ) -> str | None:
        """Whether the table is the integral of this stage's query, over versions it recorded."""
        if not exists:
            return "new"
        if not record:
            return "no ivm record in the table's history"
        if record.get("plan") != fingerprint:
            return "definition changed"
        if self.full:
            return "--full"
        if stage.every_refresh:
            return stage.node.reason
        rebuilt = [t for t in stage.sources if t in self.recomputed]
        if rebuilt:
            return f"{rebuilt[0]}{RECOMPUTED_BELOW}"
        if record.get(one_statement.INLINED):  # it reflects newer versions than they did
            return one_statement.CAUGHT_UP
        missing = [t for t in stage.sources if t not in record.get("sources", {})]
        if missing:
            return f"no recorded version for {missing[0]}"
        if stage.reads_clock and record.get("now") is None:
            return "no recorded time for its filter on the current time"
        return None

    def _identity_reason(self, stage: Stage, record: dict) -> str | None:
        """A source dropped and created again restarts its versions: compare table ids."""
        for table, recorded_id in record.get("ids", {}).items():
            if (
                table in stage.sources
                and self.run(lambda: self.log.table_id(table), table) != recorded_id
            ):
                return f"{table} was dropped and created again"
        return None

    def _same_shape(self, stage: Stage, reason: str) -> bool:
        """Whether a recompute for ``reason`` keeps the table's columns as they were: one the
        cost model or the clock asked for, or one that follows such a recompute below it.
        Then the user's view over the table stands as it is (recreating a view in the
        catalog costs about 0.5 s); after any other recompute it is created again."""
        if (
            reason.startswith(COST_REASON)
            or reason == one_statement.CAUGHT_UP
            or (stage.every_refresh and reason == stage.node.reason)
        ):
            return True
        return reason.endswith(RECOMPUTED_BELOW) and not any(
            t in self.reshaped for t in stage.sources
        )
