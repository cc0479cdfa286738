"""Delta checkpoints of ivm's tables are written after a refresh's commits, never inside a
stage's write (``physical.checkpoints``), on real Spark and Delta: by the refresh once its
commits are done, or, under ``ivm server``, between commands (``host.WarmSnapshots``)."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlparse

import pytest
from oracle import INCREMENTAL_ONLY, ViewSpec, compare_views, views_file

from ivm_sql.host import WarmSnapshots
from ivm_sql.physical import checkpoints
from ivm_sql.project import Project
from ivm_sql.storage import refresh_log

MakeProject = Callable[[dict[str, str]], Path]

EVENTS = "CREATE TABLE events (k INT, v INT) USING DELTA"
PER_KEY = ViewSpec("per_key", "SELECT k, COUNT(*) AS n, SUM(v) AS total FROM events GROUP BY k")
CHECKPOINT_FILE = re.compile(r"^(\d{20})\.checkpoint\b.*\.parquet$")
EVERY = 3  # commits between ivm's checkpoints here, so that a few refreshes meet several


@pytest.fixture
def project(spark, tmp_project: MakeProject, monkeypatch) -> Project:
    monkeypatch.setattr(checkpoints, "EVERY", EVERY)
    project = Project.open(
        tmp_project({"views/views.sql": views_file([PER_KEY]), "ivm.yaml": INCREMENTAL_ONLY}),
        spark=spark,
    )
    project.sql(EVENTS)
    project.sql("INSERT INTO events VALUES (1, 1), (2, 2)")
    project.refresh()
    return project


def stage_table(project: Project) -> str:
    (plan,) = project.plans()
    (stage,) = plan.stages
    return stage.table


def checkpointed(project: Project, table: str) -> list[int]:
    """The versions of ``table`` whose Delta checkpoint is in its log."""
    location = project.spark.sql(f"DESCRIBE DETAIL {table}").first().location
    names = (Path(urlparse(location).path) / "_delta_log").iterdir()
    return sorted({int(m[1]) for m in (CHECKPOINT_FILE.match(n.name) for n in names) if m})


def refreshed_after_an_insert(project: Project, value: int) -> int:
    """Insert a row, refresh, and return the stage table's version the refresh left."""
    project.sql(f"INSERT INTO events VALUES ({value % 3}, {value})")
    (report,) = project.refresh()
    assert report.action == "incremental", report
    return project.delta_log().latest_version(stage_table(project))


def test_ivms_tables_leave_checkpoints_to_ivm(project: Project) -> None:
    """The Delta interval of a stage table and of the refresh event log is long: Delta does
    not checkpoint inside their commits (the log's append is a refresh's last commit)."""
    for table in (stage_table(project), refresh_log.table_in(project.database)):
        interval = project.spark.sql(
            f"SHOW TBLPROPERTIES {table} ('delta.checkpointInterval')"
        ).first()
        assert interval.value == str(checkpoints.DELTA_INTERVAL), (table, interval)


def test_a_refresh_writes_the_checkpoints_due_after_its_commits(project: Project) -> None:
    """Each refresh leaves the stage table fewer than EVERY commits past its last checkpoint,
    and every checkpoint is of a version a refresh ended at (its last commit), not one in
    between; a refresh with nothing due writes none."""
    table = stage_table(project)
    ended = [project.delta_log().latest_version(table)]
    for value in range(2 * EVERY + 1):
        ended.append(refreshed_after_an_insert(project, value))
        done = checkpointed(project, table)
        assert ended[-1] - (done[-1] if done else 0) < EVERY, (ended, done)
    done = checkpointed(project, table)
    assert len(done) >= 2 and set(done) <= set(ended), (ended, done)
    assert not compare_views(project.spark, project.database, [PER_KEY], "after the rounds")


def test_under_the_server_the_checkpoints_wait_for_the_command_to_end(project: Project) -> None:
    """With ``hosted`` (the server's projects), a refresh writes no checkpoint;
    ``WarmSnapshots`` writes the one due after the command, while the user reads its output."""
    project.hosted = True
    table = stage_table(project)
    for value in range(EVERY + 1):
        latest = refreshed_after_an_insert(project, value)
    assert checkpointed(project, table) == [], "a refresh wrote a checkpoint the server owed"
    snapshots = WarmSnapshots(project.spark)
    snapshots.after_command(project)
    snapshots.wait()
    assert checkpointed(project, table) == [latest]
