"""How a view's trace of batches is written: one more batch, or rewritten consolidated.

A bag stage's table is a trace (``incremental.bag``): each refresh appends its change as one
batch, and every read consolidates what it reads. So are the DISTINCT and the aggregate of
a view that no other view reads (``incremental.distinct``, ``incremental.aggregate``), their
batches per-row count deltas and per-group state deltas. So what a read costs grows with the
batches gathered, and a row that came and went stays stored until they are consolidated.
Every ``EVERY``-th batch, the refresh writes the table consolidated instead, with the change
in it: one INSERT OVERWRITE, which costs about what the MERGE it replaces did (1.1-1.3 s
against 0.9-1.0 s on a small table on this 2-core machine, ``bench/writes.py``), where an
append costs 0.3 s with the table's state computed (the server computes it between
commands). Averaged over ``EVERY`` refreshes, a stage's write then costs about 0.35 s where
each MERGE cost 1 s.

Its change data feed stays right for the views above: an append's rows are the batch, and a
rewrite's are every stored row deleted and the consolidated rows inserted, which sum to the
same change. A view above reads that rewrite's rows once; its cost model counts them.
"""

from __future__ import annotations

from sqlglot import exp

from ivm_sql.incremental.stages import TRACES, BagStage, Stage
from ivm_sql.storage.delta_log import Commit, DeltaLog

EVERY = 16  # the batch that is written as a consolidating rewrite instead of appended


def write(stage: Stage, change: exp.Query, log: DeltaLog, latest: int) -> exp.Expression:
    """The statement that adds ``change`` to the stage's table at version ``latest``."""
    if _rewrites(stage, log, latest):
        return stage.rewrite(change)
    return stage.write(change)


def appends(stage: Stage, log: DeltaLog, latest: int) -> bool:
    """Whether ``write`` appends the change as one batch: a trace's, when its consolidating
    rewrite is not due."""
    return isinstance(stage, TRACES) and not _rewrites(stage, log, latest)


def _rewrites(stage: Stage, log: DeltaLog, latest: int) -> bool:
    return isinstance(stage, TRACES) and batches_since_consolidated(log, stage.table, latest) >= (
        EVERY - 1
    )


def appends_change(stage: Stage, statement: exp.Expression) -> bool:
    """Whether ``statement`` (``write``'s) appends the change's rows as they are: a bag's
    batch, which is then that commit's change data feed, each row an insert
    (``SourceChanges.offer`` hands it to the stages above)."""
    return (
        isinstance(stage, BagStage)
        and isinstance(statement, exp.Insert)
        and not statement.args.get("overwrite")
    )


def batches_since_consolidated(log: DeltaLog, table: str, latest: int) -> int:
    """Batches appended since the table was last written whole (created, recomputed,
    rewritten): its newest commits that appended rows, up to ``EVERY``, read from its Delta
    log (cached; no Spark job). Commits that appended nothing (ivm's record-only commits) do
    not count."""
    appended = 0
    for version in range(latest, max(-1, latest - 2 * EVERY), -1):
        commit = log.commit(table, version)
        if not is_append(commit):
            break
        appended += int(commit.metrics.get("numOutputRows") or 0) > 0
        if appended >= EVERY:
            break
    return appended


def is_append(commit: Commit) -> bool:
    """Whether a commit appended (a batch, or no row) and removed nothing."""
    return commit.operation == "WRITE" and int(commit.metrics.get("numRemovedFiles") or 0) == 0


def describe() -> str:
    return (
        "a view's bag table (and the DISTINCT or aggregate of a view no other view reads) takes "
        f"each change as an appended batch, read consolidated, and every {EVERY}th batch is "
        "written as the table rewritten consolidated"
    )
