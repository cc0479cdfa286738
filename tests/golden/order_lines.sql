-- view shop.order_lines  (views/sales.sql:2)
-- reads: shop.orders, shop.customers, shop.products
-- refresh policy: AUTO (incremental, recomputed where the cost model finds it cheaper)
-- :<table>_old is the version a stage reflects, :<table>_new the version pinned by the refresh;
-- terms for sources without changes are left out at run time, and an unchanged view runs nothing.
-- each refresh: each source's change data feed is read once per refresh and kept in memory for every stage that reads it; a batch a bag view appends is handed to the views above as that feed, not read back; the change is computed once before its MERGE: a small one collected as rows the MERGE reads from its plan (up to 20,000 rows), a larger one cached in memory; a batch appended to a trace that no stage above reads in the same refresh is computed by its INSERT; an empty change skips the MERGE and only records the new versions, in the refresh's append to the event log (with the log off, a commit of no row);
-- layout: stage tables keep a change data feed; deletion vectors once a load writes over 1,000,000 rows; a load reading 16 MiB or more writes a keyed stage in key order, 100,000 rows a file; a Delta checkpoint every 50 commits, written after the refresh's commits (by the server, between commands); a view's bag table (and the DISTINCT or aggregate of a view no other view reads) takes each change as an appended batch, read consolidated, and every 16th batch is written as the table rewritten consolidated;
-- execution: a change that reads under 32 MiB of Delta data (and is small itself), a MERGE of at most 10,000 changed rows into a table under 1 MiB, or a recompute that reads under 4 MiB, runs interpreted (no code generation), without adaptive re-planning, on one shuffle partition;
-- pruning: in a join term or a touched-keys recompute, an input that scans 8 MiB of Delta data or more is read only where its join key is among the change's keys (IN a list of up to 16, or up to 4 BETWEEN ranges split at the widest gaps): literals Delta skips files by;
-- each incremental stage: recomputed instead when a refresh's changed rows exceed 10% of the rows the stage reads (refresh.recompute_above) and 10,000 rows, or when its change would scan at least the bytes a recompute scans (an input bounded by the change's keys: the files they open); a view of several stages is written in one statement when its SELECT reads less than its changed stages read and MERGE over, each of their statements counted as 64.0 MB read.

-- stage 1/1: shop.__ivm_order_lines [bag] incremental: linear and join changes appended to the stored rows as a batch (multiplicity per row)
-- first refresh (or recompute):
CREATE OR REPLACE TABLE `shop`.`__ivm_order_lines`
USING DELTA
TBLPROPERTIES (
  'delta.enableChangeDataFeed'='true',
  'delta.enableDeletionVectors'='false',
  'delta.checkpointInterval'='100',
  'ivm.plan'='894e4aa46c178a6c'
) AS
SELECT
  `order_id`,
  `customer`,
  `country`,
  `product`,
  `category`,
  `quantity`,
  `amount`,
  `status`,
  SUM(`__ivm_w`) AS `__ivm_w`
FROM (
  SELECT
    `o`.`id` AS `order_id`,
    `c`.`name` AS `customer`,
    `c`.`country` AS `country`,
    `p`.`name` AS `product`,
    `p`.`category` AS `category`,
    `o`.`quantity` AS `quantity`,
    `o`.`quantity` * `p`.`price` AS `amount`,
    `o`.`status` AS `status`,
    1 AS `__ivm_w`
  FROM `shop`.`orders` VERSION AS OF :shop_orders_new AS `o`
  INNER JOIN `shop`.`customers` VERSION AS OF :shop_customers_new AS `c`
    ON `o`.`customer_id` = `c`.`id`
  INNER JOIN `shop`.`products` VERSION AS OF :shop_products_new AS `p`
    ON `o`.`product_id` = `p`.`id`
) AS `d`
GROUP BY
  `order_id`,
  `customer`,
  `country`,
  `product`,
  `category`,
  `quantity`,
  `amount`,
  `status`
HAVING
  SUM(`__ivm_w`) <> 0;
-- each refresh:
INSERT INTO `shop`.`__ivm_order_lines` (
  `order_id`,
  `customer`,
  `country`,
  `product`,
  `category`,
  `quantity`,
  `amount`,
  `status`,
  `__ivm_w`
)
SELECT
  `order_id`,
  `customer`,
  `country`,
  `product`,
  `category`,
  `quantity`,
  `amount`,
  `status`,
  `__ivm_w`
FROM (
  SELECT
    `order_id`,
    `customer`,
    `country`,
    `product`,
    `category`,
    `quantity`,
    `amount`,
    `status`,
    SUM(`__ivm_w`) AS `__ivm_w`
  FROM (
    SELECT
      `o`.`id` AS `order_id`,
      `c`.`name` AS `customer`,
      `c`.`country` AS `country`,
      `p`.`name` AS `product`,
      `p`.`category` AS `category`,
      `o`.`quantity` AS `quantity`,
      `o`.`quantity` * `p`.`price` AS `amount`,
      `o`.`status` AS `status`,
      `o`.`__ivm_w` * `c`.`__ivm_w` * `p`.`__ivm_w` AS `__ivm_w`
    FROM (
      SELECT
        `id` AS `id`,
        `customer_id` AS `customer_id`,
        `product_id` AS `product_id`,
        `quantity` AS `quantity`,
        `status` AS `status`,
        IF(`_change_type` IN ('insert', 'update_postimage'), 1, -1) AS `__ivm_w`
      FROM TABLE_CHANGES('shop.orders', :shop_orders_old + 1, :shop_orders_new)
    ) AS `o`
    INNER JOIN (
      SELECT
        `id` AS `id`,
        `name` AS `name`,
        `country` AS `country`,
        1 AS `__ivm_w`
      FROM `shop`.`customers` VERSION AS OF :shop_customers_new
      UNION ALL
      SELECT
        `id` AS `id`,
        `name` AS `name`,
        `country` AS `country`,
        IF(`_change_type` IN ('insert', 'update_postimage'), -1, 1) AS `__ivm_w`
      FROM TABLE_CHANGES('shop.customers', :shop_customers_old + 1, :shop_customers_new)
    ) AS `c`
      ON `o`.`customer_id` = `c`.`id`
    INNER JOIN (
      SELECT
        `id` AS `id`,
        `name` AS `name`,
        `category` AS `category`,
        `price` AS `price`,
        1 AS `__ivm_w`
      FROM `shop`.`products` VERSION AS OF :shop_products_new
      UNION ALL
      SELECT
        `id` AS `id`,
        `name` AS `name`,
        `category` AS `category`,
        `price` AS `price`,
        IF(`_change_type` IN ('insert', 'update_postimage'), -1, 1) AS `__ivm_w`
      FROM TABLE_CHANGES('shop.products', :shop_products_old + 1, :shop_products_new)
    ) AS `p`
      ON `o`.`product_id` = `p`.`id`
    UNION ALL
    SELECT
      `o`.`id` AS `order_id`,
      `c`.`name` AS `customer`,
      `c`.`country` AS `country`,
      `p`.`name` AS `product`,
      `p`.`category` AS `category`,
      `o`.`quantity` AS `quantity`,
      `o`.`quantity` * `p`.`price` AS `amount`,
      `o`.`status` AS `status`,
      `c`.`__ivm_w` * `p`.`__ivm_w` AS `__ivm_w`
    FROM `shop`.`orders` VERSION AS OF :shop_orders_new AS `o`
    INNER JOIN (
      SELECT
        `id` AS `id`,
        `name` AS `name`,
        `country` AS `country`,
        IF(`_change_type` IN ('insert', 'update_postimage'), 1, -1) AS `__ivm_w`
      FROM TABLE_CHANGES('shop.customers', :shop_customers_old + 1, :shop_customers_new)
    ) AS `c`
      ON `o`.`customer_id` = `c`.`id`
    INNER JOIN (
      SELECT
        `id` AS `id`,
        `name` AS `name`,
        `category` AS `category`,
        `price` AS `price`,
        1 AS `__ivm_w`
      FROM `shop`.`products` VERSION AS OF :shop_products_new
      UNION ALL
      SELECT
        `id` AS `id`,
        `name` AS `name`,
        `category` AS `category`,
        `price` AS `price`,
        IF(`_change_type` IN ('insert', 'update_postimage'), -1, 1) AS `__ivm_w`
      FROM TABLE_CHANGES('shop.products', :shop_products_old + 1, :shop_products_new)
    ) AS `p`
      ON `o`.`product_id` = `p`.`id`
    UNION ALL
    SELECT
      `o`.`id` AS `order_id`,
      `c`.`name` AS `customer`,
      `c`.`country` AS `country`,
      `p`.`name` AS `product`,
      `p`.`category` AS `category`,
      `o`.`quantity` AS `quantity`,
      `o`.`quantity` * `p`.`price` AS `amount`,
      `o`.`status` AS `status`,
      `p`.`__ivm_w` AS `__ivm_w`
    FROM `shop`.`orders` VERSION AS OF :shop_orders_new AS `o`
    INNER JOIN `shop`.`customers` VERSION AS OF :shop_customers_new AS `c`
      ON `o`.`customer_id` = `c`.`id`
    INNER JOIN (
      SELECT
        `id` AS `id`,
        `name` AS `name`,
        `category` AS `category`,
        `price` AS `price`,
        IF(`_change_type` IN ('insert', 'update_postimage'), 1, -1) AS `__ivm_w`
      FROM TABLE_CHANGES('shop.products', :shop_products_old + 1, :shop_products_new)
    ) AS `p`
      ON `o`.`product_id` = `p`.`id`
  ) AS `d`
  GROUP BY
    `order_id`,
    `customer`,
    `country`,
    `product`,
    `category`,
    `quantity`,
    `amount`,
    `status`
  HAVING
    SUM(`__ivm_w`) <> 0
) AS `s`;
-- every 16th batch instead, the table rewritten consolidated:
INSERT OVERWRITE TABLE `shop`.`__ivm_order_lines`
SELECT
  `order_id`,
  `customer`,
  `country`,
  `product`,
  `category`,
  `quantity`,
  `amount`,
  `status`,
  SUM(`__ivm_w`) AS `__ivm_w`
FROM (
  SELECT
    `order_id`,
    `customer`,
    `country`,
    `product`,
    `category`,
    `quantity`,
    `amount`,
    `status`,
    `__ivm_w`
  FROM `shop`.`__ivm_order_lines`
  UNION ALL
  SELECT
    `order_id`,
    `customer`,
    `country`,
    `product`,
    `category`,
    `quantity`,
    `amount`,
    `status`,
    `__ivm_w`
  FROM (
    SELECT
      `order_id`,
      `customer`,
      `country`,
      `product`,
      `category`,
      `quantity`,
      `amount`,
      `status`,
      SUM(`__ivm_w`) AS `__ivm_w`
    FROM (
      SELECT
        `o`.`id` AS `order_id`,
        `c`.`name` AS `customer`,
        `c`.`country` AS `country`,
        `p`.`name` AS `product`,
        `p`.`category` AS `category`,
        `o`.`quantity` AS `quantity`,
        `o`.`quantity` * `p`.`price` AS `amount`,
        `o`.`status` AS `status`,
        `o`.`__ivm_w` * `c`.`__ivm_w` * `p`.`__ivm_w` AS `__ivm_w`
      FROM (
        SELECT
          `id` AS `id`,
          `customer_id` AS `customer_id`,
          `product_id` AS `product_id`,
          `quantity` AS `quantity`,
          `status` AS `status`,
          IF(`_change_type` IN ('insert', 'update_postimage'), 1, -1) AS `__ivm_w`
        FROM TABLE_CHANGES('shop.orders', :shop_orders_old + 1, :shop_orders_new)
      ) AS `o`
      INNER JOIN (
        SELECT
          `id` AS `id`,
          `name` AS `name`,
          `country` AS `country`,
          1 AS `__ivm_w`
        FROM `shop`.`customers` VERSION AS OF :shop_customers_new
        UNION ALL
        SELECT
          `id` AS `id`,
          `name` AS `name`,
          `country` AS `country`,
          IF(`_change_type` IN ('insert', 'update_postimage'), -1, 1) AS `__ivm_w`
        FROM TABLE_CHANGES('shop.customers', :shop_customers_old + 1, :shop_customers_new)
      ) AS `c`
        ON `o`.`customer_id` = `c`.`id`
      INNER JOIN (
        SELECT
          `id` AS `id`,
          `name` AS `name`,
          `category` AS `category`,
          `price` AS `price`,
          1 AS `__ivm_w`
        FROM `shop`.`products` VERSION AS OF :shop_products_new
        UNION ALL
        SELECT
          `id` AS `id`,
          `name` AS `name`,
          `category` AS `category`,
          `price` AS `price`,
          IF(`_change_type` IN ('insert', 'update_postimage'), -1, 1) AS `__ivm_w`
        FROM TABLE_CHANGES('shop.products', :shop_products_old + 1, :shop_products_new)
      ) AS `p`
        ON `o`.`product_id` = `p`.`id`
      UNION ALL
      SELECT
        `o`.`id` AS `order_id`,
        `c`.`name` AS `customer`,
        `c`.`country` AS `country`,
        `p`.`name` AS `product`,
        `p`.`category` AS `category`,
        `o`.`quantity` AS `quantity`,
        `o`.`quantity` * `p`.`price` AS `amount`,
        `o`.`status` AS `status`,
        `c`.`__ivm_w` * `p`.`__ivm_w` AS `__ivm_w`
      FROM `shop`.`orders` VERSION AS OF :shop_orders_new AS `o`
      INNER JOIN (
        SELECT
          `id` AS `id`,
          `name` AS `name`,
          `country` AS `country`,
          IF(`_change_type` IN ('insert', 'update_postimage'), 1, -1) AS `__ivm_w`
        FROM TABLE_CHANGES('shop.customers', :shop_customers_old + 1, :shop_customers_new)
      ) AS `c`
        ON `o`.`customer_id` = `c`.`id`
      INNER JOIN (
        SELECT
          `id` AS `id`,
          `name` AS `name`,
          `category` AS `category`,
          `price` AS `price`,
          1 AS `__ivm_w`
        FROM `shop`.`products` VERSION AS OF :shop_products_new
        UNION ALL
        SELECT
          `id` AS `id`,
          `name` AS `name`,
          `category` AS `category`,
          `price` AS `price`,
          IF(`_change_type` IN ('insert', 'update_postimage'), -1, 1) AS `__ivm_w`
        FROM TABLE_CHANGES('shop.products', :shop_products_old + 1, :shop_products_new)
      ) AS `p`
        ON `o`.`product_id` = `p`.`id`
      UNION ALL
      SELECT
        `o`.`id` AS `order_id`,
        `c`.`name` AS `customer`,
        `c`.`country` AS `country`,
        `p`.`name` AS `product`,
        `p`.`category` AS `category`,
        `o`.`quantity` AS `quantity`,
        `o`.`quantity` * `p`.`price` AS `amount`,
        `o`.`status` AS `status`,
        `p`.`__ivm_w` AS `__ivm_w`
      FROM `shop`.`orders` VERSION AS OF :shop_orders_new AS `o`
      INNER JOIN `shop`.`customers` VERSION AS OF :shop_customers_new AS `c`
        ON `o`.`customer_id` = `c`.`id`
      INNER JOIN (
        SELECT
          `id` AS `id`,
          `name` AS `name`,
          `category` AS `category`,
          `price` AS `price`,
          IF(`_change_type` IN ('insert', 'update_postimage'), 1, -1) AS `__ivm_w`
        FROM TABLE_CHANGES('shop.products', :shop_products_old + 1, :shop_products_new)
      ) AS `p`
        ON `o`.`product_id` = `p`.`id`
    ) AS `d`
    GROUP BY
      `order_id`,
      `customer`,
      `country`,
      `product`,
      `category`,
      `quantity`,
      `amount`,
      `status`
    HAVING
      SUM(`__ivm_w`) <> 0
  ) AS `s`
) AS `d`
GROUP BY
  `order_id`,
  `customer`,
  `country`,
  `product`,
  `category`,
  `quantity`,
  `amount`,
  `status`
HAVING
  SUM(`__ivm_w`) <> 0;
-- large inputs read only where the change's keys are: shop.customers.id by the change's customer_id; shop.orders.customer_id by the change's id; shop.orders.product_id by the change's id; shop.products.id by the change's product_id

-- what users query:
CREATE OR REPLACE VIEW `shop`.`order_lines` AS
SELECT
  `order_id`,
  `customer`,
  `country`,
  `product`,
  `category`,
  `quantity`,
  `amount`,
  `status`
FROM (
  SELECT
    `order_id`,
    `customer`,
    `country`,
    `product`,
    `category`,
    `quantity`,
    `amount`,
    `status`,
    EXPLODE(SEQUENCE(1, `__ivm_w`)) AS `__ivm_copy`
  FROM (
    SELECT
      `order_id`,
      `customer`,
      `country`,
      `product`,
      `category`,
      `quantity`,
      `amount`,
      `status`,
      SUM(`__ivm_w`) AS `__ivm_w`
    FROM (
      SELECT
        `order_id` AS `order_id`,
        `customer` AS `customer`,
        `country` AS `country`,
        `product` AS `product`,
        `category` AS `category`,
        `quantity` AS `quantity`,
        CAST(`amount` AS DECIMAL(10, 2)) AS `amount`,
        `status` AS `status`,
        `__ivm_w` AS `__ivm_w`
      FROM `shop`.`__ivm_order_lines`
    ) AS `d`
    GROUP BY
      `order_id`,
      `customer`,
      `country`,
      `product`,
      `category`,
      `quantity`,
      `amount`,
      `status`
    HAVING
      SUM(`__ivm_w`) <> 0
  ) AS `stored`
) AS `rows`;
