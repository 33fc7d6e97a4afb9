"""Quality floors of a finished debiasing run (issue 12; `make demo-debias` runs it after the report).

Run: ``python benchmarks/check_debias_floors.py [--report results/report/debias] [--json PATH]``.

Reads the report's ``runs.csv`` and ``bias_models.csv`` and checks, per run, that every debiased model keeps at least
60 % of its matched plain control's in-distribution EM, that the LMix gate mean at the end of training lies in
[0.2, 2.5], and that every bias model is a shortcut model (F1 gap >= 10 points, F1 on the unbiased validation
segment < 20). Prints one line per check and exits non-zero if any fails. Not a timing: the demo's 60-minute budget
is measured from a clean clone (docs/measured-results.md). The synthetic-shortcut floor (LMix and CReg beat plain
training over 3 seeds) is a unit test: tests/thinktwice/test_debias.py.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pandas as pd

from spurious.thinktwice.debias_report import quality_floors


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--report", type=Path, default=Path("results/report/debias"), help="the debias report folder")
    parser.add_argument("--json", type=Path, default=None, help="also write the checks as JSON")
    args = parser.parse_args()
    paths = [args.report / "runs.csv", args.report / "bias_models.csv"]
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        print(f"check_debias_floors: {', '.join(missing)} missing; run `make demo-debias` first", file=sys.stderr)
        return 2
    checks = quality_floors(pd.read_csv(paths[0]), pd.read_csv(paths[1]))
    for c in checks.itertuples():
        print(f"{'PASS' if c.passed else 'FAIL'}  {c.check:<34} {c.run:<36} {c.value:>8.3f}  {c.floor}")
    failed = int((~checks["passed"]).sum())
    print(f"{len(checks) - failed} passed, {failed} failed")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(checks.to_dict("records"), indent=2) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
