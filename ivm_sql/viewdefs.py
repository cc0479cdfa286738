"""Reads ``views/*.sql``: each ``CREATE [OR REPLACE] [MATERIALIZED] VIEW name [clauses] AS SELECT ...``
(the clauses: ``viewclauses``)."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path

from sqlglot import exp

from ivm_sql.errors import Location, SqlError, UnsupportedError
from ivm_sql.refresh_policy import RefreshPolicy
from ivm_sql.sqlbuild import DIALECT, INTERNAL_PREFIX
from ivm_sql.sqlfiles import read_sql, split_statements
from ivm_sql.syntax import parse_statement
from ivm_sql.viewclauses import REFRESH_PROPERTY, ViewClauses, refresh_policy, view_clauses


@dataclass(frozen=True, eq=False)
class ViewDef:
    """One view as the user wrote it."""

    name: str  # lower case, unqualified: views live in the project's database
    query: exp.Query
    column_names: tuple[str, ...] | None  # CREATE VIEW v (a, b) AS ...
    location: Location
    text: str
    # REFRESH POLICY (or 'ivm.refresh'); None: the project's default
    policy: RefreshPolicy | None = None
    # COMMENT, TBLPROPERTIES, PARTITIONED BY / CLUSTER BY, column comments
    clauses: ViewClauses = ViewClauses()

    def locate(self, node: exp.Expression | None) -> Location:
        """The file:line of ``node`` inside this view (the view's first line if unknown)."""
        return self._at(_line_of(node, self.text) if node is not None else None)

    def locate_word(self, word: str) -> Location:
        """The file:line where ``word`` first appears in this view's text."""
        return self._at(_word_line(self.text, word))

    def _at(self, line: int | None) -> Location:
        return _at_line(self.location, line)


def _at_line(start: Location, line: int | None) -> Location:
    """Line ``line`` of a statement that starts at ``start`` (the start itself if unknown)."""
    return start if line is None else Location(start.path, (start.line or 1) + line - 1)


def _line_of(node: exp.Expression, text: str) -> int | None:
    """The line of a node: from its identifiers' positions, else from its first keyword
    (functions and clauses carry no position in sqlglot's tree)."""
    for candidate in node.walk():
        meta = candidate.meta if isinstance(candidate, exp.Identifier) else None
        if meta and "line" in meta:
            return meta["line"]
    word = re.match(r"[A-Za-z_]+", node.sql(DIALECT))
    return _word_line(text, word.group(0)) if word else None


def _word_line(text: str, word: str) -> int | None:
    match = re.search(rf"(?<![\w`]){re.escape(word)}(?![\w`])", text, re.IGNORECASE)
    return text.count("\n", 0, match.start()) + 1 if match else None


def load_views(folder: Path) -> list[ViewDef]:
    """All views in ``folder`` (sorted by file name, then position); names must be unique."""
    views: list[ViewDef] = []
    seen: dict[str, ViewDef] = {}
    for path in sorted(folder.glob("*.sql")) if folder.is_dir() else []:
        for view in _file_views(read_sql(path), path):
            if view.name in seen:
                raise SqlError(
                    f"view {view.name} is defined twice (first at {seen[view.name].location})",
                    location=view.location,
                    hint="rename one of them",
                )
            seen[view.name] = view
            views.append(view)
    return views


@functools.lru_cache(maxsize=1024)
def _file_views(text: str, path: Path) -> tuple[ViewDef, ...]:
    """The views of one file, parsed once per text and path: a warm session reads the same
    files on every refresh, and a ViewDef is never changed."""
    return tuple(
        parse_view(statement.text, statement.location) for statement in split_statements(text, path)
    )


def parse_view(text: str, location: Location) -> ViewDef:
    parsed_text, policy = refresh_policy(text, location)  # sqlglot cannot read REFRESH POLICY
    statement = parse_statement(parsed_text, location)
    if not isinstance(statement, exp.Create) or statement.kind != "VIEW":
        found = (
            statement.key.upper()
            if not isinstance(statement, (exp.Command, exp.Alias, exp.Column))
            else text.split()[0]
        )
        raise UnsupportedError(
            f"only CREATE VIEW statements belong in a views file, found {found}",
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
    clauses, named = view_clauses(statement, lambda word: _at_word(text, word, location))
    if policy is not None and named is not None and named is not policy:
        raise SqlError(
            f"REFRESH POLICY {policy} and '{REFRESH_PROPERTY}' = '{named.value}' disagree",
            location=_at_word(text, REFRESH_PROPERTY, location),
            hint=f"keep REFRESH POLICY and drop the '{REFRESH_PROPERTY}' property",
        )
    name = target.name.lower()
    if target.args.get("db") is not None:
        raise SqlError(
            f"view {target.sql(DIALECT)} names a database",
            location=location,
            hint=f"write CREATE VIEW {target.this.sql(DIALECT)}: views live in the project's database (ivm.yaml's database:)",
        )
    if not TABLE_NAME.fullmatch(name):
        raise SqlError(
            f"view name {name!r} is not a name Spark's catalog takes for a table or view",
            location=location,
            hint="use letters, digits and _ (a reserved word is fine in backticks: `select`)",
        )
    if name.startswith(INTERNAL_PREFIX):
        raise SqlError(
            f"view names starting with {INTERNAL_PREFIX} are reserved for ivm",
            location=location,
            hint="rename the view",
        )
    return ViewDef(name, query, column_names, location, text, policy or named, clauses)


def _at_word(text: str, word: str, location: Location) -> Location:
    return _at_line(location, _word_line(text, word))


TABLE_NAME = re.compile(r"[a-z0-9_]+")  # Spark's INVALID_SCHEMA_OR_RELATION_NAME otherwise
