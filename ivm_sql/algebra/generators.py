"""Generators with several columns in SELECT, rewritten as LATERAL VIEW.

``SELECT k, posexplode(arr) FROM t`` is ``SELECT k, g.pos, g.col FROM t LATERAL VIEW
posexplode(arr) g AS pos, col``: the same flat_map (linear, no state; DBSP's flat_map is a
linear operator), in the one form the builder keeps. Filtering before or after generating is
the same, since WHERE cannot see generated columns.
"""

from __future__ import annotations

from sqlglot import exp

from ivm_sql.sqlbuild import alias, col, ident

POSEXPLODE_NAMES = ("pos", "col")  # Spark's names when the query gives none
OUTER = (exp.PosexplodeOuter, exp._ExplodeOuter)


def multi_column_generator(select: exp.Select) -> exp.Expression | None:
    """The SELECT's expression that generates several columns, if any."""
    for expression in select.expressions:
        if isinstance(expression, exp.Aliases) and isinstance(
            expression.this, (exp.Explode, exp.Inline, exp._ExplodeOuter)
        ):
            return expression
        # unnamed: the qualifier gave it one alias (_col_1), which Spark would not accept
        if isinstance(expression.unalias(), (exp.Posexplode, exp.Inline)):
            return expression
    return None


def as_lateral_view(builder, select: exp.Select, generator: exp.Expression) -> exp.Select:
    """``select`` with ``generator`` moved into a LATERAL VIEW and its columns selected."""
    call = generator.unalias() if not isinstance(generator, exp.Aliases) else generator.this
    if isinstance(generator, exp.Aliases):
        names = tuple(i.name for i in generator.expressions)
    elif isinstance(call, exp.Posexplode):
        names = POSEXPLODE_NAMES
    else:
        raise builder.unsupported(
            generator,
            f"{call.key.upper()} in SELECT without names for its columns",
            "name them: inline(x) AS (a, b), or use LATERAL VIEW inline(x) t AS a, b",
        )
    if (
        select.args.get("group")
        or select.args.get("having")
        or any(select.find_all(exp.AggFunc, exp.Window))
    ):
        raise builder.unsupported(
            generator,
            "a generator in a SELECT with GROUP BY, aggregates or windows",
            "generate the rows in a subquery (or LATERAL VIEW) and aggregate over it",
        )
    plain = {exp.PosexplodeOuter: exp.Posexplode, exp._ExplodeOuter: exp.Explode}.get(
        type(call), type(call)
    )
    name = f"__g{len(select.args.get('laterals') or []) + 1}"
    lateral = exp.Lateral(
        this=plain(this=call.this.copy()),
        view=True,
        outer=isinstance(call, OUTER),
        alias=exp.TableAlias(this=ident(name), columns=[ident(n) for n in names]),
    )
    rewritten = select.copy()
    position = select.expressions.index(generator)
    expressions = list(rewritten.expressions)
    expressions[position : position + 1] = [alias(col(n, name), n) for n in names]
    rewritten.set("expressions", expressions)
    rewritten.append("laterals", lateral)
    return rewritten
