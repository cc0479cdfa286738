"""docs/sql-support.md is generated from the compiler and must agree with it (no Spark)."""

from pathlib import Path

from ivm_sql import support

DOC = Path(__file__).resolve().parent.parent / "docs" / "sql-support.md"


def test_sql_support_doc_is_what_the_compiler_does() -> None:
    assert DOC.read_text() == support.render(), (
        "regenerate: python -m ivm_sql.support > docs/sql-support.md"
    )


def test_every_supported_example_compiles_and_every_refused_one_is_refused() -> None:
    assert len(support.supported_rows()) == len(support.SUPPORTED)
    assert len(support.refused_rows()) == len(support.REFUSED)
