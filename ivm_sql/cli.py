"""The `ivm` command: each command is a few lines over Project, with one error handler."""

from __future__ import annotations

import shlex
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ivm_sql import report_json
from ivm_sql import server as servers
from ivm_sql import server_record as records
from ivm_sql.errors import IvmError
from ivm_sql.graph import Format, choose_format, draw, image_path, text
from ivm_sql.locate import is_dbt_project
from ivm_sql.progress import RefreshProgress, round_line
from ivm_sql.project import Project
from ivm_sql.runtime.lifecycle import TOMBSTONE_HOURS, ViewState
from ivm_sql.runtime.watch import (
    DEFAULT_CLOCK_EVERY,
    DEFAULT_EVERY,
    StopOnSignal,
    parse_clock_interval,
    parse_interval,
)
from ivm_sql.session import cancel_jobs

app = typer.Typer(
    help="Keep SQL views materialized on Spark and Delta Lake, refreshed incrementally.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _console(stderr: bool) -> Console:
    """Never wrap long lines (SQL and errors must survive a pipe); wide tables off a terminal.
    It writes to whatever sys.stdout (or sys.stderr) is when it prints."""
    stream = sys.stderr if stderr else sys.stdout
    return Console(
        stderr=stderr, highlight=False, soft_wrap=True, width=None if stream.isatty() else 250
    )


def _client_console(stream, columns: int | None, environ: dict[str, str]) -> Console:
    """The same on a client's stream in the server, as the client's terminal shows it."""
    terminal = stream.isatty()
    return Console(
        file=stream,
        force_terminal=terminal,
        highlight=False,
        soft_wrap=True,
        width=(columns if terminal else 250),
        _environ=environ,
    )


def _open_project(path: Path, verbose: bool) -> AbstractContextManager[Project]:
    return nullcontext(Project.open(path, verbose=verbose))


class _Consoles(threading.local):
    """The consoles of the command this thread runs, and how it opens its project: on this
    process's own standard output and error, or, in the project's server (``ivm_sql.host``),
    on its client's, with the server's warm projects."""

    def __init__(self) -> None:
        self.hosted = False
        self.out = _console(stderr=False)
        self.err = _console(stderr=True)
        self.open_project: Callable[[Path, bool], AbstractContextManager[Project]] = _open_project
        # in the server: hands it the handler of the client's first Ctrl-C or SIGTERM (a watch's)
        self.relay: Callable[[Callable[[str], None] | None], None] | None = None


_consoles = _Consoles()


@contextmanager
def hosted(
    out_stream,
    err_stream,
    columns: int | None,
    environ: dict[str, str],
    open_project: Callable[[Path, bool], AbstractContextManager[Project]],
    relay: Callable[[Callable[[str], None] | None], None],
) -> Iterator[None]:
    """In the server: this thread's command writes to a client's streams, shown as its
    terminal would show them, opens its project with ``open_project``, and a watch takes its
    client's first signal through ``relay`` (``StopOnSignal``)."""
    _consoles.hosted, _consoles.open_project, _consoles.relay = True, open_project, relay
    _consoles.out = _client_console(out_stream, columns, environ)
    _consoles.err = _client_console(err_stream, columns, environ)
    try:
        yield
    finally:
        _consoles.hosted, _consoles.open_project, _consoles.relay = False, _open_project, None
        _consoles.out, _consoles.err = _console(stderr=False), _console(stderr=True)


class _ThisThreads:
    """``out`` or ``err``: the console of the command the calling thread runs."""

    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, attribute: str):
        return getattr(getattr(_consoles, self._name), attribute)


out = _ThisThreads("out")
err = _ThisThreads("err")


@app.callback()
def main(
    ctx: typer.Context,
    project: Path = typer.Option(
        Path("."),
        "--project",
        "-p",
        help="Project folder (holding ivm.yaml, or a spark-pipeline.yml here or above).",
    ),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Show Spark's own logs."),
) -> None:
    ctx.obj = {"path": project, "verbose": verbose}


JSON_HELP = "Print one JSON document on standard output instead (its fields: docs/output.md)."


@contextmanager
def opened(ctx: typer.Context, as_json: bool = False, lines: bool = False) -> Iterator[Project]:
    """The project, with every failure turned into one clear message and exit code 1 (130
    when interrupted). With ``as_json``, the failure is also a JSON document on stdout, on
    one line with ``lines`` (after the JSON lines of `refresh --watch`)."""
    try:
        with _consoles.open_project(ctx.obj["path"], ctx.obj["verbose"]) as project:
            yield project
            project.save_analysis()  # only after a command that succeeded: a failed one changes nothing
    except typer.Exit:  # a command's own exit code (a verify mismatch, a refusal)
        raise
    except IvmError as error:
        _fail(error, 1, as_json, lines=lines)
    except KeyboardInterrupt:
        _fail(IvmError("interrupted"), 130, as_json, plain="interrupted", lines=lines)
    except Exception as error:  # a Spark or Java failure we did not foresee: one line, no stack
        from ivm_sql.catalog import first_line

        if ctx.obj["verbose"] and not as_json:
            err.print(f"[red]error: {first_line(error)}[/red]")
            raise
        _fail(
            IvmError(first_line(error), hint="run with --verbose for details"),
            1,
            as_json,
            lines=lines,
        )


def _fail(
    error: IvmError, code: int, as_json: bool, plain: str | None = None, lines: bool = False
) -> None:
    # the message is text, not markup: "ivm-sql[dbt]" or "a[0]" in it stays as it is
    err.print(plain or f"[red]{escape(str(error))}[/red]", markup=plain is None)
    if as_json:
        typer.echo(report_json.dumps(report_json.error_document(error), lines))
    raise typer.Exit(code) from None


@app.command()
def init(
    ctx: typer.Context,
    folder: Path | None = typer.Argument(
        None, help="Folder of the new project (default: --project, or here)."
    ),
) -> None:
    """Create a new project: ivm.yaml, views/ and migrations/ with one example each. In a dbt
    project, write the materialization that leaves its marked models to ivm instead."""
    from ivm_sql.dbt.macro import write_macro
    from ivm_sql.scaffold import create_project

    root = Path(folder if folder is not None else ctx.obj["path"])
    dbt = is_dbt_project(root)
    try:
        written = [write_macro(root)] if dbt else create_project(root)
    except (IvmError, OSError) as error:
        if isinstance(error, OSError):
            error = IvmError(f"cannot write {root}: {error.strerror}")
        _fail(error, 1, as_json=False)
    for path in written:
        out.print(
            f"created {path}" if path else f"{root} has ivm's materialization already", markup=False
        )
    if dbt:
        out.print(
            "next: dbt seed / dbt run for what the marked models read, then ivm refresh",
            markup=False,
        )
    else:
        out.print(f"next: ivm -p {root} migrate, then ivm -p {root} refresh", markup=False)


@app.command()
def migrate(ctx: typer.Context) -> None:
    """Apply pending migrations/NNNN_name.sql files in order, each statement once."""
    with opened(ctx) as project:
        results = project.migrate()
        for result in results:
            state = f"{result.applied_now} applied" if result.applied_now else "up to date"
            out.print(f"{result.migration.path.name}: {state}")
        if not results:
            out.print("no migrations found")


@app.command()
def compile(
    ctx: typer.Context,
    views: list[str] | None = typer.Argument(None, help="Views to show (default: all)."),
    out_dir: Path | None = typer.Option(
        None, "--out", help="Write one VIEW.sql file per view here."
    ),
    as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Print the Spark SQL that maintains each view, without running anything on data."""
    with opened(ctx, as_json) as project:
        if out_dir is not None and out_dir.exists() and not out_dir.is_dir():  # before any work
            raise IvmError(
                f"--out {out_dir} is not a folder", hint="name a folder (it is made if missing)"
            )
        compiled = project.compile(views or None)
        if as_json:
            typer.echo(
                report_json.dumps(
                    {**report_json.compile_document(compiled), **_python_datasets(project)}
                )
            )
            return
        if out_dir is not None:
            out_dir.mkdir(parents=True, exist_ok=True)
            for item in compiled:
                (out_dir / f"{item.view.split('.')[-1]}.sql").write_text(item.sql)
            out.print(f"wrote {len(compiled)} files to {out_dir}")
            return
        for item in compiled:
            out.print(item.sql, markup=False)
        _notes(project, "-- ")  # SQL comments: the output stays runnable


@app.command()
def graph(
    ctx: typer.Context,
    view: str | None = typer.Argument(
        None, help="Draw this view's DBSP circuit (default: the whole project)."
    ),
    asked: Format | None = typer.Option(
        None,
        "--format",
        "-f",
        help="dot and mermaid print text; svg and png draw a file (needs Graphviz). "
        "Default: what --output's suffix names (.svg, .png, .mmd, .dot), else dot.",
    ),
    output: Path | None = typer.Option(
        None,
        "--output",
        "-o",
        help="Write here (default for svg/png: <database or view>.<format>).",
    ),
) -> None:
    """Draw the project (tables, views, the stages that keep them) or one view's circuit."""
    form = choose_format(asked, output)
    with opened(ctx) as project:
        picture = project.graph(view)
        if form.is_image:
            target = output or image_path(picture, form)
            draw(picture, form, target)
            out.print(f"wrote {target}", markup=False)
        elif output is not None:
            output.write_text(text(picture, form), encoding="utf-8")
            out.print(f"wrote {output}", markup=False)
        else:
            typer.echo(text(picture, form), nl=False)


@app.command()
def refresh(
    ctx: typer.Context,
    views: list[str] | None = typer.Argument(
        None, help="Views to refresh (and the views they read); default: all."
    ),
    full: bool = typer.Option(
        False, "--full", help="Recompute from scratch instead of applying changes."
    ),
    as_json: bool = typer.Option(
        False, "--json", help=JSON_HELP + " With --watch, one line per refresh."
    ),
    watch: bool = typer.Option(
        False,
        "--watch",
        help="Refresh now, then again whenever a source changes, until Ctrl-C or SIGTERM: "
        "the first lets the refresh in progress finish (exit 0), a second abandons it (exit 130).",
    ),
    every: str | None = typer.Option(
        None,
        "--every",
        help=f"With --watch: how often to read the sources' Delta logs, e.g. 500ms, 10s, 2m (default {DEFAULT_EVERY}).",
    ),
    until_idle: bool = typer.Option(
        False,
        "--until-idle",
        help="With --watch: stop at the first look that finds no source changed.",
    ),
    clock_every: str | None = typer.Option(
        None,
        "--clock-every",
        help="With --watch: refresh the views that filter on the current time at least this often, "
        f"with no source changed, so rows enter and leave their windows on time; 'off' to wait for a source change (default {DEFAULT_CLOCK_EVERY}).",
    ),
) -> None:
    """Bring views up to date with every source change since their last refresh.

    On a terminal, a live line shows the view and stage being worked on, the views done and
    the time so far. With --watch, one line per refresh instead."""
    with opened(ctx, as_json, lines=watch) as project:
        if watch or every is not None or until_idle or clock_every is not None:
            _watch(project, views or None, watch, full, every, until_idle, as_json, clock_every)
            return
        if as_json:
            reports = project.refresh(views or None, full=full)
            typer.echo(
                report_json.dumps(
                    {**report_json.refresh_document(reports), **_python_datasets(project)}
                )
            )
            return
        header = [f"{'view':<32} {'rows in':>8} {'rows out':>9} {'time':>7}  strategy"]

        def show(report) -> None:
            while (
                header
            ):  # printed with the first view, so a refresh refused at once prints only why
                out.print(header.pop(), markup=False)
            bounded = f"; {report.bounded_reads}" if report.bounded_reads else ""
            progress.view_done(
                f"{report.view:<32} {report.rows_in:>8} {report.rows_out:>9} {report.seconds:>6.1f}s  {report.strategy}{bounded}"
            )

        # the console itself, not this thread's: workers and the live bar's own thread print too
        with RefreshProgress(
            _consoles.out, live=out.is_terminal, redirect=not _consoles.hosted
        ) as progress:
            project.refresh(views or None, full=full, on_stage=progress.stage, on_view=show)
        _notes(project)


def _watch(
    project: Project,
    views: list[str] | None,
    watch: bool,
    full: bool,
    every: str | None,
    until_idle: bool,
    as_json: bool,
    clock_every: str | None,
) -> None:
    """`ivm refresh --watch`: one line, or one JSON line, per refresh, until stopped."""
    if not watch:
        raise IvmError(
            "--every, --clock-every and --until-idle go with --watch", hint="add --watch"
        )
    if full:
        raise IvmError(
            "--full cannot be combined with --watch: it would recompute every view at every change",
            hint="run `ivm refresh --full` first, then `ivm refresh --watch`",
        )
    seconds = parse_interval(every or DEFAULT_EVERY)  # before Spark starts: a typo fails at once
    clock_seconds = parse_clock_interval(clock_every or DEFAULT_CLOCK_EVERY)
    project.views()  # so does a mistake in a views file
    spark = project.spark  # before the handlers: a local SparkContext installs its own for SIGINT

    # this command's, whichever thread the first signal arrives on (the server's relay)
    errors = _consoles.err

    def stopping(name: str) -> None:
        errors.print(
            f"{name}: stopping after the refresh in progress (again to abandon it)",
            markup=False,
            highlight=False,
        )

    stopper = StopOnSignal(stopping, lambda: cancel_jobs(spark), relay=_consoles.relay)
    clock = (
        ""
        if clock_seconds is None
        else f"; a view on the current time at least every {clock_every or DEFAULT_CLOCK_EVERY}"
    )
    print(
        f"watching: refreshing now, then whenever a source changes (looking every {every or DEFAULT_EVERY}{clock}); "
        "Ctrl-C stops",
        file=sys.stderr,
        flush=True,
    )
    count = 0
    with stopper:
        rounds = project.watch(views, seconds, until_idle, stopper.event, clock_every=clock_seconds)
        for count, done in enumerate(rounds, 1):  # noqa: B007 (the count is printed after)
            if as_json:
                typer.echo(report_json.dumps(report_json.watch_document(done), lines=True))
            else:
                out.print(round_line(done), markup=False)
    why = (
        f"stopped by {signal.Signals(stopper.received).name}"
        if stopper.received
        else "idle: no source changed since the last refresh"
    )
    print(f"{why}; {count} refreshes", file=sys.stderr, flush=True)


@app.command()
def status(
    ctx: typer.Context, as_json: bool = typer.Option(False, "--json", help=JSON_HELP)
) -> None:
    """Per view: the source versions it reflects, pending changes, row count; orphaned state.

    Orphaned state: ivm's tables that no view keeps any more (its file was removed)."""
    with opened(ctx, as_json) as project:
        statuses, orphaned = project.overview()
        if as_json:
            typer.echo(
                report_json.dumps(
                    {**report_json.status_document(statuses, orphaned), **_python_datasets(project)}
                )
            )
            return
        table = Table("view", "reflects", "pending changes", "rows", "policy")
        for item in statuses:
            if not item.refreshed:
                table.add_row(item.view, "-", "never refreshed", "-", item.policy)
                continue
            versions = ", ".join(f"{t}@{v}" for t, v in sorted(item.versions.items()))
            if item.now is not None:  # a filter on the current time was evaluated then
                versions += f", now@{item.now.isoformat(sep=' ', timespec='seconds')}"
            pending = ", ".join(f"{t}@{v}" for t, v in sorted(item.pending.items())) or "none"
            table.add_row(item.view, versions, pending, str(item.rows), item.policy)
        out.print(table)
        if orphaned:
            out.print(
                "orphaned state, kept by no view (`ivm drop VIEW` or `ivm prune` removes it):"
            )
            left = Table("view", "tables", "user view")
            for state in orphaned:
                owner = (
                    f"{state.view} (still defined: stages it no longer has)"
                    if state.defined
                    else state.view
                )
                left.add_row(owner, ", ".join(state.tables), state.user_view or "-")
            out.print(left)
        _notes(project)


@app.command()
def history(
    ctx: typer.Context,
    view: str | None = typer.Argument(None, help="One view's refreshes, with their stages."),
    limit: int = typer.Option(20, "--limit", "-n", min=1, help="Refreshes to show."),
    as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """What the last refreshes did, from the refresh event log, and each view's efficiency.

    One line per refresh and view: when, the strategy and why, rows in and out, the time.
    Given a view, each of its stages too. Then, per view, the median time of its incremental
    and of its full refreshes in the log, and their ratio."""
    with opened(ctx, as_json) as project:
        found = project.history(view, limit)
        if as_json:
            typer.echo(report_json.dumps(report_json.history_document(found)))
            return
        if not found.refreshes:
            out.print(
                "no refresh logged yet"
                + ("" if project.config.history.log else " (history.log is false in ivm.yaml)")
            )
            return
        table = Table("refresh", "view", "strategy", "rows in", "rows out", "time", "reason")
        for entry in found.refreshes:
            seconds = "-" if entry.seconds is None else f"{entry.seconds:.1f}s"
            strategy = entry.strategy + ("" if entry.outcome == "ok" else f" ({entry.outcome})")
            table.add_row(
                entry.clock.strftime("%Y-%m-%d %H:%M:%S"),
                entry.view,
                strategy,
                str(entry.rows_in),
                str(entry.rows_out),
                seconds,
                entry.reason,
            )
            if view is not None:
                for stage in entry.stages:
                    table.add_row("", f"  {stage.table}", *_stage_cells(stage))
        out.print(table)
        ratios = Table(
            "view", "incremental: median (runs)", "full: median (runs)", "full / incremental"
        )
        for item in found.efficiency:
            ratios.add_row(
                item.view,
                _median(item.incremental_median, item.incremental_runs),
                _median(item.full_median, item.full_runs),
                "-" if item.ratio is None else f"{item.ratio:.1f}x",
            )
        out.print(ratios)


def _stage_cells(stage) -> list[str]:
    """A stage's cells under its refresh: strategy, rows, time, and where the time went."""
    if stage.seconds is None:
        return [stage.strategy, "", str(stage.rows_out or 0), "-", stage.reason]
    parts = f"plan {stage.plan_seconds:.1f}s, change {stage.change_seconds:.1f}s, write {stage.write_seconds:.1f}s"
    jobs = "" if stage.spark_jobs is None else f", {stage.spark_jobs} jobs"
    return [
        stage.strategy or stage.action,
        str(stage.rows_in or 0),
        str(stage.rows_out or 0),
        f"{stage.seconds:.1f}s",
        f"{parts}; {stage.statements} statements{jobs}"
        + (f"; {stage.error}" if stage.error else ""),
    ]


def _median(seconds: float | None, runs: int) -> str:
    return "-" if seconds is None else f"{seconds:.1f}s ({runs})"


def _notes(project: Project, prefix: str = "") -> None:
    """A line for each dataset of a pipeline project that ivm leaves to spark-pipelines."""
    for note in project.notes():
        out.print(f"{prefix}{note}", markup=False)


def _python_datasets(project: Project) -> dict:
    """The same for --json: ``{"python_datasets": [...]}`` (an empty list outside pipelines)."""
    return {"python_datasets": report_json.python_datasets(project.python_datasets())}


@app.command()
def verify(
    ctx: typer.Context,
    views: list[str] | None = typer.Argument(None, help="Views to check (default: all)."),
    as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Compare each view with its SELECT recomputed from scratch at the same versions."""
    with opened(ctx, as_json) as project:
        results = project.verify(views or None)
        if as_json:
            document = report_json.verify_document(results)
            typer.echo(report_json.dumps(document))
            if not document["ok"]:
                raise typer.Exit(1)
            return
        failed = 0
        for result in results:
            if result.ok:
                out.print(
                    f"{'skipped' if result.problem else 'ok':<9} {result.view}  {result.problem}".rstrip(),
                    markup=False,
                )
                continue
            failed += 1
            out.print(f"MISMATCH  {result.view}  {result.problem}", markup=False)
            for row in result.missing:
                out.print(f"  missing from the view: {row}", markup=False)
            for row in result.extra:
                out.print(f"  not in the recomputed SELECT: {row}", markup=False)
        if failed:
            raise typer.Exit(1)


YES_HELP = "Drop without asking (needed when standard input is not a terminal)."


@app.command()
def drop(
    ctx: typer.Context,
    view: str = typer.Argument(..., help="A view whose CREATE VIEW was removed from the project."),
    yes: bool = typer.Option(False, "--yes", "-y", help=YES_HELP),
) -> None:
    """Remove the state tables (and the view users queried) that a removed view left behind."""
    with opened(ctx) as project:
        _drop_after_asking(project, [project.state_of(view)], yes)


@app.command()
def prune(
    ctx: typer.Context, yes: bool = typer.Option(False, "--yes", "-y", help=YES_HELP)
) -> None:
    """Remove every orphaned state table: those `ivm status` lists as kept by no view."""
    with opened(ctx) as project:
        states = project.orphaned()
        if not states:
            out.print("no orphaned state")
            return
        _drop_after_asking(project, states, yes)


def _drop_after_asking(project: Project, states: list[ViewState], yes: bool) -> None:
    """Say what will go, ask on a terminal (unless ``yes``), then drop it."""
    names = [
        (name, "view" if name == s.user_view else "table", s.view)
        for s in states
        for name in s.names
    ]
    out.print(f"will drop {len(names)}:")
    for name, kind, view in names:
        out.print(f"  {kind:<5} {name}  (state of {view})", markup=False)
    if not yes:
        if not sys.stdin.isatty():
            raise IvmError(
                "nothing dropped: asking for confirmation needs a terminal",
                hint="pass --yes to drop without asking",
            )
        if not typer.confirm("drop them?", default=False):
            out.print("nothing dropped")
            raise typer.Exit(1)
    dropped = project.drop(states)
    out.print(f"dropped {len(dropped)}")


@app.command()
def optimize(
    ctx: typer.Context,
    retain: float = typer.Option(
        TOMBSTONE_HOURS,
        "--retain",
        min=0,
        help="Hours of removed files VACUUM keeps at least (more when a view still reads older changes).",
    ),
) -> None:
    """Compact ivm's state tables (OPTIMIZE) and delete files no longer needed (VACUUM).

    Every file of the change feed a later refresh still reads is kept."""
    with opened(ctx) as project:
        for done in project.optimize(retain):
            vacuum = done.note or (
                f"VACUUM RETAIN {done.retained_hours} HOURS"
                + (
                    f": {done.files_deleted} files deleted"
                    if done.files_deleted is not None
                    else ""
                )
            )
            out.print(
                f"{done.table}: {done.files_compacted} files compacted into {done.files_written}; {vacuum}",
                markup=False,
            )


@app.command()
def sql(
    ctx: typer.Context, statement: str = typer.Argument(..., help="One Spark SQL statement.")
) -> None:
    """Run Spark SQL in the project's database and print the result as a table."""
    with opened(ctx) as project:
        result = project.sql(statement)
        if result.columns:
            table = Table(*result.columns)
            for row in result.rows:
                table.add_row(*("NULL" if v is None else str(v) for v in row))
            out.print(table)


server = typer.Typer(
    help="A server that keeps this project's Spark warm: while it runs, ivm's commands of the project run in it, and other clients reach it over Spark Connect.",
    no_args_is_help=True,
)
app.add_typer(server, name="server")


def _describe(record: records.ServerRecord) -> str:
    return f"at {record.url} (pid {record.pid}) since {record.since:%Y-%m-%d %H:%M:%S} UTC"


@server.command("start")
def server_start(ctx: typer.Context) -> None:
    """Start the project's server and wait until it serves.

    It takes ivm's commands on a socket in .ivm and Spark Connect clients on 127.0.0.1 only,
    and asks every client for a token made at this start, kept in .ivm/server.json, which only
    you can read; ivm's commands send it."""
    with opened(ctx) as project:
        record, started = servers.start(project.config, project.root)
        out.print(
            f"{'started' if started else 'already running'}: ivm server for {record.root} {_describe(record)}",
            markup=False,
        )


@server.command("stop")
def server_stop(ctx: typer.Context) -> None:
    """Stop the project's server and its JVM."""
    with opened(ctx) as project:
        record, found = servers.stop(project.root)
        if record is None:
            out.print(f"no ivm server runs for {project.root}", markup=False)
        elif found is records.State.GONE:
            out.print(
                f"the ivm server for {record.root} (pid {record.pid}) was already gone; its record is removed",
                markup=False,
            )
        else:
            out.print(f"stopped the ivm server for {record.root} (pid {record.pid})", markup=False)


@server.command("status")
def server_status(ctx: typer.Context) -> None:
    """Say whether the project's server runs, where, and since when; exit code 1 if it does not."""
    with opened(ctx) as project:
        if project.config.spark.remote is not None:
            out.print(
                f"{project.root} connects to {project.config.spark.remote} (spark.remote in ivm.yaml)",
                markup=False,
            )
            return
        record = records.read_record(project.root)
        found = records.state(record) if record is not None else None
        if found is records.State.RUNNING:
            out.print(f"running: ivm server for {record.root} {_describe(record)}", markup=False)
            return
        if record is None:
            out.print(f"not running: no ivm server for {project.root}", markup=False)
        elif found is records.State.NOT_ANSWERING:
            out.print(
                f"not answering: the ivm server for {record.root} (pid {record.pid}) lives but does not answer "
                f"at {record.url}; it may be starting, else end it with `ivm server stop`",
                markup=False,
            )
        else:
            servers.stop(project.root)  # only removes the record: its process is gone
            out.print(
                f"gone: the ivm server for {record.root} (pid {record.pid}, {record.url}) has ended; "
                "its record is removed",
                markup=False,
            )
    raise typer.Exit(1)


@server.command("env")
def server_env(
    ctx: typer.Context,
    as_json: bool = typer.Option(False, "--json", help='Print {"remote", "token"} instead.'),
) -> None:
    """Print the running server's Spark Connect endpoint and token for other clients:
    `eval "$(ivm server env)"` sets SPARK_REMOTE and SPARK_CONNECT_AUTHENTICATE_TOKEN, which
    pyspark, notebooks and spark-pipelines read."""
    with opened(ctx, as_json) as project:
        record = records.endpoint(project.root)
        if record is None:
            raise IvmError(
                f"no ivm server runs for {project.root}", hint="start it: `ivm server start`"
            )
        token = records.server_token(record).value
        if as_json:
            typer.echo(report_json.dumps({"remote": record.url, "token": token}))
            return
        typer.echo(f"export SPARK_REMOTE={shlex.quote(record.url)}")
        typer.echo(f"export {records.TOKEN_VARIABLE}={shlex.quote(token)}")


if __name__ == "__main__":  # python -m ivm_sql.cli
    sys.exit(app())
