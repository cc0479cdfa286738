"""Live progress of `ivm refresh` on a terminal: the views done out of all, the view and
stage being worked on, and the time so far, drawn below the per-view lines as they come.

Off a terminal (a pipe, CI) nothing is drawn and the per-view lines are all there is, as
before: scripts and the README's examples read them.
"""

from __future__ import annotations

from types import TracebackType

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Column

from ivm_sql.runtime.refresh import StageStart
from ivm_sql.runtime.watch import Round


class RefreshProgress:
    """Prints the per-view lines of a refresh on ``console``, with a live bar below them when
    ``live`` (the console is a terminal)."""

    def __init__(self, console: Console, live: bool, redirect: bool = True):
        self.console = console
        # the count and the time keep their width: on a narrow terminal, the spinner and the
        # bar give way and the description is cut short
        fixed = {"table_column": Column(min_width=7, no_wrap=True)}
        self.bar = (
            Progress(
                SpinnerColumn(),
                MofNCompleteColumn(**fixed),
                TimeElapsedColumn(**fixed),
                BarColumn(bar_width=20),
                TextColumn(
                    "{task.description}",
                    markup=False,
                    table_column=Column(no_wrap=True, overflow="ellipsis"),
                ),
                # ``redirect``: print() goes above the bar; never in the server, where it would
                # swap sys.stdout under every other command
                console=console,
                transient=True,
                redirect_stdout=redirect,
                redirect_stderr=redirect,
            )
            if live
            else None
        )
        self.task: TaskID | None = None

    def __enter__(self) -> RefreshProgress:
        if self.bar is not None:
            self.bar.start()
            self.task = self.bar.add_task(
                "reading the views and pinning source versions", total=None
            )
        return self

    def __exit__(
        self, kind: type | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        if self.bar is not None:
            self.bar.stop()

    def stage(self, start: StageStart) -> None:
        """A stage begins: show which, of which view."""
        if self.bar is not None and self.task is not None:
            self.bar.update(
                self.task,
                total=start.views,
                description=(
                    f"{start.view}: stage {start.stage_number}/{start.stages} {start.table} [{start.kind}]"
                ),
            )

    def view_done(self, line: str) -> None:
        """A view is done: its line goes above the bar, which moves on by one."""
        self.console.print(line, markup=False)
        if self.bar is not None and self.task is not None:
            self.bar.advance(self.task)


ACTIONS = ("created", "recomputed", "incremental", "unchanged")


def round_line(round: Round) -> str:
    """One line per refresh of `ivm refresh --watch`: when, how many views and what was done
    to them, rows in and out, seconds, and the sources whose change started it.

    ``refresh 2 at 08:51:02: 3 views (1 incremental, 2 unchanged), 4 rows in, 2 rows out, 1.3s; changed: shop.orders 5->7``
    """
    reports = round.reports
    done = ", ".join(
        f"{count} {action}"
        for action in ACTIONS
        if (count := sum(r.action == action for r in reports))
    )
    changed = ", ".join(
        f"{table} {old}->{new}" for table, (old, new) in sorted(round.changed.items())
    )
    return (
        f"refresh {round.number} at {round.at:%H:%M:%S}: {len(reports)} views ({done or 'none'}), "
        f"{sum(r.rows_in for r in reports)} rows in, {sum(r.rows_out for r in reports)} rows out, "
        f"{round.seconds:.1f}s; "
        + (
            f"changed: {changed}"
            if changed
            else CLOCK_MOVED
            if round.clock
            else "first refresh of the watch"
        )
    )


CLOCK_MOVED = "changed: the clock (a view filters on the current time)"
