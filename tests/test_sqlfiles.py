"""Splitting SQL files into statements."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ivm_sql.errors import SqlError
from ivm_sql.sqlfiles import split_statements


def texts(sql: str) -> list[str]:
    return [statement.text for statement in split_statements(sql, "f.sql")]


def test_splits_on_top_level_semicolons() -> None:
    assert texts("SELECT 1; SELECT 2;\nSELECT 3") == ["SELECT 1", "SELECT 2", "SELECT 3"]


def test_semicolons_in_strings_identifiers_and_comments_do_not_split() -> None:
    sql = (
        "-- setup; part one\n"
        "INSERT INTO t VALUES ('a;b', \"c;d\", 'it\\'s;');\n"
        "SELECT `odd;name` /* ; */ FROM t -- trailing ; comment\n"
        "WHERE x = ';';\n"
    )
    assert texts(sql) == [
        "INSERT INTO t VALUES ('a;b', \"c;d\", 'it\\'s;')",
        "SELECT `odd;name` /* ; */ FROM t -- trailing ; comment\nWHERE x = ';'",
    ]


def test_statement_text_is_verbatim() -> None:
    sql = "CREATE TABLE t (\n  a INT,   -- the key\n  b STRING\n);"
    assert texts(sql) == ["CREATE TABLE t (\n  a INT,   -- the key\n  b STRING\n)"]


def test_line_is_that_of_first_token() -> None:
    sql = "-- header\n\nCREATE TABLE a (x INT);\n\n/* block\n comment */\nINSERT INTO a\nVALUES (1); SELECT 1"
    statements = split_statements(sql, "m.sql")
    assert [s.location.line for s in statements] == [3, 7, 8]
    assert all(str(s.location.path) == "m.sql" for s in statements)


def test_empty_statements_are_dropped() -> None:
    assert texts(";;\nSELECT 1;;  ;\n-- only a comment;\n;") == ["SELECT 1"]
    assert texts("") == []
    assert texts("-- nothing here\n/* at all */") == []


def test_unclosed_string_is_an_sql_error_at_its_line() -> None:
    with pytest.raises(SqlError) as caught:
        split_statements("SELECT 1;\nSELECT 'abc\nFROM t;", "bad.sql")
    assert caught.value.location is not None
    assert (str(caught.value.location.path), caught.value.location.line) == ("bad.sql", 2)


def test_unclosed_comment_is_an_sql_error() -> None:
    with pytest.raises(SqlError) as caught:
        split_statements("SELECT 1;\n\nSELECT /* never closed", "bad.sql")
    assert caught.value.location is not None and caught.value.location.line == 3


literal = st.text(alphabet="ab ;-/*\n", max_size=12).map(lambda s: "'" + s + "'")


@given(st.lists(st.lists(literal, min_size=1, max_size=3), min_size=1, max_size=4))
def test_splitting_joined_statements_gives_them_back(rows: list[list[str]]) -> None:
    statements = [f"SELECT {', '.join(values)}" for values in rows]
    assert texts(";\n".join(statements) + ";") == statements
