"""Wall time of embedded `ivm` commands with and without Java's class archive, in one run.

Each command is a process of its own (its own JVM), timed from start to exit, as a user runs
it. The demo project is copied to a temporary folder, migrated and refreshed once (which
writes the archive, if this machine has none for its Java and jars). Then ``--runs`` rounds,
each running ``ivm status`` and a refresh with nothing to do twice: once as ivm runs them
(the JVM maps the archive) and once with ``-Xshare:auto`` named in ivm.yaml, which leaves
class sharing to Java's defaults, as before the archive (``ivm_sql.class_archive``). The
order of the two alternates from round to round.

    .venv/bin/python bench/start.py --runs 5
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

REPO = Path(__file__).resolve().parent.parent
COMMANDS = (("status",), ("refresh",))  # the refresh finds nothing to do
WITHOUT = "    spark.driver.extraJavaOptions: -Xshare:auto\n"  # under spark.conf


def ivm(root: Path, *args: str) -> float:
    """Seconds ``ivm ARGS`` took, start to exit, as its own process; it must succeed."""
    return server.ivm_output("ivm_sql.cli", root, *args)[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="rounds of each way")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="ivm-start-") as folder:
        root = Path(folder) / "demo"
        root.mkdir()
        for name in ("views", "migrations"):
            shutil.copytree(REPO / name, root / name)
        config = (REPO / "ivm.yaml").read_text()
        assert "  conf:\n" in config, "the demo's ivm.yaml has a spark.conf section"
        without = config.replace("  conf:\n", "  conf:\n" + WITHOUT)
        (root / "ivm.yaml").write_text(config)
        ivm(root, "migrate")
        ivm(root, "refresh")

        times: dict[tuple[str, str], list[float]] = {}
        for run in range(args.runs):
            ways = [("with the archive", config), ("without", without)]
            for way, text in ways if run % 2 == 0 else reversed(ways):
                (root / "ivm.yaml").write_text(text)
                for command in COMMANDS:
                    seconds = ivm(root, *command)
                    times.setdefault((way, command[0]), []).append(seconds)
                    print(f"round {run + 1}, {way}: ivm {command[0]} {seconds:.2f} s", flush=True)

    print()
    print("| command | with the archive | without | without / with |")
    print("|---|---|---|---|")
    for (command,) in COMMANDS:
        with_ = statistics.median(times[("with the archive", command)])
        without_ = statistics.median(times[("without", command)])
        print(f"| `ivm {command}` | {with_:.2f} s | {without_:.2f} s | {without_ / with_:.2f}x |")


if __name__ == "__main__":
    main()
