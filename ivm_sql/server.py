"""`ivm server`: a Spark Connect server that keeps one project's Spark warm.

Every ``ivm`` command otherwise starts its own JVM, which costs seconds before any work. The
server is that JVM, started once, in the background: a Spark Connect server (its jar ships
with pyspark) with Delta and the project's own settings (``session.start_settings``: the
embedded catalog under ``<project>/.ivm``), so it serves exactly the tables an embedded
session sees. While it runs, ``session.build_session`` connects to it instead of starting a
JVM.

``<project>/.ivm/server.json`` records it: pid, address, project, start time, and the token
a client must send. Liveness is checked with a short probe (the pid is a Connect server's,
its port accepts a connection), never with a Spark call that could hang; a record whose
process is gone is removed.

What guards it. The server binds to 127.0.0.1 only, so the network cannot reach it; other
users and processes of this machine can, so it asks every client for a token, made anew at
each start (``secrets.token_urlsafe``). Only the owner can read the token: it reaches the
server through the environment of ``spark-submit`` (Spark's Connect server reads
``SPARK_CONNECT_AUTHENTICATE_TOKEN`` when ``spark.connect.authenticate.token`` is not set,
``Connect.getAuthenticateToken``), never through its command line, which ``ps`` shows to
everyone; a process's environment is its owner's alone (``/proc/PID/environ``). The record is
written with mode 0600 into ``.ivm``, mode 0700, and a record others could read or write (or
another user's) is refused: its token may be known, and its port may be someone else's
server. Clients write the host ``localhost``: pyspark sends a token without TLS (on gRPC's
local credentials, which check the peer is on this machine) only to a host written so. With
a local master the driver's own ports ask for a secret too (``_driver_authentication``). It
is not a network service: no TLS, loopback only.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import stat
import socket
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from enum import Enum
from pathlib import Path

from ivm_sql.config import Config
from ivm_sql.errors import EnvironmentProblem
from ivm_sql.session import (
    Token, answers, check_java, connect_session, derby_locked, ivy_lock, last_log_lines, start_settings,
)

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
HOST = "127.0.0.1"  # where it binds: loopback only, it is not a network service
# How clients write the host: pyspark sends a token without TLS only to "localhost".
CLIENT_HOST = "localhost"
# The server reads its token from here when spark.connect.authenticate.token is not set.
TOKEN_VARIABLE = "SPARK_CONNECT_AUTHENTICATE_TOKEN"
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
    host: str  # the address it binds (and is probed at)
    port: int
    root: str  # the project folder it serves
    started: str  # ISO 8601, UTC
    log: str
    token: str | None = field(default=None, repr=False)  # None in a record of an ivm before tokens

    @property
    def url(self) -> str:
        """The URL clients connect to, without the token (it is sent apart: ``server_token``)."""
        return f"sc://{CLIENT_HOST}:{self.port}"

    @property
    def since(self) -> datetime:
        return datetime.fromisoformat(self.started)


def record_path(root: Path) -> Path:
    return root / ".ivm" / "server.json"


def read_record(root: Path, any_mode: bool = False) -> ServerRecord | None:
    """The project's server record; None if there is none (or it is unreadable: removed).

    A record that is not its owner's alone is refused (``check_private``); with ``any_mode``
    one that others can read is not (``ivm server stop`` ends the server its token opens)."""
    path = record_path(root)
    try:
        check_private(path, any_mode)
        return ServerRecord(**json.loads(path.read_text(encoding="utf-8")))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, TypeError):
        path.unlink(missing_ok=True)
        return None


def check_private(path: Path, any_mode: bool = False) -> None:
    """Raise EnvironmentProblem unless the record at ``path`` is this user's and (unless
    ``any_mode``) only they can read or write it: others may know its token, or have pointed
    it at their own server."""
    found = path.lstat()
    if found.st_uid != os.getuid():
        raise EnvironmentProblem(
            f"{path} belongs to another user (uid {found.st_uid}), so ivm will not use the server it names",
            hint=f"if this project is yours, remove it (`rm {path}`) and run `ivm server start`",
        )
    mode = stat.S_IMODE(found.st_mode)
    if not any_mode and (not stat.S_ISREG(found.st_mode) or mode & 0o077):
        raise EnvironmentProblem(
            f"{path} is not private to you (mode {mode:04o}, not 0600): other users may have read its token, or changed it",
            hint=f"`ivm server stop` then `ivm server start` for a new token; or, if no one else can have read it, `chmod 600 {path}`",
        )


def server_token(record: ServerRecord) -> Token:
    """The token to send to the project's server; a record without one is an error."""
    path = record_path(Path(record.root))
    if not record.token:
        raise EnvironmentProblem(
            f"this project's ivm server (pid {record.pid}) has no token in {path}: it was started by an ivm before tokens, and any local process can use it",
            hint="restart it: `ivm server stop`, then `ivm server start`",
        )
    return Token(
        record.token, f"this project's server record ({path})",
        "the record is stale (changed, or its port is now another server's): `ivm server stop`, then `ivm server start`",
    )


def state(record: ServerRecord) -> State:
    if not _is_server(record.pid):
        return State.GONE
    return State.RUNNING if answers(record.host, record.port, PROBE_TIMEOUT) else State.NOT_ANSWERING


def endpoint(root: Path) -> ServerRecord | None:
    """The record of the project's running server, or None when it has none.

    A record whose server is gone (killed, machine restarted) is removed, with a note: the
    command runs Spark itself, on the same catalog. A server that lives but does not answer
    holds the catalog, so nothing else can open it: that is an error, not a hang.
    """
    record = read_record(root)
    if record is None:
        return None
    found = state(record)
    if found is State.RUNNING:
        return record
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
            server_token(existing)  # one started without a token must be restarted
            return existing, False
        if found is State.NOT_ANSWERING:
            raise EnvironmentProblem(
                f"an ivm server (pid {existing.pid}) is already starting, or hung, for this project",
                hint="wait for it, or end it with `ivm server stop`",
            )
        record_path(root).unlink(missing_ok=True)
    check_java()
    state_dir = _private_folder(root / ".ivm")
    log_path = state_dir / "server.log"
    port = _free_port()
    command = _command(config, root, port)
    token = secrets.token_urlsafe(32)
    # The token goes by the environment, not by --conf: a command line is everyone's to see.
    environment = {**os.environ, "SPARK_HOME": _spark_home(), TOKEN_VARIABLE: token}
    if config.is_embedded:
        environment.setdefault("SPARK_LOCAL_IP", HOST)
    log_start = log_path.stat().st_size if log_path.exists() else 0
    with ivy_lock(), log_path.open("ab") as log:  # Ivy resolves Delta's jars before the port opens
        process = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=environment,
            start_new_session=True,  # its own process group: the JVM outlives this command
        )
        record = ServerRecord(process.pid, HOST, port, str(root), datetime.now(timezone.utc).isoformat(timespec="seconds"),
                              str(log_path), token)
        write_record(record)
        _wait_until_serving(process, record, log_start)
    _open_catalog(record, log_start)
    return record, True


def write_record(record: ServerRecord) -> None:
    """Write the project's record, readable by its owner only from its first byte: a new
    file made with mode 0600, then renamed over the old one (a reader sees one or the other)."""
    path = record_path(Path(record.root))
    temporary = path.with_name(f".{path.name}.{os.getpid()}")
    temporary.unlink(missing_ok=True)
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        os.fchmod(descriptor, 0o600)  # whatever the umask took away
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            handle.write(json.dumps(asdict(record), indent=2) + "\n")
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def _private_folder(path: Path) -> Path:
    """``path`` made if missing, and made its owner's alone (mode 0700): it holds the token,
    beside the catalog and the logs."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    path.chmod(0o700)
    return path


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


def _command(config: Config, root: Path, port: int) -> list[str]:
    """spark-submit running the Connect server with the project's settings on ``port``."""
    settings = {
        "spark.log.level": "WARN",  # not a line per request into server.log
        **_driver_authentication(config),
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


def _driver_authentication(config: Config) -> dict[str, str]:
    """With a local master, Spark's own driver ports (RPC, block manager) ask for a secret
    too, one Spark makes at start and keeps in the JVM: the server runs for long, and they
    are on this machine's loopback as well. (A cluster master needs a secret shared with its
    workers, which is the cluster's to set in ivm.yaml's spark.conf.)"""
    return {"spark.authenticate": "true"} if config.spark.master.startswith("local") else {}


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
        connect_session(record.url, token=server_token(record)).sql("SHOW DATABASES").collect()
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
