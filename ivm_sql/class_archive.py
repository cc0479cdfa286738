"""Java's class-data sharing for Spark's JVM: the classes a start loads, kept parsed in a file.

A JVM that starts Spark with Delta and opens its catalog loads about 25,000 classes from some
300 jars, and reads, parses and verifies each one. Java (13 and later) can write the classes
a run loaded to an archive as it exits (``-XX:ArchiveClassesAtExit``); a later JVM maps that
archive into memory (``-XX:SharedArchiveFile``) and skips that work for every class in it.
Measured on a 2-core machine, the start, the catalog's opening and a first Delta read took
about 20 s with the archive against 26 s without (``docs/performance.md``).

An archive fits one Java build and one set of jars, so its name is a digest of both (the
``java -version`` text, pyspark's jars with their sizes and times, the jars and packages the
settings add): another JDK, pyspark or Delta gets an archive of its own. The JVM checks the
rest itself, and starts without sharing, correctly, when the archive does not fit.

Who writes it: the first JVM of a digest that is not a server (a command, a test session).
Writing takes about 15 s as that JVM exits, so the process waits for its JVM at exit, and
only then gives the archive its name: no JVM ever maps a file still being written. A JVM
killed while writing leaves a temporary file, which a later attempt removes.

Turned off by naming any class-sharing option in ivm.yaml's ``spark.driver.extraJavaOptions``
(``-Xshare:off``, or an archive of one's own).
"""

from __future__ import annotations

import atexit
import hashlib
import os
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

import pyspark

DRIVER_OPTIONS = "spark.driver.extraJavaOptions"
# options by which ivm.yaml chooses class sharing itself: ivm then adds none
USERS_OWN = ("-Xshare", "SharedArchiveFile", "ArchiveClassesAtExit")
# settings that put more classes on the driver's class path
CLASS_PATH_SETTINGS = ("spark.jars.packages", "spark.jars", "spark.driver.extraClassPath")

ARCHIVES = (
    Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "ivm-sql" / "class-archive"
)
KEEP = 3  # archives kept, the most recently written; each is about 200 MB
WRITE_TIMEOUT = 180.0  # seconds a process waits at exit for its JVM to write the archive
STALE_AFTER = 3600.0  # seconds after which a temporary file is a killed JVM's


def archive_path(
    java_version: str, settings: Mapping[str, str], folder: Path = ARCHIVES
) -> Path | None:
    """Where the archive for this Java (its ``java -version`` text) and the jars ``settings``
    put on the class path is kept; None when ivm.yaml's driver options choose class
    sharing themselves."""
    if any(option in settings.get(DRIVER_OPTIONS, "") for option in USERS_OWN):
        return None
    digest = hashlib.sha256()
    parts = [java_version, *_spark_jars(), *(settings.get(key, "") for key in CLASS_PATH_SETTINGS)]
    for part in parts:
        digest.update(part.encode())
        digest.update(b"\0")
    return folder / f"spark-{digest.hexdigest()[:20]}.jsa"


def _spark_jars() -> list[str]:
    """pyspark's jars, each with its size and time: a reinstall is another class path."""
    jars = Path(pyspark.__file__).parent / "jars"
    entries = sorted(jars.glob("*.jar")) if jars.is_dir() else []
    return [f"{jar.name} {jar.stat().st_size} {jar.stat().st_mtime_ns}" for jar in entries]


def java_option(archive: Path, record: bool) -> tuple[str, Path | None]:
    """The JVM option for ``archive``, and the temporary file the JVM writes, if it writes one.

    The archive exists: it is used. Else, if ``record``, the JVM writes a new one as it
    exits, unless an earlier JVM exited without writing one for this digest (some class
    paths cannot be archived, e.g. one naming a directory that holds files).
    """
    if archive.exists():
        return f"-XX:SharedArchiveFile={archive}", None
    if not record or _unusable(archive).exists():
        return "", None
    archive.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale(archive.parent)
    temporary = archive.with_name(f"{archive.name}.{os.getpid()}.tmp")
    # quiet: writing warns of each class it leaves out (about 1,000 lines into spark.log)
    return f"-XX:ArchiveClassesAtExit={temporary} -Xlog:cds*=off", temporary


def publish_at_exit(jvm: subprocess.Popen, temporary: Path, archive: Path) -> None:
    """When this process exits, let ``jvm`` exit and write ``temporary``, then name it
    ``archive``."""
    atexit.register(publish, jvm, temporary, archive)


def publish(jvm: subprocess.Popen, temporary: Path, archive: Path) -> None:
    """Close the JVM's standard input (pyspark's gateway exits when it closes), wait while
    the JVM writes the archive, and give it its name if the JVM exited cleanly."""
    if sys.stderr.isatty():
        print("ivm: saving Java's class archive for faster starts (once)...", file=sys.stderr)
    try:
        if jvm.stdin is not None:
            jvm.stdin.close()
        code = jvm.wait(timeout=WRITE_TIMEOUT)
    except (OSError, subprocess.TimeoutExpired, KeyboardInterrupt):
        return  # still writing, gone, or a second Ctrl-C: its file is stale within the hour
    if code != 0:
        temporary.unlink(missing_ok=True)
    elif temporary.exists():
        os.replace(temporary, archive)
    else:
        _unusable(archive).touch()


def _unusable(archive: Path) -> Path:
    """The marker left when a clean JVM exit wrote no archive for this digest."""
    return archive.with_name(f"{archive.name}.unusable")


def _remove_stale(folder: Path) -> None:
    """Remove temporary files of JVMs killed while writing, and all but the ``KEEP`` most
    recent archives."""
    now = time.time()
    for temporary in folder.glob("*.tmp"):
        if now - _written(temporary) > STALE_AFTER:
            temporary.unlink(missing_ok=True)
    archives = sorted(folder.glob("*.jsa"), key=_written, reverse=True)
    for old in archives[KEEP - 1 :]:  # room for the one about to be written
        old.unlink(missing_ok=True)


def _written(path: Path) -> float:
    """When ``path`` was last written; 0 if another process removed it meanwhile."""
    try:
        return path.stat().st_mtime
    except FileNotFoundError:
        return 0.0
