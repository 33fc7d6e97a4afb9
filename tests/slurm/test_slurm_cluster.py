"""The shipped SLURM profile on a real one-node cluster (tests/slurm/cluster.sh, started by `make test-slurm`).

The tiny workflow of tests/core/test_workflow.py (three of its heuristics) runs through `--workflow-profile
profiles/slurm`; the only test-only flags are the status command and the status-check interval (TEST_ONLY_FLAGS: the
cluster has no accounting database, so `squeue` instead of `sacct`; a 2 s first check instead of 40 s; the plugin
then waits 10 s longer after each check that finds no job finished, so each job on the critical path costs 14, 36 or
68 s). While it runs, its training job is
sent SLURM's time-limit warning (SIGUSR1 to the job's steps, as the profile's `--signal=USR1@600` delivers it) once it
has saved a checkpoint, and its retry is cancelled with `scancel` once it has saved a later one: each failure must be
reported with SLURM's state, each retry (the profile's `retries: 2`) must resume from the step the attempt before
stopped at, and ask for more memory (`mem_mb: ... * attempt`; this cluster does not enforce memory, so the larger
requests are read from `scontrol`). Then: each group job's and the training job's request as SLURM recorded it (the
latter by its model's size class), a deliberately oversized request failing before any submission, the paper
config's planned group jobs, and paper-lexical's requests per model.

Skipped unless SPURIOUS_SLURM_CLUSTER names a running cluster's folder (tests/slurm/run.sh sets it).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO
from tests.core.test_workflow import _env, tiny_config

CLUSTER = os.environ.get("SPURIOUS_SLURM_CLUSTER")
pytestmark = pytest.mark.skipif(not CLUSTER, reason="no SLURM cluster: run `make test-slurm` (tests/slurm/run.sh)")

PROFILE = REPO / "profiles" / "slurm"
# The only flags this test adds to the profile: how job states are read on a cluster without slurmdbd.
TEST_ONLY_FLAGS = ("--slurm-status-command", "squeue", "--slurm-init-seconds-before-status-checks", "2",
                   "--seconds-between-status-checks", "3")
# the workflow run, the signal, the cancellation and the retries included (run.sh: 8 min in all; on a machine shared
# with other work, raise both: SLURM_TEST_LIMIT_S and SPURIOUS_SLURM_RUN_LIMIT_S)
RUN_LIMIT_S = int(os.environ.get("SPURIOUS_SLURM_RUN_LIMIT_S", "390"))
STEPS, EVERY = 24, 4  # the tiny training's steps and checkpoint interval: room for two interruptions
# Three heuristics that need no spaCy parse: the run's group jobs and its heuristics job stay light on a 2-core machine,
# where everything SLURM starts shares the cores with the training job under test.
HEURISTICS = ["word-dist", "sim-word", "ans-len"]
SEARCH_MEM_MB = int(re.search(r"^BIAS_SEARCH_MEM_MB = (\d+)$", (REPO / "rules/common.smk").read_text(), re.M).group(1))
PROFILE_CORES = yaml.safe_load((PROFILE / "config.yaml").read_text())["cores"]


def _snakemake_cmd(work: Path, *args: str, flags: tuple[str, ...] = TEST_ONLY_FLAGS) -> list[str]:
    return [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--directory", str(work),
            "--workflow-profile", str(PROFILE), *flags, *args]


def _run(cmd: list[str], timeout: int, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """A snakemake run in its own session, killed with all its children when it overruns."""
    proc = subprocess.Popen(cmd, env=env or _env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        raise AssertionError(f"{' '.join(cmd)} hung for {timeout} s:\n{out[-4000:]}") from None
    return subprocess.CompletedProcess(cmd, proc.returncode, out, "")


def _jobs() -> list[dict[str, str]]:
    """Every job slurmctld still holds (MinJobAge=300 s after it ended), from `scontrol show job -o`."""
    out = subprocess.run(["scontrol", "show", "job", "-o"], capture_output=True, text=True, timeout=30).stdout
    jobs = []
    for line in out.splitlines():
        if line.startswith("JobId="):
            jobs.append(dict(m.groups() for m in re.finditer(r"(\w[\w/:]*)=(\S*)", line)))
    return jobs


def _gpus(job: dict[str, str]) -> int:
    """The GPUs a job asked for: sbatch's `--gpus` shows as TresPerJob (`gres/gpu:N`, `gres:gpu:N` in older Slurm),
    `--gres` as TresPerNode; TRES lists them only where accounting tracks GPUs."""
    text = " ".join(job.get(key, "") for key in ("TresPerJob", "TresPerNode", "TRES"))
    match = re.search(r"gres[/:]gpu(?::[\w.-]+)?[:=](\d+)", text)
    return int(match.group(1)) if match else 0


@pytest.fixture(scope="module")
def cluster_run(tmp_path_factory):
    work = tmp_path_factory.mktemp("slurm_tiny")
    cfg = tiny_config(work, max_steps=STEPS, checkpoint_every=EVERY, eval_every=None)
    config = yaml.safe_load(cfg.read_text())
    config["segments"] = []  # the split step may fail by design on the tiny model (tests/core/test_workflow.py)
    config["heuristics"]["names"] = HEURISTICS
    cfg.write_text(yaml.safe_dump(config, sort_keys=False))
    jobs_before = {j["JobId"] for j in _jobs()}
    log_path = work / "snakemake.out"
    ckpt_root = work / "results" / "_checkpoints" / "minilm" / "seed0"
    started = time.time()
    with open(log_path, "w") as log:
        proc = subprocess.Popen(_snakemake_cmd(work, "--configfile", str(cfg)), env=_env(), stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
    warned = cancelled = stopped = None
    try:
        # Attempt 1: SLURM's warning before the time limit (SIGUSR1 to every process of the job's steps, not the
        # batch shell: what --signal=USR1@600 sends) once it has a checkpoint. Attempt 2: `scancel` (SIGTERM, as a
        # preemption) once it has saved a checkpoint after the step attempt 1 stopped at. Attempt 3 finishes.
        while cancelled is None and time.time() - started < RUN_LIMIT_S:
            assert proc.poll() is None, ("the run ended before its training was interrupted:\n"
                                         f"{log_path.read_text()[-4000:]}")
            running = [j for j in _jobs() if j["JobState"] == "RUNNING"
                       and j.get("Comment", "").startswith("rule_train_") and j["JobId"] != warned]  # fmt: skip
            saved = _checkpoint_steps(ckpt_root)
            if running and warned is None and saved:
                warned = running[0]["JobId"]
                subprocess.run(["scancel", "--signal=USR1", warned], check=True, timeout=30)
            if warned is not None and stopped is None and not any(j["JobId"] == warned and j["JobState"] in
                                                                  ("RUNNING", "COMPLETING") for j in _jobs()):
                stopped = max(_checkpoint_steps(ckpt_root))  # attempt 1 is over: its last checkpoint, the warning's
            if running and stopped is not None and saved and max(saved) > stopped:  # attempt 2 saved a later one
                cancelled = running[0]["JobId"]
                subprocess.run(["scancel", cancelled], check=True, timeout=30)
            time.sleep(0.25)
        assert cancelled is not None, f"no second checkpoint to interrupt (warned: {warned})"
        proc.wait(timeout=max(1, RUN_LIMIT_S - (time.time() - started)))
    except subprocess.TimeoutExpired:
        raise AssertionError(f"the SLURM run hung past {RUN_LIMIT_S} s:\n{log_path.read_text()[-6000:]}") from None
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    jobs = [j for j in _jobs() if j["JobId"] not in jobs_before]
    return {"work": work, "cfg": cfg, "log": log_path.read_text(), "returncode": proc.returncode,
            "warned": warned, "warned_saved": stopped, "cancelled": cancelled, "jobs": jobs}


def _checkpoint_steps(root: Path) -> list[int]:
    """The steps of the complete checkpoints under ``root`` (the engine keeps the newest: step-NNNNNNNN/state.json)."""
    return [int(p.parent.name.removeprefix("step-")) for p in root.rglob("step-*/state.json")]


def test_the_tiny_workflow_completes_through_the_profile(cluster_run):
    assert cluster_run["returncode"] == 0, cluster_run["log"][-6000:]
    res = cluster_run["work"] / "results"
    for name in ("bias_table.csv", "bias_table.md", "thresholds.csv", "scores.csv", "figure2.png", "figure2.svg"):
        assert (res / "report" / name).stat().st_size > 0, name
    for run in ("minilm/seed0", "human/annotator0", "human/annotator1", "human/annotator2", "human"):
        assert len(list((res / "bias" / run / "squad" / "validation").glob("*.json"))) == len(HEURISTICS), run
    assert (res / "predictions/minilm/seed0/squad/validation.parquet").exists()
    # Every submitted job, as SLURM recorded it: all COMPLETED, but the one cancelled on purpose.
    states = {j["JobId"]: j["JobState"] for j in cluster_run["jobs"]}
    assert states.pop(cluster_run["cancelled"]) == "CANCELLED"
    assert states.pop(cluster_run["warned"]) == "FAILED"  # it saved and exited non-zero, for the retry to resume
    assert states and set(states.values()) == {"COMPLETED"}, states
    rules = {j["Comment"].split("_wildcards_")[0] for j in cluster_run["jobs"]}
    assert {"rule_derive_splits", "rule_heuristics", "rule_train", "rule_predict", "rule_human_predictions"} <= rules


def test_a_warned_and_a_cancelled_training_resume_each_at_its_saved_step(cluster_run):
    log = cluster_run["log"]
    for job, state in ((cluster_run["warned"], "FAILED"), (cluster_run["cancelled"], "CANCELLED")):
        assert f"SLURM-job '{job}' failed, SLURM status is: '{state}'" in log, log[-6000:]
    assert log.count("Trying to restart job") >= 2
    train = sorted((j for j in cluster_run["jobs"] if j["Comment"].startswith("rule_train_")),
                   key=lambda j: int(j["JobId"]))
    assert [j["JobState"] for j in train] == ["FAILED", "CANCELLED", "COMPLETED"]
    summary = json.loads((cluster_run["work"] / "results/models/minilm/seed0/training.json").read_text())
    assert summary["steps"] == STEPS
    # SIGUSR1 (the time-limit warning) and scancel's SIGTERM each reach the training process, which saves a
    # checkpoint where it stands and exits (TrainingPreempted); each retry resumes exactly there. Snakemake empties
    # the rule's log before each attempt, so the stopped attempts tell it in their SLURM logs (the training says a
    # stop and a resume on its own stderr too; SLURM logs of failed jobs are kept), the last in the rule's log.
    work = cluster_run["work"]

    def slurm_log(job: str) -> str:
        found = list((work / ".snakemake" / "slurm_logs").rglob(f"{job}.log"))
        assert len(found) == 1, (job, found)
        return found[0].read_text()

    attempts = [slurm_log(cluster_run["warned"]), slurm_log(cluster_run["cancelled"])]
    train_log = (work / "results/logs/train/minilm_seed0.log").read_text()
    pattern = r"received (SIGUSR1|SIGTERM): checkpoint saved at step (\d+)"
    saved = [{sig: int(step) for sig, step in re.findall(pattern, text)} for text in attempts]
    assert saved[0].keys() == {"SIGUSR1"} and saved[1].keys() == {"SIGTERM"}, attempts[1][-4000:]
    saved = {**saved[0], **saved[1]}
    assert EVERY <= saved["SIGUSR1"] < saved["SIGTERM"] < STEPS, saved
    assert saved["SIGUSR1"] == cluster_run["warned_saved"]  # the checkpoint left when attempt 1 ended
    resumed = [int(s) for text in (attempts[1], train_log)
               for s in re.findall(rf"resuming from \S+ \(step (\d+)/{STEPS}\)", text)]
    assert resumed == [saved["SIGUSR1"], saved["SIGTERM"]], train_log[-4000:]
    assert summary["resumed_from_step"] == saved["SIGTERM"]


def test_each_retry_asks_for_more_memory(cluster_run):
    # mem_mb "by_size(...) * attempt": MiniLM's small class asks for 16 GB, then 32 GB, then 48 GB (below the node's
    # 128 GB); the CPUs, GPU and time stay. This cluster does not enforce memory (no cgroups), so a job killed for
    # memory is not staged; any failed attempt is retried the same way.
    train = sorted((j for j in cluster_run["jobs"] if j["Comment"].startswith("rule_train_")),
                   key=lambda j: int(j["JobId"]))
    assert [j["MinMemoryNode"] for j in train] == ["16000M", "32000M", "48000M"], train
    assert {(j["NumCPUs"], j["TimeLimit"]) for j in train} == {("4", "02:00:00")}


def test_group_jobs_ask_for_what_their_members_need(cluster_run):
    groups = [j for j in cluster_run["jobs"] if "/group_" in j.get("StdOut", "")]
    # four groups of one search per heuristic (the model and each annotator), one of the Human rows
    assert len(groups) == 5, [g["StdOut"] for g in groups]
    for g in groups:
        members = len(HEURISTICS)
        cpus = min(members, PROFILE_CORES)
        assert int(g["NumCPUs"]) == cpus, g
        assert g["MinMemoryNode"] == f"{cpus * SEARCH_MEM_MB}M", g
        assert g["Partition"] == "cpu" and _gpus(g) == 0, g
        assert g["TimeLimit"] == "00:15:00", g  # one layer of one search's runtime


def test_the_training_job_asks_for_its_models_size_class(cluster_run):
    # MiniLM is in the profile's small class: by_size(...) gives it 4 CPUs for its GPU, 16 GB and 2 hours, as
    # sbatch submitted it (the submitting host and the job evaluate the same request)
    train = sorted((j for j in cluster_run["jobs"] if j["Comment"].startswith("rule_train_")),
                   key=lambda j: int(j["JobId"]))
    assert train, cluster_run["log"][-4000:]
    assert (train[0]["NumCPUs"], train[0]["MinMemoryNode"], train[0]["TimeLimit"]) == ("4", "16000M", "02:00:00")
    for job in train:
        assert job["Partition"] == "gpu" and _gpus(job) == 1, job


def test_a_request_no_node_can_meet_fails_before_any_submission(cluster_run, tmp_path):
    cfg = cluster_run["cfg"]
    before = {j["JobId"] for j in _jobs()}
    started = time.time()
    # 32 CPUs per GPU on a 16-CPU node: SLURM would keep it PENDING forever (Reason=PartitionConfig).
    proc = _run(_snakemake_cmd(tmp_path, "--set-resources", "train:cpus_per_gpu=32", "train:gpu=1",
                               "train:slurm_partition=gpu", "--configfile", str(cfg)), timeout=120)
    assert time.time() - started < 60
    assert proc.returncode != 0
    out = proc.stdout
    assert "SlurmRequestError" in out and "nothing was submitted" in out, out[-4000:]
    assert "rule train (model=minilm, seed=0) asks for 32 CPUs" in out
    assert "the largest node of partition 'gpu'" in out and "has 16 CPUs, 128000 MB and 1 GPUs" in out
    assert "set-threads: train (or set-resources: train: cpus_per_gpu" in out
    assert {j["JobId"] for j in _jobs()} <= before, "a job was submitted"  # older ones may age out (MinJobAge)
    assert not (tmp_path / ".snakemake" / "locks").exists() or not any((tmp_path / ".snakemake" / "locks").iterdir())


def test_the_default_status_command_without_accounting_fails_at_once(cluster_run, tmp_path):
    # Without the test-only flags the plugin reads job states with sacct, which fails on a cluster without
    # slurmdbd: it would lose its jobs and wait forever. The start-up check says so before submitting anything.
    before = {j["JobId"] for j in _jobs()}
    started = time.time()
    proc = _run(_snakemake_cmd(tmp_path, "--configfile", str(cluster_run["cfg"]), flags=()), timeout=120)
    assert proc.returncode != 0 and time.time() - started < 60
    out = proc.stdout
    assert "read job states with sacct, which fails on this cluster" in out, out[-4000:]
    assert "accounting storage is disabled" in out and "--slurm-status-command squeue" in out
    assert {j["JobId"] for j in _jobs()} <= before, "a job was submitted"  # older ones may age out (MinJobAge)


def _slurm_plan(tmp_path, config: str) -> dict:
    """The plan of a paper config as the slurm executor computes it (Snakemake's layered group resources, the
    plugin's CPU rule), written before the first submission, with nothing submitted (SPURIOUS_SLURM_PLAN)."""
    plan = tmp_path / "plan.json"
    env = _env() | {"SPURIOUS_SLURM_PLAN": str(plan)}
    before = {j["JobId"] for j in _jobs()}
    proc = _run(_snakemake_cmd(tmp_path, "--configfile", str(REPO / "configs" / config)), 240, env)
    assert proc.returncode != 0 and plan.exists(), proc.stdout[-4000:]
    assert {j["JobId"] for j in _jobs()} <= before, "a job was submitted"  # older ones may age out (MinJobAge)
    return json.loads(plan.read_text())


def test_the_paper_configs_group_jobs_each_fit_one_ordinary_node(cluster_run, tmp_path):
    payload = _slurm_plan(tmp_path, "paper-squad.yaml")
    groups = [r for r in payload["requests"] if r["group"]]
    # tests/core/test_workflow.py: 23 runs, 3 annotators, the Human rows, Figure 4 at App. C (4)
    assert len(groups) == 31
    for g in groups:
        assert g["cpus"] <= 8 and g["mem_mb"] <= 32000 and g["gpus"] == 0, g
        assert g["cpus"] == min(g["members"], PROFILE_CORES) and g["mem_mb"] == g["cpus"] * SEARCH_MEM_MB, g
    assert max(g["members"] for g in groups) > PROFILE_CORES  # some groups run their searches in several layers
    assert payload["problems"] == [], payload["problems"]  # on the profile-shaped node every job fits


def test_the_lexical_configs_requests_follow_each_model(cluster_run, tmp_path):
    # paper-lexical's classifiers ask by size class: the BiLSTM control a small job, RoBERTa-large a large one on one
    # GPU; every job fits this profile-shaped node, and with SPURIOUS_SLURM_PLAN nothing is submitted.
    payload = _slurm_plan(tmp_path, "paper-lexical.yaml")
    train = [r for r in payload["requests"] if r["rules"] == ["lexical_train"]]
    bilstm = [r for r in train if "model=bilstm" in r["label"]]
    large = [r for r in train if "model=roberta_large" in r["label"]]
    assert len(bilstm) == 6 and len(large) == 18  # 3 datasets with a test split x weightings x seeds
    assert {(r["cpus"], r["mem_mb"], r["gpus"], r["runtime_min"]) for r in bilstm} == {(4, 16000, 1, 240)}
    # one GPU: the paper's batch of 16 does not fill one (its step is launch-bound), so a second would idle
    assert {(r["cpus"], r["mem_mb"], r["gpus"], r["runtime_min"]) for r in large} == {(8, 64000, 1, 2880)}
    assert all(r["unmet"] is None for r in bilstm + large) and payload["problems"] == []
