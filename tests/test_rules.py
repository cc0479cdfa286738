"""The incremental rules, one group per rule: algebra in, Spark SQL out (parsed back with
sqlglot and inspected). No Spark."""

from __future__ import annotations

import sqlglot
from sqlglot import exp

from ivm_sql.algebra.nodes import AggCall, Aggregate, Node, Scan, Select, UnionAll, scans
from ivm_sql.catalog import StaticCatalog
from ivm_sql.compiler.order import compile_views
from ivm_sql.errors import Location
from ivm_sql.incremental import aggregate, bag, delta, distinct, snapshot
from ivm_sql.incremental.stages import plan_stages
from ivm_sql.incremental.versions import Versions
from ivm_sql.sqlbuild import WEIGHT, col, consolidate, to_sql
from ivm_sql.viewdefs import parse_view


def parse(expression: exp.Expression) -> exp.Expression:
    """Render to Spark SQL and read it back: what we inspect is what Spark would get."""
    return sqlglot.parse_one(to_sql(expression, pretty=False), read="spark")


def terms(query: exp.Expression) -> list[exp.Select]:
    """The SELECTs of a UNION ALL, left to right (a lone SELECT is one term)."""
    if isinstance(query, exp.Union):
        assert not query.args.get("distinct"), "a change is a UNION ALL, never a UNION"
        return terms(query.left) + terms(query.right)
    assert isinstance(query, exp.Select)
    return [query]


def from_items(select: exp.Select) -> list[exp.Expression]:
    return [select.args["from_"].this] + [j.this for j in select.args.get("joins") or []]


def describe(item: exp.Expression) -> str:
    """'Δ db.t 4..7' for a change read, 'db.t@7' for a snapshot, 'db.t' for the latest,
    'db.t@7 - Δ db.t 4..7' for an old version read as the new one minus the change."""
    if isinstance(item, exp.Subquery):
        inner = item.this
        if isinstance(inner, exp.Union):
            new, change = terms(inner)
            assert output(change, WEIGHT) == NEGATED_SIGN
            return f"{describe(from_items(new)[0])} - {describe(from_items(change)[0])}"
        assert isinstance(inner, exp.Select)
        (source,) = from_items(inner)
        return describe(source)
    assert isinstance(item, exp.Table)
    if isinstance(item.this, exp.Anonymous):
        assert item.this.name.upper() == "TABLE_CHANGES"
        name, first, last = item.this.expressions
        assert name.is_string
        return f"Δ {name.this} {first.sql('spark')}..{last.sql('spark')}"
    name = f"{item.db}.{item.name}"
    version = item.args.get("version")
    if version is None:
        return name
    assert version.this.upper() == "VERSION" and version.args["kind"] == "AS OF"
    return f"{name}@{version.expression.sql('spark')}"


NEGATED_SIGN = "IF(`_change_type` IN ('insert', 'update_postimage'), -1, 1)"


def term_sources(select: exp.Select) -> dict[str, str]:
    return {item.alias: describe(item) for item in from_items(select)}


def output(select: exp.Select, name: str) -> str:
    (found,) = [e for e in select.expressions if e.alias_or_name == name]
    return found.this.sql("spark") if isinstance(found, exp.Alias) else found.sql("spark")


def table_scan(name: str, *columns: str) -> Scan:
    return Scan(f"db.{name}", columns)


def select_all(alias: str, node: Node, *, where: str | None = None) -> Select:
    return Select(
        ((alias, node),),
        sqlglot.parse_one(where, read="spark") if where else None,
        node.columns,
        tuple(col(c, alias) for c in node.columns),
    )


SIGN = "IF(`_change_type` IN ('insert', 'update_postimage'), 1, -1)"


# Scan: change data feed and time travel ---------------------------------------------------


class TestScan:
    scan = table_scan("t", "a", "b")

    def test_delta_reads_table_changes_from_old_plus_one_to_new(self) -> None:
        query = parse(delta(self.scan, {"db.t": Versions.at(3, 7)}))
        assert describe(query.args["from_"].this) == "Δ db.t 4..7"
        assert [e.alias_or_name for e in query.expressions] == ["a", "b", WEIGHT]

    def test_delta_weight_is_plus_one_for_inserts_and_post_images(self) -> None:
        query = parse(delta(self.scan, {"db.t": Versions.at(3, 7)}))
        weight = query.expressions[-1].this
        assert isinstance(weight, exp.If)
        condition = weight.this
        assert isinstance(condition, exp.In) and condition.this.name == "_change_type"
        assert {e.this for e in condition.expressions} == {"insert", "update_postimage"}
        assert (weight.args["true"].sql(), weight.args["false"].sql()) == ("1", "-1")

    def test_delta_of_a_bag_table_multiplies_by_its_multiplicity(self) -> None:
        scan = Scan("db.__ivm_v", ("a",), weight=col(WEIGHT))
        query = parse(delta(scan, {"db.__ivm_v": Versions.at(1, 2)}))
        assert output(query, WEIGHT) == f"{SIGN} * `{WEIGHT}`"

    def test_delta_applies_the_scan_expressions_and_filter(self) -> None:
        scan = Scan(
            "db.t", ("x",), exprs=(sqlglot.parse_one("a + b"),), where=sqlglot.parse_one("a > 0")
        )
        query = parse(delta(scan, {"db.t": Versions.at(3, 7)}))
        assert output(query, "x") == "a + b"
        assert query.args["where"].this.sql("spark") == "a > 0"

    def test_symbolic_versions(self) -> None:
        query = parse(delta(self.scan, {"db.t": Versions.symbolic("db.t")}))
        assert describe(query.args["from_"].this) == "Δ db.t :db_t_old + 1..:db_t_new"

    def test_snapshot_uses_version_as_of(self) -> None:
        pins = {"db.t": Versions.at(3, 7)}
        new = parse(snapshot(self.scan, pins, "new"))
        assert describe(new.args["from_"].this) == "db.t@7"
        assert output(new, WEIGHT) == "1"
        assert (
            describe(
                parse(snapshot(self.scan, {"db.t": Versions.at(7, 7)}, "old")).args["from_"].this
            )
            == "db.t@7"
        )

    def test_old_snapshot_of_a_changed_table_is_the_new_one_minus_the_change(self) -> None:
        # z^-1 I(S) = I(S) - ΔS: no query reads a version older than the pinned one
        old = parse(snapshot(self.scan, {"db.t": Versions.at(3, 7)}, "old"))
        new, change = terms(old)
        assert describe(new.args["from_"].this) == "db.t@7"
        assert output(new, WEIGHT) == "1"
        assert describe(change.args["from_"].this) == "Δ db.t 4..7"
        assert output(change, WEIGHT) == NEGATED_SIGN

    def test_snapshot_without_an_old_version_reads_the_table(self) -> None:
        query = parse(snapshot(self.scan, {"db.t": Versions.at(None, 7)}, "old"))
        assert describe(query.args["from_"].this) == "db.t"

    def test_no_change_no_delta(self) -> None:
        assert delta(self.scan, {"db.t": Versions.at(5, 5)}) is None
        assert delta(self.scan, {"db.t": Versions.at(None, 5)}) is None  # first load: no old state

    def test_versions(self) -> None:
        assert Versions.at(5, 5).changed is False
        assert Versions.at(5, 6).changed is True
        assert Versions.at(None, 6).changed is False
        assert Versions.at(5, 9).first_change().sql() == "6"


# select-project-join: the n-way bilinear rule ---------------------------------------------

R1, R2, R3 = table_scan("r1", "k", "x"), table_scan("r2", "k", "y"), table_scan("r3", "k", "z")
JOIN3 = Select(
    (("a", R1), ("b", R2), ("c", R3)),
    sqlglot.parse_one("a.k = b.k AND b.k = c.k AND a.x > 0", read="spark"),
    ("x", "y", "z"),
    (col("x", "a"), col("y", "b"), col("z", "c")),
)
OLD_NEW = {"db.r1": (3, 7), "db.r2": (10, 12), "db.r3": (20, 21)}


def pins_with(changed: set[str]) -> dict[str, Versions]:
    return {
        t: Versions.at(o, n) if t in changed else Versions.at(n, n) for t, (o, n) in OLD_NEW.items()
    }


def expected_term(i: int, changed: set[str]) -> dict[str, str]:
    """Term i of the n-way rule: R_j new before i, ΔR_i, R_j old after i (an unchanged
    input's old version is its new one; a changed one's is read as new minus its change)."""
    result = {}
    for j, (alias, table) in enumerate(zip("abc", OLD_NEW)):
        old, new = OLD_NEW[table] if table in changed else (OLD_NEW[table][1],) * 2
        if j < i:
            result[alias] = f"{table}@{new}"
        elif j == i:
            result[alias] = f"Δ {table} {old + 1}..{new}"
        elif table in changed:
            result[alias] = f"{table}@{new} - Δ {table} {old + 1}..{new}"
        else:
            result[alias] = f"{table}@{new}"
    return result


class TestJoin:
    def test_all_changed_one_term_per_input(self) -> None:
        changed = {"db.r1", "db.r2", "db.r3"}
        query = parse(delta(JOIN3, pins_with(changed)))
        assert [term_sources(t) for t in terms(query)] == [
            expected_term(i, changed) for i in range(3)
        ]
        assert [term_sources(t) for t in terms(query)][1] == {
            "a": "db.r1@7",
            "b": "Δ db.r2 11..12",
            "c": "db.r3@21 - Δ db.r3 21..21",
        }

    def test_one_changed_one_term(self) -> None:
        query = parse(delta(JOIN3, pins_with({"db.r2"})))
        assert [term_sources(t) for t in terms(query)] == [expected_term(1, {"db.r2"})]
        assert [term_sources(t) for t in terms(query)] == [
            {"a": "db.r1@7", "b": "Δ db.r2 11..12", "c": "db.r3@21"}
        ]

    def test_two_changed_two_terms(self) -> None:
        changed = {"db.r1", "db.r3"}
        query = parse(delta(JOIN3, pins_with(changed)))
        assert [term_sources(t) for t in terms(query)] == [
            expected_term(0, changed),
            expected_term(2, changed),
        ]
        assert [term_sources(t) for t in terms(query)] == [
            {"a": "Δ db.r1 4..7", "b": "db.r2@12", "c": "db.r3@21 - Δ db.r3 21..21"},
            {"a": "db.r1@7", "b": "db.r2@12", "c": "Δ db.r3 21..21"},
        ]

    def test_nothing_changed_no_delta(self) -> None:
        assert delta(JOIN3, pins_with(set())) is None

    def test_weight_of_a_term_is_its_change_weight(self) -> None:
        (term,) = terms(parse(delta(JOIN3, pins_with({"db.r2"}))))
        assert output(term, WEIGHT) == f"`b`.`{WEIGHT}`"
        assert [output(term, c) for c in ("x", "y", "z")] == ["`a`.`x`", "`b`.`y`", "`c`.`z`"]

    def test_weights_multiply(self) -> None:
        bag_view = Scan("db.__ivm_v", ("k", "y"), weight=col(WEIGHT))
        node = Select(
            (("a", R1), ("b", bag_view)),
            sqlglot.parse_one("a.k = b.k"),
            ("x", "y"),
            (col("x", "a"), col("y", "b")),
        )
        pins = {"db.r1": Versions.at(3, 7), "db.__ivm_v": Versions.at(1, 2)}
        first, second = terms(parse(delta(node, pins)))
        assert output(first, WEIGHT) == f"`a`.`{WEIGHT}` * `b`.`{WEIGHT}`"
        assert output(second, WEIGHT) == f"`b`.`{WEIGHT}`"
        assert output(parse(snapshot(node, pins, "new")), WEIGHT) == f"`b`.`{WEIGHT}`"

    def test_conditions_go_to_the_join_that_has_their_inputs(self) -> None:
        (term,) = terms(parse(delta(JOIN3, pins_with({"db.r1"}))))
        ons = [j.args["on"].sql("spark") for j in term.args["joins"]]
        assert ons == ["a.k = b.k AND a.x > 0", "b.k = c.k"]
        assert all(j.kind.upper() in ("", "INNER") for j in term.args["joins"])
        assert term.args.get("where") is None

    def test_snapshot_joins_the_versions_asked_for(self) -> None:
        pins = pins_with({"db.r1", "db.r2", "db.r3"})
        assert term_sources(parse(snapshot(JOIN3, pins, "new"))) == {
            "a": "db.r1@7",
            "b": "db.r2@12",
            "c": "db.r3@21",
        }
        assert term_sources(parse(snapshot(JOIN3, pins, "old"))) == {
            "a": "db.r1@7 - Δ db.r1 4..7",
            "b": "db.r2@12 - Δ db.r2 11..12",
            "c": "db.r3@21 - Δ db.r3 21..21",
        }

    def test_self_join_two_terms_on_the_same_table(self) -> None:
        t = table_scan("t", "a", "b")
        node = Select(
            (("x", t), ("y", t)),
            sqlglot.parse_one("x.b = y.a"),
            ("a", "a2"),
            (col("a", "x"), col("a", "y")),
        )
        first, second = terms(parse(delta(node, {"db.t": Versions.at(3, 7)})))
        assert term_sources(first) == {"x": "Δ db.t 4..7", "y": "db.t@7 - Δ db.t 4..7"}
        assert term_sources(second) == {"x": "db.t@7", "y": "Δ db.t 4..7"}

    def test_filter_and_projection_is_the_one_input_case(self) -> None:
        node = select_all("t", table_scan("t", "a", "b"), where="t.a > 1")
        query = parse(delta(node, {"db.t": Versions.at(3, 7)}))
        (term,) = terms(query)
        assert term_sources(term) == {"t": "Δ db.t 4..7"}
        assert term.args["where"].this.sql("spark") == "t.a > 1"

    def test_cross_join_without_condition(self) -> None:
        node = Select((("a", R1), ("b", R2)), None, ("x", "y"), (col("x", "a"), col("y", "b")))
        (term,) = terms(parse(delta(node, pins_with({"db.r1"}))))
        assert term.args["joins"][0].args.get("on") is None


# UNION ALL: linear ------------------------------------------------------------------------


class TestUnionAll:
    node = UnionAll(
        (
            select_all("p", table_scan("p", "a")),
            select_all("q", table_scan("q", "a")),
            select_all("r", table_scan("r", "a")),
        ),
        ("a",),
    )

    def test_delta_is_the_union_of_the_changed_branches(self) -> None:
        pins = {"db.p": Versions.at(1, 2), "db.q": Versions.at(5, 5), "db.r": Versions.at(7, 9)}
        query = parse(delta(self.node, pins))
        assert [term_sources(t) for t in terms(query)] == [
            {"p": "Δ db.p 2..2"},
            {"r": "Δ db.r 8..9"},
        ]

    def test_one_changed_branch_is_that_branch(self) -> None:
        pins = {"db.p": Versions.at(2, 2), "db.q": Versions.at(5, 6), "db.r": Versions.at(9, 9)}
        query = parse(delta(self.node, pins))
        assert isinstance(query, exp.Select)
        assert term_sources(query) == {"q": "Δ db.q 6..6"}

    def test_nothing_changed(self) -> None:
        pins = {t: Versions.at(1, 1) for t in ("db.p", "db.q", "db.r")}
        assert delta(self.node, pins) is None

    def test_snapshot_is_the_union_all_of_the_branches(self) -> None:
        pins = {"db.p": Versions.at(1, 2), "db.q": Versions.at(5, 5), "db.r": Versions.at(7, 9)}
        query = parse(snapshot(self.node, pins, "old"))
        assert [term_sources(t) for t in terms(query)] == [
            {"p": "db.p@2 - Δ db.p 2..2"},
            {"q": "db.q@5"},
            {"r": "db.r@9 - Δ db.r 8..9"},
        ]


# consolidation ----------------------------------------------------------------------------


def test_consolidation_groups_by_every_column_and_drops_zero_weights() -> None:
    query = parse(consolidate(exp.select("*").from_("x"), ("a", "b", "c")))
    assert [e.sql("spark") for e in query.args["group"].expressions] == ["`a`", "`b`", "`c`"]
    assert output(query, WEIGHT) == f"SUM(`{WEIGHT}`)"
    assert query.args["having"].this.sql("spark") == f"SUM(`{WEIGHT}`) <> 0"
    assert [e.alias_or_name for e in query.expressions] == ["a", "b", "c", WEIGHT]


# bag and DISTINCT tables: MERGE of a consolidated change ------------------------------------


def merge_parts(merge: exp.Merge) -> tuple[exp.Merge, list[exp.When]]:
    parsed = parse(merge)
    assert isinstance(parsed, exp.Merge)
    return parsed, list(parsed.args["whens"].expressions)


def conjuncts(condition: exp.Expression) -> list[exp.Expression]:
    return list(condition.flatten()) if isinstance(condition, exp.And) else [condition]


class TestBag:
    columns = ("a", "b", "c")
    change = bag.change(columns, exp.select("*").from_("x"))

    def test_change_is_consolidated(self) -> None:
        query = parse(self.change)
        assert [e.sql("spark") for e in query.args["group"].expressions] == ["`a`", "`b`", "`c`"]
        assert query.args["having"] is not None

    def test_merge_matches_null_safely_on_every_column(self) -> None:
        merge, _ = merge_parts(bag.merge("db.__ivm_v", self.columns, self.change))
        assert describe(merge.this) == "db.__ivm_v" and merge.this.alias == "t"
        assert merge.args["using"].alias == "s"
        matches = conjuncts(merge.args["on"])
        assert all(isinstance(m, exp.NullSafeEQ) for m in matches)
        assert [(m.this.sql("spark"), m.expression.sql("spark")) for m in matches] == [
            (f"`t`.`{c}`", f"`s`.`{c}`") for c in self.columns
        ]

    def test_merge_deletes_at_weight_zero_adds_weights_inserts_new_rows(self) -> None:
        _, (delete, update, insert) = merge_parts(
            bag.merge("db.__ivm_v", self.columns, self.change)
        )
        summed = f"`t`.`{WEIGHT}` + `s`.`{WEIGHT}`"
        assert delete.args["matched"] and delete.args["condition"].sql("spark") == f"{summed} = 0"
        assert delete.args["then"].sql("spark") == "DELETE"
        assert update.args["matched"] and update.args.get("condition") is None
        (assignment,) = update.args["then"].expressions
        assert assignment.sql("spark") == f"`t`.`{WEIGHT}` = {summed}"
        assert not insert.args["matched"]
        assert [c.name for c in insert.args["then"].this.expressions] == [*self.columns, WEIGHT]
        assert [c.sql("spark") for c in insert.args["then"].expression.expressions] == [
            f"`s`.`{c}`" for c in (*self.columns, WEIGHT)
        ]

    def test_distinct_uses_the_same_table_and_merge(self) -> None:
        assert to_sql(
            distinct.merge(
                "db.x", self.columns, distinct.change(self.columns, exp.select("*").from_("x"))
            )
        ) == to_sql(bag.merge("db.x", self.columns, self.change))

    def test_readers(self) -> None:
        node = select_all("t", table_scan("t", "a", "b", "c"))
        bag_reader = bag.reader("db.__ivm_v", node)
        distinct_reader = distinct.reader("db.__ivm_v", node)
        assert bag_reader.columns == distinct_reader.columns == self.columns
        assert bag_reader.weight.sql("spark") == f"`{WEIGHT}`"  # each row as often as it occurs
        assert distinct_reader.weight == exp.Literal.number(1)  # each row once


# GROUP BY: COUNT, SUM, AVG from the change alone ----------------------------------------------

AGG_INPUT = Select(
    (("t", table_scan("t", "a", "b")),), None, ("g0", "a0"), (col("b", "t"), col("a", "t"))
)
CALLS = (
    AggCall("count_star", None, "agg0"),
    AggCall("count", "a0", "agg1"),
    AggCall("sum", "a0", "agg2"),
    AggCall("avg", "a0", "agg3"),
)
GROUPED = Aggregate(AGG_INPUT, ("g0",), CALLS)
GLOBAL = Aggregate(AGG_INPUT, (), CALLS)
PINS = {"db.t": Versions.at(3, 7)}


class TestAggregate:
    def merge(self, node: Aggregate) -> tuple[exp.Merge, list[exp.When]]:
        return merge_parts(
            aggregate.merge(
                "db.__ivm_v", node, aggregate.change(node, delta(node.input, PINS), "db.__ivm_v")
            )
        )

    def test_state_columns(self) -> None:
        assert [name for name, _ in aggregate.partials(GROUPED)] == [
            "__ivm_count",
            "__ivm_n1",
            "__ivm_n2",
            "__ivm_s2",
            "__ivm_n3",
            "__ivm_s3",
        ]  # COUNT(*) reads the group's row count: no column of its own

    def test_change_sums_weighted_partials_per_group(self) -> None:
        query = parse(aggregate.change(GROUPED, delta(GROUPED.input, PINS), "db.__ivm_v"))
        assert [e.sql("spark") for e in query.args["group"].expressions] == ["`g0`"]
        assert output(query, "__ivm_count") == f"COALESCE(SUM(`{WEIGHT}`), 0)"
        assert output(query, "__ivm_n1") == f"COALESCE(SUM(IF(`a0` IS NULL, 0, `{WEIGHT}`)), 0)"
        assert output(query, "__ivm_s2") == f"COALESCE(SUM(`a0` * `{WEIGHT}`), 0)"
        # a group whose change sums to nothing is left alone
        having = query.args["having"].this
        assert isinstance(having, exp.Or)
        assert describe(query.find(exp.Table)) == "Δ db.t 4..7"

    def test_merge_matches_on_the_keys_null_safely(self) -> None:
        merge, _ = self.merge(GROUPED)
        (match,) = conjuncts(merge.args["on"])
        assert isinstance(match, exp.NullSafeEQ)
        assert (match.this.sql("spark"), match.expression.sql("spark")) == ("`t`.`g0`", "`s`.`g0`")

    def test_merge_deletes_a_group_whose_count_reaches_zero(self) -> None:
        _, (delete, update, insert) = self.merge(GROUPED)
        assert delete.args["condition"].sql("spark") == "`t`.`__ivm_count` + `s`.`__ivm_count` = 0"
        assert delete.args["then"].sql("spark") == "DELETE"
        state = [name for name, _ in aggregate.partials(GROUPED)]
        assert [a.sql("spark") for a in update.args["then"].expressions] == [
            f"`t`.`{n}` = `t`.`{n}` + `s`.`{n}`" for n in state
        ]
        assert [c.name for c in insert.args["then"].this.expressions] == ["g0", *state]

    def test_global_aggregate_never_deletes_and_matches_on_true(self) -> None:
        merge, whens = self.merge(GLOBAL)
        assert merge.args["on"].sql("spark") == "TRUE"
        assert not any(w.args["then"].sql("spark") == "DELETE" for w in whens)
        assert "DELETE" not in to_sql(
            aggregate.merge("db.__ivm_v", GLOBAL, exp.select("*").from_("x"))
        )
        update, insert = whens
        assert update.args["matched"] and not insert.args["matched"]

    def test_global_aggregate_change_is_one_row_unless_it_sums_to_nothing(self) -> None:
        query = parse(aggregate.change(GLOBAL, delta(GLOBAL.input, PINS), "db.__ivm_v"))
        assert query.args.get("group") is None and query.args.get("having") is not None
        # the initial load always has the global row, even over no rows
        initial = parse(aggregate.initial(GLOBAL, snapshot(GLOBAL.input, PINS, "new")))
        assert initial.args.get("group") is None and initial.args.get("having") is None

    def test_initial_keeps_every_group(self) -> None:
        query = parse(aggregate.initial(GROUPED, snapshot(GROUPED.input, PINS, "new")))
        assert query.args.get("having") is None
        assert describe(query.find(exp.Table)) == "db.t@7"

    def test_reader_computes_results_from_the_state(self) -> None:
        reader = aggregate.reader("db.__ivm_v", GROUPED)
        assert reader.table == "db.__ivm_v"
        assert reader.columns == ("g0", "agg0", "agg1", "agg2", "agg3")
        assert reader.weight == exp.Literal.number(1)
        exprs = [e.sql("spark") for e in reader.exprs]
        assert exprs[:3] == ["`g0`", "`__ivm_count`", "`__ivm_n1`"]
        # SUM and AVG are NULL when no non-NULL value is counted
        assert exprs[3] == "CASE WHEN `__ivm_n2` > 0 THEN `__ivm_s2` END"
        assert exprs[4] == "CASE WHEN `__ivm_n3` > 0 THEN `__ivm_s3` / `__ivm_n3` END"


# stages: the view cut at its stateful operators -----------------------------------------------

CATALOG = StaticCatalog(
    {"db.t": [("a", "int"), ("b", "int"), ("c", "string")], "db.u": [("a", "int"), ("d", "int")]}
)


def plan(text: str):
    (result,) = compile_views([parse_view(text, Location("views/x.sql", 1))], CATALOG, "db")
    return result


class TestStages:
    def test_group_by_in_a_joined_subquery_is_its_own_stage(self) -> None:
        result = plan(
            "CREATE VIEW v AS SELECT t.c, s.n FROM t JOIN (SELECT a, COUNT(*) AS n FROM u GROUP BY a) s ON t.a = s.a"
        )
        inner, outer = result.stages
        assert (inner.table, inner.kind) == ("db.__ivm_v_s1", "aggregate")
        assert (outer.table, outer.kind) == ("db.__ivm_v", "bag")
        assert inner.sources == ("db.u",)
        assert outer.sources == ("db.t", "db.__ivm_v_s1")
        assert result.table == "db.__ivm_v"
        assert result.base_tables == ("db.u", "db.t")

    def test_two_grouped_subqueries_numbered_innermost_first(self) -> None:
        result = plan(
            "CREATE VIEW v AS SELECT x.n, y.m FROM (SELECT a, COUNT(*) AS n FROM t GROUP BY a) x "
            "JOIN (SELECT a, SUM(d) AS m FROM (SELECT DISTINCT a, d FROM u) GROUP BY a) y ON x.a = y.a"
        )
        assert [(s.table, s.kind) for s in result.stages] == [
            ("db.__ivm_v_s1", "aggregate"),
            ("db.__ivm_v_s2", "distinct"),
            ("db.__ivm_v_s3", "aggregate"),
            ("db.__ivm_v", "bag"),
        ]
        assert result.stages[2].sources == ("db.__ivm_v_s2",)

    def test_projection_above_the_last_aggregate_is_read_not_stored(self) -> None:
        result = plan(
            "CREATE VIEW v AS SELECT b, COUNT(*) * 2 AS n FROM t GROUP BY b HAVING COUNT(*) > 1"
        )
        (stage,) = result.stages
        assert (stage.table, stage.kind) == ("db.__ivm_v", "aggregate")
        assert result.output.table == "db.__ivm_v"
        assert [e.sql("spark") for e in result.output.exprs] == ["`g0`", "`__ivm_count` * 2"]
        assert result.output.where.sql("spark") == "`__ivm_count` > 1"

    def test_single_stage_kinds(self) -> None:
        assert [s.kind for s in plan("CREATE VIEW v AS SELECT a FROM t").stages] == ["bag"]
        assert [s.kind for s in plan("CREATE VIEW v AS SELECT DISTINCT a FROM t").stages] == [
            "distinct"
        ]
        assert [
            s.kind for s in plan("CREATE VIEW v AS SELECT a FROM t UNION SELECT a FROM u").stages
        ] == ["distinct"]
        assert [s.kind for s in plan("CREATE VIEW v AS SELECT COUNT(*) AS n FROM t").stages] == [
            "aggregate"
        ]

    def test_merge_statement_is_none_when_no_source_changed(self) -> None:
        (stage,) = plan("CREATE VIEW v AS SELECT t.a FROM t JOIN u ON t.a = u.a").stages
        assert stage.write_statement({"db.t": Versions.at(4, 4), "db.u": Versions.at(2, 2)}) is None
        merge = parse(stage.write_statement({"db.t": Versions.at(4, 4), "db.u": Versions.at(2, 3)}))
        changes = [
            describe(t) for t in merge.find_all(exp.Table) if isinstance(t.this, exp.Anonymous)
        ]
        assert changes == ["Δ db.u 3..3"]

    def test_plan_stages_directly(self) -> None:
        node = Aggregate(AGG_INPUT, ("g0",), CALLS[:1])
        stages, reader = plan_stages("db", "v", node)
        assert [(s.table, s.kind) for s in stages] == [("db.__ivm_v", "aggregate")]
        assert stages[0].input.columns == AGG_INPUT.columns
        assert stages[0].aggregate.aggs == CALLS[:1]
        assert reader.table == "db.__ivm_v"


def test_an_aggregate_read_twice_is_kept_in_one_table() -> None:
    """TPC-H Q15 reads its WITH twice, once to join and once for its MAX: one GROUP BY,
    one stage table, which both reads take; a refresh computes and MERGEs its change once."""
    plan_ = plan(
        "CREATE VIEW v AS WITH r AS (SELECT a, SUM(b) AS total FROM t GROUP BY a) "
        "SELECT r.a, r.total FROM r WHERE r.total = (SELECT MAX(total) FROM r)"
    )
    assert [stage.kind for stage in plan_.stages] == [
        "aggregate",
        "aggregate",
        "bag",
    ]  # the SUM, the MAX, the view
    reads = [s.table for stage in plan_.stages for s in scans(stage.node)]
    assert reads.count(plan_.stages[0].table) == 2  # the MAX and the join both read the SUM's table


def test_two_different_aggregates_keep_two_tables() -> None:
    plan_ = plan(
        "CREATE VIEW v AS SELECT x.a, x.total, y.total AS other FROM (SELECT a, SUM(b) AS total FROM t GROUP BY a) x "
        "JOIN (SELECT a, SUM(d) AS total FROM u GROUP BY a) y ON x.a = y.a"
    )
    assert sum(stage.kind == "aggregate" for stage in plan_.stages) == 2
