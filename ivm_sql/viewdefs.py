"""Reads ``views/*.sql``: each ``CREATE [OR REPLACE] [MATERIALIZED] VIEW name AS SELECT ...``."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError

from ivm_sql.errors import Location, SqlError, UnsupportedError
from ivm_sql.sqlbuild import DIALECT, INTERNAL_PREFIX
from ivm_sql.sqlfiles import split_statements


@dataclass(frozen=True, eq=False)
class ViewDef:
    """One view as the user wrote it."""

    name: str  # lower case, unqualified: views live in the project's database
    query: exp.Query
    column_names: tuple[str, ...] | None  # CREATE VIEW v (a, b) AS ...
    location: Location
    text: str

    def locate(self, node: exp.Expression | None) -> Location:
        """The file:line of ``node`` inside this view (the view's first line if unknown)."""
        line = _line_of(node) if node is not None else None
        if line is None:
            return self.location
        return Location(self.location.path, (self.location.line or 1) + line - 1)


def _line_of(node: exp.Expression) -> int | None:
    for candidate in node.walk():
        meta = candidate.meta if isinstance(candidate, exp.Identifier) else None
        if meta and "line" in meta:
            return meta["line"]
    return None


def load_views(folder: Path) -> list[ViewDef]:
    """All views in ``folder`` (sorted by file name, then position); names must be unique."""
    views: list[ViewDef] = []
    seen: dict[str, ViewDef] = {}
    for path in sorted(folder.glob("*.sql")) if folder.is_dir() else []:
        for statement in split_statements(path.read_text(), path):
            view = parse_view(statement.text, statement.location)
            if view.name in seen:
                raise SqlError(
                    f"view {view.name} is defined twice (first at {seen[view.name].location})",
                    location=view.location,
                    hint="rename one of them",
                )
            seen[view.name] = view
            views.append(view)
    return views


def parse_view(text: str, location: Location) -> ViewDef:
    try:
        statement = sqlglot.parse_one(text, read=DIALECT)
    except ParseError as error:
        first = error.errors[0] if error.errors else {}
        line = (location.line or 1) + first.get("line", 1) - 1
        raise SqlError(
            first.get("description", str(error)), location=Location(location.path, line)
        ) from None
    if not isinstance(statement, exp.Create) or statement.kind != "VIEW":
        raise UnsupportedError(
            f"only CREATE VIEW statements belong in a views file, found {statement.key.upper()}",
            location=location,
            hint="put tables and other DDL in migrations/NNNN_name.sql",
        )
    target = statement.this
    column_names = None
    if isinstance(target, exp.Schema):
        column_names = tuple(c.name.lower() for c in target.expressions)
        target = target.this
    query = statement.expression
    if not isinstance(query, exp.Query):
        raise SqlError("a view needs AS SELECT ...", location=location)
    name = target.name.lower()
    if name.startswith(INTERNAL_PREFIX):
        raise SqlError(f"view names starting with {INTERNAL_PREFIX} are reserved for ivm", location=location)
    return ViewDef(name, query, column_names, location, text)
