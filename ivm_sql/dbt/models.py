"""A dbt project's marked models, compiled again only when a file dbt reads has changed.

dbt compiles the whole selection (4 s for the demo in a fresh process, most of it dbt's own
start), so each result is kept for this process with a fingerprint of the files dbt reads:
a server's commands and a watch's rounds open the project anew each time, and compile once
per edit, not once per command. dbt's own target folder is left alone: ivm compiles into
``.ivm/dbt``, where dbt's partial parsing state stays between commands.
"""

from __future__ import annotations

import functools
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from ivm_sql.compiler.reads import MadeElsewhere
from ivm_sql.dbt.manifest import compile_project
from ivm_sql.dbt.views import made_by_dbt, marked_views
from ivm_sql.errors import IvmError
from ivm_sql.viewdefs import ViewDef

# folders of a dbt project that dbt or ivm write, and dbt does not read back
WRITTEN = {"target", "logs", ".ivm", ".git", "__pycache__"}
# what dbt reads: models, macros, tests, seeds' and sources' settings, the project file, and
# the packages `dbt deps` installed
READ_SUFFIXES = (".sql", ".yml", ".yaml", ".csv", ".py", ".md")
PROFILES_FILE = "profiles.yml"
STATE = ".ivm"  # ivm's folder in the project: dbt compiles into its dbt/


@dataclass(frozen=True)
class DbtModels:
    root: Path

    @property
    def profiles_dir(self) -> Path | None:
        """The project's own profiles.yml, if it has one; else dbt looks where it always does
        (DBT_PROFILES_DIR, then ~/.dbt)."""
        return self.root if (self.root / PROFILES_FILE).is_file() else None

    def views(self) -> tuple[str, tuple[ViewDef, ...]]:
        """The schema of the marked models and each as a view."""
        compiled = self._compiled()
        return compiled.schema, compiled.views

    def made_by_dbt(self) -> dict[str, MadeElsewhere]:
        """The tables the marked models read that dbt makes, by relation."""
        return self._compiled().made

    def _compiled(self) -> _Compiled:
        return _compile(self.root, self.profiles_dir, _fingerprint(self.root, self.profiles_dir))


@dataclass(frozen=True)
class _Compiled:
    schema: str
    views: tuple[ViewDef, ...]
    made: dict[str, MadeElsewhere]


@functools.lru_cache(maxsize=16)
def _compile(root: Path, profiles_dir: Path | None, fingerprint: tuple) -> _Compiled:
    """dbt's compile of the project as its files are (``fingerprint``); a project refused
    leaves nothing behind, not even the folder dbt compiles into."""
    target = root / STATE / "dbt"
    created = next((f for f in (target.parent, target) if not f.exists()), None)
    try:
        compiled = compile_project(root, target, profiles_dir)
        schema, views = marked_views(compiled)
    except IvmError:
        if created is not None:
            shutil.rmtree(created, ignore_errors=True)
        raise
    return _Compiled(schema, tuple(views), made_by_dbt(compiled))


def _fingerprint(root: Path, profiles_dir: Path | None) -> tuple:
    """(path, size, modification time) of every file dbt reads in the project, and of the
    profiles file it reads outside it."""
    found = []
    for folder, folders, files in os.walk(root):
        folders[:] = sorted(f for f in folders if f not in WRITTEN)
        for name in sorted(files):
            if name.endswith(READ_SUFFIXES):
                found.append(_stat(os.path.join(folder, name)))
    if profiles_dir is None:
        outside = os.environ.get("DBT_PROFILES_DIR") or os.path.expanduser("~/.dbt")
        found.append(_stat(os.path.join(outside, PROFILES_FILE)))
    return tuple(found)


def _stat(path: str) -> tuple:
    try:
        stat = os.stat(path)
    except FileNotFoundError:
        return (path, None)
    return (path, stat.st_size, stat.st_mtime_ns)
