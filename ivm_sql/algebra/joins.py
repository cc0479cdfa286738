"""The FROM clause: inner joins stay one multilinear Select; outer and semi/anti joins become
a Recompute keyed by the join key.

An outer join's rows for a key depend only on both sides' rows with that key: a
null-extended row appears or retracts when the key's presence on the other side flips
(seeds/003), so recomputing the touched keys is exact and keeps only per-key work. Semi and
anti joins (EXISTS, IN, NOT EXISTS) are the same with the left side's columns only. A join
without a plain column equality has one global key: any change recomputes it.

When such a join is built, the inputs gathered so far are wrapped into one Select whose
columns are renamed ``<alias>__<column>``; ``renames`` maps the user's ``alias.column``
references onto the wrapped names so the rest of the query can be built unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlglot import exp

from ivm_sql.algebra.nodes import AggCall, Aggregate, Node, Recompute, Select
from ivm_sql.sqlbuild import alias, col, ident, lit

LEFT, RIGHT, FACTS = "__l", "__r", "__f"
IN_VALUE = "__ivm_in"


@dataclass
class Inputs:
    sources: list[tuple[str, Node]]
    conditions: list[exp.Expression] = field(default_factory=list)
    renames: dict[tuple[str, str], tuple[str, str]] = field(default_factory=dict)
    wrapped: int = 0
    # a scalar subquery's SQL -> the column of the input joined for it: the same subquery in
    # the SELECT list and in GROUP BY reads one input, so the two stay the same expression
    scalar_columns: dict[tuple[str, bool], exp.Expression] = field(default_factory=dict)
    # joined inputs of exactly one fixed row (a scalar subquery over a constant): like a
    # literal, their columns may appear outside an aggregate over the grouped rows
    one_row: set[str] = field(default_factory=set)

    @property
    def condition(self) -> exp.Expression | None:
        return exp.and_(*self.conditions) if self.conditions else None

    def rename(self, expression: exp.Expression) -> exp.Expression:
        """``expression`` with the user's column references pointing at the current inputs."""
        return _rename(expression, self.renames)

    def _wrap(self, side: str) -> tuple[Select, dict[tuple[str, str], str]]:
        """One Select over the current inputs, every column renamed ``<alias>__<column>``."""
        names = {(a, c): f"{a}__{c}" for a, node in self.sources for c in node.columns}
        select = Select(
            tuple(self.sources),
            self.condition,
            tuple(names.values()),
            tuple(col(c, a) for a, c in names),
        )
        user = {orig: names[target] for orig, target in self.renames.items() if target in names}
        user.update({key: name for key, name in names.items() if key not in self.renames})
        return select, user

    def lateral(self, laterals: list[exp.Lateral]) -> None:
        """LATERAL VIEW [OUTER] over the inputs so far (a linear flat_map: no state)."""
        select, user = self._wrap(LEFT)
        columns, exprs = list(select.columns), list(select.exprs)
        renamed = []
        for lateral in laterals:
            lateral = self.rename(lateral)
            name = lateral.alias.lower()
            for identifier in lateral.args["alias"].columns:
                user[(name, identifier.name.lower())] = f"{name}__{identifier.name.lower()}"
                columns.append(user[(name, identifier.name.lower())])
                exprs.append(col(identifier.name, name))
            renamed.append(lateral)
        self.wrapped += 1
        wrapped = f"__v{self.wrapped}"
        node = Select(
            select.sources, select.condition, tuple(columns), tuple(exprs), tuple(renamed)
        )
        self.renames = {k: (wrapped, v) for k, v in user.items()}
        self.sources, self.conditions = [(wrapped, node)], []

    def join(
        self, kind: str, right_alias: str, right: Node, on: exp.Expression | None, reason: str
    ) -> None:
        """Replace the inputs by ``inputs <kind> JOIN right ON on``, a Recompute per join key.

        ``kind`` is LEFT, RIGHT or FULL (outer: both sides' columns) or LEFT SEMI / LEFT ANTI
        (the left side's columns only). ``on`` refers to the user's aliases.
        """
        left, left_names = self._wrap(LEFT)
        right_select, right_names = _rename_columns(right_alias, right)
        local = {
            **{k: (LEFT, v) for k, v in left_names.items()},
            **{k: (RIGHT, v) for k, v in right_names.items()},
        }
        condition = _rename(on, local) if on is not None else exp.true()
        left_keys, right_keys = _equi_keys(condition)
        outer = "SEMI" not in kind and "ANTI" not in kind
        columns = left.columns + (right_select.columns if outer else ())
        outputs = [col(c, LEFT) for c in left.columns] + (
            [col(c, RIGHT) for c in right_select.columns] if outer else []
        )
        for i, (lk, rk) in enumerate(zip(left_keys, right_keys)):
            key = (
                exp.Coalesce(this=col(lk, LEFT), expressions=[col(rk, RIGHT)])
                if outer
                else col(lk, LEFT)
            )
            outputs.append(alias(key, f"__ivm_k{i}"))
        query = (
            exp.select(*outputs)
            .from_(_named(LEFT))
            .join(_named(RIGHT), on=condition, join_type=kind)
        )
        node = Recompute(
            ((LEFT, left), (RIGHT, right_select)), (left_keys, right_keys), query, columns, reason
        )
        self._replace(node, left_names, right_names if outer else {})

    def not_in(self, value: exp.Expression, right_alias: str, right: Node) -> None:
        """``value NOT IN (SELECT c FROM right)``: SQL's null-aware anti-join, per value.

        A row is kept when its value matches no row of the subquery, unless the subquery
        holds a NULL (then no row is kept) or a NULL value meets a non-empty subquery; an
        empty subquery keeps every row. Those two facts about the whole subquery come from
        its global COUNT(*) and COUNT(c), maintained incrementally and read as two booleans:
        an input without a key, whose change is empty unless a fact flips (then every value
        is recomputed). Any other change recomputes only the values it touches.
        """
        left, left_names = self._wrap(LEFT)
        left_columns = left.columns
        key = _rename(value, {k: (LEFT, v) for k, v in left_names.items()})
        if not (
            isinstance(key, exp.Column) and key.table == LEFT
        ):  # an expression: one more column of the left input
            left = Select(
                left.sources,
                left.condition,
                left.columns + (IN_VALUE,),
                left.exprs + (self.rename(value),),
            )
            key = col(IN_VALUE, LEFT)
        right_select, _ = _rename_columns(right_alias, right)
        listed = right_select.columns[0]
        counts = Aggregate(
            right_select, (), (AggCall("count_star", None, "n"), AggCall("count", listed, "listed"))
        )
        facts = Select(
            (("c", counts),),
            None,
            ("empty", "holds_null"),
            (
                exp.EQ(this=col("n", "c"), expression=lit(0)),
                exp.GT(this=col("n", "c"), expression=col("listed", "c")),
            ),
        )
        kept = exp.or_(
            col("empty", FACTS),
            exp.and_(
                exp.not_(exp.Is(this=key.copy(), expression=exp.Null())),
                exp.not_(col("holds_null", FACTS)),
            ),
        )
        query = (
            exp.select(*(col(c, LEFT) for c in left_columns), alias(key.copy(), "__ivm_k0"))
            .from_(_named(LEFT))
            .join(_named(FACTS), join_type="CROSS")
            .join(
                _named(RIGHT),
                on=exp.EQ(this=key.copy(), expression=col(listed, RIGHT)),
                join_type="LEFT ANTI",
            )
            .where(kept)
        )
        node = Recompute(
            ((LEFT, left), (RIGHT, right_select), (FACTS, facts)),
            ((key.name,), (listed,), ()),
            query,
            left_columns,
            "NOT IN subquery per value (all values when the subquery empties, fills, or gains or loses a NULL)",
        )
        self._replace(node, left_names, {})

    def _replace(self, node: Recompute, *names: dict[tuple[str, str], str]) -> None:
        """The inputs become ``node``; the user's columns are read from it by ``names``."""
        self.wrapped += 1
        name = f"__j{self.wrapped}"
        self.renames = {k: (name, v) for mapping in names for k, v in mapping.items()}
        self.sources, self.conditions = [(name, node)], []


def _rename_columns(alias_: str, node: Node) -> tuple[Select, dict[tuple[str, str], str]]:
    """``node`` with every column renamed ``<alias>__<column>``, and the renaming."""
    names = {(alias_, c): f"{alias_}__{c}" for c in node.columns}
    return Select(
        ((alias_, node),), None, tuple(names.values()), tuple(col(c, alias_) for c in node.columns)
    ), names


def _named(name: str) -> exp.Table:
    return exp.Table(this=ident(name), alias=exp.TableAlias(this=ident(name)))


def _rename(
    expression: exp.Expression, mapping: dict[tuple[str, str], tuple[str, str]]
) -> exp.Expression:
    def swap(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Column):
            target = mapping.get((node.table.lower(), node.name.lower()))
            if target is not None:
                return col(target[1], target[0])
        return node

    return expression.copy().transform(swap)


def _equi_keys(condition: exp.Expression) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Column pairs ``__l.a = __r.b`` among the condition's conjuncts: the join key."""
    conjuncts = condition.flatten() if isinstance(condition, exp.And) else [condition]
    left, right = [], []
    for conjunct in conjuncts:
        if (
            isinstance(conjunct, exp.EQ)
            and isinstance(conjunct.this, exp.Column)
            and isinstance(conjunct.expression, exp.Column)
        ):
            sides = {
                conjunct.this.table: conjunct.this.name,
                conjunct.expression.table: conjunct.expression.name,
            }
            if set(sides) == {LEFT, RIGHT}:
                left.append(sides[LEFT])
                right.append(sides[RIGHT])
    return tuple(left), tuple(right)
