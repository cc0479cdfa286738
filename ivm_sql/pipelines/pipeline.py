"""A Spark Declarative Pipelines project as ivm sees it: its spec, and the datasets its
library files define (SQL ones for ivm, Python ones left to ``spark-pipelines``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ivm_sql.errors import ConfigError, Location, SqlError
from ivm_sql.pipelines.python_datasets import PythonDataset, python_datasets
from ivm_sql.pipelines.spec import LibraryGlob, PipelineSpec
from ivm_sql.pipelines.sql_datasets import StreamingTable, sql_datasets
from ivm_sql.pipelines.temporary_views import inline
from ivm_sql.viewdefs import ViewDef

DEFINITION_SUFFIXES = (".sql", ".py")  # what spark-pipelines loads; any other file is its error too


@dataclass(frozen=True)
class Pipeline:
    spec: PipelineSpec
    views: tuple[ViewDef, ...]  # materialized views, temporary views inlined
    streaming: tuple[StreamingTable, ...]
    python: tuple[PythonDataset, ...]


def library_files(spec: PipelineSpec) -> list[Path]:
    """The files the spec's library globs match, each once, in the globs' order (files of one
    glob sorted, where spark-pipelines takes the file system's order)."""
    files: list[Path] = []
    for library in spec.libraries:
        for path in _matches(spec.root, library):
            if path not in files:
                files.append(path)
    return files


def _matches(root: Path, library: LibraryGlob) -> list[Path]:
    folder = root / library.written[:-3] if library.written.endswith("/**") else None
    if folder is not None and not folder.is_dir():
        raise ConfigError(
            f"library folder {library.written[:-3]} does not exist",
            location=library.location,
            hint=f"create it, or fix the glob (relative to {root})",
        )
    found = sorted(
        p for p in root.glob(library.pattern) if p.is_file() and "__pycache__" not in p.parts
    )
    if not found:
        raise ConfigError(
            f"library glob {library.written!r} matches no file",
            location=library.location,
            hint=f"paths are relative to {root}",
        )
    for path in found:
        if path.suffix not in DEFINITION_SUFFIXES:
            raise ConfigError(
                f"{path.relative_to(root)} is neither SQL (.sql) nor Python (.py)",
                location=library.location,
                hint="spark-pipelines loads only .sql and .py files: move it out of the library folder",
            )
    return found


def load_pipeline(spec: PipelineSpec) -> Pipeline:
    """Read every library file of ``spec``; one name defined twice is an error at the second."""
    files = library_files(spec)
    sql = sql_datasets([p for p in files if p.suffix == ".sql"])
    python = [d for p in files if p.suffix == ".py" for d in python_datasets(p)]
    seen: dict[str, Location] = {}
    defined = [
        *((v.name, v.location) for v in sql.views),
        *((t.name, t.location) for t in sql.temporary),
        *((s.name, s.location) for s in sql.streaming),
        *((d.name, d.location) for d in python),
    ]
    for name, location in defined:
        if name in seen:
            raise SqlError(
                f"dataset {name} is defined twice (first at {seen[name]})",
                location=location,
                hint="rename one of them",
            )
        seen[name] = location
    views_by_name = {v.name for v in sql.views} | {t.name for t in sql.temporary}
    for table in sql.streaming:
        if not table.source.db and table.source.name.lower() in views_by_name:
            raise SqlError(
                f"streaming table {table.name} streams from view {table.source.name}: a view's rows change, a stream only grows",
                location=table.location,
                hint="stream from a table, or make this a materialized view",
            )
    temporary = {t.name: t for t in sql.temporary}
    return Pipeline(
        spec, tuple(inline(v, temporary) for v in sql.views), sql.streaming, tuple(python)
    )
