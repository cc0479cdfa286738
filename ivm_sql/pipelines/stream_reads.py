"""``STREAM(src)`` and ``STREAM src [WITH (options)]``: the streaming reads of pipeline SQL.

Spark's grammar (``streamRelationPrimary``) reads ``STREAM name`` or ``STREAM(name)``, then
an optional ``WITH (key = value, ...)`` of reader options, then an alias; the options reach
the source's reader as they would through ``readStream.option``: ``skipChangeCommits`` is
spelled ``STREAM(src) WITH ('skipChangeCommits' = 'true')``. sqlglot reads neither the
bare form nor the options, so each streaming read is found in the tokens and cut out of the
text (the table name stays, every other character becomes a space so lines and columns keep
their places) before the statement is parsed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from sqlglot import Token, TokenType
from sqlglot.dialects.spark import Spark

from ivm_sql.errors import Location, SqlError

# tokens after which a relation starts, so STREAM there is the keyword and not a column
BEFORE_RELATION = (TokenType.FROM, TokenType.JOIN, TokenType.COMMA)


@dataclass(frozen=True)
class StreamRead:
    """One ``STREAM`` read: the table name as written, its reader options, its line."""

    table: str
    options: Mapping[str, str]
    line: int


def cut_stream_reads(text: str, location: Location) -> tuple[str, list[StreamRead]]:
    """``text`` with each streaming read replaced by its table name, and the reads."""
    tokens = Spark.tokenizer_class().tokenize(text)
    chars = list(text)
    reads = []
    i = 1
    while i < len(tokens):
        token = tokens[i]
        if (
            token.text.upper() == "STREAM"
            and tokens[i - 1].token_type in BEFORE_RELATION
            and i + 1 < len(tokens)
        ):
            read, end = _stream_read(tokens, i, text, location)
            name_start, name_end = read[1]
            for offset in range(token.start, tokens[end].end + 1):
                if not (name_start <= offset < name_end) and chars[offset] != "\n":
                    chars[offset] = " "
            reads.append(read[0])
            i = end + 1
            continue
        i += 1
    return "".join(chars), reads


def _stream_read(
    tokens: list[Token], at: int, text: str, location: Location
) -> tuple[tuple[StreamRead, tuple[int, int]], int]:
    """The read starting at token ``at`` (STREAM), the span of its table name, its last token."""
    line = (location.line or 1) + tokens[at].line - 1
    i = at + 1
    parenthesized = tokens[i].token_type == TokenType.L_PAREN
    i += parenthesized
    first = i
    while i + 2 < len(tokens) and tokens[i + 1].token_type == TokenType.DOT:
        i += 2
    if i >= len(tokens) or tokens[i].token_type not in (TokenType.VAR, TokenType.IDENTIFIER):
        raise SqlError(
            "STREAM must be followed by a table name",
            location=Location(location.path, line),
            hint="write STREAM(source) or STREAM source",
        )
    span = (tokens[first].start, tokens[i].end + 1)
    name = text[span[0] : span[1]]
    if parenthesized:
        i += 1
        if i >= len(tokens) or tokens[i].token_type != TokenType.R_PAREN:
            raise SqlError(
                "STREAM( must name one table and close with )",
                location=Location(location.path, line),
            )
    options: dict[str, str] = {}
    if (
        i + 2 < len(tokens)
        and tokens[i + 1].token_type == TokenType.WITH
        and tokens[i + 2].token_type == TokenType.L_PAREN
    ):
        i, options = _options(tokens, i + 3, Location(location.path, line))
    return (StreamRead(name, MappingProxyType(options), line), span), i


def _options(tokens: list[Token], i: int, location: Location) -> tuple[int, dict[str, str]]:
    """``key = value, ...)`` from token ``i``: the index of the closing ``)`` and the options."""
    options = {}
    while i + 2 < len(tokens) and tokens[i + 1].token_type == TokenType.EQ:
        options[tokens[i].text] = tokens[i + 2].text
        i += 3
        if tokens[i].token_type == TokenType.COMMA:
            i += 1
    if i >= len(tokens) or tokens[i].token_type != TokenType.R_PAREN:
        raise SqlError(
            "STREAM(...) WITH ( must hold 'key' = 'value' pairs and close with )",
            location=location,
            hint="e.g. STREAM(source) WITH ('skipChangeCommits' = 'true')",
        )
    return i, options
