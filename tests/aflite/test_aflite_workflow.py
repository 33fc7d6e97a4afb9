"""AFLite as a workflow: the demo and paper configs' plans (GPU resources from the SLURM profile), a tiny synthetic
run through Table 7, and a tiny text run on real QNLI records through every text rule, checked against the package."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
import yaml

from spurious.aflite import text as aflite_text
from spurious.core.data import classification
from spurious.core.train import classifier
from tests.aflite.test_aflite_ood import write_hans
from tests.conftest import REPO, SHARED, WORKFLOW_CORES, tiny_encoder
from tests.core.test_workflow import (
    _resources_by_rule,
    assert_no_gpu_without_the_profile,
    job_counts,
    snakemake,
)

QNLI_DEV = SHARED / "data" / "qnli" / "validation" / "0000.parquet"


def test_demo_aflite_dry_run_plans_every_separation_and_seed(tmp_path):
    out = snakemake(tmp_path, "-n", "--configfile", str(REPO / "configs" / "demo-aflite.yaml")).stdout
    counts = job_counts(out)
    assert counts["aflite_synthetic"] == 4 * 10 and counts["aflite_synthetic_report"] == 1
    assert "results/aflite/synthetic/sep0.8/seed9.json" in out
    # SST-2 and QNLI: a warm-up, embeddings and a filtering each; MiniLM on D, D_rand, D(AFLite), plus QNLI's
    # answer-only baseline on the three
    for rule in ("aflite_warmup_split", "aflite_warmup", "aflite_embed", "aflite_filter", "aflite_training_sets"):
        assert counts[rule] == 2, rule
    assert counts["aflite_train_classifier"] == 3 + 6 and counts["aflite_predict"] == 9
    assert "results/aflite/text/qnli/models/minilm/aflite/partial/seed0/model" in out
    assert "results/aflite/text/sst2/models/minilm/aflite/partial" not in out


def test_paper_aflite_config_dry_runs_with_slurm_gpu_declarations(tmp_path):
    proc = snakemake(
        tmp_path, "-n", "--workflow-profile", str(REPO / "profiles" / "slurm"), "--configfile",
        str(REPO / "configs" / "paper-aflite.yaml"),
    )
    resources = _resources_by_rule(proc.stdout)
    for rule in ("aflite_warmup", "aflite_embed", "aflite_filter", "aflite_train_classifier", "aflite_predict",
                 "aflite_ood_finetune", "aflite_ood_predict"):
        assert resources[rule]["gpu"] == "1" and resources[rule]["slurm_partition"] == "gpu", resources[rule]
    for rule in ("aflite_synthetic", "aflite_training_sets"):
        assert "gpu" not in resources[rule], f"{rule} must not request a GPU"
    assert "gpu" not in resources["aflite_variant_training_sets"]
    counts = job_counts(proc.stdout)
    # SNLI, MultiNLI, QNLI x RoBERTa-large and BERT-large x D, D_rand, D(AFLite) x full and partial inputs; SNLI's
    # n = 182K set (one more filtering) x D_182k and its D(AFLite) x the 2 models, full input
    assert counts["aflite_filter"] == 3 + 1 and counts["aflite_variant_training_sets"] == 1
    assert counts["aflite_train_classifier"] == 3 * 2 * 3 * 2 + 2 * 2
    assert "results/aflite/text/mnli/filter/iterations.csv" in proc.stdout
    # Tables 1-2: the 6 full-input SNLI models (2 models x D and the n = 182K set's D_182k and D(AFLite)) on HANS,
    # the Diagnostics, the 6 stress-test files and, after fine-tuning on each round's train split, the 3 ANLI tests
    assert counts["aflite_ood_finetune"] == 3 * 6 and counts["aflite_ood_predict"] == (1 + 1 + 6 + 3) * 6
    assert counts["aflite_ood_report"] == 1
    assert "results/aflite/ood/anli_r2/finetuned/roberta_large/aflite_n182k/seed0/model" in proc.stdout
    assert_no_gpu_without_the_profile(tmp_path, REPO / "configs" / "paper-aflite.yaml", proc.stdout)


def _planned_jobs(output: str) -> list[dict[str, str]]:
    """A dry run's jobs: rule, input and output (comma-joined, as Snakemake prints them), de-duplicated."""
    jobs, seen = [], set()
    for block in output.split("\nrule ")[1:]:
        lines = block.splitlines()
        job = {"rule": lines[0].rstrip(":")}
        for line in lines[1:]:
            key, _, value = line.strip().partition(": ")
            if key in ("input", "output") and key not in job:
                job[key] = value
        if "output" in job and job["output"] not in seen:  # localrule all has none
            seen.add(job["output"])
            jobs.append(job)
    return jobs


def test_paper_aflite_ood_models_are_trained_on_snli_filtered_to_182k(tmp_path):
    """App. A.5: Tables 1-2's models train on SNLI filtered to n = 182K, Tables 3-4's on the tau-stopped set; an
    overlay's filters.n182k.n (the rehearsal's) changes n and nothing in the job graph."""
    paper = yaml.safe_load((REPO / "configs" / "paper-aflite.yaml").read_text())
    snli = paper["aflite"]["text"]["datasets"]["snli"]
    assert snli["filters"] == {"n182k": {"n": 182000}} and "n" not in snli["filter"]  # Table 8: tau alone
    ood = paper["aflite"]["text"]["ood"]
    assert {name: (spec["models_from"], spec.get("models_filter")) for name, spec in ood.items()} == {
        name: ("snli", "n182k") for name in ("hans", "nli_diagnostics", "stress", "anli_r1", "anli_r2", "anli_r3")
    }
    plan = snakemake(tmp_path, "-n", "--configfile", str(REPO / "configs" / "paper-aflite.yaml")).stdout
    jobs = _planned_jobs(plan)
    by_output = {job["output"].split(", ")[0]: job for job in jobs}
    ood_jobs = [job for job in jobs if job["rule"] in ("aflite_ood_finetune", "aflite_ood_predict")]
    assert len(ood_jobs) == 18 + 66
    trained_on = set()
    for job in ood_jobs:
        model = next(f for f in job["input"].split(", ") if f.endswith("/model"))
        if "/finetuned/" in model:  # ANLI: the fine-tuned model, from an SNLI model
            model = next(f for f in by_output[model]["input"].split(", ") if f.endswith("/model"))
        assert model.startswith("results/aflite/text/snli/models/"), model
        trained_on.add(model.split("/")[6])
    assert trained_on == {"full", "random_n182k", "aflite_n182k"}  # never the tau-stopped random / aflite
    # the chain down to the filter: models <- train_<set>_n182k <- filter_n182k (the pool and its representations
    # only, the warm-up and embeddings shared with Tables 3-4)
    for kind in ("random", "aflite"):
        train = by_output[f"results/aflite/text/snli/models/roberta_large/{kind}_n182k/full/seed0/model"]
        assert train["input"] == (f"results/aflite/text/snli/data/train_{kind}_n182k.parquet, "
                                  "results/sources/models/roberta-large.json")  # and the checkpoint's fetch record
    sets = by_output["results/aflite/text/snli/data/train_random_n182k.parquet"]
    assert sets["rule"] == "aflite_variant_training_sets"
    assert sets["input"].split(", ")[1] == "results/aflite/text/snli/filter_n182k/instances.parquet"
    sized = by_output["results/aflite/text/snli/filter_n182k/instances.parquet"]
    assert sized["input"] == "results/aflite/text/snli/data/pool.parquet, results/aflite/text/snli/embeddings/pool.npy"
    # Tables 3-4 keep the tau-stopped filter: its models are what aflite_predict scores
    predicted = {job["input"].split(", ")[0].split("/")[6] for job in jobs if job["rule"] == "aflite_predict"}
    assert predicted == {"full", "random", "aflite"}
    assert by_output["results/aflite/text/snli/filter/instances.parquet"]["rule"] == "aflite_filter"
    # the rehearsal's overlay: a small n (with t below it) plans the same jobs
    overlay = tmp_path / "overlay.yaml"
    overlay.write_text(yaml.safe_dump(
        {"aflite": {"text": {"datasets": {"snli": {"filter": {"t": 40, "k": 10}, "filters": {"n182k": {"n": 60}}}}}}}
    ))
    rehearsal = snakemake(
        tmp_path, "-n", "--configfile", str(REPO / "configs" / "paper-aflite.yaml"), str(overlay)
    ).stdout
    assert job_counts(rehearsal) == job_counts(plan)
    assert sorted(j["output"] for j in _planned_jobs(rehearsal)) == sorted(j["output"] for j in jobs)
    overlay.write_text(yaml.safe_dump({"aflite": {"text": {"datasets": {"snli": {"filters": {"n182k": {"n": 60}}}}}}}))
    bad = snakemake(
        tmp_path, "-n", "--configfile", str(REPO / "configs" / "paper-aflite.yaml"), str(overlay), check=False
    )
    assert bad.returncode != 0 and "filters.n182k.n': Algorithm 1 needs t < n" in bad.stdout + bad.stderr


def test_tiny_synthetic_run_writes_table7_and_figure2(tmp_path):
    cfg = {"run_name": "tiny-aflite",
           "aflite": {"synthetic": {"separations": [0.4], "seeds": [0, 1], "n_per_class": 200}}}
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(cfg))
    snakemake(tmp_path, "--cores", WORKFLOW_CORES, "--configfile", str(path))
    run = json.loads((tmp_path / "results/aflite/synthetic/sep0.4/seed0.json").read_text())
    assert run["n"] == 400 and run["settings"]["m"] == 128 and run["settings"]["k"] == 10
    assert run["biased_kept"] < run["biased_total"]
    table = pd.read_csv(tmp_path / "results/report/aflite/table7.csv")
    assert list(table["model"]) == ["SVM-RBF", "Logistic Reg."] and (table["seeds"] == 2).all()
    assert table.loc[0, "D (paper)"] == 83.8
    assert (tmp_path / "results/report/aflite/figure2.svg").stat().st_size > 1000


def _tiny_text_config(tmp):
    encoder = str(tiny_encoder(tmp))
    data = tmp / "qnli_tiny.parquet"
    pq.write_table(pq.read_table(QNLI_DEV).slice(0, 360), data)  # the hub export's layout and label metadata
    training = {"batch_size": 8, "max_steps": 3, "max_length": 48, "learning_rate": 1e-4, "checkpoint_every": 2,
                "device": "cpu"}
    hans = write_hans(tmp / "heuristics_evaluation_set.txt")
    anli = {}
    for split, n in (("train", 24), ("test", 9)):
        rows = [{"uid": f"{split}{i}", "premise": f"The {i} dogs ran home.", "hypothesis": f"Dogs ran {i} times.",
                 "label": "enc"[i % 3], "reason": ""} for i in range(n)]
        anli[split] = tmp / f"anli_{split}.jsonl"
        anli[split].write_text("".join(json.dumps(r) + "\n" for r in rows))
    # ANLI collapsed to QNLI's two labels, so the tiny QNLI models can be fine-tuned on it (the paper's SNLI models
    # keep its three)
    anli_source = {"format": "jsonl", "id_column": "uid", "label_names": ["entailment", "not_entailment"],
                   "label_aliases": {"e": "entailment", "n": "not_entailment", "c": "not_entailment"}}
    cfg = {
        "run_name": "tiny-aflite-text",
        "datasets": {
            "qnli": {
                "task": "classification",
                "splits": {"dev": {"format": "hf_parquet", "path": str(data)}},
                "derive": {"from": "dev", "by": "random", "validation_fraction": 0.25, "seed": 0},
            },
            "hans": {
                "task": "classification",
                "splits": {"validation": {"format": "glue_tsv", "path": str(hans), "group_column": "heuristic",
                                          "label_names": ["entailment", "non-entailment"]}},
            },
            "anli": {
                "task": "classification",
                "splits": {split: dict(anli_source, path=str(path)) for split, path in anli.items()},
            },
        },
        "aflite": {
            "synthetic": None,
            "text": {
                "datasets": {
                    "qnli": {"train": "train", "dev": "validation", "partial_input": "text_b", "paper_name": "QNLI",
                             "filter": {"m": 8, "t": 60, "k": 30, "tau": 0.6},
                             # the pool filtered again to a target size (App. A.5's OOD setting); tau 0 lets every
                             # scored instance go, so n decides
                             "filters": {"sized": {"n": 150, "tau": 0.0}}},
                },
                # the plumbing on a tiny random BERT (tests.conftest.tiny_encoder), not MiniLM
                "representation": {"checkpoint": encoder, "max_length": 48, "device": "cpu",
                                   "warmup": {"fraction": 0.1, "training": training}},
                "models": {"tinybert": {"checkpoint": encoder, "paper_name": "RoBERTa",
                                        "train_sets": ["full", "aflite"], "training": training}},
                "ood": {
                    "hans": {"dataset": "hans", "splits": {"validation": None}, "models_from": "qnli",
                             "models_filter": "sized", "prediction_map": {"not_entailment": "non-entailment"},
                             "only_labels": ["non-entailment"],
                             "groups": {"lexical_overlap": "Lex.", "subsequence": "Subseq.", "constituent": "Constit."},
                             "paper_name": "HANS"},
                    "anli_r1": {"dataset": "anli", "splits": {"test": "Rd1"}, "models_from": "qnli",
                                "paper_name": "Adversarial-NLI",
                                "finetune": {"split": "train", "training": {"max_steps": 2}}},
                },
            },
        },
    }
    path = tmp / "tiny-aflite-text.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


@pytest.fixture(scope="module")
def tiny_text_run(tmp_path_factory):
    work = tmp_path_factory.mktemp("tiny-aflite-text")
    snakemake(work, "--cores", WORKFLOW_CORES, "--configfile", str(_tiny_text_config(work)))
    return work


def test_tiny_text_run_outputs_agree_with_the_package(tiny_text_run):
    res = tiny_text_run / "results"
    train = classification.read_parquet(res / "data/qnli/derived_s0/train.parquet")
    dev = classification.read_parquet(res / "data/qnli/derived_s0/validation.parquet")
    pool = classification.read_parquet(res / "aflite/text/qnli/data/pool.parquet")
    warmup = classification.read_parquet(res / "aflite/text/qnli/data/warmup.parquet")
    # the warm-up fraction is discarded: D is the rest of train, and nothing downstream sees a warm-up example
    assert len(pool) + len(warmup) == len(train) == 270 and set(pool["id"]).isdisjoint(warmup["id"])
    hidden = json.loads((tiny_text_run / "tiny_encoder" / "config.json").read_text())["hidden_size"]  # [CLS]
    assert np.load(res / "aflite/text/qnli/embeddings/pool.npy").shape == (len(pool), hidden)
    assert np.load(res / "aflite/text/qnli/embeddings/dev.npy").shape == (len(dev), hidden)

    instances = pd.read_parquet(res / "aflite/text/qnli/filter/instances.parquet")
    iterations = pd.read_csv(res / "aflite/text/qnli/filter/iterations.csv")
    scores = np.load(res / "aflite/text/qnli/filter/scores.npy")
    assert len(instances) == len(pool) + len(dev) and scores.shape == (len(iterations), len(instances))
    assert iterations["removed"].sum() == (instances["removed_at"] >= 0).sum()
    assert (iterations["size_before"] - iterations["removed"] == iterations["size_after"]).all()
    # every removed instance reached tau in the iteration that removed it; p̃ is NaN once an instance is gone
    for it in iterations["iteration"]:
        gone = instances.index[instances["removed_at"] == it]
        assert (scores[it, gone] >= 0.6).all()
        if it + 1 < len(iterations):
            assert np.isnan(scores[it + 1, gone]).all()
    # the same filtering again with the package from the cached representations
    again, _ = aflite_text.filter_pool_and_dev(
        np.load(res / "aflite/text/qnli/embeddings/pool.npy"), pool["label"].to_numpy(),
        np.load(res / "aflite/text/qnli/embeddings/dev.npy"), dev["label"].to_numpy(),
        settings={"m": 8, "t": 60, "k": 30, "tau": 0.6, "seed": 0, "n": None}, device="cpu", log_fn=lambda _: None,
    )
    assert again["removed_at"].tolist() == instances["removed_at"].tolist()
    # filters.sized: the same pool representations filtered again, pool alone, to exactly n = 150
    sized = pd.read_parquet(res / "aflite/text/qnli/filter_sized/instances.parquet")
    summary = json.loads((res / "aflite/text/qnli/filter_sized/summary.json").read_text())
    assert (sized["part"] == "pool").all() and len(sized) == len(pool)
    assert summary["n_pool_kept"] == 150 and summary["n_dev"] == 0 and summary["settings"]["n"] == 150
    assert summary["settings"]["t"] == 60 and summary["settings"]["tau"] == 0.0  # the dataset's filter, keys over it
    package, _ = aflite_text.filter_pool_and_dev(
        np.load(res / "aflite/text/qnli/embeddings/pool.npy"), pool["label"].to_numpy(), np.zeros((0, hidden)),
        np.zeros(0), settings=summary["settings"], device="cpu", log_fn=lambda _: None,
    )
    assert package["removed_at"].tolist() == sized["removed_at"].tolist()
    for kind in ("aflite", "random"):
        frame = classification.read_parquet(res / f"aflite/text/qnli/data/train_{kind}_sized.parquet")
        assert len(frame) == 150 and set(frame["id"]) <= set(pool["id"])
    assert not (res / "aflite/text/qnli/data/train_full_sized.parquet").exists()  # D is the dataset's own

    kept = classification.read_parquet(res / "aflite/text/qnli/data/train_aflite.parquet")
    dev_kept = classification.read_parquet(res / "aflite/text/qnli/data/dev_filtered.parquet")
    assert len(kept) == ((instances["part"] == "pool") & (instances["removed_at"] < 0)).sum()
    assert len(dev_kept) == ((instances["part"] == "dev") & (instances["removed_at"] < 0)).sum() < len(dev)
    metrics = json.loads((res / "aflite/text/qnli/predictions/tinybert/aflite/partial/seed0.metrics.json").read_text())
    preds = pd.read_parquet(res / "aflite/text/qnli/predictions/tinybert/aflite/partial/seed0.parquet")
    on_kept = preds["id"].isin(set(dev_kept["id"]))
    assert metrics["n_train"] == len(kept) and metrics["n_dev_filtered"] == len(dev_kept)
    assert metrics["accuracy_filtered"] == pytest.approx(preds.loc[on_kept, "correct"].mean())
    assert metrics["accuracy_original"] == pytest.approx(preds["correct"].mean())
    training = json.loads((res / "aflite/text/qnli/models/tinybert/aflite/partial/seed0/training.json").read_text())
    assert training["partial_input"] == "text_b" and training["steps"] == 3

    table = pd.read_csv(res / "report/aflite/text_tables.csv")
    assert table["model"].tolist() == ["tinybert", "tinybert-PartialInput", "Training set size"]
    assert table.loc[0, "D(AFLite)"] == pytest.approx(100 * metrics_of(res, "aflite", "full")["accuracy_filtered"])
    assert table.loc[0, "D (paper)"] == 93.7 and table.loc[1, "D(AFLite) (paper)"] == 59.4  # Table 4, QNLI by the text
    assert table.loc[2, "D"] == len(pool) and table.loc[2, "D(AFLite)"] == len(kept)
    assert (res / "report/aflite/text_iterations.svg").stat().st_size > 1000
    assert not (res / "_checkpoints/aflite/qnli/filter").exists() or not any(
        (res / "_checkpoints/aflite/qnli/filter").iterdir()
    )


def test_tiny_text_run_scores_every_model_out_of_distribution(tiny_text_run):
    res = tiny_text_run / "results"
    hans = classification.read_parquet(res / "data/hans/validation.parquet")
    assert hans["groups"].tolist()[:2] == ["lexical_overlap", "subsequence"]
    # HANS scores the models of the filters.sized set (D is the same), ANLI those of the dataset's own filter
    for train_set, sized in (("full", "full"), ("aflite", "aflite_sized")):
        model = res / f"aflite/text/qnli/models/tinybert/{sized}/full/seed0/model"
        base = res / f"aflite/ood/hans/predictions/tinybert/{sized}/seed0/validation"
        table = pd.read_parquet(f"{base}.parquet")
        metrics = json.loads(Path(f"{base}.metrics.json").read_text())
        assert metrics["model_dir"].endswith(f"qnli/models/tinybert/{sized}/full/seed0/model")  # zero-shot
        # the package's own predictions of the same model, mapped by hand
        direct = classifier.predict_classifier(model, hans, max_length=48, device="cpu", check_labels=False)
        names = direct.attrs["label_names"]
        assert names == ["entailment", "not_entailment"]
        by_hand = ["non-entailment" if names[i] == "not_entailment" else names[i] for i in direct["prediction"]]
        assert table["mapped"].tolist() == by_hand
        gold = table["gold"].to_numpy()
        scored = gold == "non-entailment"
        assert metrics["counts"]["all"] == {"correct": int(table["correct"][scored].sum()), "n": int(scored.sum())}
        lex = scored & (hans["groups"] == "lexical_overlap").to_numpy()
        assert metrics["counts"]["Lex."] == {"correct": int(table["correct"][lex].sum()), "n": 2}
        # ANLI: fine-tuned first (Table 2), from this very model, then scored on the round's test split
        tuned = json.loads((res / f"aflite/ood/anli_r1/finetuned/tinybert/{train_set}/seed0/training.json").read_text())
        assert (tuned["steps"] == 2
                and tuned["initial_model"].endswith(f"qnli/models/tinybert/{train_set}/full/seed0/model"))
        anli = json.loads(
            (res / f"aflite/ood/anli_r1/predictions/tinybert/{train_set}/seed0/test.metrics.json").read_text()
        )
        assert anli["model_dir"].endswith(f"anli_r1/finetuned/tinybert/{train_set}/seed0/model")
        assert anli["counts"]["Rd1"]["n"] == anli["counts"]["all"]["n"] == 9
    table = pd.read_csv(res / "report/aflite/ood.csv")
    lex = table[(table["set"] == "HANS") & (table["group"] == "Lex.")]
    assert lex["train_set"].tolist() == ["D", "D(AFLite)"] and lex["n"].tolist() == [2, 2]
    rd1 = table[table["group"] == "Rd1"]
    assert rd1["n"].tolist() == [9, 9]
    # each row names the filtered set its model was trained on, and that set's realised size
    pool = len(classification.read_parquet(res / "aflite/text/qnli/data/pool.parquet"))
    kept = len(classification.read_parquet(res / "aflite/text/qnli/data/train_aflite.parquet"))
    assert lex["trained_on"].tolist() == ["qnli (unfiltered)", "qnli filters.sized (n = 150)"]
    assert lex["train_size"].tolist() == [pool, 150]
    assert rd1["trained_on"].tolist() == ["qnli (unfiltered)", "qnli filter (tau = 0.6, no n)"]
    assert rd1["train_size"].tolist() == [pool, kept]
    # the paper's values are RoBERTa trained on SNLI; these models (labelled RoBERTa) are trained on QNLI
    assert table["accuracy (paper)"].isna().all()


def metrics_of(res, train_set, inputs):
    return json.loads(
        (res / f"aflite/text/qnli/predictions/tinybert/{train_set}/{inputs}/seed0.metrics.json").read_text()
    )


def test_user_features_replace_the_warm_up_and_cover_all_of_train(tmp_path):
    """representation.source file: no warm-up (the pool is the whole training split), the user's features by id."""
    data = tmp_path / "qnli_tiny.parquet"
    pq.write_table(pq.read_table(QNLI_DEV).slice(0, 200), data)
    frame = classification.load_hf_parquet(data)
    rng = np.random.default_rng(0)
    # one informative dimension for half of the pairs (ids < 100), noise otherwise
    values = rng.normal(size=(len(frame), 4))
    informative = frame["id"].astype(int).to_numpy() < 100
    values[:, 0] = np.where(informative, np.where(frame["label"] == 1, 3.0, -3.0), 0.0)
    features = pd.DataFrame(values, columns=[f"f{i}" for i in range(4)]).assign(id=frame["id"].astype(str))
    features.sample(frac=1.0, random_state=0).to_parquet(tmp_path / "features.parquet")  # any row order
    cfg = {
        "run_name": "tiny-aflite-file",
        "datasets": {
            "qnli": {
                "task": "classification",
                "splits": {"dev": {"format": "hf_parquet", "path": str(data)}},
                "derive": {"from": "dev", "by": "random", "validation_fraction": 0.25, "seed": 0},
            }
        },
        "aflite": {
            "synthetic": None,
            "text": {
                "datasets": {
                    "qnli": {"train": "train", "dev": "validation", "filter": {"m": 16, "t": 50, "k": 20},
                             "features": {"train": str(tmp_path / "features.parquet"),
                                          "dev": str(tmp_path / "features.parquet")}},
                },
                "representation": {"source": "file"},
                "models": {"minilm": {"checkpoint": "embedded:all-MiniLM-L6-v2"}},
            },
        },
    }
    path = tmp_path / "file.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    plan = snakemake(tmp_path, "-n", "--configfile", str(path)).stdout
    assert "aflite_warmup" not in job_counts(plan)
    snakemake(tmp_path, "results/aflite/text/qnli/filter/summary.json", "--cores", WORKFLOW_CORES,
              "--configfile", str(path))
    res = tmp_path / "results"
    train = classification.read_parquet(res / "data/qnli/derived_s0/train.parquet")
    pool_features = np.load(res / "aflite/text/qnli/embeddings/pool.npy")
    expected = features.set_index("id").loc[train["id"]].to_numpy(dtype=np.float32)
    np.testing.assert_array_equal(pool_features, expected)  # aligned by id, the whole training split
    instances = pd.read_parquet(res / "aflite/text/qnli/filter/instances.parquet")
    informative = instances["id"].astype(int) < 100
    # k = 20 per iteration: the first four slices are informative pairs only, and the informative pairs go but for
    # the last one or two: once so few are left among ~100, a fit on t = 50 of them rarely sees the feature, and the
    # pair stays because it is predicted below tau (measured at the stated C: one pair, id 97, score 0.6 < 0.75;
    # the fits at 2C, before the two-label fix, happened to take it too)
    first_four = instances[(instances["removed_at"] >= 0) & (instances["removed_at"] < 4)]
    assert len(first_four) == 80 and (first_four["id"].astype(int) < 100).all()
    stayed = instances[informative & (instances["removed_at"] < 0)]
    assert len(stayed) <= 2 and (stayed["last_score"] < 0.75).all(), stayed
