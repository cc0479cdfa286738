"""Wall time of `ivm` commands without and with the project's Spark Connect server.

Each command runs as its own process, as a user runs it, timed from start to exit. The demo
project is copied to a temporary folder, migrated and refreshed once, then each command is
timed ``--runs`` times with Spark embedded (each process starts its own JVM), then with the
server up (``ivm server start``, one untimed warm-up command), and the medians compared.

    .venv/bin/python bench/server.py --runs 3
"""

from __future__ import annotations

import argparse
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
    started = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-m", "ivm_sql.cli", "-p", str(root), *args], capture_output=True, text=True,
        env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"},
    )
    elapsed = time.perf_counter() - started
    if result.returncode != 0:
        sys.exit(f"ivm {' '.join(args)} failed:\n{result.stderr}")
    return elapsed


def medians(root: Path, runs: int) -> dict[str, float]:
    return {args[0]: statistics.median(ivm(root, *args) for _ in range(runs)) for args in COMMANDS}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="timed runs of each command, each way")
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
        finally:
            ivm(root, "server", "stop")
    print(f"server start: {start:.1f} s (once)")
    print(f"{'command':<16} {'embedded':>9} {'server':>8} {'ratio':>7}   (median of {args.runs} runs, wall time of the ivm process)")
    for name in embedded:
        label = "refresh (none)" if name == "refresh" else name
        print(f"{label:<16} {embedded[name]:>8.2f}s {served[name]:>7.2f}s {embedded[name] / served[name]:>6.1f}x")


if __name__ == "__main__":
    main()
