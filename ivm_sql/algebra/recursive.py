"""``WITH RECURSIVE``: a CTE whose last UNION ALL branch reads the CTE itself.

Spark 4.2 runs a recursive CTE as ``anchor UNION ALL step`` and nothing else (UNION is
refused): R_0 = anchor, R_(k+1) = step(R_k), R = R_0 + R_1 + ..., every derivation kept.
That is the least fixed point of R = anchor + step(R) over Z-sets when step is linear in R,
which is what ivm maintains (``incremental.fixpoint``). So the step must read R once and
only through linear operators: no GROUP BY, DISTINCT, window, outer join or subquery over R.
"""

from __future__ import annotations

from sqlglot import exp

from ivm_sql.algebra.nodes import (
    Aggregate,
    Distinct,
    Node,
    Recompute,
    Recursive,
    Scan,
    Select,
    TopK,
    placeholder,
    scans,
)
from ivm_sql.sqlbuild import WEIGHT, col

STATEFUL = (Distinct, Aggregate, Recompute, TopK, Recursive)
UNION_ALL_ONLY = "Spark runs WITH RECURSIVE as anchor UNION ALL recursive term: write UNION ALL, and DISTINCT in the query over the CTE"


def reads_itself(cte: exp.CTE) -> bool:
    name = cte.alias_or_name.lower()
    return any(not t.db and t.name.lower() == name for t in cte.this.find_all(exp.Table))


def build(builder, cte: exp.CTE, ctes: dict[str, Node]) -> Recursive:
    """The Recursive node of a CTE that reads itself (``builder`` builds its branches)."""
    name, body = cte.alias_or_name.lower(), cte.this
    if not isinstance(body, exp.Union) or isinstance(body.right, exp.Union):
        raise builder.unsupported(
            body, "a recursive CTE that is not anchor UNION ALL recursive term", UNION_ALL_ONLY
        )
    if body.args.get("distinct"):
        raise builder.unsupported(body, "UNION in WITH RECURSIVE", UNION_ALL_ONLY)
    anchor = body.left
    if any(not t.db and t.name.lower() == name for t in anchor.find_all(exp.Table)):
        raise builder.unsupported(
            anchor,
            f"the anchor of recursive CTE {name} reading {name}",
            "only the last UNION ALL branch may read the CTE itself",
        )
    anchor_node = builder.query(anchor, ctes)
    names = tuple(c.name.lower() for c in cte.args["alias"].columns) or anchor_node.columns
    if len(names) != len(anchor_node.columns):
        raise builder.unsupported(
            cte,
            f"recursive CTE {name} naming {len(names)} columns of {len(anchor_node.columns)}",
            "name as many columns as the anchor returns",
        )
    reader = Scan(placeholder(name), names, weight=col(WEIGHT))
    step = builder.query(body.right, {**ctes, name: reader})
    if len(step.columns) != len(names):
        raise builder.unsupported(
            body.right,
            f"a recursive term returning {len(step.columns)} columns for {len(names)}",
            "return the CTE's columns, in order",
        )
    reads = [s for s in scans(step) if s.table == reader.table]
    if len(reads) != 1:
        raise builder.unsupported(
            body.right,
            f"a recursive term reading {name} {len(reads)} times",
            "read the CTE exactly once in the recursive term (Spark's rule too)",
        )
    if _under_stateful(step, reader.table):
        raise builder.unsupported(
            body.right,
            f"GROUP BY, DISTINCT, a window, an outer join or a subquery over {name} in its recursive term",
            "keep the recursive term to joins, filters and projections of the CTE; aggregate in the query over it",
        )
    return Recursive(name, _renamed(anchor_node, names), _renamed(step, names), names)


def _under_stateful(node: Node, table: str, inside: bool = False) -> bool:
    if isinstance(node, Scan):
        return inside and node.table == table
    inside = inside or isinstance(node, STATEFUL)
    return any(_under_stateful(child, table, inside) for child in node.inputs)


def _renamed(node: Node, names: tuple[str, ...]) -> Node:
    """``node`` with its columns named ``names`` (positional, as UNION ALL is)."""
    if node.columns == names:
        return node
    return Select((("b", node),), None, names, tuple(col(c, "b") for c in node.columns))
