"""Per-feature logits stores: fingerprints, round trip, loud mismatches, batch alignment, and inference with a model.

Real SQuAD dev records and the embedded MiniLM tokenizer; the one model-running test uses MiniLM with a (random,
seeded) QA head saved as a checkpoint, which is all a producer needs to be checked against ``predict_logits``.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from spurious.core.models import load_qa_model, load_tokenizer
from spurious.core.train import logits, qa

MINILM = "embedded:all-MiniLM-L6-v2"
SETTINGS = {"max_length": 64, "stride": 16, "device": "cpu", "eval_batch_size": 8, "threads": 1}


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer(MINILM)


@pytest.fixture(scope="module")
def frame(squad_dev):
    short = squad_dev[squad_dev["context"].str.len() < 500]
    return short.iloc[:8].reset_index(drop=True)


@pytest.fixture(scope="module")
def features(frame, tokenizer):
    return qa.training_features(frame, tokenizer, SETTINGS)


def _random_logits(features: qa.QAFeatures, seed: int = 0) -> tuple[list[np.ndarray], list[np.ndarray]]:
    rng = np.random.default_rng(seed)
    starts = [rng.normal(size=n).astype(np.float32) for n in features.lengths]
    ends = [rng.normal(size=n).astype(np.float32) for n in features.lengths]
    return starts, ends


def test_fingerprint_describes_the_windows(features, frame, tokenizer):
    fp = logits.features_fingerprint(features)
    assert fp["n_features"] == len(features) > len(frame)  # several windows per question at max_length 64
    assert (fp["max_length"], fp["stride"], fp["vocab_size"]) == (64, 16, len(tokenizer))
    assert fp["tokenizer"] == tokenizer.name_or_path and fp["n_examples"] == len(frame)
    # the same data and settings give the same fingerprint; one question less changes the hashes and the counts
    assert logits.features_fingerprint(qa.training_features(frame, tokenizer, SETTINGS)) == fp
    fewer = logits.features_fingerprint(qa.training_features(frame.iloc[1:], tokenizer, SETTINGS))
    assert set(logits.fingerprint_differences(fp, fewer)) >= {"n_features", "input_ids_sha256", "example_ids_sha256"}
    # hand-built features carry no provenance: the caller has to give it
    bare = qa.QAFeatures(
        input_ids=[np.array([101, 102])],
        token_type_ids=None,
        context_offsets=[np.full((2, 2), -1)],
        example_index=np.array([0]),
        start_positions=None,
        end_positions=None,
        example_ids=["a"],
        contexts=[""],
        pad_token_id=0,
    )
    with pytest.raises(ValueError, match="max_length, stride"):
        logits.features_fingerprint(bare, tokenizer_name="t", vocab_size=3)
    assert (
        logits.features_fingerprint(bare, tokenizer_name="t", vocab_size=3, max_length=8, stride=2)["n_features"] == 1
    )


def test_store_round_trip(features, tmp_path):
    starts, ends = _random_logits(features)
    fp = logits.features_fingerprint(features)
    path = logits.write_feature_logits(tmp_path / "bias.npy", starts, ends, fp, producer={"model_dir": "m", "step": 3})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bias.json", "bias.npy"]  # no temporary files left
    store = logits.load_feature_logits(path, fp)
    assert isinstance(store, np.memmap) and store.dtype == np.float32 and store.shape == (len(features), 2, 64)
    for i, n in enumerate(features.lengths):
        assert np.array_equal(store[i, 0, :n], starts[i]) and np.array_equal(store[i, 1, :n], ends[i])
        assert not store[i, :, n:].any()  # zeros beyond the window
    sidecar = json.loads((tmp_path / "bias.json").read_text())
    assert sidecar["fingerprint"] == fp and sidecar["producer"] == {"model_dir": "m", "step": 3}
    assert sidecar["shape"] == [len(features), 2, 64]


def test_store_of_other_features_fails_loudly(features, frame, tokenizer, tmp_path):
    path = tmp_path / "teacher.npy"
    fp = logits.features_fingerprint(features)
    logits.write_feature_logits(path, *_random_logits(features), fp, producer={})
    consumer = qa.training_features(frame, tokenizer, {**SETTINGS, "stride": 32})
    with pytest.raises(ValueError, match="teacher.npy") as exc:
        logits.load_feature_logits(path, logits.features_fingerprint(consumer))
    message = str(exc.value)
    assert "stride: expected 32, found 16" in message and "input_ids_sha256" in message
    assert "regenerate the logits" in message and "tokenizer/max_length/stride" in message
    # another tokenizer name alone is enough to refuse
    with pytest.raises(ValueError, match="tokenizer: expected 'other', found"):
        logits.load_feature_logits(path, {**fp, "tokenizer": "other"})
    # a store without its sidecar (an interrupted write) never loads
    (tmp_path / "teacher.json").unlink()
    with pytest.raises(ValueError, match="no sidecar teacher.json"):
        logits.load_feature_logits(path, fp)
    with pytest.raises(ValueError, match="4 start and 4 end rows"):
        logits.write_feature_logits(path, [np.zeros(3)] * 4, [np.zeros(3)] * 4, fp, producer={})


def test_align_to_batch_matches_the_collated_layout(features):
    starts, ends = _random_logits(features, seed=1)
    store = np.stack(
        [
            np.stack([np.pad(s, (0, 64 - len(s))), np.pad(e, (0, 64 - len(e)))])
            for s, e in zip(starts, ends, strict=True)
        ]
    )
    idx = np.array([3, 0, len(features) - 1])
    for pad_on_right in (True, False):
        features.pad_on_right = pad_on_right  # only the layout changes; restored below
        try:
            batch = features.collate(idx, pad_to=70)
        finally:
            features.pad_on_right = True
        aligned = logits.align_to_batch(store, idx, batch["attention_mask"], pad_on_right=pad_on_right, fill=-9.0)
        assert aligned.shape == (3, 2, 70)
        mask = batch["attention_mask"].numpy().astype(bool)
        for j, f in enumerate(idx):
            assert np.array_equal(aligned[j, 0, mask[j]], starts[f]) and np.array_equal(aligned[j, 1, mask[j]], ends[f])
            assert (aligned[j, :, ~mask[j]] == -9.0).all()


@pytest.fixture(scope="module")
def producer_dir(tmp_path_factory, tokenizer):
    """MiniLM with a seeded QA head, saved like a trained model (so nothing is missing when it is loaded)."""
    path = tmp_path_factory.mktemp("producer") / "model"
    torch.manual_seed(5)
    load_qa_model(MINILM).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def test_infer_feature_logits_equals_predict_logits(producer_dir, frame, tokenizer, tmp_path):
    out = tmp_path / "bias" / "logits.npy"
    fp = qa.infer_feature_logits(producer_dir, frame, tokenizer_from=MINILM, settings=SETTINGS, output_path=out)
    # the consumer (train_qa) makes its windows with the same function and records the configured model name: the
    # fingerprints agree, whether computed from the features alone or with the names and settings given explicitly
    other_speed = {**SETTINGS, "learning_rate": 1.0, "eval_batch_size": 2}
    consumer = qa.training_features(frame, tokenizer, other_speed, tokenizer_name=MINILM)
    assert fp["tokenizer"] == MINILM and fp == logits.features_fingerprint(consumer)
    plain = qa.training_features(frame, tokenizer, SETTINGS)
    assert fp == logits.features_fingerprint(plain, tokenizer_name=MINILM, max_length=64, stride=16)
    store = logits.load_feature_logits(out, fp)
    model = load_qa_model(producer_dir)
    starts, ends = qa.predict_logits(model, consumer, batch_size=SETTINGS["eval_batch_size"])
    for i, n in enumerate(consumer.lengths):
        np.testing.assert_allclose(store[i, 0, :n], starts[i], rtol=0, atol=1e-5)
        np.testing.assert_allclose(store[i, 1, :n], ends[i], rtol=0, atol=1e-5)
    assert np.ptp(store[:, 0, :8]) > 0.1  # real logits, not zeros
    producer = logits.read_sidecar(out)["producer"]
    assert producer["model_dir"] == str(producer_dir) and producer["tokenizer_from"] == MINILM
    assert producer["step"] is None  # not saved by train_qa


def test_infer_feature_logits_refuses_untrained_or_foreign_producers(producer_dir, frame, tmp_path):
    out = tmp_path / "x.npy"
    with pytest.raises(ValueError, match="not a fine-tuned QA model"):  # the base encoder has no QA head
        qa.infer_feature_logits(MINILM, frame, tokenizer_from=MINILM, settings=SETTINGS, output_path=out)
    model = load_qa_model(producer_dir)
    model.resize_token_embeddings(model.config.vocab_size + 8)
    model.save_pretrained(tmp_path / "bigger")
    with pytest.raises(ValueError, match="does not share the consumer's vocabulary.*30530"):
        qa.infer_feature_logits(tmp_path / "bigger", frame, tokenizer_from=MINILM, settings=SETTINGS, output_path=out)
    assert not out.exists()
