"""Delta's snapshot state of the tables a refresh commits to, computed beside the refresh
instead of inside its commits (issue 46: off the path).

Every commit ivm makes carries a txn version (``storage.concurrent``), which Delta checks
against the transactions of the table's snapshot: its state, a Spark job over the table's
log (0.1-0.45 s on this machine), which Delta then keeps with the snapshot until the next
commit. The server computes it between commands (``host.WarmSnapshots``); a refresh in any
other process (the embedded command, ``Project.refresh`` in a notebook or a test) paid it
inside each stage's commit, one job per written stage on its path. Here a thread of the
refresh's own computes it, table by table, as the refresh decides to commit to each: while
it computes the stage's change, or runs the statement that writes a view at once. A commit
that comes first computes it itself (Delta computes a snapshot's state once, whoever asks;
the other waits for it), so nothing here is needed for a right result, only for a short path.

Only the tables a refresh has decided to commit to: a stage a view's one statement reads
through (``physical.one_statement``) is left behind uncommitted, and its state would take a
core from the refresh for nothing. Asked for as the refresh started, from the records alone,
the states were those of every stage over a base table that moved: in a TPC-H SF 1 round
with ten views written at once, 17 of them were stages those views left behind
(docs/performance.md).

A batch appended to a trace through Delta's transaction API (``storage.appends``) reads
none of the state, nor does the event log's append: the refresh does not ask for those.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

from py4j.protocol import Py4JError
from pyspark.errors import PySparkException

from ivm_sql.storage.delta_log import compute_state


class SnapshotStates:
    """Computes, in one thread beside the refresh, the state of each table it is asked for,
    once; asked from the refresh's worker threads."""

    def __init__(self, spark):
        self._spark = spark
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ivm-snapshot-state")
        self._asked: set[str] = set()
        self._lock = threading.Lock()

    def want(self, *tables: str) -> None:
        """Compute each table's state, in this order, unless it was asked for before."""
        with self._lock:
            new = [t for t in dict.fromkeys(tables) if t not in self._asked]
            self._asked.update(new)
        for table in new:
            try:
                self._pool.submit(_compute, self._spark, table)
            except RuntimeError:  # closed: the refresh is ending, its commit computes it
                return

    def close(self) -> None:
        """Drop what has not started; wait for what has (one statement at most), so that no
        job of this refresh outlives it."""
        self._pool.shutdown(wait=True, cancel_futures=True)


def _compute(spark, table: str) -> None:
    try:
        compute_state(spark, table)
    except (PySparkException, Py4JError):  # gone, or the session stopping: the commit computes it
        pass
