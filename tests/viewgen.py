"""Random views over the oracle's tables, as hypothesis strategies (issue 21).

``batches(size)`` draws ``size`` slots, each empty or a view named by its slot (``v01``,
``v02``, ...). A view may read views of earlier slots. An empty slot is the simplest choice,
so hypothesis shrinks a failing batch by emptying the slots it does not need, and the views
left keep their names.

Every view stays within what docs/sql-support.md says ivm maintains, and is deterministic:
where an ORDER BY decides which rows a view keeps (ROW_NUMBER, LAG/LEAD, LIMIT) it orders by
every output column, so only equal rows can tie; max_by/min_by order by (y, x), so ties give
the same x; DOUBLE outputs come from AVG and stddev_pop only (the comparison rounds them)
and no later view reads them. Each expression is aliased; output names are unique.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from hypothesis import strategies as st
from oracle import ViewSpec

INT, STR, DEC, DBL, ARR = "int", "str", "dec", "dbl", "arr"
NUMERIC = (INT, DEC)
KEYS = (INT, STR)  # kinds to join, group, compare and combine on
PLAIN = (INT, STR, DEC)  # kinds a later view may read


@dataclass(frozen=True)
class Column:
    name: str
    kind: str


@dataclass(frozen=True)
class Relation:
    """A table, or a view of the same batch, with the columns a query may use."""

    name: str
    columns: tuple[Column, ...]
    is_view: bool = False


def _table(name: str, *columns: str) -> Relation:
    return Relation(name, tuple(Column(*c.split(":")) for c in columns))


TABLES = (
    _table("customers", "id:int", "name:str", "country:str", "score:int"),
    _table("products", "id:int", "category:str", "price:dec"),
    _table(
        "orders", "id:int", "customer_id:int", "product_id:int", "qty:int", "status:str", "note:str"
    ),
)

# literals per column name (values the random rows hold, so filters select some rows)
LITERALS = {
    "id": ["1", "2", "3", "5"],
    "customer_id": ["1", "2", "4"],
    "product_id": ["1", "2", "3"],
    "score": ["0", "3", "5", "9"],
    "qty": ["0", "1", "2", "3"],
    "price": ["5.00", "12.50", "1"],
    "name": ["'ann'", "'bob'", "''"],
    "country": ["'DE'", "'FR'", "'US'"],
    "category": ["'toys'", "'food'", "'books'"],
    "status": ["'shipped'", "'new'", "'cancelled'"],
    "note": ["'gift'", "'rush'", "''"],
}
KIND_LITERALS = {
    INT: ["0", "1", "2", "3"],
    DEC: ["1.00", "5.00", "20"],
    STR: ["'DE'", "'shipped'", "'toys'", "''"],
}

# join conditions a schema suggests: the same name, or a foreign key and the key it names
NATURAL_KEYS = ({"customer_id", "id"}, {"product_id", "id"})

# what a view uses, for coverage: one name per construct of docs/sql-support.md
FAMILIES = (
    "join",
    "self_join",
    "outer_join",
    "null_filter",
    "boolean_logic",
    "group_by",
    "having",
    "global_aggregate",
    "count",
    "sum_avg",
    "min_max",
    "count_distinct",
    "sum_distinct",
    "collect_set",
    "max_by",
    "stddev",
    "grouping_sets",
    "distinct",
    "exists",
    "not_exists",
    "in",
    "not_in",
    "scalar_subquery",
    "correlated_subquery",
    "set_operation",
    "window",
    "top_k",
    "limit",
    "view_over_view",
)


@dataclass(frozen=True)
class Ref:
    """A column of a relation in scope: ``alias.name``."""

    alias: str
    column: Column

    @property
    def sql(self) -> str:
        return f"{self.alias}.{self.column.name}"

    @property
    def kind(self) -> str:
        return self.column.kind


@dataclass
class Output:
    """One SELECT item: its expression, its alias and its kind."""

    sql: str
    name: str
    kind: str

    @property
    def item(self) -> str:
        return f"{self.sql} AS {self.name}"


@dataclass
class Query:
    """What a view is being built from: aliases handed out, names used, families and reads."""

    aliases: dict[str, int] = field(default_factory=dict)
    names: set[str] = field(default_factory=set)
    families: set[str] = field(default_factory=set)
    reads: set[str] = field(default_factory=set)

    def alias(self, relation: Relation) -> str:
        letter = "w" if relation.is_view else relation.name[0]
        self.aliases[letter] = self.aliases.get(letter, 0) + 1
        if relation.is_view:
            self.reads.add(relation.name)
        return f"{letter}{self.aliases[letter]}"

    def output(self, sql: str, hint: str, kind: str) -> Output:
        """An output with a unique name made from ``hint``."""
        base = re.sub(r"[^a-z0-9_]+", "_", hint.lower()).strip("_") or "c"
        base = base if base[0].isalpha() else f"c_{base}"
        name, n = base, 1
        while name in self.names:
            n += 1
            name = f"{base}_{n}"
        self.names.add(name)
        return Output(sql, name, kind)


@dataclass(frozen=True)
class GeneratedView:
    """A generated view: its spec, the columns it offers later views, the families it uses."""

    spec: ViewSpec
    columns: tuple[Column, ...]
    families: frozenset[str]

    def relation(self) -> Relation:
        return Relation(
            self.spec.name, tuple(c for c in self.columns if c.kind in PLAIN), is_view=True
        )


Scope = list[tuple[str, Relation]]


def refs(scope: Scope, kinds: tuple[str, ...] = PLAIN) -> list[Ref]:
    return [Ref(alias, c) for alias, relation in scope for c in relation.columns if c.kind in kinds]


def literal(draw, ref: Ref) -> str:
    return draw(st.sampled_from(LITERALS.get(ref.column.name, KIND_LITERALS[ref.kind])))


# predicates ------------------------------------------------------------------------------


def comparison(draw, query: Query, scope: Scope) -> str:
    """One condition on a column: NULL tests, comparisons with a literal or a column, coalesce."""
    ref = draw(st.sampled_from(refs(scope)))
    shape = draw(
        st.sampled_from(["=", "is null", "is not null", "<>", ">", "<=", "coalesce", "column"])
    )
    if shape in ("is null", "is not null", "coalesce"):
        query.families.add("null_filter")
    if shape == "is null":
        return f"{ref.sql} IS NULL"
    if shape == "is not null":
        return f"{ref.sql} IS NOT NULL"
    if shape == "coalesce":
        return f"coalesce({ref.sql}, {literal(draw, ref)}) = {literal(draw, ref)}"
    if shape == "column":
        others = [r for r in refs(scope, (ref.kind,)) if r != ref]
        if others:
            return f"{ref.sql} {draw(st.sampled_from(['=', '<>', '<']))} {draw(st.sampled_from(others)).sql}"
        shape = "="
    return f"{ref.sql} {shape} {literal(draw, ref)}"


def predicate(draw, query: Query, scope: Scope, depth: int = 0) -> str:
    """A condition: a comparison, or AND / OR / NOT of smaller ones."""
    shape = draw(st.sampled_from(["comparison", "and", "or", "not"])) if depth < 2 else "comparison"
    if shape == "comparison":
        return comparison(draw, query, scope)
    query.families.add("boolean_logic")
    if shape == "not":
        return f"NOT ({predicate(draw, query, scope, depth + 1)})"
    left, right = predicate(draw, query, scope, depth + 1), predicate(draw, query, scope, depth + 1)
    return f"({left} {shape.upper()} {right})"


# FROM ------------------------------------------------------------------------------------


def join_condition(draw, scope: Scope, alias: str, relation: Relation) -> str:
    """``left = right`` between a column in scope and one of ``relation``, natural keys first.
    There is always a pair: a table has INT and STRING columns, a view one of them at least."""
    pairs = [
        (left, Ref(alias, c))
        for left in refs(scope, KEYS)
        for c in relation.columns
        if c.kind == left.kind
    ]
    natural = [
        (a, b)
        for a, b in pairs
        if a.column.name == b.column.name or {a.column.name, b.column.name} in NATURAL_KEYS
    ]
    left, right = draw(st.sampled_from(natural if natural and draw(st.integers(0, 3)) else pairs))
    return f"{left.sql} = {right.sql}"


def from_clause(draw, query: Query, pool: list[Relation], most: int = 4) -> tuple[str, Scope]:
    """FROM one relation and up to ``most - 1`` joins (inner or outer, maybe with an extra
    ON condition), each on a column of the relations before it."""
    first = draw(st.sampled_from(pool))
    scope: Scope = [(query.alias(first), first)]
    lines = [f"FROM {first.name} {scope[0][0]}"]
    for _ in range(draw(st.integers(0, most - 1))):
        relation = draw(st.sampled_from(pool))
        alias = query.alias(relation)
        on = join_condition(draw, scope, alias, relation)
        kind = draw(st.sampled_from(["JOIN", "LEFT JOIN", "RIGHT JOIN", "FULL OUTER JOIN"]))
        if kind != "JOIN":
            query.families.add("outer_join")
        if draw(st.integers(0, 3)) == 0:
            on += f" AND {comparison(draw, query, [(alias, relation)])}"
        query.families.add("join")
        if any(r.name == relation.name for _, r in scope):
            query.families.add("self_join")
        scope.append((alias, relation))
        lines.append(f"{kind} {relation.name} {alias} ON {on}")
    return "\n".join(lines), scope


# subqueries ------------------------------------------------------------------------------


def correlation(draw, query: Query, outer: Scope) -> tuple[str, Scope, str | None]:
    """An inner table and, maybe, an equality tying it to the outer query."""
    table = draw(st.sampled_from(TABLES))
    alias = query.alias(table)
    inner: Scope = [(alias, table)]
    on = join_condition(draw, outer, alias, table) if draw(st.booleans()) else None
    if on is not None:
        query.families.add("correlated_subquery")
    return f"FROM {table.name} {alias}", inner, on


def where_of(conditions: list[str]) -> str:
    return f" WHERE {' AND '.join(conditions)}" if conditions else ""


def subquery_condition(draw, query: Query, scope: Scope) -> str:
    """[NOT] EXISTS, [NOT] IN, or a comparison with a scalar subquery; correlated or not."""
    shape = draw(st.sampled_from(["exists", "in", "scalar_subquery"]))
    if shape == "scalar_subquery" and not refs(scope, NUMERIC):
        shape = "exists"
    if shape != "scalar_subquery" and draw(st.booleans()):
        shape = f"not_{shape}"
    query.families.add(shape)
    source, inner, on = correlation(draw, query, scope)
    conditions = [c for c in (on,) if c]
    if draw(st.booleans()):
        conditions.append(comparison(draw, query, inner))
    if shape in ("exists", "not_exists"):
        return f"{'NOT ' if shape == 'not_exists' else ''}EXISTS (SELECT 1 {source}{where_of(conditions)})"
    if shape in ("in", "not_in"):
        outer = draw(st.sampled_from(refs(scope, KEYS)))
        selected = draw(st.sampled_from(refs(inner, (outer.kind,))))
        return f"{outer.sql} {'NOT ' if shape == 'not_in' else ''}IN (SELECT {selected.sql} {source}{where_of(conditions)})"
    outer = draw(st.sampled_from(refs(scope, NUMERIC)))
    aggregate = draw(st.sampled_from(["COUNT(*)", "MAX", "MIN", "AVG", "SUM"]))
    if aggregate != "COUNT(*)":
        aggregate = f"{aggregate}({draw(st.sampled_from(refs(inner, NUMERIC))).sql})"
    op = draw(st.sampled_from([">", "<=", "=", "<>"]))
    return f"{outer.sql} {op} (SELECT {aggregate} {source}{where_of(conditions)})"


def scalar_subquery_output(draw, query: Query, scope: Scope) -> Output:
    """``(SELECT COUNT(*) | MAX(x) | sort_array(collect_set(x)) FROM t WHERE t.k = outer.k)``."""
    query.families.add("scalar_subquery")
    source, inner, on = correlation(draw, query, scope)
    ref = draw(st.sampled_from(refs(inner)))
    aggregate, kind = draw(
        st.sampled_from(
            [
                ("COUNT(*)", INT),
                (f"MAX({ref.sql})", ref.kind),
                (f"COUNT(DISTINCT {ref.sql})", INT),
                (f"sort_array(collect_set({ref.sql}))", ARR),
            ]
        )
    )
    return query.output(
        f"(SELECT {aggregate} {source}{where_of([on] if on else [])})",
        f"sub_{ref.column.name}",
        kind,
    )


def where_clause(draw, query: Query, scope: Scope) -> str:
    """Maybe a WHERE: a predicate, a subquery condition, or both."""
    conditions = []
    if draw(st.integers(0, 2)):
        conditions.append(predicate(draw, query, scope))
    if draw(st.integers(0, 3)) == 0:
        conditions.append(subquery_condition(draw, query, scope))
    return f"\nWHERE {' AND '.join(conditions)}" if conditions else ""


# SELECT items ----------------------------------------------------------------------------


def scalar(draw, query: Query, scope: Scope) -> Output:
    """A column, or a deterministic expression over one."""
    ref = draw(st.sampled_from(refs(scope)))
    name = ref.column.name
    shape = draw(st.sampled_from(["column", "coalesce", "arithmetic", "case", "function"]))
    if shape == "coalesce":
        return query.output(f"coalesce({ref.sql}, {literal(draw, ref)})", name, ref.kind)
    if shape == "case":
        return query.output(
            f"CASE WHEN {comparison(draw, query, scope)} THEN {ref.sql} END", f"{name}_if", ref.kind
        )
    if shape == "arithmetic" and ref.kind in NUMERIC:
        return query.output(
            f"{ref.sql} {draw(st.sampled_from(['+', '-', '*']))} {literal(draw, ref)}",
            f"{name}_x",
            ref.kind,
        )
    if shape == "function" and ref.kind == STR:
        return _string_function(draw, query, ref)
    return query.output(ref.sql, name, ref.kind)


def _string_function(draw, query: Query, ref: Ref) -> Output:
    function = draw(st.sampled_from(["upper", "length", "concat"]))
    if function == "concat":
        return query.output(f"concat({ref.sql}, '-')", f"{ref.column.name}_tag", STR)
    return query.output(
        f"{function}({ref.sql})",
        f"{ref.column.name}_{function}",
        INT if function == "length" else STR,
    )


def projections(draw, query: Query, scope: Scope, most: int = 4) -> list[Output]:
    return [scalar(draw, query, scope) for _ in range(draw(st.integers(1, most)))]


AGGREGATES = (
    "count",
    "sum_avg",
    "min_max",
    "count_distinct",
    "sum_distinct",
    "collect_set",
    "max_by",
    "stddev",
)
# The aggregate families a grouped view draws from. Mixing every family sends nearly every
# view down the touched-groups recompute, so half the views keep to the families of one
# incremental strategy: invertible (COUNT/SUM/AVG), extremes (MIN/MAX), or touched groups.
FOCUSES = (
    AGGREGATES,
    AGGREGATES,
    ("count", "sum_avg"),
    ("min_max",),
    ("min_max", "count", "sum_avg"),
    ("count_distinct", "sum_distinct", "collect_set", "max_by", "stddev"),
)


def aggregate(draw, query: Query, scope: Scope, families: tuple[str, ...] = AGGREGATES) -> Output:
    """One aggregate of ``families``, the families docs/sql-support.md lists as maintained."""
    family = draw(st.sampled_from(families))
    numeric = refs(scope, NUMERIC)
    if not numeric and family in ("sum_avg", "sum_distinct", "stddev"):
        family = "count"
    ref = draw(
        st.sampled_from(numeric if family in ("sum_avg", "sum_distinct", "stddev") else refs(scope))
    )
    name = ref.column.name
    query.families.add(family)
    if family == "count":
        if draw(st.booleans()):
            return query.output("COUNT(*)", "n", INT)
        return query.output(f"COUNT({ref.sql})", f"n_{name}", INT)
    if family == "sum_avg":
        function = draw(st.sampled_from(["SUM", "AVG"]))
        kind = DBL if function == "AVG" and ref.kind == INT else ref.kind
        return query.output(f"{function}({ref.sql})", f"{function.lower()}_{name}", kind)
    if family == "min_max":
        function = draw(st.sampled_from(["MIN", "MAX"]))
        return query.output(f"{function}({ref.sql})", f"{function.lower()}_{name}", ref.kind)
    if family == "count_distinct":
        return query.output(f"COUNT(DISTINCT {ref.sql})", f"distinct_{name}", INT)
    if family == "sum_distinct":
        return query.output(f"SUM(DISTINCT {ref.sql})", f"sum_distinct_{name}", ref.kind)
    if family == "collect_set":
        return query.output(f"sort_array(collect_set({ref.sql}))", f"{name}_set", ARR)
    if family == "max_by":
        by = draw(st.sampled_from(refs(scope)))
        function = draw(st.sampled_from(["max_by", "min_by"]))
        # ordered by (by, x): rows that tie hold the same x
        return query.output(
            f"{function}({ref.sql}, struct({by.sql}, {ref.sql}))", f"{name}_{function}", ref.kind
        )
    return query.output(f"stddev_pop({ref.sql})", f"sd_{name}", DBL)


def having(draw, query: Query, scope: Scope) -> str:
    """A condition on aggregates, or on a scalar subquery now and then."""
    query.families.add("having")
    numeric = refs(scope, NUMERIC)
    shape = draw(st.sampled_from(["count", "sum", "max", "subquery"]))
    if shape == "count" or not numeric:
        return f"COUNT(*) > {draw(st.integers(1, 3))}"
    ref = draw(st.sampled_from(numeric))
    if shape == "sum":
        return f"SUM({ref.sql}) > {literal(draw, ref)}"
    if shape == "max":
        return f"MAX({ref.sql}) IS NULL OR MAX({ref.sql}) > {literal(draw, ref)}"
    query.families.add("scalar_subquery")
    table = draw(st.sampled_from(TABLES))
    alias = query.alias(table)
    inner = draw(st.sampled_from(refs([(alias, table)], NUMERIC)))
    return f"SUM({ref.sql}) > (SELECT AVG({inner.sql}) FROM {table.name} {alias})"


# view shapes -----------------------------------------------------------------------------


def select_list(outputs: list[Output]) -> str:
    return ",\n       ".join(o.item for o in outputs)


def plain_view(draw, query: Query, pool: list[Relation]) -> tuple[str, list[Output]]:
    """SELECT [DISTINCT] expressions (a scalar subquery among them now and then) FROM joins WHERE."""
    source, scope = from_clause(draw, query, pool)
    outputs = projections(draw, query, scope)
    if draw(st.integers(0, 4)) == 0:
        outputs.append(scalar_subquery_output(draw, query, scope))
    distinct = "DISTINCT " if draw(st.integers(0, 3)) == 0 else ""
    if distinct:
        query.families.add("distinct")
    return (
        f"SELECT {distinct}{select_list(outputs)}\n{source}{where_clause(draw, query, scope)}",
        outputs,
    )


def grouped_view(draw, query: Query, pool: list[Relation]) -> tuple[str, list[Output]]:
    """GROUP BY keys (or ROLLUP / CUBE / GROUPING SETS, or none: a global aggregate), with
    aggregates of every family and maybe HAVING."""
    source, scope = from_clause(draw, query, pool)
    where = where_clause(draw, query, scope)
    keys = [draw(st.sampled_from(refs(scope))) for _ in range(draw(st.integers(0, 2)))]
    keys = list(dict.fromkeys(keys))
    outputs = [query.output(k.sql, k.column.name, k.kind) for k in keys]
    focus = draw(st.sampled_from(FOCUSES))
    outputs += [aggregate(draw, query, scope, focus) for _ in range(draw(st.integers(1, 4)))]
    if not keys:
        query.families.add("global_aggregate")
        outputs.append(query.output("COUNT(*)", "n", INT))
        return f"SELECT {select_list(outputs)}\n{source}{where}", outputs
    query.families.add("group_by")
    group = ", ".join(k.sql for k in keys)
    sets = draw(st.sampled_from(["plain", "plain", "plain", "ROLLUP", "CUBE", "GROUPING SETS"]))
    if sets != "plain":
        query.families.add("grouping_sets")
        outputs.append(query.output("grouping_id()", "gid", INT))
        group = f"GROUPING SETS (({group}), ())" if sets == "GROUPING SETS" else f"{sets} ({group})"
    condition = f"\nHAVING {having(draw, query, scope)}" if draw(st.integers(0, 2)) == 0 else ""
    return f"SELECT {select_list(outputs)}\n{source}{where}\nGROUP BY {group}{condition}", outputs


def ordered_by(outputs: list[Output], draw) -> str:
    """Every output, each ascending or descending: only equal rows tie."""
    return ", ".join(
        f"{o.sql}{draw(st.sampled_from(['', ' DESC', ' DESC NULLS LAST']))}"
        for o in outputs
        if o.kind != ARR
    )


def window_view(draw, query: Query, pool: list[Relation]) -> tuple[str, list[Output]]:
    """Columns and window functions partitioned by a key: ROW_NUMBER, RANK, DENSE_RANK, LAG,
    LEAD, a running SUM."""
    query.families.add("window")
    source, scope = from_clause(draw, query, pool, most=3)
    where = where_clause(draw, query, scope)
    partition = draw(st.sampled_from(refs(scope, KEYS)))
    outputs = [query.output(partition.sql, partition.column.name, partition.kind)] + projections(
        draw, query, scope, 3
    )
    over = f"PARTITION BY {partition.sql}"
    everything = ordered_by(outputs, draw)
    windows = []
    for _ in range(draw(st.integers(1, 3))):
        function = draw(
            st.sampled_from(["ROW_NUMBER", "RANK", "DENSE_RANK", "LAG", "LEAD", "running SUM"])
        )
        if function == "running SUM" and not refs(scope, NUMERIC):
            function = "RANK"
        # RANK and the running SUM order by an output: rows that tie show the same value
        by = draw(st.sampled_from(outputs)).sql
        if function == "ROW_NUMBER":
            windows.append(
                query.output(f"ROW_NUMBER() OVER ({over} ORDER BY {everything})", "rn", INT)
            )
        elif function in ("RANK", "DENSE_RANK"):
            windows.append(
                query.output(f"{function}() OVER ({over} ORDER BY {by})", function.lower(), INT)
            )
        elif function in ("LAG", "LEAD"):
            value = draw(st.sampled_from(outputs))  # an output: rows that tie show the same value
            default = (
                f", 1, {draw(st.sampled_from(KIND_LITERALS[value.kind]))}"
                if value.kind in KIND_LITERALS and draw(st.booleans())
                else ""
            )
            windows.append(
                query.output(
                    f"{function}({value.sql}{default}) OVER ({over} ORDER BY {everything})",
                    f"{function.lower()}_{value.name}",
                    value.kind,
                )
            )
        else:
            amount = draw(st.sampled_from(refs(scope, NUMERIC)))
            windows.append(
                query.output(
                    f"SUM({amount.sql}) OVER ({over} ORDER BY {by})",
                    f"running_{amount.column.name}",
                    amount.kind,
                )
            )
    outputs += windows
    return f"SELECT {select_list(outputs)}\n{source}{where}", outputs


def top_k_view(draw, query: Query, pool: list[Relation]) -> tuple[str, list[Output]]:
    """The first k rows per key (QUALIFY ROW_NUMBER / RANK ... <= k) or of all rows
    (ORDER BY every output LIMIT k)."""
    source, scope = from_clause(draw, query, pool, most=3)
    where = where_clause(draw, query, scope)
    outputs = projections(draw, query, scope)
    k = draw(st.integers(1, 4))
    if draw(st.booleans()):
        query.families.add("limit")
        return (
            f"SELECT {select_list(outputs)}\n{source}{where}\nORDER BY {ordered_by(outputs, draw)}\nLIMIT {k}",
            outputs,
        )
    query.families.add("top_k")
    partition = draw(st.sampled_from(refs(scope, KEYS)))
    rank = draw(st.sampled_from(["ROW_NUMBER", "ROW_NUMBER", "RANK", "DENSE_RANK"]))
    qualify = (
        f"{rank}() OVER (PARTITION BY {partition.sql} ORDER BY {ordered_by(outputs, draw)}) <= {k}"
    )
    return f"SELECT {select_list(outputs)}\n{source}{where}\nQUALIFY {qualify}", outputs


def set_operation_view(draw, query: Query, pool: list[Relation]) -> tuple[str, list[Output]]:
    """Two or three SELECTs of the same column kinds, combined by UNION [ALL], INTERSECT [ALL]
    or EXCEPT [ALL]."""
    query.families.add("set_operation")
    kinds = [draw(st.sampled_from(KEYS)) for _ in range(draw(st.integers(1, 2)))]
    sides = []
    for _ in range(draw(st.integers(2, 3))):
        relation = draw(
            st.sampled_from([r for r in pool if all(refs([("x", r)], (k,)) for k in kinds)])
        )
        alias = query.alias(relation)
        scope: Scope = [(alias, relation)]
        columns = [draw(st.sampled_from(refs(scope, (k,)))).sql for k in kinds]
        condition = f" WHERE {predicate(draw, query, scope)}" if draw(st.booleans()) else ""
        sides.append((columns, f"FROM {relation.name} {alias}{condition}"))
    outputs = [
        query.output(column, f"k{i + 1}", kind)
        for i, (column, kind) in enumerate(zip(sides[0][0], kinds))
    ]
    # the first side names the columns; a later side's are bare, a repeated one aliased (the
    # same column twice in a side of EXCEPT ALL breaks Spark's own RewriteExceptAll rule)
    first_columns, first_source = sides[0]
    texts = [
        f"SELECT {', '.join(f'{c} AS {o.name}' for c, o in zip(first_columns, outputs))} {first_source}"
    ]
    for columns, source in sides[1:]:
        items = [
            c if c not in columns[:i] else f"{c} AS {o.name}"
            for i, (c, o) in enumerate(zip(columns, outputs))
        ]
        texts.append(f"SELECT {', '.join(items)} {source}")
    operators = [
        draw(
            st.sampled_from(
                ["UNION ALL", "UNION", "INTERSECT", "INTERSECT ALL", "EXCEPT", "EXCEPT ALL"]
            )
        )
        for _ in texts[1:]
    ]
    text = texts[0] + "".join(f"\n{op}\n{t}" for op, t in zip(operators, texts[1:]))
    return text, outputs


SHAPES = (plain_view, grouped_view, window_view, top_k_view, set_operation_view)


@st.composite
def views(draw, name: str = "v01", earlier: tuple[GeneratedView, ...] = ()) -> GeneratedView:
    """One view named ``name``, reading the tables and, maybe, views of ``earlier``."""
    pool = list(TABLES)
    readable = [v.relation() for v in earlier if refs([("x", v.relation())], KEYS)]
    if readable and draw(st.integers(0, 2)) == 0:
        pool = [draw(st.sampled_from(readable))] + pool  # the view first: the likelier FROM
    query = Query()
    text, outputs = draw(st.sampled_from(SHAPES))(draw, query, pool)
    if query.reads:
        query.families.add("view_over_view")
    spec = ViewSpec(name, "\n" + text, reads=tuple(sorted(query.reads)))
    return GeneratedView(
        spec, tuple(Column(o.name, o.kind) for o in outputs), frozenset(query.families)
    )


@st.composite
def batches(draw, size: int) -> list[GeneratedView]:
    """``size`` slots, each a view (named ``v01``, ...) or empty; empty is the simplest
    choice, so shrinking drops the views a failure does not need."""
    made: list[GeneratedView] = []
    for slot in range(1, size + 1):
        if draw(st.integers(0, 5)):
            made.append(draw(views(f"v{slot:02d}", tuple(made))))
    return made
