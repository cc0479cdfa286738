"""`ivm verify`: a view equals its SELECT recomputed from scratch over the same versions."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from sqlglot import exp

from ivm_sql.algebra.windows import with_tiebreak
from ivm_sql.compiler.plan import ViewPlan
from ivm_sql.compiler.qualify import inline_views
from ivm_sql.incremental.temporal import at_time, instant
from ivm_sql.refresh_policy import RefreshPolicy
from ivm_sql.runtime import workers
from ivm_sql.sqlbuild import lit, to_sql
from ivm_sql.storage import concurrent, delta_log

SAMPLE = 5
WEIGHT = "__ivm_verify_w"


@dataclass
class VerifyResult:
    view: str
    ok: bool
    versions: dict[str, int] = field(default_factory=dict)
    missing: list[tuple] = field(default_factory=list)  # rows the view lacks (a sample)
    extra: list[tuple] = field(default_factory=list)  # rows the view should not have (a sample)
    problem: str = ""


def recompute_query(
    plan: ViewPlan, plans: dict[str, ViewPlan], versions: dict[str, int], now: int | None = None
) -> exp.Query:
    """The view's SELECT over base tables only, each read at the version the view reflects,
    the current time read as the time its refresh evaluated it at (``now``), and rows that
    tie at a LIMIT chosen as a refresh chooses them (``windows.with_tiebreak``)."""

    def pin(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Table) and node.db and f"{node.db}.{node.name}".lower() in versions:
            pinned = node.copy()
            version = versions[f"{node.db}.{node.name}".lower()]
            pinned.set(
                "version", exp.Version(this="VERSION", kind="AS OF", expression=lit(version))
            )
            return pinned
        return node

    by_name = {p.view.name: p for p in plans.values()}
    query = with_tiebreak(inline_views(plan.view, plan.database, by_name).transform(pin))
    return query if now is None else at_time(query, instant(now))


def verify_views(
    spark, chosen: list[ViewPlan], plans: dict[str, ViewPlan], count: int
) -> list[VerifyResult]:
    """``verify_view`` for each of ``chosen``, on ``count`` threads at once, each with a
    session of its own (``runtime.workers``): one view's planning overlaps another's
    jobs. A check reads versions its view recorded, so no order is needed among them."""
    if not concurrent.has_own_sessions(spark):
        count = 1
    sessions = threading.local()

    def verify_one(plan: ViewPlan) -> VerifyResult:
        if count > 1 and not hasattr(sessions, "spark"):
            sessions.spark = workers.worker_session(spark)
        return verify_view(getattr(sessions, "spark", spark), plan, plans)

    return workers.in_dependency_order(chosen, lambda plan: (), verify_one, count)


def verify_view(spark, plan: ViewPlan, plans: dict[str, ViewPlan]) -> VerifyResult:
    if plan.policy is RefreshPolicy.FULL:
        return VerifyResult(
            plan.name,
            True,
            problem="skipped: its refresh policy is FULL (its SELECT may not be deterministic)",
        )
    if not spark.catalog.tableExists(plan.table):
        return VerifyResult(plan.name, False, problem="never refreshed: run `ivm refresh` first")
    _, record = delta_log.DeltaLog(spark).last_record(plan.table)
    versions = record.get("base", {})
    expected = spark.sql(
        to_sql(recompute_query(plan, plans, versions, record.get("now")), pretty=False)
    )
    missing, extra = bag_difference(expected, spark.table(plan.name))
    return VerifyResult(plan.name, not missing and not extra, versions, missing, extra)


def bag_difference(expected, actual) -> tuple[list[tuple], list[tuple]]:
    """(rows ``actual`` lacks, rows it should not have), a sample of each, in one Spark job:
    both sides are counted per distinct row (+1 actual, -1 expected) and only rows whose
    count is not zero come back."""
    from pyspark.sql import functions as F

    names = [f"c{i}" for i in range(len(expected.columns))]  # positional: any column names work
    both = (
        actual.toDF(*names)
        .withColumn(WEIGHT, F.lit(1))
        .unionAll(expected.toDF(*names).withColumn(WEIGHT, F.lit(-1)))
    )
    rows = (
        both.groupBy(*names)
        .agg(F.sum(WEIGHT).alias(WEIGHT))
        .where(F.col(WEIGHT) != 0)
        .limit(2 * SAMPLE)
        .collect()
    )
    missing = [tuple(r[:-1]) for r in rows if r[-1] < 0][:SAMPLE]
    extra = [tuple(r[:-1]) for r in rows if r[-1] > 0][:SAMPLE]
    return missing, extra
