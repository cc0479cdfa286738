"""The datasets a pipeline defines in Python, found by reading its .py files, never running them.

``spark-pipelines`` imports each .py library, and its decorators (``@dp.materialized_view``,
``@dp.table``, ``@dp.temporary_view``, with or without ``name=``) register datasets. ivm
does not run user Python: it reads the files with ``ast`` and only learns each dataset's
name, kind and line. Those datasets are ``spark-pipelines``' to maintain; a SQL view that
reads one reads it as a source table.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

from ivm_sql.errors import Location, SqlError

DECORATORS = {
    "materialized_view": "materialized view",
    "table": "table",
    "temporary_view": "temporary view",
}
PIPELINES_MODULE = "pyspark.pipelines"


@dataclass(frozen=True)
class PythonDataset:
    name: str  # lower case, as the catalog keeps it
    kind: str  # one of DECORATORS' values
    location: Location

    def describe(self) -> str:
        """The one line ivm says about it."""
        return (
            f"{self.name}: Python {self.kind} ({self.location}), not ivm's: "
            "spark-pipelines runs it; SQL views read it as a source table"
        )


def python_datasets(path: Path) -> list[PythonDataset]:
    """The datasets the decorators of ``path`` define, in file order."""
    try:
        tree = ast.parse(path.read_bytes(), filename=str(path))
    except SyntaxError as error:
        raise SqlError(
            f"{path.name} is not valid Python: {error.msg}", location=Location(path, error.lineno)
        ) from None
    except OSError as error:
        raise SqlError(
            f"cannot read {path.name}: {error.strerror}", location=Location(path)
        ) from None
    names = _pipeline_names(tree)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for decorator in node.decorator_list:
            kind = _kind(decorator, names)
            if kind is not None:
                found.append(
                    PythonDataset(
                        _name(decorator, node).lower(), kind, Location(path, decorator.lineno)
                    )
                )
    return sorted(found, key=lambda d: d.location.line or 0)


def _pipeline_names(tree: ast.Module) -> tuple[set[str], dict[str, str]]:
    """How the file names the pipelines module (``import pyspark.pipelines as dp``, ``from
    pyspark import pipelines as dp``) and its decorators (``from pyspark.pipelines import table``)."""
    modules: set[str] = set()
    decorators: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules.update(a.asname or a.name for a in node.names if a.name == PIPELINES_MODULE)
        elif isinstance(node, ast.ImportFrom) and node.module == "pyspark":
            modules.update(a.asname or a.name for a in node.names if a.name == "pipelines")
        elif isinstance(node, ast.ImportFrom) and node.module == PIPELINES_MODULE:
            decorators.update(
                {a.asname or a.name: a.name for a in node.names if a.name in DECORATORS}
            )
    return modules, decorators


def _kind(decorator: ast.expr, names: tuple[set[str], dict[str, str]]) -> str | None:
    """The dataset kind a decorator (``@dp.table``, ``@dp.table(...)``, ``@table``) registers."""
    modules, decorators = names
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    if (
        isinstance(target, ast.Attribute)
        and ast.unparse(target.value) in modules
        and target.attr in DECORATORS
    ):
        return DECORATORS[target.attr]
    if isinstance(target, ast.Name) and target.id in decorators:
        return DECORATORS[decorators[target.id]]
    return None


def _name(decorator: ast.expr, function: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    """``name=`` when the decorator gives it as a string, else the function's name (SDP's rule)."""
    if isinstance(decorator, ast.Call):
        for keyword in decorator.keywords:
            if (
                keyword.arg == "name"
                and isinstance(keyword.value, ast.Constant)
                and isinstance(keyword.value.value, str)
            ):
                return keyword.value.value.rsplit(".", 1)[-1]
    return function.name
