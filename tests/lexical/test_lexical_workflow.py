"""The lexical track as a user runs it: dry-runs of the demo and paper configs (GPU resources from the SLURM
profile), and a tiny end-to-end run on real QNLI records through every lexical rule, checked against the package."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest
import yaml

from spurious.core.data import classification
from spurious.lexical import features as lexical
from spurious.lexical import reweight
from tests.conftest import REPO, SHARED, WORKFLOW_CORES, tiny_encoder
from tests.core.test_workflow import (
    _resources_by_rule,
    assert_no_gpu_without_the_profile,
    job_counts,
    snakemake,
)
from tests.rehearse.reordered import write_reordered

QNLI_DEV = SHARED / "data" / "qnli" / "validation" / "0000.parquet"


def test_demo_lexical_dry_run_plans_the_whole_chain(tmp_path):
    out = snakemake(tmp_path, "-n", "--configfile", str(REPO / "configs" / "demo-lexical.yaml")).stdout
    counts = job_counts(out)
    # MiniLM on uniform and q with 2 seeds, the BiLSTM control on both with 1 seed
    assert counts["lexical_train"] == 6 and counts["lexical_predict"] == 6 and counts["lexical_permutation"] == 6
    for rule in ("derive_splits", "lexical_features", "lexical_reweight", "lexical_bigrams", "lexical_report"):
        assert counts[rule] == 1, rule
    assert counts["download"] == 2  # QNLI dev, and SQuAD dev for the split by article and the extra pairs
    assert "train" not in counts and "heuristics" not in counts  # no QA stage in a lexical-only config


def test_paper_lexical_config_dry_runs_with_slurm_gpu_declarations(tmp_path):
    proc = snakemake(
        tmp_path, "-n", "--workflow-profile", str(REPO / "profiles" / "slurm"), "--configfile",
        str(REPO / "configs" / "paper-lexical.yaml"),
    )
    resources = _resources_by_rule(proc.stdout)
    assert resources["lexical_predict"]["gpu"] == "1" and resources["lexical_predict"]["slurm_partition"] == "gpu"
    # one training process per GPU, one GPU each: RoBERTa-large's batch of 16 does not fill a second (spurious plan)
    gpus_by_model: dict[str, set[str]] = {}
    for job in re.split(r"\n(?=(?:local)?rule \w+:)", proc.stdout):
        if job.startswith("rule lexical_train:"):
            model = re.search(r"wildcards: .*model=(\w+)", job).group(1)
            res = re.search(r"resources: (.*)", job).group(1)
            gpus_by_model.setdefault(model, set()).add(re.search(r"\bgpu=(\d+)", res).group(1))
            assert "slurm_partition=gpu" in res, res
    assert gpus_by_model == {"roberta_large": {"1"}, "bilstm": {"1"}}, gpus_by_model
    for rule in ("lexical_features", "lexical_permutation", "lexical_bigrams"):
        assert "gpu" not in resources[rule], f"{rule} must not request a GPU"
    counts = job_counts(proc.stdout)
    # SNLI, QNLI, QQP: RoBERTa-large on uniform and q x 3 seeds + the BiLSTM control on both; MNLI reweighting only
    assert counts["lexical_train"] == 3 * (6 + 2) and counts["lexical_reweight"] == 4 and counts["lexical_bigrams"] == 4
    assert "results/lexical/mnli/reweight/summary.json" in proc.stdout
    assert "results/lexical/mnli/permutation" not in proc.stdout
    assert_no_gpu_without_the_profile(tmp_path, REPO / "configs" / "paper-lexical.yaml", proc.stdout)


def _tiny_config(tmp):
    frame = classification.load_hf_parquet(QNLI_DEV).head(240)
    data = tmp / "qnli_tiny.tsv"
    # as a GLUE TSV with string labels: the loader path a user of the GLUE files takes
    pd.DataFrame(
        {
            "index": frame["id"],
            "question": frame["text_a"],
            "sentence": frame["text_b"],
            "label": [frame.attrs["label_names"][i] for i in frame["label"]],
        }
    ).to_csv(data, sep="\t", index=False)
    training = {"batch_size": 8, "max_steps": 3, "max_length": 64, "learning_rate": 1e-4, "checkpoint_every": 2,
                "device": "cpu"}
    cfg = {
        "run_name": "tiny-lexical",
        "datasets": {
            "qnli": {
                "task": "classification",
                "splits": {
                    "dev": {"format": "glue_tsv", "path": str(data), "label_names": ["entailment", "not_entailment"]}
                },
                "derive": {"from": "dev", "by": "random", "validation_fraction": 0.25, "seed": 0},
            }
        },
        "lexical": {
            "datasets": {"qnli": {"train": "train", "test": "validation", "paper_name": "QNLI"}},
            "top_k": 10,
            "reweight": {"min_count": 5, "max_steps": 200},
            "bigrams": {"n": 20, "seed": 0},
            "models": {
                # the plumbing on a tiny random BERT (tests.conftest.tiny_encoder), not MiniLM
                "tinybert": {"checkpoint": str(tiny_encoder(tmp)), "seeds": [0], "training": training},
                # the paper's no-pretraining control, tiny: CBOW + BiLSTM on the q-weighted training data
                "lstm": {"init": "bilstm", "seeds": [0], "weightings": ["q"], "paper_name": "lstm",
                         "bilstm": {"epochs": 1, "embedding_dim": 8, "hidden_sizes": [8, 8, 8], "device": "cpu"}},
            },
        },
    }
    path = tmp / "tiny-lexical.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


@pytest.fixture(scope="module")
def tiny_lexical_run(tmp_path_factory):
    work = tmp_path_factory.mktemp("tiny-lexical")
    cfg = _tiny_config(work)
    snakemake(work, "--cores", WORKFLOW_CORES, "--configfile", str(cfg))
    return work, cfg


def test_tiny_lexical_run_outputs_agree_with_the_package(tiny_lexical_run):
    work, _ = tiny_lexical_run
    res = work / "results"
    train = classification.read_parquet(res / "data/qnli/derived_s0/train.parquet")
    test = classification.read_parquet(res / "data/qnli/derived_s0/validation.parquet")
    # 240 pairs, a quarter (per label, rounded up) for test
    assert len(train) + len(test) == 240 and train.attrs["label_names"] == ["entailment", "not_entailment"]

    top = pd.read_csv(res / "lexical/qnli/top_features.csv", keep_default_na=False)
    assert top.groupby("label").size().to_dict() == {"entailment": 10, "not_entailment": 10}
    assert not set(top["feature"]) & lexical.english_stop_words()

    summary = json.loads((res / "lexical/qnli/reweight/summary.json").read_text())
    weights = pd.read_parquet(res / "lexical/qnli/reweight/weights.parquet")
    assert weights["id"].tolist() == train["id"].tolist()
    assert weights["q"].sum() == pytest.approx(1.0) and weights["weight"].mean() == pytest.approx(1.0)
    matrix, vocab = lexical.feature_matrix(train["text_a"], train["text_b"], counting="types")
    sel = reweight.select_features(matrix, train["label"].to_numpy(), 2, vocab, min_count=5)
    assert summary["n_features"] == len(sel.columns)
    features = matrix[:, sel.columns]
    assert summary["err_q"] == pytest.approx(
        reweight.err(features, train["label"].to_numpy(), 2, weights["q"].to_numpy())
    )
    assert summary["err_q"] < summary["err_uniform"]
    # the returned q is an iterate of the solve above the effective-size floor, and the summary says which and why
    q = weights["q"].to_numpy()
    assert summary["effective_sample_size"] == pytest.approx(1.0 / np.sum(q**2))
    assert summary["effective_sample_size"] >= summary["min_effective_sample_size"] == pytest.approx(0.1 * len(train))
    assert (1 <= summary["chosen_step"] <= summary["steps"]
            and summary["selection"].startswith(f"step {summary['chosen_step']}"))
    assert summary["stopped"] and summary["final_iterate"]["step"] == summary["steps"]
    objective = pd.read_csv(res / "lexical/qnli/reweight/objective.csv")
    assert objective["step"].tolist() == list(range(summary["steps"] + 1))
    assert objective.loc[summary["chosen_step"], "err"] == pytest.approx(summary["err_q"])

    perm = json.loads((res / "lexical/qnli/permutation/tinybert/q/seed0.json").read_text())
    preds = pd.read_parquet(res / "lexical/qnli/predictions/tinybert/q/seed0.parquet")
    assert preds["id"].tolist() == test["id"].tolist()
    # recompute the test from the outputs with the package: the same sets and the same p
    table = pd.read_parquet(res / "lexical/qnli/zscores.parquet")
    labels = test["label"].to_numpy()
    again = lexical.model_bias_test(table, top, test["text_a"], test["text_b"], labels, preds["correct"].to_numpy())
    assert again["log10_p"] == pytest.approx(perm["log10_p"]) and again["n_usual"] == perm["n_usual"]
    assert perm["n_usual"] + perm["n_unusual"] >= perm["n_in_usual_or_unusual"] > 0

    for name in ("table1", "table2", "table3", "appendix_a1"):
        assert (res / f"report/lexical/{name}.md").read_text().startswith("|")
    t2 = pd.read_csv(res / "report/lexical/table2.csv")
    # the tiny BERT on both weightings, the BiLSTM control on q only
    assert (sorted(zip(t2["model"], t2["weighting"], strict=True))
            == [("lstm", "q"), ("tinybert", "q"), ("tinybert", "uniform")])
    t1 = pd.read_csv(res / "report/lexical/table1.csv")
    assert t1.loc[0, "Err(uniform) (paper)"] == pytest.approx(0.042)  # QNLI's published row beside ours
    assert (res / "report/lexical/figure2.png").stat().st_size > 1000
    training = json.loads((res / "lexical/qnli/models/tinybert/q/seed0/training.json").read_text())
    assert training["weights_sha256"] is not None and training["steps"] == 3
    assert not (res / "_checkpoints/lexical/qnli/tinybert/q/seed0").exists() or not any(
        (res / "_checkpoints/lexical/qnli/tinybert/q/seed0").iterdir()
    )
    assert np.isfinite(perm["log10_p"])


def _pending(work, cfg, forcerun=()) -> dict[str, int]:
    """The jobs `snakemake -n [--forcerun ...] --configfile cfg` plans in ``work``, by rule: Snakemake's own job graph
    and rerun decisions, made in this process (spurious.workflow.plan; the dry run's start-up and imports saved)."""
    from spurious.workflow import plan

    _, jobs = plan.planned_jobs([cfg], None, work, REPO, forcerun=forcerun)
    counts: dict[str, int] = {}
    for job in jobs:
        counts[job.rule] = counts.get(job.rule, 0) + 1
    return counts


# One key per stage of the tiny run, and the jobs it must rerun: its stage and what depends on it, nothing else.
# The run: 3 classifiers (the tiny BERT on uniform and q weights, the BiLSTM on q), each trained, predicted and
# tested.
EVERY_CLASSIFIER = {"lexical_train": 3, "lexical_predict": 3, "lexical_permutation": 3}
REPORT = {"lexical_report": 1, "index": 1}
STAGE_CHANGES = [
    ("datasets.qnli.on_invalid", "drop",  # the download and everything after it
     {"download": 1, "derive_splits": 1, "lexical_features": 1, "lexical_reweight": 1, "lexical_bigrams": 1,
      "lexical_balance": 1, **EVERY_CLASSIFIER, **REPORT}),
    ("datasets.qnli.derive.validation_fraction", 0.3,
     {"derive_splits": 1, "lexical_features": 1, "lexical_reweight": 1, "lexical_bigrams": 1, "lexical_balance": 1,
      **EVERY_CLASSIFIER, **REPORT}),
    ("lexical.top_k", 12, {"lexical_features": 1, "lexical_balance": 1, "lexical_permutation": 3, **REPORT}),
    ("lexical.reweight.max_steps", 150,  # q changes: the q-weighted classifiers, the bigrams' and the balance's q
     {"lexical_reweight": 1, "lexical_bigrams": 1, "lexical_balance": 1, "lexical_train": 2, "lexical_predict": 2,
      "lexical_permutation": 2, **REPORT}),
    ("lexical.bigrams.n", 10, {"lexical_bigrams": 1, **REPORT}),
    ("lexical.models.tinybert.training.learning_rate", 2e-4,
     {"lexical_train": 2, "lexical_predict": 2, "lexical_permutation": 2, **REPORT}),
    ("lexical.err_target", "label_distribution", REPORT),
]


def test_a_reordered_config_reruns_nothing_and_a_change_reruns_exactly_its_stage(tiny_lexical_run):
    """Issue: the same config with its keys reordered (any YAML round trip) reran all jobs, download and training
    included. Now the params compare by content: every mapping reversed, strings quoted, floats in exponent notation
    plan nothing, and one changed key per stage plans that stage and what depends on it."""
    work, cfg = tiny_lexical_run
    assert _pending(work, cfg) == {}
    assert _pending(work, write_reordered([cfg], work / "reordered.yaml")) == {}
    for key, value, expected in STAGE_CHANGES:
        changed = yaml.safe_load(cfg.read_text())
        *parents, leaf = key.split(".")
        section = changed
        for part in parents:
            section = section.setdefault(part, {})
        assert section.get(leaf) != value, key
        section[leaf] = value
        path = work / f"changed-{leaf}.yaml"
        path.write_text(yaml.safe_dump(changed, sort_keys=False))
        assert _pending(work, path) == expected, key


def test_a_damaged_or_deleted_intermediate_is_rebuilt_as_the_message_advises(tiny_lexical_run):
    """Issue: a truncated intermediate predictions parquet ended the permutation job in a raw ArrowInvalid traceback,
    and the advice of the time ("delete it, and the workflow writes it anew") was false: with the file deleted,
    Snakemake had nothing to do, because the job that writes it (lexical_predict) is needed only by jobs whose outputs
    are up to date (the test's lexical_permutation, the report's metrics), and Snakemake does not rebuild an
    intermediate that no job needs (that is how a finished run frees disk). Now the job ends in one line naming the
    command that rebuilds the file, `snakemake --forcerun <path>`, which does, deleted or damaged."""
    work, cfg = tiny_lexical_run
    relative = "results/lexical/qnli/predictions/tinybert/uniform/seed0.parquet"
    predictions = work / relative
    before = pd.read_parquet(predictions)
    good = predictions.read_bytes()

    predictions.unlink()
    assert _pending(work, cfg) == {}  # deleted: nothing needs it
    assert _pending(work, cfg, forcerun=[relative]) == {"lexical_predict": 1, "lexical_permutation": 1, **REPORT}

    predictions.write_bytes(good[: len(good) // 2])  # damaged: newer than the test's output, which is then redone
    proc = snakemake(work, "--cores", WORKFLOW_CORES, "--configfile", str(cfg), check=False)
    assert proc.returncode != 0
    lines = [line for line in proc.stderr.splitlines() if line.startswith("spurious: error: ")]
    assert len(lines) == 1 and lines[0].startswith(f"spurious: error: {relative}: not a readable parquet file ("), lines
    assert lines[0].endswith(f"; rebuild it, and what depends on it, with `snakemake --forcerun {relative}` with the "
                             "run's other options (the same --configfile)")
    log = (work / "results/logs/lexical/permutation_qnli_tinybert_uniform_seed0.log").read_text()
    assert lines[0].removeprefix("spurious: error: ") in log and "Traceback" not in log
    command = re.search(r"`snakemake (--forcerun \S+)`", lines[0]).group(1).split()
    snakemake(work, "--cores", WORKFLOW_CORES, *command, "--configfile", str(cfg))
    pd.testing.assert_frame_equal(pd.read_parquet(predictions), before)  # rebuilt, the same predictions
    assert _pending(work, cfg) == {}
def test_reweight_settings_rerun_it_only_when_they_can_change_q(tiny_lexical_run):
    from spurious.core.config import result_settings

    work, cfg = tiny_lexical_run
    # the device is an execution setting, and instances is how min_count counted before min_count_unit existed:
    # written out, they rerun nothing (the rule compares its result settings only)
    changed = yaml.safe_load(cfg.read_text())
    changed["lexical"]["reweight"].update(device="cpu", min_count_unit="instances")
    path = cfg.with_name("tiny_same_reweight.yaml")
    path.write_text(yaml.safe_dump(changed, sort_keys=False))
    assert job_counts(snakemake(work, "-n", "--configfile", str(path)).stdout) == {}
    # ... while the other reading of min_count is a result setting
    settings = {"min_count": 5, "max_steps": 200, "min_ess_fraction": 0.1, "device": "cpu"}
    assert result_settings({**settings, "min_count_unit": "instances"}) == result_settings(settings)
    assert result_settings({**settings, "min_count_unit": "occurrences"})["min_count_unit"] == "occurrences"


def test_cli_lexical_test_matches_the_workflow(tiny_lexical_run, tmp_path):
    from spurious import cli

    work, _ = tiny_lexical_run
    res = work / "results"
    preds = pd.read_parquet(res / "lexical/qnli/predictions/tinybert/uniform/seed0.parquet")
    names = ["entailment", "not_entailment"]
    # a predictions file made elsewhere: label names, CSV
    pd.DataFrame({"id": preds["id"], "prediction": [names[i] for i in preds["prediction"]]}).to_csv(
        tmp_path / "p.csv", index=False
    )
    out = tmp_path / "out.json"
    code = cli.main([
        "lexical-test", str(res / "data/qnli/derived_s0/train.parquet"),
        str(res / "data/qnli/derived_s0/validation.parquet"),
        str(tmp_path / "p.csv"), "--top-k", "10", "--json", str(out),
    ])
    assert code == 0
    ours = json.loads(out.read_text())
    workflow = json.loads((res / "lexical/qnli/permutation/tinybert/uniform/seed0.json").read_text())
    assert ours["log10_p"] == pytest.approx(workflow["log10_p"])
    assert ours["n_usual"] == workflow["n_usual"] and ours["correct_usual"] == workflow["correct_usual"]
    # predictions missing a test record: a clear error, exit status 2
    pd.DataFrame({"id": preds["id"][1:], "prediction": preds["prediction"][1:]}).to_csv(
        tmp_path / "short.csv", index=False
    )
    code = cli.main([
        "lexical-test", str(res / "data/qnli/derived_s0/train.parquet"),
        str(res / "data/qnli/derived_s0/validation.parquet"),
        str(tmp_path / "short.csv"),
    ])
    assert code == 2


def test_tiny_lexical_run_trains_and_tests_the_bilstm_control(tiny_lexical_run):
    work, _ = tiny_lexical_run
    res = work / "results"
    training = json.loads((res / "lexical/qnli/models/lstm/q/seed0/training.json").read_text())
    assert training["architecture"] == "bilstm_cbow" and training["cbow_corpus"] == "q-weighted resample"
    assert training["settings"]["hidden_sizes"] == [8, 8, 8] and training["weighting"] == "q"
    preds = pd.read_parquet(res / "lexical/qnli/predictions/lstm/q/seed0.parquet")
    test = classification.read_parquet(res / "data/qnli/derived_s0/validation.parquet")
    assert preds["id"].tolist() == test["id"].astype(str).tolist()
    perm = json.loads((res / "lexical/qnli/permutation/lstm/q/seed0.json").read_text())
    assert np.isfinite(perm["log10_p"])
    t2 = pd.read_csv(res / "report/lexical/table2.csv")
    row = t2[t2["model"] == "lstm"].iloc[0]
    assert row["kind"] == "from scratch" and row["weighting"] == "q"


def test_audit_of_the_workflows_classifier_reproduces_its_numbers(tiny_lexical_run, tmp_path):
    """`spurious audit` on the tiny run's tiny BERT with the run's train and test splits: the same accuracy and the same
    permutation test as the workflow's files (the workflow's top_k is 10 here: the audit's is passed through)."""
    from spurious.audit.classification import audit_classification

    work, _ = tiny_lexical_run
    res = work / "results"
    test = classification.read_parquet(res / "data/qnli/derived_s0/validation.parquet")
    train = classification.read_parquet(res / "data/qnli/derived_s0/train.parquet")
    for model, weighting in (("tinybert", "uniform"), ("lstm", "q")):
        folder = res / f"lexical/qnli/models/{model}/{weighting}/seed0/model"
        result = audit_classification(folder, test, train=train, top_k=10, device="cpu")
        workflow = json.loads((res / f"lexical/qnli/permutation/{model}/{weighting}/seed0.json").read_text())
        preds = pd.read_parquet(res / f"lexical/qnli/predictions/{model}/{weighting}/seed0.parquet")
        assert result["accuracy"] == pytest.approx(preds["correct"].mean())
        perm = result["permutation_test"]
        assert perm["log10_p"] == pytest.approx(workflow["log10_p"]), model
        assert (perm["n_usual"], perm["correct_usual"]) == (workflow["n_usual"], workflow["correct_usual"])
        assert {r["feature"] for r in result["insertion"]} >= {"punctuation:exclamation", "prefix:my_thought"}
        pred = result["predictability"]
        if model == "lstm":
            assert pred == {"computed": False, "reason": "a BiLSTM control has no pooled transformer representation"}
        else:  # 64 probes on 10 % of the training pairs each: every pair is held out many times
            assert pred["computed"] and pred["n_scored"] == len(train) and sum(pred["histogram"]) == len(train)
            assert pred["t"] == round(0.1 * len(train)) and 0.0 <= pred["share_predictable"] <= 1.0
