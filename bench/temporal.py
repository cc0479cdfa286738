"""Temporal filters: a refresh as the clock moves, against `refresh --full`, in one run.

Builds a throwaway project with an events table of N rows written in B appends, each a
slice of time (as a log or a stream lands in a table), and three views over a time window:
the last week's events (70% of the table), per-kind totals over two days, and the last
hour's events. Each
round moves the clock by a few minutes and appends a small batch of new events, then times
an incremental refresh against a --full refresh of the same state, and checks every view
with `verify` (its SELECT at the time the refresh recorded).

    .venv/bin/python bench/temporal.py --events 2000000 --appends 40 --rounds 3
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

from refresh_vs_full import timed  # bench/ is the script's folder

from ivm_sql import Project

VIEWS = """
CREATE VIEW last_week AS
SELECT id, kind, amount FROM events WHERE at > current_timestamp() - INTERVAL 7 DAYS;

CREATE VIEW two_day_totals AS
SELECT kind, COUNT(*) AS n, SUM(amount) AS total FROM events
WHERE at BETWEEN now() - INTERVAL 2 DAYS AND now() GROUP BY kind;

CREATE VIEW last_hour AS
SELECT id, kind FROM events WHERE at > now() - INTERVAL 1 HOUR;
"""
START = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
SPAN = timedelta(days=10)  # the events cover the ten days before START


def append(project: Project, first_id: int, rows: int, begin: datetime, end: datetime) -> None:
    """``rows`` events with ids from ``first_id``, spread evenly over [begin, end)."""
    seconds = (end - begin).total_seconds()
    project.sql(
        f"INSERT INTO events SELECT CAST(id AS INT), "
        f"timestamp_seconds({int(begin.timestamp())} + CAST((id - {first_id}) * {seconds / rows} AS BIGINT)), "
        f"element_at(array('click','view','buy','share'), CAST(id % 4 + 1 AS INT)), CAST(id % 50 AS INT) "
        f"FROM range({first_id}, {first_id + rows}) AS r(id)"
    )


def build(root: Path, events: int, appends: int) -> Project:
    (root / "views").mkdir()
    (root / "views" / "windows.sql").write_text(VIEWS)
    (root / "migrations").mkdir()
    (root / "migrations" / "0001_events.sql").write_text(
        "CREATE TABLE events (id INT, at TIMESTAMP, kind STRING, amount INT) USING DELTA;\n"
    )
    (root / "ivm.yaml").write_text("database: bench_temporal\n")
    project = Project.open(root)
    project.migrate()
    per_append, slice_ = events // appends, SPAN / appends
    for i in range(appends):
        begin = START - SPAN + i * slice_
        append(project, i * per_append, per_append, begin, begin + slice_)
    return project


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=2_000_000)
    parser.add_argument(
        "--appends",
        type=int,
        default=40,
        help="appends the events arrive in (one file or more each)",
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--minutes", type=int, default=10, help="clock advance per round")
    parser.add_argument("--new", type=int, default=1000, help="new events per round")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        project = build(Path(folder), args.events, args.appends)
        now = START
        project.refresh(now=now)
        project.refresh(now=now, full=True)  # warm both paths before measuring
        incremental, full = [], []
        next_id = args.events
        for _ in range(args.rounds):
            step = timedelta(minutes=args.minutes)
            append(project, next_id, args.new, now, now + step)
            next_id += args.new
            now += step
            reports, full_reports = [], []
            incremental.append(timed(lambda: reports.extend(project.refresh(now=now))))
            bad = [r.view for r in project.verify() if not r.ok]
            assert not bad, f"views differ from their SELECT at {now}: {bad}"
            full.append(timed(lambda: full_reports.extend(project.refresh(now=now, full=True))))
            print(
                f"  at {now:%H:%M}: incremental {incremental[-1]:.2f}s, --full {full[-1]:.2f}s; per view "
                + ", ".join(
                    f"{r.view.split('.')[-1]} {r.seconds:.2f}s ({r.action}, {r.rows_out} rows) against {f.seconds:.2f}s"
                    for r, f in zip(reports, full_reports)
                )
            )
        inc, ful = statistics.median(incremental), statistics.median(full)
        print(
            f"events={args.events} appends={args.appends} rounds={args.rounds} clock +{args.minutes} min "
            f"and {args.new} new events per round"
        )
        print(
            f"incremental refresh: median {inc:.2f}s   --full: median {ful:.2f}s   ratio full/incremental: {ful / inc:.2f}x"
        )


if __name__ == "__main__":
    main()
