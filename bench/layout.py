"""A keyed stage's MERGE into its table in key order, against the same stage laid out as a
hash aggregate writes it, through ivm's refresh, on TPC-H's data and official update sets.

Two copies of TPC-H Q18's first stage, lineitem's quantity per order (1.5 million groups at
SF 1), each read by a view above it, so that each is a stage ivm MERGEs into (a view no
other reads keeps a trace instead): ``per_order_keyed``, first loaded as ivm loads it, in key
order (``physical.layout``), and ``per_order_hashed``, first loaded with the key order off.
Both are ``REFRESH POLICY INCREMENTAL``: every round MERGEs. Each round applies one official
update set (RF1 then RF2: 0.1% of the orders, in one slab of the key range), then refreshes
the two views, in turns that alternate, and times each stage's refresh. Before the rounds,
each way's first load and two recomputes (``--full``) of both views are timed, also in turns.
After the timings, both views are compared with their SELECT.

    SPARK_LOCAL_IP=127.0.0.1 .venv/bin/python bench/layout.py --sf 1 --sets 4
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
from contextlib import nullcontext
from pathlib import Path
from unittest import mock

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/: tpch.py

import tpch

from ivm_sql import Project
from ivm_sql.physical import layout
from ivm_sql.storage.delta_log import DeltaLog

WAYS = ("keyed", "hashed")
PER_ORDER = (
    "SELECT l_orderkey, SUM(l_quantity) AS quantity, COUNT(*) AS lines FROM lineitem "
    "GROUP BY l_orderkey"
)


def views(way: str) -> str:
    return (
        f"CREATE VIEW per_order_{way} REFRESH POLICY INCREMENTAL AS {PER_ORDER};\n"
        f"CREATE VIEW large_orders_{way} REFRESH POLICY INCREMENTAL AS "
        f"SELECT l_orderkey, quantity FROM per_order_{way} WHERE quantity > 300;\n"
    )


def create_project(root: Path) -> Project:
    (root / "migrations").mkdir(parents=True)
    (root / "views").mkdir()
    shutil.copy(tpch.TPCH / "schema.sql", root / "migrations" / "0001_tpch.sql")
    (root / "views" / "layout.sql").write_text("".join(views(way) for way in WAYS))
    config = {"database": "layout_bench", "spark": {"conf": {"spark.driver.memory": "6g"}}}
    (root / "ivm.yaml").write_text(yaml.safe_dump(config))
    return Project.open(root)


def files_of(project: Project, way: str) -> int:
    log = DeltaLog(project.spark)
    table = f"layout_bench.__ivm_per_order_{way}"
    return len(log.file_stats(table, log.latest_version(table)) or [])


def loaded(way: str):
    """Inside, a full load writes as ``way`` says: ``hashed``, as Spark writes it (no load
    reads enough for the key order)."""
    if way == "hashed":
        return mock.patch.object(layout, "KEY_ORDER_FROM_BYTES", float("inf"))
    return nullcontext()


def refresh(project: Project, way: str) -> float:
    """Seconds the refresh of ``large_orders_<way>`` spent on ``per_order_<way>``."""
    (report,) = [
        r
        for r in project.refresh(views=[f"large_orders_{way}"])
        if r.view.endswith(f"per_order_{way}")
    ]
    assert report.action == "incremental", (report.action, report.reason)
    return report.seconds


def equal_to_select(project: Project, way: str) -> bool:
    differences = tpch.scalar(
        project,
        f"SELECT count(*) FROM ((SELECT * FROM per_order_{way} EXCEPT ALL ({PER_ORDER})) "
        f"UNION ALL (({PER_ORDER}) EXCEPT ALL SELECT * FROM per_order_{way})) AS diff",
    )
    return differences == 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sf", type=float, default=1.0, help="TPC-H scale factor (default 1)")
    parser.add_argument("--sets", type=int, default=4, help="official update sets (default 4)")
    args = parser.parse_args()

    parquet, _ = tpch.tpch_parquet(args.sf)
    updates = tpch.update_sets(args.sf, args.sets)
    root = Path(tempfile.mkdtemp(prefix="ivm-layout-"))
    try:
        project = create_project(root)
        project.migrate()
        tpch.load(project, parquet)
        loads: dict[str, list[float]] = {way: [] for way in WAYS}
        # each way's first load, then two recomputes each (``--full``), in turns that
        # alternate: the first statements of a JVM run slower
        for full, way in zip((False, False, True, True, True, True), (*WAYS, *WAYS[::-1], *WAYS)):
            with loaded(way):
                _, took = tpch.timed(
                    lambda: project.refresh(views=[f"large_orders_{way}"], full=full)
                )
            loads[way].append(took)
        tpch.log(
            "loads (first, then recomputes): "
            + "; ".join(
                f"{w} {', '.join(f'{s:.1f}' for s in loads[w])} s, {files_of(project, w)} files"
                for w in WAYS
            )
        )
        seconds: dict[str, list[float]] = {way: [] for way in WAYS}
        for number in range(1, args.sets + 1):
            tpch.official_functions(project, updates, number)
            turn = WAYS if number % 2 else WAYS[::-1]
            for way in turn:
                seconds[way].append(refresh(project, way))
            tpch.log(
                f"set {number}: "
                + ", ".join(f"{w} {seconds[w][-1]:.2f} s" for w in turn)
                + " (in this order)"
            )
        for way in WAYS:
            print(
                f"{way}: recompute (both views) median {statistics.median(loads[way][1:]):.1f} s "
                f"(first load {loads[way][0]:.1f} s); MERGE of a set: median "
                f"{statistics.median(seconds[way]):.2f} s ({', '.join(f'{s:.2f}' for s in seconds[way])}); "
                f"{files_of(project, way)} files after; equal to its SELECT: "
                f"{equal_to_select(project, way)}"
            )
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
