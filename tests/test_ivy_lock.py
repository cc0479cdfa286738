"""The machine-wide lock around JVM starts, which keeps two first starts from racing in Ivy.

Two real processes, no JVM: one holds the lock, the other must wait for it.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from ivm_sql.session import ivy_lock

HOLD = 1.5  # seconds the other process holds the lock


def hold_lock(path: Path, seconds: float) -> subprocess.Popen:
    """Another process holding the lock for ``seconds``; returns once it holds it."""
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from pathlib import Path; from ivm_sql.session import ivy_lock\n"
            f"with ivy_lock(Path({str(path)!r})):\n    print('held', flush=True); time.sleep({seconds})",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    return holder


def test_a_second_start_waits_for_the_first(tmp_path: Path) -> None:
    lock = tmp_path / "cache" / "ivy.lock"
    holder = hold_lock(lock, HOLD)
    started = time.monotonic()
    with ivy_lock(lock):
        waited = time.monotonic() - started
    holder.wait(timeout=10)
    assert waited > HOLD / 2  # it got the lock only once the holder let go


def test_a_killed_holder_releases_the_lock(tmp_path: Path) -> None:
    lock = tmp_path / "ivy.lock"
    holder = hold_lock(lock, 60)
    holder.kill()
    holder.wait(timeout=10)
    started = time.monotonic()
    with ivy_lock(lock):
        assert time.monotonic() - started < 30  # not the 60 s the holder would have held it
