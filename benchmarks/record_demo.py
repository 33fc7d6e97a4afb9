"""Keep the `benchmark:` files of a `make demo` run's training jobs as measured data for the plan's whole-job check
(tests/core/test_plan_measured.py): copies results/benchmarks/train/*.tsv into benchmarks/results/demo-cpu/train/ and
writes benchmarks/results/demo-cpu/measured.json (what, where, when, the commit, whether the machine ran nothing else).

    make demo && python benchmarks/record_demo.py --idle --where "2 cores, nothing else running"

Without --idle the files are kept but the check refuses them: other jobs on the cores inflate both the wall time and
the CPU time of a job.
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import subprocess
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEST = REPO / "benchmarks" / "results" / "demo-cpu"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", default="results", help="the demo's results folder (default: results)")
    parser.add_argument("--idle", action="store_true", help="the machine ran nothing else during the demo")
    parser.add_argument("--where", default=f"{platform.node()}: {platform.processor() or platform.machine()}",
                        help="the machine, in words (cores, CPU)")
    args = parser.parse_args(argv)
    found = sorted((Path(args.results) / "benchmarks" / "train").glob("*.tsv"))
    if not found:
        parser.error(f"no training benchmark in {args.results}/benchmarks/train: run make demo first")
    (DEST / "train").mkdir(parents=True, exist_ok=True)
    jobs = []
    for tsv in found:
        shutil.copy(tsv, DEST / "train" / tsv.name)
        model, seed = tsv.stem.rsplit("_seed", 1)
        jobs.append({"file": f"train/{tsv.name}", "rule": "train", "wildcards": {"model": model, "seed": seed},
                     "threads": 2})  # make demo: --cores 2, the train rule's 2 threads
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True).stdout
    meta = {"what": "make demo's training jobs (profiles/local, --cores 2), their Snakemake benchmark: files",
            "where": args.where, "when": datetime.now(UTC).isoformat(timespec="minutes"), "commit": commit.strip(),
            "idle": args.idle, "jobs": jobs}  # fmt: skip
    (DEST / "measured.json").write_text(json.dumps(meta, indent=2) + "\n")
    print(f"kept {len(jobs)} benchmark files in {DEST}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
