"""ivm-sql: SQL views kept up to date incrementally on Spark and Delta Lake."""

from ivm_sql.errors import IvmError

__all__ = ["IvmError", "Project"]


def __getattr__(name: str):
    # Project (and with it Spark and the compiler) loads when first asked for, so the `ivm`
    # command's thin client (ivm_sql.client) starts without them.
    if name == "Project":
        from ivm_sql.project import Project

        return Project
    raise AttributeError(f"module 'ivm_sql' has no attribute {name!r}")
