"""The thin client's routing, the wire between it and the server, and the server's warm
projects: plain Python, no Spark (the server itself is tested in ``test_server.py``)."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from ivm_sql import wire
from ivm_sql.client import served
from ivm_sql.host import ClientStream, Command, WarmProjects
from ivm_sql.project import Project
from ivm_sql.server_record import SOCKET_PATH_MOST, socket_path

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "ivm.yaml").write_text("database: shop\n")
    (tmp_path / "views").mkdir()
    return tmp_path


@pytest.mark.parametrize(
    "argv, sent",
    [
        (["refresh"], True),
        (["-v", "status", "--json"], True),
        (["sql", "SELECT 1"], True),
        (["compile", "v"], True),
        (["migrate"], True),
        (["verify"], True),
        (
            ["refresh", "--watch"],
            True,
        ),  # the client forwards its signals: the first stops the watch
        (["refresh", "--every=2s", "--watch"], True),
        (["compile", "--out", "dir"], False),  # writes files where the client is
        (["refresh", "--help"], False),
        (["--help"], False),
        (["graph"], False),
        (["server", "status"], False),
        (["init"], False),
        ([], False),
        (["--bogus", "refresh"], False),  # the CLI says what is wrong
    ],
)
def test_the_commands_the_server_runs(project: Path, argv: list[str], sent: bool) -> None:
    route = served(["-p", str(project), *argv])
    assert (route is not None) == sent
    if sent:
        root, command = route
        assert root == project.resolve() and command[:2] == ["--project", str(project.resolve())]
        assert command[2:] == argv


def test_the_project_folder_is_found_as_the_cli_finds_it(tmp_path: Path) -> None:
    assert served(["-p", str(tmp_path), "refresh"]) is None  # no project: the CLI says so
    pipeline = tmp_path / "pipe"
    (pipeline / "sub").mkdir(parents=True)
    (pipeline / "spark-pipeline.yml").write_text("name: p\nstorage: s\n")
    root, command = served([f"--project={pipeline / 'sub'}", "status"])
    assert root == pipeline.resolve() and command == [
        "--project",
        str(pipeline.resolve()),
        "status",
    ]


def test_a_deep_project_keeps_its_socket_in_a_private_folder(tmp_path: Path) -> None:
    shallow = tmp_path / "p"
    assert socket_path(shallow) == shallow / ".ivm" / "server.sock"
    deep = tmp_path / ("d" * (SOCKET_PATH_MOST + 10))
    away = socket_path(deep)
    assert len(str(away)) <= SOCKET_PATH_MOST + 7 and away.parent.stat().st_mode & 0o777 == 0o700
    assert away == socket_path(deep) != socket_path(tmp_path / ("e" * (SOCKET_PATH_MOST + 10)))


def test_messages_cross_whole_and_a_broken_one_is_an_error() -> None:
    left, right = socket.socketpair()
    with left, right:
        text = "é" * 100_000  # more than the socket holds: sent while it is read, in several recvs
        sender = threading.Thread(target=wire.send, args=(left, {"out": text}))
        sender.start()
        assert wire.receive(right) == {"out": text}
        sender.join()
        left.sendall(wire.HEADER.pack(10) + b"[1, 2]    ")
        with pytest.raises(wire.WireError, match="not a JSON object"):
            wire.receive(right)
        left.sendall(wire.HEADER.pack(wire.LARGEST + 1))
        with pytest.raises(wire.WireError, match="bytes"):
            wire.receive(right)
        left.sendall(wire.HEADER.pack(5) + b"{}")
        left.shutdown(socket.SHUT_WR)
        with pytest.raises(wire.WireError, match="inside a message"):
            wire.receive(right)


def test_a_client_stream_is_text_and_says_whether_it_is_a_terminal() -> None:
    left, right = socket.socketpair()
    with left, right:
        stream = ClientStream(left, "err", terminal=True, lock=threading.Lock())
        assert stream.isatty() and stream.encoding == "utf-8"
        with pytest.raises(TypeError):
            stream.write(b"bytes")  # how click tells text streams from binary ones
        assert stream.write("line\n") == 5 and stream.write("") == 0
        assert wire.receive(right) == {"err": "line\n"}
    stream.write("after the client left\n")  # nothing raised: its command is being interrupted


def test_the_next_command_of_a_project_starts_warm(project: Path) -> None:
    handed: list[Project] = []
    projects = WarmProjects(handed.append)
    with projects.opened(project, False) as first:
        first._plans["a view"] = "its plan"
        with projects.opened(
            project, False
        ) as second:  # at the same time: cold, on dicts of its own
            assert second._plans == {}
    with projects.opened(project, False) as third:
        assert third._plans is first._plans and third._analysis is first._analysis
    (project / "ivm.yaml").write_text("database: other\n")
    with projects.opened(project, False) as changed:  # other settings: nothing is taken over
        assert changed._plans == {}
    # each command's project, for WarmSnapshots: none refreshed here
    assert [p.written_versions for p in handed] == [{}] * 4


def test_the_client_loads_neither_spark_nor_the_compiler() -> None:
    loaded = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, ivm_sql.client; print(sorted(m for m in ('pyspark', 'sqlglot', 'typer', 'ivm_sql.cli', 'ivm_sql.project') if m in sys.modules))",
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=True,
    )
    assert loaded.stdout.strip() == "[]"


def test_a_forwarded_signal_goes_to_a_watch_once_then_interrupts() -> None:
    """A watch takes the client's first signal; the next one, or a name that is no signal's,
    interrupts the command (its jobs cancelled), as Ctrl-C does."""
    cancelled: list[str] = []
    server = type("Server", (), {"cancel": lambda self, tag: cancelled.append(tag)})()
    left, right = socket.socketpair()
    with left, right:
        command = Command(server, left, {"argv": ["refresh", "--watch"]})
        taken: list[str] = []
        command.relay(taken.append)
        command.signal("SIGTERM")
        assert taken == ["SIGTERM"] and not command.interrupted
        command.signal("SIGTERM")
        assert taken == ["SIGTERM"] and command.interrupted and cancelled == [command.tag]
        other = Command(server, left, {"argv": ["refresh", "--watch"]})
        other.relay(taken.append)
        other.signal("NOT_A_SIGNAL")
        assert taken == ["SIGTERM"] and other.interrupted
