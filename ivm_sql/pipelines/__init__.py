"""Spark Declarative Pipelines projects: a folder with a ``spark-pipeline.yml`` is an ivm project.

``spec`` finds and reads the spec; ``settings`` makes ivm's Config of it (and of an optional
ivm.yaml beside it); ``pipeline`` reads the library files: SQL datasets (``sql_datasets``,
with ``stream_reads`` and ``temporary_views``) become ivm's views and streaming tables
(``streaming``), Python ones (``python_datasets``) are left to ``spark-pipelines``, and
``sources`` checks what the SQL datasets read of them.
"""
