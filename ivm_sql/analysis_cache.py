"""What Spark's analysis said in earlier commands, kept in ``.ivm/analysis.json``.

A compile asks Spark for each view's output schema and each source table's columns. Both
are pure: a SELECT analyzed over the same input columns gives the same schema, and a Delta
table's version always has the same columns. In one process ``SparkCatalog`` remembers
them; this file carries them from a command that succeeded to the next ``ivm`` command, so a command served by
``ivm server`` makes no round trip for them (0.05-0.15 s each, measured in
docs/performance.md).

The answers also depend on the Spark that gave them and on its SQL settings, so the file
is keyed by the pyspark and Delta versions and ivm.yaml's ``spark.conf``: a change of
either starts it afresh. It is only used for sessions ivm builds from ivm.yaml on this
machine's own install (embedded, or ``ivm server``); a session handed in by the caller or
a ``spark.remote`` endpoint may run another Spark with other settings.
"""

from __future__ import annotations

import json
import os
import tempfile
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

FILE = "analysis.json"
# Entries kept per kind; the oldest go first. A compile of a project needs one per view
# and per source table version, so this covers many edits of a large project.
LIMIT = 4000


def _version(package: str) -> str:
    try:
        return version(package)
    except PackageNotFoundError:
        return "unknown"


def spark_identity(conf: dict[str, str]) -> str:
    """What the answers depend on besides the query: the Spark and Delta that gave them,
    and the settings ivm.yaml gives the session."""
    return json.dumps([_version("pyspark"), _version("delta-spark"), sorted(conf.items())])


class AnalysisCache:
    """Two dicts, ``schemas`` and ``columns``, for ``SparkCatalog``, loaded from and saved to
    one file. A missing, unreadable or foreign file is an empty cache, never an error."""

    def __init__(self, path: Path | None, identity: str = ""):
        self.path = path
        self.identity = identity
        self.schemas: dict = {}
        self.columns: dict = {}
        self._saved: tuple[int, int] = (0, 0)
        if path is not None:
            self._load()

    def _load(self) -> None:
        try:
            document = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return
        if not isinstance(document, dict) or document.get("identity") != self.identity:
            return
        try:
            self.schemas = {_key(k): [tuple(c) for c in v] for k, v in document["schemas"]}
            self.columns = {_key(k): [tuple(c) for c in v] for k, v in document["columns"]}
        except (KeyError, TypeError, ValueError):
            self.schemas, self.columns = {}, {}
        self._saved = (len(self.schemas), len(self.columns))

    def save(self) -> None:
        """Write the file if anything was added since it was read (atomically: a command
        stopped midway leaves the old file or the new one, not half of one)."""
        if self.path is None or self._saved == (len(self.schemas), len(self.columns)):
            return
        document = {
            "identity": self.identity,
            "schemas": [[k, v] for k, v in list(self.schemas.items())[-LIMIT:]],
            "columns": [[k, v] for k, v in list(self.columns.items())[-LIMIT:]],
        }
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(
                "w", dir=self.path.parent, delete=False, encoding="utf-8"
            ) as out:
                json.dump(document, out)
            os.replace(out.name, self.path)
        except OSError:
            return  # a read-only project still works, only without the saved answers
        self._saved = (len(self.schemas), len(self.columns))


def _key(value):
    """A dict key from its JSON form: lists back to the tuples they were."""
    return tuple(_key(v) for v in value) if isinstance(value, list) else value
