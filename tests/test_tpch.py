"""TPC-H end to end: the 22 queries as views, kept up to date through the refresh functions.

Real Spark and Delta (the session fixture). The project's migration is the TPC-H schema
(tests/tpch/schema.sql), its views the 22 queries (tests/tpch/queries/qNN.sql, each the
standard query at its validation parameters, without a final ORDER BY unless it has a
LIMIT). A small deterministic database (tests/tpch/generate.py, about SF 0.001) is loaded,
the views are refreshed, then each round runs RF1 (new orders and their lineitems), RF2
(old orders and their lineitems deleted) and random UPDATEs, and refreshes. After the last
round (by default; after the load and every round with IVM_TPCH_CHECK=each), every view
must equal its SELECT evaluated directly by Spark on the current tables (as bags, same
column names and types). A view wrong after the load stays wrong for the groups no round
touches, so the last comparison catches it too; the default keeps CI's suite short.

The strategy of each query (its stages from ``plans()``) and what each refresh did are
printed (pytest -s); with IVM_TPCH_REPORT=1 they are also written to tests/tpch/STRATEGIES.md
(committed from ``IVM_TPCH_ROUNDS=2 IVM_TPCH_REPORT=1 pytest tests/test_tpch.py``).

Knobs: IVM_TPCH_ROUNDS=3 (more rounds than the default 1), IVM_TPCH_QUERIES=q03,q18 (only
those views), IVM_TPCH_CHECK=each (compare after the load and every round, and run
``verify()`` after the last; about a minute each on this machine).
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from oracle import bag_diffs, describe, schema_of
from tpch.generate import Tpch

from ivm_sql.errors import IvmError
from ivm_sql.project import Project
from ivm_sql.runtime.refresh import ViewReport

MakeProject = Callable[[dict[str, str]], Path]

TPCH = Path(__file__).parent / "tpch"
SCHEMA = (TPCH / "schema.sql").read_text()
QUERIES = {path.stem: path.read_text() for path in sorted((TPCH / "queries").glob("q*.sql"))}
REPORT = TPCH / "STRATEGIES.md"
WRITE_REPORT = os.environ.get("IVM_TPCH_REPORT") == "1"
SEED = 2024
ROUNDS = int(os.environ.get("IVM_TPCH_ROUNDS", "1"))
# "last": compare after the last round only; "each": after the load and every round, then verify()
CHECK = "each" if WRITE_REPORT else os.environ.get("IVM_TPCH_CHECK", "last")

# A subset while debugging: IVM_TPCH_QUERIES=q03,q18 (STRATEGIES.md is never written from a subset)
SUBSET = [q.strip() for q in os.environ.get("IVM_TPCH_QUERIES", "").split(",") if q.strip()]


def select_of(text: str) -> str:
    """The SELECT of a ``CREATE VIEW name AS ...;`` file (comments before it dropped)."""
    match = re.search(r"CREATE\s+VIEW\s+\w+\s+AS\s+(.*?);?\s*$", text, re.IGNORECASE | re.DOTALL)
    assert match, text
    return match.group(1)


def project_files(names: list[str]) -> dict[str, str]:
    """The schema and the views, with the cost model off: refresh rounds change orders and
    lineitem together, whose joins the cost model would recompute, and this test checks the
    incremental rules (the cost model's choice is checked by the oracles' last round)."""
    return {
        "migrations/0001_tpch.sql": SCHEMA,
        "ivm.yaml": "refresh: {recompute_above: never}\n",
        **{f"views/{name}.sql": QUERIES[name] for name in names},
    }


# comparing -------------------------------------------------------------------------------


def compare(project: Project, names: list[str], label: str) -> tuple[list[str], dict[str, int]]:
    """Each view against its SELECT run by Spark on the current tables, as bags with the
    same columns and types, a few views per Spark job. Returns the failures and each view's
    row count."""
    spark = project.spark
    spark.sql(f"USE `{project.database}`")
    failures, pairs = [], {}
    for name in names:
        actual, expected = spark.table(name), spark.sql(select_of(QUERIES[name]))
        if schema_of(actual) != schema_of(expected):
            failures.append(
                f"{name}, {label}: columns/types differ\n  view:   {schema_of(actual)}\n"
                f"  select: {schema_of(expected)}"
            )
        else:
            pairs[name] = (actual, expected)
    diffs = bag_diffs(pairs, at_once=1)  # TPC-H's joins wait on broadcasts: one at a time
    failures += [describe(name, label, diff) for name, diff in diffs.items() if not diff.equal]
    return failures, {name: diff.view_rows for name, diff in diffs.items()}


def verify_failures(project: Project, label: str) -> list[str]:
    return [
        f"{r.view}, {label}: verify failed {r.problem} missing={r.missing} extra={r.extra}"
        for r in project.verify()
        if not r.ok
    ]


# the run ---------------------------------------------------------------------------------


class Log:
    """What happened, for the printed summary and STRATEGIES.md."""

    def __init__(self) -> None:
        self.timings: list[tuple[str, float]] = []
        self.refreshes: list[tuple[str, dict[str, ViewReport]]] = []
        self.counts: list[tuple[str, dict[str, int]]] = []
        self.stages: dict[str, list[tuple[str, str, str]]] = {}
        self.failures: list[str] = []

    def timed(self, what: str, action: Callable):
        started = time.perf_counter()
        try:
            return action()
        finally:
            seconds = time.perf_counter() - started
            self.timings.append((what, seconds))
            print(f"[tpch] {what}: {seconds:.1f}s", flush=True)


def run_sql(project: Project, statements: list[str]) -> None:
    for statement in statements:
        project.sql(statement)


def run_tpch(project: Project, names: list[str], log: Log) -> None:
    log.timed("migrate", project.migrate)
    try:
        compiled = log.timed("compile", project.compile)
    except IvmError as error:
        pytest.fail(f"ivm refuses a TPC-H query: {error}")
    assert sorted(c.view.split(".")[-1] for c in compiled) == sorted(names)
    for plan in project.plans():
        log.stages[plan.view.name] = [
            (s.table.split(".")[-1], s.kind, s.strategy) for s in plan.stages
        ]

    data = Tpch(SEED)
    last = f"round {ROUNDS}" if ROUNDS else "load"

    def checkpoint(label: str) -> None:
        reports = log.timed(f"{label}: refresh", project.refresh)
        log.refreshes.append((label, {r.view.split(".")[-1]: r for r in reports}))
        if CHECK == "each" or label == last:
            failures, counts = log.timed(
                f"{label}: compare", lambda: compare(project, names, label)
            )
            log.counts.append((label, counts))
            log.failures += failures
        if CHECK == "each" and label == last:
            log.failures += log.timed(f"{label}: verify", lambda: verify_failures(project, label))

    log.timed("load", lambda: run_sql(project, data.initial()))
    checkpoint("load")
    for round_ in range(1, ROUNDS + 1):
        label = f"round {round_}"
        log.timed(f"{label}: RF1", lambda: run_sql(project, data.rf1()))
        log.timed(f"{label}: RF2", lambda: run_sql(project, data.rf2()))
        log.timed(f"{label}: updates", lambda: run_sql(project, data.updates(round_)))
        checkpoint(label)


def strategies(log: Log, names: list[str]) -> str:
    """STRATEGIES.md: each query's stages and what each refresh did. No timings, so the file
    only changes when ivm's plans or the generated data do."""
    lines = [
        "# TPC-H queries: how ivm maintains each",
        "",
        "Written by tests/test_tpch.py; do not edit. Stages come from `Project.plans()`",
        "(`stage.kind`, `stage.strategy`), innermost first. Then what each refresh did",
        "(`report.action`, `report.reason`), with the changed source rows it read and the rows it",
        "wrote to the view's tables (`rows_in/rows_out`), and the view's row count: the first refresh",
        f"after the load, then {ROUNDS} rounds of RF1 + RF2 + random UPDATEs (seed {SEED}). Timings",
        "are printed by the test (pytest -s), not kept here.",
        "",
        "## Stages",
        "",
        "| query | stage table | kind | strategy |",
        "|---|---|---|---|",
    ]
    for name in QUERIES:
        for table, kind, strategy in log.stages.get(name, []):
            lines.append(f"| {name} | `{table}` | {kind} | {strategy} |")
    labels = [label for label, _ in log.refreshes]
    counts = dict(log.counts)
    lines += [
        "",
        "## Refreshes",
        "",
        "Each cell: action (reason); rows_in/rows_out; rows in the view.",
        "",
        "| query | " + " | ".join(labels) + " |",
        "|---|" + "---|" * len(labels),
    ]
    for name in names:
        cells = []
        for label, reports in log.refreshes:
            r = reports.get(name)
            rows = counts.get(label, {}).get(name, "?")
            cells.append(
                "-" if r is None else f"{r.strategy}; {r.rows_in}/{r.rows_out}; {rows} rows"
            )
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def timings(log: Log, names: list[str], total: float, load: tuple[float, float]) -> str:
    """Seconds per step and per view refresh, with the machine's load average around the run."""
    lines = ["", f"TPC-H timings (load average at start {load[0]:.1f}, at end {load[1]:.1f}):"]
    lines += [f"  {what:<22} {seconds:7.1f}s" for what, seconds in log.timings]
    lines.append(f"  {'total':<22} {total:7.1f}s")
    labels = [label for label, _ in log.refreshes]
    lines += ["", "  seconds per view refresh: " + " | ".join(labels)]
    for name in names:
        cells = [
            f"{reports[name].seconds:6.1f}" if name in reports else "     -"
            for _, reports in log.refreshes
        ]
        lines.append(f"  {name:<5} " + "  ".join(cells))
    return "\n".join(lines)


@pytest.mark.deep
def test_tpch_queries_match_recompute_through_refresh_rounds(
    spark, tmp_project: MakeProject
) -> None:
    names = SUBSET or list(QUERIES)
    started, load_before = time.perf_counter(), os.getloadavg()[0]
    log = Log()
    project = Project.open(tmp_project(project_files(names)), spark=spark)
    try:
        run_tpch(project, names, log)
    finally:
        text = strategies(log, names)
        if WRITE_REPORT and not SUBSET and not log.failures and len(log.refreshes) == ROUNDS + 1:
            REPORT.write_text(text)
        print(
            "\n"
            + text
            + timings(log, names, time.perf_counter() - started, (load_before, os.getloadavg()[0]))
        )
    assert not log.failures, "\n\n".join(log.failures)
    # the data must give every query rows (round 2 empties Q16 on purpose, so not after it)
    counts = dict(log.counts)
    first = counts.get("load") or counts.get("round 1") or {}
    empty = [name for name in names if first.get(name) == 0]
    assert not empty, f"queries returning no rows on the generated data: {empty}"
