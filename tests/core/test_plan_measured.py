"""`spurious plan` against whole jobs that were measured: the QA training of gpu_check on an H200
(../shared/gpu/h200-2026-11-26/gpu_check.json) and the training jobs of the CPU demo (`make demo`), whose
`benchmark:` files are kept under benchmarks/results/demo-cpu/ with where and when they were measured (measured.json,
written by benchmarks/record_demo.py). Each estimate must come within 25 % of the measurement."""

from __future__ import annotations

import csv
import json

import pytest

from spurious.core.costs import JobCost
from spurious.workflow import plan
from tests.conftest import REPO, SHARED

TOLERANCE = 0.25
GPU_CHECK = SHARED / "gpu" / "h200-2026-11-26" / "gpu_check.json"
DEMO = REPO / "benchmarks" / "results" / "demo-cpu"


def _cost(profile: str, tmp_path, rule: str, wildcards: dict[str, str], card: str = "h200") -> JobCost:
    config, jobs = plan.planned_jobs([REPO / "config.yaml"], REPO / "profiles" / profile, tmp_path / profile)
    job = next(j for j in jobs if j.rule == rule and all(j.wildcards.get(k) == v for k, v in wildcards.items()))
    return plan.Planner(config, card).job(job)


@pytest.mark.skipif(not GPU_CHECK.is_file(), reason="../shared/gpu is not here")
def test_gpu_checks_qa_training_on_the_h200(tmp_path):
    """gpu_check's `qa` check trains the demo's MiniLM (config.yaml: 300 steps of 16 windows of up to 256 tokens,
    length-grouped, evaluations every 150 steps on 500 questions, checkpoints every 50) on the H200; its training
    loop took `train_s` (the engine's train_wall_time_s: steps, evaluations, checkpoints, first-seen shapes)."""
    check = next(c for c in json.loads(GPU_CHECK.read_text())["checks"] if c["check"] == "qa")
    assert check["steps"] == 300
    cost = _cost("slurm", tmp_path, "train", {"model": "minilm"})
    assert cost.gpus == 1
    estimate = cost.loop_s()
    assert abs(estimate / check["train_s"] - 1) <= TOLERANCE, (estimate, check["train_s"], cost.parts)


def _measured_jobs():
    """The measured jobs of benchmarks/results/demo-cpu/measured.json (benchmarks/record_demo.py writes it)."""
    if not (DEMO / "measured.json").is_file():
        return []
    meta = json.loads((DEMO / "measured.json").read_text())
    return [pytest.param(meta, job, id=job["file"]) for job in meta["jobs"]]


@pytest.mark.parametrize(("meta", "job"), _measured_jobs())
def test_the_cpu_demos_training_jobs(meta, job, tmp_path):
    """A training job of `make demo` (profiles/local, CPU) against its benchmark file, measured on a machine that ran
    nothing else (other jobs on the cores inflate the wall time and, through shared caches and spinning threads, the
    CPU time too: about 2 x on the project's 2-core machine): the plan's wall time (CPU-seconds / threads) against the
    job's `s`, its CPU-seconds against `cpu_time`."""
    assert meta["idle"], f"{DEMO / 'measured.json'}: measured beside other jobs; measure on an idle machine"
    with open(DEMO / job["file"]) as fh:
        row = next(csv.DictReader(fh, delimiter="\t"))
    cost = _cost("local", tmp_path, job["rule"], job["wildcards"])
    assert cost.gpus == 0 and cost.threads == job["threads"]
    wall = cost.cpu_s / cost.threads
    assert abs(wall / float(row["s"]) - 1) <= TOLERANCE, (wall, row["s"], cost.parts)
    assert abs(cost.cpu_s / float(row["cpu_time"]) - 1) <= TOLERANCE, (cost.cpu_s, row["cpu_time"], cost.parts)
