"""The one exception type users see, with where it happened and what to do instead."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Location:
    """A place in a user's file: shown as ``path:line``."""

    path: Path | str
    line: int | None = None

    def __str__(self) -> str:
        return f"{self.path}:{self.line}" if self.line else str(self.path)


class IvmError(Exception):
    """An error the user can act on: a message, optionally a file:line and a hint.

    The CLI prints ``str(error)`` and exits non-zero; it never shows a traceback for these.
    """

    kind = "error"

    def __init__(self, message: str, *, location: Location | None = None, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.location = location
        self.hint = hint

    def __str__(self) -> str:
        where = f"{self.location}: " if self.location else ""
        text = f"{where}{self.kind}: {self.message}"
        if self.hint:
            text += f"\n  hint: {self.hint}"
        return text


class ConfigError(IvmError):
    kind = "config error"


class SqlError(IvmError):
    """SQL that does not parse or does not resolve (unknown table, column, ...)."""

    kind = "SQL error"


class UnsupportedError(IvmError):
    """SQL that is valid but that ivm cannot maintain incrementally (yet)."""

    kind = "unsupported"


class MigrationError(IvmError):
    kind = "migration failed"


class EnvironmentProblem(IvmError):
    """Something missing on the machine (Java, a Spark setting)."""

    kind = "environment"


class RefreshError(IvmError):
    kind = "refresh failed"
