"""The Config of a dbt project: the marked models' schema as its database, and ivm's own keys
(spark master or remote, refresh settings) from an optional ``ivm.yaml`` beside
dbt_project.yml.

dbt decides what both tools share: the schema the marked models are built in (the profile's,
or a ``+schema``) and the models themselves. An ``ivm.yaml`` that says otherwise (another
database, a ``views`` folder) would make ivm keep something other than the dbt project's
models: one error at its line.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from ivm_sql.config import Config, load_config
from ivm_sql.errors import ConfigError

DEFAULT_SCHEMA = "default"  # a project with no marked model yet


def dbt_config(ivm_yaml: Path | None) -> Config:
    """ivm's own keys from the ``ivm.yaml`` beside dbt_project.yml, checked before dbt
    compiles anything: one that names a views folder is refused."""
    config = load_config(ivm_yaml) if ivm_yaml is not None else Config()
    if "views" in config.locations:
        raise ConfigError(
            "ivm.yaml names a views folder, but dbt_project.yml beside it makes the marked models the views",
            location=config.locations["views"],
            hint="remove views: from ivm.yaml",
        )
    return config


def in_models_schema(config: Config, schema: str) -> Config:
    """``config`` with the marked models' schema (from dbt) as its database."""
    database = schema or DEFAULT_SCHEMA
    if "database" in config.locations and config.database != database:
        raise ConfigError(
            f"ivm.yaml's database {config.database} is not the marked models' schema ({database}, from dbt)",
            location=config.locations["database"],
            hint="remove database: from ivm.yaml; the models' schema is used",
        )
    return dataclasses.replace(config, database=database)
