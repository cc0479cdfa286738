"""Delta's state of a table's latest snapshot, computed in a thread of its own before a commit needs it.

Every commit ivm makes to a stage table or to the refresh event log is idempotent
(``storage.concurrent``), and Delta checks an idempotent commit against the transactions of
the table's snapshot state: a Spark job over the table's log that Delta computes on first
use of each version (on this 2-core machine about 0.8 s of a demo view's 1.2 s commit). A
MERGE needs that state anyway, to list the files it reads, and so does an overwrite, to
list the files it removes. Delta keeps the state with the snapshot until the next commit
and computes it once, whoever asks first: asked here in a thread of its own, it is ready,
or being computed, when the commit comes, and a state not computed here for any reason is
computed by the commit that needs it. Nothing here is needed for a right result.

Two callers:

- a refresh (``runtime.refresh``) asks for the state of each table it is about to write as
  soon as it has decided to: the state is computed while the stage computes its change
  (reads its sources' change data feeds, joins them), instead of after it; and with the
  first table written, for the event log's, which the refresh appends to last;
- the server (``host``) asks, after each command, for the state of every table the command
  wrote, which the next command's commits then find computed.

A state is computed in the asking thread's job group (``runtime.tally`` counts a stage's jobs
by its group): computed ahead or on the commit's path, it is the same job, counted once in
the same place. A table that has a newer version by the time its turn comes is passed over:
its old state can no longer serve a commit.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable

from py4j.protocol import Py4JError
from pyspark.errors import PySparkException

from ivm_sql.errors import IvmError
from ivm_sql.storage.delta_log import compute_state

GROUP = "spark.jobGroup.id"  # the local property Spark keeps a thread's job group in
_DONE = None  # the request that ends the thread


class WarmStates:
    """Computes, one table at a time in a thread started on the first request, the state of
    the tables asked for, in a session of its own (a new one of ``spark``'s) whose job group
    it sets per request. ``latest(table)``: the table's latest version; ``tag``: a job tag
    on every job it runs."""

    def __init__(self, spark, latest: Callable[[str], int], tag: str | None = None):
        self._spark = spark
        self._latest = latest
        self._tag = tag
        self._waiting: queue.Queue[tuple[str, int, str | None] | None] = queue.Queue()
        self._computed: dict[str, int] = {}  # table -> the version whose state was computed
        self._thread: threading.Thread | None = None
        self._start = threading.Lock()

    def ask(self, table: str, version: int, group: str | None = None) -> None:
        """Compute ``table``'s state at ``version`` (if still its latest), in job group ``group``."""
        if self._computed.get(table) == version:
            return
        with self._start:
            if self._thread is None:
                self._thread = threading.Thread(target=self._compute, name="ivm-warm", daemon=True)
                self._thread.start()
        self._waiting.put((table, version, group))

    @property
    def computed(self) -> dict[str, int]:
        """Each table whose state was computed here, and at which version."""
        return dict(self._computed)

    def ask_all(self, versions: dict[str, int]) -> None:
        """``ask`` for each table at its version."""
        for table, version in versions.items():
            self.ask(table, version)

    def wait(self) -> None:
        """Until every state asked for is computed (or passed over)."""
        self._waiting.join()

    def close(self) -> None:
        """Drop the requests not begun, let the one running end, and end the thread (asked
        for nothing since)."""
        while True:
            try:
                self._waiting.get_nowait()
            except queue.Empty:
                break
            self._waiting.task_done()
        if self._thread is not None:
            self._waiting.put(_DONE)
            self._thread.join()

    def _compute(self) -> None:
        session = self._spark.newSession()  # its settings and job group are its own
        context = session.sparkContext
        if self._tag is not None:
            context.addJobTag(self._tag)  # a tag is the thread's own
        while (request := self._waiting.get()) is not _DONE:
            table, version, group = request
            try:
                if self._computed.get(table) != version and self._latest(table) == version:
                    context.setLocalProperty(GROUP, group)
                    compute_state(session, table)
                    self._computed[table] = version
            except (PySparkException, Py4JError, IvmError, OSError):  # dropped, or Spark stopping
                pass
            finally:
                self._waiting.task_done()
        self._waiting.task_done()
