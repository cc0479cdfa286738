"""CREATE MATERIALIZED VIEW's clauses and REFRESH POLICY, read and compiled (no Spark)."""

from __future__ import annotations

import pytest
from test_build import CATALOG, FIRST_LINE, views

from ivm_sql.compiler.order import compile_views
from ivm_sql.compiler.render import render
from ivm_sql.errors import IvmError, SqlError, UnsupportedError
from ivm_sql.physical.policy import FULL_REASON, strict_refusal
from ivm_sql.refresh_policy import RefreshPolicy
from ivm_sql.viewclauses import ViewClauses


def compiled(text: str, default: RefreshPolicy = RefreshPolicy.AUTO):
    (plan,) = compile_views(views(text), CATALOG, "db", default_policy=default)
    return plan


def test_clauses_are_read_with_the_policy() -> None:
    (view,) = views(
        "CREATE OR REPLACE MATERIALIZED VIEW v (b COMMENT 'the key', n)\n"
        "COMMENT 'counts per b'\n"
        "PARTITIONED BY (b)\n"
        "TBLPROPERTIES ('delta.logRetentionDuration' = 'interval 60 days')\n"
        "REFRESH POLICY incremental   strict\n"
        "AS SELECT b, COUNT(*) FROM t GROUP BY b"
    )
    assert view.policy is RefreshPolicy.INCREMENTAL_STRICT
    assert view.clauses == ViewClauses(
        "counts per b",
        (("b", "the key"),),
        (("delta.logRetentionDuration", "interval 60 days"),),
        ("b",),
        (),
    )
    assert view.column_names == ("b", "n")


def test_a_view_without_clauses_names_no_policy() -> None:
    (view,) = views("CREATE VIEW v AS SELECT a FROM t")
    assert view.policy is None and view.clauses == ViewClauses()


def test_blanking_refresh_policy_keeps_the_lines_of_what_follows() -> None:
    with pytest.raises(SqlError) as caught:
        views("CREATE MATERIALIZED VIEW v\nREFRESH POLICY\n  FULL\nAS SELECT a\nFROM t\nWHERE;")
    assert caught.value.location.line == FIRST_LINE + 5, caught.value


@pytest.mark.parametrize(
    "clause, line, says",
    [
        ("REFRESH POLICY SOMETIMES", 1, "unknown refresh policy SOMETIMES"),
        ("REFRESH POLICY", 1, "unknown refresh policy nothing"),
        (
            "TBLPROPERTIES ('delta.enableChangeDataFeed' = 'false')",
            1,
            "cannot set table property delta.enableChangeDataFeed",
        ),
        (
            "TBLPROPERTIES ('delta.appendOnly' = 'true')",
            1,
            "cannot set table property delta.appendOnly",
        ),
        ("TBLPROPERTIES ('ivm.plan' = 'x')", 1, "table property ivm.plan is not one ivm knows"),
        (
            "TBLPROPERTIES ('ivm.refresh' = 'often')",
            1,
            "ivm.refresh must be one of AUTO, INCREMENTAL, INCREMENTAL STRICT, FULL",
        ),
        (
            "TBLPROPERTIES ('ivm.refresh' = 'full')\nREFRESH POLICY AUTO",
            1,
            "REFRESH POLICY AUTO and 'ivm.refresh' = 'full' disagree",
        ),
        ("PARTITIONED BY (a)\nCLUSTER BY (a)", 2, "both PARTITIONED BY and CLUSTER BY"),
    ],
)
def test_clauses_ivm_cannot_honour_are_refused_at_their_line(
    clause: str, line: int, says: str
) -> None:
    with pytest.raises(IvmError) as caught:
        views(f"CREATE MATERIALIZED VIEW v\n{clause}\nAS SELECT a FROM t")
    assert says in caught.value.message, caught.value
    assert caught.value.location.line == FIRST_LINE + line, caught.value


def test_a_column_type_in_the_column_list_is_refused() -> None:
    with pytest.raises(UnsupportedError, match="has a type"):
        views("CREATE MATERIALIZED VIEW v (a INT) AS SELECT a FROM t")


@pytest.mark.parametrize(
    "select, line, operator",
    [
        ("SELECT\n  percentile(b, 0.5) AS p\nFROM t", 3, "PERCENTILE"),
        (
            "SELECT t.a, u.d FROM t LEFT JOIN u\nON t.a = u.a AND t.b > unix_timestamp(current_timestamp())",
            3,
            "current time",
        ),
    ],
)
@pytest.mark.parametrize("policy", ["INCREMENTAL", "INCREMENTAL STRICT"])
def test_incremental_refuses_a_view_recomputed_whole(
    policy: str, select: str, line: int, operator: str
) -> None:
    with pytest.raises(UnsupportedError) as caught:
        compiled(f"CREATE MATERIALIZED VIEW v\nREFRESH POLICY {policy}\nAS {select}")
    assert (
        f"REFRESH POLICY {policy}, but it cannot be maintained incrementally"
        in caught.value.message
    )
    assert operator in caught.value.message, caught.value
    assert caught.value.location.line == FIRST_LINE + line, caught.value


def test_incremental_accepts_touched_key_recomputes_temporal_filters_and_top_k() -> None:
    plan = compiled(
        "CREATE MATERIALIZED VIEW v REFRESH POLICY INCREMENTAL AS "
        "SELECT b, MAX(a) AS m, percentile(a, 0.5) AS p FROM t WHERE a > unix_timestamp(now()) GROUP BY b"
    )
    assert plan.policy is RefreshPolicy.INCREMENTAL
    assert [s.scope for s in plan.stages] == ["recompute touched keys"]
    top = compiled(
        "CREATE MATERIALIZED VIEW v REFRESH POLICY INCREMENTAL STRICT AS "
        "SELECT a, b FROM t ORDER BY a LIMIT 3"
    )
    assert [(s.kind, s.scope) for s in top.stages] == [("top_k", "incremental")]


def test_the_project_default_applies_to_a_view_that_names_no_policy() -> None:
    assert (
        compiled("CREATE VIEW v AS SELECT a FROM t", RefreshPolicy.INCREMENTAL).policy
        is RefreshPolicy.INCREMENTAL
    )
    assert (
        compiled("CREATE VIEW v REFRESH POLICY AUTO AS SELECT a FROM t", RefreshPolicy.FULL).policy
        is RefreshPolicy.AUTO
    )
    with pytest.raises(UnsupportedError, match="REFRESH POLICY INCREMENTAL STRICT"):
        compiled(
            "CREATE VIEW v AS SELECT percentile(a, 0.5) AS p FROM t",
            RefreshPolicy.INCREMENTAL_STRICT,
        )


def test_full_is_the_older_ivm_refresh_property() -> None:
    policy = compiled(
        "CREATE MATERIALIZED VIEW v REFRESH POLICY FULL AS SELECT a, rand() AS r FROM t"
    )
    marked = compiled(
        "CREATE VIEW v TBLPROPERTIES ('ivm.refresh' = 'full') AS SELECT a, rand() AS r FROM t"
    )
    default = compiled("CREATE VIEW v AS SELECT a, rand() AS r FROM t", RefreshPolicy.FULL)
    for plan in (policy, marked, default):
        (stage,) = plan.stages
        assert (
            plan.policy is RefreshPolicy.FULL
            and stage.strategy == f"recompute all on any change: {FULL_REASON}"
        )
    assert policy.fingerprint(policy.stages[0]) == marked.fingerprint(marked.stages[0])


def test_layout_is_by_the_stored_column_and_refused_for_a_computed_one() -> None:
    plan = compiled(
        "CREATE MATERIALIZED VIEW v CLUSTER BY (b) COMMENT 'c' AS SELECT b, AVG(a) AS m FROM t GROUP BY b"
    )
    # the aggregate's table keeps b as its group column g0
    assert plan.layout.clustered_by == ("g0",)
    create = render(plan)
    assert "CLUSTER BY (`g0`)" in create and "COMMENT 'c'" in create
    for column, says in (("m", "computed as the view is read"), ("z", "returns no column z")):
        with pytest.raises(UnsupportedError, match=says) as caught:
            compiled(
                f"CREATE MATERIALIZED VIEW v\nPARTITIONED BY ({column})\nAS SELECT b, AVG(a) AS m FROM t GROUP BY b"
            )
        assert caught.value.location.line == FIRST_LINE + 1


def test_a_clause_change_redefines_the_last_stage_only() -> None:
    body = (
        "AS SELECT c, SUM(s) AS s FROM (SELECT b, c, SUM(a) AS s FROM t GROUP BY b, c) g GROUP BY c"
    )
    before = compiled(f"CREATE MATERIALIZED VIEW v {body}")
    after = compiled(f"CREATE MATERIALIZED VIEW v COMMENT 'now with a comment' {body}")
    assert [
        before.fingerprint(s) == after.fingerprint(t) for s, t in zip(before.stages, after.stages)
    ] == [True, False]


def test_render_shows_the_policy() -> None:
    assert "-- refresh policy: INCREMENTAL STRICT" in render(
        compiled("CREATE VIEW v REFRESH POLICY INCREMENTAL STRICT AS SELECT a FROM t")
    )


@pytest.mark.parametrize(
    "reason, refused",
    [
        ("new", False),
        ("definition changed", False),
        ("--full", False),
        (None, False),
        ("db.t had a RESTORE at version 3", True),
        ("db.__ivm_w was recomputed", True),
    ],
)
def test_strict_refuses_every_recompute_but_a_first_load(reason: str | None, refused: bool) -> None:
    assert (strict_refusal(RefreshPolicy.INCREMENTAL_STRICT, reason) is not None) == refused
    assert strict_refusal(RefreshPolicy.INCREMENTAL, reason) is None
