"""`ivm server`: one process that keeps a project's Spark warm and runs ivm's commands in it.

Every ``ivm`` command otherwise starts its own JVM, which costs seconds before any work. The
server is that JVM, started once, in the background, by ``python -m ivm_sql.host``: Spark
embedded with Delta and the project's own settings (``session.start_settings``: the embedded
catalog under ``<project>/.ivm``), plus Spark Connect's endpoint for other clients. While it
runs, ``ivm``'s commands are sent to it over its socket and run inside it (``ivm_sql.client``,
``ivm_sql.host``); other processes of the project (the Python API, notebooks,
``spark-pipelines``) connect to its Spark Connect endpoint (``session.build_session``).

``<project>/.ivm/server.json`` records it (``ivm_sql.server_record``): pid, address, socket,
project, start time, and the token a client must send. Liveness is checked with a short
probe (the pid is an ivm server's, its port accepts a connection), never with a Spark call
that could hang; a record whose process is gone is removed.

What guards it. The endpoint binds to 127.0.0.1 only and the socket is a file in a folder
only the owner can enter, so the network cannot reach either; other users and processes of
this machine could reach the port, so both ask every client for a token, made anew at each
start (``secrets.token_urlsafe``). Only the owner can read the token: it reaches the server
through its environment (Spark's Connect server reads ``SPARK_CONNECT_AUTHENTICATE_TOKEN``
when ``spark.connect.authenticate.token`` is not set, ``Connect.getAuthenticateToken``),
never through a command line, which ``ps`` shows to everyone; a process's environment is its
owner's alone (``/proc/PID/environ``). The record is written with mode 0600 into ``.ivm``,
mode 0700, and a record others could read or write (or another user's) is refused. Clients
write the host ``localhost``: pyspark sends a token without TLS (on gRPC's local credentials,
which check the peer is on this machine) only to a host written so. With a local master the
driver's own ports ask for a secret too. It is not a network service: no TLS, loopback only.
"""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from ivm_sql.config import Config
from ivm_sql.errors import EnvironmentProblem
from ivm_sql.server_record import (
    HOST_ADDRESS,
    PROBE_TIMEOUT,
    TOKEN_VARIABLE,
    ServerRecord,
    State,
    is_server,
    private_folder,
    read_record,
    record_path,
    server_token,
    socket_path,
    state,
    write_record,
)
from ivm_sql.session import check_java, derby_locked, last_log_lines

# The first start on a machine also fetches Delta's jars; a loaded 2-core machine takes a minute.
START_TIMEOUT = 300.0
STOP_TIMEOUT = 30.0  # then the JVM is killed


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
            server_token(existing)  # one started without a token must be restarted
            return existing, False
        if found is State.NOT_ANSWERING:
            raise EnvironmentProblem(
                f"an ivm server (pid {existing.pid}) is already starting, or hung, for this project",
                hint="wait for it, or end it with `ivm server stop`",
            )
        record_path(root).unlink(missing_ok=True)
    check_java()
    state_dir = private_folder(root / ".ivm")
    log_path = state_dir / "server.log"
    port = _free_port()
    token = secrets.token_urlsafe(32)
    # The token goes by the environment, not by a command line: that is everyone's to see.
    environment = {**os.environ, TOKEN_VARIABLE: token}
    if config.is_embedded:
        environment.setdefault("SPARK_LOCAL_IP", HOST_ADDRESS)
    log_start = log_path.stat().st_size if log_path.exists() else 0
    with log_path.open("ab") as log:  # the server takes the Ivy lock itself, as it starts Spark
        process = subprocess.Popen(
            [sys.executable, "-m", "ivm_sql.host", str(root), str(port)],
            cwd=root,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=environment,
            start_new_session=True,  # its own process group: it outlives this command
        )
        record = ServerRecord(
            process.pid,
            HOST_ADDRESS,
            port,
            str(root),
            datetime.now(UTC).isoformat(timespec="seconds"),
            str(log_path),
            token,
            str(socket_path(root)),
        )
        write_record(record)
        _wait_until_serving(process, record, log_start)
    return record, True


def stop(root: Path) -> tuple[ServerRecord | None, State | None]:
    """Stop the project's server (and its JVM); (its record, the state it was found in)."""
    record = read_record(root, any_mode=True)
    if record is None:
        return None, None
    found = state(record)
    if found is not State.GONE:
        _end(record.pid)
    record_path(root).unlink(missing_ok=True)
    return record, found


def _free_port() -> int:
    """A port nothing listens on now (the OS's pick); the server binds it a moment later."""
    with socket.socket() as probe:
        probe.bind((HOST_ADDRESS, 0))
        return probe.getsockname()[1]


def _wait_until_serving(process: subprocess.Popen, record: ServerRecord, log_start: int) -> None:
    """Until the server takes commands on its socket, which it opens once Spark and its
    Connect endpoint run; a server that exits first is an error that says why."""
    deadline = time.monotonic() + START_TIMEOUT
    while not _takes_commands(record):
        if process.poll() is not None or time.monotonic() > deadline:
            ended = process.poll() is not None
            _end(process.pid)
            record_path(Path(record.root)).unlink(missing_ok=True)
            log_text = (
                Path(record.log).read_text(errors="replace")[log_start:]
                if Path(record.log).exists()
                else ""
            )
            if derby_locked(log_text):
                raise EnvironmentProblem(
                    f"another ivm command is using this project's catalog ({Path(record.root) / '.ivm' / 'metastore_db'}) right now",
                    hint="wait for it to finish, then start the server",
                )
            reason = (
                f"it exited with code {process.returncode}"
                if ended
                else f"it did not answer within {START_TIMEOUT:.0f} s"
            )
            raise EnvironmentProblem(
                f"the ivm server did not start: {reason}; its log ends with: "
                f"{last_log_lines(Path(record.log), log_start, count=5) or '(nothing)'}",
                hint=f"see {record.log}",
            )
        time.sleep(0.2)


def _takes_commands(record: ServerRecord) -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(PROBE_TIMEOUT)
        try:
            probe.connect(record.socket)
        except OSError:
            return False
    return True


def _end(pid: int) -> None:
    """TERM the server (it interrupts its commands and stops Spark, which closes the catalog
    cleanly), then KILL its process group (the JVM with it) if it is still there."""
    for sig, wait in ((signal.SIGTERM, STOP_TIMEOUT), (signal.SIGKILL, 5.0)):
        try:
            if sig == signal.SIGTERM:
                os.kill(pid, sig)
            else:
                os.killpg(pid, sig)
        except (ProcessLookupError, PermissionError):
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            try:  # reap it if it is our child, so its pid is gone
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass
            if not is_server(pid):
                return
            time.sleep(0.1)
