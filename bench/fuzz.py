"""The view fuzzer (issue 21) as long as asked: random views, random data, the oracle.

Each batch of views runs on a throwaway project: random rows, a first refresh, then
--rounds rounds of random changes, each refreshed and compared with the views' SELECTs.
A failing batch is shrunk (hypothesis) and printed as a ready pytest test.

    SPARK_LOCAL_IP=127.0.0.1 .venv/bin/python bench/fuzz.py --views 50 --rounds 3 --seed 1

Exit code 1 when any view failed.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import uuid
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent / "tests"
sys.path.insert(0, str(TESTS))  # first: this file is fuzz.py too

from conftest import SESSION_SETTINGS, write_project  # noqa: E402
from fuzz import fuzz  # noqa: E402  (tests/fuzz.py)

from ivm_sql.config import Config, SparkSettings  # noqa: E402
from ivm_sql.session import build_session  # noqa: E402


def project_maker(folder: Path):
    """Like tests/conftest.py's tmp_project: a fresh folder per project, its own database."""

    def make_project(files: dict[str, str]) -> Path:
        return write_project(folder / f"project_{uuid.uuid4().hex[:8]}", files)

    return make_project


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--views", type=int, default=50, help="views to generate in all")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of random changes per batch")
    parser.add_argument("--seed", type=int, default=1, help="seeds the views and the data")
    parser.add_argument(
        "--batch", type=int, default=25, help="view slots per project (about 5 in 6 hold a view)"
    )
    parser.add_argument(
        "--shrink-seconds",
        type=float,
        default=300,
        help="time for new runs while shrinking a failure",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ivm_fuzz_") as folder:
        spark = build_session(
            Config(spark=SparkSettings(conf=SESSION_SETTINGS)), Path(folder) / "spark"
        )
        try:
            report = fuzz(
                spark,
                project_maker(Path(folder)),
                views=args.views,
                rounds=args.rounds,
                seed=args.seed,
                batch=args.batch,
                shrink_seconds=args.shrink_seconds,
                log=lambda line: print(line, flush=True),
            )
        finally:
            spark.stop()
    for finding, test in zip(report.findings, report.tests(args.seed)):
        print(f"\n# FAILURE (data seed {finding.data_seed}):")
        for message in finding.messages.values():
            print("#   " + message.replace("\n", "\n#   "))
        print(test)
    for where, reason in report.unrunnable.items():
        print(f"# not compared ({where}): {reason}")
    print(report.summary())
    return 1 if report.findings else 0


if __name__ == "__main__":
    sys.exit(main())
