"""The differential oracle: every view, after every refresh, equals its SELECT run by Spark.

Real Spark and Delta, no mocks. Rounds of random INSERTs (exact duplicates, NULLs, NULL join
keys), UPDATEs (rows moving between groups and join partners, keys to NULL and back, decimal
amounts) and DELETEs (some rows, whole groups, whole tables) go through ``Project.sql``; then
``refresh()``, then each view is compared as a bag with its SELECT evaluated directly on the
current tables (views it reads inlined from their SELECT text), and ``verify()`` must agree.
"""

from __future__ import annotations

import pytest
from oracle import ROUNDS, SEEDS, MakeProject, ViewSpec, run_oracle

# Each construct ivm maintains appears at least once; constructs share views where that
# keeps them readable, since every view costs a refresh, a comparison and a verify per round.

# views/10_linear.sql: projection with deterministic expressions, WHERE, UNION ALL (with a
# subquery in FROM), UNION, DISTINCT, WITH
LINEAR = [
    ViewSpec(
        "cust_expr",
        """
SELECT id,
       upper(name) AS uname,
       concat(coalesce(country, '??'), '-', CAST(id AS STRING)) AS tag,
       CASE WHEN score IS NULL THEN 'none' WHEN score > 5 THEN 'high' ELSE 'low' END AS band,
       score * 2 + 1 AS s2,
       substring(name, 1, 2) AS prefix,
       length(name) AS len,
       date_add(DATE '2024-01-31', coalesce(score, 0)) AS due,
       month(add_months(DATE '2024-01-31', coalesce(id, 0))) AS m,
       datediff(DATE '2024-03-01', date_sub(DATE '2024-02-01', coalesce(score, 0))) AS days
FROM customers""",
    ),
    ViewSpec(
        "big_orders",
        """
SELECT customer_id, qty * 10 AS q10, lower(status) AS status, CAST(qty AS STRING) AS qs, note
FROM orders
WHERE qty > 1 AND (status IS NULL OR status <> 'cancelled')""",
        materialized=True,
    ),  # a bag: duplicates
    ViewSpec(
        "all_labels",
        """
SELECT name AS label, 'customer' AS src FROM customers
UNION ALL
SELECT x.label, 'order' AS src FROM (SELECT note AS label, qty * 2 AS q FROM orders WHERE note IS NOT NULL) x WHERE x.q > 1
UNION ALL
SELECT category AS label, 'product' AS src FROM products""",
    ),
    ViewSpec(
        "known_ids",
        """
SELECT customer_id AS id FROM orders
UNION
SELECT id FROM customers WHERE country IS NOT NULL""",
        materialized=True,
    ),
    ViewSpec("countries", "SELECT DISTINCT country, score > 3 AS good FROM customers"),
    ViewSpec(
        "cte_join",
        """
WITH shipped AS (SELECT customer_id, qty FROM orders WHERE status = 'shipped'),
     named AS (SELECT id, upper(name) AS name FROM customers)
SELECT n.name, s.qty FROM shipped s JOIN named n ON s.customer_id = n.id""",
    ),
]

# views/20_joins.sql: inner joins of 3 and 2 tables, self-join, comma join, column list
JOINS = [
    ViewSpec(
        "order_lines",
        """
SELECT o.id AS order_id, c.name, c.country, p.category, o.qty, p.price * o.qty AS amount,
       CAST(p.price AS INT) AS whole, coalesce(p.price, 0) - 1 AS less, o.status
FROM orders o
JOIN customers c ON o.customer_id = c.id
JOIN products p ON p.id = o.product_id""",
    ),
    ViewSpec(
        "compatriots",
        """
SELECT a.id AS a_id, b.id AS b_id, a.country
FROM customers a JOIN customers b ON a.country = b.country
WHERE a.id < b.id""",
    ),
    ViewSpec(
        "comma_join",
        """
SELECT o.id, p.category, o.qty + p.id AS mix
FROM orders o, products p
WHERE o.product_id = p.id AND (p.price > 1 OR p.price IS NULL)""",
        materialized=True,
    ),
    ViewSpec(
        "named_lines",
        "SELECT o.id, c.name FROM orders o JOIN customers c ON o.customer_id = c.id WHERE o.qty >= 1",
        columns=("oid", "who"),
    ),
]

# views/30_aggregates.sql: GROUP BY (a column, an expression), COUNT(*), COUNT(x), SUM of INT
# and DECIMAL, AVG, expressions over aggregates, HAVING, a column list, a global aggregate
# whose input empties, an aggregate over a join
AGGREGATES = [
    ViewSpec(
        "per_status",
        """
SELECT status,
       COUNT(*) AS n, COUNT(note) AS n_note, SUM(qty) AS total_qty, AVG(qty) AS avg_qty,
       SUM(qty) * 2 AS dbl, SUM(qty) / COUNT(*) AS ratio, COUNT(*) + SUM(qty) AS mixed
FROM orders GROUP BY status""",
        materialized=True,
    ),
    ViewSpec(
        "per_category",
        """
SELECT coalesce(category, 'none'), SUM(price), AVG(price), COUNT(price), COUNT(*)
FROM products GROUP BY coalesce(category, 'none') HAVING COUNT(*) > 1""",
        columns=("cat", "total", "avg_price", "priced", "cnt"),
    ),
    ViewSpec(
        "totals",
        """
SELECT COUNT(*) AS n, COUNT(o.qty) AS nq, SUM(o.qty) AS q, AVG(o.qty) AS a,
       SUM(p.price * o.qty) AS money, SUM(p.price) * 2 AS twice
FROM orders o JOIN products p ON o.product_id = p.id
WHERE o.status = 'shipped' OR p.category = 'toys'""",
    ),
    ViewSpec(
        "cust_order_stats",
        """
SELECT c.country, COUNT(*) AS orders, SUM(o.qty) AS qty, SUM(o.qty) - COUNT(o.qty) AS spread
FROM orders o JOIN customers c ON o.customer_id = c.id GROUP BY c.country""",
    ),
]

# views/40_stacked.sql: views over views (an aggregate over a join view, a DISTINCT over a
# view, a view over a column-list view, a join of two views), a join against an aggregated
# subquery, and an aggregate above that join (a stage in the middle)
STACKED = [
    ViewSpec(
        "revenue_by_country",
        """
SELECT country, SUM(amount) AS revenue, COUNT(*) AS n, AVG(qty) AS avg_qty
FROM order_lines GROUP BY country""",
        reads=("order_lines",),
    ),
    ViewSpec(
        "line_categories",
        "SELECT DISTINCT category, status FROM order_lines",
        reads=("order_lines",),
    ),
    ViewSpec(
        "big_categories",
        "SELECT cat, cnt * 10 AS cnt10, total FROM per_category WHERE cat <> 'food'",
        reads=("per_category",),
    ),
    ViewSpec(
        "cust_vs_total",
        """
SELECT c.id, c.name, t.total_qty, t.n
FROM customers c
JOIN (SELECT customer_id, SUM(qty) AS total_qty, COUNT(*) AS n FROM orders GROUP BY customer_id) t
  ON t.customer_id = c.id""",
        materialized=True,
    ),
    ViewSpec(
        "country_rollup",
        """
SELECT c.country, SUM(t.total_qty) AS q, COUNT(*) AS n
FROM customers c
JOIN (SELECT customer_id, SUM(qty) AS total_qty FROM orders GROUP BY customer_id) t ON t.customer_id = c.id
GROUP BY c.country""",
    ),
    ViewSpec(
        "rich_countries",
        """
SELECT r.country, r.revenue, k.good, w.n
FROM revenue_by_country r
JOIN countries k ON r.country = k.country
JOIN (SELECT who, COUNT(*) AS n FROM named_lines GROUP BY who) w ON w.n = r.n""",
        reads=("revenue_by_country", "countries", "named_lines"),
    ),
]

FILES = {
    "views/10_linear.sql": LINEAR,
    "views/20_joins.sql": JOINS,
    "views/30_aggregates.sql": AGGREGATES,
    "views/40_stacked.sql": STACKED,
}


@pytest.mark.deep
@pytest.mark.parametrize("seed", SEEDS)
def test_views_equal_their_select_after_random_changes(
    spark, tmp_project: MakeProject, seed: int
) -> None:
    run_oracle(spark, tmp_project, FILES, seed, ROUNDS, cost_round=True)
