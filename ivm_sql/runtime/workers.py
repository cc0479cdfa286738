"""Views that do not depend on each other refresh at the same time, on a few threads.

Most of a small refresh statement's time is the driver's: parsing and analysing it, Delta's
snapshot and commit, generating code. A Spark driver plans one statement per thread, so on
one thread the executors wait while the driver plans, and the driver waits while they run.
Two views that read no view of each other's can be refreshed at once, each by a worker
thread with its own session (its own settings, temporary views and commit record: see
``storage.concurrent.own_session``) and its own scheduler pool, so one view's planning
overlaps another's execution. A view starts once every view it reads is refreshed: the
chain rule (DBSP, Budiu et al., Theorem 3.3) needs a stage's inputs brought to their new
versions before its change is computed, and nothing else orders two views.

Nothing else changes: each stage commits alone, as before (a killed refresh leaves every
stage at a version it recorded), and reports come back in the plans' order.
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable, Sequence
from typing import TypeVar

from pyspark import SparkContext

from ivm_sql.storage.concurrent import own_session

Plan = TypeVar("Plan")
Result = TypeVar("Result")

POOL = "spark.scheduler.pool"  # the local property that names a thread's FAIR scheduler pool
MOST = 4  # a default never above this: each worker holds a session and its cached changes


def worker_session(spark):
    """A session of its own for the worker thread calling, its jobs in a scheduler pool of
    its own (the thread's name)."""
    spark.sparkContext.setLocalProperty(POOL, threading.current_thread().name)
    return own_session(spark)


def default_workers(cores: int | None = None) -> int:
    """Workers for a machine of ``cores`` cores: one more than the cores, so a core is never
    idle while a worker plans, up to MOST."""
    return max(1, min(MOST, (cores or os.cpu_count() or 1) + 1))


def in_dependency_order(
    plans: Sequence[Plan],
    depends_on: Callable[[Plan], Sequence[Plan]],
    work: Callable[[Plan], Result],
    workers: int,
    done: Callable[[Result], None] | None = None,
) -> list[Result]:
    """``work(plan)`` for every plan, at most ``workers`` at a time, each once the plans it
    depends on (among ``plans``) are done; ``done(result)`` in this thread as each ends.
    The results come back in the order of ``plans``. After a failure no plan starts; the
    ones running finish, and the first failure is raised.

    The workers are daemon threads: when this thread is interrupted (Ctrl-C, a watch's
    second signal), the interruption is raised at once, and the process may end without
    waiting for the views still running. Each stage commits alone, so a view cut short is
    left at a version it recorded, as after a kill."""
    if workers <= 1:
        results = []
        for plan in plans:
            results.append(work(plan))
            if done is not None:
                done(results[-1])
        return results
    work = _inheriting(work)
    tasks: queue.Queue = queue.Queue()
    ended: queue.Queue = queue.Queue()

    def worker() -> None:
        while (plan := tasks.get()) is not None:
            try:
                ended.put((plan, work(plan), None))
            except BaseException as error:
                ended.put((plan, None, error))

    threads = [
        threading.Thread(target=worker, name=f"ivm-refresh-{n}", daemon=True)
        for n in range(workers)
    ]
    for thread in threads:
        thread.start()
    waiting, results, finished, running = list(plans), {}, set(), 0
    failure: BaseException | None = None
    try:
        while waiting or running:
            for plan in [
                p for p in waiting if failure is None and _ready(p, plans, depends_on, finished)
            ]:
                if running >= workers:  # none waits in the queue: after a failure, none starts
                    break
                waiting.remove(plan)
                tasks.put(plan)
                running += 1
            if not running:
                break
            plan, result, error = ended.get()
            running -= 1
            if error is not None:
                failure = failure or error
                continue
            results[id(plan)] = result
            finished.add(id(plan))
            if done is not None:
                done(result)
    finally:
        for _ in threads:
            tasks.put(None)  # each worker ends after the plan it is on
    if failure is not None:
        raise failure
    return [results[id(plan)] for plan in plans]


def _inheriting(work: Callable[[Plan], Result]) -> Callable[[Plan], Result]:
    """``work``, run in a worker thread with the calling thread's Spark local properties (its
    job group, say), each call with a copy of its own: a worker that sets its pool or job
    group sets it for itself alone."""
    context = SparkContext._active_spark_context
    if context is None:
        return work
    properties = context._jsc.sc().getLocalProperties().clone()

    def inheriting(plan: Plan) -> Result:
        context._jsc.sc().setLocalProperties(properties.clone())
        return work(plan)

    return inheriting


def _ready(
    plan: Plan,
    plans: Sequence[Plan],
    depends_on: Callable[[Plan], Sequence[Plan]],
    finished: set[int],
) -> bool:
    return all(
        id(other) in finished for other in depends_on(plan) if any(other is p for p in plans)
    )
