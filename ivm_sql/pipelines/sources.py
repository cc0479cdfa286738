"""What a pipeline's SQL views read of datasets ivm does not maintain as views.

A view may read a Python dataset (``spark-pipelines`` writes it) or a streaming table (ivm
appends to it): to ivm both are source tables, which must exist as Delta tables before the
view can be compiled. A missing one is one error at the view's line that says who makes it.
"""

from __future__ import annotations

from ivm_sql.compiler.reads import MadeElsewhere, check_made_elsewhere
from ivm_sql.pipelines.pipeline import Pipeline
from ivm_sql.storage.delta_log import DeltaLog


def check_sources(log: DeltaLog, pipeline: Pipeline, database: str) -> None:
    """Raise at the first view that reads a Python dataset or streaming table that is not
    (yet) a Delta table of ``database``."""
    made = {
        **{
            d.name: MadeElsewhere(
                f"a Python {d.kind} at {d.location}",
                "run it first: spark-pipelines run --refresh " + d.name,
            )
            for d in pipeline.python
        },
        **{
            s.name: MadeElsewhere(
                f"a streaming table at {s.location}",
                "ivm refresh loads it before the views that read it",
            )
            for s in pipeline.streaming
        },
    }
    check_made_elsewhere(
        log, pipeline.views, {f"{database}.{n}".lower(): m for n, m in made.items()}, database
    )
