"""The ``ivm`` command: when the project's server runs, it runs the command; else the CLI here.

Sending a command to the server (``ivm_sql.host``) needs only its record and its socket, so
this module imports nothing heavy (no Spark, no SQL compiler, not even the CLI): a command
the server runs starts, sends and prints in tens of milliseconds of this process's time. The
commands it sends are those that work on the project's data: ``refresh`` (``--watch`` too),
``status``, ``verify``, ``compile`` (not ``--out``), ``sql`` and ``migrate``. The rest, any
``--help``, and any command when no server runs (or its socket does not answer) go to the
CLI in this process (``ivm_sql.cli``), which reaches a running server over Spark Connect.

The client passes on Ctrl-C and SIGTERM: the server interrupts the command as this process
would have (``ivm_sql.host``), and its exit code (130) comes back; a watch stops after the
refresh in progress at the first, as in its own process, and is interrupted at the second.
A third one gives up waiting and exits at once. A server that ends during the command is said so, exit 1.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ivm_sql import wire
from ivm_sql.errors import EnvironmentProblem, IvmError
from ivm_sql.locate import project_root
from ivm_sql.server_record import read_record

SERVED = {"refresh", "status", "history", "verify", "compile", "sql", "migrate"}
# options of a served command that stay here: --out writes files where the client is, and
# help needs no server
STAYS_HERE = {"--help", "--out"}
# what the server's console needs to draw as this terminal would
ENVIRON = ("TERM", "COLORTERM", "NO_COLOR", "FORCE_COLOR", "TERM_PROGRAM", "COLUMNS", "LINES")
GIVE_UP_AFTER = 3  # signals: the third stops waiting for the server


def main() -> None:
    code = through_server(sys.argv[1:])
    if code is None:
        from ivm_sql.cli import app  # the whole CLI loads only when this process runs the command

        app(prog_name="ivm")
    sys.exit(code)


def served(argv: list[str]) -> tuple[Path, list[str]] | None:
    """(the project's folder, the command line with that folder spelled out) when the server
    runs this command; None when this process does."""
    project, flags, at = ".", [], 0
    while at < len(argv) and argv[at].startswith("-"):
        option = argv[at]
        if option in ("-p", "--project") and at + 1 < len(argv):
            project, at = argv[at + 1], at + 2
        elif option.startswith("--project="):
            project, at = option.partition("=")[2], at + 1
        elif option in ("-v", "--verbose"):
            flags, at = [*flags, option], at + 1
        else:  # --help, or a mistake the CLI explains
            return None
    rest = argv[at:]
    if (
        not rest
        or rest[0] not in SERVED
        or any(arg.partition("=")[0] in STAYS_HERE for arg in rest[1:])
    ):
        return None
    try:
        root = project_root(project)
    except IvmError:  # two specs, say: the CLI says so
        return None
    return None if root is None else (root, ["--project", str(root), *flags, *rest])


def through_server(argv: list[str]) -> int | None:
    """Run the command in the project's server: its exit code, or None when no server takes it."""
    route = served(argv)
    if route is None:
        return None
    root, command = route
    try:
        record = read_record(root)
    except IvmError:  # a record that is not private: the CLI refuses it in words
        return None
    if record is None or not record.socket or not record.token:
        return None
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        connection.connect(record.socket)
    except OSError:  # gone, or a record of a server that takes no commands: the CLI sees to it
        connection.close()
        return None
    with connection, _forwarding_signals(connection) as received:
        wire.send(
            connection,
            {
                "token": record.token,
                "argv": command,
                "stdout_tty": sys.stdout.isatty(),
                "stderr_tty": sys.stderr.isatty(),
                "columns": shutil.get_terminal_size().columns if sys.stdout.isatty() else None,
                "environ": {name: os.environ[name] for name in ENVIRON if name in os.environ},
            },
        )
        return _relay(connection, root, record.log, received)


@contextmanager
def _forwarding_signals(connection: socket.socket) -> Iterator[list[int]]:
    """Inside, Ctrl-C and SIGTERM go to the server as messages (the list holds them); the
    third raises KeyboardInterrupt here."""
    received: list[int] = []

    def forward(number: int, frame) -> None:
        received.append(number)
        if len(received) >= GIVE_UP_AFTER:
            raise KeyboardInterrupt
        try:
            wire.send(connection, {"signal": signal.Signals(number).name})
        except OSError:
            pass

    before = {number: signal.signal(number, forward) for number in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield received
    finally:
        for number, handler in before.items():
            signal.signal(number, handler)


def _relay(connection: socket.socket, root: Path, log: str, received: list[int]) -> int:
    """Print what the server sends until the command's exit code."""
    try:
        while True:
            try:
                message = wire.receive(connection)
            except (OSError, wire.WireError):
                message = None
            if message is None:
                print(
                    EnvironmentProblem(
                        f"the ivm server for {root} ended during this command", hint=f"see {log}"
                    ),
                    file=sys.stderr,
                    flush=True,
                )
                return 1
            if "out" in message:
                sys.stdout.write(message["out"])
                sys.stdout.flush()
            elif "err" in message:
                sys.stderr.write(message["err"])
                sys.stderr.flush()
            elif "exit" in message:
                return int(message["exit"])
            elif "refused" in message:
                print(
                    EnvironmentProblem(
                        f"the ivm server for {root} refused the token from this project's server record ({message['refused']})",
                        hint="the record is stale (changed, or its socket is now another server's): `ivm server stop`, then `ivm server start`",
                    ),
                    file=sys.stderr,
                    flush=True,
                )
                return 1
    except KeyboardInterrupt:
        print(
            f"interrupted after {len(received)} signals (the ivm server may still be ending the command)",
            file=sys.stderr,
            flush=True,
        )
        return 130


if __name__ == "__main__":  # python -m ivm_sql.client
    main()
