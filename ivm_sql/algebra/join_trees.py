"""Parenthesized join trees in FROM, as derived tables.

In ``FROM (r LEFT JOIN (s CROSS JOIN (t FULL JOIN u ON t.j = u.j)) ON r.i = s.i)`` the
parentheses group joins, and the query still reads each table by its own alias. Each group
becomes ``(SELECT r.i AS r__i, ... FROM r LEFT JOIN (...) ON ...) AS __p1``, and the query's
references to ``r.i`` read ``__p1.r__i``: the same rows through a projection (linear), the
grouping kept. The groups inside it are rewritten in turn when that derived table is built.
"""

from __future__ import annotations

from sqlglot import exp

from ivm_sql.sqlbuild import alias, col, lit, subquery

ONE = "__ivm_one"  # the column of a group none of whose columns the query reads


def is_join_tree(item: exp.Expression) -> bool:
    """A FROM item in parentheses that is not a query: ``(a JOIN b ON ...)``."""
    return (
        isinstance(item, exp.Subquery) and not item.alias and not isinstance(item.this, exp.Query)
    )


def as_subqueries(select: exp.Select) -> exp.Select:
    """``select`` (copied if changed) with each join tree of its FROM and joins a derived table."""
    if not any(is_join_tree(item) for item in _items(select)):
        return select
    result = select.copy()
    for number, tree in enumerate([item for item in _items(result) if is_join_tree(item)], 1):
        name, inside = f"__p{number}", _aliases(tree)
        read: dict[tuple[str, str], str] = {}
        for column in list(result.walk(prune=lambda node: node is tree)):
            if (
                isinstance(column, exp.Column)
                and column.table.lower() in inside
                and not _shadowed(column, result)
            ):
                key = (column.table, column.name)
                read.setdefault(key, f"{column.table}__{column.name}")
                column.replace(col(read[key], name))
        base = tree.this.copy()
        base.set("joins", None)
        outputs = [alias(col(c, a), n) for (a, c), n in read.items()] or [alias(lit(1), ONE)]
        grouped = exp.select(*outputs).from_(base)
        grouped.set("joins", [join.copy() for join in tree.this.args.get("joins") or []])
        tree.replace(subquery(grouped, name))
    return result


def _items(select: exp.Select) -> list[exp.Expression]:
    from_ = select.args.get("from_")
    return ([from_.this] if from_ is not None else []) + [
        join.this for join in select.args.get("joins") or []
    ]


def _aliases(tree: exp.Subquery) -> set[str]:
    """The aliases a join tree makes visible to the query around it (its groups' too)."""
    items = [tree.this, *(join.this for join in tree.this.args.get("joins") or [])]
    return {
        a
        for item in items
        for a in (_aliases(item) if is_join_tree(item) else {item.alias_or_name.lower()})
    }


def _shadowed(column: exp.Column, select: exp.Select) -> bool:
    """Whether a subquery between ``column`` and ``select`` names one of its inputs like the
    column's qualifier (the column reads that input, not the tree)."""
    scope = column.find_ancestor(exp.Select)
    while scope is not None and scope is not select:
        if column.table.lower() in {item.alias_or_name.lower() for item in _items(scope)}:
            return True
        scope = scope.find_ancestor(exp.Select)
    return False
