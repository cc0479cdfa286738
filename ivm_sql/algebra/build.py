"""Qualified sqlglot AST -> algebra. Refuses, with file:line and a hint, what we cannot maintain."""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

from ivm_sql.algebra import (
    aggregate_filters,
    aggregates,
    constants,
    generators,
    grouping_sets,
    join_trees,
    recursive,
    setops,
    subqueries,
    windows,
)
from ivm_sql.algebra.clock import is_clock_read
from ivm_sql.algebra.joins import Inputs
from ivm_sql.algebra.nodes import Distinct, Node, Select, UnionAll
from ivm_sql.errors import SqlError, UnsupportedError
from ivm_sql.viewdefs import ViewDef

# Functions whose value is not a function of the row: a view using them has no single
# correct content to maintain.
NONDETERMINISTIC = (
    exp.Rand,
    exp.Randn,
    exp.Uuid,
    exp.CurrentTimestamp,
    exp.CurrentDate,
    exp.CurrentTime,
)
NONDETERMINISTIC_NAMES = {
    "rand",
    "random",
    "randn",
    "uuid",
    "shuffle",
    "now",
    "current_timestamp",
    "current_date",
    "monotonically_increasing_id",
    "spark_partition_id",
    "input_file_name",
    "localtimestamp",
}
GENERATORS = (exp.Explode, exp.Posexplode, exp.Inline)
COMPARISONS = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.Between)
FULL_RECOMPUTE = (
    "mark the view for full recompute: CREATE VIEW v TBLPROPERTIES ('ivm.refresh' = 'full') AS ..."
)
NOT_FIXED_HINT = f"a view must be a function of its sources: compute the value in the source table, or {FULL_RECOMPUTE}"
ROWS_NOT_FIXED_HINT = (
    "a view must be a function of its sources: write the rows as literals (VALUES, or range of numbers), "
    f"keep them in a table, or {FULL_RECOMPUTE}"
)


def is_nondeterministic(node: exp.Expression) -> bool:
    name = node.name.lower() if isinstance(node, exp.Anonymous) else ""
    return isinstance(node, NONDETERMINISTIC) or name in NONDETERMINISTIC_NAMES


def compares_with_current_time(query: exp.Expression) -> bool:
    """True if the query reads the current time, only ever in a comparison with a column
    (``WHERE created > current_timestamp() - INTERVAL 1 DAY``), and calls no other
    non-deterministic function. Such a view is a function of its sources and the time of
    the refresh (``algebra.clock``)."""
    found = False
    for node in query.walk():
        if is_clock_read(node):
            comparison = node.find_ancestor(*COMPARISONS)
            if comparison is None or comparison.find(exp.Column) is None:
                return False
            found = True
        elif is_nondeterministic(node):
            return False
    return found


class Builder:
    """Turns one view's qualified query into algebra.

    ``resolve`` gives the node that reads a table or another view (a Scan).
    """

    def __init__(
        self, view: ViewDef, resolve: Callable[[exp.Table], Node], clock_in_filters: bool = False
    ):
        self.view = view
        self.resolve = resolve
        self.clock_in_filters = clock_in_filters  # the current time allowed in WHERE and HAVING

    def unsupported(self, node: exp.Expression, what: str, hint: str) -> UnsupportedError:
        return UnsupportedError(
            f"{what} in view {self.view.name}", location=self.view.locate(node), hint=hint
        )

    def refuse_unfixed(self, expression: exp.Expression, what: str | None = None) -> None:
        """Refuse a read of the current time or another non-deterministic function in
        ``expression``, a part of the view that must be the same at every refresh (``what``)."""
        for node in expression.walk():
            if is_clock_read(node) or is_nondeterministic(node):
                call = node.sql("spark")
                if what is None:
                    raise self.unsupported(
                        node, f"non-deterministic function {call}", NOT_FIXED_HINT
                    )
                raise self.unsupported(node, f"{what} (it calls {call})", ROWS_NOT_FIXED_HINT)

    # queries -------------------------------------------------------------------------------

    def query(self, query: exp.Expression, ctes: dict[str, Node]) -> Node:
        constant = constants.whole(self, query, ctes)
        if constant is not None:
            return constant
        if isinstance(query, (exp.Select, exp.Union)) and query.args.get("limit"):
            unlimited = query.copy()
            for key in ("order", "limit", "offset"):
                unlimited.set(key, None)
            return windows.top_k(self, query, self.query(unlimited, ctes))
        if isinstance(query, exp.SetOperation) and query.args.get("limit"):
            raise self.unsupported(
                query.args["limit"],
                "LIMIT on INTERSECT or EXCEPT",
                "put the set operation in a subquery",
            )
        ctes = dict(ctes)
        with_ = query.args.get("with_") or query.args.get("with")
        if with_ is not None:
            for cte in with_.expressions:
                if with_.args.get("recursive") and recursive.reads_itself(cte):
                    ctes[cte.alias_or_name.lower()] = recursive.build(self, cte, ctes)
                else:
                    ctes[cte.alias_or_name.lower()] = self.query(cte.this, ctes)
        if isinstance(query, exp.Union):
            _check_known(self, query, UNION_CLAUSES)
            left = self.query(query.left, ctes)
            branches = (left, self.query(_named_like(query.right, left.columns), ctes))
            node: Node = UnionAll(branches, branches[0].columns)
            self._check_order_limit(query)
            return Distinct(node, node.columns) if query.args.get("distinct") else node
        if isinstance(query, (exp.Intersect, exp.Except)):
            _check_known(self, query, UNION_CLAUSES)
            self._check_order_limit(query)
            left = self.query(query.left, ctes)
            return setops.build(
                query, left, self.query(_named_like(query.right, left.columns), ctes)
            )
        if isinstance(query, exp.Subquery):
            return self.query(query.this, ctes)
        if not isinstance(query, exp.Select):
            raise self.unsupported(query, f"{query.key.upper()} as a query", "write a SELECT")
        return self.select(query, ctes)

    def _check_order_limit(self, query: exp.Expression) -> None:
        for key, what in (("order", "ORDER BY without LIMIT"), ("offset", "OFFSET without LIMIT")):
            if query.args.get(key):
                raise self.unsupported(
                    query.args[key],
                    what,
                    "a materialized view has no order: remove it and order when you query the view",
                )

    def select(self, select: exp.Select, ctes: dict[str, Node]) -> Node:
        self._check_select_clauses(select)
        select = aggregate_filters.lower(join_trees.as_subqueries(select))
        if windows.over_groups(select):
            if grouping_sets.used(select):
                raise self.unsupported(
                    select.args["group"],
                    "a window function over ROLLUP, CUBE or GROUPING SETS",
                    "compute the grouping sets in a subquery, and the window in the query over it",
                )
            return self.select(windows.grouped_first(self, select), ctes)
        having = select.args.get("having")
        if having is not None and having.find(exp.Subquery, exp.Exists):
            return self.select(subqueries.having_as_where(self, select), ctes)
        generator = generators.multi_column_generator(select)
        if generator is not None:
            return self.select(generators.as_lateral_view(self, select, generator), ctes)
        inputs = self.sources(select, ctes)
        if grouping_sets.used(select):
            select = grouping_sets.expand(self, select, inputs)
        select = self._over_inputs(select, inputs, ctes)
        sources, condition = tuple(inputs.sources), inputs.condition
        for expression in select.expressions:
            self._check_expression(expression, generators=True)
        for expression in [condition, select.args.get("having")]:
            if expression is not None:
                self._check_expression(expression, clock=self.clock_in_filters)
        group = select.args.get("group")
        calls = [a for e in select.expressions for a in aggregates.calls_in(e)]
        if (
            any(e.find(exp.Window) for e in select.expressions)
            or select.args.get("qualify") is not None
        ):
            node = windows.build(self, select, sources, condition)
        elif group is not None or calls or select.args.get("having"):
            node = aggregates.build(self, select, sources, condition, inputs.one_row)
        else:
            node = Select(
                sources,
                condition,
                self.output_names(select),
                tuple(_unalias(e) for e in select.expressions),
            )
        if select.args.get("distinct"):
            if select.args["distinct"].args.get("on"):
                raise self.unsupported(select, "DISTINCT ON", "use GROUP BY")
            node = Distinct(node, node.columns)
        return node

    def _check_select_clauses(self, select: exp.Select) -> None:
        self._check_order_limit(select)
        _check_known(self, select, SELECT_CLAUSES)
        for key, what, hint in (("windows", "WINDOW", "window functions are not maintained yet"),):
            clause = select.args.get(key)
            if clause:
                raise self.unsupported(
                    clause[0] if isinstance(clause, list) else clause, what, hint
                )

    def output_names(self, select: exp.Select) -> tuple[str, ...]:
        names = tuple(e.alias_or_name.lower() for e in select.expressions)
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise SqlError(
                f"column name {duplicates[0]} appears twice in a SELECT of view {self.view.name}",
                location=self.view.locate(select),
                hint="give each output column its own name with AS",
            )
        return names

    # FROM and joins ------------------------------------------------------------------------

    def sources(self, select: exp.Select, ctes: dict[str, Node]) -> Inputs:
        """FROM, joins and WHERE: inner joins and filters gathered into one multilinear
        Select; outer joins and subqueries in WHERE become keyed Recomputes."""
        from_ = select.args.get("from_") or select.args.get("from")
        if from_ is None:  # the one row of Spark's OneRowRelation
            inputs = Inputs([(constants.ONE_ROW, constants.one_row())])
        else:
            inputs = Inputs([(from_.this.alias_or_name.lower(), self.from_item(from_.this, ctes))])
        for join in select.args.get("joins") or []:
            _check_known(self, join, JOIN_PARTS)
            kind = " ".join(p for p in (join.side, join.kind) if p).upper()
            name, node, on = (
                join.this.alias_or_name.lower(),
                self.from_item(join.this, ctes),
                join.args.get("on"),
            )
            if kind in ("", "INNER", "CROSS"):
                inputs.sources.append((name, node))
                if on is not None:
                    inputs.conditions.append(inputs.rename(on))
            elif kind in OUTER_JOINS:
                side = kind.split()[0]
                inputs.join(f"{side} OUTER", name, node, on, f"{side} OUTER JOIN")
            elif kind in ("LEFT SEMI", "LEFT ANTI", "SEMI", "ANTI"):
                side = "LEFT ANTI" if "ANTI" in kind else "LEFT SEMI"
                inputs.join(side, name, node, on, f"{side} JOIN")
            else:
                raise self.unsupported(
                    join, f"{kind} JOIN", "use an inner, outer, semi or anti join"
                )
        if select.args.get("laterals"):
            for lateral in select.args["laterals"]:
                alias_ = lateral.args.get("alias")
                if alias_ is None or not alias_.columns:
                    raise self.unsupported(
                        lateral,
                        "LATERAL VIEW without names for the generated columns",
                        "name them: LATERAL VIEW explode(x) t AS item (posexplode: AS pos, item)",
                    )
            inputs.lateral(select.args["laterals"])
        where = select.args.get("where")
        subqueries.apply_where(self, inputs, where.this if where is not None else None, ctes)
        return inputs

    def _over_inputs(self, select: exp.Select, inputs: Inputs, ctes) -> exp.Select:
        """The SELECT's own clauses with scalar subqueries joined in and column references
        pointing at the inputs as built (outer and semi joins rename columns)."""
        result = select.copy()
        expressions = [subqueries.scalars(self, inputs, e.copy(), ctes) for e in result.expressions]
        result.set("expressions", [inputs.rename(e) for e in expressions])
        group = result.args.get("group")
        if group is not None:  # a GROUP BY expression repeats the SELECT list's subqueries
            group.set(
                "expressions",
                [subqueries.scalars(self, inputs, e, ctes) for e in group.expressions],
            )
        for key in ("group", "having", "qualify", "order"):
            if result.args.get(key) is not None:
                result.set(key, inputs.rename(result.args[key]))
        return result

    def from_item(self, item: exp.Expression, ctes: dict[str, Node]) -> Node:
        if isinstance(item, exp.Table):
            _check_known(self, item, TABLE_PARTS)
            for key, what in (
                ("version", "time travel (VERSION/TIMESTAMP AS OF)"),
                ("sample", "TABLESAMPLE"),
            ):
                if item.args.get(key):
                    raise self.unsupported(
                        item,
                        what,
                        "a view is kept equal to its sources' latest rows: read the table itself",
                    )
            if not isinstance(item.this, exp.Identifier):
                return constants.table_function(self, item)
            if not item.db and item.name.lower() in ctes:
                return ctes[item.name.lower()]
            return self.resolve(item)
        if isinstance(item, exp.Values):
            return constants.values(self, item)
        if isinstance(item, exp.Subquery):
            return self.query(item.this, ctes)
        raise self.unsupported(
            item, f"{item.key.upper()} in FROM", "select from tables, views or subqueries"
        )

    # expressions ---------------------------------------------------------------------------

    def _check_expression(
        self, expression: exp.Expression, generators: bool = False, clock: bool = False
    ) -> None:
        for node in expression.walk():
            if isinstance(node, (exp.Subquery, exp.Exists)) or (
                isinstance(node, exp.In) and node.args.get("query")
            ):
                raise self.unsupported(
                    node, "a subquery in an expression", "join with the subquery in FROM instead"
                )
            if isinstance(node, GENERATORS) and not (
                generators and (node is expression or node.parent is expression)
            ):
                raise self.unsupported(
                    node,
                    f"{node.key.upper()} inside an expression",
                    "generate rows with LATERAL VIEW and use its columns",
                )
            if not (clock and is_clock_read(node)) and is_nondeterministic(node):
                self.refuse_unfixed(node)


OUTER_JOINS = ("LEFT", "LEFT OUTER", "RIGHT", "RIGHT OUTER", "FULL", "FULL OUTER")
# The parts of each node the builder understands; anything else is refused, never ignored.
SELECT_CLAUSES = {
    "with_",
    "expressions",
    "hint",
    "distinct",
    "from_",
    "joins",
    "where",
    "group",
    "having",
    "qualify",
    "order",
    "limit",
    "laterals",
}
UNION_CLAUSES = {"with_", "this", "expression", "distinct", "order", "limit"}
TABLE_PARTS = {"this", "alias", "db", "catalog", "version", "sample"}
JOIN_PARTS = {"this", "on", "side", "kind"}


def _check_known(builder: Builder, node: exp.Expression, known: set[str]) -> None:
    for key, value in node.args.items():
        if key not in known and value not in (None, False, [], ""):
            raise builder.unsupported(
                node,
                f"{key.rstrip('_').upper()} in {node.key.upper()}",
                "remove it or ask for it in an issue",
            )


def _unalias(expression: exp.Expression) -> exp.Expression:
    return expression.this if isinstance(expression, exp.Alias) else expression


def _named_like(branch: exp.Expression, names: tuple[str, ...]) -> exp.Expression:
    """A later branch of a set operation whose own names repeat, its repeats renamed after
    the first branch's.

    Only the first branch names a set operation's columns, so Spark accepts ``SELECT id, avg_bal,
    'avg_bal'`` as a second branch though two of its columns are named avg_bal; renaming
    the repeats positionally changes nothing the operation outputs. A branch that is itself
    a set operation (in parentheses or not) is named by its own first branch."""
    if isinstance(branch, (exp.SetOperation, exp.Subquery)):
        renamed = branch.copy()
        renamed.set("this", _named_like(branch.this, names))
        return renamed
    if not isinstance(branch, exp.Select) or len(branch.expressions) != len(names):
        return branch
    own = [e.alias_or_name.lower() for e in branch.expressions]
    if len(set(own)) == len(own) or any(isinstance(e, exp.Star) for e in branch.expressions):
        return branch
    renamed = branch.copy()
    seen: set[str] = set()
    for i, expression in enumerate(renamed.expressions):
        if own[i] in seen:
            expression.replace(exp.alias_(expression.unalias().copy(), names[i], quoted=True))
        seen.add(own[i])
    return renamed
