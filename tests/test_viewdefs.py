"""Reading views files: ``load_views`` and ``parse_view`` (no Spark)."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlglot import exp

from ivm_sql.errors import Location, SqlError, UnsupportedError
from ivm_sql.viewdefs import load_views, parse_view


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


# several views per file ------------------------------------------------------------------

MANY = """\
-- header comment; with a semicolon in it
CREATE OR REPLACE VIEW one AS
SELECT a, 'x;y' AS s  -- trailing comment; still the same statement
FROM t;

/* a block comment; also with a semicolon */
CREATE MATERIALIZED VIEW two (p, q) AS
SELECT a, b
FROM t
WHERE c = ';';
CREATE VIEW Three AS SELECT `a;b` FROM t;
;
CREATE VIEW four AS SELECT "semi;colon" AS s FROM t
"""


@pytest.fixture
def many(tmp_path: Path) -> list:
    write(tmp_path, "a.sql", MANY)
    return load_views(tmp_path)


def test_several_views_per_file_in_order(many) -> None:
    assert [v.name for v in many] == ["one", "two", "three", "four"]


def test_each_view_located_on_its_create_line(many, tmp_path: Path) -> None:
    assert [v.location for v in many] == [
        Location(tmp_path / "a.sql", line) for line in (2, 7, 11, 13)
    ]


def test_semicolons_in_strings_comments_and_quoted_identifiers_do_not_split(many) -> None:
    one, two, three, four = many
    assert [e.alias_or_name for e in one.query.selects] == ["a", "s"]
    assert one.query.selects[1].this == exp.Literal.string("x;y")
    assert two.query.args["where"].this.expression == exp.Literal.string(";")
    assert [e.name for e in three.query.selects] == ["a;b"]
    assert four.query.selects[0].this == exp.Literal.string("semi;colon")


def test_create_or_replace_and_materialized_are_views(many) -> None:
    assert all(isinstance(v.query, exp.Select) for v in many)


def test_column_list(many) -> None:
    one, two, *_ = many
    assert one.column_names is None
    assert two.column_names == ("p", "q")
    assert two.name == "two"


def test_names_are_lower_case_and_unqualified(many) -> None:
    assert many[2].name == "three"


def test_text_is_the_statement_as_written_without_semicolon(many) -> None:
    one = many[0]
    assert one.text.startswith("CREATE OR REPLACE VIEW one AS\nSELECT a, 'x;y' AS s")
    assert one.text.endswith("FROM t")


def test_files_read_in_name_order(tmp_path: Path) -> None:
    write(tmp_path, "b.sql", "CREATE VIEW from_b AS SELECT 1 AS x FROM t")
    write(tmp_path, "a.sql", "CREATE VIEW from_a AS SELECT 1 AS x FROM t")
    write(tmp_path, "notes.txt", "CREATE VIEW ignored AS SELECT 1")
    assert [v.name for v in load_views(tmp_path)] == ["from_a", "from_b"]


def test_missing_folder_has_no_views(tmp_path: Path) -> None:
    assert load_views(tmp_path / "nope") == []


def test_locate_maps_statement_lines_to_file_lines(tmp_path: Path) -> None:
    write(tmp_path, "v.sql", "\n\n-- c\nCREATE VIEW v AS\nSELECT a,\n       b\nFROM t\n")
    (view,) = load_views(tmp_path)
    assert view.location.line == 4
    b = next(c for c in view.query.find_all(exp.Column) if c.name == "b")
    assert view.locate(b) == Location(tmp_path / "v.sql", 6)
    assert view.locate(None) == view.location


# refusals --------------------------------------------------------------------------------


def test_duplicate_view_names_refused_with_both_locations(tmp_path: Path) -> None:
    write(tmp_path, "a.sql", "CREATE VIEW dup AS SELECT 1 AS x FROM t;\n")
    write(tmp_path, "b.sql", "\n\nCREATE OR REPLACE VIEW DUP AS\nSELECT 2 AS x FROM t;\n")
    with pytest.raises(SqlError) as caught:
        load_views(tmp_path)
    error = caught.value
    assert error.location == Location(tmp_path / "b.sql", 3)
    assert f"{tmp_path / 'a.sql'}:1" in error.message
    assert "dup" in error.message
    assert error.hint


def test_duplicate_view_names_in_one_file(tmp_path: Path) -> None:
    write(
        tmp_path,
        "a.sql",
        "CREATE VIEW v AS SELECT 1 AS x FROM t;\n\nCREATE VIEW v AS SELECT 2 AS x FROM t;\n",
    )
    with pytest.raises(SqlError) as caught:
        load_views(tmp_path)
    assert caught.value.location == Location(tmp_path / "a.sql", 3)
    assert f"{tmp_path / 'a.sql'}:1" in caught.value.message


@pytest.mark.parametrize(
    "statement, found",
    [
        ("CREATE TABLE x (a INT)", "CREATE"),
        ("INSERT INTO t VALUES (1)", "INSERT"),
        ("SELECT a FROM t", "SELECT"),
        ("DROP VIEW v", "DROP"),
    ],
)
def test_non_view_statement_refused_with_file_line(
    tmp_path: Path, statement: str, found: str
) -> None:
    write(tmp_path, "a.sql", f"CREATE VIEW ok AS SELECT 1 AS x FROM t;\n\n-- next\n{statement};\n")
    with pytest.raises(UnsupportedError) as caught:
        load_views(tmp_path)
    error = caught.value
    assert error.location == Location(tmp_path / "a.sql", 4)
    assert found in error.message
    assert "migrations" in error.hint
    assert str(error).startswith(f"{tmp_path / 'a.sql'}:4: unsupported:")


def test_parse_error_line_is_relative_to_the_file(tmp_path: Path) -> None:
    write(
        tmp_path,
        "a.sql",
        "CREATE VIEW ok AS SELECT 1 AS x FROM t;\n"  # line 1
        "\n"  # 2
        "CREATE VIEW bad AS\n"  # 3
        "SELECT a\n"  # 4
        "FROM t\n"  # 5
        "WHERE a IN (1,\n"  # 6
        "  2 3);\n",  # 7: the error
    )
    with pytest.raises(SqlError) as caught:
        load_views(tmp_path)
    assert caught.value.location == Location(tmp_path / "a.sql", 7)


def test_parse_view_offsets_parse_error_by_the_statement_line() -> None:
    with pytest.raises(SqlError) as caught:
        parse_view(
            "CREATE VIEW v AS\n\nSELECT a FROM t WHERE a IN (1,\n 2 3)", Location("views/x.sql", 5)
        )
    assert caught.value.location == Location("views/x.sql", 8)


def test_unclosed_string_reported_at_its_line(tmp_path: Path) -> None:
    write(
        tmp_path,
        "a.sql",
        "CREATE VIEW ok AS SELECT 1 AS x FROM t;\n\nCREATE VIEW bad AS\nSELECT 'oops FROM t;\n",
    )
    with pytest.raises(SqlError) as caught:
        load_views(tmp_path)
    assert caught.value.location == Location(tmp_path / "a.sql", 4)


def test_view_without_query_refused() -> None:
    with pytest.raises(SqlError) as caught:
        parse_view("CREATE VIEW v", Location("views/x.sql", 3))
    assert caught.value.location == Location("views/x.sql", 3)
    assert "AS SELECT" in caught.value.message


def test_reserved_view_name_refused() -> None:
    with pytest.raises(SqlError) as caught:
        parse_view("CREATE VIEW __ivm_v AS SELECT a FROM t", Location("views/x.sql", 2))
    assert caught.value.location == Location("views/x.sql", 2)
    assert "__ivm" in caught.value.message


def test_parse_view_keeps_what_it_was_given() -> None:
    text = "CREATE VIEW V (X, y) AS SELECT a, b FROM t"
    view = parse_view(text, Location("views/x.sql", 9))
    assert (view.name, view.column_names, view.location, view.text) == (
        "v",
        ("x", "y"),
        Location("views/x.sql", 9),
        text,
    )
