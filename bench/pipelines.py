"""One Spark Declarative Pipelines project run both ways: `spark-pipelines run` and `ivm refresh`.

The pipeline is tests/test_pipelines.py's (a temporary view, materialized views over it and
over each other, a streaming table over STREAM(events) and a view over that), over ``--rows``
orders and events. Both tools run against one warm `ivm server` (a Spark Connect server with
Delta and the project's catalog): ivm keeps the datasets in the project's database,
spark-pipelines (``--spec`` of a copy naming another database, whose sources are the same
Delta folders) in its own. Each command is a process of its own, timed from start to exit:
first the initial run, then ``--rounds`` rounds of a small change (orders inserted, updated
and deleted; events appended).

    .venv/bin/python bench/pipelines.py --rows 100000 --rounds 2
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "tests")]  # this checkout's ivm_sql, and the tests' pipeline
from test_pipelines import SPEC, TRANSFORMATIONS, write  # noqa: E402  (the pipeline under test)

BIN = Path(sys.executable).parent
OURS, THEIRS = "shop", "sdp_shop"


def run(args: list[str], cwd: Path, token: str | None = None) -> float:
    """Seconds ``args`` took; a failure stops the benchmark with its output."""
    env = {
        **os.environ,
        "PATH": f"{BIN}:{os.environ['PATH']}",
        "PYSPARK_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYTHONPATH": str(REPO),
    }
    if token:
        env["SPARK_CONNECT_AUTHENTICATE_TOKEN"] = token
    start = time.monotonic()
    done = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"{' '.join(args)} failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return time.monotonic() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=2)
    options = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="ivm-sdp-"))
    ours = write(
        folder / "ivm",
        {
            "spark-pipeline.yml": SPEC.format(root=folder / "ivm", database=OURS),
            **TRANSFORMATIONS,
            "ivm.yaml": "migrations: migrations\n",
            "migrations/0001_sources.sql": sources(folder, options.rows),
        },
    )
    theirs = write(
        folder / "sdp",
        {
            "spark-pipeline.yml": SPEC.format(root=folder / "sdp", database=THEIRS),
            **TRANSFORMATIONS,
        },
    )
    ivm = [sys.executable, "-m", "ivm_sql.cli"]
    try:
        run([*ivm, "server", "start"], ours)
        from ivm_sql import server as servers

        record = servers.read_record(ours)
        pipelines = [
            str(BIN / "spark-pipelines"),
            "--remote",
            f"sc://localhost:{record.port}",
            "run",
            "--spec",
            str(theirs / "spark-pipeline.yml"),
        ]
        run([*ivm, "migrate"], ours)
        print(
            f"{options.rows} orders and events; load average before: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
        )
        print(f"{'run':<10} {'spark-pipelines run':>20} {'ivm refresh':>12}")
        for round_ in range(options.rounds + 1):
            if round_:
                change(ivm, ours, round_)
            sdp = run(pipelines, ours, record.token)
            ours_s = run([*ivm, "refresh"], ours)
            print(
                f"{'initial' if not round_ else f'change {round_}':<10} {sdp:>19.1f}s {ours_s:>11.1f}s  (load {os.getloadavg()[0]:.1f})"
            )
    finally:
        subprocess.run(
            [*ivm, "server", "stop"],
            cwd=ours,
            env={**os.environ, "PYTHONPATH": str(REPO)},
            capture_output=True,
        )
        shutil.rmtree(folder, ignore_errors=True)


def sources(folder: Path, rows: int) -> str:
    """The migration making both databases' sources: ivm's tables, and the other database's
    tables over the same Delta folders."""
    warehouse = folder / "ivm" / ".ivm" / "warehouse" / f"{OURS}.db"
    return (
        "CREATE TABLE orders (id BIGINT, customer_id BIGINT, amount BIGINT) USING DELTA;\n"
        "CREATE TABLE events (id BIGINT, amount BIGINT) USING DELTA;\n"
        f"INSERT INTO orders SELECT id, id % 1000, id % 97 FROM range({rows});\n"
        f"INSERT INTO events SELECT id, id % 11 - 3 FROM range({rows});\n"
        f"CREATE DATABASE {THEIRS};\n"
        f"CREATE TABLE {THEIRS}.orders USING DELTA LOCATION '{warehouse / 'orders'}';\n"
        f"CREATE TABLE {THEIRS}.events USING DELTA LOCATION '{warehouse / 'events'}';\n"
    )


def change(ivm: list[str], root: Path, round_: int) -> None:
    """A small change: 10 orders inserted, 10 updated, 10 deleted, 10 events appended."""
    base = 10_000_000 * round_
    for statement in (
        f"INSERT INTO orders SELECT id, id % 1000, 50 FROM range({base}, {base + 10})",
        f"UPDATE orders SET amount = amount + 1 WHERE id BETWEEN {round_ * 100} AND {round_ * 100 + 9}",
        f"DELETE FROM orders WHERE id BETWEEN {round_ * 1000} AND {round_ * 1000 + 9}",
        f"INSERT INTO events SELECT id, 4 FROM range({base}, {base + 10})",
    ):
        run([*ivm, "sql", statement], root)


if __name__ == "__main__":
    main()
