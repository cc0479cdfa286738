"""When ivm's tables write their Delta checkpoints: after a refresh's commits, never inside one.

Delta writes a checkpoint (a table's state as Parquet, where a reader starts instead of
replaying each commit's JSON) in every commit whose version is a multiple of the table's
``delta.checkpointInterval``, 10 by default, as that commit's post-commit work: on the demo,
1.5-2.5 s of the one-row refresh in about every third round (docs/performance.md), holding
up every stage above that table. So ivm's tables are created with an interval of
``DELTA_INTERVAL`` (``physical.layout``), and ivm writes a table's checkpoint itself once
``EVERY`` commits have gathered since its last: ``ivm server`` between commands
(``host.WarmSnapshots``), any other process after its refresh's last commit.

Why every 50 and not Delta's 10: on this 2-core machine a checkpoint of a small table costs
1.0-1.6 s warm, where replaying the JSON of up to 240 commits since the last checkpoint
showed no growth in what a snapshot's state or a MERGE costs (0.5-0.7 s and 0.7-0.9 s,
2026-11-28, a table on local disk). On an object store each replayed commit is a read of its
own, which is why Delta's default is lower; ivm's tables replay at most ``EVERY``.

Over Spark Connect to a server not ivm's, Delta's Scala API is out of reach: such tables get
Delta's own checkpoint every ``DELTA_INTERVAL`` commits, inside the commit that meets it.
"""

from __future__ import annotations

from collections.abc import Mapping

from py4j.protocol import Py4JError

from ivm_sql.session import is_connect
from ivm_sql.storage.delta_log import DeltaLog

# the checkpoint interval of ivm's tables: Delta's own, for when ivm cannot write them
DELTA_INTERVAL = 100
EVERY = 50  # commits since a table's last checkpoint at which ivm writes one
TABLE_PROPERTIES = {"delta.checkpointInterval": str(DELTA_INTERVAL)}  # of every table ivm creates


def due(log: DeltaLog, versions: Mapping[str, int]) -> list[str]:
    """The tables among ``versions`` (each table's latest version, as a refresh left it)
    with ``EVERY`` commits or more since their last checkpoint; none over Spark Connect."""
    if is_connect(log.spark):
        return []
    return [
        table
        for table, version in versions.items()
        if version - (log.last_checkpoint(table) or 0) >= EVERY
    ]


def write_due(log: DeltaLog, versions: Mapping[str, int]) -> list[str]:
    """Write the checkpoints ``due`` for ``versions``; the tables checkpointed. A checkpoint
    that fails fails nothing else, as in Delta's own post-commit hook: the commits stand, and
    the next refresh tries again."""
    written = []
    for table in due(log, versions):
        try:
            log.write_checkpoint(table)
        except Py4JError:
            continue
        written.append(table)
    return written


def describe() -> str:
    return f"a Delta checkpoint every {EVERY} commits, written after the refresh's commits (by the server, between commands)"
