"""The Stubborn Lexical Bias no-pretraining control (``spurious.lexical.bilstm``): CBOW + 3-layer BiLSTM, on toy
data."""

from __future__ import annotations

import json
import os
import stat

import numpy as np
import pandas as pd
import pytest
import torch

from spurious.lexical import bilstm

WORDS = ["the", "movie", "plot", "was", "a", "very", "story", "actor", "and", "it", "film", "scene", "long"]
SMALL = {"epochs": 4, "embedding_dim": 16, "hidden_sizes": [16, 16, 8], "batch_size": 16, "learning_rate": 1e-2,
         "dropout": 0.0, "cbow_epochs": 2, "device": "cpu", "threads": 1}  # fmt: skip


@pytest.fixture(scope="module", autouse=True)
def _restore_torch_threads():
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


def toy_frame(n: int, seed: int, *, pair: bool = False) -> pd.DataFrame:
    """Label 1 iff the first text holds "good" (label 0: "bad"), among random filler words."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        label = i % 2
        words = list(rng.choice(WORDS, int(rng.integers(3, 8))))
        words.insert(int(rng.integers(0, len(words) + 1)), "good" if label else "bad")
        rows.append((str(i), " ".join(words), " ".join(rng.choice(WORDS, 3)) if pair else None, label))
    frame = pd.DataFrame(rows, columns=["id", "text_a", "text_b", "label"])
    frame.attrs.update(label_names=["negative", "positive"], is_pair=pair)
    return frame


def test_tokens_join_the_segments_and_cut_at_max_tokens():
    assert bilstm.instance_tokens("Is it good?", "It's fine.", 10) == ["is", "it", "good", "<sep>", "its", "fine"]
    assert bilstm.instance_tokens("a b c d", None, 3) == ["a", "b", "c"]
    assert bilstm.instance_tokens("a b", float("nan"), 5) == ["a", "b"]  # pandas' missing text_b
    assert bilstm.instance_tokens("?!", None, 5) == ["<unk>"]  # nothing left: one unknown token, never empty


def test_the_q_weighted_cbow_corpus_is_a_seeded_resample_by_weight():
    tokens = [["a"], ["b"], ["c"], ["d"]]
    assert bilstm.cbow_corpus(tokens, None, 0) == tokens
    corpus = bilstm.cbow_corpus(tokens, np.array([0.0, 3.0, 1.0, 0.0]), 0)
    assert len(corpus) == 4 and set(map(tuple, corpus)) <= {("b",), ("c",)}
    assert corpus == bilstm.cbow_corpus(tokens, np.array([0.0, 3.0, 1.0, 0.0]), 0)
    many = bilstm.cbow_corpus(tokens * 500, np.tile([0.0, 3.0, 1.0, 0.0], 500), 1)
    assert sum(t == ["b"] for t in many) / len(many) == pytest.approx(0.75, abs=0.03)


def test_the_architecture_is_footnote_8s():
    model = bilstm.BiLSTMClassifier(100, 3, 128, [256, 512, 128], 0.1)
    assert [(m.input_size, 2 * m.hidden_size, m.bidirectional) for m in model.lstms] == [
        (128, 256, True), (256, 512, True), (512, 128, True)
    ]  # fmt: skip
    assert (model.output.in_features, model.output.out_features) == (128, 3)
    ids = torch.tensor([[5, 6, 7, 0], [8, 9, 0, 0]])
    assert model(ids, torch.tensor([3, 2])).shape == (2, 3)
    model.eval()
    # padding does not change an instance's output (packed sequences)
    alone = model(torch.tensor([[8, 9]]), torch.tensor([2]))
    assert torch.allclose(model(ids, torch.tensor([3, 2]))[1], alone[0], atol=1e-6)


def test_learns_a_one_word_task_deterministically_and_weights_matter(tmp_path):
    train, test = toy_frame(192, 0), toy_frame(64, 1)
    summary = bilstm.train_bilstm(train, output_dir=tmp_path / "a", settings=SMALL)
    assert bilstm.is_bilstm(tmp_path / "a") and not bilstm.is_bilstm(tmp_path)
    pred = bilstm.predict_bilstm(tmp_path / "a", test, device="cpu")
    assert list(pred.columns) == ["id", "label", "prediction", "correct", "probabilities"]
    assert pred["correct"].mean() >= 0.95  # "good" / "bad" decides the label
    assert summary["cbow_initialised"] == summary["vocabulary_size"] - 3  # every type but the specials
    assert summary["train_losses"][-1]["loss"] < summary["train_losses"][0]["loss"]
    again = bilstm.train_bilstm(train, output_dir=tmp_path / "b", settings=SMALL)
    assert again["train_losses"] == summary["train_losses"]
    np.testing.assert_array_equal(
        np.stack(pred["probabilities"]),
        np.stack(bilstm.predict_bilstm(tmp_path / "b", test, device="cpu")["probabilities"])
    )
    # weight 0 on every positive example: the model never sees label 1 and predicts 0 for everything
    weights = np.where(train["label"].to_numpy() == 1, 0.0, 2.0)
    skewed = bilstm.train_bilstm(train, output_dir=tmp_path / "w", settings=SMALL, weights=weights)
    assert skewed["cbow_corpus"] == "q-weighted resample"
    assert (bilstm.predict_bilstm(tmp_path / "w", test, device="cpu")["prediction"] == 0).all()
    meta = json.loads((tmp_path / "a" / bilstm.MARKER).read_text())
    assert meta["vocabulary"][:3] == ["<pad>", "<unk>", "<sep>"] and meta["label_names"] == ["negative", "positive"]


def test_the_model_folder_gets_the_permissions_of_every_output(tmp_path):
    """Readable by the group and others as the umask allows (a shared cluster project reads it), like every other
    output: not the owner-only mode of a private temporary folder."""
    previous = os.umask(0o022)
    try:
        bilstm.train_bilstm(toy_frame(32, 0), output_dir=tmp_path / "m", settings=dict(SMALL, epochs=1))
    finally:
        os.umask(previous)
    assert stat.S_IMODE((tmp_path / "m").stat().st_mode) == 0o755
    assert {stat.S_IMODE(p.stat().st_mode) for p in (tmp_path / "m").iterdir()} == {0o644}
    assert [p.name for p in tmp_path.iterdir()] == ["m"]


def test_pairs_and_bad_input(tmp_path):
    train = toy_frame(32, 0, pair=True)
    bilstm.train_bilstm(train, output_dir=tmp_path / "p", settings=dict(SMALL, epochs=1))
    other = toy_frame(8, 1, pair=True)
    other.attrs["label_names"] = ["no", "yes"]
    with pytest.raises(ValueError, match="differ from the data's"):
        bilstm.predict_bilstm(tmp_path / "p", other, device="cpu")
    with pytest.raises(ValueError, match="unknown BiLSTM settings"):
        bilstm.train_bilstm(train, output_dir=tmp_path / "x", settings={"layers": 2})
    with pytest.raises(ValueError, match="three even numbers"):
        bilstm.train_bilstm(train, output_dir=tmp_path / "x", settings={"hidden_sizes": [16, 15, 8]})
    with pytest.raises(ValueError, match="finite nonnegative"):
        bilstm.train_bilstm(train, output_dir=tmp_path / "x", settings=SMALL, weights=np.ones(3))
