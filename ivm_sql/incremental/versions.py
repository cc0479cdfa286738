"""Which versions of each source a refresh reads: the DBSP time step, mapped onto Delta."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from sqlglot import exp

from ivm_sql.sqlbuild import lit


@dataclass(frozen=True)
class Versions:
    """A source's versions in one refresh: ``old`` is what the state reflects (z^-1 I(S)),
    ``new`` the pinned version (I(S)); ``changed`` says whether any commit lies between.

    Versions are expressions: literals when refreshing, named placeholders in ``ivm compile``.
    """

    old: exp.Expression | None
    new: exp.Expression
    changed: bool

    @classmethod
    def at(cls, old: int | None, new: int) -> Versions:
        return cls(None if old is None else lit(old), lit(new), old is not None and old != new)

    @classmethod
    def symbolic(cls, table: str) -> Versions:
        name = table.replace(".", "_")
        return cls(exp.Placeholder(this=f"{name}_old"), exp.Placeholder(this=f"{name}_new"), True)

    def first_change(self) -> exp.Expression:
        """The first version whose changes the refresh reads: old + 1."""
        assert self.old is not None
        if isinstance(self.old, exp.Literal):
            return lit(int(self.old.this) + 1)
        return exp.Add(this=self.old.copy(), expression=lit(1))


Pins = Mapping[str, Versions]
