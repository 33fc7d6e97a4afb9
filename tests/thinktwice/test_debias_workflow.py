"""Think Twice's debiasing chain as a workflow, end to end on the tiny QA config of ``tests/core/test_workflow.py``:
segments, the bias model, logits, the matched plain control, the scale search, ReSam, LMix and CReg, predictions in
and out of distribution, and the debiasing report."""

from __future__ import annotations

import json
import shutil
import subprocess
import textwrap

import numpy as np
import pandas as pd
import pytest
import yaml

from tests.conftest import WORKFLOW_CORES, tiny_encoder
from tests.core.test_workflow import (
    SNAKEMAKE,
    _env,
    insert_before,
    job_counts,
    snakemake,
    tiny_config,
    workflow_copy,
)


@pytest.fixture(scope="module")
def tiny_debias_run(tmp_path_factory):
    """The debiasing chain end to end on the tiny config: a bias model, teacher/bias logits, the plain control, LMix's
    scale search (two values), ReSam, LMix and CReg, predictions on SQuAD and a 20-question NQ subset, and the
    debiasing report (a few minutes).

    A 6-step model has no measurable bias, so the word-dist threshold is given (debias.fixed_thresholds) instead
    of searched; the searched path is the same rule with the bias result as input (see the demo-debias dry-run)."""
    work = tmp_path_factory.mktemp("tiny_debias")
    # 2 paragraphs of each article (72 questions, not 207): every prediction, logit and heuristic job reads a third as
    # much, and no assertion below depends on the size
    # the chain's plumbing on a tiny random encoder, not MiniLM (tiny_encoder): 8 training jobs cost seconds each
    cfg_path = tiny_config(work, paragraphs=2, encoder=tiny_encoder(work))
    cfg = yaml.safe_load(cfg_path.read_text())
    cfg["segments"] = []
    cfg["human"] = None  # the chain reads no Human row: 9 jobs fewer
    # two heuristics, not seven: every run's bias search is a job of its own (20 instead of 70), and the chain needs
    # only word-dist (its segments) and ans-len (the searches the test reads)
    cfg["heuristics"]["names"] = ["word-dist", "ans-len"]
    cfg["datasets"]["nq"] = {
        "task": "qa",
        "splits": {
            "dev": {"format": "squad_flat_json", "mirror_path": "naturalquestions_isbiased/nq_dev_formatted.json.gz"}
        },
        "subsets": {"tiny": {"from": "dev", "max_examples": 20, "seed": 0}},
    }
    cfg["evaluate"].append({"dataset": "nq", "split": "tiny"})
    cfg["debias"] = {
        "model": "tiny",
        "heuristics": ["word-dist"],
        "fixed_thresholds": {"word-dist": {"threshold": 3.0, "biased_group": "low"}},
        "training": {"max_steps": 4, "eval_every": 2},
        "bias_model": {"selection_max_examples": 20, "training": {"max_steps": 4, "eval_every": 2}},
        "scale_search": {"heuristic": "word-dist", "grid": [0.2, 0.8], "methods": ["lmix"], "max_examples": 20},
    }
    cfg_path = work / "tiny_debias.yaml"
    cfg_path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    snakemake(work, "--cores", WORKFLOW_CORES, "--configfile", str(cfg_path), timeout=1500)
    return work, cfg_path


def test_tiny_debias_chain_outputs(tiny_debias_run):
    work, _ = tiny_debias_run
    res = work / "results"
    seg = res / "segments/tiny/seed0/squad/train/word-dist/by_fixed"
    biased, unbiased = pd.read_parquet(seg / "biased.parquet"), pd.read_parquet(seg / "unbiased.parquet")
    train = pd.read_parquet(res / "data/squad/derived_s0/train.parquet")
    heur = pd.read_parquet(res / "heuristics/squad/train.parquet").set_index("id")["word-dist"]
    # the given threshold splits the training data: low (<= 3) is biased; the -1 sentinels are in neither segment
    assert set(biased["id"]) == set(heur[(heur >= 0) & (heur <= 3.0)].index)
    assert set(unbiased["id"]) == set(heur[heur > 3.0].index)
    assert len(biased) + len(unbiased) + int((heur < 0).sum()) == len(train)

    resam = json.loads((res / "models/tiny/resam/word-dist/seed0/training.json").read_text())
    stats = resam["resampling"]
    assert stats["n_biased_after"] == stats["n_unbiased_after"] == max(len(biased), len(unbiased))
    assert resam["n_train_examples"] == 2 * max(len(biased), len(unbiased))

    bias_model = json.loads((res / "models/tiny/biasmodel/word-dist/seed0/training.json").read_text())
    assert bias_model["n_train_examples"] == len(biased)
    assert [h["step"] for h in bias_model["selection_history"]] == [2, 4]
    best = max(bias_model["selection_history"], key=lambda h: h["score"])
    assert bias_model["best_step"] == best["step"]
    assert best["score"] == pytest.approx(best["f1_biased"] - best["f1_unbiased"])

    for producer in ("tiny/seed0", "tiny/biasmodel/word-dist/seed0"):
        arr = np.load(res / f"logits/{producer}/squad/train.npy", mmap_mode="r")
        meta = json.loads((res / f"logits/{producer}/squad/train.json").read_text())
        assert arr.shape[1:] == (2, 128) and arr.dtype == np.float32
        assert arr.shape[0] == meta["fingerprint"]["n_features"] >= len(train)

    for method in ("lmix", "creg"):
        summary = json.loads((res / f"models/tiny/{method}/word-dist/seed0/training.json").read_text())
        assert summary["steps"] == 4 and summary["objective_id"] and method in summary["objective_id"]
        curves = summary["validation_curves"]
        assert set(curves) == {"validation", "nq/tiny"} and [p["step"] for p in curves["nq/tiny"]] == [2, 4]
    assert not any((res / "_checkpoints").rglob("state.json")), "checkpoints are removed after success"

    runs = ("tiny/seed0", "tiny/plain/seed0", "tiny/resam/word-dist/seed0", "tiny/lmix/word-dist/seed0",
            "tiny/creg/word-dist/seed0")  # fmt: skip
    for run in runs:
        m = json.loads((res / f"predictions/{run}/nq/tiny.metrics.json").read_text())
        assert m["n"] == 20 and m["run"] == run
        r = json.loads((res / f"bias/{run}/squad/validation/ans-len.json").read_text())
        expected_method = run.split("/")[1] if run.count("/") >= 2 else "original"
        assert r["run"] == run and r["method"] == expected_method

    # the original model logs its OOD validation curve too (Figs. 8-9)
    original = json.loads((res / "models/tiny/seed0/training.json").read_text())
    assert set(original["validation_curves"]) == {"validation", "nq/tiny"}
    # the matched control: the debiased runs' data, steps and seed, no objective
    plain = json.loads((res / "models/tiny/plain/seed0/training.json").read_text())
    lmix = json.loads((res / "models/tiny/lmix/word-dist/seed0/training.json").read_text())
    creg = json.loads((res / "models/tiny/creg/word-dist/seed0/training.json").read_text())
    assert plain["objective_id"] is None and plain["addressed"] is None and plain["method"] == "plain"
    assert (plain["n_train_examples"], plain["steps"], plain["settings"]) == (
        lmix["n_train_examples"], lmix["steps"], lmix["settings"],
    )  # fmt: skip
    # LMix reads its scale from the search's choice file; CReg (not searched) keeps its configured one
    choice = json.loads((res / "scale_search/tiny/lmix/choice.json").read_text())
    assert [c["scale"] for c in choice["candidates"]] == [0.2, 0.8] and choice["metric"] == "f1"
    assert choice["score"] == max(c["f1"] for c in choice["candidates"])
    assert lmix["scale"] == choice["scale"] and "choice.json" in lmix["scale_source"]
    assert f'"scale": {choice["scale"]}' in lmix["objective_id"]
    assert creg["scale"] == 0.2 and creg["scale_source"] == "config"
    assert lmix["gate"]["steps"] == 4 and lmix["gate"]["final_q10"] <= lmix["gate"]["final_q90"]
    assert {"gate", "gate_q10", "gate_q50", "gate_q90", "gate_max"} <= set(lmix["train_losses"][-1])

    runs_table = pd.read_csv(res / "report/debias/runs.csv")
    assert list(runs_table["method"]) == ["Original", "Plain", "ReSam", "LMix", "CReg"]
    assert runs_table.set_index("method").loc["LMix", "scale"] == choice["scale"]

    table1 = pd.read_csv(res / "report/debias/table1.csv")
    assert {"Original", "Plain", "ReSam", "LMix", "CReg"} <= set(table1["method"])
    assert {"nq score", "nq Δ vs plain", "nq Δ vs original"} <= set(table1.columns)
    word_dist_rows = table1[(table1["method"] != "Original") & (table1["addressed"] == "word-dist")]
    assert set(word_dist_rows["metric"]) == {"EM", "F1"} and (word_dist_rows["n_seeds"] == 1).all()
    # absolute scores and differences in their own columns: only the Original and Plain rows have a score
    assert set(table1.loc[table1["nq score"].notna(), "method"]) == {"Original", "Plain"}
    assert table1.loc[table1["nq Δ vs plain"].notna(), "method"].isin(["ReSam", "LMix", "CReg"]).all()
    md_header = (res / "report/debias/table1.md").read_text(encoding="utf-8").splitlines()[0]
    assert "| nq score |" in md_header and "| nq Δ vs plain |" in md_header
    bias_models = pd.read_csv(res / "report/debias/bias_models.csv")
    assert len(bias_models) == 1 and bias_models.loc[0, "f1_gap"] == pytest.approx(
        round(best["f1_biased"] - best["f1_unbiased"], 2)
    )
    for name in ("figure5", "cross_bias", "figure3", "loss_curves", "figure6"):
        for ext in ("png", "svg"):
            assert (res / f"report/debias/{name}.{ext}").stat().st_size > 0


def test_a_method_added_by_one_track_entry_trains_through_the_workflow(tiny_debias_run, tmp_path):
    """docs/ARCHITECTURE.md's recipe: one DebiasMethod entry in thinktwice/track.py plus its objective builder; no other
    file edited (the wildcards, the schema's method list, the rules' inputs and the training adapter read the entry).
    The toy method is LearnedMixin without its entropy term at scale 1: its losses differ from the plain control's."""
    work, cfg_path = tiny_debias_run
    code = workflow_copy(tmp_path / "code")
    track_file = code / "src/spurious/thinktwice/track.py"
    insert_before(track_file, "#: The debiasing methods (paper §5)", textwrap.dedent('''\
        def _toy_objective(run: MethodRun, features: Any) -> Any:
            from spurious.core.models import load_config
            from spurious.thinktwice import debias

            return debias.LearnedMixinObjective(window_logits(run, features, "bias_logits"), entropy_weight=0.0,
                                                hidden_size=load_config(run.checkpoint).hidden_size, scale=1.0)


        '''))
    insert_before(track_file, ")\nMETHOD_OF: dict[str, DebiasMethod]",
                  '    DebiasMethod("toy", "Toy", reads=("train", "bias_logits"), objective=_toy_objective),\n')
    copied = tmp_path / "work"
    shutil.copytree(work, copied, symlinks=True)
    config = yaml.safe_load(cfg_path.read_text())
    config["debias"]["methods"] = ["plain", "resam", "lmix", "creg", "toy"]
    config_file = tmp_path / "toy.yaml"
    config_file.write_text(yaml.safe_dump(config, sort_keys=False))
    target = "results/models/tiny/toy/word-dist/seed0/training.json"
    cmd = [*SNAKEMAKE, "-s", str(code / "Snakefile"), "--directory", str(copied), "--cores", WORKFLOW_CORES, target,
           "--configfile", str(config_file)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=dict(_env(), PYTHONPATH=str(code / "src")),
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-6000:]
    assert job_counts(proc.stderr) == {"train_debiased": 1}, proc.stderr[-3000:]

    toy = json.loads((copied / target).read_text())
    plain = json.loads((copied / "results/models/tiny/plain/seed0/training.json").read_text())
    assert toy["method"] == "toy" and toy["addressed"] == "word-dist" and toy["run"] == "tiny/toy/word-dist/seed0"
    toy_losses = [row["loss"] for row in toy["train_losses"]]
    plain_losses = [row["loss"] for row in plain["train_losses"]]
    assert len(toy_losses) == len(plain_losses) and np.all(np.isfinite(toy_losses))
    assert toy_losses[0] != plain_losses[0]  # the same data, initialisation and seed: only the objective differs
