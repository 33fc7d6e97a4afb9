"""Classification datasets (GLUE TSV, HF parquet, validation, derivation) and the classifier (loss weights, exact
resumption, predictions), on the real SST-2 and QNLI files of the offline mirror."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from spurious.core.data import classification
from spurious.core.data.squad import DataValidationError
from spurious.core.train import classifier
from tests.conftest import SHARED, tiny_encoder

QNLI_DEV = SHARED / "data" / "qnli" / "validation" / "0000.parquet"
SST2_DEV = SHARED / "data" / "sst2" / "dev.tsv"
MODEL = "embedded:all-MiniLM-L6-v2"


def test_qnli_parquet_loads_with_the_label_names_of_its_metadata():
    df = classification.load_hf_parquet(QNLI_DEV)
    assert df.attrs["label_names"] == ["entailment", "not_entailment"]
    assert len(df) == 5463 and df.attrs["is_pair"]
    # SOURCES.md: labels 0 = 2,702, 1 = 2,761; row 0 is entailment
    assert df["label"].value_counts().to_dict() == {0: 2702, 1: 2761}
    assert df.loc[0, "text_a"] == "What came into force after the new constitution was herald?"
    assert df.loc[0, "label"] == 0 and df.loc[0, "id"] == "0"


def test_sst2_tsv_is_single_sentence_with_numeric_labels():
    df = classification.load_glue_tsv(SST2_DEV, label_names=["negative", "positive"])
    # SOURCES.md: 872 rows; labels 1 = 444, 0 = 428; first row -> 1
    assert len(df) == 872 and not df.attrs["is_pair"]
    assert df["text_b"].isna().all()
    assert df["label"].sum() == 444
    assert df.loc[0, "text_a"].startswith("it 's a charming and often affecting journey")
    assert df.loc[0, "label"] == 1


def test_a_stray_label_warns_when_inferred_and_fails_when_declared(tmp_path, caplog):
    # issue 14: the real SST-2 dev file with one label changed to 2 would become a three-class dataset silently
    lines = SST2_DEV.read_text().splitlines()
    sentence, _ = lines[5].rsplit("\t", 1)
    lines[5] = f"{sentence}\t2"  # data row 4 (0-based), after the header
    stray = tmp_path / "dev.tsv"
    stray.write_text("\n".join(lines) + "\n")
    with caplog.at_level("WARNING", logger="spurious.core.data.classification"):
        inferred = classification.load_glue_tsv(stray)
    assert inferred.attrs["label_names"] == ["0", "1", "2"] and inferred.attrs["rare_labels"] == ["2"]
    (warning,) = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert str(stray) in warning and "label '2' appears in only 1 of 872 labeled rows (row 4 (id 4))" in warning
    assert "label_names" in warning
    # the clean file gives no warning: both labels are common
    caplog.clear()
    with caplog.at_level("WARNING", logger="spurious.core.data.classification"):
        assert classification.load_glue_tsv(SST2_DEV).attrs["rare_labels"] == []
    assert not caplog.records
    # declared labels: the stray value is an invalid record, named with its id and value
    declared = classification.load_glue_tsv(stray, label_names=["0", "1"])
    with pytest.raises(DataValidationError, match=r"dev.tsv: 1 of 872 labeled records are invalid; first: 4 "
                                                  r"\(label 2 outside \[0, 2\)\)"):
        classification.validate_records(declared, source=str(stray))


def test_string_labels_need_label_names_and_unlabeled_rows_are_dropped_and_counted(tmp_path):
    path = tmp_path / "snli_like.tsv.gz"
    with gzip.open(path, "wt") as fh:
        fh.write("pairID\tsentence1\tsentence2\tgold_label\n")
        fh.write('a\tA man "sleeps".\tNobody sleeps.\tcontradiction\n')  # quotes are text in GLUE files
        fh.write("b\tA dog runs.\tAn animal moves.\tentailment\n")
        fh.write("c\tTwo kids.\tKids play.\t-\n")  # no gold label, as in SNLI
    with pytest.raises(DataValidationError, match="need label_names"):
        classification.load_glue_tsv(path)
    names = ["entailment", "neutral", "contradiction"]
    df = classification.load_glue_tsv(path, label_names=names)
    assert df["label"].tolist() == [2, 0, -1]
    assert df.loc[0, "text_a"] == 'A man "sleeps".'
    kept, summary = classification.validate_records(df, source=str(path))
    assert kept["id"].tolist() == ["a", "b"]
    assert summary["n_unlabeled"] == 1 and summary["n_dropped"] == 0


def test_invalid_records_fail_naming_them_or_are_dropped_on_request():
    df = pd.DataFrame(
        {"id": ["1", "2", "2", "3"], "text_a": ["ok", "", "dup", "fine"], "text_b": ["x", "y", "z", "w"],
         "label": [0, 1, 0, 5]}
    )
    df.attrs.update(label_names=["a", "b"], is_pair=True)
    with pytest.raises(DataValidationError, match=r"2 of 4 labeled records are invalid; first: 2 \(empty text_a\), "
                                                  r"3 \(label 5"):
        classification.validate_records(df, source="toy.tsv")
    kept, summary = classification.validate_records(df, source="toy.tsv", on_invalid="drop")
    # "2" is bad (empty text) so both of its records go; "3" has label 5 outside [0, 2)
    assert kept["id"].tolist() == ["1"]
    assert summary["n_dropped"] == 3
    assert kept.attrs["label_names"] == ["a", "b"]


def test_random_split_is_seeded_stratified_and_disjoint():
    df = classification.load_hf_parquet(QNLI_DEV)
    train, valid = classification.split_random(df, validation_fraction=0.25, seed=0)
    again, _ = classification.split_random(df, validation_fraction=0.25, seed=0)
    other, _ = classification.split_random(df, validation_fraction=0.25, seed=1)
    assert train["id"].tolist() == again["id"].tolist()
    assert train["id"].tolist() != other["id"].tolist()
    assert not set(train["id"]) & set(valid["id"]) and len(train) + len(valid) == len(df)
    # ceil(0.25 * 2702) = 676 entailment and ceil(0.25 * 2761) = 691 not_entailment pairs in validation
    assert valid["label"].value_counts().to_dict() == {0: 676, 1: 691}


def test_grouped_split_keeps_every_question_on_one_side():
    # QNLI dev: 1,361 questions come with two sentences, and their labels differ in all but a few; a random split
    # puts 502 validation pairs' questions into train with the other label (the leak this split exists to prevent)
    df = classification.load_hf_parquet(QNLI_DEV)
    rand_train, rand_valid = classification.split_random(df, validation_fraction=0.25, seed=0)
    assert rand_valid["text_a"].isin(set(rand_train["text_a"])).sum() == 502
    train, valid = classification.split_grouped(df, validation_fraction=0.25, seed=0)
    again, _ = classification.split_grouped(df, validation_fraction=0.25, seed=0)
    other, _ = classification.split_grouped(df, validation_fraction=0.25, seed=1)
    assert train["id"].tolist() == again["id"].tolist() and train["id"].tolist() != other["id"].tolist()
    assert not set(train["text_a"]) & set(valid["text_a"])
    assert not set(train["id"]) & set(valid["id"]) and len(train) + len(valid) == len(df)
    # the first seeded prefix of questions that reaches ceil(0.25 * 5463) = 1366 pairs, overshooting by at most one
    # question's pairs (2)
    assert 1366 <= len(valid) <= 1368
    assert valid.attrs["label_names"] == df.attrs["label_names"]


def test_grouped_split_by_hand():
    df = pd.DataFrame(
        {"id": list("abcdef"), "text_a": ["q1", "q1", "q2", "q3", "q3", "q3"], "text_b": list("uvwxyz"),
         "label": [0, 1, 0, 1, 0, 1]}
    )
    df.attrs["label_names"] = ["x", "y"]
    # seed 0 orders the groups (q1, q2, q3) as np.random.default_rng(0).permutation(3)
    order = np.random.default_rng(0).permutation(3).tolist()
    sizes = [2, 1, 3]
    wanted, taken, chosen = 2, 0, []  # ceil(0.3 * 6) = 2 records
    for g in order:
        chosen.append(g)
        taken += sizes[g]
        if taken >= wanted:
            break
    _, valid = classification.split_grouped(df, validation_fraction=0.3, seed=0)
    assert sorted(set(valid["text_a"])) == sorted(f"q{g + 1}" for g in chosen)
    with pytest.raises(ValueError, match="no column 'premise'"):
        classification.split_grouped(df, validation_fraction=0.3, seed=0, column="premise")


def test_parquet_round_trip_keeps_label_names_and_missing_second_segment(tmp_path):
    df = classification.load_glue_tsv(SST2_DEV).head(5)
    classification.write_parquet(df, tmp_path / "x.parquet", metadata={"source": "sst2"})
    back = classification.read_parquet(tmp_path / "x.parquet")
    assert back.attrs["label_names"] == ["0", "1"] and not back.attrs["is_pair"]
    assert back["text_b"].isna().all() and back["id"].tolist() == df["id"].tolist()
    with pytest.raises(DataValidationError, match="not a normalised classification parquet"):
        classification.read_parquet(QNLI_DEV)


def test_weighted_loss_scales_each_examples_gradient_by_its_weight():
    torch.manual_seed(0)
    logits = torch.randn(3, 2, requires_grad=True)
    labels = torch.tensor([0, 1, 1])
    classifier.weighted_loss(logits, labels, torch.tensor([2.0, 0.0, 1.0])).backward()
    weighted = logits.grad.clone()
    logits.grad = None
    classifier.weighted_loss(logits, labels, None).backward()
    plain = logits.grad.clone()
    # the batch mean divides by 3 either way: example 0 counts twice, example 1 not at all, example 2 once
    assert torch.allclose(weighted[0], 2 * plain[0])
    assert torch.allclose(weighted[1], torch.zeros(2))
    assert torch.allclose(weighted[2], plain[2])
    # with weights q_i |D| of mean 1 on a uniform q, the loss equals the unweighted one
    same = classifier.weighted_loss(logits, labels, torch.ones(3))
    assert float(same.detach()) == pytest.approx(float(classifier.weighted_loss(logits, labels, None).detach()))


@pytest.fixture(scope="module")
def tiny_qnli():
    df = classification.load_hf_parquet(QNLI_DEV)
    train, test = classification.split_random(df.head(400), validation_fraction=0.25, seed=0)
    return train.head(48), test.head(32)


@pytest.fixture(scope="module")
def encoder(tmp_path_factory) -> Path:
    """The training tests' model: a small random BERT (tests/conftest.py's tiny_encoder); what they check
    (determinism, loss weights, exact resumption, BitFit's trainable set) does not depend on MiniLM's weights."""
    return tiny_encoder(tmp_path_factory.mktemp("encoder"))


SETTINGS = {"batch_size": 8, "max_steps": 6, "max_length": 64, "learning_rate": 1e-4, "checkpoint_every": 2,
            "device": "cpu"}


def test_training_is_deterministic_and_weights_change_the_model(tmp_path, tiny_qnli, encoder):
    train, test = tiny_qnli

    def run(name, weights=None):
        classifier.train_classifier(
            train, model_name_or_path=encoder, output_dir=tmp_path / name, checkpoint_dir=tmp_path / f"ck-{name}",
            settings=SETTINGS, weights=weights,
        )
        return classifier.predict_classifier(tmp_path / name, test, device="cpu")

    a, b = run("a"), run("b")
    np.testing.assert_array_equal(np.stack(a["probabilities"]), np.stack(b["probabilities"]))
    assert list(a.columns) == list(classifier.PREDICTION_COLUMNS)
    assert (a["correct"] == (a["label"] == a["prediction"])).all()
    weights = np.where(train["label"].to_numpy() == 0, 2.0, 0.0)
    weighted = run("w", weights)
    assert not np.allclose(np.stack(weighted["probabilities"]), np.stack(a["probabilities"]))
    with pytest.raises(ValueError, match="one per training example"):
        run("bad", weights[:-1])


def test_a_checkpoint_of_other_settings_is_never_resumed(tmp_path, tiny_qnli, encoder):
    train, _ = tiny_qnli
    # a 4-step run leaves its step-2 checkpoint behind (the adapter, not the function, removes the folder)
    classifier.train_classifier(
        train, model_name_or_path=encoder, output_dir=tmp_path / "part", checkpoint_dir=tmp_path / "ck",
        settings=dict(SETTINGS, max_steps=4),
    )
    with pytest.raises(RuntimeError, match="belongs to a different run"):
        classifier.train_classifier(
            train, model_name_or_path=encoder, output_dir=tmp_path / "x", checkpoint_dir=tmp_path / "ck",
            settings=SETTINGS
        )


def test_resume_from_a_checkpoint_reproduces_the_uninterrupted_losses(tmp_path, tiny_qnli, encoder, monkeypatch):
    train, _ = tiny_qnli
    ref = classifier.train_classifier(
        train, model_name_or_path=encoder, output_dir=tmp_path / "ref", checkpoint_dir=tmp_path / "ck-ref",
        settings=SETTINGS
    )
    # simulate preemption: raise inside the step after the checkpoint at step 4 is written
    calls = {"n": 0}
    real = classifier.weighted_loss

    def failing(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 5:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(classifier, "weighted_loss", failing)
    with pytest.raises(KeyboardInterrupt):
        classifier.train_classifier(
            train, model_name_or_path=encoder, output_dir=tmp_path / "run", checkpoint_dir=tmp_path / "ck",
            settings=SETTINGS
        )
    monkeypatch.setattr(classifier, "weighted_loss", real)
    resumed = classifier.train_classifier(
        train, model_name_or_path=encoder, output_dir=tmp_path / "run", checkpoint_dir=tmp_path / "ck",
        settings=SETTINGS
    )
    assert resumed["resumed_from_step"] == 4
    assert ([r["loss"] for r in resumed["train_losses"]]
            == pytest.approx([r["loss"] for r in ref["train_losses"]], abs=1e-6))


def test_bitfit_trains_only_the_biases_and_the_head(tmp_path, tiny_qnli, encoder):
    from safetensors.torch import load_file

    train, _ = tiny_qnli
    before = {n: p.detach().clone()
              for n, p in classifier.load_classifier(encoder, label_names=["a", "b"]).named_parameters()}
    summary = classifier.train_classifier(
        train, model_name_or_path=encoder, output_dir=tmp_path / "bf", checkpoint_dir=tmp_path / "ck",
        settings=dict(SETTINGS, learning_rate=1e-3), trainable="bitfit",
    )  # fmt: skip
    after = load_file(tmp_path / "bf" / "model.safetensors")
    changed = {n for n, w in after.items() if n in before and not torch.equal(w, before[n])}
    frozen = {n for n in before if not n.endswith("bias") and n.startswith("bert.")}
    assert changed and not changed & frozen  # no weight matrix, embedding or LayerNorm gain moved
    assert any(n.startswith("bert.encoder") and n.endswith("bias") for n in changed)
    # the head is newly initialised (random, not in `before`'s values), so it is counted, not compared
    n_bias = sum(w.numel() for n, w in before.items() if n.endswith("bias") and n.startswith("bert."))
    n_head = sum(w.numel() for n, w in before.items() if not n.startswith("bert."))
    assert summary["trainable"] == "bitfit" and summary["n_trainable_parameters"] == n_bias + n_head
    assert summary["n_trainable_parameters"] < 0.01 * sum(w.numel() for w in before.values())
    with pytest.raises(ValueError, match="unknown trainable"):
        classifier.train_classifier(
            train, model_name_or_path=encoder, output_dir=tmp_path / "x", checkpoint_dir=tmp_path / "ck2",
            settings=SETTINGS, trainable="head",
        )  # fmt: skip


def test_scratch_init_starts_from_random_weights(tmp_path, tiny_qnli):
    train, _ = tiny_qnli
    pre = classifier.load_classifier(MODEL, label_names=["a", "b"])
    torch.manual_seed(0)
    scratch = classifier.load_classifier(MODEL, label_names=["a", "b"], from_scratch=True)
    name = "embeddings.word_embeddings.weight"
    w_pre = dict(pre.base_model.named_parameters())[name]
    w_scratch = dict(scratch.base_model.named_parameters())[name]
    assert w_pre.shape == w_scratch.shape and not torch.allclose(w_pre, w_scratch)
    assert scratch.config.id2label == {0: "a", 1: "b"}


@pytest.mark.parametrize(
    ("columns", "pair"),
    [
        ({"premise": ["p"], "hypothesis": ["h"]}, ("p", "h")),  # snli, glue/mnli as the hub gives them
        ({"question1": ["p"], "question2": ["h"], "idx": [7]}, ("p", "h")),  # glue/qqp
        ({"question": ["p"], "sentence": ["h"], "idx": [7]}, ("p", "h")),  # glue/qnli
        ({"sentence": ["p"], "idx": [7]}, ("p", None)),  # glue/sst2
    ],
)
def test_hub_layouts_are_recognised(columns, pair):
    df = classification.normalize(pd.DataFrame({**columns, "label": [-1]}), source="hub", label_names=["a", "b"])
    assert (df.loc[0, "text_a"], df.loc[0, "text_b"]) == pair
    assert df.loc[0, "label"] == -1 and df.loc[0, "id"] == ("7" if "idx" in columns else "0")
    kept, summary = classification.validate_records(df, source="hub")
    assert kept.empty and summary["n_unlabeled"] == 1  # SNLI's unlabeled rows: dropped and counted
