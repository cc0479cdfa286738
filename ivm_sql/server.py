"""`ivm server`: a Spark Connect server that keeps one project's Spark warm.

Every ``ivm`` command otherwise starts its own JVM, which costs seconds before any work. The
server is that JVM, started once, in the background: a Spark Connect server (its jar ships
with pyspark) with Delta and the project's own settings (``session.start_settings``: the
embedded catalog under ``<project>/.ivm``), so it serves exactly the tables an embedded
session sees. While it runs, ``session.build_session`` connects to it instead of starting a
JVM.

``<project>/.ivm/server.json`` records it: pid, address, project, start time. Liveness is
checked with a short probe (the pid is a Connect server's, its port accepts a connection),
never with a Spark call that could hang; a record whose process is gone is removed.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from enum import Enum
from pathlib import Path

from ivm_sql.config import Config
from ivm_sql.errors import EnvironmentProblem
from ivm_sql.session import (
    answers, check_java, connect_session, derby_locked, ivy_lock, last_log_lines, start_settings,
)

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
HOST = "127.0.0.1"  # local only: Spark Connect has no authentication of its own
# The first start on a machine also fetches Delta's jars; a loaded 2-core machine takes a minute.
START_TIMEOUT = 300.0
STOP_TIMEOUT = 30.0  # then the JVM is killed
PROBE_TIMEOUT = 1.0  # a local port that does not accept within a second is not serving


class State(Enum):
    RUNNING = "running"
    NOT_ANSWERING = "not answering"  # its process lives, its port is closed: starting or hung
    GONE = "gone"  # its process ended (or its pid is now another program's)


@dataclass(frozen=True)
class ServerRecord:
    """What ``server.json`` says about a project's server."""

    pid: int
    host: str
    port: int
    root: str  # the project folder it serves
    started: str  # ISO 8601, UTC
    log: str

    @property
    def url(self) -> str:
        return f"sc://{self.host}:{self.port}"

    @property
    def since(self) -> datetime:
        return datetime.fromisoformat(self.started)


def record_path(root: Path) -> Path:
    return root / ".ivm" / "server.json"


def read_record(root: Path) -> ServerRecord | None:
    """The project's server record; None if there is none (or it is unreadable: removed)."""
    path = record_path(root)
    try:
        return ServerRecord(**json.loads(path.read_text(encoding="utf-8")))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, TypeError):
        path.unlink(missing_ok=True)
        return None


def state(record: ServerRecord) -> State:
    if not _is_server(record.pid):
        return State.GONE
    return State.RUNNING if answers(record.host, record.port, PROBE_TIMEOUT) else State.NOT_ANSWERING


def endpoint(root: Path) -> str | None:
    """The URL of the project's running server, or None when it has none.

    A record whose server is gone (killed, machine restarted) is removed, with a note: the
    command runs Spark itself, on the same catalog. A server that lives but does not answer
    holds the catalog, so nothing else can open it: that is an error, not a hang.
    """
    record = read_record(root)
    if record is None:
        return None
    found = state(record)
    if found is State.RUNNING:
        return record.url
    if found is State.NOT_ANSWERING:
        raise EnvironmentProblem(
            f"this project's ivm server (pid {record.pid}) does not answer at {record.url}",
            hint="wait if it is starting, else end it with `ivm server stop`",
        )
    record_path(root).unlink(missing_ok=True)
    print(f"note: this project's ivm server (pid {record.pid}) is gone; running Spark in this command",
          file=sys.stderr, flush=True)
    return None


def start(config: Config, root: Path) -> tuple[ServerRecord, bool]:
    """Start the project's server and wait until it serves; (its record, whether it started
    now). A server already running is returned as it is."""
    if config.spark.remote is not None:
        raise EnvironmentProblem(
            f"this project connects to {config.spark.remote} (spark.remote in ivm.yaml); there is no local server to start",
        )
    existing = read_record(root)
    if existing is not None:
        found = state(existing)
        if found is State.RUNNING:
            return existing, False
        if found is State.NOT_ANSWERING:
            raise EnvironmentProblem(
                f"an ivm server (pid {existing.pid}) is already starting, or hung, for this project",
                hint="wait for it, or end it with `ivm server stop`",
            )
        record_path(root).unlink(missing_ok=True)
    check_java()
    state_dir = root / ".ivm"
    state_dir.mkdir(parents=True, exist_ok=True)
    log_path = state_dir / "server.log"
    port = _free_port()
    command = _command(config, root, port)
    environment = {**os.environ, "SPARK_HOME": _spark_home()}
    if config.is_embedded:
        environment.setdefault("SPARK_LOCAL_IP", HOST)
    log_start = log_path.stat().st_size if log_path.exists() else 0
    with ivy_lock(), log_path.open("ab") as log:  # Ivy resolves Delta's jars before the port opens
        process = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=environment,
            start_new_session=True,  # its own process group: the JVM outlives this command
        )
        record = ServerRecord(process.pid, HOST, port, str(root), datetime.now(timezone.utc).isoformat(timespec="seconds"),
                              str(log_path))
        record_path(root).write_text(json.dumps(asdict(record), indent=2) + "\n", encoding="utf-8")
        _wait_until_serving(process, record, log_start)
    _open_catalog(record, log_start)
    return record, True


def stop(root: Path) -> tuple[ServerRecord | None, State | None]:
    """Stop the project's server (and its JVM); (its record, the state it was found in)."""
    record = read_record(root)
    if record is None:
        return None, None
    found = state(record)
    if found is not State.GONE:
        _end(record.pid)
    record_path(root).unlink(missing_ok=True)
    return record, found


def _command(config: Config, root: Path, port: int) -> list[str]:
    """spark-submit running the Connect server with the project's settings on ``port``."""
    settings = {
        "spark.log.level": "WARN",  # not a line per request into server.log
        **start_settings(config, root),
        "spark.connect.grpc.binding.address": HOST,
        "spark.connect.grpc.binding.port": str(port),
    }
    command = [
        str(Path(_spark_home(), "bin", "spark-submit")), "--class", SERVER_CLASS,
        "--name", f"{config.spark.app_name} server", "--master", config.spark.master,
    ]
    for key, value in settings.items():
        command += ["--conf", f"{key}={value}"]
    return command


def _spark_home() -> str:
    from pyspark.find_spark_home import _find_spark_home

    return _find_spark_home()


def _free_port() -> int:
    """A port nothing listens on now (the OS's pick); the server binds it a moment later."""
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        return probe.getsockname()[1]


def _wait_until_serving(process: subprocess.Popen, record: ServerRecord, log_start: int) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while not answers(record.host, record.port, PROBE_TIMEOUT):
        if process.poll() is not None or time.monotonic() > deadline:
            ended = process.poll() is not None
            _end(process.pid)
            record_path(Path(record.root)).unlink(missing_ok=True)
            reason = f"it exited with code {process.returncode}" if ended else f"it did not answer within {START_TIMEOUT:.0f} s"
            raise EnvironmentProblem(
                f"the Spark Connect server did not start: {reason}; its log ends with: "
                f"{last_log_lines(Path(record.log), log_start, count=5) or '(nothing)'}",
                hint=f"see {record.log}",
            )
        time.sleep(0.2)


def _open_catalog(record: ServerRecord, log_start: int) -> None:
    """Open the catalog through the server now: a catalog another process holds is an error
    here rather than in the next command, and the server's first query is paid here."""
    try:
        connect_session(record.url).sql("SHOW DATABASES").collect()
    except Exception as exc:  # a Derby lock arrives wrapped in several Hive errors
        _end(record.pid)
        record_path(Path(record.root)).unlink(missing_ok=True)
        if derby_locked(Path(record.log).read_text(errors="replace")[log_start:] + str(exc)):
            raise EnvironmentProblem(
                f"another ivm command is using this project's catalog ({Path(record.root) / '.ivm' / 'metastore_db'}) right now",
                hint="wait for it to finish, then start the server",
            ) from None
        raise EnvironmentProblem(
            f"the Spark Connect server started but its catalog did not open: {str(exc).strip().splitlines()[0]}",
            hint=f"see {record.log}",
        ) from None


def _is_server(pid: int) -> bool:
    """Whether ``pid`` is a live Connect server (not a pid reused by another program)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, someone else's
        pass
    try:  # an ended child not yet reaped has an empty command line
        return SERVER_CLASS.encode() in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:  # no /proc (macOS): the pid lives, trust it
        return True


def _end(pid: int) -> None:
    """TERM the server's process group (Spark closes the catalog cleanly), KILL after a while."""
    for sig, wait in ((signal.SIGTERM, STOP_TIMEOUT), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(pid, sig)
        except (ProcessLookupError, PermissionError):
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            try:  # reap it if it is our child, so its pid is gone
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass
            if not _is_server(pid):
                return
            time.sleep(0.1)
