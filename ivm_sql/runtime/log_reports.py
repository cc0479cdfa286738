"""What ``ivm history`` shows, read from the refresh event log (``storage.refresh_log``):
the last refreshes, one entry per refresh and view, and each view's efficiency (the median
seconds of its incremental and of its full refreshes, and their ratio)."""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from sqlglot import exp

from ivm_sql.sqlbuild import col, lit, table, to_sql
from ivm_sql.storage import delta_log, refresh_log

# the columns a history reads, in the order of a stage's line
STAGE_COLUMNS = (
    "refresh_id",
    "refresh_clock",
    "view_name",
    "stage_table",
    "stage_kind",
    "action",
    "strategy",
    "reason",
    "rows_in",
    "rows_out",
    "plan_seconds",
    "change_seconds",
    "write_seconds",
    "seconds",
    "statements",
    "spark_jobs",
    "outcome",
    "error",
)


@dataclass(frozen=True)
class StageEntry:
    """One stage of one refresh, as the log holds it."""

    table: str
    kind: str
    action: str
    strategy: str
    reason: str
    rows_in: int | None
    rows_out: int | None
    plan_seconds: float | None
    change_seconds: float | None
    write_seconds: float | None
    seconds: float | None
    statements: int | None
    spark_jobs: int | None
    outcome: str
    error: str | None


@dataclass(frozen=True)
class RefreshEntry:
    """What one refresh did to one view: its stages that ran, summed up."""

    refresh_id: str
    clock: datetime
    view: str
    stages: tuple[StageEntry, ...]

    @property
    def strategy(self) -> str:
        """incremental, full (every stage that ran recomputed), mixed, or failed."""
        if any(s.outcome == refresh_log.OUTCOME_ERROR for s in self.stages):
            return "failed"
        kinds = {s.strategy for s in self.stages}
        return kinds.pop() if len(kinds) == 1 else "mixed"

    @property
    def outcome(self) -> str:
        outcomes = {s.outcome for s in self.stages}
        for outcome in (refresh_log.OUTCOME_ERROR, refresh_log.OUTCOME_UNLOGGED):
            if outcome in outcomes:
                return outcome
        return refresh_log.OUTCOME_OK

    @property
    def reason(self) -> str:
        """The first stage's reason that says why it recomputed (or the first error)."""
        errors = [s.error for s in self.stages if s.error]
        if errors:
            return errors[0]
        return next((s.reason for s in self.stages if s.strategy == "full" and s.reason), "")

    @property
    def rows_in(self) -> int:
        return sum(s.rows_in or 0 for s in self.stages)

    @property
    def rows_out(self) -> int:
        return sum(s.rows_out or 0 for s in self.stages)

    @property
    def seconds(self) -> float | None:
        """None when a stage's time is unknown (an unlogged commit's)."""
        times = [s.seconds for s in self.stages]
        return None if None in times else sum(times)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Efficiency:
    """A view's median seconds per incremental and per full refresh in the log, with how
    many of each; ``ratio``: full over incremental (above 1: incremental pays)."""

    view: str
    incremental_runs: int
    incremental_median: float | None
    full_runs: int
    full_median: float | None

    @property
    def ratio(self) -> float | None:
        if not self.incremental_median or self.full_median is None:
            return None
        return self.full_median / self.incremental_median


@dataclass(frozen=True)
class History:
    refreshes: list[RefreshEntry]  # newest first
    efficiency: list[Efficiency]  # by view name


def read(spark, log: delta_log.DeltaLog, database: str, view: str | None, limit: int) -> History:
    """The last ``limit`` entries (of ``view`` only, if given) and every view's efficiency
    over the whole log, in one query."""
    name = refresh_log.table_in(database)
    if not log.exists(name):
        return History([], [])
    query = exp.select(*(col(c) for c in STAGE_COLUMNS)).from_(table(name))
    if view is not None:
        query = query.where(exp.EQ(this=col("view_name"), expression=lit(view)))
    rows = spark.sql(to_sql(query, pretty=False)).collect()
    entries = _entries(rows)
    return History(entries[:limit], efficiency(entries))


def _entries(rows: Iterable) -> list[RefreshEntry]:
    grouped: dict[tuple[str, str], list] = {}
    for row in rows:
        grouped.setdefault((row.refresh_id, row.view_name), []).append(row)
    entries = [
        RefreshEntry(
            refresh_id,
            stage_rows[0].refresh_clock,
            view,
            tuple(
                StageEntry(*(getattr(r, c) for c in STAGE_COLUMNS[3:]))
                for r in sorted(stage_rows, key=lambda r: r.stage_table)
            ),
        )
        for (refresh_id, view), stage_rows in grouped.items()
    ]
    return sorted(entries, key=lambda e: (e.refresh_id, e.view), reverse=True)


def efficiency(entries: list[RefreshEntry]) -> list[Efficiency]:
    """Per view, from its entries that ran every stage one way and whose times are known."""
    times: dict[str, dict[str, list[float]]] = {}
    for entry in entries:
        seconds = entry.seconds
        if entry.strategy in ("incremental", "full") and seconds is not None:
            by_way = times.setdefault(entry.view, {"incremental": [], "full": []})
            by_way[entry.strategy].append(seconds)
    return [
        Efficiency(
            view,
            len(ways["incremental"]),
            statistics.median(ways["incremental"]) if ways["incremental"] else None,
            len(ways["full"]),
            statistics.median(ways["full"]) if ways["full"] else None,
        )
        for view, ways in sorted(times.items())
    ]
