"""Tests of spurious.lexical.reweight: measures on hand-computed examples, feature selection, and the solver."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from spurious.lexical.reweight import (
    ReweightCollapse,
    _Objective,
    conditional_label_distribution,
    dense_reference_weights,
    err,
    err_both,
    label_balance,
    read_weights,
    select_features,
    solve_weights,
)

# --------------------------------------------------------------------------------------------------------------------
# A tiny example, 5 instances, 3 labels, features A, B, C:
#   i0: y=0, {A (twice), B}   i1: y=1, {A}   i2: y=2, {A, B}   i3: y=0, {A}   i4: y=1, {C}
# i0's count 2 for A checks that counts mean "present"; an explicit stored zero (i1, C) checks that it means absent.
# --------------------------------------------------------------------------------------------------------------------
TINY_LABELS = np.array([0, 1, 2, 0, 1])


def tiny_features() -> sp.csr_matrix:
    data = np.array([2.0, 1.0, 1.0, 0.0, 1.0, 1.0, 1.0, 1.0])
    indices = np.array([0, 1, 0, 2, 0, 1, 0, 2])
    indptr = np.array([0, 2, 4, 6, 7, 8])
    return sp.csr_matrix((data, indices, indptr), shape=(5, 3))


def test_conditional_label_distribution_uniform_by_hand():
    # A in i0,i1,i2,i3 with labels 0,1,2,0 -> (2/4, 1/4, 1/4); B in i0,i2 -> (1/2, 0, 1/2); C in i4 -> (0, 1, 0).
    expected = np.array([[0.5, 0.25, 0.25], [0.5, 0.0, 0.5], [0.0, 1.0, 0.0]])
    got = conditional_label_distribution(tiny_features(), TINY_LABELS, 3)
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-15)


def test_conditional_label_distribution_weighted_by_hand():
    # Weights (1, 2, 1, 1, 0), normalised by 5 (the normalisation cancels in the ratio).
    # A: label 0 mass i0 + i3 = 2, label 1 mass i1 = 2, label 2 mass i2 = 1, total 5 -> (2/5, 2/5, 1/5).
    # B: i0 (label 0) 1, i2 (label 2) 1 -> (1/2, 0, 1/2).  C: only i4, weight 0 -> undefined (NaN).
    got = conditional_label_distribution(tiny_features(), TINY_LABELS, 3, weights=[1, 2, 1, 1, 0])
    np.testing.assert_allclose(got[:2], [[0.4, 0.4, 0.2], [0.5, 0.0, 0.5]], rtol=0, atol=1e-15)
    assert np.isnan(got[2]).all()


def test_err_by_hand():
    # Uniform: A |1/2-1/3| + |1/4-1/3| + |1/4-1/3| = 1/6 + 1/12 + 1/12 = 1/3
    #          B 1/6 + 1/3 + 1/6 = 2/3;  C 1/3 + 2/3 + 1/3 = 4/3;  Err = (1/3 + 2/3 + 4/3) / (3 * 3) = 7/27.
    assert err(tiny_features(), TINY_LABELS, 3) == pytest.approx(7 / 27, abs=1e-15)
    # Weights (1, 2, 1, 1, 0): C has no weight and is left out of the mean over features.
    #   A |2/5-1/3| + |2/5-1/3| + |1/5-1/3| = 1/15 + 1/15 + 2/15 = 4/15;  B 1/6 + 1/3 + 1/6 = 2/3 = 10/15
    #   Err = (4/15 + 10/15) / (2 * 3) = 14/90 = 7/45.
    assert err(tiny_features(), TINY_LABELS, 3, weights=[1, 2, 1, 1, 0]) == pytest.approx(7 / 45, abs=1e-15)


def test_err_against_the_label_distribution_by_hand():
    # target q(y) instead of 1/L: Err = mean over features of label_balance (hand values in the test below):
    # uniform weights (1/10 + 4/15 + 2/5) / 3 = 23/90; weights (1, 2, 1, 1, 0): (0 + 4/15) / 2 = 2/15 (C left out)
    assert err(tiny_features(), TINY_LABELS, 3, target="label_distribution") == pytest.approx(23 / 90, abs=1e-15)
    got = err(tiny_features(), TINY_LABELS, 3, weights=[1, 2, 1, 1, 0], target="label_distribution")
    assert got == pytest.approx(2 / 15, abs=1e-15)
    assert (err_both(tiny_features(), TINY_LABELS, 3)
            == pytest.approx({"uniform": 7 / 27, "label_distribution": 23 / 90}))
    # balanced labels: both targets agree
    balanced = np.array([0, 1, 2, 0, 1, 2])
    features = sp.csr_matrix(np.array([[1, 0], [1, 1], [0, 1], [1, 1], [0, 1], [1, 0]]))
    assert err(features, balanced, 3) == pytest.approx(err(features, balanced, 3, target="label_distribution"))
    with pytest.raises(ValueError, match="Err target"):
        err(tiny_features(), TINY_LABELS, 3, target="prior")


def test_label_balance_by_hand():
    # Uniform label distribution q(y): labels 0,1,2,0,1 -> (2/5, 2/5, 1/5).
    #   A (1/2, 1/4, 1/4): |1/2-2/5| + |1/4-2/5| + |1/4-1/5| = 1/10 + 3/20 + 1/20 = 3/10 -> mean 1/10
    #   B (1/2, 0, 1/2):   1/10 + 2/5 + 3/10 = 4/5 -> mean 4/15
    #   C (0, 1, 0):       2/5 + 3/5 + 1/5 = 6/5 -> mean 2/5
    got = label_balance(tiny_features(), TINY_LABELS, 3)
    np.testing.assert_allclose(got, [1 / 10, 4 / 15, 2 / 5], rtol=0, atol=1e-15)
    # Weights (1, 2, 1, 1, 0): q(y) = ((1+1)/5, 2/5, 1/5) = (2/5, 2/5, 1/5), equal to A's conditional -> 0;
    # B is unchanged (4/15); C has no weight -> NaN.
    got = label_balance(tiny_features(), TINY_LABELS, 3, weights=[1, 2, 1, 1, 0])
    np.testing.assert_allclose(got[:2], [0.0, 4 / 15], rtol=0, atol=1e-15)
    assert np.isnan(got[2])


# --------------------------------------------------------------------------------------------------------------------
# select_features
# --------------------------------------------------------------------------------------------------------------------


def selection_example() -> tuple[sp.csr_matrix, np.ndarray, list[str]]:
    """6 instances (labels 0,1,2,0,1,2), 4 features:

    a: instances 0, 1, 2 (labels 0, 1, 2)         -> 3 instances, every label
    b: instances 0, 1, 3, 4 (labels 0, 1, 0, 1)   -> 4 instances, no label 2
    c: instances 0, 5 (labels 0, 2)               -> 2 instances, no label 1
    d: instance 2 only, but 5 tokens there        -> 1 instance (5 tokens)
    """
    rows = [0, 1, 2, 0, 1, 3, 4, 0, 5, 2]
    cols = [0, 0, 0, 1, 1, 1, 1, 2, 2, 3]
    vals = [1, 1, 1, 1, 1, 1, 1, 1, 1, 5]
    features = sp.csr_matrix((np.array(vals, dtype=float), (rows, cols)), shape=(6, 4))
    return features, np.array([0, 1, 2, 0, 1, 2]), ["a", "b", "c", "d"]


def test_select_features_min_count_boundary_and_missing_label():
    features, labels, vocab = selection_example()
    at_3 = select_features(features, labels, 3, vocab, min_count=3)
    assert at_3.columns.tolist() == [0]  # a has exactly 3 instances: kept at the boundary
    assert at_3.names == ["a"]
    assert at_3.dropped_missing_label == ["b"]  # frequent enough but lacks label 2; c (2) and d (1) are too rare
    at_4 = select_features(features, labels, 3, vocab, min_count=4)
    assert at_4.columns.tolist() == []  # a (3 instances) now below the threshold, and not "dropped" either
    assert at_4.dropped_missing_label == ["b"]
    at_2 = select_features(features, labels, 3, vocab, min_count=2)
    assert at_2.names == ["a"]
    assert at_2.dropped_missing_label == ["b", "c"]  # vocabulary order


def test_select_features_counts_instances_not_tokens():
    features, labels, vocab = selection_example()
    # d has 5 tokens but 1 instance: with min_count=1 it is frequent enough and lacks labels 0 and 1.
    assert "d" in select_features(features, labels, 3, vocab, min_count=1).dropped_missing_label
    assert "d" not in select_features(features, labels, 3, vocab, min_count=2).dropped_missing_label


def test_select_features_can_count_occurrences_instead():
    features, labels, vocab = selection_example()
    # occurrences: d's 5 tokens reach min_count 5 (it is then dropped for lacking labels 0 and 1); a, b, c have one
    # token per instance, so they count as before
    at_5 = select_features(features, labels, 3, vocab, min_count=5, unit="occurrences")
    assert at_5.dropped_missing_label == ["d"] and at_5.names == []
    at_3 = select_features(features, labels, 3, vocab, min_count=3, unit="occurrences")
    assert at_3.names == ["a"] and at_3.dropped_missing_label == ["b", "d"]
    with pytest.raises(ValueError, match="unit must be one of"):
        select_features(features, labels, 3, vocab, unit="tokens")
    with pytest.raises(ValueError, match="needs a count matrix"):
        select_features(features * 0.5, labels, 3, vocab, unit="occurrences")


# --------------------------------------------------------------------------------------------------------------------
# The solver
# --------------------------------------------------------------------------------------------------------------------


def balanced_by_known_weights() -> tuple[sp.csr_matrix, np.ndarray, np.ndarray]:
    """A problem whose exact solution is known: features A, B, C, three labels.

    label 0: 3 instances {A,B}, {B,C}, {C,A}               -> each feature in 2 label-0 instances
    label 1: the same 3 instances twice (6 instances)       -> each feature in 4 label-1 instances
    label 2: 1 instance {A,B,C}                             -> each feature in 1 label-2 instance
    Weights 1/8 (label 0), 1/16 (label 1), 1/4 (label 2) sum to 3/8 + 6/16 + 1/4 = 1 and give every feature the label
    masses 2/8 = 4/16 = 1/4: exactly balanced. The solution reached from z = 0 is this one: the cyclic relabelling
    A->B->C maps each label's instances onto themselves and copies are identical, so the iterates keep one weight
    per label; among such weights the balanced one is unique (two equations, 2/8 w0 = 4/16 w1 = w2 / 4 up to scale).
    """
    pairs = [[0, 1], [1, 2], [2, 0]]
    sets = pairs + pairs + pairs + [[0, 1, 2]]
    labels = np.array([0] * 3 + [1] * 6 + [2])
    rows = [i for i, s in enumerate(sets) for _ in s]
    cols = [j for s in sets for j in s]
    features = sp.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(len(sets), 3))
    expected = np.array([1 / 8] * 3 + [1 / 16] * 6 + [1 / 4])
    return features, labels, expected


def test_solve_weights_reaches_known_exact_solution():
    features, labels, expected = balanced_by_known_weights()
    # Uniform: every feature has label counts (2, 4, 1) -> |2/7-1/3| + |4/7-1/3| + |1/7-1/3| = (1 + 5 + 4)/21,
    # mean over labels 10/63 for every feature.
    assert err(features, labels, 3) == pytest.approx(10 / 63, abs=1e-15)
    result = solve_weights(features, labels, 3, device="cpu")
    assert result.converged
    assert result.q.dtype == np.float64 and result.q.sum() == pytest.approx(1.0, abs=1e-12)
    assert err(features, labels, 3, result.q) < 1e-3
    np.testing.assert_allclose(result.q, expected, rtol=1e-4)
    objectives = [row["objective"] for row in result.history]
    assert len(result.history) == result.steps + 1  # the uniform start, then one row per step
    assert [row["step"] for row in result.history] == list(range(result.steps + 1))
    assert all(b <= a for a, b in zip(objectives, objectives[1:], strict=False))  # Wolfe line search: monotone
    assert objectives[-1] <= 1e-8 < objectives[1] < objectives[0] == 1.0
    # the start's Err is the hand value; every row's Err and effective size are those of its iterate
    assert result.history[0]["err"] == pytest.approx(10 / 63) and result.history[0]["ess"] == 10
    assert result.err_uniform == pytest.approx(10 / 63) and result.chosen_step == result.steps
    assert result.err == pytest.approx(err(features, labels, 3, result.q), rel=1e-9)
    # 1 / sum q^2 of (1/8 x 3, 1/16 x 6, 1/4): 1 / (3/64 + 6/256 + 1/16) = 256 / 34
    assert result.ess == pytest.approx(256 / 34, rel=1e-3)


def test_solve_weights_is_deterministic():
    features, labels = random_problem(seed=3)
    first = solve_weights(features, labels, 3, device="cpu", max_steps=50)
    second = solve_weights(features, labels, 3, device="cpu", max_steps=50)
    assert np.array_equal(first.q, second.q)
    assert [r["objective"] for r in first.history] == [r["objective"] for r in second.history]


def test_solve_weights_logs_every_log_every_steps_and_the_last():
    features, labels = random_problem(seed=4)
    messages: list[str] = []
    result = solve_weights(features, labels, 3, device="cpu", max_steps=7, tol=0.0, log=messages.append, log_every=3)
    steps = [m for m in messages if m.startswith("reweight step")]
    assert result.steps == 7 and not result.converged
    assert [int(m.split()[2].rstrip(":")) for m in steps] == [3, 6, 7]


def random_problem(seed: int, n: int = 240, d: int = 12, n_labels: int = 3) -> tuple[sp.csr_matrix, np.ndarray]:
    """Random biased problem: each feature prefers one label; every feature occurs in every label."""
    rng = np.random.default_rng(seed)
    labels = np.arange(n) % n_labels
    preferred = rng.integers(0, n_labels, d)
    p = np.where(preferred[None, :] == labels[:, None], 0.45, 0.2)
    dense = rng.random((n, d)) < p
    return sp.csr_matrix(dense.astype(float)), labels


def test_objective_gradient_matches_autograd():
    features, labels = random_problem(seed=5, n=60, d=7)
    n = features.shape[0]
    objective = _Objective(features.tocsr(), labels, 3, torch.device("cpu"))
    objective.scale = 0.37
    z = torch.from_numpy(np.random.default_rng(0).normal(size=n))
    value, grad = objective.value_and_grad(z)
    # Independent dense computation with autograd.
    zz = z.clone().requires_grad_(True)
    c = torch.from_numpy(np.eye(3)[labels] - 1 / 3)
    g = torch.from_numpy(features.toarray()).T @ (torch.softmax(zz, 0)[:, None] * c)
    ref = (g * g).sum() / 0.37
    ref.backward()
    assert value.item() == pytest.approx(ref.item(), rel=1e-12)
    np.testing.assert_allclose(grad.numpy(), zz.grad.numpy(), rtol=1e-9, atol=1e-15)


def test_adam_matches_dense_reference_step_for_step():
    # Same algorithm (Adam, lr 0.05, from z = 0) on the sparse and the dense implementation: the objectives differ
    # only by a constant factor, to which Adam is invariant up to its eps, so the weights agree closely.
    features, labels = random_problem(seed=6)
    ours = solve_weights(features, labels, 3, optimizer="adam", max_steps=200, tol=0.0, objective_tol=0.0)
    dense = dense_reference_weights(features, labels, 3, steps=200)
    assert ours.steps == 200
    np.testing.assert_allclose(ours.q_final, dense, rtol=1e-4)


def test_default_solver_agrees_with_dense_reference():
    # d * (L - 1) = 60 constraints on 40 instances: the constraints cannot all hold, so the optimum has Err > 0 and
    # the agreement is not just "both reach 0".
    features, labels = random_problem(seed=7, n=40, d=30)
    ours = solve_weights(features, labels, 3, device="cpu", max_steps=2000)
    dense = dense_reference_weights(features, labels, 3, steps=4000, lr=0.02)
    err_ours, err_dense = err(features, labels, 3, ours.q_final), err(features, labels, 3, dense)
    assert err_ours > 0.01  # not trivially balanced
    assert err_ours < err(features, labels, 3)
    assert abs(err_ours - err_dense) < 1e-3  # measured: 0.1215 vs 0.1218 (uniform 0.1368)
    assert err(features, labels, 3, ours.q) <= err_ours  # the returned iterate is the lowest-Err one


def pair_problem(seed: int = 0, n: int = 60, d: int = 40, shared: int = 10) -> tuple[sp.csr_matrix, np.ndarray]:
    """A random biased two-label problem (each feature prefers one label; n instances, d features: more constraints
    than instances, so no weighting of them balances every feature) and two more instances with the same features
    (the first ``shared``) and opposite labels. q = (1/2, 1/2) on that pair makes the multiplied-out objective 0:
    the pair balances its features, and every other feature's constraint vanishes with its weight."""
    rng = np.random.default_rng(seed)
    labels = np.arange(n) % 2
    preferred = rng.integers(0, 2, d)
    dense = rng.random((n, d)) < np.where(preferred[None, :] == labels[:, None], 0.45, 0.2)
    pair = np.zeros((2, d), dtype=bool)
    pair[:, :shared] = True
    return sp.csr_matrix(np.vstack([dense, pair]).astype(float)), np.concatenate([labels, [0, 1]])


def _lowest_err_above(history: list[dict[str, float]], floor: float) -> dict[str, float]:
    """The selection rule, re-applied to the history: the lowest Err among the steps >= 1 at or above the floor."""
    return min((row for row in history[1:] if row["ess"] >= floor), key=lambda row: row["err"])


def test_two_identical_opposite_label_instances_do_not_take_all_the_weight():
    features, labels = pair_problem()
    n = features.shape[0]
    result = solve_weights(features, labels, 2, device="cpu", max_steps=3000)
    # the paper's procedure (the final iterate) collapses onto the pair: effective size 2, Err worse than uniform
    assert result.converged and result.history[-1]["objective"] <= 1e-8
    assert result.q_final[-2:].sum() > 0.999 and 1.0 / np.sum(result.q_final**2) < 2.01
    assert err(features, labels, 2, result.q_final) > result.err_uniform == pytest.approx(err(features, labels, 2))
    # the returned q: the lowest-Err iterate with an effective size of at least 10 % of n, better than uniform
    assert result.min_ess == pytest.approx(0.1 * n)
    assert 1.0 / np.sum(result.q**2) == pytest.approx(result.ess) and result.ess >= 0.1 * n
    assert err(features, labels, 2, result.q) == pytest.approx(result.err) and result.err < 0.7 * result.err_uniform
    chosen = _lowest_err_above(result.history, 0.1 * n)
    assert result.chosen_step == chosen["step"] < result.steps and "effective sample size" in result.selection
    # every history row's Err and effective size are its iterate's: checked on the last one
    assert result.history[-1]["err"] == pytest.approx(err(features, labels, 2, result.q_final), rel=1e-9)
    assert result.history[-1]["ess"] == pytest.approx(1.0 / np.sum(result.q_final**2), rel=1e-9)


def test_a_solve_without_an_iterate_above_the_floor_fails_in_one_line_naming_the_setting():
    features, labels = pair_problem()
    with pytest.raises(ReweightCollapse, match=r"below min_ess_fraction 0.999 x 62 = 61.9") as caught:
        solve_weights(features, labels, 2, device="cpu", max_steps=50, min_ess_fraction=0.999)
    assert "\n" not in str(caught.value) and "lower lexical.reweight.min_ess_fraction" in str(caught.value)
    with pytest.raises(ValueError, match="min_ess_fraction must be"):
        solve_weights(features, labels, 2, min_ess_fraction=1.5)
    # no floor: the lowest Err of every iterate, whatever its size
    free = solve_weights(features, labels, 2, device="cpu", max_steps=3000, min_ess_fraction=0.0)
    assert free.err == min(row["err"] for row in free.history[1:])


@pytest.fixture(scope="module")
def qnli_dev():
    """QNLI dev (5,463 pairs) from the mirror: its token-count matrix, vocabulary and labels."""
    import pandas as pd

    from spurious.lexical.features import feature_matrix
    from tests.conftest import SHARED

    frame = pd.read_parquet(SHARED / "data" / "qnli" / "validation" / "0000.parquet")
    matrix, vocabulary = feature_matrix(frame["question"], frame["sentence"], counting="tokens")
    return matrix, vocabulary, frame["label"].to_numpy()


def test_qnli_dev_min_count_of_instances_or_occurrences(qnli_dev):
    matrix, vocabulary, labels = qnli_dev
    # the two readings of the paper's "# Features" at a minimum count of 5
    assert len(select_features(matrix, labels, 2, vocabulary, min_count=5).columns) == 4613
    assert len(select_features(matrix, labels, 2, vocabulary, min_count=5, unit="occurrences").columns) == 5067


@pytest.mark.parametrize(("min_count", "max_steps"), [(5, 2000), (10, 100), (20, 100)])
def test_qnli_dev_reweighting_lowers_err_without_collapsing(qnli_dev, min_count, max_steps):
    # at a minimum count of 5 the solve converges (step ~800) onto two pairs that share a sentence, with opposite
    # labels and the same features: effective size 2, and an Err about twice the chosen iterate's (measured 0.116 with
    # one thread and 0.131 with two, against 0.117 uniform: the residual weights of the other pairs, ~1e-6 and below,
    # are rounding noise that still decides which features count as present). The returned q is the best iterate above
    # the floor (measured: step 101, Err 0.061, effective size 1,743). At 10 and 20, 100 steps suffice.
    matrix, vocabulary, labels = qnli_dev
    features = matrix[:, select_features(matrix, labels, 2, vocabulary, min_count=min_count).columns]
    result = solve_weights(features, labels, 2, device="cpu", max_steps=max_steps)
    n = len(labels)
    assert result.err < result.err_uniform and result.ess >= 0.1 * n
    assert result.err == pytest.approx(err(features, labels, 2, result.q), rel=1e-9)
    assert result.chosen_step == _lowest_err_above(result.history, 0.1 * n)["step"]
    if min_count == 5:
        assert result.converged and 1.0 / np.sum(result.q_final**2) < 2.01
        assert err(features, labels, 2, result.q_final) > 1.5 * result.err
        assert result.err < 0.07 and 50 <= result.chosen_step <= 200


# --------------------------------------------------------------------------------------------------------------------
# Invalid inputs
# --------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: err(tiny_features(), [0, 1, 3, 0, 1], 3), r"labels out of range \[0, 3\): found 3"),
        (lambda: err(tiny_features(), [0, -1, 2, 0, 1], 3), "labels out of range"),
        (lambda: err(tiny_features(), [0, 1, 2], 3), "labels has 3 entries but features has 5 rows"),
        (lambda: err(tiny_features(), [[0, 1, 2, 0, 1]], 3), "labels must be 1-D"),
        (lambda: err(tiny_features(), [0.5, 1, 2, 0, 1], 3), "labels must be integers"),
        (lambda: err(tiny_features().toarray(), TINY_LABELS, 3), "scipy.sparse"),
        (lambda: err(tiny_features(), TINY_LABELS, 1), "n_labels must be at least 2"),
        (lambda: err(tiny_features(), TINY_LABELS, 3, weights=[1, 1, 1]), r"weights must have shape \(5,\)"),
        (lambda: err(tiny_features(), TINY_LABELS, 3, weights=[1, -1, 1, 1, 1]), "nonnegative"),
        (lambda: err(tiny_features(), TINY_LABELS, 3, weights=[0, 0, 0, 0, 0]), "positive sum"),
        (lambda: err(sp.csr_matrix((2, 3)), [0, 1], 3), "no feature is present"),
        (lambda: label_balance(tiny_features(), [0, 1, 2, 0], 3), "labels has 4 entries"),
        (lambda: select_features(tiny_features(), TINY_LABELS, 3, ["a", "b"]), "vocabulary has 2 entries"),
        (lambda: select_features(tiny_features(), TINY_LABELS, 3, ["a", "b", "c"], min_count=0), "min_count"),
        (lambda: solve_weights(tiny_features(), [0, 1, 5, 0, 1], 3), "labels out of range"),
        (lambda: solve_weights(tiny_features(), TINY_LABELS, 3, optimizer="sgd"), "optimizer must be one of"),
        (lambda: solve_weights(tiny_features(), TINY_LABELS, 3, max_steps=0), "max_steps"),
        (lambda: solve_weights(tiny_features(), TINY_LABELS, 3, tol=-1.0), "tol must be"),
        (lambda: solve_weights(tiny_features(), TINY_LABELS, 3, device="tpu9"), "tpu9"),
        (lambda: dense_reference_weights(tiny_features(), TINY_LABELS[:4], 3, steps=1), "labels has 4 entries"),
    ],
)
def test_invalid_inputs_raise_value_error(call, message):
    with pytest.raises(ValueError, match=message):
        call()


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_cuda_requested_without_cuda():
    with pytest.raises(ValueError, match="torch sees no CUDA device; use device: auto or cpu"):
        solve_weights(tiny_features(), TINY_LABELS, 3, device="cuda")


def test_read_weights_aligns_to_the_training_ids_and_names_missing_ones(tmp_path):
    import pandas as pd

    from spurious.core import io

    path = tmp_path / "weights.parquet"
    io.write_parquet(pd.DataFrame({"id": ["a", "b", "c"], "q": [0.5, 0.2, 0.3]}), path)
    np.testing.assert_allclose(read_weights(path, ["c", "a", "b"]), [0.3, 0.5, 0.2])
    with pytest.raises(ValueError, match=r"1 of 2 ids have no weight \(first: \['z'\]\)"):
        read_weights(path, ["a", "z"])
    with pytest.raises(ValueError, match="probability vector"):
        read_weights(path, ["a", "b"])  # a subset of the split does not sum to 1
