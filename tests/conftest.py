"""Shared fixtures: one Spark session for the whole run, and throwaway projects."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml
from pyspark.sql import SparkSession

from ivm_sql.class_archive import archive_path
from ivm_sql.config import Config, SparkSettings
from ivm_sql.session import build_session, check_java, start_settings

MakeProject = Callable[[dict[str, str]], Path]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test that uses the ``spark`` fixture with ``spark``."""
    for item in items:
        if "spark" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.spark)


# The test tables hold a few rows, so adaptive query execution only adds planning work.
SESSION_SETTINGS = {
    "spark.sql.shuffle.partitions": "2",
    "spark.sql.adaptive.enabled": "false",
    # hundreds of Delta tables by the end of the run: with Spark's default 1g heap, the
    # TPC-H comparisons ran out of memory for broadcasts (or timed out in GC)
    "spark.driver.memory": "4g",
    # The session's tables live as long as the run: a catalog in memory, not Hive's on Derby
    # (the commands and servers the tests start keep Hive's, as users' do). Measured: six
    # tests of test_refresh.py 120 s with Hive, 92 s without; Derby's queries and the
    # metastore's folder permissions were a sixth of the JVM's samples.
    "spark.sql.catalogImplementation": "in-memory",
    # Spark keeps the last 100 classes Janino compiled; the run's statements repeat in
    # shapes (each oracle refreshes the same views round after round), so more of them are
    # found compiled. Measured (JFR, 2026-12-05): tests/test_oracle.py 2,375 compiles
    # (11.4 ms mean) and 190.6 s with 100, 1,166 compiles and 175.3 s with 4,000.
    "spark.sql.codegen.cache.maxEntries": "4000",
    # Spark's memory pages of 1 MB, not the 32 MB it sizes from a 4g heap on 2 cores: the
    # hash table of a broadcast join is built on the driver in such pages, which outlive the
    # query (still live after three full collections in a row), so the run's thousands of
    # tiny joins kept over a gigabyte live. Measured (2026-12-06): 50 string-key broadcast
    # joins of two rows left 641 MB of live long[]; 100 left 833 MB with 32 MB pages and 27 MB
    # with 1 MB ones; tests/test_oracle.py took 147.9 s against 169-175 s, its collectors'
    # pauses 4.6 s against 12.2 s, 300 MB live after a full collection against 1.2-1.8 GB.
    "spark.buffer.pageSize": "1m",
    # Java's parallel collector, as every embedded JVM of ivm's (``session.EMBEDDED_GC``).
    # Measured here back to back, alternating (2026-11-30): four tests of test_refresh.py
    # 117.1 and 118.7 s against 124.5 and 127.4 s with G1; test_one_statement.py and one of
    # test_batches.py 138 and 140 s against 162 and 148 s; the serial collector slower
    # (166-176 s). It filled the heap once (2026-11-27), with Delta's cache of table logs,
    # which forget_delta_logs below now clears after each test.
}


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
    """The one Spark session of the test run, with its catalog in a temporary directory.

    The test tables hold a few rows, so adaptive query execution only adds planning work
    (measured: a 4-view refresh of the demo 11.5 s with it and C1-only JIT, 8 s without).
    """
    config = Config(spark=SparkSettings(conf=SESSION_SETTINGS))
    write_class_archive(config, tmp_path_factory.mktemp("archive"))
    session = build_session(config, tmp_path_factory.mktemp("spark"))
    yield session
    session.stop()


def write_class_archive(config: Config, folder: Path) -> None:
    """On a machine without Java's class archive for Spark (``ivm_sql.class_archive``), a
    first short command writes it, as the README's first command does, so that every JVM
    the run starts maps it: the session's and the commands' and servers' the tests start
    (a start without it costs about 8 s more)."""
    archive = archive_path(check_java(), start_settings(config, folder))
    if archive is None or archive.exists():
        return
    project = write_project(folder, {"views/.keep": ""})
    subprocess.run(
        [sys.executable, "-m", "ivm_sql.cli", "status"],
        cwd=project,
        env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"},
        capture_output=True,
        timeout=600,
        check=True,
    )


@pytest.fixture(autouse=True)
def forget_delta_logs(request: pytest.FixtureRequest) -> Iterator[None]:
    """After each test on the shared session, Delta forgets the tables it has seen.

    Delta caches a DeltaLog per table path, each holding its snapshot's query plans, for an
    hour: a server keeps one per table of its projects, but the test run makes thousands of
    tables, and the plans of those already dropped or never read again filled the 4 GB heap
    by the TPC-H tests (measured: after 25 tests, 300 of the heap's 508 MB live were Delta's
    cache, gone with it; the full run thrashed in garbage collection)."""
    yield
    if "spark" in request.fixturenames:
        spark: SparkSession = request.getfixturevalue("spark")
        spark._jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()


@pytest.fixture
def tmp_project(tmp_path_factory: pytest.TempPathFactory) -> MakeProject:
    """A factory writing ``{relative path: text}`` into a fresh project directory.

    ``ivm.yaml`` always gets a database of its own (``t_<8 hex digits>``) unless the
    given one names a database, so projects sharing the Spark session do not collide; and
    ``history: {learn: false}`` unless it sets ``history``: on the tests' tiny tables a
    recompute often is cheaper, and a stage's own history would choose it by timings
    (``physical.learned``), so a test of the incremental rules would depend on the clock.
    The learned choices have tests of their own.
    """

    def make_project(files: dict[str, str]) -> Path:
        return write_project(tmp_path_factory.mktemp("project"), files)

    return make_project


def write_project(root: Path, files: dict[str, str]) -> Path:
    """``files`` written under ``root``, ``ivm.yaml`` with a database of its own."""
    files = {**files, "ivm.yaml": _for_tests(files.get("ivm.yaml", ""))}
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def _for_tests(text: str) -> str:
    """``text`` with a unique ``database:`` and ``history: {learn: false}`` appended, each
    unless it sets that key; as it is when it is not a mapping."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        return text
    if not isinstance(data, dict | None):
        return text
    data = data or {}
    added = "" if "database" in data else f"database: t_{uuid.uuid4().hex[:8]}\n"
    added += "" if "history" in data else "history: {learn: false}\n"
    separator = "" if not text or text.endswith("\n") else "\n"
    return f"{text}{separator if added else ''}{added}"
