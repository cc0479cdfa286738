"""Choice accuracy: does a refresh pick the cheaper way, incremental or recompute, per view?

Every view of the workload is kept four times, in one database: as written (``REFRESH
POLICY AUTO``, choosing from the refresh history: ``physical.learned``), as ``<view>__ana``
(AUTO, choosing by the analytic rules alone: a second project over the same database, with
``history.learn: false``), as ``<view>__inc`` (INCREMENTAL: always the change) and as
``<view>__full`` (FULL: always recomputed); each copy reads the copies of the same kind of
the views it reads. Each round changes the sources, then refreshes each kind in a refresh of
its own, one view at a time, all on the same source versions: so both choosers are timed
against both ways of every changed view, on the same rounds.

Each kind pays its own fixed costs: a refresh keeps each change data feed read for the rest
of that refresh only (``physical.changes``), so no kind reads the changes another one
fetched, and Delta's state of each changed source is computed before the refreshes (as a
server does between commands, ``host.WarmSnapshots``), so the first kind refreshed does not
pay it for the others.

A choice is right when the chosen way took at most 1.1x the faster one's time. A view counts
in a round when its AUTO copy chose (no stage of it was recomputed for a reason other than
its own choice, such as a view it reads recomputed; a later stage recomputed because an
earlier one of the same view was is part of the view's choice), its INCREMENTAL copy
applied the change and its FULL copy recomputed. It prints both choosers' accuracies over
the rounds after the warm-up, the time the chosen ways took (as the INCREMENTAL or FULL copy
took it) against always picking the faster, and what the AUTO copies themselves took: their
plan's own way, with what a choice costs on its path (a change computed before the scans
rule gives it up, a recompute of each stage where the FULL copy runs one statement). ``--explore`` turns ``history.explore`` on for the learned copies.

Change sizes are drawn log-uniformly from --smallest to --largest of the orders; for TPC-H,
every other round is one of TPC-H's official update sets (0.1% of the orders, in one slab of
the key range), the others scattered keys.

    .venv/bin/python bench/choices.py --workload demo --orders 100000 --rounds 10
    .venv/bin/python bench/choices.py --workload tpch --sf 1 --rounds 10 --json /tmp/choices.json
"""

from __future__ import annotations

import argparse
import json
import math
import random
import shutil
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

import yaml
from sqlglot import exp

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/: tpch.py and refresh_vs_full.py

import refresh_vs_full
import tpch

from ivm_sql import Project
from ivm_sql.physical.policy import whole_recompute
from ivm_sql.physical.recompute import RECOMPUTED_BELOW
from ivm_sql.storage import delta_log
from ivm_sql.viewdefs import load_views

REPO = Path(__file__).resolve().parent.parent
ANALYTIC = "__ana"  # the suffix of the copies the analytic rules choose for
KINDS = {"": "AUTO", "__inc": "INCREMENTAL", "__full": "FULL", ANALYTIC: "AUTO"}
RIGHT_WITHIN = 1.1  # a choice is right when it took at most this times the faster way


@dataclass
class ViewRound:
    view: str
    chose: str | None  # "incremental" or "full"; None: no choice (forced, or not changed)
    incremental: float | None
    full: float | None
    chosen_seconds: float | None  # the chosen way's time, as its own copy took it
    auto_seconds: float  # what the AUTO copy took (the same way, timed once more)
    reason: str = ""

    @property
    def counted(self) -> bool:
        return None not in (self.chose, self.incremental, self.full)

    @property
    def right(self) -> bool:
        return self.chosen_seconds <= RIGHT_WITHIN * min(self.incremental, self.full)


@dataclass
class Pass:
    learn: bool
    rounds: list[dict] = field(default_factory=list)  # {"round", "kind", "views": [ViewRound]}


@dataclass
class Projects:
    """The two projects over one database: ``learned`` holds the AUTO copies that learn and
    the INCREMENTAL and FULL copies, ``analytic`` the AUTO copies of the analytic rules."""

    learned: Project
    analytic: Project

    def names(self, suffix: str) -> list[str]:
        project = self.analytic if suffix == ANALYTIC else self.learned
        return [d.name for d in load_views(project.root / "views") if _suffix_of(d.name) == suffix]


def _suffix_of(name: str) -> str:
    return next((s for s in KINDS if s and name.lower().endswith(s)), "")


def variants(views_dir: Path, left_out: set[str]) -> dict[str, str]:
    """Each view but ``left_out`` in each kind (see the module's docstring): per suffix, the
    text of a views file."""
    defs = [d for d in load_views(views_dir) if d.name.lower() not in left_out]
    names = {d.name for d in defs}
    files = {}
    for suffix, policy in KINDS.items():
        statements = []
        for view in defs:
            query = view.query.copy().transform(
                lambda node, suffix=suffix: (
                    _renamed(node, suffix)
                    if isinstance(node, exp.Table) and node.name.lower() in names and not node.db
                    else node
                )
            )
            select = query.sql(dialect="spark", pretty=True)
            statements.append(
                f"CREATE VIEW {view.name}{suffix} REFRESH POLICY {policy} AS\n{select};\n"
            )
        files[suffix] = "\n".join(statements)
    return files


def _renamed(table: exp.Table, suffix: str) -> exp.Table:
    renamed = table.copy()
    renamed.set("this", exp.to_identifier(table.name + suffix))
    return renamed


def demo_projects(root: Path, orders: int, database: str, history: dict) -> Projects:
    refresh_vs_full.build(root, orders, database)  # the demo's views over ``orders`` orders
    return _with_variants(root, database, history)


def tpch_projects(root: Path, sf: float, database: str, history: dict) -> Projects:
    tpch.create_project(root, tpch.QUERIES, {})
    projects = _with_variants(root, database, history)
    parquet, _ = tpch.tpch_parquet(sf)
    tpch.load(projects.learned, parquet)
    return projects


def _with_variants(root: Path, database: str, history: dict) -> Projects:
    """The project in ``root``, migrated into ``database`` with ivm.yaml's ``history``
    settings, its views in the learned, INCREMENTAL and FULL kinds, and beside it in
    ``<root>_analytic`` the same project with the analytic kind and ``history.learn: false``;
    but for the views recomputed whole on any change (top-N, say): they cannot be
    INCREMENTAL, and their AUTO copies have no choice to make."""
    config = yaml.safe_load((root / "ivm.yaml").read_text()) or {}
    config.update(
        database=database,
        refresh={**config.get("refresh", {}), "workers": 1},
        history={**history, "keep_days": "never"},
    )
    (root / "ivm.yaml").write_text(yaml.safe_dump(config))
    project = Project.open(root)
    project.migrate()
    whole = {
        plan.name.rpartition(".")[2].lower()
        for plan in project.plans()
        if whole_recompute(tuple(plan.stages)) is not None
    }
    if whole:
        print(f"left out, recomputed whole on any change: {', '.join(sorted(whole))}", flush=True)
    files = variants(root / "views", whole)
    analytic = root.with_name(f"{root.name}_analytic")
    shutil.copytree(root, analytic, ignore=shutil.ignore_patterns("views"))
    analytic_config = {**config, "history": {**config["history"], "learn": False, "explore": False}}
    (analytic / "ivm.yaml").write_text(yaml.safe_dump(analytic_config))
    shutil.rmtree(root / "views")
    for folder in (root / "views", analytic / "views"):
        folder.mkdir()
    for suffix, text in files.items():
        folder = analytic if suffix == ANALYTIC else root
        (folder / "views" / f"views{suffix or '__auto'}.sql").write_text(text)
    return Projects(Project.open(root), Project.open(analytic))


def demo_changes(project: Project, fraction: float, rng: random.Random, orders: int) -> str:
    """Updates, inserts and deletes of ``fraction`` of the orders, keys scattered."""
    n = max(1, round(fraction * orders))
    seed = rng.randrange(1 << 30)
    top = tpch.scalar(project, "SELECT max(id) FROM orders")
    picked = f"xxhash64(id, {seed}) % {max(orders // n, 1)} = 0"
    project.sql(
        f"UPDATE orders SET quantity = quantity % 7 + 1, status = 'shipped' WHERE {picked} AND id % 3 = 0"
    )
    project.sql(f"DELETE FROM orders WHERE {picked} AND id % 3 = 1")
    project.sql(
        f"INSERT INTO orders SELECT CAST({top} + id AS INT), CAST(id % 10000 + 1 AS INT), "
        f"CAST(id % 1000 + 1 AS INT), 1, 'pending' FROM range(1, {n // 3 + 2}) AS r(id)"
    )
    return f"scattered {fraction:.4%}"


def refresh_round(projects: Projects) -> tuple[list[ViewRound], list[ViewRound]]:
    """Each kind refreshed on its own, on the same source versions (the sources' Delta state
    computed first, outside the times); the learned and the analytic choosers' rounds."""
    learned = projects.learned
    for source in sorted({t for plan in learned.plans() for t in plan.base_tables}):
        delta_log.compute_state(learned.spark, source)
    reports, forced = {}, {}
    for suffix in ("", ANALYTIC, "__inc", "__full"):
        project = projects.analytic if suffix == ANALYTIC else learned
        for report in project.refresh(projects.names(suffix)):
            reports[report.view.split(".")[-1]] = report
        forced[suffix] = _forced_from_outside(project)
    return tuple(_choices(reports, forced[suffix], suffix) for suffix in ("", ANALYTIC))


def _choices(reports: dict, forced: set[str], suffix: str) -> list[ViewRound]:
    """What the AUTO copies of ``suffix`` chose, against the INCREMENTAL and FULL copies."""
    found = []
    for name in sorted(n for n in reports if not _suffix_of(n)):
        auto, inc, full = (reports[f"{name}{s}"] for s in (suffix, "__inc", "__full"))
        if auto.action == "unchanged":
            continue
        chose = "full" if auto.action == "recomputed" else "incremental"
        if auto.view.split(".")[-1] in forced:
            chose = None
        incremental = inc.seconds if inc.action == "incremental" else None
        recomputed = full.seconds if full.action == "recomputed" else None
        chosen = recomputed if chose == "full" else incremental
        found.append(
            ViewRound(name, chose, incremental, recomputed, chosen, auto.seconds, auto.reason)
        )
    return found


def _forced_from_outside(project: Project) -> set[str]:
    """The views whose AUTO copy had no choice in the last refresh (the event log's rows): a
    stage of theirs was recomputed for a reason other than their own choice, such as a view
    they read recomputed. A stage recomputed because one below it in the same view was is
    part of that view's choice (``physical.cascade`` weighs it)."""
    name = f"{project.database}.__ivm_refresh_log"
    rows = project.spark.sql(
        f"SELECT view_name, stage_table, decided_by, reason FROM {name} "
        f"WHERE refresh_id = (SELECT max(refresh_id) FROM {name})"
    ).collect()
    own: dict[str, set[str]] = {}
    for row in rows:
        own.setdefault(row.view_name, set()).add(row.stage_table)
    return {
        row.view_name.split(".")[-1]
        for row in rows
        if row.decided_by == "forced"
        and (row.reason or "").removesuffix(RECOMPUTED_BELOW) not in own[row.view_name]
    }


def run(args: argparse.Namespace, folder: Path) -> tuple[Pass, Pass]:
    """The rounds, scored for the learned and for the analytic chooser."""
    database = "choices"
    root = folder / database
    root.mkdir()
    rng = random.Random(args.seed)
    history = {"learn": True, "explore": args.explore}
    if args.workload == "demo":
        projects = demo_projects(root, args.orders, database, history)
    else:
        projects = tpch_projects(root, args.sf, database, history)
        updates = tpch.update_sets(args.sf, args.rounds)
        loaded_max = tpch.scalar(projects.learned, "SELECT max(o_orderkey) FROM orders")
        orders = tpch.scalar(projects.learned, "SELECT count(*) FROM orders")
    project = projects.learned
    project.refresh()
    projects.analytic.refresh()
    passes = (Pass(True), Pass(False))
    for number in range(1, args.rounds + 1):
        fraction = math.exp(rng.uniform(math.log(args.smallest), math.log(args.largest)))
        if args.workload == "demo":
            kind = demo_changes(project, fraction, rng, args.orders)
        elif number % 2 == 1:
            tpch.official_functions(project, updates, (number + 1) // 2)
            kind, fraction = "official update set", 0.001
        else:
            n = max(1, round(fraction * orders))
            tpch.scattered_functions(project, n, loaded_max, args.seed, number)
            kind = f"scattered {fraction:.4%}"
        for result, views in zip(passes, refresh_round(projects), strict=True):
            result.rounds.append({"round": number, "kind": kind, "views": views})
            right = [v.right for v in views if v.counted]
            chooser = "learned" if result.learn else "analytic"
            print(f"{chooser} round {number}: {kind}: {sum(right)}/{len(right)} right", flush=True)
            for v in views:
                print(
                    f"    {v.view:<24} chose {v.chose or '-':<11} inc {_s(v.incremental)} full {_s(v.full)} "
                    f"(AUTO took {_s(v.auto_seconds)})  {v.reason}",
                    flush=True,
                )
    return passes


def _s(seconds: float | None) -> str:
    return "   -  " if seconds is None else f"{seconds:5.1f}s"


def scored(result: Pass, warm_up: int) -> dict:
    views = [v for r in result.rounds[warm_up:] for v in r["views"] if v.counted]
    chosen = sum(v.chosen_seconds for v in views)
    best = sum(min(v.incremental, v.full) for v in views)
    took = sum(v.auto_seconds for v in views)
    return {
        "choices": len(views),
        "right": sum(v.right for v in views),
        "accuracy": sum(v.right for v in views) / len(views) if views else None,
        "chosen_seconds": chosen,
        "best_seconds": best,
        "over_best": chosen / best - 1 if best else None,
        "auto_seconds": took,
        "auto_over_best": took / best - 1 if best else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", choices=("demo", "tpch"), default="demo")
    parser.add_argument("--orders", type=int, default=100_000, help="demo: orders loaded")
    parser.add_argument("--sf", type=float, default=1.0, help="tpch: scale factor")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--warm-up", type=int, default=5)
    parser.add_argument("--smallest", type=float, default=0.0001)
    parser.add_argument("--largest", type=float, default=0.3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", type=Path)
    parser.add_argument(
        "--explore", action="store_true", help="the learned copies with history.explore on"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        passes = run(args, Path(folder))
    scores = {("learned" if p.learn else "analytic"): scored(p, args.warm_up) for p in passes}
    for name, score in scores.items():
        accuracy = "-" if score["accuracy"] is None else f"{score['accuracy']:.0%}"
        over = "-" if score["over_best"] is None else f"{score['over_best']:+.0%}"
        took = "-" if score["auto_over_best"] is None else f"{score['auto_over_best']:+.0%}"
        print(
            f"{name}: {score['right']}/{score['choices']} choices right ({accuracy}) in rounds "
            f"{args.warm_up + 1}-{args.rounds}; chosen ways {score['chosen_seconds']:.1f}s against "
            f"{score['best_seconds']:.1f}s always picking the faster ({over}); the AUTO copies "
            f"themselves took {score['auto_seconds']:.1f}s ({took})"
        )
    if args.json:
        document = {
            "args": {k: str(v) for k, v in vars(args).items()},
            "scores": scores,
            "passes": [
                {
                    "learn": p.learn,
                    "rounds": [{**r, "views": [asdict(v) for v in r["views"]]} for r in p.rounds],
                }
                for p in passes
            ],
        }
        args.json.write_text(json.dumps(document, indent=2))


if __name__ == "__main__":
    main()
