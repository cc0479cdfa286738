"""The physical layer: how a logical refresh plan runs on Spark and Delta.

The rules in ``algebra`` and ``incremental`` say *what* a stage's change is. The decisions
here say *how* it is computed and applied, and they never change a result:

- ``recompute``: when a stage must be recomputed whatever the cost (new, redefined, over a
  recomputed table, a source whose history is gone or cannot be read as a change), and why;
- ``cost``: incremental or recompute, from the size of the change against the size of the
  data it touches (the choice Databricks' Enzyme makes per refresh), with the reason shown;
- ``changes``: each source's change data feed is read once per refresh and kept in memory
  for every stage that reads it;
- ``materialize``: a stage's consolidated change is computed once, as local rows when small
  (one job; the MERGE reads them from its plan) or kept in executor memory, so the MERGE
  does not recompute it and an empty change skips the MERGE;
- ``execution``: a statement that reads little Delta data, and a MERGE of few rows into a
  small table, runs interpreted, without compiling its plan to Java bytecode, which costs
  more than it saves on few rows;
- ``sizes``: what the decisions weigh: each table version's bytes and file statistics from
  Delta's checksum files, and its rows, each asked once per refresh;
- ``policy``: a view's refresh policy turns the cost model off, or refuses a recompute;
- ``bounds``: which literal prunes what: a large input of a join term read bounded by the
  change's keys;
- ``layout``: stage tables keep a change data feed, and get deletion vectors once large;
- ``view_table``: the view's table as its clauses ask (comment, properties, partitioning),
  and how a recompute overwrites it.
"""
