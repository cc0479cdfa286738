"""sqlglot's parse errors said in words, at the line of the file they are in.

sqlglot describes a syntax error with its own objects (``<Token token_type:
TokenType.SENTINEL ...>``, ``<class 'sqlglot.expressions.core.EQ'>``) and gives up on a CREATE
it cannot read to its end by parsing it as an opaque command. Here each becomes a sentence a
user can act on, with a hint to quote a reserved word met where a name belongs.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager

import sqlglot
from sqlglot import TokenType, exp
from sqlglot.dialects.spark import Spark
from sqlglot.errors import ParseError

from ivm_sql.errors import Location, SqlError
from ivm_sql.sqlbuild import DIALECT


def parse_statement(text: str, location: Location) -> exp.Expression:
    """One statement, parsed by sqlglot; a syntax error is said in words at its file:line.

    sqlglot parses a CREATE it cannot read to its end as an opaque command (and logs a
    warning): the query after AS is then parsed alone to find what is wrong in it."""
    with _quiet_sqlglot():
        try:
            statement = sqlglot.parse_one(text, read=DIALECT)
        except ParseError as error:
            raise _syntax_error(error, location) from None
        if isinstance(statement, exp.Command) and statement.name.upper() == "CREATE":
            start = _query_start(text)
            try:
                query = sqlglot.parse_one(text[start:], read=DIALECT) if start is not None else None
            except ParseError as error:
                raise _syntax_error(
                    error,
                    Location(location.path, (location.line or 1) + text.count("\n", 0, start)),
                ) from None
            if query is None:
                what = "no AS SELECT ... found"
            elif isinstance(query, exp.Query):
                what = "the part before AS does not read as CREATE VIEW name [(columns)]"
            else:
                what = "the query after AS is not a SELECT"
            raise SqlError(
                f"cannot read this CREATE VIEW statement: {what}",
                location=location,
                hint="write CREATE VIEW name AS SELECT ...; quote odd names in backticks",
            ) from None
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


_TOKEN = re.compile(
    r"<Token token_type: TokenType\.(\w+), text: (.*?), line: \d+, col: \d+, start: \d+, end: \d+, comments: \[.*?\]>"
)
_NAME_EXPECTED = (
    "Expected table name",
    "Invalid expression / Unexpected token",
)  # where a reserved word fits
_MISSING = re.compile(r"Required keyword: '\w+' missing for <class '[\w.]+'>")


def _syntax_error(error: ParseError, location: Location) -> SqlError:
    """sqlglot's first parse error in words, at its line in the file (``location`` is where
    the parsed text starts): no token or class reprs, and a hint to quote a reserved word
    found where a name belongs."""
    first = error.errors[0] if error.errors else {}
    near = (first.get("highlight") or "").strip()
    raw = description = first.get("description") or str(error)
    description = _TOKEN.sub(
        lambda m: "the end of the statement" if m[1] == "SENTINEL" else f"'{m[2]}'", description
    )
    place = "after" if "SENTINEL" in raw else "near"  # sqlglot points at the last token read
    description = _MISSING.sub("an incomplete expression", description)
    description = description.replace("Invalid expression / Unexpected token", "unexpected token")
    description = re.sub(
        r"Expecting (\S+)", r"expected '\1'", description.replace(" but got ", " but found ")
    )
    description = description[:1].lower() + description[1:]
    if near and f"'{near}'" not in description:
        description += f" {place} '{near}'"
    hint = None
    name_expected = raw.startswith(_NAME_EXPECTED) and "SENTINEL" not in raw
    if name_expected and near.upper() in Spark.tokenizer_class.KEYWORDS:
        hint = f"{near} is a reserved word: to use it as a name, quote it in backticks: `{near}`"
    line = (location.line or 1) + first.get("line", 1) - 1
    return SqlError(
        f"syntax error: {description}", location=Location(location.path, line), hint=hint
    )
