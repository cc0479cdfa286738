"""`ivm graph`: the pictures of a project and of a view's circuit, and their DOT and Mermaid text.

The pictures are built from plans compiled against a ``StaticCatalog`` (no Spark): the demo
project's views, and examples over ``ivm_sql.support``'s tables. The writers are checked by
reading their text back (every label, once unescaped, is the model's), and Graphviz's
drawing by reading the SVG's text when ``dot`` is installed. The CLI tests run the real
command on the demo project through the shared Spark session.
"""

from __future__ import annotations

import html
import re
import shutil
import uuid
from pathlib import Path
from xml.etree import ElementTree

import pytest
from pyspark.sql import SparkSession
from test_cli import assert_no_traceback, database_of, flat, ivm, keep_current_database, ok  # noqa: F401 (autouse fixture)
from test_golden import ROOT, SHOP, demo_views

from ivm_sql import support
from ivm_sql.catalog import StaticCatalog
from ivm_sql.compiler.order import compile_views
from ivm_sql.compiler.plan import ViewPlan
from ivm_sql.errors import EnvironmentProblem, Location
from ivm_sql.graph import (
    Format,
    Graph,
    Kind,
    choose_format,
    dot,
    draw,
    mermaid,
    project_graph,
    text,
    view_circuit,
)
from ivm_sql.graph.model import WIDTH, GraphBuilder, GraphNode
from ivm_sql.viewdefs import parse_view

HAS_DOT = shutil.which("dot") is not None
# no other view reads these aggregates, so each keeps its state as a trace of deltas
AGGREGATE_STRATEGY = (
    "incremental: COUNT/SUM/AVG per group updated from the change alone, appended as a batch "
    "of per-group deltas and summed when read (no other view reads this one)"
)


# helpers ---------------------------------------------------------------------------------


def demo_plans(database: str = "shop") -> list[ViewPlan]:
    catalog = StaticCatalog(
        {f"{database}.{name.split('.')[1]}": columns for name, columns in SHOP.items()}
    )
    return compile_views(demo_views(), catalog, database)


def circuit(name: str, plans: list[ViewPlan]) -> Graph:
    plan = next(p for p in plans if p.view.name == name)
    return view_circuit(plan, {p.table: p.name for p in plans})


def example(body: str, full: bool = False) -> Graph:
    """The circuit of ``CREATE VIEW v AS body`` over support's tables t(k, a, b, arr), u(k, d)."""
    properties = " TBLPROPERTIES ('ivm.refresh' = 'full')" if full else ""
    view = parse_view(f"CREATE VIEW v{properties} AS {body}", Location("example.sql", 1))
    return circuit("v", compile_views([view], support.CATALOG, "db"))


def name(node: GraphNode) -> str:
    """A node as a test names it: its title and first detail."""
    return " / ".join(node.lines[:2])


def edges(graph: Graph) -> set[tuple[str, str, str]]:
    return {(name(graph.node(e.source)), name(graph.node(e.target)), e.label) for e in graph.edges}


def of_kind(graph: Graph, kind: Kind) -> list[GraphNode]:
    return [n for n in graph.nodes if n.kind == kind]


def clusters(graph: Graph) -> dict[str, list[str]]:
    return {c.title: [name(n) for n in graph.members(c)] for c in graph.clusters}


# the project -------------------------------------------------------------------------------


def test_project_graph_draws_tables_then_each_view_with_its_stages_in_dependency_order() -> None:
    graph = project_graph("shop", demo_plans())
    assert graph.name == "shop"
    assert [n.title for n in graph.loose_nodes()] == [
        "shop.orders",
        "shop.customers",
        "shop.products",
    ]
    assert {n.kind for n in graph.loose_nodes()} == {Kind.TABLE}
    assert clusters(graph) == {
        "view order_lines": ["integrate / incremental", "shop.order_lines"],
        "view shipped_totals": ["aggregate / incremental", "shop.shipped_totals"],
        "view revenue_by_country": ["aggregate / incremental", "shop.revenue_by_country"],
        "view categories_sold": ["distinct / incremental", "shop.categories_sold"],
    }
    states = {n.state for n in of_kind(graph, Kind.STAGE)}
    assert states == {
        f"shop.__ivm_{v}"
        for v in ("order_lines", "shipped_totals", "revenue_by_country", "categories_sold")
    }
    assert {n.title for n in of_kind(graph, Kind.VIEW)} == {
        "shop.order_lines",
        "shop.shipped_totals",
        "shop.revenue_by_country",
        "shop.categories_sold",
    }
    stage_of = {n.state: n.id for n in of_kind(graph, Kind.STAGE)}
    pairs = {(graph.node(e.source).title, e.target) for e in graph.edges}
    assert pairs == {
        ("shop.orders", stage_of["shop.__ivm_order_lines"]),
        ("shop.customers", stage_of["shop.__ivm_order_lines"]),
        ("shop.products", stage_of["shop.__ivm_order_lines"]),
        ("integrate", "view shop.order_lines"),
        ("shop.orders", stage_of["shop.__ivm_shipped_totals"]),
        ("aggregate", "view shop.shipped_totals"),
        # a view over a view: fed by the view users query, not by the other view's stage
        ("shop.order_lines", stage_of["shop.__ivm_revenue_by_country"]),
        ("aggregate", "view shop.revenue_by_country"),
        ("shop.order_lines", stage_of["shop.__ivm_categories_sold"]),
        ("distinct", "view shop.categories_sold"),
    }
    position = {n.id: i for i, n in enumerate(graph.nodes)}
    assert all(position[e.source] < position[e.target] for e in graph.edges)  # dependency order


def test_every_stage_of_a_view_is_drawn_with_its_scope() -> None:
    view = parse_view(
        "CREATE VIEW v AS WITH g AS (SELECT k, mode(a) AS lo FROM t GROUP BY k) SELECT DISTINCT g.lo FROM g JOIN u ON g.k = u.k",
        Location("example.sql", 1),
    )
    graph = project_graph("db", compile_views([view], support.CATALOG, "db"))
    recompute = "recompute touched keys / recompute touched keys: MODE per group"
    assert clusters(graph) == {"view v": [recompute, "distinct / incremental", "db.v"]}
    assert [n.state for n in of_kind(graph, Kind.STAGE)] == ["db.__ivm_v_s1", "db.__ivm_v"]
    assert (recompute, "distinct / incremental", "") in edges(graph)
    assert ("db.u", "distinct / incremental", "") in edges(graph)


# one view's circuit ------------------------------------------------------------------------


def test_join_circuit_has_one_term_per_input_reading_the_others_integrals() -> None:
    graph = circuit("order_lines", demo_plans())
    scans = {t: f"scan / shop.{t}" for t in ("orders", "customers", "products")}
    integral = {a: f"integrate / I({a}): time travel on shop.{t}" for a, t in zip("ocp", scans)}
    term = {
        1: "join term 1 / Δo ⋈ c_old ⋈ p_old",
        2: "join term 2 / o_new ⋈ Δc ⋈ p_old",
        3: "join term 3 / o_new ⋈ c_new ⋈ Δp",
    }
    total = "linear / sum of the 3 join terms"
    stored = "integrate / the view's rows, each with its multiplicity"
    view = "shop.order_lines / the view users query"
    assert edges(graph) == {
        (scans["orders"], integral["o"], ""),
        (scans["customers"], integral["c"], ""),
        (scans["products"], integral["p"], ""),
        (scans["orders"], term[1], "Δ"),
        (integral["c"], term[1], "old"),
        (integral["p"], term[1], "old"),
        (scans["customers"], term[2], "Δ"),
        (integral["o"], term[2], "new"),
        (integral["p"], term[2], "old"),
        (scans["products"], term[3], "Δ"),
        (integral["o"], term[3], "new"),
        (integral["c"], term[3], "new"),
        (term[1], total, ""),
        (term[2], total, ""),
        (term[3], total, ""),
        (total, stored, ""),
        (stored, view, ""),
    }
    assert [n.state for n in of_kind(graph, Kind.INTEGRATE)] == [
        None,
        None,
        None,
        "shop.__ivm_order_lines",
    ]
    assert all("no state of its own" in n.details for n in of_kind(graph, Kind.INTEGRATE)[:3])
    (last,) = [n for n in graph.nodes if n.state]
    assert (
        last.details[-1]
        == "incremental: linear and join changes appended to the stored rows as a batch (multiplicity per row)"
    )
    (linear,) = of_kind(graph, Kind.LINEAR)
    assert "filter: o.customer_id = c.id AND o.product_id = p.id" in linear.details
    assert linear.details[-1].startswith(
        "project: o.id AS order_id, c.name AS customer, c.country,"
    )
    assert [c.title for c in graph.clusters] == ["stage 1/1: shop.__ivm_order_lines"]
    assert [n.title for n in graph.loose_nodes()] == ["scan"] * 3 + ["shop.order_lines"]


def test_aggregate_over_a_view_shows_its_groups_state_and_strategy() -> None:
    graph = circuit("revenue_by_country", demo_plans())
    assert graph.name == "revenue_by_country"
    (scan,) = of_kind(graph, Kind.SCAN)
    assert scan.details == (
        "view shop.order_lines",
        "read from its table shop.__ivm_order_lines",
        "Δ: its change data feed",
    )
    (aggregate,) = of_kind(graph, Kind.AGGREGATE)
    assert aggregate.details == (
        "GROUP BY order_lines.country",
        "COUNT(*), SUM(order_lines.amount), AVG(order_lines.amount)",
        AGGREGATE_STRATEGY,
    )
    assert aggregate.state == "shop.__ivm_revenue_by_country"
    assert aggregate.lines[-1] == "state: shop.__ivm_revenue_by_country"
    assert edges(graph) == {
        ("scan / view shop.order_lines", "linear / filter: order_lines.status <> 'cancelled'", ""),
        (
            "linear / filter: order_lines.status <> 'cancelled'",
            "aggregate / GROUP BY order_lines.country",
            "",
        ),
        (
            "aggregate / GROUP BY order_lines.country",
            "shop.revenue_by_country / the view users query",
            "",
        ),
    }


@pytest.mark.parametrize(
    ("body", "full", "kind", "strategy"),
    [
        (
            "SELECT b, mode(a) AS lo FROM t GROUP BY b",
            False,
            Kind.RECOMPUTE_KEYS,
            "recompute touched keys: ",
        ),
        (
            "SELECT b, MIN(a) AS lo FROM t GROUP BY b",
            False,
            Kind.AGGREGATE,
            "incremental: MIN/MAX per group from the change alone",
        ),
        (
            "SELECT k, a FROM t ORDER BY a DESC LIMIT 10",
            False,
            Kind.TOP_K,
            "incremental: the first 110 rows in order kept as candidates, the view the first 10",
        ),
        (
            "SELECT k, rand() AS r FROM t",
            True,
            Kind.RECOMPUTE_ALL,
            "recompute all on any change: its refresh policy is FULL",
        ),
        (
            "SELECT t.k, u.d FROM t LEFT JOIN u ON t.k = u.k AND t.a > unix_timestamp(now()) - 60",
            False,
            Kind.RECOMPUTE_ALL,
            "recompute all on every refresh: it compares columns with the current time",
        ),
        (
            "SELECT k FROM t WHERE a > unix_timestamp(current_timestamp()) - 86400",
            False,
            Kind.INTEGRATE,
            "incremental: linear and join changes appended to the stored rows as a batch (multiplicity per row); temporal filter",
        ),
        ("SELECT DISTINCT b FROM t", False, Kind.DISTINCT, "incremental: per-row counts"),
        ("SELECT COUNT(*) AS n, SUM(d) AS s FROM u", False, Kind.AGGREGATE, AGGREGATE_STRATEGY),
        (
            "WITH RECURSIVE r(k, hops) AS (SELECT k, 1 FROM t UNION ALL SELECT u.k, r.hops + 1 FROM r JOIN u ON r.k = u.k "
            "WHERE r.hops < 3) SELECT k, hops FROM r",
            False,
            Kind.FIXED_POINT,
            "incremental: fixed-point loop",
        ),
    ],
    ids=[
        "mode",
        "min",
        "limit",
        "full",
        "current-time",
        "temporal",
        "distinct",
        "global",
        "recursive",
    ],
)
def test_each_stateful_operator_is_named_and_shows_its_strategy(
    body: str, full: bool, kind: Kind, strategy: str
) -> None:
    graph = example(body, full)
    (operator,) = [n for n in graph.nodes if n.state]
    assert operator.kind == kind and operator.title == kind.value
    assert operator.state == "db.__ivm_v"
    assert operator.details[-1].startswith(strategy)


def test_global_aggregate_says_it_keeps_one_row() -> None:
    (aggregate,) = of_kind(example("SELECT COUNT(*) AS n, SUM(d) AS s FROM u"), Kind.AGGREGATE)
    assert aggregate.details[:2] == ("global: one row, even over no rows", "COUNT(*), SUM(u.d)")


def test_union_all_is_one_linear_operator_over_its_branches() -> None:
    graph = example("SELECT k FROM t WHERE a > 0 UNION ALL SELECT k FROM u")
    union = "linear / UNION ALL of 2 inputs"
    assert edges(graph) == {
        ("scan / db.t", "linear / filter: t.a > 0", ""),
        ("scan / db.u", "linear / project: u.k", ""),
        ("linear / filter: t.a > 0", union, ""),
        ("linear / project: u.k", union, ""),
        (union, "integrate / the view's rows, each with its multiplicity", ""),
        (
            "integrate / the view's rows, each with its multiplicity",
            "db.v / the view users query",
            "",
        ),
    }


def test_inner_stage_feeds_the_stage_above_through_its_table() -> None:
    graph = example(
        "WITH g AS (SELECT k, SUM(a) AS s FROM t GROUP BY k) SELECT g.k, g.s, u.d FROM g JOIN u ON g.k = u.k"
    )
    assert [c.title for c in graph.clusters] == [
        "stage 1/2: db.__ivm_v_s1",
        "stage 2/2: db.__ivm_v",
    ]
    (aggregate,) = of_kind(graph, Kind.AGGREGATE)
    assert aggregate.state == "db.__ivm_v_s1"
    renamed = "linear / project: __agg.g0 AS k, __agg.agg0 AS s"  # the subquery's columns, read from the stage
    found = edges(graph)
    assert (name(aggregate), renamed, "") in found
    assert (renamed, "join term 1 / Δg ⋈ u_old", "Δ") in found
    assert (renamed, "integrate / I(g): time travel on db.__ivm_v_s1", "") in found
    # no scan of its own stage
    assert not any(n.details[:1] == ("db.__ivm_v_s1",) for n in of_kind(graph, Kind.SCAN))


def test_a_filter_folded_into_the_view_labels_the_edge_to_it() -> None:
    graph = example("SELECT b, COUNT(*) AS n FROM t GROUP BY b HAVING COUNT(*) > 1")
    (view,) = of_kind(graph, Kind.VIEW)
    assert [e.label for e in graph.edges if e.target == view.id] == ["filter"]


def test_long_details_are_wrapped_but_names_never_cut() -> None:
    long_name = "db." + "x" * (WIDTH + 10)
    node = GraphNode("n", Kind.STAGE, "integrate", ("word " * 30,), state=long_name)
    assert node.lines[0] == "integrate"
    assert all(len(line) <= WIDTH for line in node.lines[1:-2])
    assert " ".join(node.lines[1:-2]) == ("word " * 30).strip()
    assert node.lines[-2:] == ["state:", long_name]


# the writers --------------------------------------------------------------------------------

ODD = 'a "quoted" <b>name</b> & #35; `tick` \\ back ⋈ naïve'


def odd_graph() -> Graph:
    """Every kind once, with labels holding what each format must escape."""
    builder = GraphBuilder()
    table = builder.add(Kind.TABLE, ODD, id="table")
    previous = table
    with builder.cluster(f"cluster {ODD}"):
        for kind in Kind:
            if kind != Kind.TABLE:
                node = builder.add(
                    kind, kind.value, (ODD, "line two"), state=ODD if kind == Kind.STAGE else None
                )
                builder.connect(previous, node, ODD if kind == Kind.SCAN else "")
                previous = node
    return builder.build("odd", f"title {ODD}")


def test_every_kind_has_a_shape_in_each_writer() -> None:
    assert set(dot.SHAPES) == set(Kind) == set(mermaid.SHAPES)


def mermaid_label(quoted: str) -> list[str]:
    """A label as Mermaid shows it: lines at <br>, bold tags dropped, entity codes decoded."""
    plain = quoted.replace("<b>", "").replace("</b>", "")
    return [
        re.sub(r"#(\d+);", lambda m: chr(int(m.group(1))), line) for line in plain.split("<br>")
    ]


def test_mermaid_text_round_trips_every_label_and_edge() -> None:
    graph = odd_graph()
    written = text(graph, Format.MERMAID)
    lines = written.splitlines()
    assert lines[:4] == [
        "---",
        'title: "title a \\"quoted\\" <b>name</b> & #35; `tick` \\\\ back ⋈ naïve"',
        "---",
        "flowchart LR",
    ]
    ids = graph.short_ids()
    for node in graph.nodes:
        opening, closing = mermaid.SHAPES[node.kind]
        definition = re.compile(
            rf'\s*{ids[node.id]}{re.escape(opening)}"([^"]*)"{re.escape(closing)}'
        )
        (match,) = [m for line in lines if (m := definition.fullmatch(line))]
        assert mermaid_label(match.group(1)) == node.lines
    (subgraph,) = [line for line in lines if line.strip().startswith("subgraph")]
    assert mermaid_label(re.fullmatch(r'\s*subgraph c1\["([^"]*)"\]', subgraph).group(1)) == [
        f"cluster {ODD}"
    ]
    arrows = [
        re.fullmatch(r'\s*(n\d+) -->(?:\|"([^"]*)"\|)? (n\d+)', line)
        for line in lines
        if "-->" in line
    ]
    assert [(a.group(1), mermaid_label(a.group(2) or "")[0], a.group(3)) for a in arrows] == [
        (ids[e.source], e.label, ids[e.target]) for e in graph.edges
    ]
    assert f"  class {ids['table']} table" in lines
    assert lines.count("  end") == 1


def test_mermaid_of_the_demo_project() -> None:
    written = text(project_graph("shop", demo_plans()), Format.MERMAID)
    assert written.startswith(
        '---\ntitle: "shop: tables, views and the stages that keep them"\n---\nflowchart LR\n'
    )
    assert '  n1[("<b>shop.orders</b>")]\n' in written
    assert '  subgraph c3["view revenue_by_country"]\n' in written
    assert (
        '    n8[["<b>aggregate</b><br>incremental<br>state: shop.__ivm_revenue_by_country"]]\n'
        in written
    )
    assert "  n5 --> n8\n" in written  # order_lines feeds revenue_by_country


def test_readme_shows_the_demo_as_graph_prints_it() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    (block,) = re.findall(r"^```mermaid\n(.*?)^```$", readme, re.MULTILINE | re.DOTALL)
    assert block == text(project_graph("shop", demo_plans()), Format.MERMAID)


def dot_label(html_label: str) -> list[str]:
    return [
        html.unescape(line)
        for line in html_label.replace("<B>", "").replace("</B>", "").split("<BR/>")
    ]


def test_dot_text_round_trips_every_label_and_edge() -> None:
    graph = odd_graph()
    source = text(graph, Format.DOT)
    ids = graph.short_ids()
    labels = dict(re.findall(r"^\s*(n\d+) \[label=<(.*)> ", source, re.MULTILINE))
    assert {id: dot_label(label) for id, label in labels.items()} == {
        ids[n.id]: n.lines for n in graph.nodes
    }
    assert "&lt;b&gt;name&lt;/b&gt; &amp; #35;" in source and "\\ back ⋈ naïve" in source
    found = re.findall(r"^\s*(n\d+) -> (n\d+)(?: \[label=<(.*)>\])?$", source, re.MULTILINE)
    assert [(a, b, dot_label(label)[0] if label else "") for a, b, label in found] == [
        (ids[e.source], ids[e.target], e.label) for e in graph.edges
    ]
    assert source.count("subgraph cluster_") == 1
    assert re.search(r"^\s*n1 \[.*shape=cylinder style=filled", source, re.MULTILINE)


@pytest.mark.skipif(not HAS_DOT, reason="Graphviz's dot program is not installed")
def test_svg_drawn_by_graphviz_shows_every_label_line(tmp_path: Path) -> None:
    graph = odd_graph()
    target = tmp_path / "odd.svg"
    draw(graph, Format.SVG, target)
    texts = [t.text for t in ElementTree.parse(target).iter("{http://www.w3.org/2000/svg}text")]
    expected = (
        [graph.title]
        + [c.title for c in graph.clusters]
        + [line for n in graph.nodes for line in n.lines]
        + [ODD]
    )
    assert sorted(texts) == sorted(expected)


@pytest.mark.skipif(not HAS_DOT, reason="Graphviz's dot program is not installed")
def test_png_is_a_png(tmp_path: Path) -> None:
    draw(project_graph("shop", demo_plans()), Format.PNG, tmp_path / "shop.png")
    assert (tmp_path / "shop.png").read_bytes().startswith(b"\x89PNG\r\n\x1a\n")


@pytest.mark.parametrize(
    ("asked", "output", "chosen"),
    [
        (None, None, Format.DOT),
        (None, "pictures/shop.SVG", Format.SVG),
        (None, "shop.png", Format.PNG),
        (None, "shop.mmd", Format.MERMAID),
        (None, "shop.txt", Format.DOT),
        (Format.MERMAID, "shop.svg", Format.MERMAID),
    ],
)
def test_format_is_the_one_asked_for_else_the_one_the_output_suffix_names(
    asked: Format | None, output: str | None, chosen: Format
) -> None:
    assert choose_format(asked, Path(output) if output else None) == chosen


def test_without_dot_the_text_is_written_and_the_error_says_how_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    graph = project_graph("shop", demo_plans())
    with pytest.raises(EnvironmentProblem) as raised:
        draw(graph, Format.SVG, tmp_path / "shop.svg")
    assert not (tmp_path / "shop.svg").exists()
    assert (tmp_path / "shop.dot").read_text(encoding="utf-8") == text(graph, Format.DOT)
    message = str(raised.value)
    assert message.startswith(
        "environment: no SVG drawn: Graphviz's `dot` program is not installed"
    )
    assert f"wrote the picture as DOT text to {tmp_path / 'shop.dot'} instead" in message
    assert "apt-get install graphviz" in message and "brew install graphviz" in message


# the command (Spark) -----------------------------------------------------------------------

DEMO_FILES = {
    "views/sales.sql": (ROOT / "views" / "sales.sql").read_text(),
    "migrations/0001_create_shop.sql": (ROOT / "migrations" / "0001_create_shop.sql").read_text(),
}


@pytest.fixture(scope="module")
def demo(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo's views and tables (no rows: a picture needs none) in a database of its own."""
    root = tmp_path_factory.mktemp("graph_demo")
    for relative, content in {
        **DEMO_FILES,
        "ivm.yaml": f"database: t_{uuid.uuid4().hex[:8]}\n",
    }.items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text(content)
    ok(root, "migrate")
    return root


def test_graph_command_prints_dot_and_mermaid_built_from_the_compiled_plans(demo: Path) -> None:
    database = database_of(demo)
    plans = demo_plans(database)
    assert ok(demo, "graph") == text(project_graph(database, plans), Format.DOT)
    printed = ok(demo, "graph", "revenue_by_country", "--format", "mermaid")
    assert printed == text(circuit("revenue_by_country", plans), Format.MERMAID)
    assert f"state: {database}.__ivm_revenue_by_country" in printed


def test_graph_command_writes_text_to_a_file(demo: Path, tmp_path: Path) -> None:
    target = tmp_path / "circuit.mmd"  # the suffix chooses Mermaid
    assert ok(demo, "graph", "order_lines", "-o", str(target)).strip() == f"wrote {target}"
    assert target.read_text(encoding="utf-8") == text(
        circuit("order_lines", demo_plans(database_of(demo))), Format.MERMAID
    )


def test_graph_of_an_unknown_view_is_one_clear_error(demo: Path) -> None:
    result = ivm(demo, "graph", "nope")
    assert result.exit_code == 1
    assert_no_traceback(result)
    assert "no view named nope" in flat(result.stderr)
    assert (
        "views of this project: categories_sold, order_lines, revenue_by_country, shipped_totals"
        in flat(result.stderr)
    )


def test_svg_without_dot_writes_the_dot_text_and_says_what_is_missing(
    demo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.chdir(tmp_path)
    result = ivm(demo, "graph", "--format", "svg")
    assert result.exit_code == 1
    assert_no_traceback(result)
    message = flat(result.stderr)
    assert (
        "no SVG drawn: Graphviz's `dot` program is not installed; wrote the picture as DOT text to"
        in message
    )
    assert "apt-get install graphviz" in message and "brew install graphviz" in message
    assert not (tmp_path / f"{database_of(demo)}.svg").exists()
    assert (
        (tmp_path / f"{database_of(demo)}.dot").read_text(encoding="utf-8").startswith("digraph {")
    )


@pytest.mark.skipif(not HAS_DOT, reason="Graphviz's dot program is not installed")
def test_svg_of_a_view_is_named_after_it(
    demo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert (
        ok(demo, "graph", "categories_sold", "--format", "svg").strip()
        == "wrote categories_sold.svg"
    )
    assert (
        ElementTree.parse(tmp_path / "categories_sold.svg").getroot().tag
        == "{http://www.w3.org/2000/svg}svg"
    )


def test_a_recursive_views_loop_feeds_its_own_recursive_term() -> None:
    """DBSP's recursive subcircuit: the fixed point's rows go round through the recursive
    term and back, and the anchor feeds it from outside the cycle."""
    graph = example(
        "WITH RECURSIVE r(k, hops) AS (SELECT k, 1 FROM t UNION ALL SELECT u.k, r.hops + 1 FROM r "
        "JOIN u ON r.k = u.k WHERE r.hops < 3) SELECT k, hops FROM r",
        False,
    )
    (loop,) = [n for n in graph.nodes if n.kind == Kind.FIXED_POINT]
    assert loop.state == "db.__ivm_v"
    reached, frontier = set(), {loop.id}
    while frontier:
        frontier = {e.target for e in graph.edges if e.source in frontier} - reached
        reached |= frontier
    assert loop.id in reached  # back to itself: a cycle
    # the anchor and the recursive term
    assert len({e.source for e in graph.edges if e.target == loop.id}) == 2
