"""Where a project's server is written down: ``<project>/.ivm/server.json``, and its socket.

The record names the server's process, its Spark Connect port (for notebooks,
``spark-pipelines`` and ``spark.remote`` clients), the socket ivm's own commands are sent
over (``ivm_sql.host``), and the token both ask for. It is read by every ``ivm`` command
before anything else, so this module imports nothing heavy: the thin client
(``ivm_sql.client``) starts, reads it, and sends its command in a few tens of milliseconds.

Only its owner can read it: the record is written with mode 0600 into ``.ivm``, mode 0700,
and a record others could read or write (or another user's) is refused, since its token may
be known and its port or socket may be someone else's server.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import stat
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from datetime import datetime
from enum import Enum
from pathlib import Path

from ivm_sql.errors import EnvironmentProblem

HOST_ADDRESS = "127.0.0.1"  # where the server binds: loopback only, it is not a network service
# The server's Spark Connect endpoint reads its token from here (when
# spark.connect.authenticate.token is not set), as the server's ivm_sql.host reads it.
TOKEN_VARIABLE = "SPARK_CONNECT_AUTHENTICATE_TOKEN"
# How clients write the host: pyspark sends a token without TLS only to "localhost".
CLIENT_HOST = "localhost"
# A Unix socket's path holds at most 107 bytes (sun_path); a deeper project puts its socket
# in a private folder of the temporary directory, named by the project's path.
SOCKET_PATH_MOST = 100
# What a server's command line holds: ivm's own process (ivm_sql.host), or the plain Spark
# Connect server an ivm before it started.
SERVER_MARKERS = (b"ivm_sql.host", b"org.apache.spark.sql.connect.service.SparkConnectServer")
PROBE_TIMEOUT = 1.0  # a local port that does not accept within a second is not serving


class State(Enum):
    RUNNING = "running"
    NOT_ANSWERING = "not answering"  # its process lives, its port is closed: starting or hung
    GONE = "gone"  # its process ended (or its pid is now another program's)


@dataclass(frozen=True)
class Token:
    """A Spark Connect token, and what to tell the user if the server refuses it.

    The token is sent as gRPC call credentials; pyspark sends them without TLS (over gRPC's
    local credentials) only to a host written ``localhost``, and insists on TLS for any
    other (``ChannelBuilder.toChannel``). It is never shown: not in a URL ivm prints, not in
    a message, not in this object's repr.
    """

    value: str = field(repr=False)
    source: str  # where it came from, e.g. "the environment variable MY_TOKEN"
    hint: str  # what to do when the server refuses it


@dataclass(frozen=True)
class ServerRecord:
    """What ``server.json`` says about a project's server."""

    pid: int
    host: str  # the address its Spark Connect endpoint binds (and is probed at)
    port: int
    root: str  # the project folder it serves
    started: str  # ISO 8601, UTC
    log: str
    token: str | None = field(default=None, repr=False)  # None in a record of an ivm before tokens
    socket: str | None = None  # where it takes ivm's commands; None: a server that runs none

    @property
    def url(self) -> str:
        """The URL clients connect to, without the token (it is sent apart)."""
        return f"sc://{CLIENT_HOST}:{self.port}"

    @property
    def since(self) -> datetime:
        return datetime.fromisoformat(self.started)


def record_path(root: Path) -> Path:
    return root / ".ivm" / "server.json"


def socket_path(root: Path) -> Path:
    """Where the server of the project at ``root`` takes commands: in its ``.ivm`` folder, or,
    when that path is too long for a socket, in a private folder of the temporary directory."""
    inside = root / ".ivm" / "server.sock"
    if len(os.fsencode(inside)) <= SOCKET_PATH_MOST:
        return inside
    folder = private_folder(Path(tempfile.gettempdir()) / f"ivm-{os.getuid()}")
    return folder / (hashlib.sha256(os.fsencode(root)).hexdigest()[:24] + ".sock")


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
    """Raise EnvironmentProblem unless the file at ``path`` is this user's and (unless
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


def private_folder(path: Path) -> Path:
    """``path`` made if missing, and made its owner's alone (mode 0700): it holds the token
    and the socket. A folder of another user's is refused."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    if path.lstat().st_uid != os.getuid() or path.is_symlink():
        raise EnvironmentProblem(
            f"{path} is not yours, so ivm will not keep its server's socket there",
            hint="set TMPDIR to a folder of yours",
        )
    path.chmod(0o700)
    return path


def answers(host: str, port: int, timeout: float) -> bool:
    """Whether something accepts TCP connections at host:port within ``timeout`` seconds."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def state(record: ServerRecord) -> State:
    if not is_server(record.pid):
        return State.GONE
    return (
        State.RUNNING if answers(record.host, record.port, PROBE_TIMEOUT) else State.NOT_ANSWERING
    )


def is_server(pid: int) -> bool:
    """Whether ``pid`` is a live ivm server (not a pid reused by another program)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, someone else's
        pass
    try:  # an ended child not yet reaped has an empty command line
        command_line = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:  # no /proc (macOS): the pid lives, trust it
        return True
    return any(marker in command_line for marker in SERVER_MARKERS)


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
    print(
        f"note: this project's ivm server (pid {record.pid}) is gone; running Spark in this command",
        file=sys.stderr,
        flush=True,
    )
    return None


def server_token(record: ServerRecord) -> Token:
    """The token to send to the project's server; a record without one is an error."""
    path = record_path(Path(record.root))
    if not record.token:
        raise EnvironmentProblem(
            f"this project's ivm server (pid {record.pid}) has no token in {path}: it was started by an ivm before tokens, and any local process can use it",
            hint="restart it: `ivm server stop`, then `ivm server start`",
        )
    return Token(
        record.token,
        f"this project's server record ({path})",
        "the record is stale (changed, or its port is now another server's): `ivm server stop`, then `ivm server start`",
    )
