"""The SQL ivm maintains, and how: docs/sql-support.md is generated from this registry by
compiling each example, so the strategies and the state it shows are the compiler's own.

    python -m ivm_sql.support > docs/sql-support.md     (tests/test_support.py checks it)
"""

from __future__ import annotations

import re

from ivm_sql.catalog import StaticCatalog
from ivm_sql.compiler.order import compile_views
from ivm_sql.compiler.plan import ViewPlan
from ivm_sql.errors import IvmError, Location
from ivm_sql.viewdefs import parse_view

CATALOG = StaticCatalog(
    {
        "db.t": [("k", "int"), ("a", "int"), ("b", "string"), ("arr", "array<int>")],
        "db.u": [("k", "int"), ("d", "decimal(10,2)")],
    }
)

FULL = "any SELECT with REFRESH POLICY FULL (or TBLPROPERTIES ('ivm.refresh' = 'full')), rand() allowed"
INCREMENTAL = (
    "REFRESH POLICY INCREMENTAL or INCREMENTAL STRICT over an operator recomputed whole "
    "(the current time outside a filter, a non-invertible global aggregate)"
)
CLAUSES = {
    FULL: "REFRESH POLICY FULL",
    INCREMENTAL: "REFRESH POLICY INCREMENTAL",
}  # written before AS

# (construct, example view body over t(k, a, b, arr) and u(k, d))
SUPPORTED = [
    (
        "projection with deterministic expressions, WHERE",
        "SELECT k, CASE WHEN a > 0 THEN upper(b) END AS x FROM t WHERE a IS NOT NULL",
    ),
    (
        "inner joins (any number, self-joins, comma joins)",
        "SELECT t.k, u.d FROM t JOIN u ON t.k = u.k JOIN t AS t2 ON t2.a = t.k",
    ),
    ("UNION ALL", "SELECT k FROM t UNION ALL SELECT k FROM u"),
    ("SELECT DISTINCT, UNION", "SELECT DISTINCT b FROM t"),
    (
        "GROUP BY with COUNT, SUM, AVG; HAVING; expressions over them",
        "SELECT b, COUNT(*) AS n, SUM(a) * 2 AS s, AVG(a) AS m FROM t GROUP BY b HAVING COUNT(a) > 1",
    ),
    ("global aggregate (no GROUP BY)", "SELECT COUNT(*) AS n, SUM(d) AS s FROM u"),
    (
        "MIN, MAX (beside COUNT, SUM, AVG), grouped or global",
        "SELECT b, MIN(a) AS lo, MAX(k) AS hi, COUNT(*) AS n FROM t GROUP BY b",
    ),
    (
        "COUNT(DISTINCT), percentile, collect_set, sort_array(collect_list(x)), max_by, stddev, ...",
        "SELECT b, MIN(a) AS lo, COUNT(DISTINCT a) AS n, max_by(k, a) AS top FROM t GROUP BY b",
    ),
    (
        "ROLLUP, CUBE, GROUPING SETS, grouping(), grouping_id() (MIN/MAX and the like: touched groups recomputed)",
        "SELECT b, a, grouping_id() AS gid, COUNT(*) AS n, SUM(k) AS s FROM t GROUP BY ROLLUP (b, a) HAVING grouping(a) = 1 OR SUM(k) > 0",
    ),
    (
        "LEFT / RIGHT / FULL OUTER JOIN (extra ON conditions, NULL keys)",
        "SELECT t.k, u.d FROM t LEFT JOIN u ON t.k = u.k AND u.d > 0",
    ),
    ("outer join without an equality", "SELECT t.k, u.d FROM t FULL JOIN u ON t.a < u.k"),
    (
        "EXISTS, IN (correlated or not)",
        "SELECT k FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.k = t.k AND u.d > 0)",
    ),
    ("NOT EXISTS", "SELECT k FROM t WHERE NOT EXISTS (SELECT 1 FROM u WHERE u.k = t.k)"),
    ("NOT IN (SQL's NULL semantics)", "SELECT k FROM t WHERE a NOT IN (SELECT k FROM u)"),
    (
        "correlated NOT IN (SQL's NULL semantics within each correlated set)",
        "SELECT k FROM t WHERE a NOT IN (SELECT u.k FROM u WHERE u.d = t.k)",
    ),
    ("uncorrelated scalar subquery", "SELECT k FROM t WHERE a > (SELECT AVG(d) FROM u)"),
    (
        "correlated scalar subquery in a WHERE comparison",
        "SELECT k FROM t WHERE a > (SELECT MAX(d) FROM u WHERE u.k = t.k)",
    ),
    (
        "correlated scalar subquery anywhere else (SELECT list, COUNT's 0 for no rows)",
        "SELECT k, (SELECT COUNT(*) FROM u WHERE u.k = t.k) AS n, (SELECT MAX(d) FROM u WHERE u.k = t.k) AS m FROM t",
    ),
    (
        "correlated scalar subquery that looks a value up (no aggregate): reading a row whose lookup finds two rows fails with Spark's SCALAR_SUBQUERY_TOO_MANY_ROWS, as Spark's SELECT does",
        "SELECT k, (SELECT d FROM u WHERE u.k = t.k) AS m FROM t",
    ),
    (
        "scalar subquery in HAVING",
        "SELECT b, SUM(a) AS s FROM t GROUP BY b HAVING SUM(a) > (SELECT AVG(d) FROM u)",
    ),
    ("INTERSECT, EXCEPT (DISTINCT or ALL)", "SELECT k FROM t EXCEPT ALL SELECT k FROM u"),
    (
        "window functions partitioned by a key (ROW_NUMBER, RANK, running SUM, LAG, LEAD)",
        "SELECT k, a, ROW_NUMBER() OVER (PARTITION BY b ORDER BY a) AS rn, LAG(a) OVER (PARTITION BY b ORDER BY k) AS prev FROM t",
    ),
    (
        "window functions over grouped rows (with HAVING, QUALIFY)",
        "SELECT b, COUNT(*) AS n, RANK() OVER (ORDER BY COUNT(*) DESC) AS r FROM t GROUP BY b HAVING COUNT(*) > 1",
    ),
    (
        "top-k per key (QUALIFY)",
        "SELECT k, b FROM t QUALIFY ROW_NUMBER() OVER (PARTITION BY b ORDER BY a DESC) <= 3",
    ),
    ("global ORDER BY ... LIMIT k", "SELECT k, a FROM t ORDER BY a DESC LIMIT 10"),
    (
        "explode, posexplode, inline in SELECT (inline with its columns named)",
        "SELECT k, posexplode(arr) AS (pos, x) FROM t WHERE a > 0",
    ),
    (
        "LATERAL VIEW [OUTER] explode / posexplode / inline",
        "SELECT t.k, e.pos, e.x FROM t LATERAL VIEW OUTER posexplode(t.arr) e AS pos, x",
    ),
    (
        "WITH RECURSIVE: anchor UNION ALL a recursive term linear in the CTE (transitive closure, hierarchies, bounded paths)",
        "WITH RECURSIVE r(k, hops) AS (SELECT k, 1 FROM t UNION ALL SELECT u.k, r.hops + 1 FROM r JOIN u ON r.k = u.k WHERE r.hops < 3) SELECT k, hops FROM r",
    ),
    (
        "subqueries in FROM, WITH",
        "WITH g AS (SELECT k, SUM(a) AS s FROM t GROUP BY k) SELECT g.k, g.s, u.d FROM g JOIN u ON g.k = u.k",
    ),
    (
        "VALUES, an inline table, alone or joined (a constant: it has no change, so its join terms vanish)",
        "SELECT t.k, v.label FROM VALUES (1, 'one'), (2, 'two') AS v(k, label) JOIN t ON t.k = v.k",
    ),
    (
        "table functions of literals in FROM: range (1 to 4 arguments), explode, posexplode, inline, stack (a constant)",
        "SELECT r.s, COUNT(t.k) AS n FROM range(1, 6) AS r(s) LEFT JOIN t ON t.a = r.s GROUP BY r.s",
    ),
    (
        "SELECT without FROM; a CTE or scalar subquery that reads no table, such as parameters (a constant)",
        "WITH params AS (SELECT 'GC' AS good, 100 AS bonus) SELECT t.k, t.a + (SELECT bonus FROM params) AS a FROM t WHERE t.b = (SELECT good FROM params)",
    ),
    (
        "a scalar subquery over a constant in GROUP BY and the SELECT list, or beside an aggregate",
        "WITH params AS (SELECT 'GC' AS good, 100 AS bonus) SELECT CASE WHEN b = (SELECT good FROM params) THEN 'good' ELSE 'other' END AS bucket, SUM(a) + (SELECT bonus FROM params) AS total FROM t GROUP BY CASE WHEN b = (SELECT good FROM params) THEN 'good' ELSE 'other' END",
    ),
    (
        "parenthesized join trees",
        "SELECT t.k, u.d, t2.b FROM (t LEFT JOIN (u CROSS JOIN t AS t2) ON t.k = u.k AND t2.a = u.k)",
    ),
    (
        "FILTER (WHERE ...) on an aggregate (COUNT, SUM, AVG, MIN, MAX as the aggregate of a CASE; others recomputed per touched group)",
        "SELECT b, SUM(a) FILTER (WHERE a > 100) AS big, COUNT(*) FILTER (WHERE a IS NULL) AS unknown, MAX(k) FILTER (WHERE a > 0) AS hi FROM t GROUP BY b",
    ),
    (
        "a filter comparing a column with the current time (current_timestamp, current_date, now): a temporal filter",
        "SELECT k FROM t WHERE a > unix_timestamp(current_timestamp()) - 86400",
    ),
    (
        "the current time compared with a column outside a filter (an outer join's ON, a SELECT expression)",
        "SELECT t.k, u.d FROM t LEFT JOIN u ON t.k = u.k AND t.a > unix_timestamp(now()) - 60",
    ),
    (FULL, "SELECT k, rand() AS r FROM t"),
    (
        "column names with spaces, punctuation, unicode, quoted reserved words (a table ivm keeps with a name Delta refuses as it is gets column mapping)",
        "SELECT k AS `order id`, a AS `n,1`, b AS `naïve`, k AS `select` FROM t",
    ),
]

REFUSED = [
    (
        "non-deterministic functions (rand, uuid, the current time outside a comparison with a column, ...)",
        "SELECT k, rand() AS r FROM t",
    ),
    (
        "order-dependent aggregates (first, last, collect_list unsorted, any_value)",
        "SELECT b, first(a) AS f FROM t GROUP BY b",
    ),
    ("ORDER BY without LIMIT", "SELECT k FROM t ORDER BY k"),
    (
        "WITH RECURSIVE with UNION (Spark refuses it too), or a recursive term reading its CTE twice or under GROUP BY, DISTINCT, a window or an outer join",
        "WITH RECURSIVE r AS (SELECT k FROM t UNION SELECT k + 1 FROM r WHERE k < 3) SELECT k FROM r",
    ),
    (
        "an uncorrelated scalar subquery that may return several rows (no aggregate, or GROUP BY): Spark fails at run time",
        "SELECT k, (SELECT d FROM u WHERE u.d > 0) AS m FROM t",
    ),
    (
        "a correlated scalar subquery correlated other than by equalities",
        "SELECT k, (SELECT MAX(d) FROM u WHERE u.k > t.k) AS m FROM t",
    ),
    ("time travel or TABLESAMPLE in FROM", "SELECT k FROM t VERSION AS OF 3"),
    (
        "a table function whose rows are not fixed (it reads the current time, rand(), uuid(), or a column: use LATERAL VIEW for that)",
        "SELECT r.id FROM range(unix_timestamp(now())) AS r",
    ),
    (
        "a backtick in a column name: Delta's change data feed cannot write it",
        "SELECT k AS `a``b` FROM t",
    ),
    (INCREMENTAL, "SELECT percentile(a, 0.5) AS median FROM t"),
]

STATE = {
    "bag": "the view's rows, each distinct row once with its multiplicity",
    "distinct": "each distinct row with its count",
    "aggregate": "per group: row count, and per aggregate its non-NULL count and sum (MIN/MAX: the extreme and how many rows hold it)",
    "recompute": "the operator's output rows with their key; inputs re-read at the new version for touched keys",
    "top_k": "the first k + max(k, 100) rows in order, each with the weight of the rows before it, and a count of the rows after them",
    "fixpoint": "the fixed point's rows, each with its number of derivations; each iteration kept in memory during a refresh",
}


def _plan(body: str, clauses: str = "") -> ViewPlan:
    view = parse_view(f"CREATE VIEW v {clauses} AS {body}", Location("example.sql", 1))
    return compile_views([view], CATALOG, "db")[0]


def supported_rows() -> list[tuple[str, str, str, str]]:
    """(construct, example, strategies of its stages, state kept) for each supported entry."""
    rows = []
    for construct, example in SUPPORTED:
        plan = _plan(example, CLAUSES.get(construct, ""))
        strategies = "; ".join(dict.fromkeys(stage.strategy for stage in plan.stages))
        state = "; ".join(dict.fromkeys(STATE[stage.kind] for stage in plan.stages))
        rows.append((construct, example, strategies, state))
    return rows


def refused_rows() -> list[tuple[str, str, str]]:
    """(construct, example, ivm's message and hint) for each refused entry."""
    rows = []
    for construct, example in REFUSED:
        try:
            _plan(example, CLAUSES.get(construct, ""))
        except IvmError as error:
            rows.append((construct, example, f"{error.message}; {error.hint or ''}".rstrip("; ")))
        else:
            raise AssertionError(f"{construct} compiled, but it is listed as refused")
    return rows


def render() -> str:
    def cell(text: str) -> str:
        return text.replace("|", "\\|")

    def code(text: str) -> str:
        """A Markdown code span, fenced by more backticks than the text holds in a row."""
        fence = "`" * (max((len(run) for run in re.findall("`+", text)), default=0) + 1)
        padding = " " if "`" in text else ""
        return f"{fence}{padding}{cell(text)}{padding}{fence}"

    lines = [
        "# SQL support",
        "",
        "Generated by `python -m ivm_sql.support` from `ivm_sql/support.py`: each example was",
        "compiled by ivm, and the strategy and state columns are what the compiler chose for it.",
        "`tests/test_support.py` fails when this file and the compiler disagree.",
        "",
        "Strategies: *incremental* rules apply the change alone (DBSP: linear operators pass it",
        "through, joins expand bilinearly, COUNT/SUM/AVG, MIN/MAX and DISTINCT update from it); *recompute",
        "touched keys* recomputes only the groups, partitions, join keys or rows present in the",
        "change, from the inputs' new versions; *recompute all* does so for the whole operator, and",
        "says so in `ivm compile` and `ivm refresh`.",
        "",
        "## Statements and clauses",
        "",
        "A views file holds `CREATE [OR REPLACE] [MATERIALIZED] VIEW name [(column [COMMENT '...'], ...)]",
        "[COMMENT '...'] [PARTITIONED BY (column, ...) | CLUSTER BY (column, ...)] [TBLPROPERTIES (...)]",
        "[REFRESH POLICY AUTO | INCREMENTAL | INCREMENTAL STRICT | FULL] AS query` statements; the two",
        "kinds are the same to ivm. The comment, properties and layout go to the view's table (its last",
        "stage's), the comments also to the view users query. Refused at their line: a column type in",
        "the column list, PARTITIONED BY or CLUSTER BY a column the view does not return as its table",
        "stores it, a property ivm's own state depends on (`delta.enableChangeDataFeed`,",
        "`delta.enableDeletionVectors`, `delta.columnMapping.mode`, `delta.appendOnly`, `delta.checkpointInterval`, `ivm.*`), an",
        "unknown policy, and any other clause. `INCREMENTAL` and `INCREMENTAL STRICT` refuse a view with",
        "a *recompute all* strategy below; `FULL` (also `TBLPROPERTIES ('ivm.refresh' = 'full')`)",
        "recomputes any SELECT whenever a source changes. [Refresh policies](refresh.md#refresh-policies) says what each",
        "policy does at refresh time.",
        "",
        "In a Spark Declarative Pipelines project (a `spark-pipeline.yml`; see [Pipelines](pipelines.md)),",
        "the SQL libraries may also hold `CREATE TEMPORARY VIEW name AS query`",
        "(inlined into the datasets that read it; no table is made) and `CREATE STREAMING TABLE name AS",
        "SELECT ... FROM STREAM(source) [WITH ('skipChangeCommits' = 'true')]`: a projection and filter of",
        "one source, kept by appending the inserts of the source's change data feed. A source commit that",
        "deletes or updates rows is refused, unless `skipChangeCommits` skips such commits whole, as",
        "Spark's streaming reader does. Refused at their line: `CREATE FLOW`, `SET`, `CREATE TABLE`,",
        "`STREAM` outside a streaming table, and other reader options.",
        "",
        "## Maintained",
        "",
        "| SQL | example | strategy | state kept |",
        "|---|---|---|---|",
    ]
    lines += [
        f"| {cell(a)} | {code(b)} | {cell(c)} | {cell(d)} |" for a, b, c, d in supported_rows()
    ]
    lines += [
        "",
        "## Refused at compile time (with file:line and this hint)",
        "",
        "| SQL | example | message |",
        "|---|---|---|",
    ]
    lines += [f"| {cell(a)} | {code(b)} | {cell(c)} |" for a, b, c in refused_rows()]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(render(), end="")
