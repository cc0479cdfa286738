"""The cost model that learns from a stage's history (``physical.learned``), through the
choice the refresh asks of ``CostModel.choose``. No Spark: the history is the summary the
refresh log keeps."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from ivm_sql.physical import learned
from ivm_sql.physical.cost import (
    ANALYTIC,
    COST_REASON,
    EXPLORE_REASON,
    FORCED,
    HISTORY,
    CostModel,
)
from ivm_sql.refresh_policy import RefreshPolicy
from ivm_sql.storage.refresh_log import Event, StageCosts, Summary

STAGE = "shop.__ivm_orders"
MODEL = CostModel(recompute_above=0.1)
LARGE = 50_000  # changed rows past the analytic rules' small-change floor


def rows_of(_table: str) -> int:
    return 1_000_000  # the stage reads a million rows: 50,000 changed is 5%, under 10%


def choice(costs: StageCosts | None, changed: int, model: CostModel = MODEL, explore: bool = False):
    history = {} if costs is None else {STAGE: costs}
    learning = model.learning_from(history, explore)
    return learning.choose(STAGE, {"shop.orders": changed}, rows_of)


def test_without_history_the_analytic_rules_decide() -> None:
    made = choice(None, LARGE)
    assert (made.reason, made.decided_by, made.prediction) == (None, ANALYTIC, None)
    # one way only in the history: it cannot compare, so the analytic rules still decide
    only_incremental = StageCosts("r1", [[100.0, 0.5], [200.0, 0.6]], [])
    assert choice(only_incremental, LARGE).decided_by == ANALYTIC
    # the rows rule itself still fires on a change of most of the rows
    assert choice(None, 900_000).reason.startswith(COST_REASON)


def test_incremental_grown_slower_than_a_recompute_is_recomputed_and_says_why() -> None:
    slow = StageCosts("r9", [[40_000.0, 6.0], [60_000.0, 6.4], [45_000.0, 5.9]], [2.4])
    made = choice(slow, LARGE)
    assert made.decided_by == HISTORY
    assert made.prediction.seconds == (6.0, 2.4)
    assert made.reason == (
        f"{COST_REASON}: 3 past incremental refreshes of about this size took 6.0 s median, "
        "the last recompute 2.4 s"
    )


def test_incremental_cheaper_in_its_history_is_applied_even_where_the_rows_rule_would_recompute() -> (
    None
):
    fast = StageCosts("r9", [[800_000.0, 1.1], [700_000.0, 0.9]], [3.0, 3.4, 2.8])
    made = choice(fast, 900_000)
    assert (made.reason, made.decided_by) == (None, HISTORY)
    assert made.prediction.seconds == (1.0, 3.0)


def test_a_change_of_a_size_never_seen_follows_the_line_through_the_history() -> None:
    # 0.5 s fixed, 0.1 ms a row: 100 rows 0.51 s, 1,000 rows 0.6 s, 10,000 rows 1.5 s
    costs = StageCosts("r3", [[100.0, 0.51], [1_000.0, 0.6], [10_000.0, 1.5]], [2.0])
    small, large = choice(costs, 3_000), choice(costs, 30_000)
    assert small.reason is None and small.prediction.incremental == pytest.approx(0.8, abs=0.05)
    assert (
        large.reason.startswith(COST_REASON)
        and "past incremental refreshes (0.5 s +" in large.reason
    )
    assert large.prediction.incremental == pytest.approx(3.5, abs=0.1)
    # a few small changes close in size: noise would make a steep line, so none is drawn
    close = StageCosts("r3", [[29.0, 1.4], [77.0, 1.5], [50.0, 1.45]], [2.4])
    assert learned._incremental(close.incremental, 4_400)[1].startswith("its largest")
    # between sizes it has seen, with no line and none near: the rules decide
    apart = StageCosts("r3", [[100.0, 0.5], [5_000.0, 0.9]], [0.6])
    assert choice(apart, 1_000).decided_by == ANALYTIC


def test_a_change_larger_than_any_applied_is_applied_unless_its_floor_is_dearer() -> None:
    """Beyond every size it has applied, a change costs at least what the fastest of its
    largest refreshes took: a recompute under that is sure to save; else the change is
    applied, and the history learns the size (the rows rule would have recomputed it)."""
    small = StageCosts("r3", [[100.0, 0.5], [100.0, 0.6]], [4.0])
    made = choice(small, 300_000)
    assert (made.reason, made.decided_by) == (None, HISTORY)
    assert made.prediction.seconds == (0.5, 4.0)
    assert choice(None, 300_000).reason.startswith(COST_REASON)  # what the rules say
    dear = StageCosts("r3", [[2_000.0, 5.2], [3_000.0, 5.0], [2_900.0, 9.0]], [2.0])
    made = choice(dear, 300_000)
    assert made.reason == (
        f"{COST_REASON}: its largest past incremental refreshes (3,000 rows) took 5.0 s or "
        "more, and this one is larger, the last recompute 2.0 s"
    )


def test_past_the_lines_reach_its_edge_is_the_floor() -> None:
    """0.5 s + 1 ms a row, seen up to 10,000 rows: a change of a million rows is not
    guessed from the line, but it costs at least the line's 40.5 s at 40,000 rows (its
    reach), more than a recompute; as a change of 39,000 rows, within reach, does."""
    steep = StageCosts("r3", [[100.0, 0.6], [1_000.0, 1.5], [10_000.0, 10.5]], [30.0])
    within, beyond = choice(steep, 39_000), choice(steep, 1_000_000)
    assert within.reason and within.prediction.incremental == pytest.approx(39.5, abs=0.1)
    assert beyond.reason and beyond.prediction.incremental == pytest.approx(40.5, abs=0.1)
    assert "put one of 40,000 rows at 40.5 s, and this one is larger" in beyond.reason


def test_a_line_never_predicts_below_zero() -> None:
    falling = [[100.0, 3.0], [200.0, 1.0], [10_000.0, 0.5]]
    slope, intercept = learned._line(falling)
    assert slope >= 0 and intercept >= 0


@pytest.mark.parametrize(
    "policy", [RefreshPolicy.INCREMENTAL, RefreshPolicy.INCREMENTAL_STRICT, RefreshPolicy.FULL]
)
def test_policies_other_than_auto_never_consult_the_history(policy: RefreshPolicy) -> None:
    slow = StageCosts("r9", [[40_000.0, 6.0], [60_000.0, 6.4]], [0.1])
    model = MODEL.learning_from({STAGE: slow}).under(policy)
    made = model.choose(STAGE, {"shop.orders": LARGE}, rows_of)
    assert (made.reason, made.decided_by) == (None, FORCED)
    assert (
        MODEL.learning_from({STAGE: slow})
        .under(RefreshPolicy.AUTO)
        .choose(STAGE, {"shop.orders": LARGE}, rows_of)
        .decided_by
        == HISTORY
    )


def test_recompute_above_never_turns_history_off_too() -> None:
    slow = StageCosts("r9", [[40_000.0, 6.0], [60_000.0, 6.4]], [0.1])
    never = CostModel(recompute_above=None).learning_from({STAGE: slow})
    assert never.choose(STAGE, {"shop.orders": LARGE}, rows_of).reason is None


def test_a_recompute_must_save_a_fifth_to_be_chosen() -> None:
    """A recompute also recomputes every stage above it, and small gaps are noise."""
    barely = StageCosts("r9", [[40_000.0, 2.0], [60_000.0, 2.0]], [1.7])
    assert choice(barely, LARGE).reason is None
    clearly = StageCosts("r9", [[40_000.0, 2.0], [60_000.0, 2.0]], [1.6])
    assert choice(clearly, LARGE).reason.startswith(COST_REASON)


def test_one_slow_refresh_does_not_tilt_the_line() -> None:
    """Six refreshes of 1.5 s from 10 to 3,000 rows and one slow one of 6 s: the median
    line stays flat (least squares would climb 1.4 ms a row), so 10,000 rows are still
    expected at about 1.5 s."""
    flat = [[float(rows), 1.5] for rows in (10, 30, 100, 300, 1_000, 3_000)]
    costs = StageCosts("r5", [*flat, [2_000.0, 6.0]], [1.6])
    made = choice(costs, 10_000)
    assert made.reason is None and made.prediction.incremental == pytest.approx(1.5, abs=0.05)
    # far beyond every size it has seen, the fastest of the largest is the floor: applied
    beyond = choice(costs, 100_000)
    assert (beyond.reason, beyond.decided_by) == (None, HISTORY)
    assert beyond.prediction.incremental == pytest.approx(1.5, abs=0.05)


def test_small_refreshes_close_in_rows_do_not_set_the_slope() -> None:
    """A stage's history from the choice benchmark (demo, 100,000 orders): three refreshes of
    33-96 rows, two of thousands, about 1 s each. Unweighted, the slopes between the small
    ones (1.7 ms a row: 0.1 s of noise over 50 rows) make the median 0.13 ms a row; weighted
    by rows apart, the slope follows the refreshes thousands of rows apart."""
    samples = [[47.0, 0.956], [96.0, 1.040], [5945.0, 1.102], [2571.0, 1.327], [33.0, 0.930]]
    slope, intercept = learned._line(samples)
    assert slope < 0.04e-3 and intercept == pytest.approx(0.95, abs=0.05)


def test_the_weighted_median_is_the_value_at_half_the_weight() -> None:
    assert learned._weighted_median([(1.0, 1.0), (2.0, 1.0), (3.0, 5.0)]) == 3.0
    assert learned._weighted_median([(1.0, 3.0), (2.0, 1.0), (3.0, 1.0)]) == 1.0
    assert learned._weighted_median([(1.0, 1.0), (2.0, 1.0)]) == 1.0


# four incremental refreshes of about 1,000 rows, 2 s each; the first load took 2.6 s
FIRST_LOAD_ONLY = StageCosts(
    "r5", [[1_000.0, 2.0], [900.0, 2.1], [1_100.0, 1.9], [1_000.0, 2.0]], [], 2.6
)


def test_the_first_load_is_the_recomputes_cost_only_until_a_recompute() -> None:
    made = choice(FIRST_LOAD_ONLY, 1_000)
    assert (made.reason, made.decided_by) == (None, HISTORY)
    assert made.prediction.seconds == (2.0, 2.6) and made.prediction.recomputes == 0
    recomputed = StageCosts("r6", FIRST_LOAD_ONLY.incremental, [1.2], 2.6)
    made = choice(recomputed, 1_000)
    assert made.reason == (
        f"{COST_REASON}: 4 past incremental refreshes of about this size took 2.0 s median, "
        "the last recompute 1.2 s"
    )


def test_explore_recomputes_a_stage_known_only_by_its_first_load_once_when_cheap_to_try() -> None:
    made = choice(FIRST_LOAD_ONLY, 1_000, explore=True)
    assert made.reason == (
        f"{EXPLORE_REASON}: 4 past incremental refreshes of about this size took 2.0 s median, "
        "the first load 2.6 s"
    )
    assert made.prediction.explore and made.decided_by == HISTORY
    # a first load over twice the change's expected time: trying costs too much
    dear = StageCosts("r5", FIRST_LOAD_ONLY.incremental, [], 4.1)
    assert choice(dear, 1_000, explore=True).reason is None
    # too few incremental refreshes yet to know what the change costs
    young = StageCosts("r5", FIRST_LOAD_ONLY.incremental[:2], [], 2.6)
    assert choice(young, 1_000, explore=True).reason is None
    # once a recompute is known, there is nothing to learn: it decides
    known = StageCosts("r6", FIRST_LOAD_ONLY.incremental, [2.5], 2.6)
    assert choice(known, 1_000, explore=True).reason is None
    # never under a policy other than AUTO
    strict = MODEL.learning_from({STAGE: FIRST_LOAD_ONLY}, True).under(RefreshPolicy.INCREMENTAL)
    assert strict.choose(STAGE, {"shop.orders": 1_000}, rows_of).reason is None


def event(action: str, strategy: str, seconds: float, rows: int = 0) -> Event:
    when = datetime(2026, 11, 27, tzinfo=UTC)
    return Event(
        "r1", when, "shop.v", STAGE, "linear", action, strategy, rows_in=rows, seconds=seconds
    )


def test_the_summary_keeps_the_first_load_apart_from_the_recomputes() -> None:
    events = [
        event("created", "full", 2.6),
        event("incremental", "incremental", 2.0, 1_000),
        event("recomputed", "full", 1.2),
    ]
    record = Summary().after(events, "r1")
    kept = Summary.from_record(record, 0, 0).stages[STAGE]
    assert (kept.created, kept.full, kept.incremental) == (2.6, [1.2], [[1_000.0, 2.0]])
    # a summary written before the first load was kept apart reads as before
    old = {"stages": {STAGE: {"last": "r0", "incremental": [], "full": [3.0]}}}
    assert Summary.from_record(old, 0, 0).stages[STAGE].created is None


def test_a_recompute_is_learned_without_the_change_it_gave_up() -> None:
    """The scans rule finds a recompute cheaper only once it knows what the change reads:
    the change computed until then is the event's ``change_seconds``. A recompute the
    history chooses is chosen before any change is computed, so it costs the rest."""
    given_up = replace(event("recomputed", "full", 9.5), change_seconds=7.0)
    first_load = replace(event("created", "full", 3.0), change_seconds=0.0)
    record = Summary().after([first_load, given_up], "r1")
    kept = Summary.from_record(record, 0, 0).stages[STAGE]
    assert (kept.created, kept.full) == (3.0, [2.5])


def test_compile_shows_a_stages_history_and_whether_it_chooses() -> None:
    assert learned.describe(FIRST_LOAD_ONLY) == (
        "4 incremental refreshes (median 2.0 s, 900 to 1,100 rows changed), "
        "its first load (2.6 s): it chooses"
    )
    recomputed = StageCosts("r6", [], [1.2, 1.4], 2.6)
    assert learned.describe(recomputed) == (
        "2 recomputes (median 1.3 s): one way only, the rules above decide"
    )
