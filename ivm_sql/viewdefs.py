"""Reads ``views/*.sql``: each ``CREATE [OR REPLACE] [MATERIALIZED] VIEW name AS SELECT ...``."""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import sqlglot
from sqlglot import TokenType, exp
from sqlglot.dialects.spark import Spark
from sqlglot.errors import ParseError

from ivm_sql.errors import Location, SqlError, UnsupportedError
from ivm_sql.sqlbuild import DIALECT, INTERNAL_PREFIX
from ivm_sql.sqlfiles import read_sql, split_statements


@dataclass(frozen=True, eq=False)
class ViewDef:
    """One view as the user wrote it."""

    name: str  # lower case, unqualified: views live in the project's database
    query: exp.Query
    column_names: tuple[str, ...] | None  # CREATE VIEW v (a, b) AS ...
    location: Location
    text: str
    full_refresh: bool = False  # TBLPROPERTIES ('ivm.refresh' = 'full'): recompute on every change

    def locate(self, node: exp.Expression | None) -> Location:
        """The file:line of ``node`` inside this view (the view's first line if unknown)."""
        return self._at(_line_of(node, self.text) if node is not None else None)

    def locate_word(self, word: str) -> Location:
        """The file:line where ``word`` first appears in this view's text."""
        return self._at(_word_line(self.text, word))

    def _at(self, line: int | None) -> Location:
        if line is None:
            return self.location
        return Location(self.location.path, (self.location.line or 1) + line - 1)


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
    return tuple(parse_view(statement.text, statement.location) for statement in split_statements(text, path))


def parse_view(text: str, location: Location) -> ViewDef:
    statement = _parse(text, location)
    if not isinstance(statement, exp.Create) or statement.kind != "VIEW":
        found = statement.key.upper() if not isinstance(statement, (exp.Command, exp.Alias, exp.Column)) else text.split()[0]
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
    full_refresh = _refresh_property(statement, location)
    name = target.name.lower()
    if target.args.get("db") is not None:
        raise SqlError(
            f"view {target.sql(DIALECT)} names a database", location=location,
            hint=f"write CREATE VIEW {target.this.sql(DIALECT)}: views live in the project's database (ivm.yaml's database:)",
        )
    if not TABLE_NAME.fullmatch(name):
        raise SqlError(
            f"view name {name!r} is not a name Spark's catalog takes for a table or view",
            location=location, hint="use letters, digits and _ (a reserved word is fine in backticks: `select`)",
        )
    if name.startswith(INTERNAL_PREFIX):
        raise SqlError(
            f"view names starting with {INTERNAL_PREFIX} are reserved for ivm", location=location,
            hint="rename the view",
        )
    return ViewDef(name, query, column_names, location, text, full_refresh)


def _parse(text: str, location: Location) -> exp.Expression:
    """One statement, parsed by sqlglot; a syntax error is said in words at its file:line.

    sqlglot parses a CREATE it cannot read to its end as an opaque command (and logs a
    warning): the query after AS is then parsed alone to find what is wrong in it."""
    with _quiet_sqlglot():
        try:
            statement = sqlglot.parse_one(text, read=DIALECT)
        except ParseError as error:
            raise syntax_error(error, location) from None
        if isinstance(statement, exp.Command) and statement.name.upper() == "CREATE":
            start = _query_start(text)
            try:
                query = sqlglot.parse_one(text[start:], read=DIALECT) if start is not None else None
            except ParseError as error:
                raise syntax_error(error, Location(location.path, (location.line or 1) + text.count("\n", 0, start))) from None
            if query is None:
                what = "no AS SELECT ... found"
            elif isinstance(query, exp.Query):
                what = "the part before AS does not read as CREATE VIEW name [(columns)]"
            else:
                what = "the query after AS is not a SELECT"
            raise SqlError(f"cannot read this CREATE VIEW statement: {what}", location=location,
                           hint="write CREATE VIEW name AS SELECT ...; quote odd names in backticks") from None
    return statement


@contextmanager
def _quiet_sqlglot() -> Iterator[None]:
    """sqlglot warns on stderr when it gives up on a statement; ivm reports it instead."""
    logger = logging.getLogger("sqlglot")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def _query_start(text: str) -> int | None:
    """Where the query of ``CREATE VIEW name [(columns)] [properties] AS query`` starts: after
    the first AS outside parentheses."""
    depth = 0
    for token in Spark.tokenizer_class().tokenize(text):
        depth += {TokenType.L_PAREN: 1, TokenType.R_PAREN: -1}.get(token.token_type, 0)
        if depth == 0 and token.token_type == TokenType.ALIAS:
            return token.end + 1
    return None


_TOKEN = re.compile(r"<Token token_type: TokenType\.(\w+), text: (.*?), line: \d+, col: \d+, start: \d+, end: \d+, comments: \[.*?\]>")
_NAME_EXPECTED = ("Expected table name", "Invalid expression / Unexpected token")  # where a reserved word fits
_MISSING = re.compile(r"Required keyword: '\w+' missing for <class '[\w.]+'>")


def syntax_error(error: ParseError, location: Location) -> SqlError:
    """sqlglot's first parse error in words, at its line in the file (``location`` is where
    the parsed text starts): no token or class reprs, and a hint to quote a reserved word
    found where a name belongs."""
    first = error.errors[0] if error.errors else {}
    near = (first.get("highlight") or "").strip()
    raw = description = first.get("description") or str(error)
    description = _TOKEN.sub(lambda m: "the end of the statement" if m[1] == "SENTINEL" else f"'{m[2]}'", description)
    description = _MISSING.sub("an incomplete expression", description)
    description = description.replace("Invalid expression / Unexpected token", "unexpected token")
    description = re.sub(r"Expecting (\S+)", r"expected '\1'", description.replace(" but got ", " but found "))
    description = description[:1].lower() + description[1:]
    if near and f"'{near}'" not in description:
        description += f" near '{near}'"
    hint = None
    name_expected = raw.startswith(_NAME_EXPECTED) and "SENTINEL" not in raw
    if name_expected and near.upper() in Spark.tokenizer_class.KEYWORDS:
        hint = f"{near} is a reserved word: to use it as a name, quote it in backticks: `{near}`"
    line = (location.line or 1) + first.get("line", 1) - 1
    return SqlError(f"syntax error: {description}", location=Location(location.path, line), hint=hint)


REFRESH_PROPERTY = "ivm.refresh"
TABLE_NAME = re.compile(r"[a-z0-9_]+")  # Spark's INVALID_SCHEMA_OR_RELATION_NAME otherwise


def _refresh_property(statement: exp.Create, location: Location) -> bool:
    """True for ``TBLPROPERTIES ('ivm.refresh' = 'full')``; other values are refused."""
    properties = statement.args.get("properties")
    for prop in properties.expressions if properties is not None else []:
        if isinstance(prop, exp.Property) and prop.name.lower() == REFRESH_PROPERTY:
            value = prop.args["value"].name.lower()
            if value not in ("full", "incremental"):
                raise SqlError(
                    f"{REFRESH_PROPERTY} must be 'full' or 'incremental', not '{value}'", location=location,
                    hint="'full' recomputes the view whenever a source changes",
                )
            return value == "full"
    return False
