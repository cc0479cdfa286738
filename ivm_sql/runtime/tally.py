"""What each stage of a refresh costs in Spark's own units: statements sent, jobs run.

On small and medium data a refresh pays a fixed toll per statement (planning, Delta's
snapshot and commit) and per Spark job, whatever the rows; seconds alone do not say which
toll a stage paid. So each stage's statements (SQL texts sent to Spark, counted as
``spark.sql`` is called) and jobs (Spark's status tracker, by a job group per stage) are
counted as the refresh runs. Counting costs no Spark job: a job group is a thread-local
property, and the tracker reads the driver's memory.

Jobs are counted only where the caller set no job group of its own: a caller that groups
its jobs (a test that asserts a refresh ran none) keeps every job in its group, and the
count is then unknown (None). A Spark Connect session has no status tracker: unknown too.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

GROUP = "spark.jobGroup.id"  # the local property a job group is kept in
_refreshes = itertools.count()  # numbers the refreshes of this process, for unique group names


@dataclass
class Cost:
    """Statements and jobs of one stage (jobs None: not counted), its seconds, and the
    seconds of its phases (``Tally.phase``: "plan", "write")."""

    statements: int = 0
    jobs: int | None = None
    seconds: float = 0.0
    phases: dict[str, float] = field(default_factory=dict)


class Tally:
    """Counts one refresh's statements and jobs, stage by stage, in each thread that runs
    stages (``runtime.workers``)."""

    def __init__(self, spark):
        self._context = _context(spark)
        self._refresh = next(_refreshes)
        self._local = threading.local()  # the stage this thread is running: its Cost

    def session(self, spark) -> CountedSession:
        """``spark``, its ``sql`` calls counted as the statements of the stage running."""
        return CountedSession(spark, self)

    def counted(self) -> None:
        current = getattr(self._local, "cost", None)
        if current is not None:
            current.statements += 1

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Adds the seconds spent inside to the running stage's phase ``name``."""
        started = time.perf_counter()
        try:
            yield
        finally:
            current = getattr(self._local, "cost", None)
            if current is not None:
                spent = time.perf_counter() - started
                current.phases[name] = current.phases.get(name, 0.0) + spent

    @contextmanager
    def stage(self, table: str) -> Iterator[Cost]:
        """Counts what runs inside, in this thread, as ``table``'s cost."""
        cost, outer = Cost(), getattr(self._local, "cost", None)
        self._local.cost = cost
        started = time.perf_counter()
        context = self._context
        group = None
        if context is not None and not context.getLocalProperty(GROUP):
            group = f"ivm-refresh-{self._refresh}-{table}"
            context.setJobGroup(group, f"ivm refresh of {table}")
        try:
            yield cost
        finally:
            cost.seconds = time.perf_counter() - started
            self._local.cost = outer
            if group is not None:
                cost.jobs = len(context.statusTracker().getJobIdsForGroup(group))
                context.setLocalProperty(GROUP, None)
                context.setLocalProperty("spark.job.description", None)


class CountedSession:
    """A Spark session whose ``sql`` calls are counted by a ``Tally``; all else is the session's."""

    def __init__(self, spark, tally: Tally):
        self._spark = spark
        self._tally = tally

    def sql(self, *args, **kwargs):
        self._tally.counted()
        return self._spark.sql(*args, **kwargs)

    def __getattr__(self, name: str):
        return getattr(self._spark, name)


def _context(spark):
    """The session's SparkContext, or None where there is none to ask (Spark Connect)."""
    if not hasattr(spark, "_jsparkSession"):
        return None
    return spark.sparkContext
