"""The statement ivm recomputes a view with, against the view's own SELECT, over the same Delta tables.

A recompute the cost model chooses writes the view's table from one statement: the view's
last stage over the queries of the stages below it, inlined as CTEs
(``physical.one_statement``). It should cost what the view's SELECT costs (issue 45: a
recompute at most 1.2x its CTAS). This benchmark runs both, without the write: one process,
TPC-H at ``--sf`` loaded into Delta, then ``--runs`` rounds after a warm-up, each running,
per query, its SELECT and ivm's statement into Spark's ``noop`` sink, in turn (which one
goes first alternates). It prints the medians and, from each plan as it ran (once more,
untimed), its scans and shuffles (exchanges, a reused one counted once), which is where the
two usually differ.

    SPARK_LOCAL_IP=127.0.0.1 .venv/bin/python bench/one_statement.py --sf 1 --runs 3 q20 q22
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/: tpch.py
import tpch

from ivm_sql.incremental.temporal import CLOCK, clock_versions
from ivm_sql.incremental.versions import Versions
from ivm_sql.sqlbuild import to_sql


def timed_noop(spark, sql: str) -> float:
    """Seconds to run ``sql`` into the ``noop`` sink."""
    frame = spark.sql(sql)
    started = time.perf_counter()
    frame.write.format("noop").mode("overwrite").save()
    return time.perf_counter() - started


def executed_plan(spark, sql: str) -> str:
    """The plan ``sql`` ran, once more and untimed: adaptive execution's final plan, where an
    exchange computed once and read twice shows as a ``ReusedExchange`` (the plan before it
    runs shows every exchange as its own)."""
    frame = spark.sql(sql)
    frame.collect()
    return frame._jdf.queryExecution().executedPlan().toString().split("== Initial Plan ==")[0]


def shape(plan: str) -> str:
    """The scans and shuffles of an executed plan."""
    scans = len(re.findall(r"\bScan (parquet|delta|ExistingRDD)|FileScan\b", plan))
    exchanges = len(re.findall(r"\bExchange\b", plan)) - len(re.findall(r"ReusedExchange", plan))
    broadcasts = len(re.findall(r"\bBroadcastExchange\b", plan))
    return f"{scans} scans, {exchanges} exchanges ({broadcasts} broadcasts)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("queries", nargs="+", help="TPC-H views, e.g. q20 q22")
    parser.add_argument("--sf", type=float, default=1)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--show", action="store_true", help="print ivm's statement of each view")
    parser.add_argument("--explain", action="store_true", help="print both executed plans")
    args = parser.parse_args()
    project = tpch.create_project(Path(tempfile.mkdtemp()) / "project", args.queries, {}, workers=1)
    project.migrate()
    parquet, _ = tpch.tpch_parquet(args.sf)
    tpch.load(project, parquet)
    spark = project.spark
    log = project.delta_log()
    statements: dict[str, tuple[str, str]] = {}
    for plan in project.plans(args.queries, log):
        tables = {t for s in plan.stages for t in s.sources}
        pins = {t: Versions.at(None, log.latest_version(t)) for t in tables if log.exists(t)}
        pins[CLOCK] = clock_versions(None, int(time.time() * 1_000_000))
        ivm = to_sql(plan.inlined_query(plan.stages[0], pins))
        statements[plan.view.name] = (tpch.select_of(plan.view.name), ivm)
        if args.show:
            print(f"-- {plan.view.name}: {len(plan.stages)} stages\n{ivm}\n")
    seconds: dict[str, dict[str, list[float]]] = {q: {"select": [], "ivm": []} for q in statements}
    for run in range(args.runs + 1):  # run 0 warms up
        for query, (select, ivm) in statements.items():
            order = [("select", select), ("ivm", ivm)]
            for kind, sql in order if run % 2 else reversed(order):
                took = timed_noop(spark, sql)
                if run:
                    seconds[query][kind].append(took)
    shapes: dict[str, dict[str, str]] = {q: {} for q in statements}
    for query, (select, ivm) in statements.items():
        for kind, sql in (("select", select), ("ivm", ivm)):
            plan = executed_plan(spark, sql)
            shapes[query][kind] = shape(plan)
            if args.explain:
                print(f"-- {query}, {kind}, executed:\n{plan}\n")
    print(f"TPC-H SF {args.sf:g}, medians of {args.runs} after a warm-up, into the noop sink")
    for query, kinds in seconds.items():
        select, ivm = (statistics.median(kinds[k]) for k in ("select", "ivm"))
        print(
            f"{query}: its SELECT {select:.2f} s ({shapes[query]['select']}); "
            f"ivm's statement {ivm:.2f} s ({shapes[query]['ivm']}); {ivm / select:.2f}x"
        )


if __name__ == "__main__":
    main()
