"""Views refreshed at the same time (``runtime.workers``): the order the scheduler keeps, on
plain Python work (the refreshes themselves run with workers in every Spark test, as the
default fits the machine; ``test_parallel_refresh.py`` checks them against their SELECTs)."""

from __future__ import annotations

import threading
import time

import pytest

from ivm_sql.runtime.workers import MOST, default_workers, in_dependency_order


class Recorder:
    """Work that notes when each plan starts and ends, and how many run at once."""

    def __init__(self, seconds: dict[str, float] | None = None, fail: str | None = None):
        self.seconds = seconds or {}
        self.fail = fail
        self.events: list[tuple[str, str]] = []
        self.running = 0
        self.most = 0
        self.threads: set[str] = set()
        self.lock = threading.Lock()

    def __call__(self, plan: str) -> str:
        with self.lock:
            self.events.append(("start", plan))
            self.running += 1
            self.most = max(self.most, self.running)
            self.threads.add(threading.current_thread().name)
        time.sleep(self.seconds.get(plan, 0.05))
        with self.lock:
            self.running -= 1
            self.events.append(("end", plan))
        if plan == self.fail:
            raise ValueError(f"{plan} failed")
        return plan.upper()

    def position(self, kind: str, plan: str) -> int:
        return self.events.index((kind, plan))


GRAPH = {"a": [], "b": [], "c": ["a"], "d": ["c", "b"], "e": []}


def depends(plan: str) -> list[str]:
    return GRAPH[plan]


def test_each_plan_starts_after_the_plans_it_reads_end_and_results_keep_the_plans_order() -> None:
    work = Recorder({"a": 0.2, "b": 0.05})
    done: list[str] = []
    results = in_dependency_order(list(GRAPH), depends, work, workers=2, done=done.append)
    assert results == ["A", "B", "C", "D", "E"]
    assert sorted(done) == results  # each reported once, as it ended
    for plan, inputs in GRAPH.items():
        for other in inputs:
            assert work.position("end", other) < work.position("start", plan), (
                plan,
                other,
                work.events,
            )
    assert work.most == 2 and len(work.threads) == 2
    # b ended before a: c waited for a, while e, which reads nothing, did not wait for a
    assert work.position("start", "e") < work.position("end", "a")


def test_at_most_the_workers_run_at_once() -> None:
    work = Recorder()
    in_dependency_order([f"v{i}" for i in range(8)], lambda plan: [], work, workers=3)
    assert work.most == 3


def test_after_a_failure_no_plan_starts_the_running_ones_end_and_the_failure_is_raised() -> None:
    work = Recorder({"a": 0.05, "b": 0.3}, fail="a")
    done: list[str] = []
    with pytest.raises(ValueError, match="a failed"):
        in_dependency_order(list(GRAPH), depends, work, workers=2, done=done.append)
    started = {plan for kind, plan in work.events if kind == "start"}
    assert started == {"a", "b"}  # c reads a; d and e were not started after a failed
    assert ("end", "b") in work.events and done == ["B"]


def test_one_worker_runs_every_plan_in_the_callers_thread_in_order() -> None:
    work = Recorder()
    assert in_dependency_order(list(GRAPH), depends, work, workers=1) == ["A", "B", "C", "D", "E"]
    assert work.threads == {threading.current_thread().name}
    assert [plan for kind, plan in work.events if kind == "start"] == list(GRAPH)


def test_the_default_fits_the_machine() -> None:
    assert default_workers(1) == 2
    assert default_workers(2) == 3
    assert default_workers(64) == MOST


def test_an_interruption_is_raised_at_once_not_after_the_running_plans() -> None:
    """Ctrl-C (or a watch's second signal) reaches the calling thread: it must not wait for
    a view still running, whose stages each commit alone (the workers are daemon threads)."""
    work = Recorder({"slow": 2.0, "fast": 0.05})

    def interrupted(result: str) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        in_dependency_order(["slow", "fast"], lambda plan: [], work, workers=2, done=interrupted)
    assert ("end", "fast") in work.events and ("end", "slow") not in work.events
