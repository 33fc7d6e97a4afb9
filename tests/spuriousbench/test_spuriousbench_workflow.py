"""The SpuriousBench track as a user runs it: dry-runs of the demo and paper configs (GPU resources from the SLURM
profile), and a tiny end-to-end run on the mirror's SST-2 through every rule, checked against the package."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import yaml

from spurious.spuriousbench import construction as sb
from tests.conftest import REPO, SHARED, WORKFLOW_CORES, tiny_encoder
from tests.core.test_workflow import (
    _resources_by_rule,
    assert_no_gpu_without_the_profile,
    job_counts,
    snakemake,
)

SST2 = SHARED / "data" / "sst2"


def test_demo_spurious_dry_run_plans_the_whole_chain(tmp_path):
    out = snakemake(tmp_path, "-n", "--configfile", str(REPO / "configs" / "demo-spurious.yaml")).stdout
    counts = job_counts(out)
    # 24 features built; 5 of them x (pretrained + random) x 3 seeds trained
    assert counts["spurious_build"] == 24 and counts["spurious_train"] == 30 and counts["spurious_predict"] == 30
    assert counts["spurious_pools"] == 1 and counts["spurious_report"] == 1 and counts["download"] == 2
    assert "results/spurious/sst2/data/syntax/s_vp/train.parquet" in out
    assert "train" not in counts and "lexical_train" not in counts


def test_paper_spurious_config_dry_runs_with_slurm_gpu_declarations(tmp_path):
    proc = snakemake(
        tmp_path, "-n", "--workflow-profile", str(REPO / "profiles" / "slurm"), "--configfile",
        str(REPO / "configs" / "paper-spurious.yaml"),
    )
    resources = _resources_by_rule(proc.stdout)
    for rule in ("spurious_train", "spurious_predict", "spurious_icl"):
        assert resources[rule]["gpu"] == "1" and resources[rule]["slurm_partition"] == "gpu", resources[rule]
    for rule in ("spurious_pools", "spurious_build"):
        assert "gpu" not in resources[rule], f"{rule} must not request a GPU"
    counts = job_counts(proc.stdout)
    # SST-2: 18 buildable features, MNLI: all 25 of Table 1's subset; BERT-base x 4 methods + BERT-large + random, 3
    # seeds each; App. D: the 18 SST-2 features again with the negative target, BERT-base fine-tuned (3 seeds)
    n_features = 18 + len(sb.MNLI_FEATURES)
    assert counts["spurious_build"] == n_features + 18
    assert counts["spurious_train"] == n_features * (4 * 3 + 3 + 3) + 18 * 3
    assert "results/spurious/mnli/models/overlap/lexical_overlap/bert_base/prompt/seed2/model" in proc.stdout
    assert "results/spurious/sst2/models/punctuation/exclamation/bert_base/bitfit/seed0/model" in proc.stdout
    assert ("results/spurious/sst2_negative/models/punctuation/exclamation/bert_base_negative/finetune/seed0/model"
            in proc.stdout)
    assert "sst2_negative/models/punctuation/exclamation/bert_large" not in proc.stdout
    # §5 in-context learning: 3 open-model rows on both subsets, 2 more (Figs. 4-5) on SST-2, 3 draws each
    assert counts["spurious_icl"] == 18 * 5 * 3 + len(sb.MNLI_FEATURES) * 3 * 3
    assert ("results/spurious/mnli/predictions/overlap/lexical_overlap/pythia_12b_words/icl/seed2.metrics.json"
            in proc.stdout)
    assert_no_gpu_without_the_profile(tmp_path, REPO / "configs" / "paper-spurious.yaml", proc.stdout)


TRAINING = {"batch_size": 16, "max_steps": 4, "max_length": 48, "learning_rate": 1e-4, "checkpoint_every": 2,
            "eval_every": 2, "device": "cpu"}


def _tiny_causal_lm(tmp):
    """A random 2-layer GPT-2 over the MiniLM vocabulary, saved with its tokenizer (nothing downloaded)."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    from spurious.core.models import load_tokenizer

    tok = load_tokenizer("embedded:all-MiniLM-L6-v2")
    torch.manual_seed(0)
    path = tmp / "tiny_lm"
    GPT2LMHeadModel(
        GPT2Config(vocab_size=tok.vocab_size, n_positions=256, n_embd=32, n_layer=2, n_head=2)
    ).save_pretrained(path)
    tok.save_pretrained(path)
    return path


def _tiny_config(tmp):
    encoder = str(tiny_encoder(tmp))
    glue = {"format": "glue_tsv", "label_names": ["negative", "positive"]}
    cfg = {
        "run_name": "tiny-spurious",
        "datasets": {
            "sst2": {
                "task": "classification",
                "splits": {
                    "train": {**glue, "path": str(SST2 / "train.tsv.gz")},
                    "validation": {**glue, "path": str(SST2 / "dev.tsv")},
                },
            }
        },
        "spuriousbench": {
            "datasets": {
                "sst2": {
                    "builder": "sst2", "train_size": 100, "dev_size": 50, "test_size": 60,
                    "features": ["punctuation:exclamation", "determiner:a", "prefix:my_thought"],
                    "train_features": ["punctuation:exclamation", "determiner:a"],
                    "models": ["tinybert", "tiny_lm"],
                },
                # App. D: the same source with the negative label as the target, one feature; BitFit, and the
                # randomly initialised control here (one feature is enough for it: the same rules as on sst2)
                "sst2_negative": {
                    "source": "sst2", "builder": "sst2", "train_size": 100, "dev_size": 50, "test_size": 60,
                    "target_label": 0, "features": ["punctuation:exclamation"], "models": ["bitfit_only", "random"],
                },
            },
            "models": {
                # the plumbing on a tiny random BERT (tests.conftest.tiny_encoder), not MiniLM
                "tinybert": {"checkpoint": encoder, "seeds": [0], "methods": ["finetune", "balanced"],
                             "paper_name": "tiny BERT", "training": TRAINING},
                "random": {"checkpoint": encoder, "init": "scratch", "seeds": [0],
                           "training": TRAINING},
                "bitfit_only": {"checkpoint": encoder, "seeds": [0], "methods": ["bitfit"],
                                "bitfit_learning_rate": 5e-3, "training": TRAINING},
                # §5: in-context learning with a tiny random causal LM, 4 demonstrations
                "tiny_lm": {"checkpoint": str(_tiny_causal_lm(tmp)), "seeds": [0], "methods": ["icl"],
                            "icl": {"shots": 4, "batch_size": 16, "device": "cpu"}},
            },
        },
    }
    path = tmp / "tiny-spurious.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("spurious")
    config = _tiny_config(tmp)
    proc = snakemake(tmp, "--cores", WORKFLOW_CORES, "--configfile", str(config))
    plan = job_counts(proc.stdout + proc.stderr)  # the run's own job stats
    assert plan["spurious_train"] == 2 * 2 + 2 and plan["spurious_build"] == 3 + 1 and plan["spurious_icl"] == 2
    return tmp / "results"


def test_tiny_run_builds_the_configured_prevalence_and_strength_exactly(tiny_run):
    for feature in ("punctuation/exclamation", "determiner/a"):
        data = tiny_run / "spurious/sst2/data" / feature
        stats = json.loads((data / "stats.json").read_text())
        for split, size in (("train", 100), ("dev", 50)):
            frame = sb.read_split(data / f"{split}.parquet")
            f, y = frame["has_feature"].to_numpy(), frame["label"].to_numpy()
            # 20 % of 100 = 20 rows with the feature, 18 positive; of 50: 10, 9 positive; labels balanced
            assert len(frame) == size and f.sum() == size // 5 and (f & (y == 1)).sum() == round(0.9 * size / 5)
            assert (y == 1).sum() == size // 2
            assert stats[split]["prevalence"] == 0.2 and stats[split]["strength"] == 0.9
            # the predicate agrees with the stored column on the (possibly inserted) text
            assert (sb.has_feature(frame, sb.feature_from_path(feature)) == f).all()
        test = sb.read_split(data / "test.parquet")
        counts = test["group"].value_counts()
        assert len(test) == 60 and counts["supporting"] == counts["counter"]  # feature independent of the label
        assert (test["label"] == 1).sum() == 30
    pools = json.loads((tiny_run / "spurious/sst2/pools/pools.json").read_text())
    assert pools["train"]["size"] + pools["dev"]["size"] > 6000  # whole sentences of GLUE train


def test_tiny_run_gaps_agree_with_the_predictions_and_the_report(tiny_run):
    gaps = pd.read_csv(tiny_run / "report/spurious/gaps.csv")
    # 2 features x (tinybert finetune, tinybert balanced, tiny_lm icl); on sst2_negative: BitFit and random finetune
    assert len(gaps) == 2 * 3 + 2
    runs = ([("sst2", feature, run) for feature in ("punctuation/exclamation", "determiner/a")
             for run in ("tinybert/finetune", "tinybert/balanced")]
            + [("sst2_negative", "punctuation/exclamation", "random/finetune")])  # fmt: skip
    for dataset, feature, run in runs:
        base = tiny_run / "spurious" / dataset / "predictions" / feature / run
        pred = pd.read_parquet(f"{base}/seed0.parquet")
        metrics = json.loads((base / "seed0.metrics.json").read_text())
        sup = pred.loc[pred["group"] == "supporting", "correct"].mean()
        cnt = pred.loc[pred["group"] == "counter", "correct"].mean()
        assert (metrics["gap"] == pytest.approx(sup - cnt)
                and metrics["n_supporting"] == (pred["group"] == "supporting").sum())
        row = gaps[(gaps["dataset"] == dataset) & (gaps["feature"] == sb.feature_from_path(feature))
                   & (gaps["model"] == run.split("/")[0]) & (gaps["method"] == run.split("/")[1])]
        assert row["gap"].item() == pytest.approx(100 * (sup - cnt), abs=0.05)
        assert 0.0 <= metrics["dev_accuracy"] <= 1.0 and metrics["n_dev"] == 50
    assert metrics["model_kind"] == "random"
    sizes = pd.read_csv(tiny_run / "report/spurious/sizes.csv")
    sizes = sizes[sizes["dataset"] == "sst2"]
    # every built feature, trained or not: App. E sizes, in Table 1's order
    assert sizes["feature"].tolist() == ["punctuation:exclamation", "prefix:my_thought", "determiner:a"]
    assert sizes["train"].tolist() == [100] * 3 and (sizes["train strength"] == 90.0).all()
    for name in ("figure1.png", "figure1.svg", "figure2.png", "figure2.svg", "figure3.png", "figure3.svg", "sizes.md",
                 "categories.md"):
        assert (tiny_run / "report/spurious" / name).stat().st_size > 0


def test_tiny_run_balanced_training_and_best_checkpoint(tiny_run):
    model_dir = tiny_run / "spurious/sst2/models/punctuation/exclamation/tinybert"
    balanced = json.loads((model_dir / "balanced/seed0/training.json").read_text())
    plain = json.loads((model_dir / "finetune/seed0/training.json").read_text())
    # 18 supporting + 2 counter -> 10 + 10; the 80 rows without the feature stay
    assert plain["n_train"] == 100 and balanced["n_train"] == 100
    assert [e["step"] for e in plain["eval_history"]] == [2, 4]
    accuracies = [e["accuracy"] for e in plain["eval_history"]]
    assert plain["best_step"] == plain["eval_history"][int(np.argmax(accuracies))]["step"]
    assert not (tiny_run / "_checkpoints/spurious/sst2/punctuation/exclamation/tinybert").exists() or not any(
        (tiny_run / "_checkpoints/spurious/sst2/punctuation/exclamation/tinybert").rglob("state.json")
    )


def test_tiny_run_negative_target_and_bitfit(tiny_run):
    """App. D: a suite built from the same source with y* = 0, so the supporting test rows are the negative ones;
    BitFit trains at its own learning rate with the bias terms and the head only."""
    data = tiny_run / "spurious/sst2_negative/data/punctuation/exclamation"
    stats = json.loads((data / "stats.json").read_text())
    assert stats["target_label"] == 0 and stats["train"]["strength"] == 0.9
    train = sb.read_split(data / "train.parquet")
    with_feature = train[train["has_feature"]]
    assert len(with_feature) == 20 and (with_feature["label"] == 0).sum() == 18  # 90 % negative, not positive
    test = sb.read_split(data / "test.parquet")
    assert (test.loc[test["group"] == "supporting", "label"] == 0).all()
    summary = json.loads(
        (tiny_run / "spurious/sst2_negative/models/punctuation/exclamation/bitfit_only/bitfit/seed0/"
                    "training.json").read_text()
    )
    assert summary["trainable"] == "bitfit" and summary["method"] == "bitfit"
    assert summary["settings"]["learning_rate"] == 5e-3 and summary["n_trainable_parameters"] < 300_000


def test_tiny_run_in_context_learning(tiny_run):
    """§5: demonstrations at 50 % prevalence and 100 % strength from the feature's training split, the test set
    predicted by the causal LM, the gap as for the trained models; predictions match a direct call."""
    from spurious.spuriousbench import icl

    data = tiny_run / "spurious/sst2/data/punctuation/exclamation"
    base = tiny_run / "spurious/sst2/predictions/punctuation/exclamation/tiny_lm/icl"
    metrics = json.loads((base / "seed0.metrics.json").read_text())
    assert metrics["method"] == "icl" and metrics["icl"]["shots"] == 4
    assert metrics["icl"]["realised_prevalence"] == 0.5 and metrics["icl"]["realised_strength"] == 1.0
    train = sb.read_split(data / "train.parquet")
    demos = train.set_index("id").loc[metrics["icl"]["demonstration_ids"]]
    assert (demos.loc[demos["has_feature"], "label"] == 1).all() and (demos["label"] == 1).sum() == 2
    # the report labels the in-context rows with the realised prevalence and strength the metrics record
    gaps = pd.read_csv(tiny_run / "report/spurious/gaps.csv")
    labels = gaps.loc[gaps["method"] == "icl", "label"]
    assert len(labels) == 2 and labels.str.endswith(" [ICL, 4 shots: prevalence 50 % / strength 100 %]").all()
    pred = pd.read_parquet(base / "seed0.parquet")
    sup = pred.loc[pred["group"] == "supporting", "correct"].mean()
    cnt = pred.loc[pred["group"] == "counter", "correct"].mean()
    assert metrics["gap"] == pytest.approx(sup - cnt)
    model, tok = icl.load_causal_lm(tiny_run.parent / "tiny_lm")
    test = sb.read_split(data / "test.parquet")
    again, _ = icl.predict_icl(model, tok, demos.reset_index(), test, icl.PAPER_TEMPLATES["sst2"]["digits"],
                               device="cpu")
    assert again["prediction"].tolist() == pred["prediction"].tolist()
