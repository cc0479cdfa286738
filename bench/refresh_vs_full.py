"""Incremental refresh vs full recompute, measured as a ratio in one run.

Builds a throwaway project with an orders table of N rows (plus customers and products),
the demo's views, refreshes once, then for each round changes a small batch of orders and
times an incremental refresh against a --full refresh of the same state.

    .venv/bin/python bench/refresh_vs_full.py --orders 1000000 --changes 100 --rounds 3
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from ivm_sql import Project
from ivm_sql.runtime import log_events

REPO = Path(__file__).resolve().parent.parent


def build(root: Path, orders: int, database: str = "bench") -> Project:
    shutil.copytree(REPO / "views", root / "views")
    (root / "migrations").mkdir()
    shutil.copy(REPO / "migrations" / "0001_create_shop.sql", root / "migrations")
    (root / "ivm.yaml").write_text(f"database: {database}\n")
    project = Project.open(root)
    project.migrate()
    project.sql(
        "INSERT INTO customers SELECT CAST(id AS INT), concat('c', id), element_at(array('UK','US','NL','FR'), CAST(id % 4 + 1 AS INT)) FROM range(1, 10001) AS r(id)"
    )
    project.sql(
        "INSERT INTO products SELECT CAST(id AS INT), concat('p', id), element_at(array('hardware','software','books'), CAST(id % 3 + 1 AS INT)), CAST(id % 97 + 1 AS DECIMAL(10,2)) FROM range(1, 1001) AS r(id)"
    )
    project.sql(
        f"INSERT INTO orders SELECT CAST(id AS INT), CAST(id % 10000 + 1 AS INT), CAST(id % 1000 + 1 AS INT), CAST(id % 5 + 1 AS INT), "
        f"element_at(array('shipped','pending','cancelled'), CAST(id % 3 + 1 AS INT)) FROM range(1, {orders + 1}) AS r(id)"
    )
    return project


def timed(action) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


class TimedAppends:
    """Times each refresh's append to the refresh event log (``runtime.log_events.append``)."""

    def __init__(self):
        self.seconds: list[float] = []
        self._append = log_events.append

    def __enter__(self):
        def append(*args, **kwargs):
            self.seconds.append(timed(lambda: self._append(*args, **kwargs)))

        log_events.append = append
        return self

    def __exit__(self, *_):
        log_events.append = self._append


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--orders", type=int, default=1_000_000)
    parser.add_argument("--changes", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder, TimedAppends() as appends:
        project = build(Path(folder), args.orders)
        project.refresh()
        project.refresh(full=True)  # warm both paths before measuring
        incremental, full, unchanged = [], [], []
        for round_ in range(args.rounds):
            start = round_ * args.changes + 1
            project.sql(
                f"UPDATE orders SET quantity = quantity + 1, status = 'shipped' WHERE id BETWEEN {start} AND {start + args.changes - 1}"
            )
            incremental.append(timed(project.refresh))
            unchanged.append(timed(project.refresh))
            full.append(timed(lambda: project.refresh(full=True)))
            bad = [r.view for r in project.verify() if not r.ok]
            assert not bad, f"views differ from recompute: {bad}"
        start = args.rounds * args.changes + 1
        project.sql(
            f"UPDATE orders SET quantity = quantity + 1 WHERE id BETWEEN {start} AND {start + args.changes - 1}"
        )
        per_view = {r.view: r for r in project.refresh()}
        per_view_full = {r.view: r.seconds for r in project.refresh(full=True)}
        for view, report in per_view.items():
            print(
                f"  {view:<28} refresh {report.seconds:6.2f}s   full {per_view_full[view]:6.2f}s   ({report.strategy})"
            )
        inc, ful, unc = (statistics.median(x) for x in (incremental, full, unchanged))
        print(f"orders={args.orders} changed per round={args.changes} rounds={args.rounds}")
        print(
            f"incremental refresh: median {inc:.2f}s   full recompute: median {ful:.2f}s   ratio full/incremental: {ful / inc:.2f}x"
        )
        print(f"refresh with no changes: median {unc:.2f}s")
        print(
            f"refresh event log: {len(appends.seconds)} appends, median {statistics.median(appends.seconds):.2f}s"
        )


if __name__ == "__main__":
    main()
