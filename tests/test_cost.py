"""The cost model that picks incremental or recompute (no Spark needed)."""

from __future__ import annotations

import pytest

from ivm_sql.physical.cascade import Above
from ivm_sql.physical.cost import SMALL_CHANGE, CostModel


def never_counted(table: str) -> int:
    raise AssertionError(f"a small change must not count the rows of {table}")


def test_small_change_stays_incremental_without_counting_rows() -> None:
    assert (
        CostModel(0.1).recompute_reason(
            {"db.orders": SMALL_CHANGE, "db.customers": 0}, never_counted
        )
        is None
    )


def test_change_over_the_share_is_recomputed_with_the_numbers() -> None:
    rows = {"db.orders": 100_000, "db.customers": 50_000}
    reason = CostModel(0.1).recompute_reason(
        {"db.orders": 20_000, "db.customers": 0}, rows.__getitem__
    )
    assert reason == (
        "cheaper than incremental: 20,000 changed rows are 13% of the 150,000 rows it reads (recompute_above: 0.1)"
    )


@pytest.mark.parametrize("share", [0.2, None])
def test_change_under_the_share_or_never_stays_incremental(share: float | None) -> None:
    rows = {"db.orders": 100_000, "db.customers": 50_000}
    assert (
        CostModel(share).recompute_reason(
            {"db.orders": 20_000, "db.customers": 0}, rows.__getitem__
        )
        is None
    )


def test_compile_describes_the_decision() -> None:
    assert "10%" in CostModel(0.1).describe()
    assert "always incremental" in CostModel(None).describe()


def test_change_that_scans_what_a_recompute_scans_is_recomputed_with_the_sizes() -> None:
    """A change to both sides of a join scans each side whole in the other's term: as much
    as a recompute, in more statements."""
    assert CostModel(0.1).scan_reason(54_000_000, 27_000_000) == (
        "cheaper than incremental: its change reads 54.0 MB of tables, a recompute 27.0 MB"
    )
    assert CostModel(0.1).scan_reason(27_000_000, 27_000_000) is not None


@pytest.mark.parametrize(
    "change, recompute", [(0, 19_000_000), (600_000, 19_700_000), (5, 0), (None, 10), (10, None)]
)
def test_change_that_scans_less_or_unknown_stays_incremental(
    change: int | None, recompute: int | None
) -> None:
    assert CostModel(0.1).scan_reason(change, recompute) is None


def test_never_turns_the_scans_rule_off_too() -> None:
    assert CostModel(None).scan_reason(54_000_000, 27_000_000) is None


def test_stages_whose_statements_cost_more_than_one_statement_are_written_at_once() -> None:
    """The statements rule, in TPC-H Q20's shape at SF 1: its ``lineitem`` sums' change
    (1 MB of the feed) and MERGE into their 15 MB table, its top's change (nothing outside
    the stand-in), four statements, each counted as ``STATEMENT_BYTES`` read, against its
    SELECT from the sums' stage up (``lineitem``'s 200 MB and a few small tables)."""
    rows = SMALL_CHANGE + 1
    reason = CostModel(0.1).statements_reason(
        "db.q20", rows, [10**6, 0], [15 * 10**6, 0], 205 * 10**6
    )
    assert reason == (
        "cheaper than incremental: its 2 changed stages read 1.0 MB and MERGE into 15.0 MB in "
        "4 statements (each counted as 64.0 MB read), its SELECT in one statement reads 205.0 MB"
    )
    # 1 + 2 * 15 + 4 * 64 = 287 MB against 250 + 64: stage by stage
    assert (
        CostModel(0.1).statements_reason("db.q20", rows, [10**6, 0], [15 * 10**6, 0], 250 * 10**6)
        is None
    )


@pytest.mark.parametrize(
    "model, rows, at_once, merged",
    [
        (CostModel(0.1), SMALL_CHANGE, 1, [0, 0]),  # a small change: both ways are fixed costs
        (CostModel(None), SMALL_CHANGE + 1, 1, [0, 0]),  # never: every rule off
        (CostModel(0.1), SMALL_CHANGE + 1, None, [0, 0]),  # a size unknown
        (CostModel(0.1), SMALL_CHANGE + 1, 1, [None, 0]),
        # another view reads it: writing it at once would recompute that view's stages too
        (CostModel(0.1).weighing({"db.v": Above(("db.w",))}), SMALL_CHANGE + 1, 1, [0, 0]),
    ],
)
def test_the_statements_rule_is_quiet_for_a_small_change_never_an_unknown_size_or_a_view_read(
    model: CostModel, rows: int, at_once: int | None, merged: list[int | None]
) -> None:
    assert model.statements_reason("db.v", rows, [10, 10], merged, at_once) is None
