"""The pipeline spec (``spark-pipeline.yml``), found and read as ``spark-pipelines`` does.

``spark-pipelines`` looks in the current folder, then in each ancestor, for one of
``spark-pipeline.yaml`` and ``spark-pipeline.yml``; two in one folder is an error. Its fields:
``name`` and ``storage`` (required), ``catalog``, ``database`` or ``schema``,
``configuration`` (Spark settings, names to strings) and ``libraries`` (a list of
``{glob: {include: PATTERN}}``). Every value keeps its yaml line, so a mistake is shown at it.
"""

from __future__ import annotations

import glob as globbing
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

import yaml

from ivm_sql.config import IDENTIFIER, compose_file, node_reader
from ivm_sql.errors import ConfigError, Location

FIELDS = ("name", "storage", "catalog", "database", "schema", "configuration", "libraries")
REQUIRED = ("name", "storage")
# ivm keeps its tables in Spark's session catalog (the one its metastore serves)
SESSION_CATALOG = "spark_catalog"


@dataclass(frozen=True)
class LibraryGlob:
    """One ``libraries`` entry: its pattern as written, as ``spark-pipelines`` expands it
    (``dir/**`` becomes ``dir/**/*``), and where the spec writes it."""

    written: str
    pattern: str
    location: Location


@dataclass(frozen=True)
class PipelineSpec:
    path: Path
    name: str
    database: str | None
    configuration: Mapping[str, str]
    libraries: tuple[LibraryGlob, ...]
    locations: Mapping[str, Location]  # where each top-level field is written

    @property
    def root(self) -> Path:
        """The folder the library globs are relative to: the spec's."""
        return self.path.parent


def load_spec(path: Path) -> PipelineSpec:
    """The spec at ``path``, checked field by field; a mistake is a ConfigError at its line."""
    root = compose_file(path)
    reader = node_reader(path)
    top = reader._mapping(root, "the pipeline spec", FIELDS) if root is not None else {}
    for name in REQUIRED:
        if name not in top:
            raise ConfigError(
                f"the pipeline spec has no {name}",
                location=Location(path, 1),
                hint=f"spark-pipelines requires {' and '.join(REQUIRED)}",
            )
    locations = {key: reader._at(node) for key, node in top.items()}
    if "database" in top and "schema" in top:
        raise ConfigError(
            "the pipeline spec sets both database and schema",
            location=locations["schema"],
            hint="they are two names of one field: keep one",
        )
    if "catalog" in top and reader._string(top["catalog"], "catalog") != SESSION_CATALOG:
        raise ConfigError(
            f"catalog {top['catalog'].value!r}: ivm keeps its tables in Spark's session catalog",
            location=locations["catalog"],
            hint=f"remove catalog, or set it to {SESSION_CATALOG}",
        )
    database = _database(reader, top.get("database") or top.get("schema"))
    configuration = (
        reader._mapping(top["configuration"], "configuration", None)
        if "configuration" in top
        else {}
    )
    return PipelineSpec(
        path=path,
        name=reader._string(top["name"], "name"),
        database=database,
        configuration=MappingProxyType(
            {
                key: reader._string(node, f"configuration {key}")
                for key, node in configuration.items()
            }
        ),
        libraries=tuple(_libraries(reader, top.get("libraries"))),
        locations=MappingProxyType(locations),
    )


def _database(reader, node: yaml.Node | None) -> str | None:
    if node is None:
        return None
    database = reader._string(node, "database")
    if not IDENTIFIER.fullmatch(database):
        raise ConfigError(
            f"database {database!r} is not a plain identifier",
            location=reader._at(node),
            hint="use letters, digits and underscores, not starting with a digit",
        )
    return database


def _libraries(reader, node: yaml.Node | None) -> list[LibraryGlob]:
    """Each ``- glob: {include: PATTERN}``; like spark-pipelines, a pattern is a file path or
    ``folder/**`` (everything under the folder)."""
    if node is None or reader._is_null(node):
        return []
    if not isinstance(node, yaml.SequenceNode):
        raise ConfigError(
            "libraries must be a list of {glob: {include: PATTERN}}", location=reader._at(node)
        )
    libraries = []
    for entry in node.value:
        glob_node = reader._mapping(entry, "a libraries entry", ("glob",)).get("glob")
        include = (
            reader._mapping(glob_node, "glob", ("include",)).get("include")
            if glob_node is not None
            else None
        )
        if include is None:
            raise ConfigError(
                "a libraries entry needs glob: {include: PATTERN}", location=reader._at(entry)
            )
        written = reader._string(include, "include")
        libraries.append(
            LibraryGlob(written, _expand(written, reader._at(include)), reader._at(include))
        )
    return libraries


def _expand(pattern: str, location: Location) -> str:
    """spark-pipelines' rule (``validate_patch_glob_pattern``): a path without wildcards, or a
    folder path ending in ``/**``, which means every file under it."""
    if not globbing.has_magic(pattern):
        return pattern
    if pattern.endswith("/**") and not globbing.has_magic(pattern[:-3]):
        return pattern + "/*"
    raise ConfigError(
        f"library glob {pattern!r} is neither a file path nor a folder/**",
        location=location,
        hint="spark-pipelines accepts only these two forms (e.g. transformations/**)",
    )
