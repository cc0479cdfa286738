"""An aggregate's FILTER clause, as the aggregate of a CASE.

``AGG(x) FILTER (WHERE p)`` aggregates the rows where p is true. SUM, AVG, MIN, MAX and
COUNT skip NULL inputs, so it equals ``AGG(CASE WHEN p THEN x END)``, DISTINCT kept, and
``COUNT(*) FILTER (WHERE p)`` equals ``COUNT(CASE WHEN p THEN 1 END)``: a row where p is
false or NULL gives NULL, which they skip, and a group without such rows gets NULL (COUNT:
0), as FILTER gives. So these stay the aggregates ivm keeps from the change alone (DBSP,
Section 4.2). Any other aggregate keeps its FILTER and is recomputed per touched group,
where Spark evaluates the clause itself.
"""

from __future__ import annotations

from sqlglot import exp

from ivm_sql.sqlbuild import lit

SKIPS_NULLS = (exp.Sum, exp.Avg, exp.Min, exp.Max, exp.Count)


def lower(select: exp.Select) -> exp.Select:
    """``select`` (copied if changed) with each FILTER of a NULL-skipping aggregate moved
    into its argument."""
    if select.find(exp.Filter) is None:
        return select
    return select.transform(_lowered)


def _lowered(node: exp.Expression) -> exp.Expression:
    if (
        not (isinstance(node, exp.Filter) and isinstance(node.this, SKIPS_NULLS))
        or node.this.expressions
    ):
        return node
    call, condition = node.this.copy(), node.expression.this
    argument = call.this
    if isinstance(argument, exp.Distinct):
        if len(argument.expressions) != 1:
            return node
        argument.set("expressions", [_when(condition, argument.expressions[0])])
    else:
        call.set(
            "this",
            _when(
                condition,
                lit(1) if argument is None or isinstance(argument, exp.Star) else argument,
            ),
        )
    return call


def _when(condition: exp.Expression, value: exp.Expression) -> exp.Case:
    """``CASE WHEN condition THEN value END``: NULL where the condition is not true."""
    return exp.Case(ifs=[exp.If(this=condition.copy(), true=value.copy())])
