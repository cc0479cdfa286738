"""`ivm refresh --watch`: refresh whenever a source changes, until stopped.

Between refreshes only the sources' Delta logs are read (``DeltaLog.latest_version``):
listing a ``_delta_log`` folder runs no Spark job, so a watch that finds nothing to do
costs a directory listing per source per interval. (Over Spark Connect, a table on storage
this machine cannot read is the exception: its log comes from ``DESCRIBE HISTORY``, a
round trip to the server, as for every other read of it: ``delta_log.HistoryFolder``.) A refresh pins one version per source;
the next poll compares each source's current version with the pinned one, so a commit
that lands while a refresh runs is refreshed in the next round, never missed.

The clock is a source too (``incremental.temporal``: its versions are the times of
refreshes), one that moves all the time. A view whose filter reads the current time is
refreshed when ``clock_every`` has passed since the last refresh with no source changed, so
rows enter and leave its window on time, not only at the next source change. That refresh
reads only the rows whose bound the clock passed.

Stopping: a first SIGINT or SIGTERM lets the refresh in progress finish and ends the watch
(exit code 0); a second abandons that refresh (its Spark jobs cancelled, exit code 130). An
abandoned refresh leaves every view consistent, as any refresh stopped at any point does:
each table records the versions it reflects in the commit that changes it, and the next
refresh finishes the work.
"""

from __future__ import annotations

import logging
import re
import signal
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import FrameType

from ivm_sql.errors import IvmError
from ivm_sql.runtime.refresh import ViewReport

INTERVAL = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)\s*$")
UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
DEFAULT_EVERY = "10s"
DEFAULT_CLOCK_EVERY = "1m"
CANCEL_SECONDS = 10.0  # how long an abandoning watch waits for its Spark jobs' cancellation

# The sources' versions a refresh brought its views up to: table -> version.
Pinned = dict[str, int]


def parse_interval(text: str, option: str = "--every") -> float:
    """Seconds in an interval written with its unit: ``500ms``, ``10s``, ``2m``, ``1h``.

    >>> parse_interval("500ms"), parse_interval("10s"), parse_interval("2m")
    (0.5, 10.0, 120.0)
    """
    match = INTERVAL.match(text)
    seconds = float(match.group(1)) * UNIT_SECONDS[match.group(2)] if match else 0.0
    if seconds <= 0:
        raise IvmError(
            f"{option} {text!r} is not an interval",
            hint="write a positive number with its unit: 500ms, 10s, 2m or 1h",
        )
    return seconds


def parse_clock_interval(text: str) -> float | None:
    """``--clock-every``: an interval, or ``off`` (None: the clock alone starts no refresh)."""
    return None if text.strip().lower() == "off" else parse_interval(text, "--clock-every")


@dataclass(frozen=True)
class Round:
    """One refresh of a watch."""

    number: int  # from 1
    reports: list[ViewReport]
    # source -> (version refreshed before, version now); empty in the first round, which
    # brings the views up to date with whatever happened before the watch
    changed: dict[str, tuple[int, int]] = field(default_factory=dict)
    seconds: float = 0.0  # the refresh's wall clock, compiling and pinning included
    at: datetime = field(default_factory=lambda: datetime.now(UTC))  # when it ended
    clock: bool = False  # started by the clock alone: a view reads it, and clock_every passed


def changed_sources(pinned: Pinned, current: Pinned) -> dict[str, tuple[int, int]]:
    """The sources whose version moved since the refresh that pinned ``pinned``."""
    return {
        table: (pinned[table], version)
        for table, version in current.items()
        if version != pinned.get(table)
    }


def rounds(
    refresh: Callable[[], tuple[list[ViewReport], Pinned]],
    current: Callable[[Iterable[str]], Pinned],
    every: float,
    until_idle: bool = False,
    stop: threading.Event | None = None,
    clock_every: float | None = None,
) -> Iterator[Round]:
    """Refresh once, then again each time a poll, every ``every`` seconds, finds a source
    changed, or finds ``clock_every`` seconds passed since the last refresh began when one of
    its views reads the clock (``ViewReport.now``); yields each round. ``refresh()`` returns
    its reports and the versions it pinned; ``current(tables)`` reads the tables' versions
    now. Ends when ``stop`` is set (checked between refreshes, never during one) or, with
    ``until_idle``, at the first poll that finds nothing to do."""
    stop = stop or threading.Event()
    changed: dict[str, tuple[int, int]] = {}
    clock = False
    number = 0
    while not stop.is_set():
        number += 1
        started = time.perf_counter()
        reports, pinned = refresh()
        yield Round(number, reports, changed, time.perf_counter() - started, clock=clock)
        reads_clock = clock_every is not None and any(r.now is not None for r in reports)
        while True:
            if stop.wait(every):
                return
            changed = changed_sources(pinned, current(pinned))
            clock = not changed and reads_clock and time.perf_counter() - started >= clock_every
            if changed or clock:
                break
            if until_idle:
                return


class StopOnSignal:
    """While entered, SIGINT and SIGTERM stop a watch instead of killing the process: the
    first sets ``event`` (the refresh in progress finishes, a wait ends at once) and calls
    ``on_first``; the second runs ``abandon`` (to cancel running Spark jobs) and raises
    KeyboardInterrupt. The handlers in place before are put back on exit.

    Enter it only after the Spark session exists: starting a local SparkContext installs
    Spark's own SIGINT handler, which would replace this one.

    In the project's server (``ivm_sql.host``) the signals are the client's, forwarded:
    ``relay(handler)`` hands the server the handler of the first one, by name (``relay(None)``
    takes it back), and a second one interrupts the command as any other is interrupted."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(
        self,
        on_first: Callable[[str], None],
        abandon: Callable[[], None],
        relay: Callable[[Callable[[str], None] | None], None] | None = None,
    ):
        self.event = threading.Event()
        self.on_first = on_first
        self.abandon = abandon
        self.relay = relay
        self.received: int | None = None  # the first signal's number
        self._before: dict[int, object] = {}

    def __enter__(self) -> StopOnSignal:
        if self.relay is not None:
            self.relay(lambda name: self._handle(signal.Signals[name], None))
            return self
        for number in self.SIGNALS:
            self._before[number] = signal.signal(number, self._handle)
        return self

    def __exit__(self, *exc_info) -> None:
        if self.relay is not None:
            self.relay(None)
        for number, handler in self._before.items():
            signal.signal(number, handler)

    def _handle(self, number: int, frame: FrameType | None) -> None:
        if not self.event.is_set():
            self.received = number
            self.event.set()
            self.on_first(signal.Signals(number).name)
            return
        # Cancelled from another thread: this handler runs on the main thread, inside the
        # refresh's own call to Spark, whose connection (py4j's or gRPC's) it cannot reuse.
        # Best effort, and bounded: the process ends either way, its views consistent.
        canceller = threading.Thread(target=self.abandon, daemon=True)
        canceller.start()
        canceller.join(CANCEL_SECONDS)
        # py4j logs the call this interrupts, with its stack, on the root logger; the
        # process is ending with its own one-line message
        logging.disable(logging.CRITICAL)
        raise KeyboardInterrupt
