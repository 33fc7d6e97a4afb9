"""AFLite's Algorithm 1: the batched logistic regression against scikit-learn, out-of-sample predictability, the
greedy and sampled slices, the stopping rules, and a tiny dataset whose biased instances are known."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.linear_model import LogisticRegression

from spurious.aflite import filtering as aflite


def _blobs(n=120, d=5, seed=0, n_classes=3):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, n_classes, size=n)
    x = rng.normal(size=(n, d)) + y[:, None] * 0.8
    return x, y


@pytest.mark.parametrize("n_classes", [2, 3])
@pytest.mark.parametrize("C", [0.5, 2.0])
def test_batched_logistic_regression_is_scikit_learns_at_the_stated_C(n_classes, C):
    # two labels: scikit-learn fits one logit with penalty ½‖w‖²; ours is a two-column softmax whose weight
    # difference W1 − W0 must be that w at the same C (a plain ½‖W‖² penalty would give scikit-learn's fit at 2C)
    x, y = _blobs(n_classes=n_classes)
    rows = np.stack([np.arange(0, 80), np.arange(40, 120)])
    w, b = aflite.fit_logistic_batched(
        torch.tensor(x), torch.tensor(y), torch.tensor(rows), n_classes, C=C, max_iter=500, tol=1e-10
    )
    for j in range(2):
        ref = LogisticRegression(C=C, tol=1e-10, max_iter=5000).fit(x[rows[j]], y[rows[j]])
        weights, intercepts = w[j].numpy(), b[j].numpy()
        if n_classes == 2:
            np.testing.assert_allclose(weights[:, 1] - weights[:, 0], ref.coef_[0], atol=1e-4)
            np.testing.assert_allclose(intercepts[1] - intercepts[0], ref.intercept_[0], atol=1e-4)
        else:  # multinomial: the intercepts are unique up to a common shift
            np.testing.assert_allclose(weights.T, ref.coef_, atol=1e-4)
            np.testing.assert_allclose(intercepts - intercepts.mean(), ref.intercept_ - ref.intercept_.mean(),
                                       atol=1e-4)
        ours = torch.softmax(torch.tensor(x) @ w[j] + b[j], dim=-1).numpy()
        np.testing.assert_allclose(ours, ref.predict_proba(x), atol=1e-4)


@pytest.mark.parametrize("n_classes", [2, 3])
@pytest.mark.parametrize("C", [0.5, 2.0])
def test_predictability_scores_are_scikit_learns_but_on_the_boundary(n_classes, C):
    # the scores at the pipeline's own tolerance against scikit-learn fitted (tightly) on the same partitions: an
    # instance may differ only when some partition's scikit-learn fit puts it on its decision boundary
    rng = np.random.default_rng(n_classes)
    n, m, t = 300, 16, 100
    y = rng.integers(0, n_classes, size=n)
    x = (rng.normal(size=(n, 8)) + 0.5 * y[:, None]).astype(np.float32)
    scores = aflite.predictability_scores(x, y, m=m, t=t, seed=5, C=C, device="cpu")
    draw = np.random.default_rng(5)  # the partitions, redrawn as predictability_scores draws them
    correct, count, margin = np.zeros(n), np.zeros(n), np.full(n, np.inf)
    for _ in range(m):
        train = draw.choice(n, size=t, replace=False)
        held = np.setdiff1d(np.arange(n), train)
        ref = LogisticRegression(C=C, tol=1e-10, max_iter=5000).fit(x[train], y[train])
        decision = ref.decision_function(x[held])
        top2 = np.sort(decision, axis=1)[:, -2:] if n_classes > 2 else None
        margin[held] = np.minimum(margin[held], np.abs(decision) if top2 is None else top2[:, 1] - top2[:, 0])
        correct[held] += ref.predict(x[held]) == y[held]
        count[held] += 1
    expected = np.where(count > 0, correct / np.maximum(count, 1), np.nan)
    differ = ~np.isclose(np.nan_to_num(expected, nan=-1.0), np.nan_to_num(scores.predictability, nan=-1.0))
    assert np.array_equal(np.isnan(expected), np.isnan(scores.predictability))
    assert differ.sum() <= 3 and (margin[differ] < 1e-3).all(), (differ.sum(), margin[differ])


def test_scores_come_from_held_out_predictions_only():
    # Each instance has its own indicator feature and a random label: fitted in-sample, a classifier reproduces
    # its training labels; out of sample it can only guess, so p ~ 0.5 (in-sample rounds would push it to 1).
    n = 200
    rng = np.random.default_rng(1)
    y = rng.integers(0, 2, size=n)
    x = np.eye(n, dtype=np.float32)
    scores = aflite.predictability_scores(x, y, m=32, t=100, seed=0, C=100.0, device="cpu")
    # the partitions, redrawn: each instance is predicted exactly in the partitions that held it out
    draw = np.random.default_rng(0)
    held_out = np.full(n, 32)
    for _ in range(32):
        held_out[draw.choice(n, size=100, replace=False)] -= 1
    np.testing.assert_array_equal(scores.n_predictions, held_out)
    valid = ~np.isnan(scores.predictability)
    assert 0.3 < np.mean(scores.predictability[valid]) < 0.7
    assert np.isnan(scores.predictability[held_out == 0]).all()


def test_greedy_slice_respects_tau_and_k():
    p = np.array([0.9, 0.74, np.nan, 1.0, 0.75, 0.8])
    assert aflite.select_greedy(p, k=2, tau=0.75).tolist() == [0, 3]  # the two highest: 1.0 and 0.9
    assert aflite.select_greedy(p, k=10, tau=0.75).tolist() == [0, 3, 4, 5]  # 0.74 and NaN never qualify
    assert aflite.select_greedy(p, k=3, tau=0.95).tolist() == [3]


def test_slice_sampling_draws_in_proportion_to_the_score():
    p = np.array([0.8, 1.0, 0.5])  # 0.5 is below tau and never drawn
    picks = np.array([aflite.select_sample(p, k=1, tau=0.75, rng=np.random.default_rng(s))[0] for s in range(4000)])
    assert not (picks == 2).any()
    share = np.mean(picks == 1)
    # P(1) = 1.0 / (0.8 + 1.0) = 0.5556; binomial sd over 4000 draws = 0.0079: 4 sd
    assert abs(share - 1.0 / 1.8) < 4 * np.sqrt(0.5556 * 0.4444 / 4000)


def _known_bias(seed=0):
    """400 instances, 2 labels: the first 200 carry a feature equal to their label (the bias), the rest only
    label-independent noise. AFLite must remove the biased ones first."""
    rng = np.random.default_rng(seed)
    n = 400
    y = rng.integers(0, 2, size=n)
    x = rng.normal(size=(n, 4)).astype(np.float32)
    x[:200, 0] = np.where(y[:200] == 1, 3.0, -3.0) + rng.normal(scale=0.3, size=200)
    return x, y


def test_known_biased_instances_are_removed_first_and_the_unbiased_kept():
    x, y = _known_bias()
    result = aflite.aflite(x, y, n=200, m=16, t=150, k=40, tau=0.75, seed=0, device="cpu", log_fn=lambda _: None)
    removed = np.setdiff1d(np.arange(400), result.kept)
    assert len(removed) >= 160 and (removed < 200).mean() > 0.95
    assert (result.kept >= 200).sum() >= 195  # almost every unbiased instance stays
    first = result.iterations[0]
    assert first["removed"] == 40 and all(pos < 200 for pos in first["removed_positions"])


def test_stops_when_fewer_than_k_reach_tau_and_is_reproducible():
    x, y = _known_bias()
    # with m = 64 the noise instances' scores concentrate near 0.5, so few reach tau once the biased ones are gone
    a = aflite.aflite(x, y, n=100, m=64, t=50, k=40, tau=0.75, seed=3, device="cpu", log_fn=lambda _: None)
    b = aflite.aflite(x, y, n=100, m=64, t=50, k=40, tau=0.75, seed=3, device="cpu", log_fn=lambda _: None)
    np.testing.assert_array_equal(a.kept, b.kept)
    assert "fewer than k=40" in a.stopped and a.iterations[-1]["removed"] < 40
    assert len(a.kept) == 200 and (a.kept >= 200).sum() >= 190  # stopped by tau at the unbiased half, before n
    sampled = aflite.aflite(
        x, y, n=300, m=16, t=150, k=40, tau=0.75, seed=3, selection="sample", device="cpu", log_fn=lambda _: None
    )
    assert len(sampled.kept) <= 300 and "n = 300" in sampled.stopped


def test_each_iteration_removes_the_top_k_of_its_own_scores_on_what_is_left():
    # Algorithm 1 re-derived around its two parts: iteration i scores the instances still in S (partitions seeded
    # seed * 1_000_003 + i), removes the k highest p̃ >= τ (ties by position), and the next iteration scores the rest
    x, y = _known_bias()
    result = aflite.aflite(x, y, n=200, m=8, t=100, k=30, tau=0.75, seed=4, device="cpu", log_fn=lambda _: None)
    remaining = np.arange(len(y))
    for i, record in enumerate(result.iterations):
        p = aflite.predictability_scores(x[remaining], y[remaining], m=8, t=100, seed=4 * 1_000_003 + i,
                                         device="cpu").predictability
        np.testing.assert_array_equal(result.scores[i][remaining], p)
        eligible = [j for j in range(len(p)) if p[j] >= 0.75]  # NaN compares False
        top = sorted(sorted(eligible, key=lambda j: (-p[j], j))[: record["slice"]])
        assert record["removed_positions"] == remaining[top].tolist() and record["size_before"] == len(remaining)
        remaining = np.delete(remaining, top)
    np.testing.assert_array_equal(result.kept, remaining)
    assert len(result.iterations) >= 2


def test_bad_arguments_are_named():
    x, y = _known_bias()
    with pytest.raises(ValueError, match="training part t"):
        aflite.predictability_scores(x, y, m=4, t=400, seed=0, device="cpu")
    with pytest.raises(ValueError, match="selection must be one of"):
        aflite.aflite(x, y, n=110, m=4, t=100, k=5, tau=0.75, selection="best")
    with pytest.raises(ValueError, match="0 < t < n"):
        aflite.aflite(x, y, n=100, m=4, t=100, k=5, tau=0.75)


def test_an_interrupted_run_resumes_per_iteration_to_the_uninterrupted_result(tmp_path):
    x, y = _known_bias()
    kwargs = dict(n=150, m=16, t=100, k=30, tau=0.75, seed=5, device="cpu")
    whole = aflite.aflite(x, y, log_fn=lambda _: None, **kwargs)
    assert len(whole.iterations) >= 3

    class Preempted(Exception):
        pass

    def preempt_after_second(message):
        if message.startswith("AFLite iteration 1:"):
            raise Preempted

    state = tmp_path / "state"
    with pytest.raises(Preempted):
        aflite.aflite(x, y, log_fn=preempt_after_second, state_dir=state, **kwargs)
    assert sorted(p.name for p in state.glob("iteration_*")) == ["iteration_00000.npz", "iteration_00001.npz"]
    messages = []
    resumed = aflite.aflite(x, y, log_fn=messages.append, state_dir=state, **kwargs)
    assert messages[0].startswith("AFLite resumed after iteration 1")
    np.testing.assert_array_equal(resumed.kept, whole.kept)
    assert [r["removed_positions"] for r in resumed.iterations] == [r["removed_positions"] for r in whole.iterations]
    np.testing.assert_array_equal(np.stack(resumed.scores), np.stack(whole.scores))
    assert resumed.stopped == whole.stopped
    # a finished state resumes to the same result without fitting anything
    again = aflite.aflite(x, y, log_fn=lambda _: None, state_dir=state, **kwargs)
    np.testing.assert_array_equal(again.kept, whole.kept)
    with pytest.raises(ValueError, match=r"differs in \['tau'\]"):
        aflite.aflite(x, y, log_fn=lambda _: None, state_dir=state, **{**kwargs, "tau": 0.8})


def test_classifiers_fitted_in_chunks_give_identical_scores():
    # issue 28: the paper-scale gather (m x t x d floats, 15.6 GB on an H200) does not fit a 16 GB card; under a
    # memory cap the m classifiers are fitted a chunk at a time, with the same scores
    rng = np.random.default_rng(3)
    n, d, m, t = 1000, 96, 6, 600
    x = rng.normal(size=(n, d)).astype(np.float32)
    y = (x[:, 0] + 0.7 * rng.normal(size=n) > 0).astype(int) + (x[:, 1] > 1)  # 3 classes, a noisy signal
    # one part is t * d * 4 bytes = 0.22 MB: a 1 MB cap holds 4 classifiers' parts, 6 need 2 chunks
    assert aflite.classifiers_per_chunk(m, t, d, 2**20) == 4
    assert aflite.classifiers_per_chunk(m, t, d, 10 * 2**30) == m and aflite.classifiers_per_chunk(m, t, d, 1) == 1
    whole = aflite.predictability_scores(x, y, m=m, t=t, seed=5, device="cpu", gather_memory_mb=10_000)
    for cap_mb in (1,):  # 4 classifiers, then 2
        chunked = aflite.predictability_scores(x, y, m=m, t=t, seed=5, device="cpu", gather_memory_mb=cap_mb)
        np.testing.assert_array_equal(chunked.predictability, whole.predictability)
        np.testing.assert_array_equal(chunked.n_predictions, whole.n_predictions)
        assert chunked.mean_heldout_accuracy == whole.mean_heldout_accuracy
    assert 0.55 < whole.mean_heldout_accuracy < 0.95  # a fit that learned something, not chance
    # one classifier at a time: the fitted weights themselves are the same, bit for bit
    rows = torch.as_tensor(np.stack([rng.choice(n, size=t, replace=False) for _ in range(m)]))
    xt, yt = torch.as_tensor(x), torch.as_tensor(y)
    w_all, b_all = aflite.fit_logistic_batched(xt, yt, rows, 3)
    w_one, b_one = aflite.fit_logistic_batched(xt, yt, rows, 3, chunk=1)  # 6 chunks
    assert torch.equal(w_all, w_one) and torch.equal(b_all, b_one)


def _separable(n=100, seed=0):
    """Two labels far apart on the first dimension: every held-out prediction is right, so every scored p̃ is 1 and
    the τ rule never stops a run; only n does."""
    rng = np.random.default_rng(seed)
    y = np.arange(n) % 2
    x = rng.normal(scale=0.1, size=(n, 3)).astype(np.float32)
    x[:, 0] += np.where(y == 1, 5.0, -5.0)
    return x, y


def test_a_target_size_n_is_reached_exactly_by_cutting_the_last_slice(tmp_path):
    x, y = _separable()
    kwargs = dict(n=50, m=8, t=20, k=15, tau=0.75, seed=0, device="cpu", log_fn=lambda _: None)
    result = aflite.aflite(x, y, state_dir=tmp_path / "state", **kwargs)
    # by hand: 100 -> 85 -> 70 -> 55 (three full slices of k = 15), then 55 - 50 = 5 instead of 15, which would
    # have cut S to 40 < n
    assert [r["size_before"] for r in result.iterations] == [100, 85, 70, 55]
    assert [r["slice"] for r in result.iterations] == [15, 15, 15, 5]
    assert [r["removed"] for r in result.iterations] == [15, 15, 15, 5]
    assert len(result.kept) == 50 and result.stopped == "|S| = 50 reached the target size n = 50"
    assert all(r["n_above_tau"] > r["slice"] for r in result.iterations)  # τ never decided
    # n on a slice boundary: 100 -> 85 -> 70, no cut slice and no further iteration
    even = aflite.aflite(x, y, n=70, m=8, t=20, k=15, tau=0.75, seed=0, device="cpu", log_fn=lambda _: None)
    assert [r["removed"] for r in even.iterations] == [15, 15] and len(even.kept) == 70
    # resumed from its saved iterations, the run ends the same way: the cut slice (5 < k) is not read as the k rule
    again = aflite.aflite(x, y, state_dir=tmp_path / "state", **kwargs)
    np.testing.assert_array_equal(again.kept, result.kept)
    assert len(again.iterations) == 4 and again.stopped == result.stopped
