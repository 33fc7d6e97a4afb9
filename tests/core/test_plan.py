"""`spurious plan` on a tiny config: the job graph Snakemake plans and each estimate, against numbers worked out by
hand from the formula (docs/paper-configs.md) and the measurements it names."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
import yaml

from spurious.aflite.costs import AFLITE_ITERATION_S
from spurious.workflow import plan
from tests.conftest import REPO, SHARED

# Two QA models on SQuAD (train from the hub: 87,599 questions by its card; validation: the mirror's 10,570): MiniLM
# for 2 epochs, RoBERTa-large for 1,000 steps, neither with evaluations before the end nor early stopping.
TINY = {
    "run_name": "tiny-plan",
    "datasets": {"squad": {"task": "qa", "splits": {
        "train": {"format": "hub", "hub": {"name": "rajpurkar/squad", "split": "train"}},
        "validation": {"format": "squad_json", "mirror_path": "squad_v1.1/dev-v1.1.json.gz"}}}},
    "models": {
        "minilm": {"checkpoint": "embedded:all-MiniLM-L6-v2", "train": {"dataset": "squad", "split": "train"},
                   "validation": {"dataset": "squad", "split": "validation"},
                   "training": {"batch_size": 32, "epochs": 2, "max_length": 256, "eval_every": None,
                                "early_stopping_patience": None, "checkpoint_every": 1000}},
        "roberta_large": {"checkpoint": "roberta-large", "train": {"dataset": "squad", "split": "train"},
                          "validation": {"dataset": "squad", "split": "validation"},
                          "training": {"batch_size": 16, "max_steps": 1000, "max_length": 128, "eval_every": None,
                                       "early_stopping_patience": None, "checkpoint_every": 500}},
    },
    "evaluate": [{"dataset": "squad", "split": "validation"}],
    "heuristics": {"names": ["word-dist"], "tfidf_reference": {"dataset": "squad", "split": "validation"}},
}
# The H200 measurements (../shared/gpu/h200-2026-11-26, `ours_random`): MiniLM 19.151 ms a step of 16 x 254.72
# padded tokens, 6 layers; BERT-base 34.645 ms a step of 32 x 348 tokens, 12 layers, 85,054,464 non-embedding weights.
MINILM_S, MINILM_T = 0.019151170360000833, 16 * 254.72
BERT_S, BERT_T = 0.03464525790624862, 32 * 348.0
MINILM_PARAMS, ROBERTA_LARGE_PARAMS = 22_713_216, 355_359_744
# SQuAD dev's windows (measured with the MiniLM tokenizer): per question and mean length at max_length 256 and 128
WINDOWS_256, MEAN_256, WINDOWS_128, MEAN_128 = 1.1445, 172.6, 2.5629, 118.0
QUESTIONS = 87_599 + 10_570  # cut into windows at the start of a training job (2.1 ms each, measured)
CHECKPOINT_RATE, SHAPE_S = 0.3e9, 0.14  # bytes/s a checkpoint is written (measured); a first-seen GPU batch shape


@pytest.fixture(scope="module")
def planned(tmp_path_factory):
    work = tmp_path_factory.mktemp("plan")
    cfg = work / "tiny.yaml"
    cfg.write_text(yaml.safe_dump(TINY))
    config, jobs = plan.planned_jobs([cfg], REPO / "profiles" / "slurm", work / "run")
    return {"cfg": cfg, "config": config, "jobs": jobs, "planner": plan.Planner(config)}


def _cost(planned, rule, **wildcards):
    job = next(j for j in planned["jobs"] if j.rule == rule and all(j.wildcards[k] == v for k, v in wildcards.items()))
    return planned["planner"].job(job), job


def test_snakemake_plans_every_job_of_the_config(planned):
    counts = {}
    for job in planned["jobs"]:
        counts[job.rule] = counts.get(job.rule, 0) + 1
    # two downloads, two checkpoints fetched, the heuristics of validation, two trainings and predictions, one search
    # per model, the tables, the index page of results/
    assert counts == {
        "download": 2, "fetch_model": 2, "heuristics": 1, "train": 2, "predict": 2, "bias": 2, "report_tables": 1,
        "index": 1,
    }


def test_a_small_models_steps_scale_with_its_tokens(planned):
    cost, job = _cost(planned, "train", model="minilm")
    steps = 2 * 3_134  # 2 epochs x ceil(87,599 x 1.1445 windows / 32)
    step_s = MINILM_S * (32 * 256) / MINILM_T  # random batches, max_length wide: twice MiniLM's tokens, its time x2
    # one (final) evaluation of the validation windows, sorted by length: the mean window + half the multiple of 64
    evaluation_s = 10_570 * WINDOWS_256 * (MEAN_256 + 31.5) * MINILM_S / MINILM_T / 3
    checkpoints_s = 6 * 16 * MINILM_PARAMS / CHECKPOINT_RATE  # floor(6,267 / 1,000) saves, best weights included
    shapes_s = (2 + 4) * SHAPE_S  # random training batches: ~2 widths; evaluation batches: 256 / 64
    startup_s = 60 + 4 * MINILM_PARAMS / 1e9 + QUESTIONS * 0.0021
    assert cost.gpu_s == pytest.approx(steps * step_s + evaluation_s + checkpoints_s + shapes_s + startup_s, rel=1e-9)
    assert cost.gpu_s == pytest.approx(519.51, abs=0.01)
    assert cost.loop_s() == pytest.approx(cost.gpu_s - startup_s, rel=1e-9)
    assert (cost.gpus, cost.mem_mb, job.resources["runtime"]) == (1, 16000, 120)  # the profile's small class
    assert cost.disk_bytes == 4 * MINILM_PARAMS and cost.gpu_state_bytes == 16 * MINILM_PARAMS
    assert cost.kinds == {"known"}


def test_a_large_models_short_steps_are_counted_by_its_layers(planned):
    cost, job = _cost(planned, "train", model="roberta_large")
    # 16 x 128 tokens: 302,309,376 / 85,054,464 x 2,048 / 11,136 = 0.654 of a BERT-base step's work, but 24 layers
    step_s = BERT_S * 24 / 12
    evaluation_s = 10_570 * WINDOWS_128 * 128 * BERT_S / BERT_T * 302_309_376 / 85_054_464 / 3
    checkpoints_s = 1 * 16 * ROBERTA_LARGE_PARAMS / CHECKPOINT_RATE
    shapes_s = (2 + 2) * SHAPE_S
    startup_s = 60 + 4 * ROBERTA_LARGE_PARAMS / 1e9 + QUESTIONS * 0.0021
    assert cost.gpu_s == pytest.approx(1000 * step_s + evaluation_s + checkpoints_s + shapes_s + startup_s, rel=1e-9)
    assert cost.gpu_s == pytest.approx(369.16, abs=0.01)
    assert (cost.mem_mb, job.resources["runtime"]) == (48000, 1440)  # the profile's large class


def test_k_gpus_cost_each_gpus_share_of_a_step_and_never_less_than_one(planned):
    job = next(j for j in planned["jobs"] if j.rule == "train" and j.wildcards["model"] == "roberta_large")
    planner = planned["planner"]
    one = planner.job(job)
    for k in (2, 4):
        many = planner.job(plan.PlannedJob(job.rule, job.wildcards, job.params, {**job.resources, "gpu": k},
                                           job.threads, job.model))  # fmt: skip
        # 2,048 / k tokens a GPU: still launch-bound (24 layers), so each step takes as long as on one GPU
        assert many.parts["steps"] == pytest.approx(one.parts["steps"], rel=1e-12)
        assert many.gpu_s == pytest.approx(k * one.gpu_s, rel=1e-12)
        assert "launch-bound even on one GPU" in many.basis[0]
    big = dict(job.params, settings={**job.params["settings"], "batch_size": 256})  # 32,768 tokens: fills 2 cards
    one = planner.job(plan.PlannedJob(job.rule, job.wildcards, big, job.resources, job.threads, job.model))
    two = planner.job(plan.PlannedJob(job.rule, job.wildcards, big, {**job.resources, "gpu": 2}, job.threads,
                                      job.model))  # fmt: skip
    work = 302_309_376 / 85_054_464 * 256 * 128 / BERT_T  # 10.5 reference steps of work: above the 2 of the layers
    assert one.parts["steps"] == pytest.approx(1000 * BERT_S * work, rel=1e-9)
    assert two.parts["steps"] == pytest.approx(1000 * BERT_S * work / 2, rel=1e-9)  # half the wall time
    assert two.gpu_s >= one.gpu_s  # the same step work in GPU-seconds, plus the second GPU's start-up


@pytest.mark.parametrize("card", sorted(plan.CARDS))
def test_cards_scale_the_gpu_work_by_their_stated_factor(planned, card):
    job = next(j for j in planned["jobs"] if j.rule == "train" and j.wildcards["model"] == "minilm")
    h200, other = plan.Planner(planned["config"]).job(job), plan.Planner(planned["config"], card).job(job)
    spec = plan.CARDS[card]
    factor = ((989 / spec.bf16_tflops) * (4.8 / spec.bandwidth_tbs)) ** 0.5
    for part in ("steps", "evaluations"):
        assert other.parts[part] == pytest.approx(h200.parts[part] * factor, rel=1e-12)
    for part in ("start-up", "checkpoints", "first-seen shapes"):
        assert other.parts[part] == h200.parts[part]
    expected = {"h200": 1.0, "h100": 1.197, "a100": 2.731, "v100": 18.33, "l40s": 3.896}[card]
    assert spec.factor() == pytest.approx(expected, abs=1e-3)


def test_predictions_cpu_jobs_and_the_totals(planned):
    predict, _ = _cost(planned, "predict", run="minilm/seed0")
    width = MEAN_256 + 31.5  # sorted by length on the GPU, padded to multiples of 64
    assert predict.gpu_s == pytest.approx(10_570 * WINDOWS_256 * round(width) * MINILM_S / MINILM_T / 3 + 60
                                          + 4 * MINILM_PARAMS / 1e9 + 10_570 * 0.0021)  # fmt: skip
    heuristics, job = _cost(planned, "heuristics", split="validation")
    assert job.threads == 8 and heuristics.cpu_s == pytest.approx(10 * 8 + 2 * 27.5)  # start-up x threads + measured
    search, _ = _cost(planned, "bias", run="minilm/seed0")
    assert search.cpu_s == pytest.approx(10 + 0.32 / 7)
    download, _ = _cost(planned, "download", split="train")
    assert download.disk_bytes == 87_599 * 1000 and download.kinds == {"estimate"}
    rules, bases = plan.estimate(planned["config"], planned["jobs"])
    train = next(r for r in rules if r.rule == "train")
    assert train.gpu_hours == pytest.approx((519.51 + 369.16) / 3600, abs=1e-5) and train.jobs == train.gpu_jobs == 2
    assert rules[0].rule == "train"  # the most GPU-hours first
    assert sorted(bases) == ["card", "h200-2026-11-26/bench_bertbase.json", "h200-2026-11-26/bench_minilm.json"]


def test_the_command_prints_the_table_with_its_basis(planned, tmp_path, capsys):
    from spurious.cli import main

    out_json = tmp_path / "plan.json"
    assert main(["plan", "--configfile", str(planned["cfg"]), "--json", str(out_json)]) == 0
    out = capsys.readouterr().out
    assert "| train | 2 | 2 | 0.2 |" in out and "| **total** | **13** | **4** |" in out
    assert "MiniLM-L6 QA, batch 16, max_length 256: 19.2 ms/step at 4,076 tokens/step, NVIDIA H200" in out
    assert "6,268 steps (2 epochs × ceil(100,257 / 32)" in out and "Formula: GPU-hours =" in out
    assert "Card: NVIDIA H200 SXM" in out
    payload = json.loads(out_json.read_text())
    assert payload["total"]["jobs"] == 13 and payload["total"]["gpu_jobs"] == 4
    assert main(["plan", "--configfile", str(planned["cfg"]), "--gpu", "v100"]) == 0
    out = capsys.readouterr().out
    assert "| train | 2 | 2 | 1.8 |" in out and "× 18.33 = sqrt((989 / 15.7 TFLOPS) × (4.8 / 0.9 TB/s))" in out
    assert main(["plan", "--configfile", str(tmp_path / "missing.yaml")]) == 2
    assert "missing.yaml: no such config file" in capsys.readouterr().err


def test_outside_a_checkout_the_command_says_how_to_get_one(tmp_path):
    copy = tmp_path / "site" / "spurious"
    shutil.copytree(REPO / "src" / "spurious", copy, ignore=shutil.ignore_patterns("__pycache__"))
    proc = subprocess.run([sys.executable, "-m", "spurious.cli", "plan", "--configfile", str(REPO / "config.yaml")],
                          env=dict(os.environ, PYTHONPATH=str(copy.parent)), capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "has no Snakefile and rules/" in proc.stderr and "a clone of the repository" in proc.stderr


@pytest.mark.skipif(not (SHARED / "gpu" / "h200-2026-11-26").is_dir(), reason="../shared/gpu is not here")
def test_the_step_measurements_are_the_h200_files():
    folder = SHARED / "gpu" / "h200-2026-11-26"
    for key, name in (("small", "bench_minilm.json"), ("base", "bench_bertbase.json")):
        bench = json.loads((folder / name).read_text())
        row = next(r for r in bench["results"] if r["variant"] == "ours_random")
        ref = plan.GPU_STEPS[key]
        assert ref.seconds_per_step == row["s_per_step"] and ref.card == bench["device"].removesuffix(" (cuda)")
        assert ref.tokens_per_step == pytest.approx(bench["batch_size"] * row["mean_batch_width"])
    aflite = json.loads((folder / "bench_aflite.json").read_text())
    assert aflite["ours_s"] == AFLITE_ITERATION_S and (aflite["n"], aflite["d"], aflite["m"], aflite["t"]) == (
        100_000, 384, 64, 10_000)


def test_a_named_size_class_stands_in_for_a_checkpoint_unknown_offline():
    planner = plan.Planner({})
    size = planner.size({"checkpoint": "org/private-model", "size_class": "large"}, "models.mine")
    assert (size.size_class, size.non_embedding_parameters, size.layers) == ("large", 302_309_376, 24)
    assert "models.mine (org/private-model): not known offline, counted as roberta-large" in planner.model_bases[
        "class large"]


def test_without_a_gpu_a_training_job_is_counted_at_the_cpus_measured_step(planned, tmp_path):
    # profiles/local asks for no GPU: MiniLM's 6,268 steps at the CPU step measured on 2 cores (1.8 s for 16 x 155
    # tokens, 3.6 CPU-seconds), scaled by tokens only (the same model); exact widths, no first-seen shapes
    config, jobs = plan.planned_jobs([planned["cfg"]], REPO / "profiles" / "local", tmp_path / "run")
    job = next(j for j in jobs if j.rule == "train" and j.wildcards["model"] == "minilm")
    cost = plan.Planner(config).job(job)
    steps_s = 6_268 * 3.6 * (32 * 256) / (16 * 155)
    evaluation_s = 10_570 * WINDOWS_256 * MEAN_256 * 3.6 / (16 * 155) / 3  # sorted by length, exact widths
    threads = job.threads
    checkpoints_s = 6 * 16 * MINILM_PARAMS / CHECKPOINT_RATE * threads
    startup_s = (10 + 4 * MINILM_PARAMS / 1e9 + QUESTIONS * 0.0021) * threads
    assert (cost.gpus, cost.gpu_s, threads) == (0, 0.0, 2)
    assert cost.cpu_s == pytest.approx(steps_s + evaluation_s + checkpoints_s + startup_s, rel=1e-9)
    assert "first-seen shapes" not in cost.parts
