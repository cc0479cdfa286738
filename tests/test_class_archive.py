"""Java's class archive for Spark's JVM (``ivm_sql.class_archive``): named by Java and jars,
written by the first JVM as it exits, published only once written, then mapped by the next."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ivm_sql.class_archive import (
    KEEP,
    STALE_AFTER,
    archive_path,
    java_option,
    publish,
)
from tests.conftest import write_project

JAVA = 'openjdk version "17.0.15" 2025-04-15'
DELTA = {"spark.jars.packages": "io.delta:delta-spark_2.13:4.0.0"}


def test_another_java_or_other_jars_get_another_archive(tmp_path: Path) -> None:
    first = archive_path(JAVA, DELTA, tmp_path)
    assert first is not None and first.parent == tmp_path and first.suffix == ".jsa"
    assert archive_path(JAVA, dict(DELTA), tmp_path) == first
    assert archive_path('openjdk version "17.0.16"', DELTA, tmp_path) != first
    assert (
        archive_path(JAVA, {"spark.jars.packages": "io.delta:delta-spark_2.13:4.1.0"}, tmp_path)
        != first
    )
    assert archive_path(JAVA, {**DELTA, "spark.jars": "/opt/udfs.jar"}, tmp_path) != first
    # other driver options do not change which classes load
    assert (
        archive_path(JAVA, {**DELTA, "spark.driver.extraJavaOptions": "-Xlog:gc"}, tmp_path)
        == first
    )


@pytest.mark.parametrize(
    "options", ["-Xshare:off", "-XX:SharedArchiveFile=/opt/mine.jsa", "-XX:ArchiveClassesAtExit=/x"]
)
def test_class_sharing_named_in_ivm_yaml_is_left_to_it(options: str, tmp_path: Path) -> None:
    settings = {**DELTA, "spark.driver.extraJavaOptions": f"-Dderby.x=1 {options}"}
    assert archive_path(JAVA, settings, tmp_path) is None


def test_an_archive_is_used_when_there_and_else_written_by_a_recording_jvm(tmp_path: Path) -> None:
    archive = tmp_path / "spark-abc.jsa"
    assert java_option(archive, record=False) == ("", None)
    option, temporary = java_option(archive, record=True)
    assert temporary is not None and temporary.parent == tmp_path and temporary != archive
    assert option.startswith(f"-XX:ArchiveClassesAtExit={temporary} ")
    archive.write_bytes(b"archive")
    assert java_option(archive, record=True) == (f"-XX:SharedArchiveFile={archive}", None)


def jvm_standin(writes: Path | None, code: int) -> subprocess.Popen:
    """A process that, like pyspark's gateway JVM, runs until its standard input closes,
    then writes ``writes`` (slowly, as a JVM writes its archive) and exits with ``code``."""
    write = (
        f"import time; time.sleep(0.3); open({str(writes)!r}, 'wb').write(b'classes'); "
        if writes
        else ""
    )
    script = f"import sys; sys.stdin.read(); {write}sys.exit({code})"
    return subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE)


def test_the_archive_gets_its_name_only_after_its_jvm_exited_cleanly(tmp_path: Path) -> None:
    archive = tmp_path / "spark-abc.jsa"
    _, temporary = java_option(archive, record=True)
    assert temporary is not None
    jvm = jvm_standin(temporary, 0)
    time.sleep(0.2)
    assert jvm.poll() is None  # it waits for its input to close, as the gateway does
    publish(jvm, temporary, archive)
    assert archive.read_bytes() == b"classes" and not temporary.exists()


def test_a_jvm_that_failed_leaves_no_archive(tmp_path: Path) -> None:
    archive = tmp_path / "spark-abc.jsa"
    _, temporary = java_option(archive, record=True)
    assert temporary is not None
    publish(jvm_standin(temporary, 1), temporary, archive)
    assert not archive.exists() and not temporary.exists()
    assert java_option(archive, record=True)[1] is not None  # the next start tries again


def test_a_clean_exit_that_wrote_nothing_stops_further_attempts(tmp_path: Path) -> None:
    archive = tmp_path / "spark-abc.jsa"
    _, temporary = java_option(archive, record=True)
    assert temporary is not None
    publish(jvm_standin(None, 0), temporary, archive)
    assert not archive.exists()
    assert java_option(archive, record=True) == ("", None)


def test_stale_temporary_files_and_old_archives_are_removed(tmp_path: Path) -> None:
    old = time.time() - STALE_AFTER - 60
    killed = tmp_path / "spark-a.jsa.123.tmp"
    writing = tmp_path / "spark-b.jsa.456.tmp"
    for path in (killed, writing):
        path.write_bytes(b"partial")
    os.utime(killed, (old, old))
    archives = [tmp_path / f"spark-{n}.jsa" for n in range(KEEP + 1)]
    for age, path in enumerate(reversed(archives)):  # archives[0] the newest
        path.write_bytes(b"classes")
        os.utime(path, (old + age, old + age))
    java_option(tmp_path / "spark-new.jsa", record=True)
    assert not killed.exists() and writing.exists()
    assert [path.exists() for path in archives] == [True] * (KEEP - 1) + [False] * 2


@pytest.mark.spark
def test_the_first_command_writes_the_archive_and_the_jars_the_next_one_uses_both(
    tmp_path: Path,
) -> None:
    """Two ``ivm status`` processes with an empty cache: the first JVM resolves Delta's
    package through Ivy and writes the archive as it exits, the second maps it (Java's own
    log of class sharing, turned on through ivm.yaml, says so) and names the jars the first
    resolved (``package_jars``): no Ivy in its log, and Delta's catalog opens."""
    project = write_project(
        tmp_path / "project",
        {
            "ivm.yaml": "spark:\n  conf:\n    spark.driver.extraJavaOptions: -Xlog:cds=info\n",
            "views/.keep": "",
        },
    )
    cache = tmp_path / "cache"
    env = {**os.environ, "XDG_CACHE_HOME": str(cache), "SPARK_LOCAL_IP": "127.0.0.1"}
    log = project / ".ivm" / "spark.log"

    def status() -> str:
        start = log.stat().st_size if log.exists() else 0
        done = subprocess.run(
            [sys.executable, "-m", "ivm_sql.cli", "status"],
            cwd=project,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        return log.read_text(errors="replace")[start:]

    first = status()
    folder = cache / "ivm-sql" / "class-archive"
    archives = list(folder.glob("*.jsa"))
    assert len(archives) == 1, sorted(path.name for path in folder.glob("*"))
    assert f"Opened archive {archives[0]}" not in first
    assert ":: resolution report ::" in first
    records = list((cache / "ivm-sql" / "package-jars").glob("*.txt"))
    assert len(records) == 1
    jars = records[0].read_text().splitlines()
    assert any(Path(jar).name.startswith("io.delta_delta-spark_") for jar in jars), jars
    second = status()
    assert f"Opened archive {archives[0]}." in second
    assert "Mapped dynamic region" in second
    assert ":: resolution report ::" not in second
