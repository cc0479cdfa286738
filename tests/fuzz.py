"""The view fuzzer (issue 21): random views, random data, the differential oracle.

``fuzz(spark, make_project, views=N, rounds=R, seed=S, batch=B)`` draws batches of random
views (``viewgen.batches``) and runs each batch on one project: the oracle's tables, random
rows (data seed), a first refresh, then R rounds of ``oracle.RandomChanges.round``, each
followed by a refresh and ``oracle.compare_views``; the cost model is off. A view ivm
refuses to compile, or whose refresh fails, is a finding too: the generator only writes
what docs/sql-support.md says is maintained.

Hypothesis draws the batches and shrinks a failing one. Each view's outcome is kept, keyed
by its SQL and the SQL of the views it reads, so dropping views costs no Spark run (a batch
holding a view known to fail fails at once) and only a changed view runs again, alone with
the views it reads. The shrunk failure is printed as a ready pytest test calling
``check_views``, to paste into tests/test_churn.py.
"""

from __future__ import annotations

import random
import re
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from hypothesis import HealthCheck, Phase, Verbosity, given, settings
from hypothesis import seed as hypothesis_seed
from oracle import (
    EMPTIED,
    INCREMENTAL_ONLY,
    MIGRATION,
    MakeProject,
    RandomChanges,
    ViewSpec,
    apply_changes,
    as_large,
    compare_views,
    global_recomputes,
    plain_dml_recomputed,
    table_rows,
)
from py4j.protocol import Py4JJavaError
from pyspark.errors import PySparkException
from viewgen import FAMILIES, GeneratedView, batches

from ivm_sql.errors import IvmError
from ivm_sql.project import Project

Log = Callable[[str], None]


# one project ------------------------------------------------------------------------------


@dataclass
class BatchRun:
    """What one project run found: per view its first failure; views dropped because a view
    they read failed; views whose SELECT Spark itself cannot run (so nothing to compare
    with: not ivm's failure); the views compared, and how many (view, refresh) pairs."""

    failures: dict[str, str] = field(default_factory=dict)
    skipped: set[str] = field(default_factory=set)
    unrunnable: dict[str, str] = field(default_factory=dict)
    views_compared: set[str] = field(default_factory=set)
    compared: int = 0
    seconds: float = 0.0


def reads_closure(specs: list[ViewSpec], names: set[str]) -> list[ViewSpec]:
    """``names`` and every view they read, transitively, in the order of ``specs``."""
    by_name = {s.name: s for s in specs}
    wanted, pending = set(), list(names)
    while pending:
        name = pending.pop()
        if name not in wanted:
            wanted.add(name)
            pending.extend(by_name[name].reads)
    return [s for s in specs if s.name in wanted]


class BatchProject:
    """A project holding ``specs``, one views file each (an error's file names its view)."""

    def __init__(self, spark, make_project: MakeProject, specs: list[ViewSpec]):
        files = {f"views/{s.name}.sql": s.create_statement() for s in specs}
        self.root = make_project(
            {"migrations/0001_tables.sql": MIGRATION, "ivm.yaml": INCREMENTAL_ONLY, **files}
        )
        self.project = Project.open(self.root, spark=spark)
        self.live = list(specs)
        self.run = BatchRun()

    def drop(self, error: IvmError, what: str) -> None:
        """Record ``error`` against the view its location names, and remove that view and
        the views reading it; an error placed nowhere is not a view's, so it propagates."""
        name = (
            re.fullmatch(r"(\w+)\.sql", str(error.location.path).rsplit("/", 1)[-1]).group(1)
            if error.location
            else None
        )
        if name not in {s.name for s in self.live}:
            raise error
        self.run.failures[name] = f"view {name}: {what}: {error}"
        readers = {s.name for s in self.live if name in self._reads(s)}
        self.run.skipped |= readers
        for dropped in {name} | readers:
            (self.root / "views" / f"{dropped}.sql").unlink()
        self.live = [s for s in self.live if s.name not in {name} | readers]

    def _reads(self, spec: ViewSpec) -> set[str]:
        return {s.name for s in reads_closure(self.live, {spec.name})} - {spec.name}

    def refresh(self, label: str, as_large_tables: bool, first: bool = False) -> None:
        """Refresh, dropping each view that ivm refuses or whose refresh fails. After the
        first refresh, plain DML must be applied incrementally, as in ``oracle.run_oracle``:
        a recompute is a failure unless the view's plan recomputes all on any change."""
        while self.live:
            try:
                plans = self.project.plans()
            except IvmError as error:
                self.drop(error, "refused by the compiler")
                continue
            try:
                with as_large(as_large_tables):
                    reports = self.project.refresh()
            except IvmError as error:
                self.drop(error, f"{label}: refresh failed")
                continue
            if not first:
                self.check_incremental(label, plans, reports)
            return

    def check_incremental(self, label: str, plans, reports) -> None:
        for report in plain_dml_recomputed(reports, global_recomputes(plans)):
            name = report.view.split(".")[-1]
            self.run.failures.setdefault(
                name, f"view {name}, {label}: plain DML made it {report.action} ({report.reason})"
            )

    def compare(self, label: str) -> None:
        """Compare every live view with its SELECT; keep each view's first failure. When
        Spark fails to run the comparison, the views are compared one by one, and each view
        whose SELECT Spark cannot run is set aside with the reason."""
        if not self.live:
            return
        try:
            messages = compare_views(self.project.spark, self.project.database, self.live, label)
        except (PySparkException, Py4JJavaError):
            messages = []
            for spec in list(self.live):
                if spec in self.live:  # not set aside with a view it reads
                    messages += self._compare_alone(spec, label)
        for message in messages:
            name = re.match(r"view (\w+),", message).group(1)
            self.run.failures.setdefault(name, message)
        self.run.compared += len(self.live)
        self.run.views_compared.update(s.name for s in self.live)

    def _compare_alone(self, spec: ViewSpec, label: str) -> list[str]:
        try:
            return compare_views(
                self.project.spark,
                self.project.database,
                reads_closure(self.live, {spec.name}),
                label,
            )
        except (PySparkException, Py4JJavaError) as error:
            reason = str(error).strip().splitlines()[0][:300]
            self.run.unrunnable[spec.name] = (
                f"view {spec.name}: Spark cannot run its SELECT: {reason}"
            )
            self.live = [
                s for s in self.live if s.name != spec.name and spec.name not in self._reads(s)
            ]
            return []


def run_views(
    spark, make_project: MakeProject, specs: list[ViewSpec], data_seed: int, rounds: int
) -> BatchRun:
    """One project: random rows from ``data_seed``, a first refresh, ``rounds`` rounds of
    random changes, a refresh and a comparison after each (round 2 empties orders, round 3
    products; the first refresh and even rounds treat every table as large (``oracle.as_large``), the others as it is)."""
    started = time.perf_counter()
    batch = BatchProject(spark, make_project, specs)
    project = batch.project
    project.migrate()
    changes = RandomChanges(random.Random(data_seed))
    apply_changes(project, changes.initial())
    batch.refresh("first refresh", as_large_tables=True, first=True)
    batch.compare(f"data seed {data_seed}, initial load")
    for round_ in range(1, rounds + 1):
        statements = changes.round(table_rows(project), empty=EMPTIED.get(round_))
        apply_changes(project, statements)
        label = f"data seed {data_seed}, round {round_}"
        batch.refresh(label, as_large_tables=round_ % 2 == 0)
        batch.compare(label + "\n  changes:\n    " + ";\n    ".join(statements))
    batch.run.seconds = time.perf_counter() - started
    return batch.run


def check_views(
    spark, make_project: MakeProject, specs: list[ViewSpec], data_seed: int, rounds: int
) -> dict[str, str]:
    """Each failing view's first failure (empty: every view refreshed and equals its SELECT)."""
    return run_views(spark, make_project, specs, data_seed, rounds).failures


# outcomes kept across a shrink ------------------------------------------------------------


class Outcomes:
    """Runs views for one data seed and number of rounds, and keeps each view's outcome
    (its first failure, or None), keyed by its SQL and that of the views it reads."""

    def __init__(self, spark, make_project: MakeProject, data_seed: int, rounds: int):
        self.spark, self.make_project = spark, make_project
        self.data_seed, self.rounds = data_seed, rounds
        self.known: dict[tuple, str | None] = {}
        self.runs: list[BatchRun] = []
        self.run_new = True  # off: views not yet run are taken to pass (the shrink's time is up)

    @staticmethod
    def key(specs: list[ViewSpec], spec: ViewSpec) -> tuple:
        return tuple((s.name, s.select, s.reads) for s in reads_closure(specs, {spec.name}))

    def failures(self, specs: list[ViewSpec]) -> dict[str, str]:
        """The failures of ``specs``, running (with the views they read) only those whose
        outcome is unknown, and none when a known failure already fails the batch."""
        keys = {s.name: self.key(specs, s) for s in specs}
        known = {name: self.known[k] for name, k in keys.items() if k in self.known}
        failed = {name: message for name, message in known.items() if message}
        unknown = {name for name in keys if name not in known}
        if failed or not unknown or not self.run_new:
            return failed
        run = run_views(
            self.spark,
            self.make_project,
            reads_closure(specs, unknown),
            self.data_seed,
            self.rounds,
        )
        self.runs.append(run)
        for spec in reads_closure(specs, unknown):
            if spec.name not in run.skipped:
                self.known[keys[spec.name]] = run.failures.get(spec.name)
        return {name: message for name, message in run.failures.items() if name in keys}


# the search --------------------------------------------------------------------------------


@dataclass
class Finding:
    """A shrunk failing batch: the views a failure needs, its messages, a ready test."""

    data_seed: int
    rounds: int
    specs: list[ViewSpec]
    messages: dict[str, str]

    def test(self, name: str) -> str:
        return ready_test(
            name, self.specs, self.data_seed, self.rounds, next(iter(self.messages.values()))
        )


@dataclass
class FuzzReport:
    """Counts of a fuzz run, and what it found."""

    views: int = 0  # generated
    views_compared: int = 0  # compiled and refreshed, so compared at least once
    batches: int = 0
    rounds: int = 0
    view_rounds: int = 0  # (view, refresh) pairs compared in the generated batches
    families: Counter = field(default_factory=Counter)
    findings: list[Finding] = field(default_factory=list)
    # by "batch N view": Spark cannot run its SELECT
    unrunnable: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0

    def summary(self) -> str:
        return (
            f"views generated {self.views}, views compared {self.views_compared}, batches {self.batches}, "
            f"rounds {self.rounds}, "
            f"view-rounds compared {self.view_rounds}, failures {len(self.findings)}, "
            f"views whose SELECT Spark cannot run {len(self.unrunnable)} "
            f"({self.seconds:.0f}s)"
        )

    def tests(self, seed: int) -> list[str]:
        return [
            f.test(f"test_fuzz_seed_{seed}_data_{f.data_seed}_{i}")
            for i, f in enumerate(self.findings, 1)
        ]


class BatchFailed(AssertionError):
    pass


FAILURE_KINDS = (
    "refused by the compiler",
    "refresh failed",
    "plain DML made it",
    "columns/types differ",
    "view differs from its SELECT",
)


def failure_kind(message: str) -> str:
    """What went wrong, as one of ``FAILURE_KINDS`` (the first the message names)."""
    return next(kind for kind in FAILURE_KINDS if kind in message)


def ready_test(name: str, specs: list[ViewSpec], data_seed: int, rounds: int, message: str) -> str:
    """A pytest function for tests/test_churn.py reproducing a finding."""
    views = "\n".join(
        f'        ViewSpec("{s.name}", """{s.select}"""'
        + (f", reads={s.reads!r}" if s.reads else "")
        + "),"
        for s in specs
    )
    first_line = message.splitlines()[0].replace('"""', "'''")
    return (
        f"def {name}(spark, tmp_project: MakeProject) -> None:\n"
        f'    """Found by the view fuzzer (tests/fuzz.py): {first_line}"""\n'
        f"    from fuzz import check_views\n\n"
        f"    views = [\n{views}\n    ]\n"
        f"    failures = check_views(spark, tmp_project, views, data_seed={data_seed}, rounds={rounds})\n"
        f'    assert not failures, "\\n\\n".join(failures.values())\n'
    )


def search_batch(
    spark,
    make_project: MakeProject,
    slots: int,
    rounds: int,
    generation_seed: int,
    data_seed: int,
    shrink_seconds: float,
    log: Log,
) -> tuple[list[GeneratedView], BatchRun | None, Finding | None]:
    """Draw one batch of ``slots`` slots and run it; if a view fails, let hypothesis shrink
    the batch (at most ``shrink_seconds`` of new runs). Returns the batch, its run and the
    shrunk finding, if any."""
    outcomes = Outcomes(spark, make_project, data_seed, rounds)
    drawn: list[list[GeneratedView]] = []
    failing: list[tuple[list[GeneratedView], dict[str, str]]] = []
    shrink_deadline = [float("inf")]

    @hypothesis_seed(generation_seed)
    @settings(
        max_examples=2,
        database=None,
        deadline=None,
        phases=(Phase.generate, Phase.shrink),
        suppress_health_check=list(HealthCheck),
        report_multiple_bugs=False,
        verbosity=Verbosity.quiet,
        print_blob=False,
    )
    @given(batches(slots))
    def check(generated: list[GeneratedView]) -> None:
        if not generated:  # hypothesis tries the simplest batch first: no view
            return
        if not drawn:
            drawn.append(generated)
        elif not failing or time.perf_counter() > shrink_deadline[0]:
            outcomes.run_new = False
        failures = outcomes.failures([g.spec for g in generated])
        if (
            failing
        ):  # while shrinking, only the first failure's kind counts: the shrink stays on its bug
            kinds = {failure_kind(message) for message in failing[0][1].values()}
            failures = {
                name: message
                for name, message in failures.items()
                if failure_kind(message) in kinds
            }
        if failures:
            if not failing:
                shrink_deadline[0] = time.perf_counter() + shrink_seconds
                log(f"  {len(failures)} view(s) failed ({', '.join(sorted(failures))}); shrinking")
            failing.append((generated, failures))
            raise BatchFailed("\n\n".join(failures.values()))

    try:
        check()
    except BatchFailed:
        pass
    run = outcomes.runs[0] if outcomes.runs else None
    if not failing:
        return drawn[0] if drawn else [], run, None
    generated, failures = failing[-1]
    specs = [g.spec for g in generated]
    needed = reads_closure(specs, set(failures))
    log(f"  shrunk to {len(needed)} view(s) in {len(outcomes.runs) - 1} more run(s)")
    return drawn[0], run, Finding(data_seed, rounds, needed, failures)


def fuzz(
    spark,
    make_project: MakeProject,
    views: int = 25,
    rounds: int = 2,
    seed: int = 0,
    batch: int = 25,
    shrink_seconds: float = 300.0,
    log: Log = print,
) -> FuzzReport:
    """Generate and check about ``views`` random views, in batches of ``batch`` slots (about
    five in six hold a view), each batch on one project with its own data seed."""
    report = FuzzReport(rounds=rounds)
    started = time.perf_counter()
    while report.views < views:
        number = report.batches
        data_seed = seed * 1000 + number
        slots = min(batch, round((views - report.views) * 1.2) + 1)
        batch_started = time.perf_counter()
        generated, run, finding = search_batch(
            spark,
            make_project,
            slots,
            rounds,
            generation_seed=data_seed,
            data_seed=data_seed,
            shrink_seconds=shrink_seconds,
            log=log,
        )
        report.batches += 1
        report.views += len(generated)
        report.view_rounds += run.compared if run else 0
        report.views_compared += len(run.views_compared) if run else 0
        report.families.update(f for g in generated for f in g.families)
        report.unrunnable.update(
            {
                f"batch {number} {name}": reason
                for name, reason in (run.unrunnable if run else {}).items()
            }
        )
        if finding:
            report.findings.append(finding)
        log(
            f"batch {number}: {len(generated)} views, {rounds} rounds, data seed {data_seed}, "
            f"first run {run.seconds if run else 0:.0f}s, total {time.perf_counter() - batch_started:.0f}s"
            + (f", FAILED: {', '.join(sorted(finding.messages))}" if finding else "")
        )
    report.seconds = time.perf_counter() - started
    return report


def family_coverage(report: FuzzReport) -> set[str]:
    """The families of docs/sql-support.md no generated view used."""
    return set(FAMILIES) - set(report.families)
