"""The Config of a pipeline project: the spec's database and configuration, and ivm's own keys
(spark master or remote, refresh settings, migrations) from an optional ``ivm.yaml`` beside it.

The spec is what ``spark-pipelines`` runs, so it decides what both tools share: the database
(a spec without one means Spark's ``default``, where ``spark-pipelines`` then writes) and the
datasets (its libraries). An ``ivm.yaml`` that says otherwise (another database, a ``views``
folder, a Spark setting of another value) would make ivm maintain something other than the
pipeline: it is one error at its line, not a silent choice of one side.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from types import MappingProxyType

from ivm_sql.config import Config, load_config
from ivm_sql.errors import ConfigError
from ivm_sql.pipelines.spec import PipelineSpec

DEFAULT_DATABASE = "default"  # where spark-pipelines writes when the spec names no database


def pipeline_config(spec: PipelineSpec, ivm_yaml: Path | None) -> Config:
    config = load_config(ivm_yaml) if ivm_yaml is not None else Config()
    database = spec.database or DEFAULT_DATABASE
    if "views" in config.locations:
        raise ConfigError(
            f"ivm.yaml names a views folder, but {spec.path.name} beside it defines the views (its libraries)",
            location=config.locations["views"],
            hint="remove views: from ivm.yaml",
        )
    if "database" in config.locations and config.database != database:
        raise ConfigError(
            f"ivm.yaml's database {config.database} is not the pipeline's ({database}, from {spec.path.name})",
            location=config.locations["database"],
            hint="remove database: from ivm.yaml; the spec's database (or schema) is used",
        )
    conf = dict(config.spark.conf)
    for key, value in spec.configuration.items():
        if conf.get(key, value) != value:
            raise ConfigError(
                f"ivm.yaml sets {key} to {conf[key]}, the pipeline's configuration to {value}",
                location=config.locations["spark"],
                hint=f"keep {key} in {spec.path.name}'s configuration only",
            )
        conf[key] = value
    spark = dataclasses.replace(config.spark, conf=MappingProxyType(conf))
    return dataclasses.replace(config, database=database, spark=spark)
