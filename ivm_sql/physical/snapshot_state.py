"""Delta's snapshot state of the tables a refresh will commit to, computed beside the refresh
instead of inside its commits (issue 46: off the path).

Every commit ivm makes carries a txn version (``storage.concurrent``), which Delta checks
against the transactions of the table's snapshot: its state, a Spark job over the table's
log (0.1-0.45 s on this machine), which Delta then keeps with the snapshot until the next
commit. The server computes it between commands (``host.WarmSnapshots``); a refresh in any
other process (the embedded command, ``Project.refresh`` in a notebook or a test) paid it
inside each stage's commit, one job per written stage on its path. Here a thread of the
refresh's own asks for it as the refresh starts, table by table in the order the refresh
commits to them, while the refresh reads and computes the changes. A commit that comes
first computes it itself (Delta computes a snapshot's state once, whoever asks; the other
waits for it), so nothing here is needed for a right result, only for a short path.

A batch appended to a trace through Delta's transaction API (``storage.appends``) reads
none of the state, nor does the event log's append: those tables are left out.
"""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor

from py4j.protocol import Py4JError
from pyspark.errors import PySparkException

from ivm_sql.storage.delta_log import compute_state


def will_commit(record: dict, current: dict[str, int]) -> bool:
    """Whether a stage whose newest record is ``record`` will be committed to by a refresh
    that pinned its base tables at ``current``: one of the base tables below it moved (the
    change is applied, or the record alone advanced: a commit either way)."""
    base = record.get("base") or {}
    return not base or any(
        current.get(table, version) != version for table, version in base.items()
    )


class SnapshotStates:
    """Computes, in one thread beside the refresh, the state of each table it is given."""

    def __init__(self, spark, tables: Iterable[str]):
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ivm-snapshot-state")
        for table in tables:
            self._pool.submit(_compute, spark, table)

    def close(self) -> None:
        """Drop what has not started; wait for what has (one statement at most), so that no
        job of this refresh outlives it."""
        self._pool.shutdown(wait=True, cancel_futures=True)


def _compute(spark, table: str) -> None:
    try:
        compute_state(spark, table)
    except (PySparkException, Py4JError):  # gone, or the session stopping: the commit computes it
        pass
