"""When the history a refresh needs is gone, the stage is recomputed instead, with the reason.

A stage applies the change of each source between the version it recorded and the pinned
one, read from the source's change data feed. That history can disappear:

- ``VACUUM`` deleted files the feed reads (the ``_change_data`` files of an UPDATE, or the
  data files a commit added or removed): reading the feed then fails with a missing file;
- Delta's log cleanup (``delta.logRetentionDuration``, 30 days by default) deleted the commit
  files of the range: the log no longer says what changed.

The first is only found by reading the feed (its files are listed nowhere cheaper), so
``is_missing_file`` recognises the failure and the refresh recomputes the stage; the second
is found from the log's listing before any Spark job runs (``log_gap``).

A commit the feed cannot describe (``undescribed_commit``) forces a recompute the same way.
"""

from __future__ import annotations

from ivm_sql.incremental.versions import Pins, Versions
from ivm_sql.storage.delta_log import INCREMENTAL_OPERATIONS, DeltaLog

# How Spark and Delta report a file of a table that no longer exists.
MISSING_FILE_ERRORS = (
    "FAILED_READ_FILE.FILE_NOT_EXIST",
    "DELTA_CHANGE_DATA_FILE_NOT_FOUND",
    "java.io.FileNotFoundException",
)


class HistoryGone(Exception):
    """Reading a stage's change failed on a missing file: recompute it."""


def is_missing_file(error: Exception) -> bool:
    text = str(error)
    return any(marker in text for marker in MISSING_FILE_ERRORS)


def gone_reason(ranges: list[tuple[str, tuple[int, int]]]) -> str:
    """The reason for a recompute after reading the feed of ``ranges`` failed on a missing file."""
    reads = ", ".join(f"{table} {old + 1}..{new}" for table, (old, new) in ranges)
    return (
        f"the change data feed it reads is gone ({reads}): a file of it was deleted, as VACUUM does"
    )


def log_gap(log: DeltaLog, versions: dict[str, tuple[int, int]]) -> str | None:
    """Why the changes of ``versions`` (table -> (recorded, pinned)) cannot be read from the
    log, if its commit files were cleaned up since the recorded version; else None."""
    for table, (old, new) in versions.items():
        if old < new and log.earliest_version(table) > old + 1:
            return (
                f"the history of {table} after version {old} is gone: its log starts at version "
                f"{log.earliest_version(table)} (delta.logRetentionDuration)"
            )
    return None


def read_pins(log: DeltaLog, recorded: dict[str, int], current: dict[str, int], tables) -> Pins:
    """The versions each of ``tables`` is read at, from the version a stage recorded to the
    one this refresh pinned. A table whose commits in between changed no row (ivm's
    record-only commits, OPTIMIZE) counts as unchanged: its terms are left out, and its old
    contents are read at the new version."""
    pins = {}
    for table in tables:
        old, new = recorded[table], current[table]
        if old != new and not any(c.changes_rows for c in log.commits_between(table, old, new)):
            old = new
        pins[table] = Versions.at(old, new)
    return pins


def changed_ranges(pins: Pins) -> list[tuple[str, tuple[int, int]]]:
    """(table, (old, new)) for each pinned table with commits to read."""
    return [(t, (int(v.old.this), int(v.new.this))) for t, v in pins.items() if v.changed]


def undescribed_commit(log: DeltaLog, pins: Pins) -> str | None:
    """Why the change data feed cannot describe the changes of ``pins``: a commit in their
    ranges that is not a row-level change (a REPLACE, RESTORE or schema change), or someone
    else's property change, which may have paused the feed; else None."""
    for table, (old, new) in changed_ranges(pins):
        for commit in log.commits_between(table, old, new):
            if commit.operation not in INCREMENTAL_OPERATIONS or (
                commit.operation.endswith("TBLPROPERTIES") and commit.record is None
            ):
                return f"{table} had a {commit.operation} at version {commit.version}"
    return None
