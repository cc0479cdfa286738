"""The differential oracle's helpers: view specs, bag comparison, and random DML.

A view is compared with its own SELECT evaluated directly by Spark over the base tables.
Views read by a view are inlined as CTEs built from *their* SELECT text, so the expected
result never reads a table ivm wrote.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import json
import os
import random
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from unittest import mock

from ivm_sql.config import HistorySettings, RefreshSettings
from ivm_sql.incremental import top_k
from ivm_sql.physical import bounds, cost, execution, layout, learned, materialize, one_statement
from ivm_sql.physical.cost import COST_REASON
from ivm_sql.physical.recompute import RECOMPUTED_BELOW
from ivm_sql.project import Project
from ivm_sql.storage.refresh_log import AT_ONCE

MakeProject = Callable[[dict[str, str]], Path]

# One project per seed; each round is a batch of random changes, a refresh and a full check.
# Deeper runs: IVM_ORACLE_SEEDS=1,2,3 IVM_ORACLE_ROUNDS=10 pytest tests/test_oracle*.py
SEEDS = tuple(int(s) for s in os.environ.get("IVM_ORACLE_SEEDS", "7").split(","))
ROUNDS = int(os.environ.get("IVM_ORACLE_ROUNDS", "2"))

# The oracle checks the incremental rules, so the cost model must not pick a recompute for them.
INCREMENTAL_ONLY = "refresh: {recompute_above: never}\n"


# the rounds that empty a table (global aggregates over no rows, every group gone)
EMPTIED = {2: "orders", 3: "products"}


def global_recomputes(plans) -> dict[str, set[str]]:
    """Per view, the strategies of its stages that recompute everything on any change (a
    view may have several: an EXISTS below a COUNT(DISTINCT))."""
    found: dict[str, set[str]] = {}
    for plan in plans:
        for stage in plan.stages:
            if stage.recomputes_all:
                found.setdefault(plan.name, set()).add(stage.strategy)
    return found


def plain_dml_recomputed(reports, recomputes_all: dict[str, set[str]]) -> list:
    """The reports of views plain DML did not refresh incrementally, but those whose plan
    recomputes everything on any change (and says so)."""
    return [
        r
        for r in reports
        if r.action not in ("incremental", "unchanged")
        and not (r.action == "recomputed" and r.reason in recomputes_all.get(r.view, set()))
    ]


def chosen_by_cost(reason: str) -> bool:
    """A recompute the cost model chose, or one that follows from it: a stage above it, or a
    view's table written in one statement whose stages below have caught up since."""
    return (
        reason.startswith(COST_REASON)
        or reason.endswith(RECOMPUTED_BELOW)
        or reason == one_statement.CAUGHT_UP
    )


def written_at_once(reports) -> set[str]:
    """The views whose table a chosen recompute wrote in one statement."""
    return {r.view for r in reports if AT_ONCE in r.reason}


MIGRATION = """
CREATE TABLE customers (id INT, name STRING, country STRING, score INT) USING DELTA;
CREATE TABLE products (id INT, category STRING, price DECIMAL(10,2)) USING DELTA;
CREATE TABLE orders (id INT, customer_id INT, product_id INT, qty INT, status STRING, note STRING) USING DELTA;
"""


@dataclass(frozen=True)
class ViewSpec:
    """One view: its name, its SELECT as written, an optional column list, the views it reads."""

    name: str
    select: str
    columns: tuple[str, ...] | None = None
    reads: tuple[str, ...] = ()
    materialized: bool = False
    full_refresh: bool = False  # marked TBLPROPERTIES ('ivm.refresh' = 'full')
    clauses: str = ""  # written before AS: COMMENT, PARTITIONED BY, REFRESH POLICY, ...

    def create_statement(self) -> str:
        kind = "MATERIALIZED VIEW" if self.materialized else "VIEW"
        names = f" ({', '.join(self.columns)})" if self.columns else ""
        properties = " TBLPROPERTIES ('ivm.refresh' = 'full')" if self.full_refresh else ""
        clauses = f"\n{self.clauses}" if self.clauses else ""
        return f"CREATE {kind} {self.name}{names}{properties}{clauses} AS\n{self.select.strip()};\n"


def views_file(specs: Iterable[ViewSpec]) -> str:
    return "\n".join(spec.create_statement() for spec in specs)


def expected_sql(spec: ViewSpec, by_name: dict[str, ViewSpec]) -> str:
    """The view's SELECT, with every view it reads (transitively) given as a CTE of its SELECT."""
    order: list[str] = []

    def visit(name: str) -> None:
        for dep in by_name[name].reads:
            visit(dep)
            if dep not in order:
                order.append(dep)

    visit(spec.name)
    body = _renamed(spec)
    if not order:
        return body
    ctes = []
    for name in order:
        dep = by_name[name]
        cols = f" ({', '.join(dep.columns)})" if dep.columns else ""
        ctes.append(f"{name}{cols} AS (\n{dep.select.strip()}\n)")
    return f"WITH {', '.join(ctes)}\nSELECT * FROM (\n{body}\n) AS __oracle"


def _renamed(spec: ViewSpec) -> str:
    if not spec.columns:
        return spec.select.strip()
    return f"SELECT * FROM (\n{spec.select.strip()}\n) AS __oracle ({', '.join(spec.columns)})"


# bags ------------------------------------------------------------------------------------


@dataclass
class BagDiff:
    """How a view's rows differ from its expected rows, as bags (row -> times)."""

    view_rows: int
    expected_rows: int
    missing: Counter  # rows the view lacks
    extra: Counter  # rows the view should not have

    @property
    def equal(self) -> bool:
        return not self.missing and not self.extra


def schema_of(frame) -> list[tuple[str, str]]:
    return [(f.name, f.dataType.simpleString()) for f in frame.schema.fields]


def _encoded(name: str, frame, side: int):
    """``frame`` as (view name, side, row as JSON): doubles rounded to 6 places and 9
    significant digits, so the summation order of an incremental SUM or AVG cannot differ."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import DoubleType, FloatType

    frame = frame.toDF(*[f"c{i}" for i in range(len(frame.columns))])  # duplicate names are fine
    columns = [
        F.format_string("%.9g", F.round(F.col(f.name), 6)).alias(f.name)
        if isinstance(f.dataType, (DoubleType, FloatType))
        else F.col(f.name)
        for f in frame.schema.fields
    ]
    row = F.to_json(F.struct(*columns), {"ignoreNullFields": "false"})
    return frame.select(F.lit(name).alias("view"), F.lit(side).alias("side"), row.alias("row"))


PAIRS_PER_JOB = 6  # one plan holding every TPC-H query timed out waiting for its broadcasts
JOBS_AT_ONCE = 3  # the driver plans one job while another runs (as runtime.workers does)


def bag_diffs(pairs: dict[str, tuple], at_once: int = JOBS_AT_ONCE) -> dict[str, BagDiff]:
    """Compare each (view frame, expected frame) pair as bags, a few pairs per Spark job,
    ``at_once`` jobs at a time, interpreted: the tests' tables are small, and generating and
    compiling the code of a job over a dozen SELECTs cost more than it saves (the SQL
    oracle's 48 views: 17 s interpreted against 23 s compiled, warm)."""
    if not pairs:
        return {}
    names = list(pairs)
    chunks = [
        {name: pairs[name] for name in names[start : start + PAIRS_PER_JOB]}
        for start in range(0, len(names), PAIRS_PER_JOB)
    ]
    diffs: dict[str, BagDiff] = {}
    spark = next(iter(pairs.values()))[0].sparkSession
    with execution.for_small_data(spark), ThreadPoolExecutor(at_once) as pool:
        for found in pool.map(_bag_diffs, chunks):
            diffs.update(found)
    return diffs


def _bag_diffs(pairs: dict[str, tuple]) -> dict[str, BagDiff]:
    """Rows are grouped by (pair, row) and only the groups whose counts differ come back,
    with each pair's totals (the rollup's per-pair rows)."""
    from functools import reduce

    from pyspark.sql import functions as F

    parts = [
        _encoded(name, frame, side)
        for name, (actual, expected) in pairs.items()
        for frame, side in ((actual, 1), (expected, -1))
    ]
    counted = (
        reduce(lambda a, b: a.unionAll(b), parts)
        .rollup("view", "row")
        .agg(
            F.sum(F.when(F.col("side") == 1, 1).otherwise(0)).alias("in_view"),
            F.sum(F.when(F.col("side") == -1, 1).otherwise(0)).alias("expected"),
            F.grouping("row").alias("total"),
        )
    )
    rows = counted.where(
        F.col("view").isNotNull()
        & ((F.col("total") == 1) | (F.col("in_view") != F.col("expected")))
    ).collect()
    diffs = {name: BagDiff(0, 0, Counter(), Counter()) for name in pairs}
    for r in rows:
        diff = diffs[r.view]
        if r.total:
            diff.view_rows, diff.expected_rows = r.in_view, r.expected
            continue
        values = tuple(_hashable(v) for v in json.loads(r.row).values())
        if r.expected > r.in_view:
            diff.missing[values] = r.expected - r.in_view
        else:
            diff.extra[values] = r.in_view - r.expected
    return diffs


def _hashable(value):
    """A row's JSON value as part of a Counter key: arrays (collect_set's) as tuples."""
    if isinstance(value, list):
        return tuple(_hashable(v) for v in value)
    if isinstance(value, dict):
        return tuple((k, _hashable(v)) for k, v in value.items())
    return value


def compare_views(
    spark, database: str, specs: list[ViewSpec], label: str, rows: dict[str, int] | None = None
) -> list[str]:
    """Compare every view with its SELECT; one message per view that differs (empty: all equal).

    Each view must have its SELECT's column names and Spark types, and hold exactly the bag
    of rows its SELECT returns. A few views are compared per Spark job. ``rows``, if given,
    gets each compared view's row count.
    """
    by_name = {spec.name: spec for spec in specs}
    failures, pairs, queries = [], {}, {}
    for spec in specs:
        queries[spec.name] = expected_sql(spec, by_name)
        actual, expected = spark.table(f"{database}.{spec.name}"), spark.sql(queries[spec.name])
        if schema_of(actual) != schema_of(expected):
            failures.append(
                f"view {spec.name}, {label}: columns/types differ\n"
                f"  view:   {schema_of(actual)}\n  select: {schema_of(expected)}"
            )
        else:
            pairs[spec.name] = (actual, expected)
    for name, diff in bag_diffs(pairs).items():
        if rows is not None:
            rows[name] = diff.view_rows
        if not diff.equal:
            failures.append(describe(name, label, diff) + f"\n  SELECT:\n{queries[name]}")
    return failures


def describe(name: str, label: str, diff: BagDiff) -> str:
    return (
        f"view {name}, {label}: view differs from its SELECT "
        f"({diff.view_rows} rows in view, {diff.expected_rows} expected)\n"
        f"  missing from view (row: times): {_show(diff.missing)}\n"
        f"  extra in view (row: times):     {_show(diff.extra)}"
    )


def _show(rows: Counter, limit: int = 12) -> str:
    items = sorted(rows.items(), key=repr)[:limit]
    more = f" ... and {len(rows) - limit} more" if len(rows) > limit else ""
    return "{" + ", ".join(f"{row!r}: {n}" for row, n in items) + "}" + more


# SQL literals ----------------------------------------------------------------------------


def sql_literal(value) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, datetime):
        return timestamp_sql(value)
    if isinstance(value, Decimal):
        return f"CAST('{value}' AS DECIMAL(10,2))"
    if isinstance(value, int):
        return str(value)
    return "'" + str(value).replace("\\", "\\\\").replace("'", "\\'") + "'"


def timestamp_sql(moment: datetime) -> str:
    return f"TIMESTAMP'{moment:%Y-%m-%d %H:%M:%S}'"


def values_clause(rows: list[tuple]) -> str:
    return ", ".join("(" + ", ".join(sql_literal(v) for v in row) + ")" for row in rows)


def row_is(columns: tuple[str, ...], row: tuple) -> str:
    """A WHERE condition true for exactly the copies of ``row`` (NULLs match NULLs)."""
    return " AND ".join(f"{c} <=> {sql_literal(v)}" for c, v in zip(columns, row))


# churn -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ChurnTable:
    """What churn needs to know of a table: its columns; a row all of whose values are new
    (every group and join key in it is one no stored row has; the novel rows of several
    tables join each other); a maker of random rows no stored row equals; key columns,
    each with a value no row holds, to move rows to and back; and which rows the table may
    end a round with (a hierarchy whose parents stay below their children, say), which a
    row updated twice keeps to."""

    name: str
    columns: tuple[str, ...]
    novel: tuple
    fresh_row: Callable[[], tuple]
    keys: dict[str, object]
    allows: Callable[[tuple], bool] = lambda row: True


class Churn:
    """Rows and keys that come and go between two refreshes (issue 21). A change data feed
    read across several commits holds the arrival and the departure; consolidated they
    cancel, and a stateful operator must then write nothing for them. Each pattern is a
    block of statements run in order, as one unit, among a round's other statements:

    - a row with new keys inserted and deleted again (a group, or a join key on one or
      several tables, that appears and vanishes);
    - a stored row deleted and put back as often as it was there;
    - a row updated twice: back to what it was, or on to a second change;
    - every row of a key moved away and back again;
    - a table emptied and refilled (``refill``, first in a round, so it is exact).
    """

    def __init__(self, rng: random.Random, tables: list[ChurnTable]):
        self.rng = rng
        self.tables = {t.name: t for t in tables}

    def blocks(self, current: dict[str, list[tuple]]) -> list[list[str]]:
        """One block of every pattern but the refill, each on tables picked at random."""
        blocks = [self.in_and_out()]
        stored = [name for name in self.tables if current.get(name)]
        if stored:
            blocks += [
                self.out_and_back(current),
                self.updated_twice(current),
                self.away_and_back(current),
            ]
        return blocks

    def in_and_out(self) -> list[str]:
        """Every table's novel row (perhaps twice) and some random ones, in, then out again."""
        r = self.rng
        tables = list(self.tables.values())
        rows = {
            t.name: [t.novel] * r.randint(1, 2) + [t.fresh_row() for _ in range(r.randint(0, 2))]
            for t in tables
        }
        inserts = [f"INSERT INTO {name} VALUES {values_clause(new)}" for name, new in rows.items()]
        deletes = [
            f"DELETE FROM {t.name} WHERE "
            + " OR ".join(f"({row_is(t.columns, row)})" for row in set(rows[t.name]))
            for t in tables
        ]
        r.shuffle(inserts)
        r.shuffle(deletes)
        return inserts + deletes

    def _stored(self, current: dict[str, list[tuple]]) -> tuple[ChurnTable, tuple]:
        table = self.tables[self.rng.choice([name for name in self.tables if current.get(name)])]
        return table, self.rng.choice(current[table.name])

    def out_and_back(self, current: dict[str, list[tuple]]) -> list[str]:
        table, row = self._stored(current)
        copies = current[table.name].count(row)
        return [
            f"DELETE FROM {table.name} WHERE {row_is(table.columns, row)}",
            f"INSERT INTO {table.name} VALUES {values_clause([row] * copies)}",
        ]

    def updated_twice(self, current: dict[str, list[tuple]]) -> list[str]:
        r = self.rng
        table, row = self._stored(current)
        first, second = r.randrange(len(row)), r.randrange(len(row))
        moved = list(row)
        moved[first] = r.choice(current[table.name])[
            first
        ]  # another stored row's value, or the same
        statements = [
            f"UPDATE {table.name} SET {table.columns[first]} = {sql_literal(moved[first])} "
            f"WHERE {row_is(table.columns, row)}"
        ]
        back = r.random() < 0.5
        if not back:  # on to a second change, unless the table may not end with that row
            column, value = table.columns[second], r.choice(current[table.name])[second]
            back = not table.allows(tuple(value if i == second else v for i, v in enumerate(moved)))
        if back:  # back to what it was
            column, value = table.columns[first], row[first]
        statements.append(
            f"UPDATE {table.name} SET {column} = {sql_literal(value)} WHERE {row_is(table.columns, tuple(moved))}"
        )
        return statements

    def away_and_back(self, current: dict[str, list[tuple]]) -> list[str]:
        table, row = self._stored(current)
        column = self.rng.choice(list(table.keys))
        value, away = row[table.columns.index(column)], table.keys[column]
        if value is None:  # NULL keys move too: away from IS NULL, back to NULL
            return [
                f"UPDATE {table.name} SET {column} = {sql_literal(away)} WHERE {column} IS NULL",
                f"UPDATE {table.name} SET {column} = NULL WHERE {column} = {sql_literal(away)}",
            ]
        return [
            f"UPDATE {table.name} SET {column} = {sql_literal(away)} WHERE {column} = {sql_literal(value)}",
            f"UPDATE {table.name} SET {column} = {sql_literal(value)} WHERE {column} = {sql_literal(away)}",
        ]

    def refill(self, current: dict[str, list[tuple]]) -> list[str]:
        """A table emptied, then given back its rows (a key of every group leaves and returns)."""
        name = self.rng.choice(list(self.tables))
        statements = [f"DELETE FROM {name}"]
        if current.get(name):
            statements.append(f"INSERT INTO {name} VALUES {values_clause(current[name])}")
        return statements


def churned(
    rng: random.Random, churn: Churn, current: dict[str, list[tuple]], statements: list[str]
) -> list[str]:
    """``statements`` (each its own block) and every churn pattern, blocks shuffled; the
    refill first, while ``current`` is still what the tables hold."""
    blocks = [[s] for s in statements] + churn.blocks(current)
    rng.shuffle(blocks)
    return churn.refill(current) + [s for block in blocks for s in block]


# random changes --------------------------------------------------------------------------

NAMES = ["ann", "bob", "Cy", "dee", "", None]
COUNTRIES = ["DE", "FR", "US", None]
SCORES = [None, 0, 3, 5, 7, 9, -2]
CATEGORIES = ["toys", "food", "books", None]
PRICES = [
    None,
    Decimal("0.99"),
    Decimal("5.00"),
    Decimal("12.50"),
    Decimal("100.01"),
    Decimal("-3.33"),
]
QTYS = [None, 0, 1, 2, 3, 5]
STATUSES = ["new", "shipped", "cancelled", None]
NOTES = ["gift", "rush", "", None]

CUSTOMER_IDS = [1, 2, 3, 4, 5, 6]
PRODUCT_IDS = [1, 2, 3, 4]
ORDER_IDS = list(range(1, 13))


def maybe(rng: random.Random, values: list, null_chance: float = 0.15):
    """A value from ``values`` or, now and then, NULL."""
    return None if rng.random() < null_chance else rng.choice(values)


class RandomChanges:
    """Random INSERT / UPDATE / DELETE statements against customers, products and orders,
    with churn in every round."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.churn = Churn(
            rng,
            [
                ChurnTable(
                    "customers",
                    ("id", "name", "country", "score"),
                    (8, "ghost", "NL", 4),
                    self.new_customer,
                    {"id": 99, "country": "XX"},
                ),
                ChurnTable(
                    "products",
                    ("id", "category", "price"),
                    (6, "ghost", Decimal("7.77")),
                    self.new_product,
                    {"id": 99, "category": "moved"},
                ),
                ChurnTable(
                    "orders",
                    ("id", "customer_id", "product_id", "qty", "status", "note"),
                    (13, 8, 6, 4, "ghost", "ghost"),
                    self.new_order,
                    {"customer_id": 99, "product_id": 99, "status": "moved"},
                ),
            ],
        )

    # rows no stored row equals (their ids are never used otherwise), with new keys now and then
    def new_customer(self) -> tuple:
        r = self.rng
        return (r.choice([8, 9]), r.choice(NAMES), r.choice(["NL", *COUNTRIES]), r.choice(SCORES))

    def new_product(self) -> tuple:
        r = self.rng
        return (r.choice([6, 7]), r.choice(["ghost", *CATEGORIES]), r.choice(PRICES))

    def new_order(self) -> tuple:
        r = self.rng
        return (
            r.choice([13, 14]),
            r.choice([8, 9, *CUSTOMER_IDS]),
            r.choice([6, 7, *PRODUCT_IDS]),
            r.choice(QTYS),
            r.choice(["ghost", *STATUSES]),
            r.choice(NOTES),
        )

    def customer(self) -> tuple:
        r = self.rng
        return (maybe(r, CUSTOMER_IDS, 0.1), r.choice(NAMES), r.choice(COUNTRIES), r.choice(SCORES))

    def product(self) -> tuple:
        r = self.rng
        return (maybe(r, PRODUCT_IDS, 0.1), r.choice(CATEGORIES), r.choice(PRICES))

    def order(self) -> tuple:
        r = self.rng
        return (
            maybe(r, ORDER_IDS, 0.1),
            maybe(r, CUSTOMER_IDS + [7], 0.2),
            maybe(r, PRODUCT_IDS + [5], 0.2),
            r.choice(QTYS),
            r.choice(STATUSES),
            r.choice(NOTES),
        )

    def initial(self) -> list[str]:
        return [
            f"INSERT INTO customers VALUES {values_clause([self.customer() for _ in range(8)])}",
            f"INSERT INTO products VALUES {values_clause([self.product() for _ in range(6)])}",
            f"INSERT INTO orders VALUES {values_clause([self.order() for _ in range(20)])}",
        ]

    def round(self, current: dict[str, list[tuple]], empty: str | None = None) -> list[str]:
        """About ten statements and every churn pattern; ``current`` holds each table's rows
        (for exact duplicates). With ``empty``, that whole table is deleted last (global
        aggregates see no rows)."""
        r = self.rng
        makers = {"customers": self.customer, "products": self.product, "orders": self.order}
        statements = []
        for table in r.sample(list(makers), r.randint(1, 3)):
            rows = [makers[table]() for _ in range(r.randint(1, 5))]
            if current[table] and r.random() < 0.7:  # exact duplicates of stored rows
                rows += r.choices(current[table], k=r.randint(1, 2))
            if r.random() < 0.5:  # a duplicate inside the same insert
                rows.append(rows[0])
            statements.append(f"INSERT INTO {table} VALUES {values_clause(rows)}")
        choices = [
            self.update_orders,
            self.update_customers,
            self.update_products,
            self.delete_some,
        ]
        for _ in range(r.randint(3, 6)):
            statements.append(r.choice(choices)())
        statements = churned(r, self.churn, current, statements)
        if empty is not None:
            statements.append(f"DELETE FROM {empty}")
        return statements

    def moved_compatriot(self, current: dict[str, list[tuple]]) -> list[str]:
        """A change that every view over customers' countries sees, whatever the seed: a
        customer who shares a country with another moves to a country no one has ('NZ');
        when no two share one, two new customers arrive there together (ids no other
        statement uses)."""
        r = self.rng
        customers = [row for row in current["customers"] if None not in (row[0], row[2])]
        shared = Counter(row[2] for row in customers)
        compatriots = [row for row in customers if shared[row[2]] > 1]
        if not compatriots:
            pair = [(id_, r.choice(NAMES), "NZ", r.choice(SCORES)) for id_ in (10, 11)]
            return [f"INSERT INTO customers VALUES {values_clause(pair)}"]
        return [f"UPDATE customers SET country = 'NZ' WHERE id = {r.choice(compatriots)[0]}"]

    def order_filter(self) -> str:
        r = self.rng
        kind = r.randint(0, 4)
        if kind == 0:
            return f"id = {r.choice(ORDER_IDS)}"
        if kind == 1:
            return f"customer_id = {r.choice(CUSTOMER_IDS)}"
        if kind == 2:
            status = r.choice(STATUSES)
            return "status IS NULL" if status is None else f"status = {sql_literal(status)}"
        if kind == 3:
            return f"id % {r.randint(2, 4)} = {r.randint(0, 1)}"
        return "customer_id IS NULL OR product_id IS NULL"

    def update_orders(self) -> str:
        r = self.rng
        sets = r.choice(
            [
                # between join partners, to NULL
                lambda: f"customer_id = {sql_literal(maybe(r, CUSTOMER_IDS + [7], 0.3))}",
                lambda: f"product_id = {sql_literal(maybe(r, PRODUCT_IDS, 0.3))}",
                lambda: f"status = {sql_literal(r.choice(STATUSES))}",  # between groups
                lambda: f"qty = {sql_literal(r.choice(QTYS))}",
                lambda: "qty = qty + 1, note = " + sql_literal(r.choice(NOTES)),
                # NULL back
                lambda: (
                    "customer_id = coalesce(customer_id, 1), product_id = coalesce(product_id, 2)"
                ),
            ]
        )()
        return f"UPDATE orders SET {sets} WHERE {self.order_filter()}"

    def update_customers(self) -> str:
        r = self.rng
        sets = r.choice(
            [
                lambda: f"country = {sql_literal(r.choice(COUNTRIES))}",
                lambda: f"score = {sql_literal(r.choice(SCORES))}",
                lambda: f"name = {sql_literal(r.choice(NAMES))}",
                lambda: f"id = {sql_literal(maybe(r, CUSTOMER_IDS, 0.3))}",
                lambda: "id = coalesce(id, 3)",
            ]
        )()
        where = r.choice(
            [
                f"id = {r.choice(CUSTOMER_IDS)}",
                f"country = {sql_literal(r.choice(COUNTRIES[:3]))}",
                "id IS NULL",
            ]
        )
        return f"UPDATE customers SET {sets} WHERE {where}"

    def update_products(self) -> str:
        r = self.rng
        sets = r.choice(
            [
                lambda: f"price = {sql_literal(r.choice(PRICES))}",
                lambda: "price = price + CAST('1.25' AS DECIMAL(10,2))",
                lambda: f"category = {sql_literal(r.choice(CATEGORIES))}",
                lambda: f"id = {sql_literal(maybe(r, PRODUCT_IDS + [5], 0.3))}",
            ]
        )()
        where = r.choice(
            [
                f"id = {r.choice(PRODUCT_IDS)}",
                f"category = {sql_literal(r.choice(CATEGORIES[:3]))}",
                "price IS NULL",
            ]
        )
        return f"UPDATE products SET {sets} WHERE {where}"

    def delete_some(self) -> str:
        r = self.rng
        table = r.choice(["orders", "orders", "customers", "products"])
        if table == "orders":
            return f"DELETE FROM orders WHERE {self.order_filter()}"
        if table == "customers":
            country = r.choice(COUNTRIES)
            # a whole group
            where = "country IS NULL" if country is None else f"country = {sql_literal(country)}"
            return (
                f"DELETE FROM customers WHERE {r.choice([where, f'id = {r.choice(CUSTOMER_IDS)}'])}"
            )
        return f"DELETE FROM products WHERE {r.choice([f'id = {r.choice(PRODUCT_IDS)}', 'category IS NULL', 'price > 10'])}"


# the run -----------------------------------------------------------------------------------


def table_rows(project: Project) -> dict[str, list[tuple]]:
    return {t: project.sql(f"SELECT * FROM {t}").rows for t in ("customers", "products", "orders")}


def apply_changes(project: Project, statements: list[str]) -> None:
    """Run the random changes, interpreted: each is a new statement whose generated code
    would be compiled once and never used again (the SQL oracle's rounds of 20 statements:
    16.5 s against 19-20 s compiled)."""
    with execution.for_small_data(project.spark):
        for statement in statements:
            project.sql(statement)


def check_round(project: Project, specs: list[ViewSpec], label: str, verify: bool) -> None:
    """Every view equals its SELECT; with ``verify``, ``verify()`` agrees (it costs as much
    again, so it runs after the last round only) and so do the row counts of ``status()``
    (some from Delta's file statistics, the others counted)."""
    started = time.perf_counter()
    rows: dict[str, int] = {}
    failures = compare_views(project.spark, project.database, specs, label, rows)
    print(f"  {label.splitlines()[0]}: compare {time.perf_counter() - started:.1f}s", flush=True)
    assert not failures, (
        f"{label}: {len(failures)} view(s) differ from their SELECT\n\n" + "\n\n".join(failures)
    )
    if verify:
        assert {s.view.split(".")[-1]: s.rows for s in project.status()} == rows, (
            f"{label}: status() miscounts rows"
        )
        verified = project.verify()
        assert sorted(r.view for r in verified) == sorted(
            f"{project.database}.{s.name}" for s in specs
        )
        bad = [
            f"{r.view}: missing {r.missing} extra {r.extra} {r.problem}"
            for r in verified
            if not r.ok
        ]
        assert not bad, f"{label}: verify() disagrees: " + "; ".join(bad)


@contextlib.contextmanager
def guessing_history(enabled: bool, recomputes: bool = True) -> Iterator[None]:
    """Inside, when ``enabled``, every stage's history "predicts" its way, in turn a
    recompute and an applied change (``recomputes``; else always an applied change):
    guesses that may be wrong, and must still give the view's rows (``physical.learned``)."""
    if not enabled:
        yield
        return
    turns = itertools.count()

    def guess(_costs, _changed_rows: int, *_how) -> learned.Prediction:
        # ``*_how``: what else ``learned.predict`` is told (explore, the stages above)
        recompute = recomputes and next(turns) % 2 == 0
        return learned.Prediction(2.0 if recompute else 0.5, 1.0, "the oracle's guess", 1)

    with mock.patch.object(cost, "predict", guess):
        yield


@contextlib.contextmanager
def as_large(enabled: bool) -> Iterator[None]:
    """Inside, when ``enabled``, every table counts as large: every stage runs compiled
    (``physical.execution``), every join term reads its other inputs bounded by the
    change's keys (``physical.bounds``), and every change is too large to be kept as local
    rows (``physical.materialize``: cached instead, or, when expected small, computed again),
    and every full load writes its stage in key order, 10 rows a file (``physical.layout``),
    so the oracle checks each way of all four. A change of
    up to 3 keys is listed, one of more is split into ranges: the oracle's tables hold too
    few keys for the usual limit, and the churn's keys (gone again by the refresh) would
    hide a value missing at the end of a list."""
    if not enabled:
        yield
        return
    with (
        mock.patch.multiple(execution, SMALL_DATA=0, SMALL_RECOMPUTE=0),
        mock.patch.multiple(bounds, BOUNDED_FROM_BYTES=0, LISTED=3),
        mock.patch.object(materialize, "LOCAL_MOST", 0),
        mock.patch.multiple(layout, KEY_ORDER_FROM_BYTES=0, FILE_ROWS=10),
    ):
        yield


# A top-k keeps one candidate beyond its k, at least (100 for users): the oracle's few rows
# then overflow the candidates and use them up, so each of their ways is checked.
@mock.patch.object(top_k, "MARGIN", 1)
def run_oracle(
    spark,
    tmp_project: MakeProject,
    files: dict[str, list[ViewSpec]],
    seed: int,
    rounds: int,
    cost_round: bool = False,
) -> None:
    """Load random rows, refresh, then ``rounds`` times: random changes, refresh, compare.

    Round 2 empties orders and round 3 products (empty inputs, global aggregates' one row).
    One round refreshes without the event log (``unlogged``): with ``cost_round``, the
    records kept beside stage tables by the round before go stale under its commits, and
    the round after must not read them; without, it is round 1, after the first refresh,
    which keeps no such record, so it checks unlogged refreshes of random changes only.
    Plain DML must never make a view recompute, except where its plan says it recomputes
    everything on any change (shown as "recomputed" with that reason).

    The cost model is off (``recompute_above: never``) so that every incremental rule is
    what runs and is checked. With ``cost_round``, three more rounds have it on: the first
    with its analytic rules alone, as a user has it before any history: a stage whose change
    would scan what its recompute scans is recomputed, and the stages above it with it,
    among stages applied incrementally. The second with every stage's way chosen by a
    history that guesses (``guessing_history``): some stages recomputed, the others applied
    without the analytic rules, whatever they cost; a recompute below a view's table writes
    that table in one statement and leaves the stages between behind
    (``physical.one_statement``), and a view whose table the analytic round wrote so (or
    recomputed as its last stage) is written from its whole SELECT before any stage when
    its change is as large, its lowest stage left behind too. The third with the cost model
    off again, every change applied (a change as large would be decided before the stages
    once more): those stages catch up over both rounds' changes, and their views' tables are
    recomputed from them.

    The tables are small, so ivm runs their stages interpreted; the first refresh and the
    even rounds treat every table as large instead (``as_large``: compiled, and join terms
    pruned by the change's keys), so each way is checked.
    """
    specs = [spec for group in files.values() for spec in group]
    texts = {name: views_file(group) for name, group in files.items()}
    project = Project.open(
        tmp_project(
            {"migrations/0001_tables.sql": MIGRATION, "ivm.yaml": INCREMENTAL_ONLY, **texts}
        ),
        spark=spark,
    )
    project.migrate()
    changes = RandomChanges(random.Random(seed))
    apply_changes(project, changes.initial())
    recomputes_all = global_recomputes(project.plans())

    started = time.perf_counter()
    with as_large(True):
        reports = project.refresh()
    print(f"\n  seed {seed}: first refresh {time.perf_counter() - started:.1f}s", flush=True)
    assert {r.action for r in reports} == {"created"}, [(r.view, r.strategy) for r in reports]
    check_round(project, specs, f"seed {seed}, initial load", verify=rounds == 0)

    last = rounds + 3 if cost_round else rounds
    # One round refreshes without the event log (``history: {log: false}``), as a user may
    # set it, or as a refresh killed before its one append leaves things: its commits move
    # stage tables past the records the logged round before kept beside them (changes that
    # came to nothing, ``physical.records``), which the logged round after must ignore. Not
    # round 2: re-applying the change of a round that empties ``orders`` deletes nothing more.
    unlogged = rounds + 1 if cost_round else 1
    at_once: set[str] = set()  # views written in one statement by the guessing round
    for round_ in range(1, last + 1):
        statements = changes.round(table_rows(project), empty=EMPTIED.get(round_))
        apply_changes(project, statements)
        # a change to the stages over countries, whose last change often came to nothing
        if round_ == unlogged:
            moved = changes.moved_compatriot(table_rows(project))
            apply_changes(project, moved)
            statements += moved
        cost_model, learned = round_ > rounds, round_ > rounds + 1
        catching_up = round_ == rounds + 3
        if cost_model:
            project.config = dataclasses.replace(
                project.config,
                refresh=RefreshSettings(recompute_above=None) if catching_up else RefreshSettings(),
                history=HistorySettings(learn=learned),
            )
        logged = round_ != unlogged
        project.config = dataclasses.replace(
            project.config, history=dataclasses.replace(project.config.history, log=logged)
        )
        refresh_started = time.perf_counter()
        with as_large(round_ % 2 == 0), guessing_history(learned, recomputes=not catching_up):
            reports = project.refresh()
        mode = "large: compiled, pruned" if round_ % 2 == 0 else "small: interpreted"
        mode += "" if logged else ", no event log"
        early = sum(one_statement.EARLY in r.reason for r in reports)
        mode += f", {early} decided before their stages" if early else ""
        print(
            f"  seed {seed}, round {round_}: refresh {time.perf_counter() - refresh_started:.1f}s ({mode})",
            flush=True,
        )
        label = f"seed {seed}, round {round_}"
        unexpected = [
            (r.view, r.reason)
            for r in plain_dml_recomputed(reports, recomputes_all)
            if not (cost_model and r.action == "recomputed" and chosen_by_cost(r.reason))
        ]
        assert not unexpected, f"{label}: plain DML must be applied incrementally, got {unexpected}"
        if cost_model:
            assert any(r.action == "recomputed" and chosen_by_cost(r.reason) for r in reports), (
                f"{label}: the cost model recomputed nothing, so this round checked none of its recomputes"
            )
        if learned and not catching_up:
            assert any("the oracle's guess" in r.reason for r in reports), (
                f"{label}: no stage's history chose its way, so this round checked none of its choices"
            )
            at_once = written_at_once(reports)
            assert at_once, f"{label}: no view's table was written in one statement"
        if catching_up:
            caught_up = {r.view for r in reports if r.reason == one_statement.CAUGHT_UP}
            assert caught_up and caught_up <= at_once, (
                f"{label}: the views written at once before, {sorted(at_once)}, caught up "
                f"{sorted(caught_up)}"
            )
        check_round(
            project,
            specs,
            label + "\n  changes:\n    " + ";\n    ".join(statements),
            verify=round_ == last,
        )
    print(f"seed {seed}: {last} rounds in {time.perf_counter() - started:.1f}s")
