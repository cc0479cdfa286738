"""MkDocs hook: the CLI reference (docs/cli.md) generated from the typer app at every build.

typer's own generator, ``typer ivm_sql.cli utils docs`` (the one ``typer`` ships), writes the
reference as Markdown from ``ivm_sql.cli:app``; this hook puts it, its headings one level
down, in place of the line ``<!-- ivm-cli-reference -->``. A failure fails the build.

Why not a plugin: with typer 0.29, which carries its own copy of click, mkdocs-typer2's native
engine fails (typer's options have no ``.type``), its legacy engine reads the generated
HTML's text as Markdown again (``--project <path>`` loses ``<path>`` to an HTML tag, and
``[folder]`` becomes a cross-reference that fails --strict), and mkdocs-click wants a click
command object.
"""

from __future__ import annotations

import functools
import subprocess
import sys

from mkdocs.exceptions import PluginError

MARKER = "<!-- ivm-cli-reference -->"
COMMAND = [sys.executable, "-m", "typer", "ivm_sql.cli", "utils", "docs", "--name", "ivm"]


@functools.cache
def _reference() -> str:
    done = subprocess.run(COMMAND, capture_output=True, text=True)
    if done.returncode != 0 or "## `ivm refresh`" not in done.stdout:
        raise PluginError(
            f"{' '.join(COMMAND[1:])} failed ({done.returncode}):\n{done.stderr[-2000:]}"
        )
    lines, fenced = [], False
    for line in done.stdout.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        lines.append("#" + line if line.startswith("#") and not fenced else line)
    return "\n".join(lines)


def on_page_markdown(markdown: str, page, **kwargs) -> str:
    if MARKER not in markdown:
        return markdown
    return markdown.replace(MARKER, _reference())
