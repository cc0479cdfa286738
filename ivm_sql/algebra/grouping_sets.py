"""GROUP BY ROLLUP, CUBE and GROUPING SETS -> an Expand, then one ordinary GROUP BY.

Spark's own plan: every input row is repeated once per grouping set, with the grouping
expressions outside that set replaced by NULL and the set's position beside them; one
GROUP BY over (grouping expressions, position) then computes every set's groups at once.

Expand is a flat_map, the sum of one projection per grouping set (Expand(R) = Σ_s π_s(R),
a UNION ALL of projections), so it is linear: Expand^Δ = Expand (DBSP, Theorem 3.3 and
Prop. 3.4). It is kept as ``LATERAL VIEW stack(...)``, with no state, and the GROUP BY above
it is the ordinary one: COUNT/SUM/AVG updated per group from the change alone, other
aggregates recomputed for the touched groups (a changed row touches one group per set).

Spark's semantics, kept exactly (each case checked against Spark 4.2):
- the grand total () is a group keyed by its position, not a global aggregate: over no
  rows it has no row; only ``GROUPING SETS (())`` alone, with no grouping expression at
  all, is Spark's global aggregate (one row even over no rows), and is built as one;
- a NULL in a grouping column and the NULL of a set that does not group it are told apart
  by the position (and by grouping());
- a grouping set listed twice, even as ``ROLLUP(a, a)`` or ``a, ROLLUP(a)``, gives its rows
  once per listing;
- aggregates read the rows' own values, never the NULLs of a set;
- ``grouping(x)`` and ``grouping_id(...)`` are constants of each set: computed here with
  Spark's types (TINYINT, BIGINT) and carried as grouping columns of the set.
"""

from __future__ import annotations

from itertools import product

from sqlglot import exp

from ivm_sql.algebra import aggregates
from ivm_sql.algebra.joins import Inputs
from ivm_sql.errors import SqlError
from ivm_sql.sqlbuild import col, ident, lit

SETS = "__sets"  # alias of the Expand's LATERAL VIEW
POSITION = "set"  # its column numbering the grouping sets
ANALYTICS = (exp.Rollup, exp.Cube, exp.GroupingSets)
FUNCTIONS = (exp.Grouping, exp.GroupingId)
HIVE_FORMS = (
    "rollup",
    "cube",
    "grouping_sets",
)  # GROUP BY a, b WITH ROLLUP | WITH CUBE | GROUPING SETS (...)


def used(select: exp.Select) -> bool:
    group = select.args.get("group")
    return group is not None and (
        any(isinstance(e, ANALYTICS) for e in group.expressions)
        or any(group.args.get(k) for k in HIVE_FORMS)
    )


def grouping_sets(select: exp.Select) -> tuple[list[exp.Expression], list[list[exp.Expression]]]:
    """Spark's grouping expressions (the order grouping_id's bits follow) and its grouping
    sets, in order, duplicates kept.

    ``GROUP BY a, ROLLUP(b, c)`` is the cartesian product of its items' sets:
    (a, b, c), (a, b), (a). The grouping expressions are the items' own, in order, each once;
    in the Hive form ``GROUP BY a, b GROUPING SETS ((a), ())``, the list's first. A number
    is an ordinal: the SELECT's expression at that position.
    """
    group = select.args["group"]
    ordinals = [e.unalias() for e in select.expressions]
    items = [_resolve(item, ordinals) for item in group.expressions]
    if group.args.get("grouping_sets"):
        (sets_node,) = group.args["grouping_sets"]
        sets = _sets(sets_node, ordinals)
        return _distinct([*items, *(e for s in sets for e in s)]), sets
    for key, kind in (("rollup", exp.Rollup), ("cube", exp.Cube)):
        if group.args.get(key):
            items = [kind(expressions=items)]
    per_item = [
        _sets(item, ordinals) if isinstance(item, ANALYTICS) else [[item]] for item in items
    ]
    sets = [[e for part in combination for e in part] for combination in product(*per_item)]
    return _distinct(e for item_sets in per_item for s in item_sets for e in s), sets


def _sets(node: exp.Expression, ordinals: list[exp.Expression]) -> list[list[exp.Expression]]:
    """The grouping sets one ROLLUP, CUBE or GROUPING SETS item stands for."""
    elements = [_element(e, ordinals) for e in node.expressions]
    if isinstance(node, exp.Rollup):  # (e1, ..., en), ..., (e1), ()
        return [
            [e for element in elements[:n] for e in element] for n in range(len(elements), -1, -1)
        ]
    if isinstance(node, exp.Cube):  # every subset, e1's first: Spark's order
        sets: list[list[exp.Expression]] = [[]]
        for element in reversed(elements):
            sets = [element + s for s in sets] + sets
        return sets
    return [
        s
        for e in node.expressions
        for s in (_sets(e, ordinals) if isinstance(e, ANALYTICS) else [_element(e, ordinals)])
    ]


def _element(node: exp.Expression, ordinals: list[exp.Expression]) -> list[exp.Expression]:
    """``(a, b)`` -> [a, b]; ``(a)`` and ``a`` -> [a]; ``()`` -> []."""
    return [
        _resolve(e, ordinals) for e in (node.expressions if isinstance(node, exp.Tuple) else [node])
    ]


def _resolve(node: exp.Expression, ordinals: list[exp.Expression]) -> exp.Expression:
    """``(a)`` -> a; ``2`` -> the SELECT's second expression; anything else as it is."""
    node = node.unnest()
    if isinstance(node, exp.Literal) and node.is_int and 1 <= int(node.name) <= len(ordinals):
        return ordinals[int(node.name) - 1]
    return node


def _distinct(expressions) -> list[exp.Expression]:
    result: list[exp.Expression] = []
    for expression in expressions:
        if expression not in result:
            result.append(expression)
    return result


def expand(builder, select: exp.Select, inputs: Inputs) -> exp.Select:
    """Add the Expand to ``inputs`` (a LATERAL VIEW after the joins and WHERE), and return
    ``select`` grouped by its columns: each grouping expression (NULL where its set does
    not group it), the set's position, and the value of each grouping()/grouping_id() call.
    Outside aggregate calls, the SELECT and HAVING read these columns.
    ``GROUPING SETS (())`` alone becomes a global aggregate, without Expand."""
    columns, sets = grouping_sets(select)
    for column in columns:
        if not any(column in s for s in sets):
            raise builder.unsupported(
                column,
                "a GROUP BY column that no grouping set groups",
                "it is NULL in every row: leave it out of the list before GROUPING SETS",
            )
    calls = _distinct(
        node
        for e in [*select.expressions, select.args.get("having")]
        if e is not None
        for node in e.find_all(*FUNCTIONS)
    )
    result = select.copy()
    if not columns and len(sets) == 1:
        replacements = [(call, _value(builder, call, columns, [])) for call in calls]
        result.set("group", None)
    else:
        names = (
            [f"g{i}" for i in range(len(columns))]
            + [POSITION]
            + [f"grouping{j}" for j in range(len(calls))]
        )
        rows = []
        for position, grouped in enumerate(sets):
            rows += [e.copy() if e in grouped else exp.Null() for e in columns]
            rows.append(lit(position))
            rows += [_value(builder, call, columns, grouped) for call in calls]
        inputs.lateral(
            [
                exp.Lateral(
                    this=exp.Stack(this=lit(len(sets)), expressions=rows),
                    view=True,
                    alias=exp.TableAlias(this=ident(SETS), columns=[ident(n) for n in names]),
                )
            ]
        )
        replacements = [(e, col(f"g{i}", SETS)) for i, e in enumerate(columns)]
        replacements += [(call, col(f"grouping{j}", SETS)) for j, call in enumerate(calls)]
        result.set("group", exp.Group(expressions=[col(n, SETS) for n in names]))
    result.set("expressions", [_over_sets(e, replacements) for e in select.expressions])
    if select.args.get("having") is not None:
        result.set("having", _over_sets(select.args["having"], replacements))
    return result


def _value(
    builder, call: exp.Expression, columns: list[exp.Expression], grouped: list[exp.Expression]
) -> exp.Cast:
    """``grouping(x)`` (TINYINT) or ``grouping_id(x1, ..., xn)`` (BIGINT) for one grouping
    set: bit i (from the left) is 1 when xi is not grouped in it. ``grouping_id()`` reads
    all the grouping expressions."""
    arguments = call.expressions or columns
    for argument in arguments:
        if argument not in columns:
            raise SqlError(
                f"{call.sql('spark')} reads {argument.sql('spark')}, which is not grouped, in view {builder.view.name}",
                location=builder.view.locate(argument),
                hint="grouping() and grouping_id() take the expressions of ROLLUP, CUBE or GROUPING SETS",
            )
    value = sum(1 << (len(arguments) - 1 - i) for i, a in enumerate(arguments) if a not in grouped)
    return exp.Cast(
        this=lit(value),
        to=exp.DataType.build("tinyint" if isinstance(call, exp.Grouping) else "bigint"),
    )


def _over_sets(
    expression: exp.Expression, replacements: list[tuple[exp.Expression, exp.Expression]]
) -> exp.Expression:
    """``expression`` reading the Expand's columns (or constants), except inside aggregate calls."""
    result = expression.copy()
    kept = {
        id(node)
        for call in aggregates.calls_in(result)
        if not isinstance(call, FUNCTIONS)
        for node in call.walk()
    }

    def swap(node: exp.Expression) -> exp.Expression:
        if id(node) in kept:
            return node
        return next((column.copy() for original, column in replacements if node == original), node)

    return result.transform(swap, copy=False)
