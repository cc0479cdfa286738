"""Runs a recursive stage's loop: X_(j+1) = step(X_j) until X_j is empty (``incremental.fixpoint``).

Each X_j is one Spark job, consolidated and kept in memory as a temporary view that the
next iteration reads; the table gets their sum, read from memory. A recursion that does not
reach its fixed point within Spark's own limit (``spark.sql.cteRecursionLevelLimit``, 100 by
default) is stopped with one error instead of running on: on a cycle its recursive term does
not bound, Spark's WITH RECURSIVE fails the same way.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from pyspark import StorageLevel
from sqlglot import exp

from ivm_sql.algebra.nodes import Recursive
from ivm_sql.errors import RefreshError
from ivm_sql.incremental.fixpoint import DEFAULT_LIMIT, ITERATION_VIEW, LIMIT_SETTING, iterate
from ivm_sql.incremental.versions import Pins
from ivm_sql.sqlbuild import consolidate, table, to_sql, union_all


@dataclass(frozen=True)
class Solution:
    """The sum of the iterations (None: all empty) and how many were not empty."""

    query: exp.Select | None
    iterations: int


def limit(spark) -> int:
    return int(spark.conf.get(LIMIT_SETTING, str(DEFAULT_LIMIT)))


@contextmanager
def solved(
    spark, node: Recursive, seed: exp.Query, pins: Pins, stage_table: str
) -> Iterator[Solution]:
    """X_0 + X_1 + ... from X_0 = ``seed``; inside the block, a query reading them from memory."""
    most = limit(spark)
    frames, views = [], []
    query = seed
    try:
        while True:
            frame = spark.sql(to_sql(query, pretty=False)).persist(StorageLevel.MEMORY_AND_DISK)
            frames.append(frame)
            if frame.count() == 0:
                break
            if len(views) == most:
                raise RefreshError(
                    f"{stage_table}: recursive CTE {node.name} did not reach a fixed point in {most} iterations; "
                    f"its recursive term keeps deriving rows (a cycle in the data it does not bound). Bound the depth "
                    f"(WHERE depth < n in the recursive term), or raise {LIMIT_SETTING} in ivm.yaml's spark.conf"
                )
            views.append(f"{ITERATION_VIEW}{len(views)}")
            frame.createOrReplaceTempView(views[-1])
            query = iterate(node, views[-1], pins)
        total = (
            consolidate(
                union_all([exp.select(exp.Star()).from_(table(v)) for v in views]), node.columns
            )
            if views
            else None
        )
        yield Solution(total, len(views))
    finally:
        for view in views:
            spark.catalog.dropTempView(view)
        for frame in frames:
            frame.unpersist()
