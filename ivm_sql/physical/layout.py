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
"""

from __future__ import annotations

from collections.abc import Iterable

from ivm_sql.physical import checkpoints

# Rows above which a stage table gets deletion vectors after its first load.
DELETION_VECTORS_ABOVE_ROWS = 1_000_000

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


def describe() -> str:
    return (
        f"stage tables keep a change data feed; deletion vectors once a load writes over {DELETION_VECTORS_ABOVE_ROWS:,} rows; "
        f"{checkpoints.describe()}"
    )
