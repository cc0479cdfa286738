"""The demo on a real cluster: a Spark standalone master and one worker started from the
pyspark install, and the demo run against ``spark://127.0.0.1:PORT``: migrate through the
``ivm`` command, then the first refresh, a changed row, a refresh and verify through the Python
API. Two applications, not one per step: each costs a driver's and an executor's start on the
2-core machine (the test took 148 s with three, migrate and refresh each a command).

Marked ``cluster``: ``pytest -m "not cluster"`` skips it; CI runs it.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pyspark
import pytest

pytestmark = pytest.mark.cluster

REPO = Path(__file__).resolve().parents[1]
SPARK_CLASS = Path(pyspark.__file__).parent / "bin" / "spark-class"
ENV = {**os.environ, "SPARK_HOME": str(SPARK_CLASS.parents[1]), "SPARK_LOCAL_IP": "127.0.0.1"}
DEMO_VIEWS = ("order_lines", "shipped_totals", "revenue_by_country", "categories_sold")


@dataclass(frozen=True)
class Cluster:
    url: str  # spark://127.0.0.1:PORT
    web: str  # the master's web UI, whose /json/ lists workers and applications
    work_dir: Path  # the worker's: one folder per application, one per executor inside

    def state(self) -> dict:
        with urllib.request.urlopen(f"{self.web}/json/", timeout=5) as response:
            return json.load(response)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_for(what: str, ready, processes: list[subprocess.Popen], seconds: float = 180) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if any(p.poll() is not None for p in processes):
            pytest.fail(f"a cluster process exited while waiting for {what}")
        try:
            if ready():
                return
        except OSError:  # the web UI is not up yet
            pass
        time.sleep(1)
    pytest.fail(f"timed out waiting for {what}")


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    """A master and a worker (1 core, 1 GB) on 127.0.0.1, each in a process group of its own,
    stopped (the whole group) at teardown, whatever happened."""
    port, web_port = free_port(), free_port()
    url, work_dir = f"spark://127.0.0.1:{port}", tmp_path / "worker"
    commands = {
        "master": [
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--webui-port",
            str(web_port),
        ],
        "worker": [
            "org.apache.spark.deploy.worker.Worker",
            "--host",
            "127.0.0.1",
            "--cores",
            "1",
            "--memory",
            "1g",
            "--work-dir",
            str(work_dir),
            "--webui-port",
            str(free_port()),
            url,
        ],
    }
    processes: list[subprocess.Popen] = []
    result = Cluster(url, f"http://127.0.0.1:{web_port}", work_dir)
    try:
        for name, arguments in commands.items():
            with open(tmp_path / f"{name}.log", "wb") as log:
                processes.append(
                    subprocess.Popen(
                        [str(SPARK_CLASS), *arguments],
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        env=ENV,
                        start_new_session=True,
                    )
                )
        wait_for("the worker to register", lambda: result.state()["aliveworkers"] == 1, processes)
        yield result
    finally:
        for process in reversed(processes):
            _stop(process)


def _stop(process: subprocess.Popen) -> None:
    for sig, grace in ((signal.SIGTERM, 20), (signal.SIGKILL, 10)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(grace)
            return
        except subprocess.TimeoutExpired:
            continue


def test_demo_runs_on_a_standalone_cluster(cluster: Cluster, tmp_path: Path) -> None:
    project = tmp_path / "shop"
    for folder in ("migrations", "views"):
        shutil.copytree(REPO / folder, project / folder)
    (project / "ivm.yaml").write_text(
        f"database: shop\nspark:\n  master: {cluster.url}\n  conf:\n"
        "    spark.executor.memory: 512m\n    spark.sql.shuffle.partitions: 2\n",
        encoding="utf-8",
    )

    def ivm(*arguments: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "ivm_sql.cli", *arguments],
            cwd=project,
            env=ENV,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, f"ivm {' '.join(arguments)}: {done.stdout}{done.stderr}"
        return done.stdout

    assert "applied" in ivm("migrate")
    # the rest through the Python API, in one more application
    done = subprocess.run(
        [sys.executable, "-c", API_ROUND],
        cwd=project,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, f"the API round: {done.stdout}{done.stderr}"
    round_trip = json.loads(done.stdout.strip().splitlines()[-1])
    assert round_trip["created"] == dict.fromkeys(DEMO_VIEWS, "created")
    assert round_trip["refresh"] == dict.fromkeys(DEMO_VIEWS, "incremental")
    assert round_trip["verify"] == dict.fromkeys(DEMO_VIEWS, True)
    assert round_trip["history"] == sorted(  # JSON's lists
        [view, way] for view in DEMO_VIEWS for way in ("full", "incremental")
    )

    # Two applications on the master (the command, the Python process), each with an
    # executor on the worker that fetched Delta's jars from the driver and ran tasks.
    state = cluster.state()
    assert len(state["completedapps"]) + len(state["activeapps"]) == 2
    apps = sorted(cluster.work_dir.glob("app-*"))
    assert len(apps) == 2
    for app in apps:
        assert list(app.glob("*/io.delta_delta-spark_*.jar")), (
            f"no Delta jar among the executor files of {app.name}"
        )
        assert "Running task" in "".join(
            log.read_text(errors="replace") for log in app.glob("*/stderr")
        ), f"no task ran on the executor of {app.name}"


# The first refresh, a changed row, an incremental refresh and a verify through the Python
# API (ivm.yaml's master is the cluster's); one JSON line of what the refreshes did, what
# verify found and what the refresh event log holds.
API_ROUND = """
import json
from ivm_sql.project import Project

project = Project.open(".")
created = {r.view.removeprefix("shop."): r.action for r in project.refresh()}
project.sql("UPDATE orders SET product_id = 13, status = 'shipped' WHERE id = 102")
refreshed = {r.view.removeprefix("shop."): r.action for r in project.refresh()}
verified = {r.view.removeprefix("shop."): r.ok for r in project.verify()}
logged = [(e.view.removeprefix("shop."), e.strategy) for e in project.history().refreshes]
print(json.dumps({"created": created, "refresh": refreshed, "verify": verified, "history": sorted(logged)}))
"""
