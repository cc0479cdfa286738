"""GROUP BY and aggregates -> algebra.

COUNT, SUM and AVG (invertible) and MIN and MAX (monotone under insertion): an Aggregate,
updated from the change alone. Any other deterministic aggregate (COUNT(DISTINCT),
percentiles, collect_set, max_by, stddev, ...): a Recompute keyed by the group, so only
touched groups are recomputed.
Either way: a Select computing keys and arguments below, and a Select computing the output
expressions and HAVING from keys and results above.
"""

from __future__ import annotations

from collections.abc import Iterator

from sqlglot import exp

from ivm_sql.algebra.nodes import AggCall, Aggregate, Node, Recompute, Select
from ivm_sql.errors import SqlError
from ivm_sql.sqlbuild import alias, col, ident

AGGREGATE_INPUT = "__agg"  # alias of the aggregate's output inside the projection above it
GROUP_INPUT = "__in"  # alias of the aggregate's input inside a recompute query

# Spark aggregates that sqlglot parses as plain functions.
UNKNOWN_AGGREGATES = {
    "try_sum",
    "try_avg",
    "every",
    "some",
    "any",
    "bool_and",
    "bool_or",
    "histogram_numeric",
    "count_min_sketch",
    "count_if",
    "max_by",
    "min_by",
    "mode",
    "percentile",
    "median",
    "collect_list",
    "collect_set",
    "array_agg",
    "listagg",
    "string_agg",
    "bit_and",
    "bit_or",
    "bit_xor",
    "hll_sketch_agg",
    "hll_union_agg",
    "regr_count",
    "regr_avgx",
    "regr_avgy",
    "regr_slope",
    "regr_intercept",
    "regr_r2",
    "regr_sxx",
    "regr_sxy",
    "regr_syy",
    "grouping",
    "grouping_id",
}
# Aggregates whose result depends on the order rows arrive in, which SQL leaves undefined.
ORDER_DEPENDENT = (exp.First, exp.Last, exp.AnyValue, exp.ArrayAgg)
ORDER_DEPENDENT_NAMES = {
    "first",
    "last",
    "first_value",
    "last_value",
    "any_value",
    "collect_list",
    "array_agg",
    "listagg",
    "string_agg",
}


def is_aggregate(node: exp.Expression) -> bool:
    """An aggregate call, with its FILTER clause if it has one (``aggregate_filters``)."""
    if isinstance(node, exp.Filter):
        return is_aggregate(node.this)
    return isinstance(node, exp.AggFunc) or (
        isinstance(node, exp.Anonymous) and node.name.lower() in UNKNOWN_AGGREGATES
    )


def calls_in(expression: exp.Expression) -> Iterator[exp.Expression]:
    """Aggregate calls in an expression, outermost only, not those inside window functions."""
    if isinstance(expression, exp.Window):
        return
    if is_aggregate(expression):
        yield expression
        return
    for child in expression.iter_expressions():
        yield from calls_in(child)


def invertible(node: exp.Expression) -> tuple[str, exp.Expression | None] | None:
    """(function, argument) for COUNT(*), COUNT(x), SUM(x), AVG(x); None for other aggregates."""
    if isinstance(node, exp.Count) and not node.expressions:
        if node.this is None or isinstance(node.this, exp.Star):
            return "count_star", None
        if not isinstance(node.this, exp.Distinct):
            return "count", node.this.copy()
    if isinstance(node, (exp.Sum, exp.Avg)) and not isinstance(node.this, exp.Distinct):
        return ("sum" if isinstance(node, exp.Sum) else "avg"), node.this.copy()
    return None


def kept(node: exp.Expression) -> tuple[str, exp.Expression | None] | None:
    """(function, argument) for the aggregates an Aggregate keeps: the invertible ones, and
    MIN(x) and MAX(x) (DISTINCT changes neither); None for any other."""
    if isinstance(node, (exp.Min, exp.Max)) and not node.expressions:
        argument = node.this.expressions[0] if isinstance(node.this, exp.Distinct) else node.this
        if isinstance(node.this, exp.Distinct) and len(node.this.expressions) != 1:
            return None
        return ("min" if isinstance(node, exp.Min) else "max"), argument.copy()
    return invertible(node)


def _order_dependent(call: exp.Expression) -> bool:
    if isinstance(call, exp.Filter):
        return _order_dependent(call.this)
    return isinstance(call, ORDER_DEPENDENT) or (
        isinstance(call, exp.Anonymous) and call.name.lower() in ORDER_DEPENDENT_NAMES
    )


def _sorted_away(call: exp.Expression) -> bool:
    """``sort_array(collect_list(x))`` (or ``array_sort``, without a comparator): the list's
    order is sorted away, so the result depends only on the group's rows, like collect_set's."""
    parent = call.parent
    is_list = isinstance(call, exp.ArrayAgg) or (
        isinstance(call, exp.Anonymous) and call.name.lower() in ("collect_list", "array_agg")
    )
    return (
        is_list
        and isinstance(parent, exp.ArraySort)
        and parent.this is call
        and parent.find(exp.Lambda) is None
    )


def build(builder, select: exp.Select, sources, condition, one_row: set[str] = frozenset()) -> Node:
    """The aggregate of ``select`` over ``sources``, and the projection above it.

    A column of a ``one_row`` input (a scalar subquery over a constant) outside every
    aggregate reads that input again above the aggregate: a join with a constant, whose
    change is zero (DBSP: the join's terms with the constant's Δ vanish)."""
    group = select.args.get("group")
    keys = list(group.expressions) if group is not None else []
    found: list[exp.Expression] = []
    for expression in [*select.expressions, select.args.get("having")]:
        if expression is not None:
            for call in calls_in(expression):
                if call not in found:
                    found.append(call)
    for call in found:
        if _order_dependent(call) and not _sorted_away(call):
            raise builder.unsupported(
                call,
                f"order-dependent aggregate {call.sql('spark')}",
                "its result depends on row order, which SQL leaves undefined: use MIN, MAX, max_by or collect_set",
            )
    key_names = tuple(f"g{i}" for i in range(len(keys)))
    names = tuple(f"agg{j}" for j in range(len(found)))
    if all(kept(call) is not None for call in found):
        stateful = _aggregate(sources, condition, keys, found)
    else:
        stateful = _recompute(sources, condition, keys, found)

    def rewrite(expression: exp.Expression) -> exp.Expression:
        def replace(node: exp.Expression) -> exp.Expression:
            for i, key in enumerate(keys):
                if node == key:
                    return col(key_names[i], AGGREGATE_INPUT)
            if node in found and not isinstance(node.parent, exp.Window):
                return col(names[found.index(node)], AGGREGATE_INPUT)
            return node

        result = expression.copy().transform(replace)
        require_grouped(builder, result, AGGREGATE_INPUT, one_row)
        return result

    exprs = tuple(rewrite(e.this if isinstance(e, exp.Alias) else e) for e in select.expressions)
    having = select.args.get("having")
    having = rewrite(having.this) if having is not None else None
    read = {c.table for e in (*exprs, having) if e is not None for c in e.find_all(exp.Column)}
    constants = tuple((name, node) for name, node in sources if name in one_row and name in read)
    return Select(
        ((AGGREGATE_INPUT, stateful), *constants),
        having,
        builder.output_names(select),
        exprs,
    )


def require_grouped(
    builder, expression: exp.Expression, grouped: str, one_row: set[str] = frozenset()
) -> None:
    """Refuse a column of ``expression`` (over the grouped rows) not read from ``grouped``
    (or from an input of one fixed row)."""
    for column in expression.find_all(exp.Column):
        if column.table != grouped and column.table not in one_row:
            raise SqlError(
                f"column {column.sql('spark')} is neither grouped nor aggregated in view {builder.view.name}",
                location=builder.view.locate(column),
                hint="add it to GROUP BY or wrap it in an aggregate",
            )


def _aggregate(
    sources, condition, keys: list[exp.Expression], found: list[exp.Expression]
) -> Aggregate:
    args: list[exp.Expression] = []
    calls = []
    for j, node in enumerate(found):
        func, arg = kept(node)
        arg_name = None
        if arg is not None:
            if arg not in args:
                args.append(arg)
            arg_name = f"a{args.index(arg)}"
        calls.append(AggCall(func, arg_name, f"agg{j}"))
    key_names = tuple(f"g{i}" for i in range(len(keys)))
    arg_names = tuple(f"a{i}" for i in range(len(args)))
    inner = Select(
        sources, condition, key_names + arg_names, tuple(k.copy() for k in keys) + tuple(args)
    )
    return Aggregate(inner, key_names, tuple(calls))


def _recompute(
    sources, condition, keys: list[exp.Expression], found: list[exp.Expression]
) -> Recompute:
    """SELECT keys, aggregates FROM input GROUP BY keys, recomputed for touched groups."""
    columns: list[exp.Column] = []
    for call in found:
        for column in call.find_all(exp.Column):
            if column not in columns:
                columns.append(column)
    key_names = tuple(f"g{i}" for i in range(len(keys)))
    column_names = tuple(f"c{n}" for n in range(len(columns)))
    inner = Select(
        sources,
        condition,
        key_names + column_names,
        tuple(k.copy() for k in keys) + tuple(c.copy() for c in columns),
    )

    def over_input(call: exp.Expression) -> exp.Expression:
        def swap(node: exp.Expression) -> exp.Expression:
            if isinstance(node, exp.Column) and node in columns:
                return col(column_names[columns.index(node)], GROUP_INPUT)
            return node

        return call.copy().transform(swap)

    outputs = [alias(col(k, GROUP_INPUT), k) for k in key_names]
    outputs += [alias(over_input(call), f"agg{j}") for j, call in enumerate(found)]
    outputs += [alias(col(k, GROUP_INPUT), f"__ivm_k{i}") for i, k in enumerate(key_names)]
    query = exp.select(*outputs).from_(
        exp.Table(this=ident(GROUP_INPUT), alias=exp.TableAlias(this=ident(GROUP_INPUT)))
    )
    if key_names:
        query = query.group_by(*(col(k, GROUP_INPUT) for k in key_names))
    names = ", ".join(sorted({_function_name(c) for c in found if kept(c) is None}))
    return Recompute(
        ((GROUP_INPUT, inner),),
        (key_names,),
        query,
        key_names + tuple(f"agg{j}" for j in range(len(found))),
        f"{names} per group",
    )


def _function_name(call: exp.Expression) -> str:
    name = call.sql("spark").split("(")[0].upper()
    return f"{name}(DISTINCT)" if isinstance(call.this, exp.Distinct) else name
