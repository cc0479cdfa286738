"""The typed model of ``ivm.yaml`` and its loader.

Layout (every key is optional; an empty file gives all defaults)::

    database: shop          # schema for base tables, views and ivm's state tables
    views: views            # folder of CREATE VIEW files
    migrations: migrations  # folder of NNNN_name.sql files
    spark:
      master: local[*]      # or spark://host:7077, yarn, ...
      remote: sc://host:15002  # or a Spark Connect endpoint instead of a master (not both)
      token_env: MY_TOKEN   # the environment variable holding that endpoint's token, if it wants one
      app_name: ivm
      conf:                 # any extra Spark settings, passed through
        spark.sql.shuffle.partitions: 4
    refresh:
      recompute_above: 0.1  # recompute a stage when its change is this share of its input rows (or scans as much); or never
      policy: auto          # the views' default REFRESH POLICY: auto, incremental, incremental strict or full
      workers: 2            # views refreshed at the same time (default: fits the machine's cores; 1: one by one)
    history:
      log: true             # append what each refresh did to <database>.__ivm_refresh_log
      keep_days: 30         # entries older than this are deleted, at most once a day; or never
      learn: true           # AUTO views refresh each stage the way its own history finds cheaper
      explore: false        # a stage recomputed only by its first load may be recomputed once, to learn

Errors point at the offending line: the file is composed into yaml nodes first,
which keep their positions, and only then turned into values.
"""

from __future__ import annotations

import ipaddress
import re
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

import yaml

from ivm_sql.errors import ConfigError, Location
from ivm_sql.refresh_policy import NAMES as POLICY_NAMES
from ivm_sql.refresh_policy import RefreshPolicy

IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
CONNECT_PORT = 15002  # Spark Connect's default port
# The Connect server's token setting: a Spark setting in ivm.yaml would put it in the file.
TOKEN_SETTING = "spark.connect.authenticate.token"
TOKEN_HINT = "keep the token in an environment variable and name that variable in ivm.yaml: spark: {token_env: NAME}"


@dataclass(frozen=True)
class SparkSettings:
    """The ``spark:`` section: where Spark runs and any extra settings for it."""

    master: str = "local[*]"
    app_name: str = "ivm"
    conf: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    remote: str | None = None  # a Spark Connect URL (sc://host:port) to use instead of a master
    # The environment variable that holds ``remote``'s token: never the token itself, which
    # anyone who reads ivm.yaml (or the repository it is committed to) could use.
    token_env: str | None = None


@dataclass(frozen=True)
class RefreshSettings:
    """The ``refresh:`` section: when a refresh recomputes instead of applying the change.

    ``recompute_above`` is the share of a stage's input rows that a change must exceed for
    the stage to be recomputed from scratch rather than incrementally (None: never).
    """

    recompute_above: float | None = 0.1
    # of a view whose SQL names none (``physical.policy``)
    policy: RefreshPolicy = RefreshPolicy.AUTO
    # views refreshed at the same time (None: ``runtime.workers`` fits the machine)
    workers: int | None = None


@dataclass(frozen=True)
class HistorySettings:
    """The ``history:`` section: the refresh event log (``storage.refresh_log``)."""

    log: bool = True  # each refresh appends what it did
    keep_days: int | None = 30  # entries older than this are deleted (None: kept for ever)
    learn: bool = True  # under AUTO, a stage's history chooses its way (``physical.learned``)
    # a stage recomputed only by its first load may be recomputed once, to learn
    explore: bool = False


@dataclass(frozen=True)
class Config:
    """The whole of ``ivm.yaml``; folder paths are relative to the project directory."""

    database: str = "default"
    views_dir: str = "views"
    migrations_dir: str = "migrations"
    spark: SparkSettings = field(default_factory=SparkSettings)
    refresh: RefreshSettings = field(default_factory=RefreshSettings)
    history: HistorySettings = field(default_factory=HistorySettings)
    # where ivm.yaml sets each top-level key, for errors found after loading
    locations: Mapping[str, Location] = field(
        default_factory=lambda: MappingProxyType({}), compare=False
    )

    @property
    def is_embedded(self) -> bool:
        """True when Spark runs inside this process (a ``local`` master, no ``spark.remote``)."""
        return self.spark.remote is None and self.spark.master.startswith("local")

    def folder(self, root: Path, key: str) -> Path | None:
        """The ``views`` or ``migrations`` folder under ``root``. None when it is missing and
        ivm.yaml does not name it (a project may have no views or migrations yet); one
        ivm.yaml names that is not a folder is a typo, a ConfigError at its line."""
        path = root / (self.views_dir if key == "views" else self.migrations_dir)
        if path.is_dir():
            return path
        if key not in self.locations:
            return None
        raise ConfigError(
            f"{key}: {path} is not a folder"
            if path.exists()
            else f"{key}: folder {path} does not exist",
            location=self.locations[key],
            hint=f"create it, or fix the path in ivm.yaml (relative to {root})",
        )


_TOP_KEYS = ("database", "views", "migrations", "spark", "refresh", "history")
_SPARK_KEYS = ("master", "remote", "token_env", "app_name", "conf")
_REFRESH_KEYS = ("recompute_above", "policy", "workers")
_HISTORY_KEYS = ("log", "keep_days", "learn", "explore")


def load_config(path: Path) -> Config:
    """Read and validate ``ivm.yaml`` at ``path``; raise ConfigError pointing at the bad line."""
    root = compose_file(path)
    if root is None:
        return Config()
    return _Reader(path).config(root)


def compose_file(path: Path) -> yaml.Node | None:
    """The yaml node tree of the file at ``path`` (None when empty); nodes keep their lines."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}", location=Location(path)) from exc
    except UnicodeDecodeError:
        raise ConfigError(
            f"{path.name} is not UTF-8 text", location=Location(path), hint="save it as UTF-8"
        ) from None
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else None
        raise ConfigError(
            f"invalid YAML: {exc.problem or exc}", location=Location(path, line)
        ) from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"invalid YAML: {exc}", location=Location(path)) from exc
    return root


class _Reader:
    """Turns the composed node tree of one file into a Config, checking as it goes; its
    checks of single nodes also serve the project's other yaml file (``node_reader``)."""

    def __init__(self, path: Path):
        self.path = path

    def config(self, root: yaml.Node) -> Config:
        top = self._mapping(root, "the top level", _TOP_KEYS)
        values: dict[str, object] = {}
        if "database" in top:
            database = self._string(top["database"], "database")
            if not IDENTIFIER.fullmatch(database):
                raise ConfigError(
                    f"database {database!r} is not a plain identifier",
                    location=self._at(top["database"]),
                    hint="use letters, digits and underscores, not starting with a digit",
                )
            values["database"] = database
        if "views" in top:
            values["views_dir"] = self._string(top["views"], "views")
        if "migrations" in top:
            values["migrations_dir"] = self._string(top["migrations"], "migrations")
        if "spark" in top:
            values["spark"] = self._spark(top["spark"])
        if "refresh" in top:
            values["refresh"] = self._refresh(top["refresh"])
        if "history" in top:
            values["history"] = self._history(top["history"])
        values["locations"] = MappingProxyType({key: self._at(node) for key, node in top.items()})
        return Config(**values)  # type: ignore[arg-type]

    def _spark(self, node: yaml.Node) -> SparkSettings:
        section = self._mapping(node, "spark", _SPARK_KEYS)
        values: dict[str, object] = {}
        if "master" in section:
            values["master"] = self._string(section["master"], "spark.master")
        if "remote" in section:
            if "master" in section:
                raise ConfigError(
                    "spark.master and spark.remote are both set",
                    location=self._at(section["remote"]),
                    hint="a Spark Connect endpoint runs on its own master: keep one of the two",
                )
            values["remote"] = self._remote(section["remote"])
        if "token_env" in section:
            values["token_env"] = self._token_env(section["token_env"], values.get("remote"))
        if "app_name" in section:
            values["app_name"] = self._string(section["app_name"], "spark.app_name")
        if "conf" in section:
            entries = self._mapping(section["conf"], "spark.conf", None)
            if TOKEN_SETTING in entries:
                raise ConfigError(
                    f"spark.conf must not set {TOKEN_SETTING}: a token written in ivm.yaml is readable by anyone who reads the file",
                    location=self._at(entries[TOKEN_SETTING]),
                    hint="`ivm server start` makes a token of its own; for a remote server, "
                    + TOKEN_HINT,
                )
            values["conf"] = MappingProxyType(
                {key: self._setting(value, key) for key, value in entries.items()}
            )
        return SparkSettings(**values)  # type: ignore[arg-type]

    def _remote(self, node: yaml.Node) -> str:
        """A Spark Connect URL, checked as pyspark's client will parse it."""
        url = self._string(node, "spark.remote")
        problem = connect_url_problem(url)
        if problem:
            raise ConfigError(
                f"spark.remote {url!r} is not a Spark Connect URL: {problem}",
                location=self._at(node),
                hint=f"write sc://HOST:PORT (port {CONNECT_PORT} if left out), optionally followed by /;use_ssl=true",
            )
        if "token" in connect_params(url):
            raise ConfigError(
                "spark.remote must not hold the server's token (;token=...): anyone who reads ivm.yaml could use it",
                location=self._at(node),
                hint=TOKEN_HINT,
            )
        return url

    def _token_env(self, node: yaml.Node, remote: str | None) -> str:
        """The name of the environment variable holding the token of ``remote``
        (spark.remote's URL)."""
        name = self._string(node, "spark.token_env")
        if not IDENTIFIER.fullmatch(name):
            raise ConfigError(
                "spark.token_env is not the name of an environment variable",  # it may be the token: not repeated
                location=self._at(node),
                hint="name the variable that holds the token (letters, digits and _), not the token itself",
            )
        if remote is None:
            raise ConfigError(
                "spark.token_env is set without spark.remote",
                location=self._at(node),
                hint="it names the token of a remote Spark Connect server; `ivm server start` keeps its own token in .ivm/server.json",
            )
        if _loopback_address(remote) and connect_params(remote).get("use_ssl") != "true":
            raise ConfigError(
                f"spark.remote {remote} names this machine by address: pyspark sends a token to it only over TLS",
                location=self._at(node),
                hint="write the host as localhost (pyspark then sends the token over a local connection), or add /;use_ssl=true if the server speaks TLS",
            )
        return name

    def _refresh(self, node: yaml.Node) -> RefreshSettings:
        section = self._mapping(node, "refresh", _REFRESH_KEYS)
        values: dict[str, object] = {}
        if "recompute_above" in section:
            values["recompute_above"] = self._recompute_above(section["recompute_above"])
        if "policy" in section:
            values["policy"] = self._policy(section["policy"])
        if "workers" in section:
            values["workers"] = self._workers(section["workers"])
        return RefreshSettings(**values)  # type: ignore[arg-type]

    def _history(self, node: yaml.Node) -> HistorySettings:
        section = self._mapping(node, "history", _HISTORY_KEYS)
        values: dict[str, object] = {}
        if "log" in section:
            values["log"] = self._boolean(section["log"], "history.log")
        if "keep_days" in section:
            values["keep_days"] = self._keep_days(section["keep_days"])
        if "learn" in section:
            values["learn"] = self._boolean(section["learn"], "history.learn")
        if "explore" in section:
            values["explore"] = self._boolean(section["explore"], "history.explore")
        return HistorySettings(**values)  # type: ignore[arg-type]

    def _boolean(self, node: yaml.Node, key: str) -> bool:
        value = _scalar(node)
        if not isinstance(value, bool):
            raise ConfigError(
                f"{key} must be true or false, not {_shown(node)}",
                location=self._at(node),
            )
        return value

    def _keep_days(self, node: yaml.Node) -> int | None:
        value = _scalar(node)
        if value == "never":
            return None
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(
                f"history.keep_days must be a whole number of days (1 or more) or never, not {_shown(node)}",
                location=self._at(node),
                hint="e.g. 30 keeps a month of refreshes; never keeps them all",
            )
        return value

    def _workers(self, node: yaml.Node) -> int:
        value = _scalar(node)
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 64:
            raise ConfigError(
                f"refresh.workers must be a whole number from 1 to 64, not {_shown(node)}",
                location=self._at(node),
                hint="e.g. 2 refreshes two independent views at a time; 1 refreshes them one by one",
            )
        return value

    def _policy(self, node: yaml.Node) -> RefreshPolicy:
        value = (
            node.value
            if isinstance(node, yaml.ScalarNode) and node.tag == "tag:yaml.org,2002:str"
            else None
        )
        policy = RefreshPolicy.named(value) if value is not None else None
        if policy is None:
            raise ConfigError(
                f"refresh.policy must be a refresh policy, not {value if value is not None else _describe(node)}",
                location=self._at(node),
                hint=f"one of {POLICY_NAMES} (as in REFRESH POLICY; any case)",
            )
        return policy

    def _recompute_above(self, value_node: yaml.Node) -> float | None:
        value = _scalar(value_node)
        if value == "never":
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
            raise ConfigError(
                f"refresh.recompute_above must be a positive number or never, not {_shown(value_node)}",
                location=self._at(value_node),
                hint="e.g. 0.1 recomputes a stage when its change exceeds 10% of the rows it reads",
            )
        return float(value)

    def _mapping(
        self, node: yaml.Node, what: str, allowed: tuple[str, ...] | None
    ) -> dict[str, yaml.Node]:
        """The entries of a mapping node; an empty (null) value counts as an empty mapping."""
        if self._is_null(node):
            return {}
        if not isinstance(node, yaml.MappingNode):
            raise ConfigError(
                f"{what} must be a mapping of keys to values", location=self._at(node)
            )
        entries: dict[str, yaml.Node] = {}
        for key_node, value_node in node.value:
            key = key_node.value if isinstance(key_node, yaml.ScalarNode) else None
            if not isinstance(key, str) or key_node.tag != "tag:yaml.org,2002:str":
                raise ConfigError(f"keys in {what} must be names", location=self._at(key_node))
            if allowed is not None and key not in allowed:
                raise ConfigError(
                    f"unknown key {key!r} in {what}",
                    location=self._at(key_node),
                    hint=f"valid keys are: {', '.join(allowed)}",
                )
            if key in entries:
                raise ConfigError(
                    f"key {key!r} is given twice in {what}", location=self._at(key_node)
                )
            entries[key] = value_node
        return entries

    def _string(self, node: yaml.Node, key: str) -> str:
        if not isinstance(node, yaml.ScalarNode) or node.tag != "tag:yaml.org,2002:str":
            raise ConfigError(
                f"{key} must be a string, not {_describe(node)}", location=self._at(node)
            )
        return str(node.value)

    def _setting(self, node: yaml.Node, key: str) -> str:
        """A Spark conf value: any scalar, passed to Spark as a string (booleans as true/false)."""
        if not isinstance(node, yaml.ScalarNode) or self._is_null(node):
            raise ConfigError(
                f"spark.conf value for {key!r} must be a string, number or boolean, not {_describe(node)}",
                location=self._at(node),
            )
        value = yaml.SafeLoader("").construct_object(node)
        if isinstance(value, bool):
            return "true" if value else "false"
        return str(value)

    @staticmethod
    def _is_null(node: yaml.Node) -> bool:
        return node.tag == "tag:yaml.org,2002:null"

    def _at(self, node: yaml.Node) -> Location:
        return Location(self.path, node.start_mark.line + 1)


def node_reader(path: Path) -> _Reader:
    """The checks of yaml nodes (mapping, string, at) for another yaml file at ``path``."""
    return _Reader(path)


def connect_address(url: str) -> tuple[str, int]:
    """Host and port of a Spark Connect URL that ``connect_url_problem`` accepts."""
    parsed = urllib.parse.urlparse("http" + url[2:])
    return parsed.hostname or "", parsed.port or CONNECT_PORT


def connect_params(url: str) -> dict[str, str]:
    """The ``key=value`` parameters after ``/;`` of a Spark Connect URL that
    ``connect_url_problem`` accepts (``use_ssl``, ``token``, ...)."""
    params = urllib.parse.urlparse("http" + url[2:]).params
    return dict(part.split("=", 1) for part in params.split(";") if part)


def _loopback_address(url: str) -> bool:
    """Whether a Spark Connect URL names this machine by a loopback address (127.0.0.1, ::1)
    rather than by the name localhost."""
    try:
        return ipaddress.ip_address(connect_address(url)[0]).is_loopback
    except ValueError:  # a name, not an address
        return False


def connect_url_problem(url: str) -> str | None:
    """What is wrong with a Spark Connect URL (``sc://host[:port][/;key=value...]``), or None."""
    if not url.startswith("sc://"):
        return "it must start with sc://"
    parsed = urllib.parse.urlparse("http" + url[2:])  # how pyspark parses it
    if not parsed.hostname:
        return "the host is missing"
    try:
        parsed.port  # noqa: B018 (reading it validates it)
    except ValueError:
        return "the port is not a number from 0 to 65535"
    if parsed.path not in ("", "/"):
        return f"unexpected path {parsed.path!r}"
    if any(len(part.split("=")) != 2 for part in parsed.params.split(";") if parsed.params):
        return "parameters after /; must be key=value pairs separated by ;"
    return None


def _scalar(node: yaml.Node) -> object:
    """A scalar node's value as YAML reads it (None for a mapping or a list)."""
    return yaml.SafeLoader("").construct_object(node) if isinstance(node, yaml.ScalarNode) else None


def _shown(node: yaml.Node) -> str:
    """A node as an error message quotes it: a scalar's text, else what it holds."""
    return node.value if isinstance(node, yaml.ScalarNode) else _describe(node)


def _describe(node: yaml.Node) -> str:
    """A short name for what a node holds, for error messages."""
    if isinstance(node, yaml.MappingNode):
        return "a mapping"
    if isinstance(node, yaml.SequenceNode):
        return "a list"
    kind = node.tag.rsplit(":", 1)[-1]
    return {"null": "empty", "int": "a number", "float": "a number", "bool": "a boolean"}.get(
        kind, repr(node.value)
    )
