"""Counting the Spark jobs an action runs, under a job group of the test's own.

A job group is a property of the thread, kept by the session from test to test. A probe
that leaves its group set makes every later refresh on that thread "a caller that groups
its jobs", whose job count ``runtime.tally`` cannot know; so the probe unsets it after."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

GROUP = "spark.jobGroup.id"


@contextmanager
def job_group(spark, group: str) -> Iterator[Callable[[str], list[int]]]:
    """Runs the body with ``group`` as the thread's job group (the body may switch to
    another, ``context.setJobGroup``), then unsets it. Yields ``jobs(group)``: the ids of
    the jobs a group ran."""
    context = spark.sparkContext
    context.setJobGroup(group, group)
    try:
        yield lambda name: list(context.statusTracker().getJobIdsForGroup(name))
    finally:
        context.setLocalProperty(GROUP, None)
        context.setLocalProperty("spark.job.description", None)
