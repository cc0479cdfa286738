-- Every order with its customer and product: a three-way join, kept by bilinear expansion.
CREATE VIEW order_lines AS
SELECT o.id AS order_id, c.name AS customer, c.country, p.name AS product, p.category,
       o.quantity, o.quantity * p.price AS amount, o.status
FROM orders o
JOIN customers c ON o.customer_id = c.id
JOIN products p ON o.product_id = p.id;

-- A view over a view, grouped: COUNT, SUM and AVG updated per country from the change alone.
CREATE VIEW revenue_by_country AS
SELECT country, COUNT(*) AS orders, SUM(amount) AS revenue, AVG(amount) AS avg_order
FROM order_lines
WHERE status <> 'cancelled'
GROUP BY country;

-- DISTINCT: a category appears when its first order arrives and leaves with its last.
CREATE VIEW categories_sold AS
SELECT DISTINCT category FROM order_lines;

-- A global aggregate: always exactly one row, even when no order is shipped.
CREATE MATERIALIZED VIEW shipped_totals AS
SELECT COUNT(*) AS orders, SUM(quantity) AS items
FROM orders
WHERE status = 'shipped';
