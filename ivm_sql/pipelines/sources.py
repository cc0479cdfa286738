"""What a pipeline's SQL views read of datasets ivm does not maintain as views.

A view may read a Python dataset (``spark-pipelines`` writes it) or a streaming table (ivm
appends to it): to ivm both are source tables, which must exist as Delta tables before the
view can be compiled. A missing one is one error at the view's line that says who makes it.
"""

from __future__ import annotations

from sqlglot import exp

from ivm_sql.errors import SqlError
from ivm_sql.pipelines.pipeline import Pipeline
from ivm_sql.storage.delta_log import DeltaLog
from ivm_sql.viewdefs import ViewDef


def check_sources(log: DeltaLog, pipeline: Pipeline, database: str) -> None:
    """Raise at the first view that reads a Python dataset or streaming table that is not
    (yet) a Delta table of ``database``."""
    makers = {
        **{
            d.name: (
                f"Python {d.kind} at {d.location}",
                "run it first: spark-pipelines run --refresh " + d.name,
            )
            for d in pipeline.python
        },
        **{
            s.name: (
                f"streaming table at {s.location}",
                "ivm refresh loads it before the views that read it",
            )
            for s in pipeline.streaming
        },
    }
    for view in pipeline.views:
        for read in _reads(view, database):
            if read.name.lower() not in makers:
                continue
            table = f"{database}.{read.name.lower()}"
            what, hint = makers[read.name.lower()]
            if not log.exists(table):
                raise SqlError(
                    f"view {view.name} reads {read.name}, a {what}, which is not a table yet",
                    location=view.locate(read),
                    hint=hint,
                )
            if not log.is_delta(table):
                raise SqlError(
                    f"view {view.name} reads {read.name}, a {what}, which is not a Delta table",
                    location=view.locate(read),
                    hint="ivm reads a source's changes from Delta's change data feed: write it as Delta",
                )


def _reads(view: ViewDef, database: str) -> list[exp.Table]:
    """The tables of the project's database the view reads by name (not its CTEs)."""
    ctes = {c.alias_or_name.lower() for c in view.query.find_all(exp.CTE)}
    return [
        t
        for t in view.query.find_all(exp.Table)
        if (t.db or database).lower() == database.lower() and t.name and t.name.lower() not in ctes
    ]
