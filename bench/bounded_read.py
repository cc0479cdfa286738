"""What a read bounded by a change's keys costs: the files it opens, or the pages it reads.

The scans rule (``physical.cost``) counts a read bounded by a change's keys
(``physical.bounds``) as the whole files whose Delta statistics overlap the keys. Spark's
Parquet reader goes further when the literals reach it (``spark.sql.parquet.filterPushdown``,
on by default): Parquet's column index keeps each page's least and greatest value, so in a
file sorted by the key only the pages that overlap the keys are read.

This loads TPC-H's ``lineitem`` (the Parquet files ``bench/tpch.py`` caches) into a Delta
table in key order (as dbgen writes it, and as ``bench/tpch.py``'s load keeps it; sorted here
so the layout does not depend on how Spark splits the files), and times one aggregate over
four reads of it,
in turns, after a warm-up round:

- ``whole``: every row;
- ``slab``: ``l_orderkey BETWEEN`` a slab of 6,000 order keys, as an official update set's;
- ``keys``: ``l_orderkey IN`` 5 keys spread over the key range (every file opened);
- ``slab, no pushdown``: the slab with Parquet's filter pushdown off (whole files decoded).

For each it prints the median seconds, and from the scan's metrics the files opened, their
bytes and the rows the scan handed on (before Spark's own filter).

    SPARK_LOCAL_IP=127.0.0.1 .venv/bin/python bench/bounded_read.py --sf 1 --repeats 3
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/: tpch.py

import tpch

from ivm_sql.config import Config, SparkSettings
from ivm_sql.session import build_session

AGGREGATE = (
    "SELECT sum(l_extendedprice * (1 - l_discount)), max(l_comment), count(l_partkey) FROM lineitem"
)
READS = {
    "whole": ("", True),
    "slab": (" WHERE l_orderkey BETWEEN 3000000 AND 3006000", True),
    "keys": (" WHERE l_orderkey IN (1, 1500001, 3000001, 4500001, 5999975)", True),
    "slab, no pushdown": (" WHERE l_orderkey BETWEEN 3000000 AND 3006000", False),
}


def scan_metrics(frame) -> dict[str, int]:
    """The metrics of the Parquet scan in ``frame``'s executed plan (adaptive execution off)."""
    found: dict[str, int] = {}

    def walk(node) -> None:
        if node.nodeName().startswith("Scan parquet"):
            metrics = node.metrics()
            keys = metrics.keysIterator()
            while keys.hasNext():
                key = keys.next()
                found[key] = found.get(key, 0) + metrics.apply(key).value()
        children = node.children()
        for i in range(children.size()):
            walk(children.apply(i))

    walk(frame._jdf.queryExecution().executedPlan())
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sf", type=float, default=1.0, help="TPC-H scale factor (default 1)")
    parser.add_argument("--repeats", type=int, default=3, help="timed turns of each read")
    args = parser.parse_args()
    parquet, _ = tpch.tpch_parquet(args.sf)
    with tempfile.TemporaryDirectory(prefix="ivm-bounded-") as folder:
        # adaptive execution off: the scan's metrics sit in the plan as it was executed
        config = Config(spark=SparkSettings(conf={"spark.sql.adaptive.enabled": "false"}))
        spark = build_session(config, Path(folder))
        spark.sql(
            "CREATE TABLE lineitem USING DELTA AS SELECT * FROM "
            f"parquet.`{parquet / 'lineitem.parquet'}` ORDER BY l_orderkey"
        )
        seconds: dict[str, list[float]] = {name: [] for name in READS}
        metrics: dict[str, dict[str, int]] = {}
        for turn in range(args.repeats + 1):
            for name, (where, pushdown) in READS.items():
                spark.conf.set("spark.sql.parquet.filterPushdown", str(pushdown).lower())
                started = time.perf_counter()
                frame = spark.sql(AGGREGATE + where)
                frame.collect()
                if turn:  # the first turn warms up
                    seconds[name].append(time.perf_counter() - started)
                metrics[name] = scan_metrics(frame)
        spark.stop()
    table = Table(
        "read",
        "seconds (median)",
        "files opened",
        "their MB",
        "rows out of the scan",
        title=f"lineitem at SF {args.sf:g}, {args.repeats} turns each",
    )
    for name in READS:
        found = metrics[name]
        table.add_row(
            name,
            f"{statistics.median(seconds[name]):.2f}",
            str(found.get("numFiles")),
            f"{found.get('filesSize', 0) / 1e6:.1f}",
            f"{found.get('numOutputRows', 0):,}",
        )
    Console().print(table)


if __name__ == "__main__":
    main()
