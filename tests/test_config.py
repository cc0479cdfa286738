"""Loading ivm.yaml: defaults, every key, and errors that point at the right line."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from ivm_sql.class_archive import DRIVER_OPTIONS
from ivm_sql.config import Config, HistorySettings, SparkSettings, load_config
from ivm_sql.errors import ConfigError
from ivm_sql.session import find_java, start_settings


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "ivm.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def load_error(tmp_path: Path, text: str) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        load_config(write(tmp_path, text))
    return caught.value


@pytest.mark.parametrize("text", ["", "\n\n", "# only a comment\n# and another\n"])
def test_empty_file_gives_defaults(tmp_path: Path, text: str) -> None:
    config = load_config(write(tmp_path, text))
    assert config == Config()
    assert config.database == "default"
    assert config.spark.master == "local[*]"
    assert config.is_embedded


def test_full_file(tmp_path: Path) -> None:
    config = load_config(
        write(
            tmp_path,
            """\
database: shop          # schema for base tables, views and ivm's state tables
views: sql/views
migrations: sql/migrations
spark:
  master: spark://host:7077
  app_name: shop-ivm
  conf:
    spark.sql.shuffle.partitions: 4
    spark.sql.adaptive.enabled: false
    spark.executor.memory: 2g
""",
        )
    )
    assert config.database == "shop"
    assert config.views_dir == "sql/views"
    assert config.migrations_dir == "sql/migrations"
    assert config.spark.master == "spark://host:7077"
    assert config.spark.app_name == "shop-ivm"
    assert dict(config.spark.conf) == {
        "spark.sql.shuffle.partitions": "4",
        "spark.sql.adaptive.enabled": "false",
        "spark.executor.memory": "2g",
    }
    assert not config.is_embedded


def test_empty_spark_section_gives_defaults(tmp_path: Path) -> None:
    assert load_config(write(tmp_path, "spark:\n")).spark == SparkSettings()


def test_unknown_key_names_key_line_and_valid_keys(tmp_path: Path) -> None:
    error = load_error(tmp_path, "database: shop\nview: views\n")
    assert error.location is not None
    assert error.location.path == tmp_path / "ivm.yaml"
    assert error.location.line == 2
    assert "'view'" in error.message
    assert error.hint is not None and "views" in error.hint and "migrations" in error.hint


def test_unknown_key_in_spark_section(tmp_path: Path) -> None:
    error = load_error(tmp_path, "spark:\n  master: local[2]\n  memory: 4g\n")
    assert error.location is not None and error.location.line == 3
    assert "'memory'" in error.message
    assert error.hint is not None and "app_name" in error.hint


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        ("database: shop\nviews: [a, b]\n", 2, "views must be a string"),
        ("database: 42\n", 1, "database must be a string"),
        ("spark: local\n", 1, "spark must be a mapping"),
        ("spark:\n  conf:\n    spark.x:\n      nested: 1\n", 4, "spark.conf value"),
        ("history:\n  log: yes please\n", 2, "history.log must be true or false"),
        ("history:\n  keep_days: 0\n", 2, "history.keep_days must be a whole number"),
        ("history:\n  keep_days: a week\n", 2, "history.keep_days must be a whole number"),
        ("history:\n  learn: 1\n", 2, "history.learn must be true or false"),
        ("history: on\n", 1, "history must be a mapping"),
    ],
)
def test_wrong_type_points_at_line(tmp_path: Path, text: str, line: int, words: str) -> None:
    error = load_error(tmp_path, text)
    assert error.location is not None and error.location.line == line
    assert words in error.message


def test_invalid_yaml_reports_yaml_line(tmp_path: Path) -> None:
    error = load_error(tmp_path, "database: shop\nspark:\n  master: [local\n  app_name: x\n")
    assert "invalid YAML" in error.message
    assert error.location is not None and error.location.line == 4


@pytest.mark.parametrize("name", ["1shop", "my-shop", "shop.x", "`shop`"])
def test_database_must_be_plain_identifier(tmp_path: Path, name: str) -> None:
    error = load_error(tmp_path, f"# comment\ndatabase: '{name}'\n")
    assert error.location is not None and error.location.line == 2
    assert "plain identifier" in error.message


def test_error_text_shows_file_and_line(tmp_path: Path) -> None:
    error = load_error(tmp_path, "bogus: 1\n")
    assert str(error).startswith(f"{tmp_path / 'ivm.yaml'}:1: config error: unknown key 'bogus'")


def test_spark_remote_is_a_connect_url(tmp_path: Path) -> None:
    config = load_config(
        write(tmp_path, "spark:\n  remote: sc://cluster.example:15002/;use_ssl=true\n")
    )
    assert config.spark.remote == "sc://cluster.example:15002/;use_ssl=true"
    assert not config.is_embedded  # the endpoint keeps its own catalog


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("http://host:15002", "must start with sc://"),
        ("sc://:15002", "host is missing"),
        ("sc://host:port", "port is not a number"),
        ("sc://host:15002/db", "unexpected path"),
        ("sc://host/;token", "key=value"),
    ],
)
def test_bad_spark_remote_points_at_its_line(tmp_path: Path, url: str, words: str) -> None:
    error = load_error(tmp_path, f"database: shop\nspark:\n  remote: '{url}'\n")
    assert error.location is not None and error.location.line == 3
    assert "not a Spark Connect URL" in error.message and words in error.message
    assert error.hint is not None and "sc://HOST:PORT" in error.hint


def test_spark_remote_and_master_together_are_refused(tmp_path: Path) -> None:
    error = load_error(tmp_path, "spark:\n  master: local[2]\n  remote: sc://localhost\n")
    assert error.location is not None and error.location.line == 3
    assert "both set" in error.message


def test_spark_token_env_names_the_remotes_token(tmp_path: Path) -> None:
    config = load_config(
        write(
            tmp_path,
            "spark:\n  token_env: SHOP_TOKEN\n  remote: sc://cluster.example:15002/;use_ssl=true\n",
        )
    )
    assert config.spark.token_env == "SHOP_TOKEN"
    assert (
        load_config(write(tmp_path, "spark:\n  remote: sc://localhost\n")).spark.token_env is None
    )
    # a loopback address with TLS: pyspark sends the token over it
    assert (
        load_config(
            write(tmp_path, "spark:\n  remote: sc://127.0.0.1/;use_ssl=true\n  token_env: T\n")
        ).spark.token_env
        == "T"
    )


@pytest.mark.parametrize(
    ("text", "line", "words", "hint"),
    [
        (
            "spark:\n  remote: sc://host:15002/;token=s3cret\n",
            2,
            "must not hold the server's token",
            "token_env",
        ),
        (
            "spark:\n  remote: sc://host/;use_ssl=true;token=s3cret\n",
            2,
            "must not hold the server's token",
            "token_env",
        ),
        (
            "spark:\n  master: local[2]\n  token_env: SHOP_TOKEN\n",
            3,
            "spark.token_env is set without spark.remote",
            ".ivm/server.json",
        ),
        (
            "spark:\n  remote: sc://host\n  token_env: abc-123-s3cret\n",
            3,
            "is not the name of an environment variable",
            "not the token itself",
        ),
        (
            "spark:\n  remote: sc://host\n  token_env: 7\n",
            3,
            "spark.token_env must be a string",
            None,
        ),
        (
            "spark:\n  remote: sc://127.0.0.1:15002\n  token_env: T\n",
            3,
            "pyspark sends a token to it only over TLS",
            "localhost",
        ),
        (
            "spark:\n  conf:\n    spark.connect.authenticate.token: s3cret\n",
            3,
            "must not set spark.connect.authenticate.token",
            "token_env",
        ),
    ],
    ids=[
        "token-in-url",
        "token-after-use-ssl",
        "token-env-without-remote",
        "token-env-is-a-token",
        "token-env-a-number",
        "token-to-a-loopback-address",
        "token-in-spark-conf",
    ],
)
def test_a_token_is_never_read_from_ivm_yaml(
    tmp_path: Path, text: str, line: int, words: str, hint: str | None
) -> None:
    error = load_error(tmp_path, text)
    assert error.location is not None and error.location.line == line
    assert words in error.message and "s3cret" not in error.message
    if hint is not None:
        assert error.hint is not None and hint in error.hint


def test_history_settings(tmp_path: Path) -> None:
    config = load_config(
        write(tmp_path, "history:\n  log: false\n  keep_days: never\n  learn: false\n")
    )
    assert config.history == HistorySettings(log=False, keep_days=None, learn=False)
    assert load_config(write(tmp_path, "history: {keep_days: 7}\n")).history == HistorySettings(
        keep_days=7
    )
    assert load_config(write(tmp_path, "")).history == HistorySettings(True, 30, True)


def test_the_catalog_is_hives_unless_spark_conf_names_another(tmp_path: Path) -> None:
    key = "spark.sql.catalogImplementation"
    assert start_settings(Config(), tmp_path)[key] == "hive"
    in_memory = Config(spark=SparkSettings(conf={key: "in-memory"}))
    assert start_settings(in_memory, tmp_path)[key] == "in-memory"


@pytest.mark.parametrize(
    "own, collector",
    [
        ("", "UseParallelGC"),
        ("-XX:+UseG1GC", "UseG1GC"),  # Java refuses to start with two collectors
        ("-Xss4m -XX:+UseSerialGC", "UseSerialGC"),
    ],
)
def test_an_embedded_jvm_runs_the_parallel_collector_unless_ivm_yaml_names_one(
    tmp_path: Path, own: str, collector: str
) -> None:
    """The options an embedded JVM starts with choose one collector, and Java starts with
    them and runs it."""
    conf = {DRIVER_OPTIONS: own} if own else {}
    options = start_settings(Config(spark=SparkSettings(conf=conf)), tmp_path)[DRIVER_OPTIONS]
    assert sum("GC" in option for option in options.split()) == 1, options
    java = subprocess.run(
        [find_java(), *options.split(), "-XX:+PrintFlagsFinal", "-version"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert java.returncode == 0, java.stderr
    assert re.search(rf"\b{collector}\s+= true", java.stdout), collector


def test_a_clusters_driver_keeps_javas_own_collector(tmp_path: Path) -> None:
    cluster = Config(spark=SparkSettings(master="spark://127.0.0.1:7077"))
    assert "GC" not in start_settings(cluster, tmp_path).get(DRIVER_OPTIONS, "")


def test_local_files_are_written_without_hadoops_checksum_files(spark, tmp_path: Path) -> None:
    """ivm's sessions write local files through Hadoop's raw file system
    (``session.BASE_SETTINGS``): no hidden ``.<name>.crc`` beside each data file and commit,
    each one more file to write and rename, and more processes to start (chmod, readlink).
    Delta's own checksum of each commit stays."""
    location = tmp_path / "t"
    spark.sql(f"CREATE TABLE delta.`{location}` (k INT) USING DELTA")
    spark.sql(f"INSERT INTO delta.`{location}` VALUES (1)")
    written = {path.name for path in location.rglob("*")}
    assert f"{1:020d}.json" in written and f"{1:020d}.crc" in written
    assert not [name for name in written if name.startswith(".") and name.endswith(".crc")], written
