"""What a picture holds: nodes, edges between them, and clusters grouping nodes.

``lineage`` builds the project's picture and ``circuit`` one view's, both from compiled
plans; ``dot`` and ``mermaid`` write a picture out. Nothing here knows a file format: labels
are plain text, and each writer escapes them for its own syntax.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from enum import Enum

WIDTH = 48  # label lines are wrapped at this many characters (names are never cut)


class Kind(str, Enum):
    """What a node is: a table or view of the catalog, a view's stage, or a DBSP operator."""

    TABLE = "table"
    VIEW = "view"
    STAGE = "stage"
    SCAN = "scan"
    LINEAR = "linear"
    JOIN_TERM = "join term"
    INTEGRATE = "integrate"
    DISTINCT = "distinct"
    AGGREGATE = "aggregate"
    RECOMPUTE_KEYS = "recompute touched keys"
    RECOMPUTE_ALL = "recompute all"
    TOP_K = "top-k"
    # a recursive view's subcircuit, iterated until nothing changes
    FIXED_POINT = "fixed-point loop"


# the operators that may keep state in a Delta table
STATEFUL = (
    Kind.INTEGRATE,
    Kind.DISTINCT,
    Kind.AGGREGATE,
    Kind.RECOMPUTE_KEYS,
    Kind.RECOMPUTE_ALL,
    Kind.TOP_K,
)


@dataclass(frozen=True)
class GraphNode:
    """One box: its ``title`` (a name or a DBSP operator), lines of ``details``, and the Delta
    table that keeps its ``state`` (None: it keeps none)."""

    id: str
    kind: Kind
    title: str
    details: tuple[str, ...] = ()
    state: str | None = None

    @property
    def lines(self) -> list[str]:
        """The label: the title, then the details and the state, each wrapped at WIDTH."""
        body = [*self.details, *([f"state: {self.state}"] if self.state else [])]
        wrapped = (
            textwrap.wrap(line, WIDTH, break_long_words=False, break_on_hyphens=False) or [""]
            for line in body
        )
        return [self.title, *(part for parts in wrapped for part in parts)]


@dataclass(frozen=True)
class Edge:
    """Rows flow from ``source`` to ``target``; ``label`` says which version or change, if it matters."""

    source: str
    target: str
    label: str = ""


@dataclass(frozen=True)
class Cluster:
    """A titled group of nodes: a view's stages, or the operators of one stage."""

    id: str
    title: str
    members: tuple[str, ...]


@dataclass(frozen=True)
class Graph:
    """A picture: nodes in the order they were added (inputs before what reads them)."""

    name: str  # what a file holding the picture is named after
    title: str
    nodes: tuple[GraphNode, ...]
    edges: tuple[Edge, ...]
    clusters: tuple[Cluster, ...] = ()

    def node(self, id: str) -> GraphNode:
        return next(n for n in self.nodes if n.id == id)

    def members(self, cluster: Cluster) -> list[GraphNode]:
        return [self.node(id) for id in cluster.members]

    def loose_nodes(self) -> list[GraphNode]:
        """The nodes in no cluster."""
        clustered = {id for c in self.clusters for id in c.members}
        return [n for n in self.nodes if n.id not in clustered]

    def short_ids(self) -> dict[str, str]:
        """``n1``, ``n2``, ... by node order: ids every format accepts without quoting."""
        return {node.id: f"n{number}" for number, node in enumerate(self.nodes, 1)}


class GraphBuilder:
    """Collects nodes, edges and clusters, then freezes them into a Graph."""

    def __init__(self) -> None:
        self._nodes: dict[str, GraphNode] = {}
        self._edges: dict[Edge, None] = {}
        self._clusters: list[Cluster] = []
        self._open: list[str] | None = None  # members of the cluster being filled

    def add(
        self,
        kind: Kind,
        title: str,
        details: tuple[str, ...] = (),
        state: str | None = None,
        id: str | None = None,
    ) -> str:
        """A new node (or, for an ``id`` already added, that node); returns its id."""
        id = id if id is not None else f"{kind.value} {len(self._nodes) + 1}"
        if id not in self._nodes:
            self._nodes[id] = GraphNode(id, kind, title, details, state)
            if self._open is not None:
                self._open.append(id)
        return id

    def connect(self, source: str, target: str, label: str = "") -> None:
        self._edges[Edge(source, target, label)] = None

    @contextmanager
    def cluster(self, title: str) -> Iterator[None]:
        """Nodes added inside the ``with`` block belong to a new cluster titled ``title``."""
        self._open = []
        try:
            yield
        finally:
            self._clusters.append(Cluster(f"c{len(self._clusters) + 1}", title, tuple(self._open)))
            self._open = None

    def build(self, name: str, title: str) -> Graph:
        return Graph(
            name, title, tuple(self._nodes.values()), tuple(self._edges), tuple(self._clusters)
        )
