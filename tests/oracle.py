"""The differential oracle's helpers: view specs, bag comparison, and random DML.

A view is compared with its own SELECT evaluated directly by Spark over the base tables.
Views read by a view are inlined as CTEs built from *their* SELECT text, so the expected
result never reads a table ivm wrote.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from dataclasses import dataclass
from decimal import Decimal
from typing import Iterable


@dataclass(frozen=True)
class ViewSpec:
    """One view: its name, its SELECT as written, an optional column list, the views it reads."""

    name: str
    select: str
    columns: tuple[str, ...] | None = None
    reads: tuple[str, ...] = ()
    materialized: bool = False

    def create_statement(self) -> str:
        kind = "MATERIALIZED VIEW" if self.materialized else "VIEW"
        names = f" ({', '.join(self.columns)})" if self.columns else ""
        return f"CREATE {kind} {self.name}{names} AS\n{self.select.strip()};\n"


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


def normalize(value):
    """Row values made comparable: doubles rounded to 9 places (AVG of ints is a double)."""
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return value
        return round(value, 9) + 0.0
    return value


def bag_difference(expected: Counter, actual: Counter) -> tuple[Counter, Counter]:
    """(rows the view lacks, rows the view should not have), with multiplicities."""
    return expected - actual, actual - expected


def schema_of(frame) -> list[tuple[str, str]]:
    return [(f.name, f.dataType.simpleString()) for f in frame.schema.fields]


def compare_views(spark, database: str, specs: list[ViewSpec], label: str) -> list[str]:
    """Compare every view with its SELECT; one message per view that differs (empty: all equal).

    Each view must have its SELECT's column names and Spark types, and hold exactly the bag
    of rows its SELECT returns. One Spark job per view reads both sides.
    """
    from pyspark.sql import functions as F

    by_name = {spec.name: spec for spec in specs}
    failures = []
    for spec in specs:
        query = expected_sql(spec, by_name)
        actual = spark.table(f"{database}.{spec.name}")
        expected = spark.sql(query)
        actual_schema, expected_schema = schema_of(actual), schema_of(expected)
        if actual_schema != expected_schema:
            failures.append(
                f"view {spec.name}, {label}: columns/types differ\n"
                f"  view:   {actual_schema}\n  select: {expected_schema}"
            )
            continue
        side = "__oracle_side"
        both = actual.withColumn(side, F.lit(True)).unionAll(expected.withColumn(side, F.lit(False)))
        bags = {True: Counter(), False: Counter()}
        for row in both.collect():
            bags[row[-1]][tuple(normalize(v) for v in row[:-1])] += 1
        missing, extra = bag_difference(bags[False], bags[True])
        if missing or extra:
            failures.append(
                f"view {spec.name}, {label}: view differs from its SELECT "
                f"({sum(bags[True].values())} rows in view, {sum(bags[False].values())} expected)\n"
                f"  missing from view (row: times): {_show(missing)}\n"
                f"  extra in view (row: times):     {_show(extra)}\n"
                f"  SELECT:\n{query}"
            )
    return failures


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
    if isinstance(value, Decimal):
        return f"CAST('{value}' AS DECIMAL(10,2))"
    if isinstance(value, int):
        return str(value)
    return "'" + str(value).replace("\\", "\\\\").replace("'", "\\'") + "'"


def values_clause(rows: list[tuple]) -> str:
    return ", ".join("(" + ", ".join(sql_literal(v) for v in row) + ")" for row in rows)


# random changes --------------------------------------------------------------------------

NAMES = ["ann", "bob", "Cy", "dee", "", None]
COUNTRIES = ["DE", "FR", "US", None]
SCORES = [None, 0, 3, 5, 7, 9, -2]
CATEGORIES = ["toys", "food", "books", None]
PRICES = [None, Decimal("0.99"), Decimal("5.00"), Decimal("12.50"), Decimal("100.01"), Decimal("-3.33")]
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
    """Random INSERT / UPDATE / DELETE statements against customers, products and orders."""

    def __init__(self, rng: random.Random):
        self.rng = rng

    def customer(self) -> tuple:
        r = self.rng
        return (maybe(r, CUSTOMER_IDS, 0.1), r.choice(NAMES), r.choice(COUNTRIES), r.choice(SCORES))

    def product(self) -> tuple:
        r = self.rng
        return (maybe(r, PRODUCT_IDS, 0.1), r.choice(CATEGORIES), r.choice(PRICES))

    def order(self) -> tuple:
        r = self.rng
        return (
            maybe(r, ORDER_IDS, 0.1), maybe(r, CUSTOMER_IDS + [7], 0.2), maybe(r, PRODUCT_IDS + [5], 0.2),
            r.choice(QTYS), r.choice(STATUSES), r.choice(NOTES),
        )

    def initial(self) -> list[str]:
        return [
            f"INSERT INTO customers VALUES {values_clause([self.customer() for _ in range(8)])}",
            f"INSERT INTO products VALUES {values_clause([self.product() for _ in range(6)])}",
            f"INSERT INTO orders VALUES {values_clause([self.order() for _ in range(20)])}",
        ]

    def round(self, current: dict[str, list[tuple]], empty: str | None = None) -> list[str]:
        """About ten statements; ``current`` holds each table's rows (for exact duplicates).
        With ``empty``, that whole table is deleted last (global aggregates see no rows)."""
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
        choices = [self.update_orders, self.update_customers, self.update_products, self.delete_some]
        for _ in range(r.randint(3, 6)):
            statements.append(r.choice(choices)())
        r.shuffle(statements)
        if empty is not None:
            statements.append(f"DELETE FROM {empty}")
        return statements

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
        sets = r.choice([
            lambda: f"customer_id = {sql_literal(maybe(r, CUSTOMER_IDS + [7], 0.3))}",  # between join partners, to NULL
            lambda: f"product_id = {sql_literal(maybe(r, PRODUCT_IDS, 0.3))}",
            lambda: f"status = {sql_literal(r.choice(STATUSES))}",  # between groups
            lambda: f"qty = {sql_literal(r.choice(QTYS))}",
            lambda: "qty = qty + 1, note = " + sql_literal(r.choice(NOTES)),
            lambda: "customer_id = coalesce(customer_id, 1), product_id = coalesce(product_id, 2)",  # NULL back
        ])()
        return f"UPDATE orders SET {sets} WHERE {self.order_filter()}"

    def update_customers(self) -> str:
        r = self.rng
        sets = r.choice([
            lambda: f"country = {sql_literal(r.choice(COUNTRIES))}",
            lambda: f"score = {sql_literal(r.choice(SCORES))}",
            lambda: f"name = {sql_literal(r.choice(NAMES))}",
            lambda: f"id = {sql_literal(maybe(r, CUSTOMER_IDS, 0.3))}",
            lambda: "id = coalesce(id, 3)",
        ])()
        where = r.choice([f"id = {r.choice(CUSTOMER_IDS)}", f"country = {sql_literal(r.choice(COUNTRIES[:3]))}", "id IS NULL"])
        return f"UPDATE customers SET {sets} WHERE {where}"

    def update_products(self) -> str:
        r = self.rng
        sets = r.choice([
            lambda: f"price = {sql_literal(r.choice(PRICES))}",
            lambda: "price = price + CAST('1.25' AS DECIMAL(10,2))",
            lambda: f"category = {sql_literal(r.choice(CATEGORIES))}",
            lambda: f"id = {sql_literal(maybe(r, PRODUCT_IDS + [5], 0.3))}",
        ])()
        where = r.choice([f"id = {r.choice(PRODUCT_IDS)}", f"category = {sql_literal(r.choice(CATEGORIES[:3]))}", "price IS NULL"])
        return f"UPDATE products SET {sets} WHERE {where}"

    def delete_some(self) -> str:
        r = self.rng
        table = r.choice(["orders", "orders", "customers", "products"])
        if table == "orders":
            return f"DELETE FROM orders WHERE {self.order_filter()}"
        if table == "customers":
            country = r.choice(COUNTRIES)
            where = "country IS NULL" if country is None else f"country = {sql_literal(country)}"  # a whole group
            return f"DELETE FROM customers WHERE {r.choice([where, f'id = {r.choice(CUSTOMER_IDS)}'])}"
        return f"DELETE FROM products WHERE {r.choice([f'id = {r.choice(PRODUCT_IDS)}', 'category IS NULL', 'price > 10'])}"
