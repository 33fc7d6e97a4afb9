"""Rehearse paper configs for real on the CPU (``make rehearse``, ``make rehearse-<paper>``).

For each paper: ``configs/paper-<paper>.yaml`` merged with ``configs/rehearse/paper-<paper>.yaml`` (sizes only) runs
its complete job graph with Snakemake in ``results/rehearse/<paper>/``, offline, every checkpoint and hub dataset
replaced by the hub-layout fixtures of ``hub_fixtures.py`` (through ``HF_HOME``; no data mirror, so every dataset
goes through the hub loaders as on a cluster).

The papers run side by side, one Snakemake process each on the same cores: their job graphs are independent, and one
paper's serial stretches (a chain of training jobs) leave no core idle while another paper has work. Every job runs on
one thread (``--set-threads``; the heuristics keep the thread count their config sets): on the tiny stand-ins most of
a job is Python start-up and imports, which one thread does, so two one-thread jobs use two cores where one two-thread
job leaves one idle. Each paper's Snakemake output goes to ``results/rehearse/<paper>/snakemake.log``; a line a minute
shows each paper's progress.

Before any job runs, it checks that the rehearsal plans every rule that the paper config alone plans (the overlay drops
none) and, for each such rule, every model and method the paper config gives it (the ``model``, ``method`` and
``sb_method`` wildcards, and the model of a ``run``). After the runs, for each paper:

* every output of the paper's report rules (its final tables and figures), as the paper config alone names them,
  exists and is not empty;
* nothing is left to do (a dry run of the same configs plans no job);
* every model a job loaded (the ``model load:`` lines of the job logs) is a fetched local folder at a recorded
  revision: the snapshot of the commit its fetch record names (the one the hub cache resolved when the local rule
  fetch_model ran), loaded with the hub offline (``HF_HUB_OFFLINE``, ``HF_DATASETS_OFFLINE`` and
  ``TRANSFORMERS_OFFLINE`` = 1; the rehearsal leaves the last unset, the workflow sets it for every job), or a model
  trained in the run; every job that takes a model's
  fetch record loads that model through it; every hub dataset split records the commit it was loaded at.

The files a paper config fetches from a URL (``fetch.url``: HANS, the GLUE diagnostics) are fetched by the rule
fetch_file from the fixtures' copies (``file://``), checked against the fixtures' sha256 and size: a generated config
overlay, ``results/rehearse/<paper>/fixture-files.yaml``, replaces only each file's ``fetch`` entry.
* nothing is left to do: a dry run of the same config, merged and written differently (every mapping in reverse key
  order, strings quoted, floats in exponent notation: ``reordered.py``), plans no job.

It writes ``results/rehearse/<paper>/rehearsal.json`` (elapsed time, jobs per rule) and exits non-zero naming every
failure.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))

import hub_fixtures  # noqa: E402
import reordered as reordered_config  # noqa: E402
import yaml  # noqa: E402

PAPERS = ("squad", "aflite", "spurious", "lexical")
SNAKEMAKE = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile")]
# Snakemake's scheduler, in each paper's main process. The greedy job selector: the default ILP selector solves an
# integer program with an external solver at every selection, and the rehearsal has no use for its optimum. A 10 s
# window for the job-rate limiter instead of the default 1 s (100 jobs per window either way is far more than two cores
# start): while jobs wait for a free core, every scheduling round arms a re-evaluation one window later, and every
# finished job starts another such chain, so with many waiting jobs (squad's 329 bias searches) the rounds per second
# grow with the jobs finished, each re-evaluating every waiting job's params and input sizes. The longer window makes
# those rounds ten times rarer; at exit Snakemake waits at most one window for its last timer.
SCHEDULER = ["--scheduler", "greedy", "--max-jobs-per-timespan", "1000/10s"]
# rules whose thread count is a config key the overlay sets: they keep it
CONFIG_THREADS = {"heuristics"}
# the rules whose outputs are a paper's final tables and figures
REPORT_RULE = re.compile(r"report")
# wildcards naming what a rule runs on (a model, a method), which an overlay must not drop; a run is model/.../seedN
KIND_WILDCARDS = ("model", "method", "sb_method")
PROGRESS = re.compile(r"(\d+) of (\d+) steps \(")
HEARTBEAT_S = 60


@dataclass
class Job:
    outputs: list[str] = field(default_factory=list)
    wildcards: dict[str, str] = field(default_factory=dict)
    inputs: list[str] = field(default_factory=list)
    log: list[str] = field(default_factory=list)


Plan = dict[str, list[Job]]  # rule -> its planned jobs


def rehearsal_env(fixtures: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("SPURIOUS_DATA_MIRROR", None)  # every dataset through the hub loaders, as on a cluster
    shared_nltk = Path(os.environ.get("SPURIOUS_SHARED", REPO.parent / "shared")) / "nltk_data"
    if "NLTK_DATA" not in env and shared_nltk.is_dir():  # as the Makefile does
        env["NLTK_DATA"] = str(shared_nltk)
    # the hub and datasets switches as a login node without network has them (the local rules that fetch read them);
    # TRANSFORMERS_OFFLINE is left unset, so that the jobs' "1" (load_problems) is the one the workflow gives them
    env.pop("TRANSFORMERS_OFFLINE", None)
    env.update(
        HF_HOME=str(fixtures / "hf"),
        HF_HUB_CACHE=str(fixtures / "hf" / "hub"),
        HF_DATASETS_CACHE=str(fixtures / "hf" / "datasets"),
        HF_HUB_OFFLINE="1",
        HF_DATASETS_OFFLINE="1",
        TOKENIZERS_PARALLELISM="false",
        SPURIOUS_CHECK_FIGURES="1",  # every figure at the paper's layout (all heuristics, features, methods) checked
    )
    return env


def configs_of(paper: str) -> list[str]:
    return [str(REPO / "configs" / f"paper-{paper}.yaml"), str(REPO / "configs" / "rehearse" / f"paper-{paper}.yaml")]


def parse_dry_run(stdout: str) -> Plan:
    """rule -> its jobs (outputs, wildcards), from the job blocks that ``snakemake -n`` prints."""
    plan: Plan = {}
    job = None
    for line in stdout.splitlines():
        m = re.match(r"^(?:local)?rule (\S+):$", line)
        if m:
            job = Job()
            plan.setdefault(m.group(1), []).append(job)
            continue
        m = re.match(r"^\s+(input|output|log|wildcards): (.*)$", line)
        if m and job is not None:
            items = [p.strip() for p in m.group(2).split(", ")]
            if m.group(1) == "output":
                job.outputs += items
            elif m.group(1) == "input":
                job.inputs += items
            elif m.group(1) == "log":
                job.log += items
            else:
                job.wildcards.update(item.split("=", 1) for item in items if "=" in item)
    return plan


def planned_jobs(workdir: Path, configs: list[str], env: dict[str, str], *, everything: bool = True) -> Plan:
    """rule -> its planned jobs, from a dry run: of the whole job graph (``everything``), or of the jobs still to
    run."""
    proc = subprocess.run(
        [*SNAKEMAKE, "--directory", str(workdir), "-n", *(["--forceall"] if everything else []),
         "--configfile", *configs],
        capture_output=True, text=True, env=env, cwd=REPO,
    )
    if proc.returncode != 0:
        raise SystemExit(f"dry run of {configs} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return parse_dry_run(proc.stdout)


def kinds(plan: Plan) -> set[tuple[str, str, str]]:
    """(rule, wildcard, value) of every model and method a rule's jobs run (a run's model counts as ``model``)."""
    found = set()
    for rule, jobs in plan.items():
        for job in jobs:
            for name in KIND_WILDCARDS:
                if name in job.wildcards:
                    found.add((rule, name, job.wildcards[name]))
            if "run" in job.wildcards:
                found.add((rule, "model", job.wildcards["run"].split("/")[0]))
    return found


def plan_problems(paper_plan: Plan, rehearsal_plan: Plan) -> list[str]:
    """What the rehearsal drops of the paper config's plan: rules, and models or methods of a rule."""
    problems = []
    dropped = sorted(set(paper_plan) - set(rehearsal_plan) - {"all"})
    if dropped:
        problems.append(f"the rehearsal overlay drops rules the paper config runs: {dropped}")
    lost = sorted(kinds(paper_plan) - kinds(rehearsal_plan))
    lost = [(rule, name, value) for rule, name, value in lost if rule not in dropped]
    if lost:
        problems.append(
            "the rehearsal overlay drops models/methods the paper config runs: "
            + ", ".join(f"{rule} {name}={value}" for rule, name, value in lost)
        )
    return problems


def final_outputs(paper_plan: Plan) -> list[str]:
    return sorted({p for rule, jobs in paper_plan.items() if REPORT_RULE.search(rule)
                   for job in jobs for p in job.outputs})


def missing_outputs(workdir: Path, paths: list[str]) -> list[str]:
    return [p for p in paths if not (workdir / p).is_file() or (workdir / p).stat().st_size == 0]


def pending_jobs(plan: Plan) -> dict[str, int]:
    return {rule: len(jobs) for rule, jobs in plan.items() if rule != "all" and jobs}


def last_progress(log: Path) -> str:
    """"done/total" from the last progress line of a Snakemake log, or "starting"."""
    if not log.exists():
        return "starting"
    with log.open("rb") as f:
        f.seek(max(0, log.stat().st_size - 65536))
        found = PROGRESS.findall(f.read().decode(errors="replace"))
    return f"{found[-1][0]}/{found[-1][1]}" if found else "starting"


def minutes(seconds: float) -> str:
    return f"{int(seconds) // 60}:{int(seconds) % 60:02d}"


@dataclass
class Rehearsal:
    paper: str
    workdir: Path
    configs: list[str]
    paper_plan: Plan = field(default_factory=dict)
    plan: Plan = field(default_factory=dict)
    proc: subprocess.Popen | None = None
    started: float = 0.0
    elapsed: float | None = None
    problems: list[str] = field(default_factory=list)

    @property
    def log(self) -> Path:
        return self.workdir / "snakemake.log"


def fixture_files_overlay(paper_config: Path, fixtures: Path) -> dict:
    """A config overlay giving each file the paper config fetches from a URL its fixture's copy instead (a
    ``file://`` URL, the fixture's sha256 and size); the rest of the config is the paper's."""
    datasets: dict = {}
    for name, ds in (yaml.safe_load(paper_config.read_text()).get("datasets") or {}).items():
        for split, source in (ds.get("splits") or {}).items():
            fetch = source.get("fetch") or {}
            if fetch.get("url"):
                copy = fixtures / "files" / source["path"]
                fetch = {"url": copy.as_uri(), "sha256": hashlib.sha256(copy.read_bytes()).hexdigest(),
                         "size": copy.stat().st_size}
                datasets.setdefault(name, {"splits": {}})["splits"][split] = {**source, "fetch": fetch}
    return {"datasets": datasets} if datasets else {}


def prepare(paper: str, fixtures: Path, root: Path, *, fresh: bool) -> Rehearsal:
    workdir = root / paper
    # outputs made with other stand-ins (the fixtures were rebuilt) are not outputs of these: start afresh
    digest = (fixtures / "fixtures.sha1").read_text()
    made_with = workdir / "fixtures.sha1"
    if workdir.exists() and (fresh or not made_with.exists() or made_with.read_text() != digest):
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    made_with.write_text(digest)
    configs = configs_of(paper)
    overlay = fixture_files_overlay(Path(configs[0]), fixtures)
    if overlay:  # the files a config fetches from a URL: from the fixtures' copies, checked against their sha256
        path = workdir / "fixture-files.yaml"
        path.write_text(yaml.safe_dump(overlay, sort_keys=False))
        configs.append(str(path))
    return Rehearsal(paper, workdir, configs)


def run_command(r: Rehearsal, cores: int) -> list[str]:
    one_thread = [f"{rule}=1" for rule in sorted(r.plan) if rule != "all" and rule not in CONFIG_THREADS]
    return [
        *SNAKEMAKE, "--directory", str(r.workdir), "--workflow-profile", str(REPO / "profiles" / "local"),
        "--cores", str(cores), *SCHEDULER, *(["--set-threads", *one_thread] if one_thread else []),
        "--configfile", *r.configs,
    ]  # fmt: skip


def run_all(rehearsals: list[Rehearsal], env: dict[str, str], cores: int) -> None:
    """Start every paper's Snakemake at once, report progress each minute, wait for all."""
    start = time.monotonic()
    beat = start + HEARTBEAT_S
    try:
        for r in rehearsals:
            print(f"== rehearsal of configs/paper-{r.paper}.yaml in {r.workdir} (log: {r.log})", flush=True)
            with r.log.open("w") as log:
                r.proc = subprocess.Popen(run_command(r, cores), env=env, cwd=REPO, stdout=log,
                                          stderr=subprocess.STDOUT)
            r.started = time.monotonic()
        while any(r.elapsed is None for r in rehearsals):
            time.sleep(1)
            for r in rehearsals:
                if r.elapsed is None and r.proc.poll() is not None:
                    r.elapsed = time.monotonic() - r.started
                    status = "done" if r.proc.returncode == 0 else f"FAILED (exit {r.proc.returncode})"
                    print(f"== {r.paper}: Snakemake {status} after {minutes(r.elapsed)}", flush=True)
            if time.monotonic() >= beat:
                beat += HEARTBEAT_S
                print(
                    f"   {minutes(time.monotonic() - start)} "
                    + ", ".join(f"{r.paper} {last_progress(r.log) if r.elapsed is None else 'done'}"
                                for r in rehearsals),
                    flush=True,
                )
    finally:  # interrupted: stop the Snakemake runs (each stops its jobs)
        for r in rehearsals:
            if r.proc is not None and r.proc.poll() is None:
                r.proc.terminate()
        for r in rehearsals:
            if r.proc is not None:
                r.proc.wait()


def check_after(r: Rehearsal, env: dict[str, str]) -> None:
    if r.proc.returncode != 0:
        tail = r.log.read_text(errors="replace").splitlines()[-60:]
        r.problems.append(
            f"Snakemake failed after {minutes(r.elapsed)} (logs under {r.workdir}/results/logs; its output {r.log}, "
            "which ends:\n    " + "\n    ".join(tail) + "\n)"
        )
        return
    missing = missing_outputs(r.workdir, final_outputs(r.paper_plan))
    if missing:
        r.problems.append(f"final tables/figures missing or empty: {missing}")
    # the same config written differently (every mapping reversed, strings quoted, floats in exponent notation): the
    # params compare by content, so nothing is left to run (tests/core/test_rerun.py)
    reordered = reordered_config.write_reordered(r.configs, r.workdir / "reordered.yaml")
    left = pending_jobs(planned_jobs(r.workdir, [str(reordered)], env, everything=False))
    if left:
        r.problems.append(f"jobs still pending after the rehearsal (dry run of the reordered config {reordered}): "
                          f"{left}")
    r.problems += load_problems(r.workdir, r.plan, Path(env["HF_HUB_CACHE"]))


LOAD = re.compile(r"model load: (\{.*\})\s*$")


def model_loads(log: Path) -> list[dict]:
    """The ``model load:`` entries a job logged (spurious.core.models): one per model it loaded."""
    if not log.is_file():
        return []
    return [json.loads(m.group(1)) for line in log.read_text(errors="replace").splitlines() if (m := LOAD.search(line))]


def load_problems(workdir: Path, plan: Plan, hub_cache: Path) -> list[str]:
    """Every model a job loaded is a fetched local folder at a recorded revision (or a model trained in the run),
    loaded with the hub offline; every job that takes a model's fetch record loaded that model through it; every
    hub dataset split records the commit it was loaded at (see the module's docstring)."""
    from spurious.core.data import hub

    problems = []
    records = {str(Path(r.path).relative_to(workdir)): r for r in hub.read_records(workdir / "results")}
    loads = 0
    for rule, jobs in plan.items():
        for job in jobs:
            taken = [p for p in job.inputs if p.startswith(f"{hub.RECORDS_DIR}/models/")]
            entries = [e for log in job.log for e in model_loads(workdir / log)]
            loads += len(entries)
            where = f"{rule} ({', '.join(job.log) or 'no log'})"
            for path in taken:
                record = records.get(path)
                if record is None:
                    problems.append(f"{where}: its fetch record {path} is missing")
                elif not any(e["source"] == "fetched" and e["record"] == path for e in entries):
                    problems.append(f"{where}: takes {path} but logged no load of {record.name} through it")
            for e in entries:
                problems += [f"{where}: {p}" for p in load_entry_problems(e, records, workdir, hub_cache)]
    if not loads:
        problems.append("no job logged a model load (the `model load:` lines of spurious.core.models)")
    for record in records.values():
        if record.kind == "dataset" and record.source == "hub" and not hub.COMMIT.fullmatch(record.revision or ""):
            problems.append(f"{record.path}: hub dataset {record.repo_id} without a commit ({record.revision!r})")
    return problems


def load_entry_problems(entry: dict, records: dict, workdir: Path, hub_cache: Path) -> list[str]:
    """What is wrong with one model load: not offline, not through a record that matches the folder, or a local
    folder that is not a model trained in this run."""
    name, path = entry["name"], Path(entry["path"])
    online = {k: v for k, v in entry["offline"].items() if v != "1"}
    problems = [f"{name} loaded with the hub not offline: {online}"] if online else []
    if entry["source"] == "local":
        if not path.is_relative_to(workdir.resolve()):
            problems.append(f"{name} loaded from {path}, neither fetched nor trained in this run")
        return problems
    record = records.get(entry["record"] or "")
    if record is None:
        return [*problems, f"{name} loaded through {entry['record']}, which is not a fetch record of this run"]
    if (record.name, record.local_path, record.revision) != (name, str(path), entry["revision"]):
        problems.append(f"{name} loaded from {path} at {entry['revision']}, its record {entry['record']} says "
                        f"{record.local_path} at {record.revision}")
    if record.source == "hub":
        refs = hub_cache / ("models--" + record.repo_id.replace("/", "--")) / "refs" / "main"
        resolved = refs.read_text().strip() if refs.is_file() else None
        if not (path.is_dir() and path.name == record.revision == resolved and path.is_relative_to(hub_cache)):
            problems.append(f"{name}: loaded {path}, record revision {record.revision}, the hub cache's main is "
                            f"{resolved}: not the snapshot fetched at the recorded revision")
    return problems


def summary_of(r: Rehearsal, cores: int, beside: list[str]) -> dict:
    return {
        "paper": r.paper,
        "configs": [os.path.relpath(c, REPO) for c in r.configs],
        "elapsed_s": round(r.elapsed, 1),
        "cores": cores,
        "side_by_side_with": beside,
        "jobs": {rule: len(jobs) for rule, jobs in r.plan.items()},
        "rules_of_paper_config": sorted(r.paper_plan),
        "final_outputs": final_outputs(r.paper_plan),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("papers", nargs="*", help=f"any of {', '.join(PAPERS)} (default: all)")
    parser.add_argument("--cores", type=int, default=2, help="the machine's cores, which the papers' runs share")
    parser.add_argument("--root", type=Path, default=REPO / "results" / "rehearse")
    parser.add_argument("--fresh", action="store_true", help="delete the papers' earlier rehearsal outputs first")
    args = parser.parse_args(argv)
    unknown = [p for p in args.papers if p not in PAPERS]
    if unknown:
        parser.error(f"unknown paper(s) {unknown}; choose from {', '.join(PAPERS)}")
    papers = list(dict.fromkeys(args.papers)) or list(PAPERS)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so that run_all stops the runs it started
    root = args.root.resolve()
    start = time.monotonic()
    fixtures = hub_fixtures.build(root / "fixtures")
    env = rehearsal_env(fixtures)
    rehearsals = [prepare(p, fixtures, root, fresh=args.fresh) for p in papers]

    with ThreadPoolExecutor(max_workers=max(1, args.cores)) as pool:  # dry runs: a few seconds of CPU each
        paper_plans = pool.map(lambda r: planned_jobs(root / f".plan-{r.paper}", r.configs[:1], env), rehearsals)
        plans = pool.map(lambda r: planned_jobs(r.workdir, r.configs, env), rehearsals)
        for r, paper_plan, plan in zip(rehearsals, paper_plans, plans, strict=True):
            r.paper_plan, r.plan = paper_plan, plan
    problems = [f"{r.paper}: {p}" for r in rehearsals for p in plan_problems(r.paper_plan, r.plan)]
    if problems:
        raise SystemExit("\n".join(problems))
    print(f"== planned in {minutes(time.monotonic() - start)}: "
          + ", ".join(f"{r.paper} {sum(len(j) for j in r.plan.values())} jobs" for r in rehearsals), flush=True)

    run_all(rehearsals, env, args.cores)
    with ThreadPoolExecutor(max_workers=max(1, args.cores)) as pool:
        list(pool.map(lambda r: check_after(r, env), rehearsals))
    for r in rehearsals:
        if not r.problems:
            summary = summary_of(r, args.cores, [o.paper for o in rehearsals if o is not r])
            (r.workdir / "rehearsal.json").write_text(json.dumps(summary, indent=1) + "\n")
        jobs = sum(len(j) for j in r.plan.values())
        verdict = "ok" if not r.problems else "FAILED"
        print(f"== {r.paper}: {verdict}, {jobs} jobs, {len(final_outputs(r.paper_plan))} final tables/figures, "
              f"Snakemake {minutes(r.elapsed)}")
    print(f"== rehearsals: {minutes(time.monotonic() - start)} in all")
    failures = [f"{r.paper}: {p}" for r in rehearsals for p in r.problems]
    if failures:
        raise SystemExit("\n".join(failures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
