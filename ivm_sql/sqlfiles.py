"""Splitting a SQL file into its statements, each with the line it starts on.

Splitting uses sqlglot's Spark tokenizer, so a ``;`` inside a string, a quoted
identifier or a comment does not end a statement. Each statement's text is the
source exactly as written, from its first token to its last.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sqlglot import Token, TokenType
from sqlglot.dialects.spark import Spark
from sqlglot.errors import TokenError

from ivm_sql.errors import Location, SqlError


@dataclass(frozen=True)
class Statement:
    """One statement of a SQL file: its verbatim text and where it starts."""

    text: str
    location: Location


def read_sql(path: Path) -> str:
    """The text of a SQL file; one that is not UTF-8 is an SqlError at the line of its first
    bad byte, and one that cannot be read, at the file."""
    try:
        data = path.read_bytes()
    except OSError as error:
        raise SqlError(
            f"cannot read {path.name}: {error.strerror}", location=Location(path)
        ) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise SqlError(
            f"{path.name} is not UTF-8 text (byte {data[error.start]:#04x})",
            location=Location(path, data.count(b"\n", 0, error.start) + 1),
            hint="save the file as UTF-8",
        ) from None


def split_statements(text: str, path: Path | str) -> list[Statement]:
    """Split ``text`` (the contents of ``path``) on top-level semicolons; drop empty statements."""
    tokenizer = Spark.tokenizer_class()
    try:
        tokens = tokenizer.tokenize(text)
    except TokenError as exc:
        # The tokens read before the failure are kept; the problem starts right after them.
        read = tokenizer.tokens
        offset = read[-1].end + 1 if read else 0
        offset += len(text[offset:]) - len(text[offset:].lstrip())
        snippet = text[offset : offset + 30].split("\n", 1)[0]
        raise SqlError(
            f"unclosed quote or comment near {snippet!r}",
            location=Location(path, _line_at(text, offset)),
        ) from exc

    statements: list[Statement] = []
    current: list[Token] = []
    for token in [*tokens, None]:
        if token is not None and token.token_type != TokenType.SEMICOLON:
            current.append(token)
            continue
        if current:
            start, end = current[0].start, current[-1].end + 1
            statements.append(
                Statement(text[start:end].strip(), Location(path, _line_at(text, start)))
            )
        current = []
    return statements


def _line_at(text: str, offset: int) -> int:
    """The 1-based line number of character ``offset`` in ``text``."""
    return text.count("\n", 0, offset) + 1
