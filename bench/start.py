"""Wall time of cold embedded `ivm` commands with and without one of their start's savings,
in one run.

Each command is a process of its own (its own JVM), timed from start to exit, as a user runs
it. The demo project is copied to a temporary folder, migrated and refreshed once (which
writes the class archive and the resolved packages' jars down, if this machine has neither
yet). Then ``--runs`` rounds, each running ``ivm status`` and a refresh with nothing to do
twice: once as ivm runs them, and once with the saving undone. The order of the two
alternates from round to round. ``--compare``:

- ``archive``: Java's class archive (``ivm_sql.class_archive``) undone by ``-Xshare:auto``
  in ivm.yaml, which leaves class sharing to Java's defaults, as before the archive;
- ``jars``: the packages' jars named (``ivm_sql.package_jars``) undone by removing their
  record before each command, so Spark resolves Delta's package through Ivy, as before.

    .venv/bin/python bench/start.py --compare jars --runs 5
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/: server.py
import server

from ivm_sql.package_jars import RESOLVED

REPO = Path(__file__).resolve().parent.parent
COMMANDS = (("status",), ("refresh",))  # the refresh finds nothing to do
WITHOUT = "    spark.driver.extraJavaOptions: -Xshare:auto\n"  # under spark.conf


def ivm(root: Path, *args: str) -> float:
    """Seconds ``ivm ARGS`` took, start to exit, as its own process; it must succeed."""
    return server.ivm_output("ivm_sql.cli", root, *args)[0]


def forget_resolved_jars() -> None:
    """Remove every record of resolved jars: the next start resolves through Ivy."""
    for record in RESOLVED.glob("*.txt"):
        record.unlink()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="rounds of each way")
    parser.add_argument(
        "--compare", choices=("archive", "jars"), default="archive", help="the saving undone"
    )
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="ivm-start-") as folder:
        root = Path(folder) / "demo"
        root.mkdir()
        for name in ("views", "migrations"):
            shutil.copytree(REPO / name, root / name)
        config = (REPO / "ivm.yaml").read_text()
        assert "  conf:\n" in config, "the demo's ivm.yaml has a spark.conf section"
        (root / "ivm.yaml").write_text(config)
        ivm(root, "migrate")
        ivm(root, "refresh")

        undone = {"archive": "without the archive", "jars": "Ivy resolving"}[args.compare]
        times: dict[tuple[str, str], list[float]] = {}
        for run in range(args.runs):
            ways = ["ivm's way", undone]
            for way in ways if run % 2 == 0 else reversed(ways):
                text = config
                if way == undone and args.compare == "archive":
                    text = config.replace("  conf:\n", "  conf:\n" + WITHOUT)
                (root / "ivm.yaml").write_text(text)
                for command in COMMANDS:
                    if way == undone and args.compare == "jars":
                        forget_resolved_jars()
                    seconds = ivm(root, *command)
                    times.setdefault((way, command[0]), []).append(seconds)
                    print(f"round {run + 1}, {way}: ivm {command[0]} {seconds:.2f} s", flush=True)

    print()
    print(f"| command | ivm's way | {undone} | {undone} / ivm's way |")
    print("|---|---|---|---|")
    for (command,) in COMMANDS:
        ours = statistics.median(times[("ivm's way", command)])
        other = statistics.median(times[(undone, command)])
        print(f"| `ivm {command}` | {ours:.2f} s | {other:.2f} s | {other / ours:.2f}x |")


if __name__ == "__main__":
    main()
