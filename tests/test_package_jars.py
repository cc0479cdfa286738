"""The jars of ``spark.jars.packages`` resolved once (``ivm_sql.package_jars``): named by the
settings Ivy reads, written down from a start's ``spark.jars`` without the user's own jars,
and used only while every one is on disk. The JVM side (a second command that does not run
Ivy) is in ``test_class_archive.py``."""

from __future__ import annotations

from pathlib import Path

from ivm_sql.package_jars import record_path, resolved, without_resolution, write_down

DELTA = {"spark.jars.packages": "io.delta:delta-spark_4.2_2.13:4.4.0"}


def jar(folder: Path, name: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_bytes(b"PK")
    return path


def test_the_record_is_named_by_what_ivy_reads_and_nothing_else(tmp_path: Path) -> None:
    first = record_path(DELTA, tmp_path)
    assert first is not None and first.parent == tmp_path
    assert record_path(dict(DELTA), tmp_path) == first
    assert record_path({**DELTA, "spark.jars": "/opt/udfs.jar"}, tmp_path) == first
    assert record_path({**DELTA, "spark.sql.shuffle.partitions": "8"}, tmp_path) == first
    for key in ("spark.jars.repositories", "spark.jars.excludes", "spark.jars.ivy"):
        assert record_path({**DELTA, key: "x"}, tmp_path) != first
    assert (
        record_path({"spark.jars.packages": "io.delta:delta-spark_4.2_2.13:4.3.0"}, tmp_path)
        != first
    )
    assert record_path({}, tmp_path) is None
    assert record_path({"spark.jars.packages": " "}, tmp_path) is None


def test_a_start_s_jars_are_written_down_without_the_user_s_own(tmp_path: Path) -> None:
    ivy = tmp_path / "ivy" / "jars"
    delta, storage = jar(ivy, "io.delta_delta-spark.jar"), jar(ivy, "io.delta_delta-storage.jar")
    own = jar(tmp_path / "my jars", "udfs.jar")
    settings = {**DELTA, "spark.jars": f"{own}"}
    record = record_path(settings, tmp_path / "records")
    assert record is not None
    # Spark's spark.jars after the start: the user's jar as a URI, then Ivy's
    started = ",".join([own.as_uri(), delta.as_uri(), storage.as_uri()])
    write_down(record, started, settings)
    assert resolved(record) == [str(delta), str(storage)]
    assert not list(record.parent.glob("*.tmp"))
    named = without_resolution(settings, [str(delta), str(storage)])
    assert "spark.jars.packages" not in named
    assert named["spark.jars"] == f"{own},{delta},{storage}"
    assert without_resolution(DELTA, [str(delta)]) == {"spark.jars": str(delta)}


def test_a_jar_gone_from_disk_has_ivy_resolve_again(tmp_path: Path) -> None:
    ivy = tmp_path / "ivy"
    delta, storage = jar(ivy, "delta.jar"), jar(ivy, "storage.jar")
    record = tmp_path / "record.txt"
    write_down(record, f"{delta.as_uri()},{storage.as_uri()}", DELTA)
    assert resolved(record) == [str(delta), str(storage)]
    storage.unlink()
    assert resolved(record) is None
    assert resolved(tmp_path / "none.txt") is None
    assert resolved(None) is None


def test_jars_that_are_not_local_files_are_not_written_down(tmp_path: Path) -> None:
    record = tmp_path / "record.txt"
    write_down(record, "hdfs://cluster/jars/delta.jar", DELTA)
    assert not record.exists()
    write_down(record, "", DELTA)
    assert not record.exists()


def test_a_cache_that_cannot_be_written_is_left_alone(tmp_path: Path) -> None:
    delta = jar(tmp_path / "ivy", "delta.jar")
    blocked = tmp_path / "a file"
    blocked.write_text("not a folder")
    record = blocked / "record.txt"
    write_down(record, delta.as_uri(), DELTA)  # no error: the start goes on
    assert resolved(record) is None
