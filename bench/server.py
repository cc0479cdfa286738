"""Wall time of `ivm` commands without and with the project's Spark Connect server.

Each command runs as its own process, as a user runs it, timed from start to exit. The demo
project is copied to a temporary folder, migrated and refreshed once, then each command is
timed ``--runs`` times with Spark embedded (each process starts its own JVM), then with the
server up (``ivm server start``, one untimed warm-up command), and the medians compared.
Then, with the server still up, ``--changes`` times issue 23's demo target: one order
changed (an ``UPDATE``), then ``ivm refresh`` of the 4 views, each time its wall clock and its
work (the refresh's own per-view seconds, from ``--json``).

    .venv/bin/python bench/server.py --runs 3 --changes 5
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
COMMANDS = (("status",), ("refresh",), ("compile",))  # the refresh finds nothing to do


def ivm(root: Path, *args: str) -> float:
    """Seconds the `ivm` process took, start to exit; it must succeed."""
    return ivm_output(root, *args)[0]


def ivm_output(root: Path, *args: str) -> tuple[float, str]:
    """``ivm``'s seconds, and what it printed."""
    started = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-m", "ivm_sql.cli", "-p", str(root), *args], capture_output=True, text=True,
        env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"},
    )
    elapsed = time.perf_counter() - started
    if result.returncode != 0:
        sys.exit(f"ivm {' '.join(args)} failed:\n{result.stderr}")
    return elapsed, result.stdout


def changed_order_refreshes(root: Path, changes: int) -> list[tuple[float, float]]:
    """(wall seconds, seconds of work) of ``ivm refresh`` after each one-order UPDATE."""
    timings = []
    for _ in range(changes):
        ivm(root, "sql", "UPDATE orders SET quantity = quantity + 1 WHERE id = 102")
        wall, printed = ivm_output(root, "refresh", "--json")
        views = json.loads(printed)["views"]
        timings.append((wall, sum(view["seconds"] for view in views)))
    return timings


def medians(root: Path, runs: int) -> dict[str, float]:
    return {args[0]: statistics.median(ivm(root, *args) for _ in range(runs)) for args in COMMANDS}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="timed runs of each command, each way")
    parser.add_argument("--changes", type=int, default=5, help="refreshes after a one-order change, server up")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        shutil.copy(REPO / "ivm.yaml", root)
        for name in ("views", "migrations"):
            shutil.copytree(REPO / name, root / name)
        ivm(root, "migrate")
        ivm(root, "refresh")
        embedded = medians(root, args.runs)
        start = ivm(root, "server", "start")
        try:
            ivm(root, "status")  # the server's first query of these tables
            served = medians(root, args.runs)
            changed = changed_order_refreshes(root, args.changes)
        finally:
            ivm(root, "server", "stop")
    print(f"server start: {start:.1f} s (once)")
    print(f"{'command':<16} {'embedded':>9} {'server':>8} {'ratio':>7}   (median of {args.runs} runs, wall time of the ivm process)")
    for name in embedded:
        label = "refresh (none)" if name == "refresh" else name
        print(f"{label:<16} {embedded[name]:>8.2f}s {served[name]:>7.2f}s {embedded[name] / served[name]:>6.1f}x")
    print("refresh after one changed order, server up (target: under 1.5 s of work, 2.5 s wall):")
    for number, (wall, work) in enumerate(changed, 1):
        print(f"  {number}: {work:.2f} s of work, {wall:.2f} s wall")


if __name__ == "__main__":
    main()
