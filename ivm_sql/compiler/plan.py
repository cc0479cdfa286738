"""A view's plan: its stages, the tables they keep (the DDL a refresh runs), and the
fingerprint that says when a stage table must be rebuilt."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field

import sqlglot
from sqlglot import exp

from ivm_sql.algebra.nodes import Scan
from ivm_sql.catalog import Schema
from ivm_sql.incremental import fixpoint
from ivm_sql.incremental.stages import FixpointStage, Stage
from ivm_sql.incremental.temporal import CLOCK, SYMBOLIC_CLOCK
from ivm_sql.incremental.versions import Pins, Versions
from ivm_sql.physical import cascade, layout, one_statement, semi_joins
from ivm_sql.physical.view_table import TableLayout
from ivm_sql.refresh_policy import RefreshPolicy
from ivm_sql.sqlbuild import (
    DIALECT,
    INTERNAL_PREFIX,
    WEIGHT,
    alias,
    col,
    consolidate,
    ident,
    is_internal,
    lit,
    subquery,
    table,
    to_sql,
)
from ivm_sql.viewdefs import ViewDef

COPY = f"{INTERNAL_PREFIX}_copy"


@dataclass(frozen=True, eq=False)
class ViewPlan:
    """How one view is kept: its stages (innermost first) and how its rows are read."""

    view: ViewDef
    database: str
    stages: tuple[Stage, ...]
    output: Scan  # reads the view's rows from its last stage's table
    schema: Schema  # the view's columns and types, exactly as its SELECT returns them
    depends_on: tuple[str, ...]  # other views it reads
    policy: RefreshPolicy = RefreshPolicy.AUTO  # the view's, or the project's default
    # what the user asked of the view's table (its last stage's)
    layout: TableLayout = TableLayout()
    # stage table -> fingerprint: rendering one deep-copies the stage's query, and a plan
    # kept across compiles is asked again on every refresh
    _fingerprints: dict[str, str] = field(default_factory=dict, repr=False)

    @property
    def name(self) -> str:
        return f"{self.database}.{self.view.name}"

    @property
    def table(self) -> str:
        return self.stages[-1].table

    def fingerprint(self, stage: Stage) -> str:
        if stage.table not in self._fingerprints:
            last = stage is self.stages[-1]
            self._fingerprints[stage.table] = plan_fingerprint(
                stage, self.output if last else None, self.layout if last else None
            )
        return self._fingerprints[stage.table]

    def key_order(self, stage: Stage) -> tuple[str, ...]:
        """The key a full load and `ivm optimize` lay the stage's table out by
        (``physical.layout``): its MERGE's, unless it is the view's table and its CREATE VIEW
        asked for PARTITIONED BY or CLUSTER BY, a layout of the user's."""
        asked = stage is self.stages[-1] and (
            self.layout.partitioned_by or self.layout.clustered_by
        )
        return () if asked else stage.merge_keys

    def create_table(self, stage: Stage, query: exp.Query) -> exp.Create:
        """CREATE OR REPLACE TABLE for one of its stages (the last one laid out as the user asked)."""
        return create_table(
            stage, query, self.fingerprint(stage), self.layout if stage is self.stages[-1] else None
        )

    def inlined_query(self, first: Stage, pins: Pins) -> exp.Select:
        """The view's table's whole content with ``first`` and every stage between it and
        the last read through their own queries (CTEs) instead of their tables: the view's
        SELECT over what lies below ``first``, in one statement (``physical.one_statement``),
        a stage whose readers sum weights read unconsolidated, its semi joins written as
        ``IN`` (``physical.semi_joins``). ``pins``: the versions of
        every other table those stages read."""
        inlined = self.stages[self.stages.index(first) : -1]
        names = {
            stage.table: f"{INTERNAL_PREFIX}_inlined_{n}" for n, stage in enumerate(inlined, 1)
        }
        # the inlined tables' own versions are never read: placeholders, replaced below
        pins = {**pins, **{t: Versions.symbolic(t) for t in names}}

        def through_ctes(query: exp.Select) -> exp.Select:
            for read in list(query.find_all(exp.Table)):
                name = f"{read.db}.{read.name}" if read.db else read.name
                if name in names:
                    cte = table(names[name])
                    cte.set("alias", read.args.get("alias"))
                    read.replace(cte)
            return query

        query = through_ctes(self.stages[-1].initial_query(pins))
        for stage in inlined:
            content = (
                stage.content_query(pins)
                if one_statement.read_unconsolidated(stage, self.stages)
                else stage.initial_query(pins)
            )
            query = query.with_(ident(names[stage.table]), as_=through_ctes(content), copy=False)
        return semi_joins.written_as_in(query)

    @property
    def base_tables(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(t for s in self.stages for t in s.sources if not is_internal(t)))

    def user_view(self) -> exp.Create:
        """CREATE VIEW <name>: the view's rows, each as often as it occurs, no internal columns."""
        statement = sqlglot.parse_one("CREATE OR REPLACE VIEW v AS SELECT 1", read=DIALECT)
        statement.set("this", table(self.name))
        clauses = self.view.clauses
        if clauses.column_comments:  # a column list then names every column, each with its comment
            comments = dict(clauses.column_comments)
            statement.set(
                "this",
                exp.Schema(
                    this=table(self.name),
                    expressions=[
                        exp.ColumnDef(
                            this=ident(name),
                            constraints=[
                                exp.ColumnConstraint(
                                    kind=exp.CommentColumnConstraint(this=lit(comments[name]))
                                )
                            ]
                            if name in comments
                            else [],
                        )
                        for name, _ in self.schema
                    ],
                ),
            )
        if clauses.comment is not None:
            statement.set(
                "properties",
                exp.Properties(expressions=[exp.SchemaCommentProperty(this=lit(clauses.comment))]),
            )
        statement.set("expression", rows_query(self.output))
        return statement


def stages_above(plans: Iterable[ViewPlan]) -> dict[str, cascade.Above]:
    """Per stage table of ``plans``, the stages of theirs its recompute forces to recompute
    in the same refresh (``physical.cascade``). A chosen recompute below a view's table
    writes that table in one statement and none of the stages between
    (``physical.one_statement``): it forces what a recompute of the view's table forces."""
    plans = list(plans)
    above = cascade.stages_above(
        cascade.StageEdges(
            stage.table,
            tuple(stage.sources),
            plan.name if plan.policy is RefreshPolicy.INCREMENTAL_STRICT else None,
        )
        for plan in plans
        for stage in plan.stages
    )
    for plan in plans:
        for stage in plan.stages[:-1]:
            if one_statement.inlinable(plan.stages, stage):
                above.pop(stage.table, None)
                if plan.table in above:
                    above[stage.table] = above[plan.table]
    return above


def rows_query(output: Scan) -> exp.Select:
    """SELECT the output columns from a stage table, repeating a row by its multiplicity."""
    exprs = [
        alias(e.copy(), c)
        for e, c in zip(output.exprs or [col(c) for c in output.columns], output.columns)
    ]
    if isinstance(output.weight, exp.Literal):
        # an aggregate's or a DISTINCT's trace is read summed (``Scan.state``)
        stored = (
            subquery(output.state.copy(), "stored")
            if output.state is not None
            else table(output.table)
        )
        select = exp.select(*exprs).from_(stored)
        return select.where(output.where.copy()) if output.where is not None else select
    if output.batches:
        # a trace of batches: each row once, its weights summed (``incremental.bag``)
        stored = exp.select(*exprs, alias(output.weight.copy(), WEIGHT)).from_(table(output.table))
        if output.where is not None:
            stored = stored.where(output.where.copy())
        copies = exp.Explode(this=exp.func("sequence", lit(1), col(WEIGHT)))
        inner = exp.select(*(col(c) for c in output.columns), alias(copies, COPY)).from_(
            subquery(consolidate(stored, output.columns), "stored")
        )
    else:
        copies = exp.Explode(this=exp.func("sequence", lit(1), output.weight.copy()))
        inner = exp.select(*exprs, alias(copies, COPY)).from_(table(output.table))
        if output.where is not None:
            inner = inner.where(output.where.copy())
    return exp.select(*(col(c) for c in output.columns)).from_(subquery(inner, "rows"))


def create_table(
    stage: Stage, query: exp.Query, fingerprint: str, asked: TableLayout | None = None
) -> exp.Create:
    """CREATE OR REPLACE TABLE for a stage: Delta, laid out as ``physical.layout`` says
    (column mapping if its column names need it), with its plan fingerprint; a view's last
    stage also as its CREATE VIEW asked (``asked``: ``physical.view_table``)."""
    statement = sqlglot.parse_one("CREATE OR REPLACE TABLE t USING DELTA AS SELECT 1", read=DIALECT)
    asked = asked or TableLayout()
    properties = {
        **dict(asked.properties),
        **layout.creation_properties(stored_columns(stage, query)),
        "ivm.plan": fingerprint,
    }
    statement.set(
        "properties",
        exp.Properties(
            expressions=[
                exp.FileFormatProperty(this=exp.var("DELTA")),
                *asked.clauses(),
                *(
                    exp.Property(this=lit(key), value=lit(value))
                    for key, value in properties.items()
                ),
            ]
        ),
    )
    statement.set("this", table(stage.table))
    statement.set("expression", query)
    return statement


def stored_columns(stage: Stage, query: exp.Query) -> list[str]:
    """The columns a stage's table gets from ``query`` (a recursive stage's loop result is
    read with ``*``: its node's columns)."""
    names = query.named_selects
    return list(stage.node.columns) if "*" in names else names


def overwrite_table(stage: Stage, query: exp.Query) -> exp.Insert:
    """INSERT OVERWRITE of a stage's whole content into its table as it stands: a recompute
    that keeps the table's columns, properties and catalog entry (one Delta commit, where
    CREATE OR REPLACE also rewrites the table's entry in the catalog)."""
    return exp.Insert(this=table(stage.table), expression=query, overwrite=True)


def symbolic_pins(stages: Iterable[Stage]) -> dict[str, Versions]:
    """Placeholders for the versions of every source the stages read (and the clock's)."""
    stages = list(stages)
    pins = {t: Versions.symbolic(t) for stage in stages for t in stage.sources}
    if any(stage.reads_clock for stage in stages):
        pins[CLOCK] = SYMBOLIC_CLOCK
    return pins


def plan_fingerprint(
    stage: Stage, output: Scan | None = None, asked: TableLayout | None = None
) -> str:
    """Changes whenever what the stage computes changes (its table must then be rebuilt);
    for a view's last stage, also when the view's columns are read differently, or when
    the table's comment, properties or layout (``asked``) do."""
    pins = symbolic_pins([stage])
    text = f"{stage.kind}\n{to_sql(stage.initial_query(pins), pretty=False)}"
    if isinstance(stage, FixpointStage):  # the recursive term is part of what the table holds
        text += (
            f"\n{to_sql(fixpoint.iterate(stage.node, fixpoint.ITERATION_VIEW, pins), pretty=False)}"
        )
    if output is not None:
        text += f"\n{to_sql(rows_query(output), pretty=False)}"
    if (
        asked is not None and asked != TableLayout()
    ):  # an unchanged view keeps the fingerprint it had before
        text += "\n" + " ".join(to_sql(node, pretty=False) for node in asked.clauses())
        text += "\n" + repr(asked.properties)
    return hashlib.sha256(text.encode()).hexdigest()[:16]
