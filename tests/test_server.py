"""`ivm server` on a real server, driven through the `ivm` executable (``ivm_sql.client``).

One server runs for the whole module, for a copy of the demo project in a folder of its own
(its own Derby catalog, so it never meets the test run's embedded session). Every command
runs as a real subprocess, as a user would run it; the server is stopped at the end whatever
happened. Marked ``server``: ``pytest -m "not server"`` skips it.

A server found gone (killed) is reported and its record removed, and commands then run Spark
themselves on the same catalog, with a note: the server only keeps a JVM warm, it holds
nothing the catalog does not. A server whose process lives but does not answer still holds
the catalog, so commands stop at once with one message.

The server asks every client for the token in its record (mode 0600, in a folder of mode
0700): a client without it, or with another, is refused, on its Spark Connect endpoint and on
the socket ivm's commands are sent over; ivm's commands and its Python API send it. A command
sent to the server runs there (the client loads no Spark), and the client passes on Ctrl-C;
a server stopped or killed during a command is said so.
"""

from __future__ import annotations

import json
import os
import pty
import queue
import shutil
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from ivm_sql import wire
from ivm_sql.server import stop
from ivm_sql.server_record import ServerRecord, read_record, record_path
from ivm_sql.server_record import write_record as write
from ivm_sql.storage.delta_log import DeltaLog, HistoryFolder, LocalFolder

pytestmark = pytest.mark.server

REPO = Path(__file__).resolve().parents[1]


def ivm(root: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """The `ivm` executable on the project ``root``; no traceback, whatever the outcome."""
    result = subprocess.run(
        [sys.executable, "-m", "ivm_sql.client", "-p", str(root), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"},
    )
    assert "Traceback" not in result.stdout + result.stderr, result.stderr
    return result


def ok(root: Path, *args: str) -> str:
    result = ivm(root, *args)
    assert result.returncode == 0, result.stderr
    return result.stdout


def strategies(refresh_output: str) -> list[str]:
    """The strategy column of `ivm refresh` (view, rows in, rows out, time, strategy)."""
    return [line.split(maxsplit=4)[4] for line in refresh_output.splitlines()[1:]]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, ServerRecord]]:
    """The demo project with its server running."""
    root = tmp_path_factory.mktemp("served")
    shutil.copy(REPO / "ivm.yaml", root)
    for folder in ("views", "migrations"):
        shutil.copytree(REPO / folder, root / folder)
    try:
        started = ivm(root, "server", "start", timeout=400)
        assert started.returncode == 0, started.stderr
        record = read_record(root)
        assert record is not None and started.stdout.startswith(f"started: ivm server for {root}")
        yield root, record
    finally:
        stop(root)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def sent_by_a_fresh_client(root: Path, *argv: str) -> subprocess.CompletedProcess:
    """``ivm ARGV`` sent by ``client.through_server`` from a fresh interpreter, which prints,
    last, its exit code and whether it loaded pyspark, the CLI and sqlglot."""
    program = (
        "import sys\n"
        "from ivm_sql import client\n"
        f"code = client.through_server(['-p', {str(root)!r}, *{list(argv)!r}])\n"
        "print(code, 'pyspark' in sys.modules, 'ivm_sql.cli' in sys.modules, 'sqlglot' in sys.modules)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr
    return result


def test_the_record_and_its_folder_are_the_owners_alone(served: tuple[Path, ServerRecord]) -> None:
    root, record = served
    assert mode(record_path(root)) == 0o600 and mode(root / ".ivm") == 0o700
    assert record.token and len(record.token) >= 40
    assert record.token not in repr(record)
    command_line = Path(f"/proc/{record.pid}/cmdline").read_bytes()  # what `ps` shows everyone
    assert b"ivm_sql.host" in command_line and record.token.encode() not in command_line
    assert (
        record.socket == str(root / ".ivm" / "server.sock") and mode(Path(record.socket)) == 0o600
    )
    assert record.token not in ok(root, "server", "status") + ok(root, "server", "start")


@pytest.mark.parametrize(
    "url",
    ["sc://127.0.0.1:{port}", "sc://localhost:{port}", "sc://localhost:{port}/;token=wrong"],
    ids=["no-token", "no-token-localhost", "wrong-token"],
)
def test_a_client_without_the_token_is_refused(
    served: tuple[Path, ServerRecord], url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The issue's reproduction: any local process asks for the project's rows and for a file
    outside it. Refused, by the server itself."""
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    monkeypatch.delenv("SPARK_CONNECT_AUTHENTICATE_TOKEN", raising=False)  # pyspark's fallback
    _, record = served
    spark = ConnectSession.builder.remote(url.format(port=record.port)).create()
    try:
        for query in ("SELECT count(*) FROM shop.orders", "SELECT * FROM text.`/etc/hostname`"):
            with pytest.raises(Exception, match="UNAUTHENTICATED") as refused:
                spark.sql(query).collect()
            assert (
                "No authentication token" if "wrong" not in url else "Invalid authentication token"
            ) in str(refused.value)
    finally:
        try:
            spark.stop()
        except Exception:  # stopping asks the server too, which refuses
            pass


def test_commands_of_the_project_use_the_server(served: tuple[Path, ServerRecord]) -> None:
    root, _ = served
    assert "0002_seed.sql: 3 applied" in ok(root, "migrate")
    assert strategies(ok(root, "refresh")) == ["created (new)"] * 4
    ok(root, "sql", "UPDATE orders SET product_id = 13, status = 'shipped' WHERE id = 102")
    assert ok(root, "status").count("shop.orders@2") == 4  # pending in each view
    assert strategies(ok(root, "refresh")) == ["incremental"] * 4
    assert strategies(ok(root, "refresh")) == ["unchanged"] * 4
    logged = json.loads(ok(root, "history", "--json"))["refreshes"]  # the server's refreshes
    assert [e["strategy"] for e in logged if e["view"] == "shop.order_lines"] == [
        "incremental",
        "full",
    ]
    assert ok(root, "verify").split() == [
        "ok",
        "shop.order_lines",
        "ok",
        "shop.shipped_totals",
        "ok",
        "shop.revenue_by_country",
        "ok",
        "shop.categories_sold",
    ]
    assert "54.75" in ok(root, "sql", "SELECT revenue FROM revenue_by_country WHERE country = 'US'")
    assert "INSERT INTO `shop`.`__ivm_shipped_totals`" in ok(root, "compile", "shipped_totals")
    assert not (root / ".ivm" / "spark.log").exists()  # no command started a JVM of its own


def test_the_python_api_sends_the_token(served: tuple[Path, ServerRecord]) -> None:
    """``Project.open`` in a program of its own (no Spark session in it yet) uses the server."""
    root, _ = served
    program = (
        "from ivm_sql.project import Project\n"
        f"project = Project.open({str(root)!r})\n"
        'print(project.sql("SELECT count(*) FROM orders").rows, type(project.spark).__module__)\n'
    )
    result = subprocess.run(
        [sys.executable, "-c", program],
        capture_output=True,
        text=True,
        timeout=300,
        env={k: v for k, v in os.environ.items() if k != "SPARK_CONNECT_AUTHENTICATE_TOKEN"},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["[(6,)]", "pyspark.sql.connect.session"]


def test_refresh_watch_through_the_server_and_spark_remote(
    served: tuple[Path, ServerRecord], tmp_path: Path
) -> None:
    """The watch runs in the server, its client forwarding its signals; changes made by
    other commands meanwhile are seen, and SIGTERM ends it after the refresh in progress,
    with exit code 0. Every change here is undone by the next, so the tests after it see the
    data as before. A project that reaches the server as ``spark.remote`` watches over
    Spark Connect."""
    root, record = served
    watching = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ivm_sql.client",
            "-p",
            str(root),
            "refresh",
            "--watch",
            "--every",
            "200ms",
            "--json",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"},
    )
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(
        target=lambda: [lines.put(line) for line in watching.stdout], daemon=True
    ).start()
    try:
        documents = [json.loads(lines.get(timeout=300))]
        assert documents[0]["round"] == 1 and documents[0]["totals"]["unchanged"] == 4
        for quantity in (5, 1):  # a cancelled order: revenue stays, order_lines changes
            ok(root, "sql", f"UPDATE orders SET quantity = {quantity} WHERE id = 104")
            documents.append(json.loads(lines.get(timeout=300)))
            assert (
                list(documents[-1]["changed"]) == ["shop.orders"]
                and documents[-1]["totals"]["incremental"] >= 1
            )
        watching.send_signal(signal.SIGTERM)
        assert watching.wait(120) == 0
        errors = watching.stderr.read()
        assert (
            "SIGTERM: stopping after the refresh in progress" in errors
            and "stopped by SIGTERM; 3 refreshes" in errors
        )
    finally:
        watching.kill()
    assert ok(root, "verify").split().count("ok") == 4
    # it ran in the server: a client that ran it itself would have loaded Spark
    result = sent_by_a_fresh_client(root, "refresh", "--watch", "--until-idle", "--every", "100ms")
    assert result.stdout.splitlines()[-1] == "0 False False False"
    assert "idle: no source changed since the last refresh; 1 refreshes" in result.stderr

    (tmp_path / "ivm.yaml").write_text(
        f"database: shop\nspark:\n  remote: {record.url}\n  token_env: SHOP_TOKEN\n"
    )
    shutil.copytree(root / "views", tmp_path / "views")
    remote = subprocess.run(
        [
            sys.executable,
            "-m",
            "ivm_sql.cli",
            "-p",
            str(tmp_path),
            "refresh",
            "--watch",
            "--until-idle",
            "--every",
            "100ms",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "SHOP_TOKEN": record.token},
    )
    assert remote.returncode == 0, remote.stderr
    (only,) = remote.stdout.splitlines()
    assert json.loads(only)["totals"]["views"] == 4


def test_ivm_meeting_a_refusal_says_so(served: tuple[Path, ServerRecord]) -> None:
    """A record whose token is not the server's (stale, or changed): one message, exit 1,
    from the socket for a command the server runs and from Spark Connect for one it does not."""
    root, record = served
    try:
        write(replace(record, token="not-the-servers"))
        refused = ivm(root, "sql", "SELECT 1", timeout=60)
        assert refused.returncode == 1 and refused.stdout == ""
        assert refused.stderr.startswith(
            f"environment: the ivm server for {root} refused the token from this project's server record (a wrong token, or none)"
        )
        connect = ivm(root, "graph", timeout=60)  # not sent to the server: this process connects
        assert connect.returncode == 1 and connect.stderr.startswith(
            f"environment: the Spark Connect server at sc://localhost:{record.port} refused the token from this project's server record"
        )
        for answer in (refused, connect):
            assert (
                "`ivm server stop`, then `ivm server start`" in answer.stderr
                and "not-the-servers" not in answer.stderr
            )
    finally:
        write(record)


@pytest.mark.parametrize(
    "request_sent",
    [
        {"argv": ["sql", "SELECT 1"]},
        {"token": "wrong", "argv": ["sql", "SELECT 1"]},
        {"token": 42, "argv": ["sql", "SELECT 1"]},
    ],
    ids=["no-token", "wrong-token", "not-a-string"],
)
def test_the_socket_refuses_a_client_without_the_token(
    served: tuple[Path, ServerRecord], request_sent: dict
) -> None:
    """ivm's own channel asks for the same token as Spark Connect's endpoint, and runs nothing
    for a client without it."""
    root, record = served
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
        client.settimeout(60)
        client.connect(record.socket)
        wire.send(client, request_sent)
        assert wire.receive(client) == {"refused": "a wrong token, or none"}
        assert wire.receive(client) is None  # and it hangs up
    with socket.socket(
        socket.AF_UNIX, socket.SOCK_STREAM
    ) as silent:  # one that says nothing and goes
        silent.connect(record.socket)
    assert "6" in ok(root, "sql", "SELECT count(*) FROM orders").split()  # the server serves on


def test_a_command_runs_in_the_server_and_its_client_loads_no_spark(
    served: tuple[Path, ServerRecord],
) -> None:
    root, _ = served
    result = sent_by_a_fresh_client(root, "sql", "SELECT 40 + 2 AS answer")
    assert "42" in result.stdout and result.stdout.splitlines()[-1] == "0 False False False"
    refreshed = json.loads(ok(root, "refresh", "--json"))  # --json comes back as it is
    assert len(refreshed["views"]) == 4


def test_two_commands_at_once_run_side_by_side(served: tuple[Path, ServerRecord]) -> None:
    """A long query from one terminal does not hold up a short one from another."""
    root, _ = served
    long_query = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ivm_sql.client",
            "-p",
            str(root),
            "sql",
            "SELECT count(*) AS n FROM range(0, 300000000)",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert "6" in ok(root, "sql", "SELECT count(*) FROM orders").split()
        out, err = long_query.communicate(timeout=300)
        assert long_query.returncode == 0, err
        assert "300000000" in out
    finally:
        long_query.kill()


ENDLESS = "SELECT sum(id * 7 % 13) FROM range(0, 1000000000000000) a"  # runs for days: whatever ends it is what is tested


def start_endless(root: Path) -> subprocess.Popen:
    """An `ivm sql` the server runs until something stops it, started once its job runs."""
    command = subprocess.Popen(
        [sys.executable, "-m", "ivm_sql.client", "-p", str(root), "sql", ENDLESS],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(5)  # the client sends at once; the query runs until stopped
    assert command.poll() is None
    return command


def test_a_refresh_in_a_terminal_draws_its_progress(served: tuple[Path, ServerRecord]) -> None:
    """On a terminal the server draws the live bar on the client's screen, as a refresh in its
    own process does; the per-view lines come as ever. The change is undone afterwards."""
    root, _ = served
    ok(root, "sql", "UPDATE orders SET quantity = 5 WHERE id = 104")
    screen, terminal = pty.openpty()
    try:
        refresh = subprocess.Popen(
            [sys.executable, "-m", "ivm_sql.client", "-p", str(root), "refresh"],
            stdout=terminal,
            stderr=subprocess.PIPE,
            env={**os.environ, "COLUMNS": "120"},
        )
        os.close(terminal)
        drawn = b""
        while chunk := _read_some(screen):
            drawn += chunk
        assert refresh.wait(120) == 0, refresh.stderr.read()
    finally:
        os.close(screen)
    shown = drawn.decode(errors="replace")
    # a live display (the cursor hidden), counting the views
    assert "\x1b[?25l" in shown and "/4" in shown
    assert "shop.order_lines" in shown and "incremental" in shown
    ok(root, "sql", "UPDATE orders SET quantity = 1 WHERE id = 104")
    ok(root, "refresh")


def _read_some(screen: int) -> bytes:
    """What the terminal showed next; empty once its last writer closed it."""
    try:
        return os.read(screen, 4096)
    except OSError:  # EIO: the other side is closed
        return b""


def test_ctrl_c_interrupts_the_command_in_the_server(served: tuple[Path, ServerRecord]) -> None:
    root, _ = served
    command = start_endless(root)
    try:
        command.send_signal(signal.SIGINT)
        out, err = command.communicate(timeout=120)
        assert command.returncode == 130 and err.splitlines()[-1] == "interrupted" and out == ""
    finally:
        command.kill()
    # its jobs are gone, the server serves
    assert "6" in ok(root, "sql", "SELECT count(*) FROM orders").split()


def test_server_env_gives_other_clients_the_endpoint(served: tuple[Path, ServerRecord]) -> None:
    root, record = served
    lines = ok(root, "server", "env").splitlines()
    assert lines == [
        f"export SPARK_REMOTE={record.url}",
        f"export SPARK_CONNECT_AUTHENTICATE_TOKEN={record.token}",
    ]
    program = "from pyspark.sql import SparkSession\nprint(SparkSession.builder.getOrCreate().sql('SELECT count(*) FROM shop.orders').collect()[0][0])\n"
    shell = f'eval "$({sys.executable} -m ivm_sql.client -p {root} server env)" && {sys.executable} -c "$PROGRAM"'
    result = subprocess.run(
        ["bash", "-c", shell],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PROGRAM": program},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[-1] == "6"
    assert json.loads(ok(root, "server", "env", "--json")) == {
        "remote": record.url,
        "token": record.token,
    }


def test_a_log_read_through_spark_sql_says_what_the_files_say(
    served: tuple[Path, ServerRecord],
) -> None:
    """Over Spark Connect a table this machine cannot read has its log read through
    DESCRIBE HISTORY (HistoryFolder); here both readers see the same local tables."""
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    _, record = served
    spark = ConnectSession.builder.remote(f"{record.url}/;token={record.token}").getOrCreate()
    try:
        files, history = DeltaLog(spark), DeltaLog(spark)
        for table in ("shop.orders", "shop.__ivm_revenue_by_country"):
            history._folders[table] = HistoryFolder(spark, table)
            latest = files.latest_version(table)
            assert history.latest_version(table) == latest
            assert history.table_id(table) == files.table_id(table) is not None
            told, read = (
                history.commits_between(table, -1, latest),
                files.commits_between(table, -1, latest),
            )
            # the history's time is the commit file's, within moments of the commitInfo's
            assert all(abs(a.timestamp - b.timestamp) < 5000 for a, b in zip(told, read))
            assert [replace(c, timestamp=0) for c in told] == [
                replace(c, timestamp=0) for c in read
            ]
            assert history.last_record(table) == files.last_record(table)
        assert isinstance(files._log("shop.orders"), LocalFolder)  # the server is on this machine
    finally:
        spark.stop()


def test_status_says_what_it_serves_and_since_when(served: tuple[Path, ServerRecord]) -> None:
    root, record = served
    assert record.host == "127.0.0.1"  # where it binds; clients write localhost (see server.py)
    assert ok(root, "server", "status").strip() == (
        f"running: ivm server for {root} at sc://localhost:{record.port} (pid {record.pid}) "
        f"since {record.since:%Y-%m-%d %H:%M:%S} UTC"
    )
    again = ok(root, "server", "start")
    assert again.startswith("already running") and f"(pid {record.pid})" in again


def test_spark_remote_connects_to_an_endpoint(
    served: tuple[Path, ServerRecord], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, record = served
    (tmp_path / "ivm.yaml").write_text(
        f"database: shop\nspark:\n  remote: {record.url}\n  token_env: SHOP_TOKEN\n"
    )
    monkeypatch.setenv("SHOP_TOKEN", record.token)
    assert "6" in ok(tmp_path, "sql", "SELECT count(*) AS n FROM orders").split()
    assert (
        ok(tmp_path, "server", "status").strip()
        == f"{tmp_path} connects to {record.url} (spark.remote in ivm.yaml)"
    )
    assert not (tmp_path / ".ivm").exists()

    with socket.socket() as closed:  # a port nothing listens on
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    (tmp_path / "ivm.yaml").write_text(f"spark:\n  remote: sc://127.0.0.1:{port}\n")
    failed = ivm(tmp_path, "status", timeout=30)
    assert failed.returncode == 1
    assert f"no Spark Connect server answers at sc://127.0.0.1:{port}" in failed.stderr


def test_a_server_that_does_not_answer_is_an_error_not_a_hang(tmp_path: Path) -> None:
    """A live process under the server's name, with no port open: starting or hung. The
    record is removed only by `ivm server stop`, which ends the process."""
    (tmp_path / "ivm.yaml").write_text("database: shop\n")
    stand_in = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(120)", "ivm_sql.host"],
        start_new_session=True,
    )
    try:
        write_record(tmp_path, stand_in.pid, port=1)
        status = ivm(tmp_path, "server", "status", timeout=30)
        assert status.returncode == 1 and status.stdout.startswith("not answering:")
        command = ivm(tmp_path, "sql", "SELECT 1", timeout=30)  # a hang fails here
        assert command.returncode == 1
        assert (
            f"ivm server (pid {stand_in.pid}) does not answer at sc://localhost:1" in command.stderr
        )
        assert (
            ok(tmp_path, "server", "stop").strip()
            == f"stopped the ivm server for {tmp_path} (pid {stand_in.pid})"
        )
        assert stand_in.wait(timeout=10) == -signal.SIGTERM
        assert not record_path(tmp_path).exists()
    finally:
        stand_in.kill()


def test_a_server_stopped_or_killed_during_a_command_says_so(
    served: tuple[Path, ServerRecord],
) -> None:
    """`ivm server stop` interrupts the commands it runs and tells them; a server killed
    outright leaves its client one message. Then commands fall back to a Spark of their own,
    on the same catalog. (Last in the module: it ends the server.)"""
    root, _ = served
    command = start_endless(root)
    try:
        assert ok(root, "server", "stop").startswith("stopped the ivm server")
        _, err = command.communicate(timeout=120)
        assert command.returncode == 130
        assert (
            err.splitlines()[0]
            == "ivm server: stopping (ivm server stop); this command is interrupted"
        )
        assert err.splitlines()[-1] == "interrupted"
    finally:
        command.kill()
    assert read_record(root) is None and not (root / ".ivm" / "server.sock").exists()

    assert ok(root, "server", "start").startswith("started")
    record = read_record(root)
    command = start_endless(root)
    try:
        os.kill(record.pid, signal.SIGKILL)
        _, err = command.communicate(timeout=120)
        assert command.returncode == 1
        assert err.startswith(f"environment: the ivm server for {root} ended during this command")
    finally:
        command.kill()

    gone = ivm(root, "server", "status", timeout=30)
    assert gone.returncode == 1
    assert gone.stdout.strip() == (
        f"gone: the ivm server for {root} (pid {record.pid}, {record.url}) has ended; its record is removed"
    )
    assert not record_path(root).exists()

    write(record)  # as the kill left it, socket file and all, for a command to find
    fallback = ivm(root, "sql", "SELECT revenue FROM revenue_by_country WHERE country = 'US'")
    assert fallback.returncode == 0, fallback.stderr
    assert (
        f"ivm server (pid {record.pid}) is gone; running Spark in this command" in fallback.stderr
    )
    assert "54.75" in fallback.stdout  # the same catalog, opened by the command's own JVM
    assert not record_path(root).exists()


def write_record(root: Path, pid: int, port: int, token: str | None = "a-token") -> None:
    """A record as ivm writes it (mode 0600), naming ``pid``, ``port`` and ``token``."""
    record = ServerRecord(
        pid,
        "127.0.0.1",
        port,
        str(root),
        "2026-01-01T00:00:00+00:00",
        str(root / ".ivm" / "server.log"),
        token,
    )
    record_path(root).parent.mkdir(parents=True, exist_ok=True)
    write(record)
