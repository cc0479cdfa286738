-- The shop's base tables. ivm reads their changes from Delta's change data feed.
CREATE TABLE customers (
  id      INT,
  name    STRING,
  country STRING
) USING DELTA;

CREATE TABLE products (
  id       INT,
  name     STRING,
  category STRING,
  price    DECIMAL(10, 2)
) USING DELTA;

CREATE TABLE orders (
  id          INT,
  customer_id INT,
  product_id  INT,
  quantity    INT,
  status      STRING
) USING DELTA;
