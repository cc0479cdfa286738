-- view shop.revenue_by_country  (views/sales.sql:10)
-- reads: order_lines
-- refresh policy: AUTO (incremental, recomputed where the cost model finds it cheaper)
-- :<table>_old is the version a stage reflects, :<table>_new the version pinned by the refresh;
-- terms for sources without changes are left out at run time, and an unchanged view runs nothing.
-- each refresh: each source's change data feed is read once per refresh and kept in memory for every stage that reads it; a batch a bag view appends is handed to the views above as that feed, not read back; the change is computed once before its MERGE: a small one collected as rows the MERGE reads from its plan (up to 20,000 rows), a larger one cached in memory; a batch appended to a trace that no stage above reads in the same refresh is computed by its INSERT; an empty change skips the MERGE and only records the new versions, in the refresh's append to the event log (with the log off, a commit of no row);
-- layout: stage tables keep a change data feed; deletion vectors once a load writes over 1,000,000 rows; a load reading 16 MiB or more writes a keyed stage in key order, 100,000 rows a file; a Delta checkpoint every 50 commits, written after the refresh's commits (by the server, between commands); a view's bag table (and the DISTINCT or aggregate of a view no other view reads) takes each change as an appended batch, read consolidated, and every 16th batch is written as the table rewritten consolidated;
-- execution: a change that reads under 32 MiB of Delta data (and is small itself), a MERGE of at most 10,000 changed rows into a table under 1 MiB, or a recompute that reads under 4 MiB, runs interpreted (no code generation), without adaptive re-planning, on one shuffle partition;
-- pruning: in a join term or a touched-keys recompute, an input that scans 8 MiB of Delta data or more is read only where its join key is among the change's keys (IN a list of up to 16, or up to 4 BETWEEN ranges split at the widest gaps): literals Delta skips files by;
-- each incremental stage: recomputed instead when a refresh's changed rows exceed 10% of the rows the stage reads (refresh.recompute_above) and 10,000 rows, or when its change would scan at least the bytes a recompute scans (an input bounded by the change's keys: the files they open); a view of several stages is written in one statement when its SELECT reads less than its changed stages read and MERGE over, each of their statements counted as 64.0 MB read.

-- stage 1/1: shop.__ivm_revenue_by_country [aggregate] incremental: COUNT/SUM/AVG per group updated from the change alone, appended as a batch of per-group deltas and summed when read (no other view reads this one)
-- first refresh (or recompute):
CREATE OR REPLACE TABLE `shop`.`__ivm_revenue_by_country`
USING DELTA
TBLPROPERTIES (
  'delta.enableChangeDataFeed'='true',
  'delta.enableDeletionVectors'='false',
  'delta.checkpointInterval'='100',
  'ivm.plan'='a7a2bb7759f06d1b'
) AS
SELECT
  `g0`,
  COALESCE(SUM(`__ivm_w`), 0) AS `__ivm_count`,
  COALESCE(SUM(IF(`a0` IS NULL, 0, `__ivm_w`)), 0) AS `__ivm_n1`,
  COALESCE(SUM(`a0` * `__ivm_w`), 0) AS `__ivm_s1`,
  COALESCE(SUM(IF(`a0` IS NULL, 0, `__ivm_w`)), 0) AS `__ivm_n2`,
  COALESCE(SUM(`a0` * `__ivm_w`), 0) AS `__ivm_s2`
FROM (
  SELECT
    `order_lines`.`country` AS `g0`,
    `order_lines`.`amount` AS `a0`,
    `order_lines`.`__ivm_w` AS `__ivm_w`
  FROM (
    SELECT
      `country`,
      `amount`,
      `status`,
      SUM(`__ivm_w`) AS `__ivm_w`
    FROM (
      SELECT
        `country` AS `country`,
        CAST(`amount` AS DECIMAL(10, 2)) AS `amount`,
        `status` AS `status`,
        `__ivm_w` AS `__ivm_w`
      FROM `shop`.`__ivm_order_lines` VERSION AS OF :shop___ivm_order_lines_new
    ) AS `d`
    GROUP BY
      `country`,
      `amount`,
      `status`
    HAVING
      SUM(`__ivm_w`) <> 0
  ) AS `order_lines`
  WHERE
    `order_lines`.`status` <> 'cancelled'
) AS `d`
GROUP BY
  `g0`;
-- each refresh:
INSERT INTO `shop`.`__ivm_revenue_by_country` (
  `g0`,
  `__ivm_count`,
  `__ivm_n1`,
  `__ivm_s1`,
  `__ivm_n2`,
  `__ivm_s2`
)
SELECT
  `g0`,
  `__ivm_count`,
  `__ivm_n1`,
  `__ivm_s1`,
  `__ivm_n2`,
  `__ivm_s2`
FROM (
  SELECT
    `g0`,
    COALESCE(SUM(`__ivm_w`), 0) AS `__ivm_count`,
    COALESCE(SUM(IF(`a0` IS NULL, 0, `__ivm_w`)), 0) AS `__ivm_n1`,
    COALESCE(SUM(`a0` * `__ivm_w`), 0) AS `__ivm_s1`,
    COALESCE(SUM(IF(`a0` IS NULL, 0, `__ivm_w`)), 0) AS `__ivm_n2`,
    COALESCE(SUM(`a0` * `__ivm_w`), 0) AS `__ivm_s2`
  FROM (
    SELECT
      `order_lines`.`country` AS `g0`,
      `order_lines`.`amount` AS `a0`,
      `order_lines`.`__ivm_w` AS `__ivm_w`
    FROM (
      SELECT
        `country` AS `country`,
        CAST(`amount` AS DECIMAL(10, 2)) AS `amount`,
        `status` AS `status`,
        IF(`_change_type` IN ('insert', 'update_postimage'), 1, -1) * `__ivm_w` AS `__ivm_w`
      FROM TABLE_CHANGES(
        'shop.__ivm_order_lines',
        :shop___ivm_order_lines_old + 1,
        :shop___ivm_order_lines_new
      )
    ) AS `order_lines`
    WHERE
      `order_lines`.`status` <> 'cancelled'
  ) AS `d`
  GROUP BY
    `g0`
  HAVING
    COALESCE(SUM(`__ivm_w`), 0) <> 0
    OR COALESCE(SUM(IF(`a0` IS NULL, 0, `__ivm_w`)), 0) <> 0
    OR COALESCE(SUM(`a0` * `__ivm_w`), 0) <> 0
    OR COALESCE(SUM(IF(`a0` IS NULL, 0, `__ivm_w`)), 0) <> 0
    OR COALESCE(SUM(`a0` * `__ivm_w`), 0) <> 0
) AS `s`;
-- every 16th batch instead, the table rewritten consolidated:
INSERT OVERWRITE TABLE `shop`.`__ivm_revenue_by_country`
SELECT
  `g0`,
  SUM(`__ivm_count`) AS `__ivm_count`,
  SUM(`__ivm_n1`) AS `__ivm_n1`,
  SUM(`__ivm_s1`) AS `__ivm_s1`,
  SUM(`__ivm_n2`) AS `__ivm_n2`,
  SUM(`__ivm_s2`) AS `__ivm_s2`
FROM (
  SELECT
    `g0`,
    `__ivm_count`,
    `__ivm_n1`,
    `__ivm_s1`,
    `__ivm_n2`,
    `__ivm_s2`
  FROM `shop`.`__ivm_revenue_by_country`
  UNION ALL
  SELECT
    `g0`,
    `__ivm_count`,
    `__ivm_n1`,
    `__ivm_s1`,
    `__ivm_n2`,
    `__ivm_s2`
  FROM (
    SELECT
      `g0`,
      COALESCE(SUM(`__ivm_w`), 0) AS `__ivm_count`,
      COALESCE(SUM(IF(`a0` IS NULL, 0, `__ivm_w`)), 0) AS `__ivm_n1`,
      COALESCE(SUM(`a0` * `__ivm_w`), 0) AS `__ivm_s1`,
      COALESCE(SUM(IF(`a0` IS NULL, 0, `__ivm_w`)), 0) AS `__ivm_n2`,
      COALESCE(SUM(`a0` * `__ivm_w`), 0) AS `__ivm_s2`
    FROM (
      SELECT
        `order_lines`.`country` AS `g0`,
        `order_lines`.`amount` AS `a0`,
        `order_lines`.`__ivm_w` AS `__ivm_w`
      FROM (
        SELECT
          `country` AS `country`,
          CAST(`amount` AS DECIMAL(10, 2)) AS `amount`,
          `status` AS `status`,
          IF(`_change_type` IN ('insert', 'update_postimage'), 1, -1) * `__ivm_w` AS `__ivm_w`
        FROM TABLE_CHANGES(
          'shop.__ivm_order_lines',
          :shop___ivm_order_lines_old + 1,
          :shop___ivm_order_lines_new
        )
      ) AS `order_lines`
      WHERE
        `order_lines`.`status` <> 'cancelled'
    ) AS `d`
    GROUP BY
      `g0`
    HAVING
      COALESCE(SUM(`__ivm_w`), 0) <> 0
      OR COALESCE(SUM(IF(`a0` IS NULL, 0, `__ivm_w`)), 0) <> 0
      OR COALESCE(SUM(`a0` * `__ivm_w`), 0) <> 0
      OR COALESCE(SUM(IF(`a0` IS NULL, 0, `__ivm_w`)), 0) <> 0
      OR COALESCE(SUM(`a0` * `__ivm_w`), 0) <> 0
  ) AS `s`
) AS `d`
GROUP BY
  `g0`
HAVING
  SUM(`__ivm_count`) > 0;

-- what users query:
CREATE OR REPLACE VIEW `shop`.`revenue_by_country` AS
SELECT
  `g0` AS `country`,
  `__ivm_count` AS `orders`,
  CAST(CASE WHEN `__ivm_n1` > 0 THEN `__ivm_s1` END AS DECIMAL(10, 2)) AS `revenue`,
  CASE WHEN `__ivm_n2` > 0 THEN `__ivm_s2` / `__ivm_n2` END AS `avg_order`
FROM (
  SELECT
    `g0`,
    SUM(`__ivm_count`) AS `__ivm_count`,
    SUM(`__ivm_n1`) AS `__ivm_n1`,
    SUM(`__ivm_s1`) AS `__ivm_s1`,
    SUM(`__ivm_n2`) AS `__ivm_n2`,
    SUM(`__ivm_s2`) AS `__ivm_s2`
  FROM `shop`.`__ivm_revenue_by_country`
  GROUP BY
    `g0`
  HAVING
    SUM(`__ivm_count`) > 0
) AS `stored`;
