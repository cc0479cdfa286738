"""A dbt project as dbt itself compiles it: its models' SQL, materializations and lineage.

ivm never renders Jinja: dbt-core's programmatic runner compiles the project (macros,
``ref()``, ``source()``, ``var()``, ephemeral models and installed packages, as
``dbt compile`` does) into a target folder of ivm's own, and ivm reads the manifest dbt
writes there. The compile does not connect to Spark (``--no-populate-cache``: dbt lists no
schema before it compiles), so a model that queries the database while it compiles
(``run_query``, ``adapter.get_relation``) is dbt's error at compile time, said as such.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ivm_sql.errors import ConfigError, EnvironmentProblem, Location

# dbt's own materialization name: a model configured with it is kept by ivm
MARK = "materialized_view"
# the models dbt compiles for ivm: the marked ones and every node they read, transitively
SELECTOR = f"+config.materialized:{MARK}"
INSTALL_HINT = "install dbt for Spark: pip install 'ivm-sql[dbt]'"


@dataclass(frozen=True)
class Model:
    """One dbt model, compiled."""

    name: str
    relation: str  # what other models' compiled SQL reads it as: schema.identifier, lower case
    materialized: str  # view, table, incremental, ephemeral, materialized_view, ...
    sql: str  # dbt's compiled SQL
    path: Path  # the model's file
    # lines dbt added before the model's own SQL: the ephemeral models it reads, as CTEs
    injected_lines: int = 0
    language: str = "sql"  # or python

    @property
    def marked(self) -> bool:
        return self.materialized == MARK

    @property
    def location(self) -> Location:
        return Location(self.path, 1)


@dataclass(frozen=True)
class BaseTable:
    """A node the marked models read as a table of their own: a seed, a source, a snapshot,
    or a model dbt builds as a table (``table``, ``incremental``)."""

    name: str
    kind: str  # seed, source, snapshot, or the model's materialization
    relation: str
    path: Path  # the file that declares it

    def describe(self) -> str:
        kind = self.kind if self.kind in NODE_KINDS else f"{self.kind} model"
        return f"dbt's {kind} {self.name} ({self.path})"

    def hint(self) -> str:
        if self.kind == "source":
            return "load the source's table first, as Delta: ivm reads its changes from Delta's change data feed"
        return f"build it first: {NODE_KINDS.get(self.kind, 'dbt run --select')} {self.name}"


# what builds each kind of node that is not a model
NODE_KINDS = {"seed": "dbt seed --select", "snapshot": "dbt snapshot --select", "source": ""}


@dataclass(frozen=True)
class Compiled:
    """What ivm needs of a compiled dbt project."""

    root: Path
    models: dict[str, Model]  # by unique id: the marked models and the models they read
    others: dict[str, BaseTable]  # every other node they read (sources, seeds, snapshots), by id

    def marked(self) -> list[Model]:
        return [m for m in self.models.values() if m.marked]


def compile_project(root: Path, target_path: Path, profiles_dir: Path | None = None) -> Compiled:
    """Compile the dbt project at ``root`` with dbt itself, into ``target_path``; raise one
    clear error when dbt is missing or the project does not compile."""
    root, target_path = root.resolve(), target_path.resolve()  # dbt reads relative ones from root
    try:
        from dbt.cli.main import dbtRunner
    except ImportError:
        raise EnvironmentProblem(
            f"{root / 'dbt_project.yml'} makes this a dbt project, and dbt is not installed",
            hint=INSTALL_HINT,
        ) from None
    arguments = [
        "compile",
        "--project-dir",
        str(root),
        "--target-path",
        str(target_path),
        "--log-path",
        str(target_path / "logs"),
        "--select",
        SELECTOR,
        "--no-populate-cache",  # compile without a connection: dbt lists no schema first
        "--log-level",
        "none",  # its errors come back as one of ours
        "--no-send-anonymous-usage-stats",  # no network call, no .user.yml in the project
    ]
    if profiles_dir is not None:
        arguments += ["--profiles-dir", str(profiles_dir)]
    result = dbtRunner().invoke(arguments)
    if not result.success:
        raise ConfigError(
            f"dbt could not compile the project: {_first_error(result)}",
            location=Location(root / "dbt_project.yml"),
            hint="run dbt compile in the project to see dbt's own report",
        )
    return read_manifest(root, target_path / "manifest.json")


def _first_error(result) -> str:
    """dbt's message for a failed invocation: its exception, else the first node that failed."""
    if result.exception is not None:
        return " ".join(str(result.exception).split())
    failed = [r for r in getattr(result.result, "results", ()) if r.status == "error"]
    return " ".join(str(failed[0].message).split()) if failed else "no reason given"


def read_manifest(root: Path, manifest: Path) -> Compiled:
    """The marked models of a manifest dbt wrote, every model they read, and the relation of
    every other node they read."""
    data = json.loads(manifest.read_text(encoding="utf-8"))
    nodes = {**data["nodes"], **data["sources"]}
    needed = _read_by_marked(nodes)
    models = {
        unique_id: _model(nodes[unique_id], root)
        for unique_id in needed
        if nodes[unique_id]["resource_type"] == "model"
    }
    others = {
        unique_id: _base_table(nodes[unique_id])
        for unique_id in needed
        if nodes[unique_id]["resource_type"] != "model"
    }
    return Compiled(root, models, others)


def _read_by_marked(nodes: dict[str, dict]) -> list[str]:
    """The marked models and every node they read, transitively, each once."""
    marked = [
        unique_id
        for unique_id, node in nodes.items()
        if node["resource_type"] == "model" and node["config"].get("materialized") == MARK
    ]
    seen: dict[str, None] = {}  # in the order found
    pending = list(marked)
    while pending:
        unique_id = pending.pop()
        if unique_id in seen or unique_id not in nodes:
            continue
        seen[unique_id] = None
        pending.extend(nodes[unique_id].get("depends_on", {}).get("nodes", ()))
    return list(seen)


def _model(node: dict, root: Path) -> Model:
    return Model(
        name=node["name"],
        relation=_relation(node),
        materialized=node["config"]["materialized"],
        sql=node.get("compiled_code") or "",
        path=root / node["original_file_path"],
        injected_lines=sum(cte["sql"].count("\n") for cte in node.get("extra_ctes", ())),
        language=node.get("language", "sql"),
    )


def _base_table(node: dict) -> BaseTable:
    name = (
        node["name"]
        if node["resource_type"] != "source"
        else f"{node['source_name']}.{node['name']}"
    )
    return BaseTable(name, node["resource_type"], _relation(node), Path(node["original_file_path"]))


def _relation(node: dict) -> str:
    """How compiled SQL names the node: dbt's relation name, its quotes taken off."""
    name = node.get("relation_name") or f"{node['schema']}.{node.get('alias') or node['name']}"
    return name.replace("`", "").replace('"', "").lower()
