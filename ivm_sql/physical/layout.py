"""How a stage's Delta table is laid out, so that the MERGEs into it stay cheap.

Every stage table keeps a change data feed: it is how the stages and views above it read
its changes. Deletion vectors let a MERGE mark the rows it changes instead of rewriting the
files holding them, which pays off only for a large table: on a small one, writing the
vectors costs more than rewriting its one or two files (measured: the MERGEs of TPC-H's
stage tables at SF 0.01 took about 20% less time without them). So a table starts without
them, and gets them once its first load shows it is large.
"""

from __future__ import annotations

# Rows above which a stage table gets deletion vectors after its first load.
LARGE_TABLE = 1_000_000

TABLE_PROPERTIES = {
    "delta.enableChangeDataFeed": "true",
    "delta.enableDeletionVectors": "false",
}


def properties_after_load(rows: int) -> dict[str, str]:
    """Properties to set on a stage table whose first load (or recompute) wrote ``rows``."""
    return {"delta.enableDeletionVectors": "true"} if rows > LARGE_TABLE else {}


def describe() -> str:
    return (
        f"stage tables keep a change data feed; deletion vectors once a load writes over {LARGE_TABLE:,} rows"
    )
