"""What a stage's recompute forces above it (``physical.cascade``), and how the cost model
weighs it (``CostModel.choose``). No Spark: the stages are edges (or plans compiled against a
``StaticCatalog``), the history the summary the refresh log keeps."""

from __future__ import annotations

from ivm_sql.catalog import StaticCatalog
from ivm_sql.compiler.order import compile_views
from ivm_sql.compiler.plan import stages_above as plan_stages_above
from ivm_sql.locate import Location
from ivm_sql.physical.cascade import Above, StageEdges, stages_above
from ivm_sql.physical.cost import COST_REASON, FORCED, HISTORY, CostModel
from ivm_sql.storage.refresh_log import StageCosts
from ivm_sql.viewdefs import parse_view

LINES = "shop.__ivm_order_lines"
BY_DAY = "shop.__ivm_by_day"
BY_DAY_TOTAL = "shop.__ivm_by_day_total"
TOP = "shop.__ivm_top"
STAGES = [
    StageEdges(LINES, ("shop.orders", "shop.items")),
    StageEdges(BY_DAY, (LINES,)),
    StageEdges(BY_DAY_TOTAL, (BY_DAY, "shop.days")),
    StageEdges(TOP, (LINES,)),
]
MODEL = CostModel(recompute_above=0.1)
# order_lines: 10 s applying a change, 6 s recomputing it: alone, a recompute is chosen
LINES_COSTS = StageCosts("r5", [[5_000.0, 10.0], [6_000.0, 10.2], [4_000.0, 9.8]], [6.0])


def rows_of(_table: str) -> int:
    return 1_000_000


def choose(history: dict[str, StageCosts], above: dict[str, Above]) -> object:
    model = MODEL.learning_from(history).weighing(above)
    return model.choose(LINES, {"shop.orders": 5_000}, rows_of)


def test_a_recompute_forces_every_stage_that_reads_its_table_however_far_above() -> None:
    above = stages_above(STAGES)
    assert above[LINES] == Above((BY_DAY, BY_DAY_TOTAL, TOP))
    assert above[BY_DAY] == Above((BY_DAY_TOTAL,))
    assert TOP not in above and BY_DAY_TOTAL not in above  # nothing reads them
    # a recursive stage reads its own table: it is not above itself
    assert stages_above([StageEdges("s.__ivm_r", ("s.__ivm_r", "s.edges"))]) == {}


def test_a_strict_view_above_is_named_however_far_above() -> None:
    strict = [*STAGES[:2], StageEdges(BY_DAY_TOTAL, (BY_DAY,), "shop.by_day_total"), STAGES[3]]
    above = stages_above(strict)
    assert above[LINES].strict_view == "shop.by_day_total"
    assert above[BY_DAY].strict_view == "shop.by_day_total"


def test_alone_a_recompute_is_cheaper_but_not_with_the_recomputes_it_forces_above() -> None:
    alone = choose({LINES: LINES_COSTS}, {})
    assert alone.decided_by == HISTORY and alone.reason.startswith(COST_REASON)
    # the two views over it apply their changes in 1 s and recompute in 4 s: 6 s more
    views = StageCosts("r5", [[50.0, 1.0], [60.0, 1.0]], [4.0])
    history = {LINES: LINES_COSTS, BY_DAY: views, TOP: views}
    weighed = choose(history, {LINES: Above((BY_DAY, TOP))})
    assert (weighed.reason, weighed.decided_by) == (None, HISTORY)
    assert weighed.prediction.above == 6.0
    assert weighed.prediction.reason() == (
        "3 past incremental refreshes of about this size took 10.0 s median, "
        "the last recompute 6.0 s, and recomputing the 2 stages above it 6.0 s more"
    )


def test_a_stage_above_that_recomputes_faster_anyway_or_is_unknown_adds_nothing() -> None:
    faster_recomputed = StageCosts("r5", [[50.0, 3.0], [60.0, 3.0]], [1.0])
    only_applied = StageCosts("r5", [[50.0, 3.0]], [])
    first_load_only = StageCosts("r5", [[50.0, 1.0], [60.0, 1.0]], [], created=2.5)
    history = {TOP: faster_recomputed, BY_DAY: only_applied, BY_DAY_TOTAL: first_load_only}
    assert Above((TOP, BY_DAY, "shop.__ivm_new")).extra_seconds(history) == 0.0
    # a first load stands for the recompute until there is one
    assert Above((BY_DAY_TOTAL,)).extra_seconds(history) == 1.5
    made = choose({LINES: LINES_COSTS, **history}, {LINES: Above((TOP, BY_DAY))})
    assert made.reason.startswith(COST_REASON)
    assert made.reason.endswith("and recomputing the 2 stages above it 0.0 s more")


def test_no_rule_recomputes_a_stage_below_a_strict_view() -> None:
    strict_above = {LINES: Above((BY_DAY,), "shop.by_day")}
    assert choose({LINES: LINES_COSTS}, strict_above).reason is None
    # nor the rows rule, on a change of most of the rows
    analytic = MODEL.weighing(strict_above).choose(LINES, {"shop.orders": 900_000}, rows_of)
    assert (analytic.reason, analytic.decided_by) == (None, FORCED)
    assert MODEL.choose(LINES, {"shop.orders": 900_000}, rows_of).reason.startswith(COST_REASON)


def test_compile_says_what_a_recompute_forces_above() -> None:
    model = MODEL.weighing(stages_above(STAGES))
    assert model.describe_above(LINES) == (
        f"a recompute here also recomputes the 3 stages above it: {BY_DAY}, {BY_DAY_TOTAL}, {TOP}"
    )
    assert model.describe_above(TOP) is None
    learning = MODEL.learning_from({}).weighing({LINES: Above((TOP,))})
    assert learning.describe_above(LINES).endswith("(its history weighs them)")
    strict = MODEL.weighing({LINES: Above((BY_DAY,), "shop.by_day")})
    assert strict.describe_above(LINES) == (
        "never recomputed by choice: view shop.by_day above it is INCREMENTAL STRICT, "
        "and a recompute here would make it fail"
    )
    assert CostModel(None).weighing(stages_above(STAGES)).describe_above(LINES) is None


def test_a_recompute_below_a_views_table_forces_only_what_the_views_table_forces() -> None:
    """A chosen recompute below a view's table writes that table in one statement and none of
    the stages between (``physical.one_statement``): it forces the views above, not them."""
    catalog = StaticCatalog({"db.orders": [("id", "int"), ("customer", "int"), ("qty", "int")]})
    views = [
        parse_view(sql, Location("v.sql", n))
        for n, sql in enumerate(
            [
                "CREATE VIEW per_total AS SELECT total, COUNT(*) AS n FROM "
                "(SELECT customer, SUM(qty) AS total FROM orders GROUP BY customer) t GROUP BY total;",
                "CREATE VIEW busiest AS SELECT MAX(n) AS n FROM per_total;",
            ],
            1,
        )
    ]
    per_total, busiest = compile_views(views, catalog, "db")
    lowest, top = (stage.table for stage in per_total.stages)
    above = plan_stages_above([per_total, busiest])
    assert above[lowest] == above[top] == Above((busiest.table,))
