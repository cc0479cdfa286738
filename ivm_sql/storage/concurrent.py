"""Two refreshes of the same views at the same time: each stage's commit is a compare-and-swap.

A stage's MERGE applies the change between the versions its table records and the versions
the refresh pinned. It is right only on the table state that record describes: applied on
top of another refresh's commit of the same change, it would count that change twice. So
every commit ivm makes to a stage table is conditional on nothing else ivm wrote having
landed there since the record it read, and Delta is the arbiter, through its idempotent
writes: a commit made with ``spark.databricks.delta.write.txnAppId`` and ``txnVersion`` set
(honoured by MERGE, INSERT and CREATE OR REPLACE since Delta 3.0) carries a SetTransaction
action, and Delta

- skips the statement when the table's snapshot already holds a transaction of that app id
  with that version or a higher one (another refresh committed after the record was read);
- fails it with a concurrent-transaction conflict when such a transaction commits while the
  statement runs (the app id is among what the transaction read).

The version is one more than the version of the commit holding the record the refresh read:
two refreshes that read the same record use the same version, so only the first lands, and a
later refresh reads that commit's record and uses a higher one. Every commit ivm makes to a
stage table carries one (a record-only commit is an empty INSERT for that reason, not an
ALTER TABLE, which Delta does not check).

Why not a lock: a lock table costs two commits per refresh, each a Spark job, so an unchanged
refresh would no longer run none, and a lock held by a refresh that died must expire. Why not
a threading.Lock: refreshes also meet from two processes sharing one cluster or Spark Connect
server. Here the normal path costs two session settings per stage and no statement.

An append (a trace's batch, a record-only commit, the event log's rows) makes the same
compare-and-swap through Delta's transaction API instead, which checks the id without the
state computation Delta's check of it costs in SQL (``storage.appends``): a concurrent
commit fails it as a concurrent append.

What the loser does: it reads the stage's record again. The record equals the one it would
have written (the same change was applied): done. It is behind the versions the refresh
pinned: the stage is refreshed again from there. It is ahead (a refresh that started later
got there first): that refresh brings this stage and all above it to newer versions, so this
one leaves them to it and finds nothing left to do. Only when other refreshes keep winning
for ``ATTEMPTS`` rounds does it stop, with one message.
"""

from __future__ import annotations

import re

from py4j.protocol import Py4JJavaError
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession

TXN_APP_ID = "spark.databricks.delta.write.txnAppId"
TXN_VERSION = "spark.databricks.delta.write.txnVersion"
APP_ID = "ivm-refresh"  # one per table: Delta keeps a table's transactions in its own log

ATTEMPTS = 8  # rounds a stage retries while other refreshes keep committing first

# Error conditions of a commit that lost to a concurrent one (Delta's optimistic concurrency),
# or of a catalog entry two refreshes created at once.
CONFLICTS = (
    "DELTA_CONCURRENT_",
    "DELTA_METADATA_CHANGED",
    "DELTA_PROTOCOL_CHANGED",
    "TABLE_OR_VIEW_ALREADY_EXISTS",
)
# how a message names its condition, maybe with a subclass: [DELTA_CONCURRENT_APPEND] ...,
# [DELTA_CONCURRENT_APPEND.WITHOUT_HINT] ... (a commit through Delta's API, ``storage.appends``)
CONDITION = re.compile(r"\[([A-Z_]+)(?:\.[A-Z_]+)?\]")


class Overtaken(Exception):
    """Another refresh committed to ``table`` first; the stage is looked at again."""

    def __init__(self, table: str):
        super().__init__(table)
        self.table = table


def own_session(spark):
    """A session for one refresh: the same JVM, catalog and cache, but its own settings and
    temporary views, so two refreshes in two threads do not write each other's commit record
    or txn version (both are session settings) or read each other's change views. A Spark
    Connect session has no ``newSession``; each client has a session of its own there.

    It starts as a copy of ``spark``'s state (Spark's ``cloneSession``: what was set on it
    since the start, such as a recursion limit, its current database, its temporary views
    and functions), as a refresh in ``spark`` would have seen it, and is independent from
    then on. A new session with the settings copied one by one cost two round trips to the
    JVM per setting: 0.08 s idle and 0.3 s beside another view's refresh, paid by each
    worker of each refresh on its path."""
    if not has_own_sessions(spark):
        return spark
    return SparkSession(spark.sparkContext, spark._jsparkSession.cloneSession())


def has_own_sessions(spark) -> bool:
    """Whether ``own_session`` can give a thread a session of its own (not over Spark Connect)."""
    return hasattr(spark, "_jsparkSession")


def is_conflict(error: PySparkException | Py4JJavaError) -> bool:
    """Whether ``error`` says a concurrent commit won (the statement made no change)."""
    condition = error.getCondition() if isinstance(error, PySparkException) else None
    if not condition:  # py4j's errors, and Delta's that reach pyspark without a condition
        match = CONDITION.search(str(error))
        condition = match.group(1) if match else ""
    return condition.startswith(CONFLICTS)
