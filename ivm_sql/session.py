"""Starting Spark with Delta Lake: a Java check, the settings ivm relies on, and a quiet start.

With a ``local`` master Spark runs embedded in this process. With any master it keeps a
persistent catalog (Derby metastore and warehouse) under ``<project>/.ivm/``, so tables made
by one ``ivm`` command are there for the next: the metastore lives in the driver, which is
this process whatever the master, and the warehouse is a folder the executors write to, so
on a cluster it must be a path they all reach (one machine, a shared filesystem, or an
object store set by ``spark.sql.warehouse.dir`` in ivm.yaml's ``spark.conf``). A real
cluster usually has its own Hive metastore: naming it in ``spark.conf``
(``spark.hadoop.hive.metastore.uris``, or a ``javax.jdo`` connection URL) turns the
``.ivm`` defaults off. ``spark.sql.catalogImplementation: in-memory`` there keeps the
catalog in the process instead (the tests' session), forgotten when it ends. The JVM's console output goes to ``<project>/.ivm/spark.log``
unless ``verbose`` is set.

Instead of starting a JVM, a command connects through Spark Connect when ``ivm.yaml`` names
an endpoint (``spark.remote``) or the project's own server runs (``ivm server start``,
``ivm_sql.server``), which keeps the same catalog warm between commands. Either may want a
token (``Token``): the project's server keeps its own in ``.ivm/server.json``; a remote's is
read from the environment variable ivm.yaml names (``spark.token_env``).
"""

from __future__ import annotations

import fcntl
import logging
import os
import re
import shutil
import subprocess
import sys
import threading
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path

from delta import configure_spark_with_delta_pip
from pyspark import SparkContext
from pyspark.logger import PySparkLogger
from pyspark.sql import SparkSession

from ivm_sql.class_archive import DRIVER_OPTIONS, archive_path, java_option, publish_at_exit
from ivm_sql.config import TOKEN_HINT, Config, SparkSettings, connect_address
from ivm_sql.errors import EnvironmentProblem
from ivm_sql.package_jars import record_path, resolved, without_resolution, write_down
from ivm_sql.server_record import Token, answers, endpoint, server_token

MIN_JAVA = 17
JAVA_ADVICE = f"Install OpenJDK {MIN_JAVA} (e.g. `apt-get install openjdk-{MIN_JAVA}-jre-headless`) and set JAVA_HOME."

# Settings of the sessions ivm refreshes in: ivm's own (below), and the session each refresh
# makes of a user's own (``Project.open(spark=...)``, ``apply_refresh_settings``), unless that sets them.
REFRESH_SETTINGS: dict[str, str] = {
    # Where the session, the JVM or the machine is not on UTC, Delta checks the file list each
    # commit keeps in its checksum file against a full replay of the log, a Spark job per
    # commit (a guard for pre-1883 timestamps' offsets, Snapshot.
    # allFilesInCrcVerificationForceEnabled); it still checks that list at every checkpoint.
    # bench/writes.py at 200 rows, TZ=America/Los_Angeles: a plain append 0.79 s against
    # 0.35 s on UTC, a MERGE 1.33 s against 1.03 s.
    "spark.databricks.delta.allFilesInCrc.verificationMode.forceOnNonUTC.enabled": "false",
    # Partitions of Delta's log replay, which rebuilds a table's file list after each commit
    # and before each MERGE (Delta's default is 50). One, not two: on TPC-H SF 0.01 an
    # incremental round of the 22 views took 63-66 s with 1 against 108-116 s with 2, and a
    # MERGE into 20,000 rows 2.7 s against 7.1 s (medians of 5, alternating, same session).
    # A user's own session that leaves Delta's 50 gets 1 for its refreshes too: at TPC-H SF 1
    # its first refresh took 236.6 s without it and 131.8 s with it, against 135.9 s in
    # ivm's own session (docs/performance.md).
    # A cluster with large tables may want more: ivm.yaml's spark.conf, or a value the
    # user's session sets, wins.
    "spark.databricks.delta.snapshotPartitions": "1",
}

# Settings every ivm session has; ivm.yaml's spark.conf is applied after these and wins.
BASE_SETTINGS: dict[str, str] = {
    **REFRESH_SETTINGS,
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    "spark.sql.sources.default": "delta",
    "spark.sql.legacy.createHiveTableByDefault": "false",
    "spark.databricks.delta.properties.defaults.enableChangeDataFeed": "true",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "4",
    "spark.sql.session.timeZone": "UTC",
    # Local files through Hadoop's raw file system, not its checksummed one. Without Hadoop's
    # native library (pyspark ships none), Hadoop starts a process to chmod each file it
    # creates and to readlink each path of a commit's rename (about 5 ms each here); the
    # checksummed one writes and renames a .crc file beside each file, which doubles them.
    # Delta checksums each commit itself. Measured: a one-row INSERT started 23 processes and
    # a MERGE 25, against 12 and 13 (docs/performance.md). file: paths only.
    "spark.hadoop.fs.file.impl": "org.apache.hadoop.fs.RawLocalFileSystem",
    "spark.hadoop.fs.AbstractFileSystem.file.impl": "org.apache.hadoop.fs.local.RawLocalFs",
    # A refresh's worker threads (runtime.workers) each run in a pool of their own, so one
    # view's jobs do not queue behind another's: FAIR shares the cores between the pools.
    "spark.scheduler.mode": "FAIR",
}

# Java's parallel collector for an embedded JVM, not its default G1: a refresh makes
# short-lived garbage in bursts of small statements and nothing waits on a pause, so
# throughput wins. Measured on this 2-core machine (docs/performance.md, 2026-11-30): the
# tests' session 5-15% faster than with G1, `ivm server start` 2-3 s sooner, the demo's
# one-order refreshes within the machine's noise. Not added when ivm.yaml's driver options
# choose a collector (Java refuses to start with two), nor for a cluster's driver, whose
# work is elsewhere.
EMBEDDED_GC = "-XX:+UseParallelGC"
GC_OPTION = re.compile(r"-XX:[+-]?Use\w*GC\b")

# One lock for the machine's Spark starts: see ivy_lock.
IVY_LOCK = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "ivm-sql" / "ivy.lock"
# Seconds to wait for a Spark Connect endpoint's port to accept a connection.
CONNECT_TIMEOUT = 3.0
# spark.conf keys that name a catalog outside the project: the .ivm metastore and warehouse
# are then left to it.
EXTERNAL_METASTORE = (
    "spark.hadoop.hive.metastore.uris",
    "spark.hadoop.javax.jdo.option.ConnectionURL",
)

# pyspark logs every failed query with its whole Java stack to stderr through these.
QUERY_CONTEXT_LOGGERS = ("SQLQueryContextLogger", "DataFrameQueryContextLogger")


def find_java() -> str | None:
    """The java executable Spark will use: ``$JAVA_HOME/bin/java``, else ``java`` on PATH."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home:
        candidate = Path(java_home, "bin", "java")
        if os.access(candidate, os.X_OK):
            return str(candidate)
    return shutil.which("java")


def java_major_version(version_output: str) -> int | None:
    """The major version in ``java -version`` output (``1.8.0_292`` is 8, ``17.0.15`` is 17)."""
    match = re.search(r'version "(\d+)(?:\.(\d+))?', version_output)
    if not match:
        return None
    major = int(match.group(1))
    if major == 1 and match.group(2):
        return int(match.group(2))
    return major


def check_java() -> str:
    """Raise EnvironmentProblem unless Java 17 or newer is available to run Spark; return
    its ``java -version`` text."""
    java = find_java()
    found = "none"
    if java:
        try:
            result = subprocess.run(
                [java, "-version"], capture_output=True, text=True, timeout=60, check=False
            )
            version = result.stderr + result.stdout
            major = java_major_version(version)
        except (OSError, subprocess.SubprocessError):
            major = None
        if major is not None and major >= MIN_JAVA:
            return version
        found = f"Java {major}" if major is not None else f"an unusable java at {java}"
    raise EnvironmentProblem(
        f"Java {MIN_JAVA} or newer is required to run Spark; found {found}. {JAVA_ADVICE}"
    )


def session_settings(config: Config, project_dir: Path) -> dict[str, str]:
    """All Spark settings for ``config``: ivm's, then ivm.yaml's spark.conf, which wins.

    ``spark.driver.extraJavaOptions`` from ivm.yaml is added to ivm's rather than replacing them.
    """
    settings = dict(BASE_SETTINGS)
    if _local_catalog(config):
        state = (project_dir / ".ivm").resolve()
        settings["spark.sql.warehouse.dir"] = str(state / "warehouse")
        settings["spark.hadoop.javax.jdo.option.ConnectionURL"] = (
            f"jdbc:derby:;databaseName={state / 'metastore_db'};create=true"
        )
        settings["spark.driver.extraJavaOptions"] = (
            f"-Dderby.stream.error.file={state / 'derby.log'}"
        )
    for key, value in config.spark.conf.items():
        if key == "spark.driver.extraJavaOptions" and key in settings:
            # Appended, so derby.log stays in .ivm; a later -D of the same name still wins.
            value = f"{settings[key]} {value}"
        settings[key] = value
    return settings


def apply_refresh_settings(session, parent) -> None:
    """Give ``session``, made from ``parent`` for one refresh, the REFRESH_SETTINGS that
    ``parent`` does not set: a user's own session stays as it is."""
    if session is parent:  # over Spark Connect, where a session has no child
        return
    for key, value in REFRESH_SETTINGS.items():
        if parent.conf.get(key, None) is None:
            session.conf.set(key, value)


def start_settings(config: Config, project_dir: Path) -> dict[str, str]:
    """``session_settings`` plus what a JVM needs at its start: Delta's jars (beside any
    packages ivm.yaml adds) and, for the embedded catalog, Hive's."""
    settings = session_settings(config, project_dir)
    user_packages = [p for p in settings.pop("spark.jars.packages", "").split(",") if p.strip()]
    # Delta's helper names its jar for this pyspark; it writes only to a builder, so a spare
    # one is asked for the setting (pyspark is pinned, so its _options stays where it is).
    delta = configure_spark_with_delta_pip(SparkSession.Builder(), extra_packages=user_packages)
    settings["spark.jars.packages"] = delta._options["spark.jars.packages"]
    # Hive's catalog for any master: without it the catalog is in memory and forgets every
    # table when the command ends. Delta's jars are resolved by the driver, and each executor
    # fetches them from the driver's file server when it starts. ivm.yaml may say
    # ``in-memory`` for a process that makes its tables each time (the tests' session): every
    # catalog lookup then skips the metastore's Derby queries.
    settings.setdefault("spark.sql.catalogImplementation", "hive")  # enableHiveSupport()'s
    if config.is_embedded and not GC_OPTION.search(settings.get(DRIVER_OPTIONS, "")):
        settings[DRIVER_OPTIONS] = f"{settings.get(DRIVER_OPTIONS, '')} {EMBEDDED_GC}".strip()
    return settings


@contextmanager
def ivy_lock(path: Path = IVY_LOCK) -> Iterator[None]:
    """Hold a lock shared by every process of the machine while a JVM starts that resolves
    its packages through Ivy (the first of a package list: ``package_jars``).

    Such a JVM resolves Delta's jars through Ivy in ``~/.ivy2.5.2``; two starts at the
    same moment on a fresh machine download into the same files and both fail ("Downloaded
    file size (0) doesn't match expected Content Length"). One at a time, the second finds
    the jars cached. flock is released by the kernel if the holder dies.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def remote_token(spark: SparkSettings) -> Token | None:
    """The token for ``spark.remote``, from the environment variable ivm.yaml names in
    ``spark.token_env``; None when it names none. Named but unset (or empty) is an error."""
    name = spark.token_env
    if name is None:
        return None
    value = os.environ.get(name, "")
    if not value:
        raise EnvironmentProblem(
            f"spark.token_env in ivm.yaml names the environment variable {name}, which is {'empty' if name in os.environ else 'not set'}",
            hint=f"set {name} to the token of the Spark Connect server at {spark.remote}",
        )
    return Token(
        value,
        f"the environment variable {name}",
        f"set {name} to the token of the server at {spark.remote}",
    )


def connect_session(
    url: str, settings: dict[str, str] | None = None, token: Token | None = None
) -> SparkSession:
    """A Spark Connect session at ``url`` (a URL without a token), sending ``token``;
    ``settings`` are set on it (Spark ignores the ones fixed at the server's start). An
    endpoint that does not answer is one message, at once, not pyspark's minutes of
    retries; so is one that refuses the token (or its absence)."""
    host, port = connect_address(url)
    if not answers(host, port, CONNECT_TIMEOUT):
        raise EnvironmentProblem(
            f"no Spark Connect server answers at {url}",
            hint="start it, or fix spark.remote in ivm.yaml (or run `ivm server start`)",
        )
    from pyspark.sql.connect.client.retries import DefaultPolicy

    builder = SparkSession.builder.remote(_with_token(url, token))
    try:
        spark = builder.getOrCreate()  # no call to the server yet
        # pyspark retries an unreachable server for about 10 minutes; a few seconds is enough
        # to ride out a hiccup, and a server that died mid-command then fails the command.
        spark.client.set_retry_policies([DefaultPolicy(max_retries=4)])
        spark.version  # noqa: B018 (the first call: a refused token shows here)
        for key, value in (settings or {}).items():
            builder = builder.config(key, value)
        builder.getOrCreate()  # sets them on the session just made
    except Exception as exc:  # a missing client package, a refused token, ...
        _forget_failed_session()
        raise _connect_failure(url, token, exc) from None
    quiet_query_logs()
    return spark


def quiet_query_logs() -> None:
    """No log record, with its Java stack, of each failed query: ivm says what failed."""
    for name in QUERY_CONTEXT_LOGGERS:
        PySparkLogger.getLogger(name).setLevel(logging.CRITICAL)


def _with_token(url: str, token: Token | None) -> str:
    """``url`` with ``;token=`` among its parameters (pyspark's form; the value quoted)."""
    if token is None:
        return url
    quoted = urllib.parse.quote(token.value, safe="")
    return f"{url};token={quoted}" if "/;" in url else f"{url.rstrip('/')}/;token={quoted}"


def _connect_failure(url: str, token: Token | None, exc: Exception) -> EnvironmentProblem:
    """One message for a failed connection; a refused token (or a missing one) in words."""
    text = str(exc)
    if "UNAUTHENTICATED" not in text:
        return EnvironmentProblem(
            f"cannot connect to Spark at {url}: {text.strip().splitlines()[0]}"
        )
    if token is None:
        return EnvironmentProblem(
            f"the Spark Connect server at {url} refused the connection: it asks for a token, and ivm sent none",
            hint=TOKEN_HINT,
        )
    return EnvironmentProblem(
        f"the Spark Connect server at {url} refused the token from {token.source}: it is not the server's token",
        hint=token.hint,
    )


def _forget_failed_session() -> None:
    """Stop the Connect session a failed connection left behind, if any: pyspark keeps it as
    the process's default, and would hand it to the next ``getOrCreate`` whatever its URL."""
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    failed = ConnectSession.getActiveSession()
    if failed is not None:
        try:
            failed.stop()
        except Exception:  # stopping tells the server, which may refuse that too
            pass


def is_connect(spark) -> bool:
    """Whether ``spark`` is a Spark Connect session (no JVM in this process)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def cancel_jobs(spark) -> None:
    """Cancel the Spark jobs this session runs now: over Spark Connect, its operations on
    the server; embedded, every job of the local SparkContext."""
    if is_connect(spark):
        spark.interruptAll()
    else:
        spark.sparkContext.cancelAllJobs()


# In the server (``ivm_sql.host``), the session of the command a thread runs: every command
# gets a session of its own on the server's one Spark.
_hosted = threading.local()


@contextmanager
def hosted(spark: SparkSession) -> Iterator[None]:
    """Inside, ``build_session`` in this thread returns ``spark``."""
    _hosted.spark = spark
    try:
        yield
    finally:
        _hosted.spark = None


def _local_catalog(config: Config) -> bool:
    """Whether the catalog is the project's own Derby metastore under ``.ivm`` (any master),
    rather than an external metastore named in ivm.yaml's spark.conf."""
    return not any(key in config.spark.conf for key in EXTERNAL_METASTORE)


def build_session(config: Config, project_dir: Path, verbose: bool = False) -> SparkSession:
    """Start (or reuse) the Spark session for a project.

    A session already running in this process is returned as it is: Spark allows one
    per process, and its settings were fixed when it started. Next, ``spark.remote`` or the
    project's running server (``ivm server start``) is connected to. Otherwise a JVM starts;
    the first start on a machine fetches Delta's jar from Maven Central (through Ivy) and
    caches it.
    """
    hosted = getattr(_hosted, "spark", None)
    if hosted is not None:
        return hosted
    existing = SparkSession.getActiveSession()
    if existing is not None:
        return existing
    if config.spark.remote is not None:
        return connect_session(
            config.spark.remote, session_settings(config, project_dir), remote_token(config.spark)
        )
    record = endpoint(project_dir)
    if record is not None:  # the server was started with this project's settings
        return connect_session(record.url, token=server_token(record))
    return embedded_session(config, project_dir, verbose)


def embedded_session(
    config: Config,
    project_dir: Path,
    verbose: bool = False,
    extra: dict[str, str] | None = None,
    record_classes: bool = True,
) -> SparkSession:
    """Start Spark in this process with the project's settings and ``extra`` ones (the
    server's Connect endpoint, ``ivm_sql.host``), and open its catalog.

    The JVM maps the class archive of this Java and these jars (``class_archive``); when
    there is none yet and ``record_classes`` is set, it writes one as this process exits (a
    server does not: its stop must not wait for that)."""
    java_version = check_java()
    if config.is_embedded:
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    state_dir = project_dir / ".ivm"
    state_dir.mkdir(parents=True, exist_ok=True)
    log_path = state_dir / "spark.log"

    settings = {**start_settings(config, project_dir), **(extra or {})}
    archive = archive_path(java_version, settings)  # named by the packages, resolved or not
    record = record_path(settings)
    jars = resolved(record)
    if jars is not None:  # Ivy resolved these packages before: their jars, named
        settings = without_resolution(settings, jars)
    recording = None
    if archive is not None:
        option, recording = java_option(archive, record_classes)
        if option:
            settings[DRIVER_OPTIONS] = f"{settings.get(DRIVER_OPTIONS, '')} {option}".strip()
    builder = SparkSession.builder.master(config.spark.master).appName(config.spark.app_name)
    for key, value in settings.items():
        builder = builder.config(key, value)

    log_start = log_path.stat().st_size if log_path.exists() else 0
    try:
        with ivy_lock() if jars is None else nullcontext():
            if verbose:
                spark = builder.getOrCreate()
            else:
                with _console_to(log_path):
                    spark = builder.getOrCreate()
    except Exception as exc:  # pyspark raises several unrelated types when the JVM fails
        first_line = next(iter(str(exc).strip().splitlines()), type(exc).__name__)
        detail = "" if verbose else last_log_lines(log_path, log_start)
        reason = detail or first_line
        raise EnvironmentProblem(
            f"Spark did not start: {reason}",
            hint="see the output above" if verbose else f"see {log_path}; run with --verbose",
        ) from exc
    if record is not None and jars is None:
        write_down(record, spark.sparkContext.getConf().get("spark.jars", ""), settings)
    jvm = getattr(SparkContext._gateway, "proc", None)
    if recording is not None and archive is not None and jvm is not None:
        publish_at_exit(jvm, recording, archive)
    spark.sparkContext.setLogLevel("WARN" if verbose else "ERROR")
    if not verbose:
        quiet_query_logs()
    if _local_catalog(config):
        _open_catalog(spark, log_path, log_start)
    return spark


def _open_catalog(spark: SparkSession, log_path: Path, log_start: int) -> None:
    """Touch the embedded catalog now, so a locked one is one clear message, not a stack."""
    try:
        spark.catalog.listDatabases()
    except Exception as exc:  # the Hive client wraps Derby's error several times over
        text = log_path.read_text(errors="replace")[log_start:] if log_path.exists() else ""
        if derby_locked(text + str(exc)):
            raise EnvironmentProblem(
                f"another ivm command is using this project's catalog ({log_path.parent / 'metastore_db'}) right now",
                hint="wait for it to finish: the embedded catalog admits one process at a time",
            ) from None
        raise EnvironmentProblem(
            f"the catalog did not open: {str(exc).strip().splitlines()[0]}", hint=f"see {log_path}"
        ) from None


def derby_locked(text: str) -> bool:
    """Whether Spark's error or log says the embedded catalog is open in another process."""
    return "XSDB6" in text or "Another instance of Derby" in text


@contextmanager
def _console_to(log_path: Path) -> Iterator[None]:
    """Point file descriptors 1 and 2 at ``log_path`` for the duration, then restore them.

    Spark's JVM is a child process that inherits these descriptors when it starts, so
    it keeps writing its logs to the file after they are restored here.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.dup2(log_fd, 1)
        os.dup2(log_fd, 2)
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (log_fd, *saved):
            os.close(fd)


def last_log_lines(log_path: Path, start: int, count: int = 3) -> str:
    """The last few lines the failed start wrote to the log, without stack frames."""
    try:
        with log_path.open("rb") as log:
            log.seek(start)
            text = log.read().decode("utf-8", errors="replace")
    except OSError:
        return ""
    lines = [
        line.strip()
        for line in text.splitlines()
        if line.strip() and not re.match(r"\s*(at |\.\.\. \d+ more|Caused by: \.\.\.)", line)
    ]
    return " / ".join(lines[-count:])
