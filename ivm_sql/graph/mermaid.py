"""A picture as a Mermaid flowchart, for Markdown that renders it (GitHub, GitLab, many wikis).

Mermaid has no writer library worth the name, so this one writes the text itself. Every
label is double-quoted, and the characters Mermaid or its HTML rendering would read as syntax
are written as Mermaid's entity codes (``#34;`` for ``"``), as are unprintable ones; the rest
of Unicode is kept as it is. Node ids are ``n1``, ``n2``, ..., clusters ``c1``, ``c2``, ....
"""

from __future__ import annotations

import json

from ivm_sql.graph.model import STATEFUL, Graph, GraphNode, Kind

# (opening, closing) bracket of each kind's shape; the operators that may keep state are rectangles
SHAPES = {
    **dict.fromkeys(
        STATEFUL,
        ("[", "]"),
    ),
    Kind.TABLE: ("[(", ")]"),
    Kind.VIEW: ("([", "])"),
    Kind.STAGE: ("[[", "]]"),
    Kind.SCAN: ("[/", "\\]"),
    Kind.LINEAR: ("(", ")"),
    Kind.JOIN_TERM: ("{{", "}}"),
    Kind.FIXED_POINT: ("[[", "]]"),
}
CLASSES = {  # class name -> style; a node's class is its kind's, or "state" if it keeps a table
    "table": "fill:#eeeeee,stroke:#6b7280",
    "view": "fill:#dbeafe,stroke:#1d4ed8",
    "state": "fill:#fef3c7,stroke:#b45309,stroke-width:2px",
}
# inside a quoted label: the quote, an entity code's start, HTML, and a Markdown string's start
SYNTAX = set('"#&<>`\\')


def to_mermaid(graph: Graph) -> str:
    """The Mermaid text of ``graph``: a left-to-right flowchart titled like the graph."""
    ids = graph.short_ids()
    lines = ["---", f"title: {json.dumps(graph.title, ensure_ascii=False)}", "---", "flowchart LR"]
    lines += [f"  {_node(node, ids[node.id])}" for node in graph.loose_nodes()]
    for cluster in graph.clusters:
        lines.append(f'  subgraph {cluster.id}["{text(cluster.title)}"]')
        lines += [f"    {_node(node, ids[node.id])}" for node in graph.members(cluster)]
        lines.append("  end")
    for edge in graph.edges:
        arrow = f'-->|"{text(edge.label)}"|' if edge.label else "-->"
        lines.append(f"  {ids[edge.source]} {arrow} {ids[edge.target]}")
    lines += [f"  classDef {name} {style}" for name, style in CLASSES.items()]
    for name, members in _classes(graph, ids).items():
        lines.append(f"  class {','.join(members)} {name}")
    return "\n".join(lines) + "\n"


def text(label: str) -> str:
    """``label`` made safe inside a double-quoted Mermaid label."""
    return "".join(f"#{ord(c)};" if c in SYNTAX or not c.isprintable() else c for c in label)


def _node(node: GraphNode, id: str) -> str:
    opening, closing = SHAPES[node.kind]
    title, *rest = (text(line) for line in node.lines)
    return f'{id}{opening}"{"<br>".join([f"<b>{title}</b>", *rest])}"{closing}'


def _classes(graph: Graph, ids: dict[str, str]) -> dict[str, list[str]]:
    classes: dict[str, list[str]] = {}
    for node in graph.nodes:
        name = node.kind.value if node.kind.value in CLASSES else "state" if node.state else None
        if name is not None:
            classes.setdefault(name, []).append(ids[node.id])
    return classes
