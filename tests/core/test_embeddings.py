"""Representations for AFLite: pooled embeddings of real QNLI pairs, padding invariance, user-supplied features."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from spurious.core.data import classification
from spurious.core.train import embeddings
from tests.conftest import SHARED

MODEL = "embedded:all-MiniLM-L6-v2"


@pytest.fixture(scope="module")
def qnli():
    return classification.load_hf_parquet(SHARED / "data" / "qnli" / "validation" / "0000.parquet").head(12)


def test_pooled_embeddings_do_not_depend_on_the_batch(qnli):
    full = embeddings.embed(qnli, MODEL, pooling="mean", batch_size=12, device="cpu")
    assert full.shape == (12, 384) and full.dtype == np.float32
    # each row alone (no padding at all) equals the row embedded in a padded batch of 12
    alone = np.stack([embeddings.embed(qnli.iloc[[i]], MODEL, pooling="mean", device="cpu")[0] for i in (0, 5)])
    np.testing.assert_allclose(alone, full[[0, 5]], atol=1e-4)
    cls = embeddings.embed(qnli, MODEL, pooling="cls", batch_size=5, device="cpu")
    assert not np.allclose(cls, full)
    np.testing.assert_allclose(cls, embeddings.embed(qnli, MODEL, pooling="cls", batch_size=12, device="cpu"),
                               atol=1e-4)
    with pytest.raises(ValueError, match="pooling must be one of"):
        embeddings.embed(qnli, MODEL, pooling="max")


def test_user_features_align_by_id_or_row(tmp_path):
    table = pd.DataFrame({"id": ["b", "a"], "f0": [2.0, 1.0], "f1": [20.0, 10.0]})
    table.to_parquet(tmp_path / "f.parquet")
    np.testing.assert_array_equal(embeddings.read_features(tmp_path / "f.parquet", ["a", "b"]), [[1, 10], [2, 20]])
    with pytest.raises(ValueError, match="1 of 2 ids have no features"):
        embeddings.read_features(tmp_path / "f.parquet", ["a", "z"])
    np.save(tmp_path / "f.npy", np.ones((3, 4)))
    assert embeddings.read_features(tmp_path / "f.npy", ["a", "b", "c"]).shape == (3, 4)
    with pytest.raises(ValueError, match="one row per example"):
        embeddings.read_features(tmp_path / "f.npy", ["a", "b"])


def test_a_warm_up_classifier_embeds_with_its_fine_tuned_encoder(tmp_path, qnli):
    from spurious.core.train import classifier

    classifier.train_classifier(
        qnli, model_name_or_path=MODEL, output_dir=tmp_path / "warm", checkpoint_dir=tmp_path / "ck",
        settings={"batch_size": 4, "max_steps": 2, "learning_rate": 1e-3, "max_length": 64, "device": "cpu"},
    )
    warm = embeddings.embed(qnli, tmp_path / "warm", device="cpu", max_length=64)
    frozen = embeddings.embed(qnli, MODEL, device="cpu", max_length=64)
    assert warm.shape == frozen.shape and not np.allclose(warm, frozen, atol=1e-3)
