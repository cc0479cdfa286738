"""A dbt project's marked models, compiled again only when one of its files changed.

dbt compiles the whole selection (about 5 s for a small project, most of it dbt's start), so
a project object keeps the last result with a fingerprint of the files dbt reads: a watch's
rounds and a server's commands compile once per edit, not once per refresh. dbt's own target
folder is left alone: ivm compiles into ``.ivm/dbt``, where dbt's partial parsing state
stays between commands.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from ivm_sql.compiler.reads import MadeElsewhere
from ivm_sql.dbt.manifest import compile_project
from ivm_sql.dbt.views import made_by_dbt, marked_views
from ivm_sql.errors import IvmError
from ivm_sql.viewdefs import ViewDef

# folders of a dbt project that dbt writes, or ivm: not part of what it compiles
WRITTEN = {"target", "logs", "dbt_packages", ".ivm", ".git", "__pycache__"}
# what dbt reads: models, macros, tests, seeds' and sources' settings, the project file
READ_SUFFIXES = (".sql", ".yml", ".yaml", ".csv", ".py", ".md")
PROFILES_FILE = "profiles.yml"
STATE = ".ivm"  # ivm's folder in the project: dbt compiles into its dbt/


@dataclass
class DbtModels:
    root: Path
    target: str | None = None  # the profile's target (None: its default)
    _last: _Compiled | None = field(default=None, repr=False, compare=False)

    @property
    def profiles_dir(self) -> Path | None:
        """The project's own profiles.yml, if it has one; else dbt looks where it always does
        (DBT_PROFILES_DIR, then ~/.dbt)."""
        return self.root if (self.root / PROFILES_FILE).is_file() else None

    def views(self) -> tuple[str, tuple[ViewDef, ...]]:
        """The schema of the marked models and each as a view, compiled by dbt when a file
        it reads changed since the last time."""
        last = self._compiled()
        return last.schema, last.views

    def made_by_dbt(self) -> dict[str, MadeElsewhere]:
        """The tables the marked models read that dbt makes, by relation."""
        return self._compiled().made

    def _compiled(self) -> _Compiled:
        fingerprint = _fingerprint(self.root)
        if self._last is None or self._last.fingerprint != fingerprint:
            target = self.root / STATE / "dbt"
            created = next((f for f in (target.parent, target) if not f.exists()), None)
            try:
                compiled = compile_project(self.root, target, self.profiles_dir, self.target)
                schema, views = marked_views(compiled)
            except IvmError:
                if created is not None:  # a project refused leaves nothing behind
                    shutil.rmtree(created, ignore_errors=True)
                raise
            self._last = _Compiled(fingerprint, schema, tuple(views), made_by_dbt(compiled))
        return self._last


@dataclass(frozen=True)
class _Compiled:
    fingerprint: tuple
    schema: str
    views: tuple[ViewDef, ...]
    made: dict[str, MadeElsewhere]


def _fingerprint(root: Path) -> tuple:
    """(path, size, modification time) of every file dbt reads in the project."""
    found = []
    for folder, folders, files in os.walk(root):
        folders[:] = sorted(f for f in folders if f not in WRITTEN)
        for name in sorted(files):
            if name.endswith(READ_SUFFIXES):
                stat = os.stat(os.path.join(folder, name))
                found.append((os.path.join(folder, name), stat.st_size, stat.st_mtime_ns))
    return tuple(found)
