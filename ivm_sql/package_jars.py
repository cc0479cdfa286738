"""The jars of ``spark.jars.packages`` (Delta's and any ivm.yaml adds), resolved by Ivy once.

Each JVM started with ``spark.jars.packages`` has Spark resolve them through Ivy again,
though every jar is in the Ivy cache: about 2 s of a 10 s start on a 2-core machine, and
Spark also copies each resolved jar (about 90 MB for Delta 4.4's 33) into the start's
temporary folder, since it adds them to ``spark.files`` and ``spark.submit.pyFiles`` as
well. So the first start of a package list resolves it and writes down the jars it got; a
later start with the same list and Ivy settings names those jars in ``spark.jars`` instead,
which puts the same jars on the driver's class path and ships them to executors the same way
(``docs/performance.md``). A jar gone from disk (an Ivy cache cleared) makes Ivy resolve again.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import urllib.parse
from collections.abc import Mapping
from pathlib import Path

PACKAGES = "spark.jars.packages"
JARS = "spark.jars"
# the settings Ivy's resolution depends on: the same values give the same jars
IVY_SETTINGS = (
    PACKAGES,
    "spark.jars.repositories",
    "spark.jars.excludes",
    "spark.jars.ivy",
    "spark.jars.ivySettings",
)

RESOLVED = (
    Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "ivm-sql" / "package-jars"
)


def record_path(settings: Mapping[str, str], folder: Path = RESOLVED) -> Path | None:
    """Where the jars Ivy resolves for ``settings`` are written down; None without packages."""
    if not settings.get(PACKAGES, "").strip():
        return None
    digest = hashlib.sha256()
    for key in IVY_SETTINGS:
        digest.update(settings.get(key, "").encode())
        digest.update(b"\0")
    return folder / f"{digest.hexdigest()[:20]}.txt"


def resolved(record: Path | None) -> list[str] | None:
    """The jars written down in ``record``, if each is still on disk."""
    if record is None or not record.is_file():
        return None
    jars = [line for line in record.read_text().splitlines() if line]
    return jars if _on_disk(jars) else None


def without_resolution(settings: Mapping[str, str], jars: list[str]) -> dict[str, str]:
    """``settings`` with the packages replaced by their resolved ``jars``, after the user's own."""
    named = {**settings}
    del named[PACKAGES]
    named[JARS] = ",".join([*_entries(settings.get(JARS, "")), *jars])
    return named


def write_down(record: Path, started_jars: str, settings: Mapping[str, str]) -> None:
    """Write the jars a start resolved: its ``spark.jars`` less the user's own (by file
    name: Spark rewrites their paths as URIs). Written whole, then renamed into place; a
    cache that cannot be written is left alone (Ivy resolves at each start, as before)."""
    own = {_file_name(entry) for entry in _entries(settings.get(JARS, ""))}
    jars = [_local_path(e) for e in _entries(started_jars) if _file_name(e) not in own]
    if not _on_disk(jars):
        return  # not local files: resolved again at the next start
    temporary = record.with_name(f"{record.name}.{os.getpid()}.tmp")
    try:
        record.parent.mkdir(parents=True, exist_ok=True)
        temporary.write_text("".join(f"{jar}\n" for jar in jars))
        os.replace(temporary, record)
    except OSError:
        with contextlib.suppress(OSError):  # no folder, or one that refuses files
            temporary.unlink()


def _on_disk(jars: list[str]) -> bool:
    return bool(jars) and all(Path(jar).is_file() for jar in jars)


def _entries(jars: str) -> list[str]:
    return [entry.strip() for entry in jars.split(",") if entry.strip()]


def _local_path(entry: str) -> str:
    """A ``file:`` URI's path, or the entry as it is."""
    parsed = urllib.parse.urlparse(entry)
    return urllib.parse.unquote(parsed.path) if parsed.scheme == "file" else entry


def _file_name(entry: str) -> str:
    return Path(_local_path(entry)).name
