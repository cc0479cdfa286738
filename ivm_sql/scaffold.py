"""`ivm init`: a new project's files, with one example migration and one example view."""

from __future__ import annotations

import re
from pathlib import Path

from ivm_sql.config import IDENTIFIER
from ivm_sql.errors import ConfigError, Location

CONFIG = """\
# ivm-sql project settings. Every key is optional; ivm-sql's docs/configuration.md lists them all.
{database:<23} # schema holding the tables, the views and ivm's state tables
views: views            # CREATE VIEW files (*.sql, read in name order)
migrations: migrations  # NNNN_name.sql files, applied in order by `ivm migrate`
spark:
  master: local[*]      # embedded Spark, its catalog and tables under .ivm/; or spark://host:7077, ...
  conf: {{}}              # extra Spark settings, e.g. spark.sql.shuffle.partitions: 4
refresh:
  recompute_above: 0.1  # recompute a stage when its change exceeds this share of its rows; or never
"""

MIGRATION = """\
-- A base table, created and filled once by `ivm migrate`. Add changes as new files
-- (0002_..., 0003_...): an applied statement must not be edited.
CREATE TABLE events (
  id    INT,
  kind  STRING,
  value INT
) USING DELTA;

INSERT INTO events VALUES (1, 'click', 3), (2, 'view', 1), (3, 'click', 5);
"""

VIEW = """\
-- A view ivm keeps up to date: `ivm refresh` applies only what changed in events.
CREATE VIEW events_per_kind AS
SELECT kind, COUNT(*) AS events, SUM(value) AS total
FROM events
GROUP BY kind;
"""

FILES = {
    "ivm.yaml": CONFIG,
    "migrations/0001_create_events.sql": MIGRATION,
    "views/events.sql": VIEW,
}


def database_name(folder: Path) -> str:
    """A plain identifier made from the folder's name (``my-shop`` -> ``my_shop``)."""
    name = re.sub(r"[^a-z0-9_]", "_", folder.name.lower()).strip("_")
    if name and name[0].isdigit():
        name = f"p_{name}"
    return name if IDENTIFIER.fullmatch(name) else "main"


def create_project(root: Path) -> list[Path]:
    """Write a new project into ``root`` (made if missing); the paths written. Refuses, before
    writing anything, when any of its files already exists."""
    root = root.resolve()
    targets = {root / name: text for name, text in FILES.items()}
    existing = [path for path in targets if path.exists()]
    if existing:
        raise ConfigError(
            f"{existing[0].relative_to(root)} already exists, and ivm init never overwrites a file",
            location=Location(existing[0]),
            hint="ivm init starts a new project: pick an empty folder, or edit this project's files",
        )
    for path, text in targets.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(
            text.format(database=f"database: {database_name(root)}")
            if path.name == "ivm.yaml"
            else text,
            encoding="utf-8",
        )
    return list(targets)
