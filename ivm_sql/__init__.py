"""ivm-sql: SQL views kept up to date incrementally on Spark and Delta Lake."""

from ivm_sql.errors import IvmError
from ivm_sql.project import Project

__all__ = ["IvmError", "Project"]
