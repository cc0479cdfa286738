"""What a multi-stage view's recompute costs, stage by stage, against its SELECT in one statement.

An `AUTO` (or `INCREMENTAL`) view is kept in stages, each a Delta table; recomputing the view
writes every stage, each in a statement and a compare-and-swap commit of its own. A `FULL`
view is one statement over the whole SELECT. `bench/choices.py` found the `AUTO` recompute of
TPC-H's `q04` at 2.7x its `FULL` copy's. This benchmark shows where it goes: one process,
TPC-H at ``--sf``, the chosen queries' views loaded, then ``--runs`` rounds, each an
`ivm refresh --full` of them and, per query, its SELECT written by one
``CREATE OR REPLACE TABLE ... AS``. It prints, per stage, the medians of the refresh event
log's write seconds, statements and Spark jobs, and per query the stages' sum against the
one statement.

    .venv/bin/python bench/recompute_shape.py --sf 0.1 --runs 3 q04 q15 q17
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/: tpch.py
import tpch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("queries", nargs="+", help="TPC-H views, e.g. q04 q15")
    parser.add_argument("--sf", type=float, default=0.1)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    # one view at a time, as the one statement runs alone
    project = tpch.create_project(Path(tempfile.mkdtemp()) / "project", args.queries, {}, workers=1)
    project.migrate()
    parquet, _ = tpch.tpch_parquet(args.sf)
    tpch.load(project, parquet)
    project.refresh()
    one_statement: dict[str, list[float]] = {q: [] for q in args.queries}
    for _ in range(args.runs):
        project.refresh(full=True)
        for query in args.queries:
            started = time.perf_counter()
            project.sql(f"CREATE OR REPLACE TABLE one_{query} AS {tpch.select_of(query)}")
            one_statement[query].append(time.perf_counter() - started)
    rows = project.spark.sql(
        f"SELECT view_name, stage_table, seconds, write_seconds, statements, spark_jobs "
        f"FROM {tpch.DATABASE}.__ivm_refresh_log WHERE action = 'recomputed'"
    ).collect()
    for query in args.queries:
        stages: dict[str, list] = {}
        for row in rows:
            if row.view_name.endswith(f".{query}"):
                stages.setdefault(row.stage_table.split(".")[-1], []).append(row)
        total = 0.0
        print(f"{query}:")
        for stage, runs in sorted(stages.items()):
            seconds = statistics.median(r.seconds for r in runs)
            total += seconds
            print(
                f"    {stage:<16} {seconds:5.2f} s (write {statistics.median(r.write_seconds for r in runs):.2f} s), "
                f"{statistics.median(r.statements for r in runs):g} statements, "
                f"{statistics.median(r.spark_jobs for r in runs):g} Spark jobs"
            )
        single = statistics.median(one_statement[query])
        print(
            f"    its stages {total:.2f} s against one statement {single:.2f} s ({total / single:.1f}x)"
        )


if __name__ == "__main__":
    main()
