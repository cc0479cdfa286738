-- view shop.categories_sold  (views/sales.sql:17)
-- reads: order_lines
-- refresh policy: AUTO (incremental, recomputed where the cost model finds it cheaper)
-- :<table>_old is the version a stage reflects, :<table>_new the version pinned by the refresh;
-- terms for sources without changes are left out at run time, and an unchanged view runs nothing.
-- each refresh: each source's change data feed is read once per refresh and kept in memory for every stage that reads it; a batch a bag view appends is handed to the views above as that feed, not read back; the change is computed once before its MERGE: a small one collected as rows the MERGE reads from its plan (up to 20,000 rows), a larger one cached in memory; a batch appended to a trace that no stage above reads in the same refresh is computed by its INSERT; an empty change skips the MERGE and only records the new versions, in the refresh's append to the event log (with the log off, a commit of no row);
-- layout: stage tables keep a change data feed; deletion vectors once a load writes over 1,000,000 rows; a load reading 16 MiB or more writes a keyed stage in key order, 100,000 rows a file; a Delta checkpoint every 50 commits, written after the refresh's commits (by the server, between commands); a view's bag table (and the DISTINCT or aggregate of a view no other view reads) takes each change as an appended batch, read consolidated, and every 16th batch is written as the table rewritten consolidated;
-- execution: a change that reads under 32 MiB of Delta data (and is small itself), a MERGE of at most 10,000 changed rows into a table under 1 MiB, or a recompute that reads under 4 MiB, runs interpreted (no code generation), without adaptive re-planning, on one shuffle partition;
-- pruning: in a join term or a touched-keys recompute, an input that scans 8 MiB of Delta data or more is read only where its join key is among the change's keys (IN a list of up to 16, or up to 4 BETWEEN ranges split at the widest gaps): literals Delta skips files by;
-- each incremental stage: recomputed instead when a refresh's changed rows exceed 10% of the rows the stage reads (refresh.recompute_above) and 10,000 rows, or when its change would scan at least the bytes a recompute scans (an input bounded by the change's keys: the files they open); a view of several stages is written in one statement when its SELECT reads less than its changed stages read and MERGE over, each of their statements counted as 64.0 MB read.

-- stage 1/1: shop.__ivm_categories_sold [distinct] incremental: per-row counts appended as a batch, a row shown while its summed count is above zero (no other view reads this one)
-- first refresh (or recompute):
CREATE OR REPLACE TABLE `shop`.`__ivm_categories_sold`
USING DELTA
TBLPROPERTIES (
  'delta.enableChangeDataFeed'='true',
  'delta.enableDeletionVectors'='false',
  'delta.checkpointInterval'='100',
  'ivm.plan'='dc76bbad0f36d3a8'
) AS
SELECT
  `category`,
  SUM(`__ivm_w`) AS `__ivm_w`
FROM (
  SELECT
    `order_lines`.`category` AS `category`,
    `order_lines`.`__ivm_w` AS `__ivm_w`
  FROM (
    SELECT
      `category`,
      SUM(`__ivm_w`) AS `__ivm_w`
    FROM (
      SELECT
        `category` AS `category`,
        `__ivm_w` AS `__ivm_w`
      FROM `shop`.`__ivm_order_lines` VERSION AS OF :shop___ivm_order_lines_new
    ) AS `d`
    GROUP BY
      `category`
    HAVING
      SUM(`__ivm_w`) <> 0
  ) AS `order_lines`
) AS `d`
GROUP BY
  `category`
HAVING
  SUM(`__ivm_w`) <> 0;
-- each refresh:
INSERT INTO `shop`.`__ivm_categories_sold` (
  `category`,
  `__ivm_w`
)
SELECT
  `category`,
  `__ivm_w`
FROM (
  SELECT
    `category`,
    SUM(`__ivm_w`) AS `__ivm_w`
  FROM (
    SELECT
      `order_lines`.`category` AS `category`,
      `order_lines`.`__ivm_w` AS `__ivm_w`
    FROM (
      SELECT
        `category` AS `category`,
        IF(`_change_type` IN ('insert', 'update_postimage'), 1, -1) * `__ivm_w` AS `__ivm_w`
      FROM TABLE_CHANGES(
        'shop.__ivm_order_lines',
        :shop___ivm_order_lines_old + 1,
        :shop___ivm_order_lines_new
      )
    ) AS `order_lines`
  ) AS `d`
  GROUP BY
    `category`
  HAVING
    SUM(`__ivm_w`) <> 0
) AS `s`;
-- every 16th batch instead, the table rewritten consolidated:
INSERT OVERWRITE TABLE `shop`.`__ivm_categories_sold`
SELECT
  `category`,
  SUM(`__ivm_w`) AS `__ivm_w`
FROM (
  SELECT
    `category`,
    `__ivm_w`
  FROM `shop`.`__ivm_categories_sold`
  UNION ALL
  SELECT
    `category`,
    `__ivm_w`
  FROM (
    SELECT
      `category`,
      SUM(`__ivm_w`) AS `__ivm_w`
    FROM (
      SELECT
        `order_lines`.`category` AS `category`,
        `order_lines`.`__ivm_w` AS `__ivm_w`
      FROM (
        SELECT
          `category` AS `category`,
          IF(`_change_type` IN ('insert', 'update_postimage'), 1, -1) * `__ivm_w` AS `__ivm_w`
        FROM TABLE_CHANGES(
          'shop.__ivm_order_lines',
          :shop___ivm_order_lines_old + 1,
          :shop___ivm_order_lines_new
        )
      ) AS `order_lines`
    ) AS `d`
    GROUP BY
      `category`
    HAVING
      SUM(`__ivm_w`) <> 0
  ) AS `s`
) AS `d`
GROUP BY
  `category`
HAVING
  SUM(`__ivm_w`) <> 0;

-- what users query:
CREATE OR REPLACE VIEW `shop`.`categories_sold` AS
SELECT
  `category` AS `category`
FROM (
  SELECT
    `category`
  FROM `shop`.`__ivm_categories_sold`
  GROUP BY
    `category`
  HAVING
    SUM(`__ivm_w`) > 0
) AS `stored`;
