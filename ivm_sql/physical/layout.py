"""How a stage's Delta table is laid out, so that the MERGEs into it stay cheap.

Every stage table keeps a change data feed: it is how the stages and views above it read
its changes. Deletion vectors let a MERGE mark the rows it changes instead of rewriting the
files holding them, which pays off only for a large table: on a small one, writing the
vectors costs more than rewriting its one or two files (measured: the MERGEs of TPC-H's
stage tables at SF 0.01 took about 20% less time without them). So a table starts without
them, and gets them once its first load shows it is large.

A view may name its columns anything Spark accepts (`a col`, `n,1`, `x=y`), but Delta refuses
a column name holding a space, tab, newline or any of ``,;{}()=`` unless the table has column
mapping (``delta.columnMapping.mode = name``). Only a table with such a column gets it, for three
reasons: it upgrades the table's protocol to reader 3 / writer 7 (table features), which
older Delta readers of ivm's tables cannot read; Delta refuses a commit that turns it on
and writes files while the change data feed is on (DELTA_BLOCK_COLUMN_MAPPING_AND_CDC_OPERATION),
so such a table is created with the feed off and turns it on in a second commit; and it
bought nothing measurable where it is not needed (MERGE of 50 rows into 20,000, a change
data feed read and a scan: within the noise of a busy 2-core machine either way).

A stage whose MERGE finds rows by a key (a group's, a DISTINCT row's, a recomputed key's) is
written in that key's order by a full load that reads at least ``KEY_ORDER_FROM_BYTES``, at
most ``FILE_ROWS`` rows a file: each file then holds one range of keys, and a MERGE rewrites
(or marks, with deletion vectors) only the files whose range its change's keys fall in.
Without it a hash aggregate spreads every range over every file, and a change of a few
thousand keys rewrites them all: an official TPC-H set's refresh of a stage of 1.5 million
order keys took 3.88 s in key order against 4.83 s (``bench/layout.py``, medians of 4; TPC-H's
order keys change in slabs). The order costs the load a sort (a sampling job and a range
shuffle; about 1.5 s there), so a load reading less, whose table has a file or two, is
written as Spark writes it. A view's table laid out as its CREATE VIEW asks (PARTITIONED BY,
CLUSTER BY) is left so (``ViewPlan.key_order``).
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlglot import exp

from ivm_sql.physical import checkpoints
from ivm_sql.sqlbuild import col, subquery

# Rows above which a stage table gets deletion vectors after its first load.
DELETION_VECTORS_ABOVE_ROWS = 1_000_000
# A full load reading at least this many bytes of Delta data writes a stage in key order,
# at most FILE_ROWS rows a file (Spark's spark.sql.files.maxRecordsPerFile, which Delta honours).
KEY_ORDER_FROM_BYTES = 16 * 2**20
FILE_ROWS = 100_000

TABLE_PROPERTIES = {
    "delta.enableChangeDataFeed": "true",
    "delta.enableDeletionVectors": "false",
    # ivm writes the checkpoints after the refresh's commits (``physical.checkpoints``)
    **checkpoints.TABLE_PROPERTIES,
}


# Delta's DELTA_INVALID_CHARACTERS_IN_COLUMN_NAMES: refused in a column name without mapping.
INVALID_CHARACTERS = frozenset(" ,;{}()\n\t=")
CHANGE_FEED_OFF = {"delta.enableChangeDataFeed": "false", "delta.columnMapping.mode": "name"}


def needs_column_mapping(columns: Iterable[str]) -> bool:
    """Whether Delta accepts these column names only in a table with column mapping."""
    return any(INVALID_CHARACTERS.intersection(name) for name in columns)


def creation_properties(columns: Iterable[str]) -> dict[str, str]:
    """Properties of a stage table created with these columns (its feed is turned on after
    its first load when it needs column mapping: ``properties_after_load``)."""
    return (
        {**TABLE_PROPERTIES, **CHANGE_FEED_OFF}
        if needs_column_mapping(columns)
        else dict(TABLE_PROPERTIES)
    )


def properties_after_load(rows: int, created_mapped: bool = False) -> dict[str, str]:
    """Properties to set on a stage table whose first load (or recompute) wrote ``rows``;
    ``created_mapped``: the load created it with column mapping, and its feed still off."""
    properties = (
        {"delta.enableDeletionVectors": "true"} if rows > DELETION_VECTORS_ABOVE_ROWS else {}
    )
    if created_mapped:
        properties["delta.enableChangeDataFeed"] = "true"
    return properties


def key_ordered(
    query: exp.Query, keys: tuple[str, ...], read_bytes: int | None
) -> tuple[exp.Query, dict[str, str]]:
    """The query a full load of a stage whose MERGE matches ``keys`` writes, and the session
    settings it runs with: in key order, FILE_ROWS rows a file, when it reads at least
    KEY_ORDER_FROM_BYTES (``read_bytes``; None: unknown, as large); else ``query`` as it is."""
    columns = query.named_selects
    if not keys or "*" in columns or (read_bytes is not None and read_bytes < KEY_ORDER_FROM_BYTES):
        return query, {}
    ordered = (
        exp.select(*(col(c) for c in columns))
        .from_(subquery(query, "loaded"))
        .order_by(*(col(k) for k in keys))
    )
    return ordered, {"spark.sql.files.maxRecordsPerFile": str(FILE_ROWS)}


def compaction(
    keys: tuple[str, ...], rows: int | None, size: int | None
) -> tuple[tuple[str, ...], dict[str, str]]:
    """What `ivm optimize` clusters a stage table of ``rows`` rows and ``size`` bytes by, and
    the session settings its OPTIMIZE runs with. A plain compaction packs small files into
    one of up to 1 GB, which would put every range of a stage laid out by key back into one
    file; such a stage is rewritten by its leading key instead (``ZORDER BY`` one column is a
    range partitioning by it) into files of about FILE_ROWS rows' bytes. Any other table, or
    one of at most FILE_ROWS rows, is compacted as Delta does."""
    if not keys or rows is None or size is None or rows <= FILE_ROWS:
        return (), {}
    return keys[:1], {
        "spark.databricks.delta.optimize.maxFileSize": str(max(1, size * FILE_ROWS // rows)),
        # a recomputed key is stored last, perhaps beyond the columns Delta keeps statistics of
        "spark.databricks.delta.optimize.zorder.checkStatsCollection.enabled": "false",
    }


def describe() -> str:
    return (
        f"stage tables keep a change data feed; deletion vectors once a load writes over {DELETION_VECTORS_ABOVE_ROWS:,} rows; "
        f"a load reading {KEY_ORDER_FROM_BYTES // 2**20} MiB or more writes a keyed stage in key order, "
        f"{FILE_ROWS:,} rows a file; {checkpoints.describe()}"
    )
