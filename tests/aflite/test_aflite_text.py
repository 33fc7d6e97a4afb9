"""AFLite's text data flow: the warm-up split, joint filtering of the pool and the dev set, D / D_rand / D(AFLite)
and the partial-input view."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from spurious.aflite import text as aflite_text


def _frame(n, seed=0, pair=True):
    """Exactly balanced labels in a seeded order (a majority label would make its rows predictable by the
    intercept alone, and AFLite would rightly remove them)."""
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame(
        {
            "id": [str(i) for i in range(n)],
            "text_a": [f"question {i}" for i in range(n)],
            "text_b": [f"sentence {i}" for i in range(n)] if pair else [None] * n,
            "label": rng.permutation(np.arange(n) % 2),
        }
    )
    frame.attrs.update(label_names=["entailment", "not_entailment"], is_pair=pair)
    return frame


def _biased_features(labels, biased, seed):
    """A class-revealing first dimension on the ``biased`` rows (absent, 0, elsewhere) and two noise dimensions."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(len(labels), 3)).astype(np.float32)
    x[:, 0] = np.where(biased, np.where(labels == 1, 3.0, -3.0), 0.0)
    return x


def test_warmup_split_takes_the_fraction_per_label_and_leaves_the_rest_disjoint():
    train = _frame(200)
    pool, warmup = aflite_text.split_warmup(train, fraction=0.1, seed=3)
    counts = train["label"].value_counts()
    assert warmup["label"].value_counts().to_dict() == {k: int(np.ceil(0.1 * v)) for k, v in counts.items()}
    assert set(pool["id"]).isdisjoint(warmup["id"]) and len(pool) + len(warmup) == 200
    again, _ = aflite_text.split_warmup(train, fraction=0.1, seed=3)
    assert list(again["id"]) == list(pool["id"])


def test_pool_and_dev_are_filtered_together_and_biased_rows_go_first():
    pool, dev = _frame(300, seed=1), _frame(100, seed=2)
    pool_bias = np.arange(300) < 120  # the first 120 pool rows and the first 40 dev rows are biased
    dev_bias = np.arange(100) < 40
    x_pool = _biased_features(pool["label"].to_numpy(), pool_bias, seed=4)
    x_dev = _biased_features(dev["label"].to_numpy(), dev_bias, seed=5)
    settings = {"m": 64, "t": 100, "k": 40, "tau": 0.75, "seed": 0, "n": 240}
    table, result = aflite_text.filter_pool_and_dev(
        x_pool, pool["label"].to_numpy(), x_dev, dev["label"].to_numpy(), settings=settings, device="cpu",
        log_fn=lambda _: None,
    )
    assert list(table["part"]) == ["pool"] * 300 + ["dev"] * 100
    assert table["position"].tolist() == list(range(300)) + list(range(100))
    removed = table[table["removed_at"] >= 0]
    biased = np.concatenate([pool_bias, dev_bias])
    # n = 240 stops after 160 removals: the 160 biased rows, from both parts
    assert len(removed) == 160 and "n = 240" in result.stopped
    assert biased[removed.index].all()
    assert removed["part"].value_counts().to_dict().keys() == {"pool", "dev"}
    # removed_at names the iteration that removed each row; last_score is its p̃ there
    first = table[table["removed_at"] == 0]
    assert len(first) == settings["k"]
    np.testing.assert_allclose(first["last_score"], result.scores[0][first.index])
    kept = aflite_text.kept_rows(table, "pool")
    assert np.array_equal(kept, np.flatnonzero((table["part"] == "pool") & (table["removed_at"] < 0)))


def test_the_pool_alone_is_filtered_to_exactly_n():
    # a filters.<name> set (App. A.5's size-controlled SNLI for the OOD models): no dev part; by hand 300 -> 260 ->
    # 220 -> 210 (the third slice cut from k = 40 to 220 - 210 = 10); the 120 biased rows go first
    pool = _frame(300, seed=1)
    biased = np.arange(300) < 120
    x = _biased_features(pool["label"].to_numpy(), biased, seed=4)
    settings = {"m": 64, "t": 100, "k": 40, "tau": 0.75, "seed": 0, "n": 210}
    table, result = aflite_text.filter_pool_and_dev(
        x, pool["label"].to_numpy(), np.zeros((0, 3)), np.zeros(0), settings=settings, device="cpu",
        log_fn=lambda _: None,
    )
    assert (table["part"] == "pool").all() and len(table) == 300
    assert [r["removed"] for r in result.iterations] == [40, 40, 10]
    assert len(aflite_text.kept_rows(table, "pool")) == 210 and "n = 210" in result.stopped
    assert biased[table.index[table["removed_at"] >= 0]].all()
    assert len(aflite_text.training_sets(pool, table, seed=0)["random"]) == 210


def test_training_sets_random_subset_has_the_filtered_size_and_is_seeded():
    pool, dev = _frame(50, seed=1), _frame(10, seed=2)
    table = pd.DataFrame(
        {
            "part": ["pool"] * 50 + ["dev"] * 10,
            "position": list(range(50)) + list(range(10)),
            "label": np.concatenate([pool["label"], dev["label"]]),
            "removed_at": [0 if i % 5 == 0 else -1 for i in range(50)] + [1, -1] * 5,
            "last_score": np.nan,
        }
    )
    sets = aflite_text.training_sets(pool, table, seed=7)
    assert len(sets["full"]) == 50 and len(sets["aflite"]) == 40 and len(sets["random"]) == 40
    assert all(int(i) % 5 for i in sets["aflite"]["id"])
    assert set(sets["random"]["id"]) <= set(pool["id"])
    assert list(aflite_text.training_sets(pool, table, seed=7)["random"]["id"]) == list(sets["random"]["id"])
    assert list(aflite_text.training_sets(pool, table, seed=8)["random"]["id"]) != list(sets["random"]["id"])
    assert sets["random"].attrs["label_names"] == ["entailment", "not_entailment"]
    assert list(aflite_text.filtered_dev(dev, table)["id"]) == ["1", "3", "5", "7", "9"]
    with_ids = aflite_text.attach_ids(table, pool, dev)
    assert with_ids["id"].tolist()[48:52] == ["48", "49", "0", "1"]


def test_partial_input_keeps_only_the_named_segment():
    frame = _frame(4)
    partial = aflite_text.partial_input(frame, "text_b")
    assert partial["text_a"].tolist() == ["sentence 0", "sentence 1", "sentence 2", "sentence 3"]
    assert partial["text_b"].isna().all() and partial.attrs["is_pair"] is False
    with pytest.raises(ValueError, match="missing in 4 examples"):
        aflite_text.partial_input(_frame(4, pair=False), "text_b")


def test_target_size_defaults_to_tau_alone():
    assert aflite_text.resolve_target_size(None, 100) == 101
    assert aflite_text.resolve_target_size(500, 100) == 500
