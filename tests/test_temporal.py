"""Temporal filters under the differential oracle: the clock is driven across the bounds of
each view's window (an injected "now"), with random inserts, updates and deletes around it
(churn included: events and kinds that come and go between two refreshes), and after every refresh each view must equal its SELECT evaluated by Spark at the same
source versions with the current time read as that refresh's "now"."""

from __future__ import annotations

import random
import re
from datetime import UTC, datetime, timedelta

import pytest
from oracle import (
    INCREMENTAL_ONLY,
    SEEDS,
    Churn,
    ChurnTable,
    MakeProject,
    ViewSpec,
    apply_changes,
    churned,
    compare_views,
    sql_literal,
    timestamp_sql,
    values_clause,
    views_file,
)

from ivm_sql.compiler.routing import EVERY_REFRESH_REASON
from ivm_sql.incremental.stages import TEMPORAL
from ivm_sql.incremental.temporal import micros
from ivm_sql.project import Project

TABLES = """
CREATE TABLE events (id INT, at TIMESTAMP, kind STRING, amount INT) USING DELTA;
CREATE TABLE kinds (kind STRING, active BOOLEAN) USING DELTA;
"""

# A day boundary falls between the first refreshes, so current_date() moves too.
START = datetime(2026, 1, 1, 22, 40, tzinfo=UTC)

SPECS = [
    ViewSpec(
        "last_hour",
        "SELECT id, kind, amount FROM events "
        "WHERE at > current_timestamp() - INTERVAL 1 HOUR AND at <= current_timestamp()",
    ),
    # both bounds move: rows enter at the upper one (their own time) and leave at the lower
    ViewSpec(
        "window_totals",
        "SELECT kind, COUNT(*) AS n, SUM(amount) AS total FROM events "
        "WHERE at BETWEEN now() - INTERVAL 2 HOURS AND now() AND amount IS NOT NULL GROUP BY kind",
    ),
    ViewSpec(
        "kinds_today", "SELECT DISTINCT kind FROM events WHERE CAST(at AS DATE) = current_date()"
    ),
    ViewSpec(
        "active_recent",
        "SELECT e.id, e.kind, k.active FROM events e JOIN kinds k ON e.kind = k.kind "
        "WHERE e.at > now() - INTERVAL 30 MINUTES AND k.active",
    ),
    # over a temporal view: MIN/MAX per touched key of what the clock moves
    ViewSpec(
        "last_hour_by_kind",
        "SELECT kind, MAX(amount) AS top, COUNT(*) AS n FROM last_hour GROUP BY kind",
        reads=("last_hour",),
    ),
    # EXISTS recomputes the keys the clock's change touches
    ViewSpec(
        "kinds_bought_lately",
        "SELECT kind, active FROM kinds k WHERE EXISTS "
        "(SELECT 1 FROM events e WHERE e.kind = k.kind AND e.at > now() - INTERVAL 20 MINUTES)",
    ),
    # a filter over an aggregate: HAVING on the clock
    ViewSpec(
        "lively",
        "SELECT kind, MAX(at) AS latest FROM events GROUP BY kind "
        "HAVING MAX(at) > current_timestamp() - INTERVAL 45 MINUTES",
    ),
    # the clock in an outer join's ON: recomputed on every refresh, and said so
    ViewSpec(
        "flagged",
        "SELECT e.id, k.active FROM events e LEFT JOIN kinds k "
        "ON e.kind = k.kind AND e.at > now() - INTERVAL 1 HOUR",
    ),
]
EVERY_REFRESH = {"flagged"}


def at_time(spec: ViewSpec, now: datetime) -> ViewSpec:
    """The view's SELECT with the current time read as ``now``: what the oracle evaluates."""
    instant = f"timestamp_micros({micros(now)})"
    select = re.sub(r"current_timestamp\(\)|now\(\)", instant, spec.select)
    return ViewSpec(
        spec.name,
        select.replace("current_date()", f"CAST({instant} AS DATE)"),
        spec.columns,
        spec.reads,
    )


class RandomEvents:
    """Events scattered around the clock (NULL times and amounts, exact duplicates), and
    churn: events and kinds that come and go, kinds moved away and back."""

    KINDS = ("click", "view", "buy", None)

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.now = START
        self.churn = Churn(
            rng,
            [
                ChurnTable(
                    "events",
                    ("id", "at", "kind", "amount"),
                    (31, START, "ghost", 77),
                    self.new_event,
                    {"kind": "moved", "id": 99},
                ),
                ChurnTable(
                    "kinds",
                    ("kind", "active"),
                    ("ghost", True),
                    lambda: ("ghost", rng.random() < 0.5),
                    {"kind": "moved"},
                ),
            ],
        )

    def new_event(self) -> tuple:
        """An event no stored one equals (ids 31 and 32 are never used otherwise)."""
        _, at, kind, amount = self.event(self.now)
        return (self.rng.choice([31, 32]), at, self.rng.choice(["ghost", kind]), amount)

    def event(self, now: datetime) -> tuple:
        r = self.rng
        at = None if r.random() < 0.1 else now + timedelta(minutes=r.randint(-150, 150))
        return (
            r.randint(1, 30),
            at,
            r.choice(self.KINDS),
            None if r.random() < 0.1 else r.randint(-5, 50),
        )

    def statements(self, now: datetime, rows: int, current: dict[str, list[tuple]]) -> list[str]:
        r = self.rng
        self.now = now
        events = [self.event(now) for _ in range(rows)]
        events += r.sample(events, k=min(2, len(events)))  # duplicates in the same insert
        statements = [f"INSERT INTO events VALUES {values_clause(events)}"]
        moment = timestamp_sql(now + timedelta(minutes=r.randint(-90, 60)))
        statements += r.sample(
            [
                f"DELETE FROM events WHERE id % {r.randint(3, 6)} = 0",
                f"UPDATE events SET at = at + INTERVAL {r.randint(10, 70)} MINUTES WHERE kind = {sql_literal(r.choice(self.KINDS[:3]))}",
                f"UPDATE events SET amount = amount + 1 WHERE at < {moment}",
                f"UPDATE kinds SET active = NOT active WHERE kind = {sql_literal(r.choice(self.KINDS[:3]))}",
                f"DELETE FROM events WHERE at IS NULL OR at > {moment} + INTERVAL 80 MINUTES",
            ],
            k=r.randint(1, 3),
        )
        return churned(r, self.churn, current, statements)


def check(project: Project, now: datetime, label: str) -> None:
    failures = compare_views(
        project.spark, project.database, [at_time(s, now) for s in SPECS], label
    )
    assert not failures, "\n\n".join(failures)


@pytest.mark.parametrize("seed", SEEDS)
def test_temporal_filters_follow_the_clock_across_their_bounds(
    spark, tmp_project: MakeProject, seed: int
) -> None:
    """Rounds move the clock by 25, 0 and 85 minutes (rows cross a window's lower bound,
    reach their own time, and a day's end passes), each with random changes to the data.
    Every temporal view stays incremental; the outer join one is recomputed, saying why."""
    rng = random.Random(seed)
    project = Project.open(
        tmp_project(
            {
                "migrations/0001_tables.sql": TABLES,
                "ivm.yaml": INCREMENTAL_ONLY,
                "views/events.sql": views_file(SPECS),
            }
        ),
        spark=spark,
    )
    project.migrate()
    events = RandomEvents(rng)
    project.sql(
        f"INSERT INTO events VALUES {values_clause([events.event(START) for _ in range(25)])}"
    )
    project.sql(
        f"INSERT INTO kinds VALUES {values_clause([('click', True), ('view', False), ('buy', True)])}"
    )
    strategies = {plan.view.name: [s.strategy for s in plan.stages] for plan in project.plans()}
    assert all(
        TEMPORAL in strategies[s.name][-1]
        for s in SPECS
        if s.name not in EVERY_REFRESH | {"last_hour_by_kind"}
    )

    now = START
    project.refresh(now=now)
    check(project, now, "first refresh")
    for round_, (minutes, rows) in enumerate([(25, 4), (0, 3), (85, 4)], 1):
        now += timedelta(minutes=minutes)
        current = {t: project.sql(f"SELECT * FROM {t}").rows for t in ("events", "kinds")}
        statements = events.statements(now, rows, current) if rows else []
        apply_changes(project, statements)
        reports = {r.view.split(".")[-1]: r for r in project.refresh(now=now)}
        label = f"seed {seed}, round {round_} at {now:%H:%M}\n  changes:\n    " + ";\n    ".join(
            statements
        )
        assert {v for v, r in reports.items() if r.action == "recomputed"} <= EVERY_REFRESH, (
            label,
            {v: r.strategy for v, r in reports.items()},
        )
        assert reports["flagged"].reason == EVERY_REFRESH_REASON
        assert reports["last_hour"].now == now
        check(project, now, label)
    assert all(r.ok for r in project.verify()), [r for r in project.verify() if not r.ok]
    status = {s.view.split(".")[-1]: s for s in project.status()}
    assert status["window_totals"].now == now and status["last_hour_by_kind"].now == now


def test_temporal_view_without_changes_and_without_a_moving_clock_is_unchanged(
    spark, tmp_project: MakeProject
) -> None:
    """The clock is a source like the tables: a refresh at the same instant with no change
    runs nothing, and one an hour later with no change moves rows out of the window."""
    spec = SPECS[0]
    project = Project.open(
        tmp_project({"migrations/0001_tables.sql": TABLES, "views/v.sql": views_file([spec])}),
        spark=spark,
    )
    project.migrate()
    project.sql(
        f"INSERT INTO events VALUES {values_clause([(1, START - timedelta(minutes=30), 'buy', 3), (2, START - timedelta(minutes=90), 'buy', 4)])}"
    )
    project.refresh(now=START)
    assert project.sql("SELECT id FROM last_hour").rows == [(1,)]
    (report,) = project.refresh(now=START)
    assert report.action == "unchanged"
    (report,) = project.refresh(now=START + timedelta(hours=1))
    assert (report.action, report.rows_out) == ("incremental", 1)
    assert project.sql("SELECT id FROM last_hour").rows == []
