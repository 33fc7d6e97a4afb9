"""The workflow as a user runs it: dry-runs of the shipped configs, the SLURM profile's GPU declarations, a tiny
end-to-end run through every rule on real SQuAD records, partial reruns, and resumption after a kill."""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from tests.conftest import REPO, SHARED, SQUAD_DEV

SNAKEMAKE = [sys.executable, "-m", "snakemake"]
TINY_ARTICLES = range(1, 8)  # Warsaw .. Southern_California: 207 questions in their first 6 paragraphs


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        SPURIOUS_DATA_MIRROR=str(SHARED / "data"),
        NLTK_DATA=str(SHARED / "nltk_data"),
        HF_HUB_OFFLINE="1",
        HF_DATASETS_OFFLINE="1",
        TOKENIZERS_PARALLELISM="false",
    )
    return env


def snakemake(workdir: Path, *args: str, check: bool = True, timeout: int = 1200) -> subprocess.CompletedProcess:
    cmd = [*SNAKEMAKE, "-s", str(REPO / "Snakefile"), "--directory", str(workdir), *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=_env(), timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-6000:]}")
    return proc


def job_counts(output: str) -> dict[str, int]:
    """The 'Job stats' table of a dry-run, as {rule: count}."""
    block = output.split("Job stats:")[-1]
    counts = {}
    for line in block.splitlines():
        m = re.match(r"^([a-z_]+)\s+(\d+)$", line.strip())
        if m and m.group(1) != "total":
            counts[m.group(1)] = int(m.group(2))
    return counts


def tiny_config(tmp: Path, **training) -> Path:
    """A small SQuAD-format file built from real dev records, and a config running every rule on it."""
    with gzip.open(SQUAD_DEV, "rt") as fh:
        payload = json.load(fh)
    payload["data"] = [
        dict(article, paragraphs=article["paragraphs"][:6]) for i, article in enumerate(payload["data"]) if i in TINY_ARTICLES
    ]
    data_file = tmp / "tiny_squad.json"
    data_file.write_text(json.dumps(payload))
    settings = {
        "learning_rate": 1e-4,
        "batch_size": 4,
        "max_steps": 6,
        "max_length": 128,
        "stride": 64,
        "eval_every": 3,
        "eval_max_examples": 16,
        "checkpoint_every": 2,
        "eval_batch_size": 32,
        "device": "cpu",
    }
    settings.update(training)
    cfg = {
        "run_name": "tiny",
        "datasets": {
            "squad": {
                "task": "qa",
                "splits": {"dev": {"format": "squad_json", "path": str(data_file)}},
                "derive": {"from": "dev", "validation_fraction": 0.5, "seed": 0},
            }
        },
        "models": {
            "minilm": {
                "checkpoint": "embedded:all-MiniLM-L6-v2",
                "train": {"dataset": "squad", "split": "train"},
                "validation": {"dataset": "squad", "split": "validation"},
                "seeds": [0],
                "training": settings,
            }
        },
        "evaluate": [{"dataset": "squad", "split": "validation"}],
        "heuristics": {"tfidf_reference": {"dataset": "squad", "split": "train"}, "threads": 1},
        "bias": {"sample_size": 10, "iterations": 20, "seed": 0},
        "human": {"dataset": "squad", "split": "validation"},
        "segments": [{"model": "minilm", "seed": 0, "dataset": "squad", "split": "validation", "heuristic": "ans-len"}],
    }
    path = tmp / "tiny.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def test_default_config_dry_run_plans_every_stage(tmp_path):
    out = snakemake(tmp_path, "-n", "--configfile", str(REPO / "config.yaml")).stdout
    counts = job_counts(out)
    # 1 model x 7 heuristics + 3 annotators x 7 heuristics; the Human row per heuristic.
    assert counts["bias"] == 28 and counts["human_bias"] == 7
    assert counts["train"] == 1 and counts["predict"] == 1 and counts["human_predictions"] == 3
    assert counts["download"] == 1 and counts["derive_splits"] == 1 and counts["heuristics"] == 1
    assert counts["report_tables"] == 1 and counts["segments"] == 1


def _resources_by_rule(output: str) -> dict[str, dict[str, str]]:
    resources: dict[str, dict[str, str]] = {}
    rule = None
    for line in output.splitlines():
        m = re.match(r"^(?:local)?rule (\w+):", line.strip())
        if m:
            rule = m.group(1)
        elif rule and line.strip().startswith("resources:"):
            pairs = dict(p.split("=", 1) for p in line.split(":", 1)[1].strip().split(", ") if "=" in p)
            resources[rule] = pairs
    return resources


def test_paper_config_dry_runs_with_slurm_gpu_declarations(tmp_path):
    proc = snakemake(
        tmp_path, "-n", "--workflow-profile", str(REPO / "profiles" / "slurm"), "--configfile",
        str(REPO / "configs" / "paper-squad.yaml"),
    )
    resources = _resources_by_rule(proc.stdout)
    for rule in ("train", "predict"):
        assert resources[rule]["gpu"] == "1", resources[rule]
        assert resources[rule]["slurm_partition"] == "gpu"
        assert int(resources[rule]["cpus_per_gpu"]) >= 1
        assert int(resources[rule]["mem_mb"]) >= 16000 and int(resources[rule]["runtime"]) >= 60
    for rule in ("heuristics", "bias"):
        assert "gpu" not in resources[rule], f"{rule} must not request a GPU"
    # The paper run trains BERT-base only: the embedded default's model is not merged in.
    assert "minilm" not in proc.stdout and "bert_base_cased" in proc.stdout
    # GPU requests live only in the profile: without it no job asks for a GPU.
    plain = snakemake(tmp_path, "-n", "--configfile", str(REPO / "configs" / "paper-squad.yaml")).stdout
    assert "gpu=" not in plain


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """One end-to-end run of the tiny config through every rule (a few minutes on 2 cores)."""
    work = tmp_path_factory.mktemp("tiny")
    cfg = tiny_config(work)
    # --keep-going: the split step fails by design when the tiny model's search finds no threshold (checked below).
    proc = snakemake(work, "--cores", "2", "--keep-going", "--configfile", str(cfg), check=False)
    bias = json.loads((work / "results/bias/minilm/seed0/squad/validation/ans-len.json").read_text())
    if bias["found"]:
        assert proc.returncode == 0, proc.stderr[-6000:]
    else:
        log = (work / "results/logs/segments/minilm_seed0_squad_validation_ans-len.log").read_text()
        assert "no threshold separates the segments of ans-len" in log and "config's 'segments'" in log
        assert not (work / "results/segments/minilm/seed0/squad/validation/ans-len/biased.parquet").exists()
    return work, cfg


def test_tiny_run_outputs_exist_parse_and_agree(tiny_run):
    work, _ = tiny_run
    res = work / "results"
    train = pd.read_parquet(res / "data/squad/derived_s0/train.parquet")
    valid = pd.read_parquet(res / "data/squad/derived_s0/validation.parquet")
    assert len(train) + len(valid) == 207 and set(train["title"]).isdisjoint(valid["title"])

    heur = pd.read_parquet(res / "heuristics/squad/validation.parquet")
    assert list(heur.columns) == ["id", "word-dist", "sim-word", "ans-pos", "cos-sim", "ans-len", "sim-ents", "subj-pos"]
    assert heur["id"].tolist() == valid["id"].tolist()

    preds = pd.read_parquet(res / "predictions/minilm/seed0/squad/validation.parquet")
    assert list(preds.columns) == ["id", "prediction_text", "em", "f1"] and len(preds) == len(valid)
    metrics = json.loads((res / "predictions/minilm/seed0/squad/validation.metrics.json").read_text())
    assert metrics["exact_match"] == pytest.approx(preds["em"].mean())

    summary = json.loads((res / "models/minilm/seed0/training.json").read_text())
    assert summary["steps"] == 6
    assert not (res / "_checkpoints/minilm/seed0").exists() or not any((res / "_checkpoints/minilm/seed0").iterdir())

    n_human = sum(len(a["text"]) >= 3 for a in valid["answers"])  # annotators need three gold answers
    for run in ["minilm/seed0", "human/annotator0", "human/annotator1", "human/annotator2"]:
        for h in heur.columns[1:]:
            r = json.loads((res / f"bias/{run}/squad/validation/{h}.json").read_text())
            n = r["n_evaluated"]  # the rows searched, after the -1 sentinels were dropped
            assert n + r["n_dropped_negative"] == (n_human if run.startswith("human") else len(valid))
            grid = [g["threshold"] for g in r["grid"]]
            for g in r["grid"]:
                assert g["size_low"] + g["size_high"] == n
            if r["found"]:
                assert r["threshold"] in grid
                assert r["groups"]["low"]["size"] + r["groups"]["high"]["size"] == n
                assert min(r["groups"]["low"]["size"], r["groups"]["high"]["size"]) >= 10
                assert r["prediction_bias"] == r["distance_em"] > 0
            else:
                assert r["prediction_bias"] == 0
    human = [json.loads((res / f"bias/human/annotator{k}/squad/validation/ans-len.json").read_text()) for k in range(3)]
    combined = json.loads((res / "bias/human/squad/validation/ans-len.json").read_text())
    assert combined["prediction_bias"] == min(h["prediction_bias"] for h in human)

    seg = res / "segments/minilm/seed0/squad/validation/ans-len"
    bias_ans_len = json.loads((res / "bias/minilm/seed0/squad/validation/ans-len.json").read_text())
    if bias_ans_len["found"]:
        biased, unbiased = pd.read_parquet(seg / "biased.parquet"), pd.read_parquet(seg / "unbiased.parquet")
        assert len(biased) + len(unbiased) == len(valid)

    table = pd.read_csv(res / "report/bias_table.csv")
    assert len(table) == 2  # the model and the Human row
    for name in ["bias_table.md", "thresholds.csv", "thresholds.md", "scores.csv", "figure2.png", "figure2.svg"]:
        assert (res / "report" / name).stat().st_size > 0
    for log in (res / "logs").rglob("*.log"):
        assert log.stat().st_size > 0, f"{log} is empty"


def test_tiny_run_report_html(tiny_run):
    work, cfg = tiny_run
    snakemake(work, "--cores", "1", "--configfile", str(cfg), "--report", str(work / "report.html"))
    html = (work / "report.html").read_text(errors="ignore")
    assert "bias_table.csv" in html and "figure2.png" in html


def test_changing_a_heuristic_parameter_reruns_heuristics_and_bias_but_not_training(tiny_run):
    work, cfg = tiny_run
    pending = job_counts(snakemake(work, "-n", "--configfile", str(cfg)).stdout)
    assert set(pending) <= {"segments", "all"}, f"the run should be complete except a failed split step: {pending}"
    changed = yaml.safe_load(cfg.read_text())
    changed["heuristics"]["variants"] = {"word-dist": "between"}
    cfg2 = cfg.with_name("tiny_changed.yaml")
    cfg2.write_text(yaml.safe_dump(changed, sort_keys=False))
    counts = job_counts(snakemake(work, "-n", "--configfile", str(cfg2)).stdout)
    assert counts.get("heuristics") == 1 and counts.get("bias") == 28 and counts.get("report_tables") == 1
    assert counts.get("human_bias") == 7
    assert "train" not in counts and "predict" not in counts and "download" not in counts


def test_training_resumes_after_kill_with_rerun_incomplete(tmp_path):
    cfg = tiny_config(tmp_path, max_steps=60, checkpoint_every=5, eval_every=None, batch_size=8)
    ckpt_root = tmp_path / "results" / "_checkpoints" / "minilm" / "seed0"
    target = "results/models/minilm/seed0/training.json"
    # The target comes before --configfile, which takes several values and would swallow it.
    cmd = [*SNAKEMAKE, "-s", str(REPO / "Snakefile"), "--directory", str(tmp_path), "--cores", "2", target,
           "--configfile", str(cfg)]
    proc = subprocess.Popen(cmd, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.time() + 600
    try:
        while time.time() < deadline:
            if ckpt_root.exists() and any(ckpt_root.rglob("state.json")):
                break
            assert proc.poll() is None, "training finished or failed before a checkpoint was seen"
            time.sleep(0.5)
        else:
            raise AssertionError("no checkpoint within 10 minutes")
    finally:
        with contextlib.suppress(ProcessLookupError):  # it already ended (the assertion above says why)
            os.killpg(proc.pid, signal.SIGKILL)  # a hard kill, as a crash or walltime would
        proc.wait()
    # The killed job's outputs were never written, so Snakemake plans the training again (a job killed while
    # writing them would be flagged incomplete instead; --rerun-incomplete covers both).
    assert job_counts(snakemake(tmp_path, "-n", target, "--configfile", str(cfg)).stdout).get("train") == 1
    snakemake(tmp_path, "--unlock", target, "--configfile", str(cfg))
    snakemake(tmp_path, "--cores", "2", "--rerun-incomplete", target, "--configfile", str(cfg))
    summary = json.loads((tmp_path / target).read_text())
    assert summary["resumed_from_step"] >= 5 and summary["resumed_from_step"] % 5 == 0
    assert summary["steps"] == 60
    assert not any(ckpt_root.rglob("state.json")), "checkpoints are removed after success"
