"""The physical layer: how a logical refresh plan runs on Spark and Delta.

The rules in ``algebra`` and ``incremental`` say *what* a stage's change is. The decisions
here say *how* it is computed and applied, and they never change a result:

- ``cost``: incremental or recompute, from the size of the change against the size of the
  data it touches (the choice Databricks' Enzyme makes per refresh), with the reason shown;
- ``changes``: each source's change data feed is read once per refresh and kept in memory
  for every stage that reads it;
- ``materialize``: a stage's consolidated change is computed once and kept in executor
  memory, so the MERGE does not recompute it and an empty change skips the MERGE;
- ``execution``: a statement that reads little Delta data runs interpreted, without
  compiling its plan to Java bytecode, which costs more than it saves on few rows;
- ``sizes``: what the decisions weigh: each table version's bytes and file statistics from
  Delta's checksum files, and its rows, each asked once per refresh;
- ``layout``: stage tables keep a change data feed, and get deletion vectors once large;
- ``describe``: the same decisions as text, for ``ivm compile``.
"""
