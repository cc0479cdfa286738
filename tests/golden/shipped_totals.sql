-- view shop.shipped_totals  (views/sales.sql:21)
-- reads: shop.orders
-- refresh policy: AUTO (incremental, recomputed where the cost model finds it cheaper)
-- :<table>_old is the version a stage reflects, :<table>_new the version pinned by the refresh;
-- terms for sources without changes are left out at run time, and an unchanged view runs nothing.
-- each refresh: each source's change data feed is read once per refresh and kept in memory for every stage that reads it; a batch a bag view appends is handed to the views above as that feed, not read back; the change is computed once before its MERGE: a small one collected as rows the MERGE reads from its plan (up to 20,000 rows), a larger one cached in memory; a batch appended to a trace that no stage above reads in the same refresh is computed by its INSERT; an empty change skips the MERGE and only records the new versions, in the refresh's append to the event log (with the log off, a commit of no row);
-- layout: stage tables keep a change data feed; deletion vectors once a load writes over 1,000,000 rows; a load reading 16 MiB or more writes a keyed stage in key order, 100,000 rows a file; a Delta checkpoint every 50 commits, written after the refresh's commits (by the server, between commands); a view's bag table (and the DISTINCT or aggregate of a view no other view reads) takes each change as an appended batch, read consolidated, and every 16th batch is written as the table rewritten consolidated;
-- execution: a change that reads under 32 MiB of Delta data (and is small itself), a MERGE of at most 10,000 changed rows into a table under 1 MiB, or a recompute that reads under 4 MiB, runs interpreted (no code generation), without adaptive re-planning, on one shuffle partition;
-- pruning: in a join term or a touched-keys recompute, an input that scans 8 MiB of Delta data or more is read only where its join key is among the change's keys (IN a list of up to 16, or up to 4 BETWEEN ranges split at the widest gaps): literals Delta skips files by;
-- each incremental stage: recomputed instead when a refresh's changed rows exceed 10% of the rows the stage reads (refresh.recompute_above) and 10,000 rows, or when its change would scan at least the bytes a recompute scans (an input bounded by the change's keys: the files they open); a view of several stages is written in one statement when its SELECT reads less than its changed stages read and MERGE over, each of their statements counted as 64.0 MB read.

-- stage 1/1: shop.__ivm_shipped_totals [aggregate] incremental: COUNT/SUM/AVG per group updated from the change alone, appended as a batch of per-group deltas and summed when read (no other view reads this one)
-- first refresh (or recompute):
CREATE OR REPLACE TABLE `shop`.`__ivm_shipped_totals`
USING DELTA
TBLPROPERTIES (
  'delta.enableChangeDataFeed'='true',
  'delta.enableDeletionVectors'='false',
  'delta.checkpointInterval'='100',
  'ivm.plan'='cd45c190a3ac627d'
) AS
SELECT
  COALESCE(SUM(`__ivm_w`), 0) AS `__ivm_count`,
  COALESCE(SUM(IF(`a0` IS NULL, 0, `__ivm_w`)), 0) AS `__ivm_n1`,
  COALESCE(SUM(`a0` * `__ivm_w`), 0) AS `__ivm_s1`
FROM (
  SELECT
    `orders`.`quantity` AS `a0`,
    1 AS `__ivm_w`
  FROM `shop`.`orders` VERSION AS OF :shop_orders_new AS `orders`
  WHERE
    `orders`.`status` = 'shipped'
) AS `d`;
-- each refresh:
INSERT INTO `shop`.`__ivm_shipped_totals` (
  `__ivm_count`,
  `__ivm_n1`,
  `__ivm_s1`
)
SELECT
  `__ivm_count`,
  `__ivm_n1`,
  `__ivm_s1`
FROM (
  SELECT
    COALESCE(SUM(`__ivm_w`), 0) AS `__ivm_count`,
    COALESCE(SUM(IF(`a0` IS NULL, 0, `__ivm_w`)), 0) AS `__ivm_n1`,
    COALESCE(SUM(`a0` * `__ivm_w`), 0) AS `__ivm_s1`
  FROM (
    SELECT
      `orders`.`quantity` AS `a0`,
      `orders`.`__ivm_w` AS `__ivm_w`
    FROM (
      SELECT
        `quantity` AS `quantity`,
        `status` AS `status`,
        IF(`_change_type` IN ('insert', 'update_postimage'), 1, -1) AS `__ivm_w`
      FROM TABLE_CHANGES('shop.orders', :shop_orders_old + 1, :shop_orders_new)
    ) AS `orders`
    WHERE
      `orders`.`status` = 'shipped'
  ) AS `d`
  HAVING
    COALESCE(SUM(`__ivm_w`), 0) <> 0
    OR COALESCE(SUM(IF(`a0` IS NULL, 0, `__ivm_w`)), 0) <> 0
    OR COALESCE(SUM(`a0` * `__ivm_w`), 0) <> 0
) AS `s`;
-- every 16th batch instead, the table rewritten consolidated:
INSERT OVERWRITE TABLE `shop`.`__ivm_shipped_totals`
SELECT
  SUM(`__ivm_count`) AS `__ivm_count`,
  SUM(`__ivm_n1`) AS `__ivm_n1`,
  SUM(`__ivm_s1`) AS `__ivm_s1`
FROM (
  SELECT
    `__ivm_count`,
    `__ivm_n1`,
    `__ivm_s1`
  FROM `shop`.`__ivm_shipped_totals`
  UNION ALL
  SELECT
    `__ivm_count`,
    `__ivm_n1`,
    `__ivm_s1`
  FROM (
    SELECT
      COALESCE(SUM(`__ivm_w`), 0) AS `__ivm_count`,
      COALESCE(SUM(IF(`a0` IS NULL, 0, `__ivm_w`)), 0) AS `__ivm_n1`,
      COALESCE(SUM(`a0` * `__ivm_w`), 0) AS `__ivm_s1`
    FROM (
      SELECT
        `orders`.`quantity` AS `a0`,
        `orders`.`__ivm_w` AS `__ivm_w`
      FROM (
        SELECT
          `quantity` AS `quantity`,
          `status` AS `status`,
          IF(`_change_type` IN ('insert', 'update_postimage'), 1, -1) AS `__ivm_w`
        FROM TABLE_CHANGES('shop.orders', :shop_orders_old + 1, :shop_orders_new)
      ) AS `orders`
      WHERE
        `orders`.`status` = 'shipped'
    ) AS `d`
    HAVING
      COALESCE(SUM(`__ivm_w`), 0) <> 0
      OR COALESCE(SUM(IF(`a0` IS NULL, 0, `__ivm_w`)), 0) <> 0
      OR COALESCE(SUM(`a0` * `__ivm_w`), 0) <> 0
  ) AS `s`
) AS `d`;

-- what users query:
CREATE OR REPLACE VIEW `shop`.`shipped_totals` AS
SELECT
  `__ivm_count` AS `orders`,
  CASE WHEN `__ivm_n1` > 0 THEN `__ivm_s1` END AS `items`
FROM (
  SELECT
    SUM(`__ivm_count`) AS `__ivm_count`,
    SUM(`__ivm_n1`) AS `__ivm_n1`,
    SUM(`__ivm_s1`) AS `__ivm_s1`
  FROM `shop`.`__ivm_shipped_totals`
) AS `stored`;
