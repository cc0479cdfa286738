"""Where a picture goes: DOT or Mermaid text, or an SVG or PNG file drawn by Graphviz.

Drawing needs Graphviz's ``dot`` program. Without it, ``draw`` writes the DOT text beside the
file that was asked for (``x.svg`` -> ``x.dot``) and raises an ``EnvironmentProblem`` saying
what is missing: the picture asked for was not made, but its text form was.
"""

from __future__ import annotations

from enum import Enum
from pathlib import Path

import graphviz

from ivm_sql.errors import EnvironmentProblem
from ivm_sql.graph.dot import render, to_dot
from ivm_sql.graph.mermaid import to_mermaid
from ivm_sql.graph.model import Graph

INSTALL_HINT = "install Graphviz (`apt-get install graphviz` on Debian/Ubuntu, `brew install graphviz` on macOS) and run again"


class Format(str, Enum):
    DOT = "dot"
    MERMAID = "mermaid"
    SVG = "svg"
    PNG = "png"

    @property
    def is_image(self) -> bool:
        return self in (Format.SVG, Format.PNG)


WRITERS = {Format.DOT: to_dot, Format.MERMAID: to_mermaid}
SUFFIXES = {
    ".svg": Format.SVG,
    ".png": Format.PNG,
    ".mmd": Format.MERMAID,
    ".mermaid": Format.MERMAID,
    ".dot": Format.DOT,
    ".gv": Format.DOT,
}


def choose_format(form: Format | None, output: Path | None) -> Format:
    """The format asked for; else the one the output file's suffix names; else DOT."""
    if form is not None:
        return form
    return SUFFIXES.get(output.suffix.lower(), Format.DOT) if output is not None else Format.DOT


def text(graph: Graph, form: Format) -> str:
    """``graph`` as DOT or Mermaid text."""
    return WRITERS[form](graph)


def image_path(graph: Graph, form: Format) -> Path:
    """The default file of an image: ``<project database or view>.<format>``, here."""
    return Path(f"{graph.name}.{form.value}")


def draw(graph: Graph, form: Format, target: Path) -> None:
    """Draw ``graph`` into ``target`` as SVG or PNG, or (without ``dot``) see the module's docstring."""
    try:
        target.write_bytes(render(graph, form.value))
    except graphviz.ExecutableNotFound:
        fallback = target.with_suffix(".dot")
        fallback.write_text(to_dot(graph), encoding="utf-8")
        raise EnvironmentProblem(
            f"no {form.value.upper()} drawn: Graphviz's `dot` program is not installed; "
            f"wrote the picture as DOT text to {fallback} instead",
            hint=f"{INSTALL_HINT}, or open {fallback} with any Graphviz viewer",
        ) from None
