"""How Spark runs a statement that reads little: interpreted, planned once, one partition.

Spark compiles every new query plan to Java bytecode (whole-stage code generation, compiled
by Janino) before it runs it. A refresh runs many small statements that all differ, so it
pays that compile on each of them, and on small tables the compile is most of the work:
in six refreshes of the demo, code generation held 31% of the JVM's CPU samples (JFR).
Compiled code earns its cost back only over many rows. So a statement that reads little
runs interpreted: Spark evaluates the same plan's expressions without generating code, which
is how it runs any expression it cannot compile, with the same results. Two more settings
cut fixed cost on small data: no adaptive re-planning between a plan's stages, and one
shuffle partition instead of several near-empty ones. Over five warm refreshes of the demo
these took the mean round from 8.9 s to 5.4 s (interpretation alone: to 6.4 s).

What a statement reads: the table versions its query scans whole (``t VERSION AS OF n``),
the table a MERGE writes into, and the change data feeds it reads, which are small when the
stage's change is (the cost model's SMALL_CHANGE rows). Table sizes come from the checksum
file Delta writes beside each commit (``_delta_log/<version>.crc``), read without a Spark
job; a table of unknown size counts as large, and large reads run compiled, as Spark would
by default.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from sqlglot import exp

from ivm_sql.incremental.temporal import CLOCK_TERM

# Below this many bytes of Delta tables read, a statement that applies a change runs with
# SMALL_DATA_SETTINGS. Measured on TPC-H SF 0.1 (docs/performance.md): at 32 MiB a 0.1%
# refresh round took 86 s against 118 s all compiled; at 4 MiB, 116 s, because most stages
# join a 5-19 MB table, which a change reads only as the other side of a join.
SMALL_DATA = 32 * 2**20
# The same for a recompute, which processes every row it reads, so that interpretation's
# higher cost per row shows sooner: recomputes of Q1 (19 MB of lineitem) and Q13 (5 MB of
# orders) took twice as long interpreted as compiled.
SMALL_RECOMPUTE = 4 * 2**20

SMALL_DATA_SETTINGS = {
    # interpreted: no whole-stage code, and expressions evaluated directly instead of
    # through generated projections and predicates
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
    # planned once, over one partition
    "spark.sql.adaptive.enabled": "false",
    "spark.sql.shuffle.partitions": "1",
}


def scans(query: exp.Expression, range_reads: bool = True) -> list[tuple[str, int]]:
    """Each scan of a whole table version in a refresh query (``t VERSION AS OF n``), repeats
    included; its change data feed reads (``table_changes``) are not among them. Without
    ``range_reads``, nor are the reads of rows a moving clock passed (``incremental.temporal``):
    a range predicate on a time column, which Delta's file statistics prune."""
    return [scan for _, scan in scan_nodes(query, range_reads)]


def scan_nodes(
    query: exp.Expression, range_reads: bool = True
) -> list[tuple[exp.Table, tuple[str, int]]]:
    """``scans``, each with the node that reads it."""
    return [
        (
            node,
            (".".join(part.name for part in node.parts), int(node.args["version"].expression.name)),
        )
        for node in query.find_all(exp.Table)
        if node.args.get("version") is not None and (range_reads or not _in_clock_term(node))
    ]


def _in_clock_term(node: exp.Expression) -> bool:
    above = node.parent
    while above is not None:
        if isinstance(above, exp.Subquery) and above.alias == CLOCK_TERM:
            return True
        above = above.parent
    return False


def scanned_versions(query: exp.Expression) -> list[tuple[str, int]]:
    """The distinct table versions a refresh query scans whole."""
    return sorted(set(scans(query)))


# A MERGE reads the stage's change from memory and its table's files: with a change of at
# most SMALL_MERGE_ROWS rows into a table under SMALL_MERGE_TABLE bytes, it runs with
# SMALL_DATA_SETTINGS too, whatever the change's own query read to compute it. A TPC-H
# official set changes about 15,000 source rows at SF 1, which kept every MERGE compiled when
# the flag followed the sources; the change a stage's MERGE writes is what it touches. A MERGE
# joins the change with every row of the files it may touch, so, like a recompute, it pays
# interpretation per stored row: bench/writes.py, a change of 200 rows (medians of 3, load
# about 4, a test run beside it): interpreted 1.35 s against 2.93 s compiled into 200 rows (18 kB), 1.51 s against
# 2.28 s into 20,000 (185 kB), but 4.28 s against 2.96 s into 200,000 (1.7 MB).
SMALL_MERGE_ROWS = 10_000
SMALL_MERGE_TABLE = 2**20


def is_small_merge(change_rows: int, table_bytes: int | None) -> bool:
    """Whether a MERGE of ``change_rows`` rows into a table of ``table_bytes`` (None:
    unknown) runs with SMALL_DATA_SETTINGS."""
    return (
        change_rows <= SMALL_MERGE_ROWS
        and table_bytes is not None
        and table_bytes < SMALL_MERGE_TABLE
    )


def is_small(table_bytes: Iterable[int | None], recompute: bool = False) -> bool:
    """Whether tables of these sizes (None: unknown) are small enough for SMALL_DATA_SETTINGS,
    read by a change, or by a recompute."""
    sizes = list(table_bytes)
    limit = SMALL_RECOMPUTE if recompute else SMALL_DATA
    return all(size is not None for size in sizes) and sum(sizes) < limit


@contextmanager
def for_small_data(spark, enabled: bool = True) -> Iterator[None]:
    """Statements run inside with SMALL_DATA_SETTINGS (when ``enabled``); the session's own
    settings are back afterwards."""
    if not enabled:
        yield
        return
    with session_settings(spark, SMALL_DATA_SETTINGS):
        yield


@contextmanager
def session_settings(spark, settings: dict[str, str]) -> Iterator[None]:
    """Statements run inside with ``settings``; the session's own are back afterwards."""
    previous = {key: spark.conf.get(key, None) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, value in previous.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


def describe() -> str:
    return (
        f"a change that reads under {SMALL_DATA // 2**20} MiB of Delta data (and is small itself), "
        f"a MERGE of at most {SMALL_MERGE_ROWS:,} changed rows into a table under {SMALL_MERGE_TABLE // 2**20} MiB, "
        f"or a recompute that reads under {SMALL_RECOMPUTE // 2**20} MiB, "
        "runs interpreted (no code generation), without adaptive re-planning, on one shuffle partition"
    )
