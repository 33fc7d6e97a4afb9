"""Rehearse paper configs for real on the CPU (``make rehearse``, ``make rehearse-<paper>``).

For each paper: ``configs/paper-<paper>.yaml`` merged with ``configs/rehearse/paper-<paper>.yaml`` (sizes only) runs
its complete job graph with Snakemake in ``results/rehearse/<paper>/``, offline, every checkpoint and hub dataset
replaced by the hub-layout fixtures of ``hub_fixtures.py`` (through ``HF_HOME``; no data mirror, so every dataset
goes through the hub loaders as on a cluster). Then it checks:

* the run planned every rule that the paper config alone plans (the overlay drops none);
* every output of the paper's report rules (its final tables and figures), as the paper config alone names them,
  exists and is not empty;
* nothing is left to do (a dry run of the same configs plans no job).

It writes ``results/rehearse/<paper>/rehearsal.json`` (elapsed time, jobs per rule) and exits non-zero on the first
failure, naming it.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))

import hub_fixtures  # noqa: E402

PAPERS = ("squad", "aflite", "spurious", "lexical")
SNAKEMAKE = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile")]
# the rules whose outputs are a paper's final tables and figures
REPORT_RULE = re.compile(r"report")


def rehearsal_env(fixtures: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("SPURIOUS_DATA_MIRROR", None)  # every dataset through the hub loaders, as on a cluster
    shared_nltk = REPO.parent / "shared" / "nltk_data"
    if "NLTK_DATA" not in env and shared_nltk.is_dir():  # as the Makefile does
        env["NLTK_DATA"] = str(shared_nltk)
    env.update(
        HF_HOME=str(fixtures / "hf"),
        HF_HUB_CACHE=str(fixtures / "hf" / "hub"),
        HF_DATASETS_CACHE=str(fixtures / "hf" / "datasets"),
        HF_HUB_OFFLINE="1",
        HF_DATASETS_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        TOKENIZERS_PARALLELISM="false",
    )
    return env


def configs_of(paper: str) -> list[str]:
    return [str(REPO / "configs" / f"paper-{paper}.yaml"), str(REPO / "configs" / "rehearse" / f"paper-{paper}.yaml")]


def planned(workdir: Path, configs: list[str], env: dict[str, str], *, everything: bool = True) -> dict[str, list[str]]:
    """rule -> the outputs of its planned jobs, from a dry run: of the whole job graph (``everything``), or of the
    jobs still to run. One list of outputs per job: :func:`planned_jobs`."""
    return {rule: [p for job in jobs for p in job] for rule, jobs in planned_jobs(workdir, configs, env, everything=everything).items()}


def planned_jobs(
    workdir: Path, configs: list[str], env: dict[str, str], *, everything: bool = True
) -> dict[str, list[list[str]]]:
    """rule -> one list of outputs per planned job."""
    proc = subprocess.run(
        [*SNAKEMAKE, "--directory", str(workdir), "-n", *(["--forceall"] if everything else []), "--configfile", *configs],
        capture_output=True, text=True, env=env, cwd=REPO,
    )
    if proc.returncode != 0:
        raise SystemExit(f"dry run of {configs} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    jobs: dict[str, list[list[str]]] = {}
    rule = None
    for line in proc.stdout.splitlines():
        m = re.match(r"^(?:local)?rule (\S+):$", line)
        if m:
            rule = m.group(1)
            jobs.setdefault(rule, []).append([])
        m = re.match(r"^\s+output: (.*)$", line)
        if m and rule:
            jobs[rule][-1] += [p.strip() for p in m.group(1).split(",")]
    return jobs


def rehearse(paper: str, *, cores: int, root: Path, fresh: bool) -> dict:
    fixtures = hub_fixtures.build(root / "fixtures")
    env = rehearsal_env(fixtures)
    workdir = root / paper
    # outputs made with other stand-ins (the fixtures were rebuilt) are not outputs of these: start afresh
    digest = (fixtures / "fixtures.sha1").read_text()
    made_with = workdir / "fixtures.sha1"
    if workdir.exists() and (fresh or not made_with.exists() or made_with.read_text() != digest):
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    made_with.write_text(digest)
    for rel in hub_fixtures.load_layouts().get("files", {}):  # files a config reads from a path
        target = workdir / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(fixtures / "files" / rel, target)

    paper_only = planned(root / f".plan-{paper}", configs_of(paper)[:1], env)
    overlay = configs_of(paper)
    rehearsal_plan = planned_jobs(workdir, overlay, env)
    dropped = sorted(set(paper_only) - set(rehearsal_plan) - {"all"})
    if dropped:
        raise SystemExit(f"{paper}: the rehearsal overlay drops rules the paper config runs: {dropped}")

    print(f"== rehearsal of configs/paper-{paper}.yaml in {workdir}", flush=True)
    start = time.monotonic()
    proc = subprocess.run(
        [*SNAKEMAKE, "--directory", str(workdir), "--workflow-profile", str(REPO / "profiles" / "local"), "--cores",
         str(cores), "--configfile", *overlay],
        env=env, cwd=REPO,
    )
    elapsed = time.monotonic() - start
    if proc.returncode != 0:
        raise SystemExit(f"{paper}: the rehearsal failed after {elapsed:.0f} s (logs under {workdir}/results/logs)")

    finals = sorted({p for rule, outs in paper_only.items() if REPORT_RULE.search(rule) for p in outs})
    missing = [p for p in finals if not (workdir / p).is_file() or (workdir / p).stat().st_size == 0]
    if missing:
        raise SystemExit(f"{paper}: final tables/figures missing or empty: {missing}")
    left = {r: len(o) for r, o in planned(workdir, overlay, env, everything=False).items() if r != "all" and o}
    if left:
        raise SystemExit(f"{paper}: jobs still pending after the rehearsal: {left}")
    summary = {
        "paper": paper,
        "configs": [str(Path(c).relative_to(REPO)) for c in overlay],
        "elapsed_s": round(elapsed, 1),
        "cores": cores,
        "jobs": {r: len(jobs) for r, jobs in rehearsal_plan.items()},
        "rules_of_paper_config": sorted(paper_only),
        "final_outputs": finals,
    }
    (workdir / "rehearsal.json").write_text(json.dumps(summary, indent=1) + "\n")
    print(f"== {paper}: {sum(summary['jobs'].values())} jobs, {len(finals)} final tables/figures, {elapsed:.0f} s")
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("papers", nargs="*", help=f"any of {', '.join(PAPERS)} (default: all)")
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--root", type=Path, default=REPO / "results" / "rehearse")
    parser.add_argument("--fresh", action="store_true", help="delete the paper's earlier rehearsal outputs first")
    args = parser.parse_args(argv)
    unknown = [p for p in args.papers if p not in PAPERS]
    if unknown:
        parser.error(f"unknown paper(s) {unknown}; choose from {', '.join(PAPERS)}")
    for paper in args.papers or PAPERS:
        rehearse(paper, cores=args.cores, root=args.root.resolve(), fresh=args.fresh)
    return 0


if __name__ == "__main__":
    sys.exit(main())
