"""Views -> plans: parse, qualify, build algebra, cut into stages, and render for `ivm compile`."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from graphlib import CycleError, TopologicalSorter

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.optimizer.qualify import qualify

from ivm_sql.algebra import constants
from ivm_sql.algebra.build import Builder, compares_with_current_time
from ivm_sql.algebra.clock import clock_only_in_filters, is_clock_read
from ivm_sql.algebra.nodes import Node, Recompute, Scan
from ivm_sql.algebra.prune import prune
from ivm_sql.catalog import Catalog, QueryError, Schema
from ivm_sql.config import RefreshSettings
from ivm_sql.errors import SqlError, UnsupportedError
from ivm_sql.incremental import aggregate, extremes, fixpoint, snapshot
from ivm_sql.incremental.stages import Stage, plan_stages
from ivm_sql.incremental.temporal import CLOCK, SYMBOLIC_CLOCK
from ivm_sql.incremental.versions import Versions
from ivm_sql.physical import bounds, changes, execution, layout, materialize
from ivm_sql.physical import policy as policies
from ivm_sql.physical.cost import CostModel
from ivm_sql.physical.view_table import TableLayout, table_layout
from ivm_sql.refresh_policy import RefreshPolicy
from ivm_sql.sqlbuild import (
    DIALECT,
    INTERNAL_PREFIX,
    alias,
    col,
    ident,
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

    def create_table(self, stage: Stage, query: exp.Query) -> exp.Create:
        """CREATE OR REPLACE TABLE for one of its stages (the last one laid out as the user asked)."""
        return create_table(
            stage, query, self.fingerprint(stage), self.layout if stage is self.stages[-1] else None
        )

    @property
    def base_tables(self) -> tuple[str, ...]:
        return tuple(
            dict.fromkeys(
                t
                for s in self.stages
                for t in s.sources
                if not t.split(".")[-1].startswith(INTERNAL_PREFIX)
            )
        )

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


def rows_query(output: Scan) -> exp.Select:
    """SELECT the output columns from a stage table, repeating a row by its multiplicity."""
    exprs = [
        alias(e.copy(), c)
        for e, c in zip(output.exprs or [col(c) for c in output.columns], output.columns)
    ]
    if isinstance(output.weight, exp.Literal):
        select = exp.select(*exprs).from_(table(output.table))
        return select.where(output.where.copy()) if output.where is not None else select
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
    if stage.kind == "fixpoint":  # the recursive term is part of what the table holds
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


# compiling -------------------------------------------------------------------------------


def compile_views(
    views: list[ViewDef],
    catalog: Catalog,
    database: str,
    cache: dict | None = None,
    default_policy: RefreshPolicy = RefreshPolicy.AUTO,
) -> list[ViewPlan]:
    """Plans for all views, each after the views it reads; ``default_policy`` for a view
    that names no REFRESH POLICY (ivm.yaml's refresh.policy).

    ``cache`` (view name -> (key, plan)), kept by the caller across compiles, returns the
    same plan while the view's text and location, the columns of the tables it reads and
    the plans of the views it reads are all unchanged: compiling is pure in those.
    """
    by_name = {v.name: v for v in views}
    # view -> its text
    kept = {name: key[0] for name, (key, _) in cache.items()} if cache is not None else {}
    _refuse_table_names([v for v in views if kept.get(v.name) != v.text], catalog, database)
    graph = {v.name: [d for d in references(v, database) if d in by_name] for v in views}
    try:
        order = list(TopologicalSorter(graph).static_order())
    except CycleError as error:
        cycle = error.args[1]
        raise SqlError(
            f"views read each other in a cycle: {' -> '.join(cycle)}",
            location=by_name[cycle[0]].location,
            hint="a view cannot depend on itself, directly or through others",
        ) from None
    plans: dict[str, ViewPlan] = {}
    keys: dict[str, tuple] = {}
    for name in order:
        view = by_name[name]
        schemas = input_schemas(view, catalog, database, plans)
        policy = view.policy or default_policy
        keys[name] = (
            view.text,
            str(view.location),
            policy,
            database,
            tuple((t, tuple(c)) for t, c in schemas.items()),
            tuple(keys[d] for d in references(view, database) if d in plans),
        )
        cached = cache.get(name) if cache is not None else None
        if cached is not None and cached[0] == keys[name]:
            plans[name] = cached[1]
        else:
            plans[name] = compile_view(view, catalog, database, plans, schemas, policy)
        if cache is not None:
            cache[name] = (keys[name], plans[name])
    return [plans[name] for name in order]


def _refuse_table_names(views: list[ViewDef], catalog: Catalog, database: str) -> None:
    """A view must not take the name of a table: ivm creates the view under that name. Checked
    for views compiled anew (a kept plan's view was checked when it was compiled)."""
    for view in views:
        if catalog.is_table(f"{database}.{view.name}"):
            raise SqlError(
                f"view {view.name} has the name of a table of database {database}",
                location=view.location,
                hint="rename the view (or the table, in a migration): a view and a table cannot share a name",
            )


def references(view: ViewDef, database: str) -> list[str]:
    """Names of the tables and views a view reads (views of this project: bare name)."""
    return list(dict.fromkeys(name for name, _ in _table_nodes(view, database)))


def _table_nodes(view: ViewDef, database: str) -> list[tuple[str, exp.Table]]:
    ctes = {c.alias_or_name.lower() for c in view.query.find_all(exp.CTE)}
    found = []
    for node in view.query.find_all(exp.Table):
        if not isinstance(node.this, exp.Identifier):
            continue
        name, db = node.name.lower(), node.db.lower() if node.db else None
        if db is None and name in ctes:
            continue
        found.append((name if db in (None, database) else f"{db}.{name}", node))
    return found


def input_schemas(
    view: ViewDef, catalog: Catalog, database: str, plans: dict[str, ViewPlan]
) -> dict[str, Schema]:
    """The columns of every table and view ``view`` reads, by qualified name."""
    schemas: dict[str, Schema] = {}
    for name, node in _table_nodes(view, database):
        full = name if "." in name else f"{database}.{name}"
        if full in schemas:
            continue
        if name in plans:
            schemas[full] = plans[name].schema
            continue
        columns = catalog.columns(full)
        if columns is None:
            raise SqlError(
                f"view {view.name} reads {full}, which does not exist",
                location=view.locate(node),
                hint="create the table in a migration and run `ivm migrate`, or define the view",
            )
        schemas[full] = columns
    return schemas


def compile_view(
    view: ViewDef,
    catalog: Catalog,
    database: str,
    plans: dict[str, ViewPlan],
    schemas: dict[str, Schema] | None = None,
    policy: RefreshPolicy = RefreshPolicy.AUTO,
) -> ViewPlan:
    if schemas is None:
        schemas = input_schemas(view, catalog, database, plans)
    qualified = _qualify(view, schemas, database)
    schema = _output_schema(view, catalog, database, plans, schemas)

    def resolve(node: exp.Table) -> Scan:
        db = node.db.lower() if node.db else database
        name = f"{db}.{node.name.lower()}"
        if db == database and node.name.lower() in plans:
            return plans[node.name.lower()].output
        return Scan(name, tuple(c for c, _ in schemas[name]))

    if policy is RefreshPolicy.FULL:
        root = full_recompute(qualified, schema, resolve)
    elif compares_with_current_time(qualified):
        root = _temporal(view, qualified, resolve) or full_recompute(
            qualified, schema, resolve, every_refresh=True
        )
    else:
        root = Builder(view, resolve).query(qualified, {})
    if len(root.columns) != len(schema):
        raise UnsupportedError(
            f"view {view.name} returns {len(schema)} columns from {len(root.columns)} expressions",
            location=view.location,
            hint="name the columns of a generator with several columns: posexplode(x) AS (pos, item), "
            "or move it into LATERAL VIEW",
        )
    stages, output = plan_stages(database, view.name, prune(root))
    output = _with_schema(output, schema)
    if policy.incremental:
        _refuse_whole_recompute(view, policy, stages)
    depends = tuple(n for n in references(view, database) if n in plans)
    return ViewPlan(
        view, database, tuple(stages), output, schema, depends, policy, table_layout(view, output)
    )


def _refuse_whole_recompute(view: ViewDef, policy: RefreshPolicy, stages: list[Stage]) -> None:
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


def _temporal(view: ViewDef, qualified: exp.Query, resolve) -> Node | None:
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


def _qualify(view: ViewDef, schemas: dict[str, Schema], database: str) -> exp.Query:
    nested: dict = {}
    for name, columns in schemas.items():
        db, name_ = name.split(".")
        nested.setdefault(db, {})[name_] = dict(columns)
    try:
        return qualify(
            constants.name_columns(view.query.copy()),
            schema=nested,
            db=database,
            dialect=DIALECT,
            quote_identifiers=True,
            validate_qualify_columns=True,
        )
    except SqlglotError as error:
        unknown = re.match(r"Column '([^']+)' could not be resolved", str(error))
        if unknown is None:
            raise SqlError(f"{error} (in view {view.name})", location=view.location) from None
        column = unknown.group(1)
        if column.lower() == "grouping__id":
            raise UnsupportedError(
                f"Hive's grouping__id column in view {view.name}",
                location=view.locate_word(column),
                hint="write grouping_id(), its value",
            ) from None
        available = sorted({c for columns in schemas.values() for c, _ in columns})
        raise SqlError(
            f"column {column} does not exist in the tables view {view.name} reads",
            location=view.locate_word(column.split(".")[-1]),
            hint=f"columns there: {', '.join(available)}",
        ) from None


def _output_schema(
    view: ViewDef,
    catalog: Catalog,
    database: str,
    plans: dict[str, ViewPlan],
    inputs: dict[str, Schema],
) -> Schema:
    """The view's columns as Spark's own SELECT names and types them (views inlined)."""
    try:
        schema = catalog.output_schema(
            to_sql(inline_views(view, database, plans), pretty=False), inputs
        )
    except QueryError as error:
        raise SqlError(f"{error} (in view {view.name})", location=view.location) from None
    if view.column_names is not None:
        if len(view.column_names) != len(schema):
            raise SqlError(
                f"view {view.name} names {len(view.column_names)} columns but its SELECT returns {len(schema)}",
                location=view.location,
            )
        schema = [(name, type_) for name, (_, type_) in zip(view.column_names, schema)]
    names = [name for name, _ in schema]
    duplicated = sorted({n for n in names if names.count(n) > 1})
    if duplicated:
        raise SqlError(
            f"view {view.name} has two columns named {duplicated[0]}",
            location=view.location,
            hint="give each output column its own name with AS",
        )
    if any(n.startswith(INTERNAL_PREFIX) for n in names):
        raise SqlError(
            f"column names starting with {INTERNAL_PREFIX} are reserved for ivm (view {view.name})",
            location=view.location,
            hint="rename the column with AS",
        )
    quoted = [n for n in names if "`" in n]
    if quoted:
        # Delta's change data feed writes its rows through a column path it does not quote:
        # a MERGE or UPDATE of a table with such a column fails (INVALID_ATTRIBUTE_NAME_SYNTAX).
        raise UnsupportedError(
            f"column name {quoted[0]!r} of view {view.name} holds a backtick, which Delta cannot "
            "keep in a table with a change data feed",
            location=view.locate(
                next((e for e in view.query.selects if e.alias_or_name.lower() == quoted[0]), None)
            ),
            hint="rename the column with AS; spaces, punctuation, unicode and quoted reserved words all work",
        )
    return schema


def inline_views(view: ViewDef, database: str, plans: dict[str, ViewPlan]) -> exp.Query:
    """The view's SELECT with every view it reads replaced by that view's SELECT, and every
    table qualified by its database: a query over base tables only."""
    ctes = {c.alias_or_name.lower() for c in view.query.find_all(exp.CTE)}

    def expand(node: exp.Expression) -> exp.Expression:
        if not isinstance(node, exp.Table) or not isinstance(node.this, exp.Identifier):
            return node
        name, db = node.name.lower(), node.db.lower() if node.db else None
        if db not in (None, database) or (db is None and name in ctes):
            return node
        if name not in plans:
            qualified = node.copy()
            qualified.set("db", ident(database))
            return qualified
        other = plans[name].view
        inner = inline_views(other, database, plans)
        alias_ = exp.TableAlias(this=ident(node.alias_or_name))
        if other.column_names:
            alias_.set("columns", [ident(c) for c in other.column_names])
        return exp.Subquery(this=inner, alias=alias_)

    return view.query.copy().transform(expand)


def _with_schema(output: Scan, schema: Schema) -> Scan:
    """Name the output columns as the SELECT does; cast DECIMALs to the SELECT's exact type
    (a SUM kept as a weighted sum is wider than SQL's SUM of the same column)."""
    exprs = []
    for expression, (_, type_) in zip(output.exprs or [col(c) for c in output.columns], schema):
        if type_.startswith("decimal"):
            expression = exp.Cast(
                this=expression.copy(), to=exp.DataType.build(type_, dialect=DIALECT)
            )
        exprs.append(expression)
    return replace(output, columns=tuple(n for n, _ in schema), exprs=tuple(exprs))


# rendering -------------------------------------------------------------------------------


def render(plan: ViewPlan, cost: CostModel = CostModel.from_settings(RefreshSettings())) -> str:
    """The SQL that maintains a view, for `ivm compile`: tables, refresh statements, view,
    and the physical decisions a refresh takes around them."""
    symbolic = symbolic_pins(plan.stages)
    cost = cost.under(plan.policy)
    lines = [
        f"-- view {plan.name}  ({plan.view.location})",
        f"-- reads: {', '.join(plan.base_tables + tuple(plan.depends_on)) or 'nothing'}",
        f"-- refresh policy: {policies.describe(plan.policy)}",
        "-- :<table>_old is the version a stage reflects, :<table>_new the version pinned by the refresh;",
        "-- terms for sources without changes are left out at run time, and an unchanged view runs nothing.",
        f"-- each refresh: {changes.describe()}; {materialize.describe()};",
        f"-- layout: {layout.describe()};",
        f"-- execution: {execution.describe()};",
        f"-- pruning: {bounds.describe()};",
        f"-- each incremental stage: {cost.describe()}.",
    ]
    if CLOCK in symbolic:
        lines.insert(
            4,
            "-- :clock_old is the time a stage reflects, :clock_new the time this refresh reads the clock at.",
        )
    for number, stage in enumerate(plan.stages, 1):
        lines += [
            "",
            f"-- stage {number}/{len(plan.stages)}: {stage.table} [{stage.kind}] {stage.strategy}",
        ]
        initial = stage.initial_query({t: replace(v, old=None) for t, v in symbolic.items()})
        if stage.kind == "fixpoint":
            lines += _fixpoint_lines(plan, stage, initial, symbolic)
            continue
        merge = stage.merge_statement(symbolic)
        lines += [
            "-- first refresh (or recompute):",
            to_sql(plan.create_table(stage, initial)) + ";",
            "-- each refresh:",
            to_sql(merge) + ";"
            if merge is not None
            else "-- nothing: the stage reads no table, so no change ever reaches it",
        ]
        change = stage.change_query(symbolic)
        pruned = (
            sorted({bound.describe() for bound in bounds.bounds(change)})
            if change is not None
            else []
        )
        if pruned:
            lines.append(
                f"-- large inputs read only where the change's keys are: {'; '.join(pruned)}"
            )
        if stage.aggregate is not None and extremes.calls(stage.aggregate):
            lines += _rescan_lines(stage, symbolic)
    lines += ["", "-- what users query:", to_sql(plan.user_view()) + ";"]
    return "\n".join(lines) + "\n"


def _rescan_lines(stage: Stage, symbolic: dict[str, Versions]) -> list[str]:
    """The query that replaces the MERGE's source when a MIN or MAX lost its last row."""
    node = stage.aggregate
    flagged = f"{INTERNAL_PREFIX}_change"
    contents = snapshot(node.input, {t: replace(v, old=None) for t, v in symbolic.items()}, "new")
    return [
        f"-- only when the change flags a group whose MIN/MAX lost its last row ({extremes.LOST}), the MERGE's source is",
        f"-- the change (`{flagged}`) with those groups' extremes recomputed from the input:",
        to_sql(extremes.rescanned(node, flagged, aggregate.change_columns(node), contents)) + ";",
    ]


def _fixpoint_lines(
    plan: ViewPlan, stage: Stage, initial: exp.Query, symbolic: dict[str, Versions]
) -> list[str]:
    """A recursive stage's loop: where it starts, what each iteration runs, what is stored."""
    iteration, total = f"{fixpoint.ITERATION_VIEW}j", table(f"{INTERNAL_PREFIX}_fixpoint_sum")
    return [
        "-- first refresh (or recompute), the loop starts from X_0 =",
        to_sql(initial) + ";",
        "-- each refresh, the loop starts from X_0 = the anchor's change and the recursive term's change over its tables:",
        to_sql(stage.change_query(symbolic)) + ";",
        f"-- then, until X_j is empty (at most spark.sql.cteRecursionLevelLimit = {fixpoint.DEFAULT_LIMIT} iterations by default), "
        f"X_(j+1) = the recursive term over X_j (`{iteration}`):",
        to_sql(fixpoint.iterate(stage.node, iteration, symbolic)) + ";",
        f"-- the table is created from, or merged with, the sum X_0 + X_1 + ... (`{total.name}`):",
        to_sql(plan.create_table(stage, exp.select(exp.Star()).from_(total))) + ";",
        to_sql(stage.merge(exp.select(exp.Star()).from_(total))) + ";",
    ]
