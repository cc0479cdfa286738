"""Relations fixed by a view's SQL, built as ``Constant`` nodes.

``VALUES (1, 'a'), (2, 'b') AS t(k, v)``, a table function of literals (``range(1, 6) AS
t(s)``, ``explode(array(1, 2))``), the one row a SELECT without FROM reads, and any query
that reads no table (a CTE of parameters, a scalar subquery over one) are constants: Spark
evaluates their SQL, the same rows at every version, and their change is zero
(``incremental.constant``; DBSP: D of a constant stream is 0). A table function whose rows
are not fixed (it reads the current time, rand(), uuid(), or a column) is refused.
"""

from __future__ import annotations

from sqlglot import exp

from ivm_sql.algebra.nodes import Constant, Node
from ivm_sql.sqlbuild import alias, ident, lit, subquery

# Table functions whose rows depend only on their arguments, and the names Spark gives
# their columns (None: the view must name them, ``AS t(a, b)``).
TABLE_FUNCTIONS: dict[str, tuple[str, ...] | None] = {
    "range": ("id",),
    "explode": ("col",),
    "explode_outer": ("col",),
    "posexplode": ("pos", "col"),
    "posexplode_outer": ("pos", "col"),
    "inline": None,
    "inline_outer": None,
    "stack": None,
}
GENERATORS = ("explode", "explode_outer", "posexplode", "posexplode_outer")  # of a map: key, value
MAPS = (exp.Map, exp.VarMap, exp.StrToMap)
ONE_ROW = "__ivm_one"  # the column of the row a SELECT without FROM reads
NAMED = "__ivm_c"  # alias that names a constant query's columns


def function_name(table: exp.Table) -> str:
    """The name of the table function ``table`` calls."""
    call = table.this
    return (call.name if isinstance(call, exp.Anonymous) else call.sql_name()).lower()


def default_names(table: exp.Table) -> tuple[str, ...] | None:
    """The columns Spark names for a table function called without a column list."""
    name = function_name(table)
    argument = table.this.this if name in GENERATORS else None
    if isinstance(argument, MAPS):
        return None
    return TABLE_FUNCTIONS.get(name)


def name_columns(query: exp.Query) -> exp.Query:
    """``query`` with every call of a known table function given its column list (Spark's
    own names), so qualifying the query can expand ``*`` over it."""
    for table in list(query.find_all(exp.Table)):
        if isinstance(table.this, exp.Identifier) or not isinstance(table.this, exp.Func):
            continue
        given = table.args.get("alias")
        names = default_names(table)
        if names is None or (given is not None and given.columns):
            continue
        table.set(
            "alias",
            exp.TableAlias(
                this=given.this.copy()
                if given is not None and given.this
                else ident(function_name(table)),
                columns=[ident(n) for n in names],
            ),
        )
    return query


def one_row() -> Constant:
    """The one row, without columns of its own, that a SELECT without FROM reads."""
    return Constant(exp.select(alias(lit(1), ONE_ROW)), (ONE_ROW,))


def values(builder, item: exp.Values) -> Constant:
    """``VALUES (...), (...) AS t(a, b)``: its rows; unnamed columns are Spark's col1, col2, ..."""
    width = (
        len(item.expressions[0].expressions) if isinstance(item.expressions[0], exp.Tuple) else 1
    )
    builder.refuse_unfixed(item)
    return _rows(item, _given_names(item) or [f"col{i + 1}" for i in range(width)])


def table_function(builder, table: exp.Table) -> Constant:
    """A table function of literals in FROM: its rows, fixed when the view is compiled."""
    call = _check_fixed(builder, table)
    names = _given_names(table) or default_names(table)
    if names is None:
        raise builder.unsupported(
            table,
            f"table function {call} without names for its columns",
            f"name them: {call} AS t(a, b)",
        )
    return _rows(table, names)


def _check_fixed(builder, table: exp.Table) -> str:
    """Refuse a table function unless its rows are fixed: a known one, of literals only.
    Returns the call as the user reads it."""
    name = function_name(table)
    call = f"{name}({', '.join(a.sql('spark') for a in table.this.iter_expressions())})"
    if name not in TABLE_FUNCTIONS:
        raise builder.unsupported(
            table,
            f"table function {call} in FROM",
            f"ivm keeps table functions of literals ({', '.join(TABLE_FUNCTIONS)}): select from a table, a view or VALUES",
        )
    column = table.this.find(exp.Column)
    if column is not None:
        raise builder.unsupported(
            table,
            f"table function {call} reading column {column.sql('spark')}",
            "generate rows from a column with LATERAL VIEW: FROM t LATERAL VIEW explode(t.x) g AS item",
        )
    builder.refuse_unfixed(table.this, f"table function {call}, whose rows are not fixed")
    return call


def _given_names(item: exp.Expression) -> list[str] | None:
    """The column names the query gives a FROM item (``AS t(a, b)``), if any."""
    given = item.args.get("alias")
    return [c.name for c in given.columns] if given is not None and given.columns else None


def _rows(item: exp.Expression, names) -> Constant:
    """``SELECT * FROM item``, its columns named ``names``: a constant."""
    named = item.copy()
    named.set(
        "alias",
        exp.TableAlias(this=ident(item.alias_or_name or NAMED), columns=[ident(n) for n in names]),
    )
    return Constant(exp.select(exp.Star()).from_(named), tuple(n.lower() for n in names))


def whole(builder, query: exp.Expression, ctes: dict[str, Node]) -> Constant | None:
    """``query`` as a constant when it reads no table and no column of an outer query (the
    constant CTEs it reads written into it); None otherwise."""
    if not isinstance(query, exp.Query) or isinstance(query, exp.Values):
        return None
    own = {c.alias_or_name.lower() for c in query.find_all(exp.CTE)}
    defined = own | {t.alias_or_name.lower() for t in query.find_all(exp.Table)}
    defined |= {a.name.lower() for a in query.find_all(exp.TableAlias)}
    if any(c.table and c.table.lower() not in defined for c in query.find_all(exp.Column)):
        return None  # correlated with an outer query
    names = [n.lower() for n in query.named_selects]
    if not names or any(n in ("", "*") for n in names):
        return None
    bound = query.copy()
    for table in list(bound.find_all(exp.Table)):
        name = table.name.lower()
        if not isinstance(table.this, exp.Identifier):
            continue
        if name in own and not table.db:
            continue
        read = ctes.get(name) if not table.db else None
        if not isinstance(read, Constant):
            return None  # reads a table, or a CTE that does
        table.replace(subquery(read.query.copy(), table.alias_or_name))
    for table in bound.find_all(exp.Table):
        if not isinstance(table.this, exp.Identifier):
            _check_fixed(builder, table)
    builder.refuse_unfixed(bound)
    renamed = exp.TableAlias(this=ident(NAMED), columns=[ident(n) for n in names])
    return Constant(
        exp.select(exp.Star()).from_(exp.Subquery(this=bound, alias=renamed)), tuple(names)
    )


def scalar(constant: Constant) -> Constant:
    """A scalar subquery over a constant: exactly one row, holding what Spark's scalar
    subquery returns (NULL for no row, an error for several)."""
    return Constant(
        exp.select(alias(exp.Subquery(this=constant.query.copy()), constant.columns[0])),
        constant.columns[:1],
    )
