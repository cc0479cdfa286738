"""The process of ``ivm server``: one warm Spark for the project, and ivm's commands run in it.

``ivm server start`` (``ivm_sql.server``) starts ``python -m ivm_sql.host ROOT PORT``. It
starts Spark embedded, with the project's settings and Spark Connect's plugin, so one JVM
serves two kinds of client:

- ``ivm`` itself (``ivm_sql.client``) sends its command line over a Unix socket. The command
  runs here, in a thread of its own with a Spark session of its own, exactly as the CLI runs
  it in a process of its own (``cli.app``), its output streamed back. Every statement is a
  py4j call inside this process instead of a Spark Connect round trip, and the JVM's plans,
  Delta log caches and the catalog stay warm between commands. This is how Gradle's daemon
  and sbt's server serve their thin clients.
- Notebooks, ``spark-pipelines`` and ``spark.remote`` users reach Spark Connect's endpoint
  on 127.0.0.1:PORT, with the same catalog.

Who may send commands: the socket lives in the project's ``.ivm`` folder (mode 0700; a
deep project's in a private folder of the temporary directory), the server checks that the
peer process is its own user's (``SO_PEERCRED``), and the first message must carry the token
of ``.ivm/server.json``, which only the owner can read. The same token guards the Connect
endpoint; it reaches the JVM in the environment (``SPARK_CONNECT_AUTHENTICATE_TOKEN``),
never on a command line.

Interruptions: the client forwards Ctrl-C and SIGTERM. The command's Spark jobs are
cancelled (by a job tag of its own) and ``KeyboardInterrupt`` is raised in its thread, so it
ends as an interrupted command ends in its own process: "interrupted", exit 130, every view
as consistent as after a kill. A client that goes away interrupts its command the same way.
SIGTERM to the server (``ivm server stop``) interrupts the commands still running, tells
their clients, and stops Spark.
"""

from __future__ import annotations

import ctypes
import hmac
import io
import os
import queue
import signal
import socket
import struct
import sys
import threading
import uuid
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from py4j.protocol import Py4JError
from pyspark.errors import PySparkException

from ivm_sql import cli, wire
from ivm_sql.config import Config
from ivm_sql.errors import IvmError
from ivm_sql.physical import checkpoints
from ivm_sql.project import Project
from ivm_sql.server_record import HOST_ADDRESS, TOKEN_VARIABLE, socket_path
from ivm_sql.session import embedded_session, hosted, quiet_query_logs
from ivm_sql.storage.delta_log import DeltaLog, compute_state

CONNECT_PLUGIN = "org.apache.spark.sql.connect.SparkConnectPlugin"
DRAIN_SECONDS = 10.0  # how long a stopping server waits for its interrupted commands to end
WARM_TAG = "ivm-warm-snapshots"  # the Spark jobs of WarmSnapshots, cancelled when the server stops
COUNT_TAG = "ivm-warm-counts"  # its row counts' jobs, cancelled when a command starts


def serving_settings(config: Config, port: int) -> dict[str, str]:
    """Spark Connect's endpoint inside the driver, on loopback at ``port``."""
    settings = {
        "spark.log.level": "WARN",  # not a line per request into server.log
        "spark.plugins": CONNECT_PLUGIN,
        "spark.connect.grpc.binding.address": HOST_ADDRESS,
        "spark.connect.grpc.binding.port": str(port),
    }
    # With a local master, Spark's own driver ports (RPC, block manager) ask for a secret
    # too, one Spark makes at start and keeps in the JVM: the server runs for long, and they
    # are on this machine's loopback as well. (A cluster master needs a secret shared with
    # its workers, which is the cluster's to set in ivm.yaml's spark.conf.)
    if config.spark.master.startswith("local"):
        settings["spark.authenticate"] = "true"
    return settings


class ThreadStreams(io.TextIOBase):
    """The server's ``sys.stdout`` (or ``sys.stderr``): what a command's thread writes goes
    to its client; any other thread's, to the server's log."""

    def __init__(self, default: io.TextIOBase):
        self._default = default
        self._local = threading.local()

    def use(self, stream: io.TextIOBase | None) -> None:
        self._local.stream = stream

    def _target(self) -> io.TextIOBase:
        return getattr(self._local, "stream", None) or self._default

    def write(self, text: str) -> int:
        return self._target().write(text)

    def flush(self) -> None:
        self._target().flush()

    def isatty(self) -> bool:
        return self._target().isatty()

    @property
    def encoding(self) -> str:
        return "utf-8"


class ClientStream(io.TextIOBase):
    """The client's standard output or error, as one kind of message (``wire``)."""

    def __init__(
        self,
        connection: socket.socket,
        kind: str,
        terminal: bool,
        lock: threading.Lock,
        muted: threading.Event | None = None,
    ):
        self._connection, self._kind, self._terminal, self._lock = connection, kind, terminal, lock
        # set: the command was interrupted
        self._muted = muted if muted is not None else threading.Event()

    def write(self, text: str) -> int:
        if not isinstance(text, str):  # how click tells a text stream from a binary one
            raise TypeError("a text stream")
        if text and not self._muted.is_set():
            with self._lock:
                try:
                    wire.send(self._connection, {self._kind: text})
                except OSError:  # the client went away: its command is being interrupted
                    pass
        return len(text)

    def isatty(self) -> bool:
        return self._terminal

    @property
    def encoding(self) -> str:
        return "utf-8"


@dataclass(frozen=True)
class _RowsOf:
    """A project whose views' rows ``WarmSnapshots`` counts (``Project.count_rows``)."""

    project: Project


class WarmSnapshots:
    """Delta's state of each stage table a refresh committed to, computed between commands.

    Every commit ivm makes to a stage table is idempotent (``storage.concurrent``), and Delta
    checks an idempotent commit against the transactions of the table's snapshot state, a
    Spark job over the table's log that Delta computes on first use of each new version: on
    this 2-core machine about 0.8 s of a demo view's 1.2 s commit, paid on the refresh's path
    once per stage. Delta keeps that state with the snapshot until the next commit, so the
    server computes it in a thread of its own after each refresh, while its user reads the
    output, and the next refresh's commits find it done. Not for a table whose commit was an
    append through Delta's transaction API (a trace's batch, the event log's rows:
    ``storage.appends``), which reads none of it: there it would only take a core from the
    next command. A refresh that comes first computes it itself (Delta computes a snapshot's
    state once, whoever asks), and a state not computed here for any reason is computed by
    the commit that needs it: nothing here is needed for a right result. The same thread writes the tables' Delta checkpoints that are due
    (``physical.checkpoints``), so that no refresh's commit waits for one, and before them
    the refresh's append to the event log (``Project.flush_log``, 0.5 s of a demo refresh),
    which the next command of the project waits for (``WarmProjects.opened``), and after
    them the row counts of the views whose count Delta's statistics do not give
    (``Project.count_rows``: a trace of batches), so that ``ivm status`` after a refresh runs
    no Spark job (1 s of counting on the demo's four views)."""

    def __init__(self, spark):
        self._spark = spark
        # a project whose refresh's log append is due, a table's version to checkpoint (and
        # whether to compute its state), or a project whose views' rows to count
        self._waiting: queue.Queue[Project | tuple[str, int, bool] | _RowsOf] = queue.Queue()
        self._computed: dict[str, int] = {}  # table -> the version whose state was computed
        self._log = DeltaLog(spark)  # this thread's own: what it caches is not a command's
        threading.Thread(target=self._compute, name=WARM_TAG, daemon=True).start()

    def after_command(self, project: Project) -> None:
        """The command's refresh's event log append first, then the state of each table it
        wrote, then its views' row counts."""
        self._waiting.put(project)
        self.warm(project.written_versions, project.stateless_tables)
        self._waiting.put(_RowsOf(project))

    def warm(self, versions: dict[str, int], stateless: Collection[str] = ()) -> None:
        """Compute the state of each table at its version, but of those in ``stateless``
        (whose commits read none: ``Project.stateless_tables``), and write its checkpoint if
        due."""
        for table, version in versions.items():
            if self._computed.get(table) != version:
                self._waiting.put((table, version, table not in stateless))

    def wait(self) -> None:
        """Until every state asked for is computed (or could not be)."""
        self._waiting.join()

    def yield_to_command(self) -> None:
        """A command starts: cancel the row count running, which only ``ivm status`` needs
        and which would take the cores from the command (the status counts itself)."""
        self._spark.sparkContext.cancelJobsWithTag(COUNT_TAG)

    def _count_rows(self, project: Project) -> None:
        context = self._spark.sparkContext
        context.addJobTag(COUNT_TAG)
        try:
            project.count_rows(self._spark, self._log)
        finally:
            context.removeJobTag(COUNT_TAG)

    def _compute(self) -> None:
        self._spark.sparkContext.addJobTag(WARM_TAG)  # a tag is the thread's own
        while True:
            waiting = self._waiting.get()
            try:
                if isinstance(waiting, Project):  # its log append, then the log table's state
                    self.warm(waiting.flush_log(), waiting.stateless_tables)
                    continue
                if isinstance(waiting, _RowsOf):
                    self._count_rows(waiting.project)
                    continue
                table, version, with_state = waiting
                if self._computed.get(table) != version:
                    checkpoints.write_due(self._log, {table: version})
                    if with_state:
                        compute_state(self._spark, table)
                    self._computed[table] = version
            # dropped since, or the server is stopping
            except (PySparkException, Py4JError, IvmError):
                pass
            finally:
                self._waiting.task_done()


class WarmProjects:
    """What each command learned of its project, for the next command of the same project:
    one command at a time takes it (two at once would write the same dicts), and a command
    that finds it taken starts cold. After each command, ``after_command`` is handed the
    project, whose refresh's log append and tables' states come next (``WarmSnapshots``);
    ``before_command`` is called as each command starts."""

    def __init__(
        self,
        after_command: Callable[[Project], None],
        before_command: Callable[[], None] = lambda: None,
    ) -> None:
        self._idle: dict[Path, Project] = {}
        self._guard = threading.Lock()
        self._after_command = after_command
        self._before_command = before_command

    @contextmanager
    def opened(self, path: Path, verbose: bool) -> Iterator[Project]:
        self._before_command()
        project = Project.open(path, verbose=verbose)
        project.hosted = True  # ``WarmSnapshots`` appends its log and writes checkpoints after it
        with self._guard:
            earlier = self._idle.pop(project.root, None)
        if earlier is not None:
            self._logged(earlier)
            project.keep_warm(earlier)
        try:
            yield project
        except BaseException:  # a command that refreshed, then failed: no later for its log
            self._logged(project)
            raise
        with self._guard:  # only after a command that succeeded, as it saves its analysis
            self._idle[project.root] = project
        self._after_command(project)

    def flush_logs(self) -> None:
        """The event log appends still to come (the server is stopping)."""
        with self._guard:
            idle = list(self._idle.values())
        for project in idle:
            self._logged(project)

    @staticmethod
    def _logged(project: Project) -> None:
        """Until the project's last refresh is in the event log (this command may read it: its
        history, or its learned costs). An append that failed is said once, on this command's
        stderr; the next refresh logs the stages it left out (``runtime.log_events``)."""
        project.flush_log()
        error, project.log_error = project.log_error, None
        if error is not None:
            hint = f"\n  hint: {error.hint}" if error.hint else ""
            print(
                f"ivm: the last refresh is missing from the refresh log: {error.message}{hint}",
                file=sys.stderr,
            )


class Command:
    """One client's command, run in a thread of its own."""

    def __init__(self, server: Server, connection: socket.socket, request: dict):
        self.server = server
        self.connection = connection
        self.request = request
        self.lock = threading.Lock()  # one message at a time on the connection
        self.tag = f"ivm-command-{uuid.uuid4().hex}"  # its Spark jobs, to cancel them
        self.thread = threading.Thread(
            target=self._run, name=f"ivm-command-{self.tag[-8:]}", daemon=True
        )
        self.done = threading.Event()
        self.interrupted = False  # by its client's signal, its client going, or the server stopping
        self.muted = threading.Event()  # what it prints once interrupted is not its client's
        self.code = 1
        self._on_signal: Callable[[str], None] | None = None  # a watch's, for the first signal

    def start(self) -> None:
        self.thread.start()

    def _run(self) -> None:
        out = ClientStream(
            self.connection, "out", bool(self.request.get("stdout_tty")), self.lock, self.muted
        )
        err = ClientStream(
            self.connection, "err", bool(self.request.get("stderr_tty")), self.lock, self.muted
        )
        try:
            self.code = self.server.run(self.request, out, err, self.tag, self.relay)
        except KeyboardInterrupt:  # landed between the command's own handlers
            self.code = 130
        finally:
            ended = [{"exit": self.code}]
            if self.interrupted:  # ended as an interrupted command ends in its own process
                ended = [{"err": "interrupted\n"}, {"exit": 130}]
            self.done.set()
            with self.lock:
                try:
                    for message in ended:
                        wire.send(self.connection, message)
                except OSError:
                    pass

    def relay(self, handler: Callable[[str], None] | None) -> None:
        """The client's next Ctrl-C or SIGTERM goes to ``handler`` (a watch's: it stops after
        the refresh in progress) instead of interrupting; ``None``: back to interrupting."""
        self._on_signal = handler

    def signal(self, name: str) -> None:
        """The client forwarded a signal: its handler's, once, if the command set one (a name
        that is no signal's interrupts, as Ctrl-C does)."""
        handler, self._on_signal = self._on_signal, None
        if handler is None or name not in signal.Signals.__members__:
            self.interrupt()
        else:
            handler(name)

    def interrupt(self, note: str | None = None) -> None:
        """As Ctrl-C in its own process: KeyboardInterrupt in its thread, its jobs cancelled,
        and its client told "interrupted", exit 130. Whichever the thread meets first, the
        interruption or its cancelled job's error, what it prints after this is not sent: the
        client sees one outcome."""
        if self.done.is_set():
            return
        if note is not None:
            with self.lock:
                try:
                    wire.send(self.connection, {"err": note + "\n"})
                except OSError:
                    pass
        self.interrupted = True
        self.muted.set()
        if self.thread.ident is not None:
            ctypes.pythonapi.PyThreadState_SetAsyncExc(
                ctypes.c_ulong(self.thread.ident), ctypes.py_object(KeyboardInterrupt)
            )
        self.server.cancel(self.tag)


class Server:
    """The socket, the commands running, and the Spark they share."""

    def __init__(self, spark, root: Path, token: str):
        self.spark = spark
        self.root = root
        self.token = token
        self.commands: set[Command] = set()
        self.guard = threading.Lock()
        self.stopping = threading.Event()
        self.stdout = ThreadStreams(sys.stdout)
        self.stderr = ThreadStreams(sys.stderr)
        snapshots = WarmSnapshots(spark.newSession())
        self.projects = WarmProjects(snapshots.after_command, snapshots.yield_to_command)

    def serve(self) -> None:
        path = socket_path(self.root)
        path.unlink(missing_ok=True)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(str(path))
        os.chmod(path, 0o600)
        listener.listen(16)
        sys.stdout, sys.stderr = self.stdout, self.stderr
        for number in (signal.SIGTERM, signal.SIGINT):
            signal.signal(number, lambda *_: self._stop(listener))
        try:
            while not self.stopping.is_set():
                try:
                    connection, _ = listener.accept()
                except OSError:  # closed by _stop
                    break
                threading.Thread(target=self._take, args=(connection,), daemon=True).start()
        finally:
            path.unlink(missing_ok=True)
            self._drain()

    def _stop(self, listener: socket.socket) -> None:
        self.stopping.set()
        listener.close()

    def _drain(self) -> None:
        with self.guard:
            running = list(self.commands)
        for command in running:
            command.interrupt("ivm server: stopping (ivm server stop); this command is interrupted")
        for command in running:
            command.done.wait(DRAIN_SECONDS)
        self.projects.flush_logs()  # before the warm thread's jobs are cancelled: it may be in one
        self.spark.sparkContext.cancelJobsWithTag(WARM_TAG)
        self.spark.stop()

    def _take(self, connection: socket.socket) -> None:
        """Check who calls, then run its command and pass on its interruptions."""
        with connection:
            try:
                request = self._admitted(connection)
            except (OSError, wire.WireError):
                return
            if request is None:
                return
            command = Command(self, connection, request)
            with self.guard:
                self.commands.add(command)
            try:
                command.start()
                self._relay_signals(connection, command)
                command.done.wait()
            finally:
                with self.guard:
                    self.commands.discard(command)

    def _admitted(self, connection: socket.socket) -> dict | None:
        """The request of a client of this user that sent the token; None (after saying why)
        for any other."""
        credentials = connection.getsockopt(
            socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")
        )
        _, uid, _ = struct.unpack("3i", credentials)
        request = wire.receive(connection) if uid == os.getuid() else None
        if request is None:
            return None
        token = request.get("token")
        if not isinstance(token, str) or not hmac.compare_digest(
            token.encode(), self.token.encode()
        ):
            wire.send(connection, {"refused": "a wrong token, or none"})
            return None
        if not isinstance(request.get("argv"), list) or not all(
            isinstance(a, str) for a in request["argv"]
        ):
            wire.send(connection, {"refused": "no command line in the request"})
            return None
        return request

    def _relay_signals(self, connection: socket.socket, command: Command) -> None:
        """Until the command ends: the client's Ctrl-C or SIGTERM interrupts it, and so does
        the client going away."""
        while not command.done.is_set():
            try:
                message = wire.receive(connection)
            except (OSError, wire.WireError):
                message = None
            if message is None:  # the client is gone: nobody waits for the rest
                command.interrupt()
                return
            if "signal" in message:
                command.signal(str(message["signal"]))

    def run(
        self,
        request: dict,
        out: ClientStream,
        err: ClientStream,
        tag: str,
        relay: Callable[[Callable[[str], None] | None], None],
    ) -> int:
        """Run one command line as the CLI does, on a session of its own; its exit code."""
        self.stdout.use(out)
        self.stderr.use(err)
        context = self.spark.sparkContext
        try:
            with (
                hosted(self.spark.newSession()),
                cli.hosted(
                    out,
                    err,
                    request.get("columns"),
                    request.get("environ") or {},
                    self.projects.opened,
                    relay,
                ),
            ):
                context.addJobTag(tag)
                try:
                    cli.app(args=list(request["argv"]), prog_name="ivm", standalone_mode=True)
                except SystemExit as ended:
                    return _exit_code(ended.code, err)
                return 0
        finally:
            context.removeJobTag(tag)
            self.stdout.use(None)
            self.stderr.use(None)

    def cancel(self, tag: str) -> None:
        self.spark.sparkContext.cancelJobsWithTag(tag)


def _exit_code(code: object, err: ClientStream) -> int:
    """``sys.exit``'s argument as a process would turn it into an exit code."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    err.write(f"{code}\n")
    return 1


def main() -> None:
    root, port = Path(sys.argv[1]), int(sys.argv[2])
    token = os.environ[TOKEN_VARIABLE]
    os.chdir(root)  # a relative path in a command (ivm sql) means the project's
    try:
        config = Project.open(root).config
        # verbose: Spark's own output goes where the server's does, to .ivm/server.log; no
        # class archive written at exit, which `ivm server stop` would wait for
        spark = embedded_session(
            config,
            root,
            verbose=True,
            extra=serving_settings(config, port),
            record_classes=False,
        )
        quiet_query_logs()  # a command's failed query is its client's one message, not a stack
    except IvmError as error:
        print(f"error: {error}", file=sys.stderr, flush=True)
        sys.exit(1)
    Server(spark, root, token).serve()


if __name__ == "__main__":
    main()
