"""Pictures of a project and of its views' circuits (`ivm graph`), built from compiled plans.

``lineage`` (the project) and ``circuit`` (one view) build a ``model.Graph``; ``dot`` and
``mermaid`` write it as text; ``output`` draws it into SVG or PNG through Graphviz.
"""

from ivm_sql.graph.circuit import view_circuit
from ivm_sql.graph.lineage import project_graph
from ivm_sql.graph.model import Graph, Kind
from ivm_sql.graph.output import Format, choose_format, draw, image_path, text

__all__ = [
    "Format",
    "Graph",
    "Kind",
    "choose_format",
    "draw",
    "image_path",
    "project_graph",
    "text",
    "view_circuit",
]
