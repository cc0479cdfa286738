"""Which folder is the project: an ivm.yaml, a dbt project (its dbt_project.yml), or a Spark
Declarative Pipelines spec here or above. Read by every command before anything else (the thin client too), so it imports
nothing heavy."""

from __future__ import annotations

from pathlib import Path

from ivm_sql.errors import ConfigError, Location

CONFIG_FILE = "ivm.yaml"
SPEC_FILE_NAMES = ("spark-pipeline.yaml", "spark-pipeline.yml")  # the order spark-pipelines tries


DBT_PROJECT_FILE = "dbt_project.yml"


def is_ivm_project(root: Path) -> bool:
    """An ivm.yaml with no pipeline spec and no dbt project beside it: a project of ivm's own."""
    return (root / CONFIG_FILE).is_file() and not any(
        (root / name).is_file() for name in (*SPEC_FILE_NAMES, DBT_PROJECT_FILE)
    )


def is_dbt_project(root: Path) -> bool:
    """A folder holding dbt_project.yml (an ivm.yaml beside it adds ivm's own settings)."""
    return (root / DBT_PROJECT_FILE).is_file()


def find_spec(folder: Path) -> Path | None:
    """The spec file in ``folder`` or its nearest ancestor holding one; None if there is none."""
    for candidate in (folder, *folder.parents):
        found = [candidate / name for name in SPEC_FILE_NAMES if (candidate / name).is_file()]
        if len(found) > 1:
            raise ConfigError(
                f"two pipeline specs in {candidate}: {found[0].name} and {found[1].name}",
                location=Location(found[1]),
                hint="keep one of them, as spark-pipelines requires",
            )
        if found:
            return found[0]
    return None


def project_root(path: str | Path) -> Path | None:
    """The project folder ``ivm -p path`` names: ``path`` itself for an ivm project, else the
    folder of the nearest pipeline spec at or above it; None when there is neither."""
    root = Path(path).resolve()
    if is_ivm_project(root) or is_dbt_project(root):
        return root
    spec = find_spec(root)
    return None if spec is None else spec.parent
