"""Which algebra a view's refresh policy and its reads of the current time route it to:
DBSP's rules, the temporal filter, or a whole recompute; and what an INCREMENTAL view may
not hold."""

from __future__ import annotations

import re

from sqlglot import exp

from ivm_sql.algebra.build import Builder
from ivm_sql.algebra.clock import clock_only_in_filters, is_clock_read
from ivm_sql.algebra.nodes import Node, Recompute, Scan
from ivm_sql.catalog import Schema
from ivm_sql.errors import UnsupportedError
from ivm_sql.incremental.stages import Stage
from ivm_sql.physical import policy as policies
from ivm_sql.refresh_policy import RefreshPolicy
from ivm_sql.sqlbuild import (
    alias,
    col,
    ident,
    subquery,
)
from ivm_sql.viewdefs import ViewDef


def refuse_whole_recompute(view: ViewDef, policy: RefreshPolicy, stages: list[Stage]) -> None:
    """An INCREMENTAL view whose SQL holds an operator recomputed whole on any change (or
    on every refresh) is refused, at that operator's line (``physical.policy``)."""
    stage = policies.whole_recompute(tuple(stages))
    if stage is None:
        return
    node = stage.node
    raise UnsupportedError(
        f"view {view.name} has REFRESH POLICY {policy}, but it cannot be maintained incrementally: "
        f"{stage.scope} ({node.reason})",
        location=_operator_location(view, node),
        hint="use REFRESH POLICY AUTO (recomputed when needed) or FULL, or rewrite the operator "
        "(docs/sql-support.md lists what is incremental)",
    )


def _operator_location(view: ViewDef, node: Recompute):
    """Where the operator of a Recompute is in the view: its read of the current time, or
    the first SQL keyword its reason names (ORDER BY ... LIMIT, a function), else the view."""
    if node.every_refresh:
        return view.locate(next((n for n in view.query.walk() if is_clock_read(n)), None))
    words = [w for w in re.findall(r"[A-Za-z_]+", node.reason) if w.isupper()]
    found = [view.locate_word(w) for w in words if re.search(rf"\b{w}\b", view.text, re.IGNORECASE)]
    return found[0] if found else view.location


def temporal(view: ViewDef, qualified: exp.Query, resolve) -> Node | None:
    """The algebra of a view that compares with the current time, if every such comparison
    is a filter the temporal rule maintains (``incremental.temporal``); None otherwise, and
    the view is recomputed on every refresh."""
    try:
        root = Builder(view, resolve, clock_in_filters=True).query(qualified, {})
    except UnsupportedError:
        return None
    return root if clock_only_in_filters(root) else None


def full_recompute(
    query: exp.Query, schema: Schema, resolve, every_refresh: bool = False
) -> Recompute:
    """A view with REFRESH POLICY FULL: its whole SELECT, recomputed whenever any
    source changes (one global key), non-deterministic functions allowed. With
    ``every_refresh`` (a view comparing with the current time): recomputed on every refresh."""
    sources: dict[str, tuple[str, Scan]] = {}
    bound = query.copy()
    for node in list(bound.find_all(exp.Table)):
        if not node.db or not isinstance(node.this, exp.Identifier):
            continue  # a CTE, or a table function
        name = f"{node.db}.{node.name}".lower()
        if name not in sources:
            sources[name] = (f"__t{len(sources)}", resolve(node))
        node.replace(
            exp.Table(
                this=ident(sources[name][0]), alias=exp.TableAlias(this=ident(node.alias_or_name))
            )
        )
    inputs = tuple(sources.values())
    names = tuple(n for n, _ in schema)
    renamed = exp.select(*(alias(col(q), n) for q, n in zip(bound.named_selects, names))).from_(
        subquery(bound, "q")
    )
    if every_refresh:
        return Recompute(
            inputs,
            tuple(() for _ in inputs),
            renamed,
            names,
            EVERY_REFRESH_REASON,
            every_refresh=True,
        )
    return Recompute(inputs, tuple(() for _ in inputs), renamed, names, policies.FULL_REASON)


EVERY_REFRESH_REASON = (
    "it compares columns with the current time, so its rows change as time passes"
)
