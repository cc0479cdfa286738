"""A picture as Graphviz DOT, built with the ``graphviz`` library, and drawn by Graphviz's
``dot`` program into SVG or PNG.

Every label is an HTML-like label with its text escaped, so names holding quotes,
backslashes, ``<`` or any Unicode reach the drawing as they are; node ids are ``n1``, ``n2``, ...
"""

from __future__ import annotations

from html import escape

import graphviz

from ivm_sql.graph.model import STATEFUL, Graph, GraphNode, Kind

FONT = "Helvetica"
SHAPES = {  # the operators that may keep state are boxes, like the stages and views
    **dict.fromkeys(
        STATEFUL,
        "box",
    ),
    Kind.TABLE: "cylinder",
    Kind.VIEW: "box",
    Kind.STAGE: "box",
    Kind.SCAN: "invhouse",
    Kind.LINEAR: "ellipse",
    Kind.JOIN_TERM: "hexagon",
    Kind.FIXED_POINT: "doubleoctagon",
}
FILLS = {Kind.TABLE: "#eeeeee", Kind.VIEW: "#dbeafe"}
STATE_FILL = "#fef3c7"  # operators that keep a Delta table


def to_dot(graph: Graph) -> str:
    """The DOT source of ``graph``: left to right, clusters as boxes, state tables shaded."""
    dot = graphviz.Digraph(
        graph_attr={
            "rankdir": "LR",
            "label": _html([graph.title]),
            "labelloc": "t",
            "fontname": FONT,
        },
        node_attr={"fontname": FONT, "fontsize": "10"},
        edge_attr={"fontname": FONT, "fontsize": "9"},
    )
    ids = graph.short_ids()
    for node in graph.loose_nodes():
        _add_node(dot, node, ids[node.id])
    for cluster in graph.clusters:
        with dot.subgraph(name=f"cluster_{cluster.id}") as sub:
            sub.attr(label=_html([cluster.title]), style="rounded", color="#9ca3af")
            for node in graph.members(cluster):
                _add_node(sub, node, ids[node.id])
    for edge in graph.edges:
        label = {"label": _html([edge.label], bold=False)} if edge.label else {}
        dot.edge(ids[edge.source], ids[edge.target], **label)
    return dot.source


def render(graph: Graph, image_format: str) -> bytes:
    """``graph`` drawn as ``image_format`` (svg, png); raises ``graphviz.ExecutableNotFound``
    when Graphviz's ``dot`` program is not installed."""
    return graphviz.Source(to_dot(graph)).pipe(format=image_format)


def _add_node(dot: graphviz.Digraph, node: GraphNode, id: str) -> None:
    fill = FILLS.get(node.kind, STATE_FILL if node.state else None)
    style = (
        ",".join(["rounded"] * (node.kind == Kind.VIEW) + ["filled"] * (fill is not None)) or None
    )
    attributes = {
        "shape": SHAPES[node.kind],
        "style": style,
        "fillcolor": fill,
        "peripheries": "2" if node.state else None,
    }
    dot.node(id, _html(node.lines), **{k: v for k, v in attributes.items() if v is not None})


def _html(lines: list[str], bold: bool = True) -> str:
    """An HTML-like label: the first line bold (unless not ``bold``), one line per line."""
    first, *rest = [escape(line, quote=False) for line in lines]
    return "<" + "<BR/>".join([f"<B>{first}</B>" if bold else first, *rest]) + ">"
