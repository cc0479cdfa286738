"""The clauses of ``CREATE [MATERIALIZED] VIEW`` besides its name and query.

``name [(column [COMMENT '...'], ...)] [COMMENT '...'] [PARTITIONED BY (column, ...) | CLUSTER BY
(column, ...)] [TBLPROPERTIES (...)] [REFRESH POLICY AUTO | INCREMENTAL [STRICT] | FULL] AS query``,
as Databricks writes them. The comment, properties and layout apply to the view's table
(its last stage's Delta table, checked against the view's columns by ``physical.view_table``);
the comments also to the view users query. sqlglot does not read REFRESH POLICY: it is cut
out of the text first (``refresh_policy``), blanked so every line keeps its number.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sqlglot import TokenType, exp
from sqlglot.dialects.spark import Spark
from sqlglot.errors import TokenError

from ivm_sql.errors import Location, SqlError, UnsupportedError
from ivm_sql.refresh_policy import NAMES, RefreshPolicy

# TBLPROPERTIES ('ivm.refresh' = 'full'): the older spelling of REFRESH POLICY
REFRESH_PROPERTY = "ivm.refresh"

# Table properties ivm's own state depends on, and why: a view may not set them.
RESERVED_PROPERTIES = {
    "delta.enablechangedatafeed": "ivm reads the change data feed of every table it keeps",
    "delta.enabledeletionvectors": "ivm turns deletion vectors on when a table grows large",
    "delta.columnmapping.mode": "ivm turns column mapping on where the view's column names need it",
    "delta.appendonly": "ivm's refreshes update and delete rows of the view's table",
    "delta.checkpointinterval": "ivm writes the table's checkpoints after each refresh's commits",
}


@dataclass(frozen=True)
class ViewClauses:
    """What a view asks of its table besides its rows."""

    comment: str | None = None
    column_comments: tuple[tuple[str, str], ...] = ()  # (column, comment) from the column list
    properties: tuple[tuple[str, str], ...] = ()  # TBLPROPERTIES, 'ivm.refresh' left out
    partitioned_by: tuple[str, ...] = ()
    clustered_by: tuple[str, ...] = ()


def refresh_policy(text: str, location: Location) -> tuple[str, RefreshPolicy | None]:
    """``text`` with its ``REFRESH POLICY ...`` clause blanked out (newlines kept), and the
    policy it names (None without one). Only the part before the query's AS is looked at."""
    try:
        tokens = Spark.tokenizer_class().tokenize(text)
    except TokenError:
        return text, None  # the parser says what is wrong, at its line
    depth = 0
    for i, token in enumerate(tokens):
        depth += {TokenType.L_PAREN: 1, TokenType.R_PAREN: -1}.get(token.token_type, 0)
        if depth:
            continue
        if token.token_type == TokenType.ALIAS:
            return text, None  # the query starts here: the clause comes before it
        if (
            token.text.upper() == "REFRESH"
            and i + 1 < len(tokens)
            and tokens[i + 1].text.upper() == "POLICY"
        ):
            return _cut_policy(text, tokens, i, location)
    return text, None


def _cut_policy(text: str, tokens: list, at: int, location: Location) -> tuple[str, RefreshPolicy]:
    words = tokens[at + 2 : at + 4]
    spelled = [w.text for w in words[:1]]
    if (
        words[:1]
        and words[0].text.upper() == "INCREMENTAL"
        and len(words) > 1
        and words[1].text.upper() == "STRICT"
    ):
        spelled.append(words[1].text)
    policy = RefreshPolicy.named(" ".join(spelled)) if spelled else None
    if policy is None:
        word = words[0] if words and words[0].token_type != TokenType.ALIAS else None
        found, line = (
            (word.text, word.line) if word is not None else ("nothing", tokens[at + 1].line)
        )
        raise SqlError(
            f"unknown refresh policy {found}",
            location=Location(location.path, (location.line or 1) + line - 1),
            hint=f"write REFRESH POLICY and one of {NAMES}",
        )
    end = tokens[at + 1 + len(spelled)].end + 1
    start = tokens[at].start
    blank = "".join(c if c == "\n" else " " for c in text[start:end])
    return text[:start] + blank + text[end:], policy


def view_clauses(
    statement: exp.Create, at: Callable[[str], Location]
) -> tuple[ViewClauses, RefreshPolicy | None]:
    """The clauses of a parsed CREATE VIEW, and the policy its 'ivm.refresh' property names;
    whatever ivm cannot honour is refused at its line (``at(word)``: the line ``word`` is on)."""
    found: dict = {"column_comments": _column_comments(statement, at)}
    properties, policy = [], None
    container = statement.args.get("properties")
    for prop in container.expressions if container is not None else []:
        if isinstance(prop, exp.MaterializedProperty):
            continue
        if isinstance(prop, exp.SchemaCommentProperty):
            found["comment"] = prop.this.name
        elif isinstance(prop, exp.PartitionedByProperty):
            found["partitioned_by"] = _column_names(
                prop.this.expressions if isinstance(prop.this, exp.Schema) else [prop.this],
                "PARTITIONED BY",
                at,
            )
        elif isinstance(prop, exp.ClusterProperty):
            found["clustered_by"] = _column_names(prop.expressions, "CLUSTER BY", at)
        elif isinstance(prop, exp.Property) and isinstance(prop.this, exp.Literal):
            key, value = prop.name, prop.args["value"].name
            if key.lower() == REFRESH_PROPERTY:
                policy = _property_policy(value, at(key))
            else:
                _check_property(key, at(key))
                properties.append((key, value))
        else:
            clause = prop.sql("spark").split("(")[0].strip() or prop.key
            raise UnsupportedError(
                f"ivm cannot keep a view's {clause} clause",
                location=at(clause.split()[0]),
                hint="a view takes a column list, COMMENT, PARTITIONED BY or CLUSTER BY, TBLPROPERTIES and REFRESH POLICY",
            )
    if found.get("partitioned_by") and found.get("clustered_by"):
        raise SqlError(
            "a view cannot be both PARTITIONED BY and CLUSTER BY",
            location=at("CLUSTER"),
            hint="keep one: Delta lays a table out one way or the other",
        )
    return ViewClauses(properties=tuple(properties), **found), policy


def _column_comments(statement: exp.Create, at) -> tuple[tuple[str, str], ...]:
    target = statement.this
    comments = []
    for column in target.expressions if isinstance(target, exp.Schema) else []:
        if not isinstance(column, exp.ColumnDef):
            continue
        if column.args.get("kind") is not None:
            raise UnsupportedError(
                f"column {column.name} of the view's column list has a type",
                location=at(column.name),
                hint="leave the type out: a view's columns have the types its SELECT gives them (CAST there)",
            )
        for constraint in column.constraints:
            if not isinstance(constraint.kind, exp.CommentColumnConstraint):
                raise UnsupportedError(
                    f"ivm cannot keep {constraint.sql('spark')} on column {column.name}",
                    location=at(column.name),
                    hint="a column of a view's column list takes only a COMMENT",
                )
            comments.append((column.name.lower(), constraint.kind.this.name))
    return tuple(comments)


def _column_names(columns: list[exp.Expression], clause: str, at) -> tuple[str, ...]:
    names = []
    for column in columns:
        if not isinstance(column, (exp.Identifier, exp.Column)) or (
            isinstance(column, exp.Column) and column.table
        ):
            raise UnsupportedError(
                f"{clause} {column.sql('spark')}: ivm lays a view's table out by its columns only",
                location=at(clause.split()[0]),
                hint=f"name columns the view returns: {clause} (a, b)",
            )
        names.append(column.name.lower())
    return tuple(names)


def _property_policy(value: str, location: Location) -> RefreshPolicy:
    policy = RefreshPolicy.named(value)
    if policy is None:
        raise SqlError(
            f"{REFRESH_PROPERTY} must be one of {NAMES}, not '{value}'",
            location=location,
            hint="or write the clause REFRESH POLICY FULL (or another policy) before AS",
        )
    return policy


def _check_property(key: str, location: Location) -> None:
    lowered = key.lower()
    if lowered.startswith("ivm."):
        raise SqlError(
            f"table property {key} is not one ivm knows",
            location=location,
            hint=f"properties starting with ivm. are ivm's own; the only one a view sets is '{REFRESH_PROPERTY}'",
        )
    if lowered in RESERVED_PROPERTIES:
        raise UnsupportedError(
            f"a view cannot set table property {key}: {RESERVED_PROPERTIES[lowered]}",
            location=location,
            hint="leave it out; other delta.* properties (e.g. delta.logRetentionDuration) are kept",
        )
