"""Instance reweighting against lexical bias (Serrano, Dodge & Smith 2023, "Stubborn Lexical Bias", §5.1).

A training set has ``n`` instances with labels ``y_i`` in ``{0..L-1}`` and ``d`` binary features ``F_ij`` (word type
``j`` occurs in instance ``i``). A feature is *unbiased* under instance weights ``q`` (a probability vector over the
instances) when every label is equally likely among the instances that contain it:

    q(y | F_j=1) = sum_i q_i F_ij 1{y_i=y} / sum_i q_i F_ij = 1/L        for every feature j and label y   (Eq. 1/4)

The paper finds such weights by optimisation: ``q = softmax(z)`` with one unconstrained ``z_i`` per instance, and the
sum of squared constraint violations, each constraint multiplied by its denominator (footnote 5, which turns the ratio
into a linear function of ``q``):

    objective(q) = sum_j sum_y ( sum_i q_i F_ij (1{y_i=y} - 1/L) )^2 = || F^T (q o C) ||_F^2,   C_iy = 1{y_i=y} - 1/L

The objective is a convex quadratic in ``q``; the softmax keeps ``q`` strictly inside the simplex, so a stationary
point in ``z`` is a global minimum of the objective over the open simplex. Multiplying by the denominator weights each
feature by its squared weighted frequency: frequent features dominate, rare features are balanced last (and the
quality measure :func:`err` weights all features equally, which is why it need not fall to zero).

The multiplied-out objective has a degenerate zero the ratio form (Eq. 1) does not: it is also 0 when the features'
total weight ``sum_i q_i F_ij`` goes to 0. Two instances with the same features and opposite labels balance every
feature they contain, and the rest of the features vanish when the other instances' weights do: q = (1/2, 1/2) on
that pair is a global minimum whose Err (measured on the remaining, almost weightless, instances) can be worse than
uniform, and whose effective sample size ``1 / sum_i q_i^2`` is 2. :func:`solve_weights` therefore keeps the paper's
objective and optimizer but returns the iterate with the lowest Err(q) among those whose effective sample size is at
least ``min_ess_fraction`` of ``n``, and fails when no iterate is (:class:`ReweightCollapse`).

Quality is measured as ``Err(q) = 1/(d L) sum_j sum_y |q(y|F_j=1) - 1/L|`` (:func:`err`; the tables' captions
compare with the overall label distribution instead, ``target="label_distribution"``); the per-feature *label
balance* of the paper's Fig. 2 is ``mean_y |q(y|F_j=1) - q(y)|`` with ``q(y)`` the weighted label distribution
(:func:`label_balance`).

Conventions shared by every public function: ``features`` is a ``scipy.sparse`` matrix of shape ``(n, d)`` whose
nonzero entries mean "present" (counts are fine, explicit zeros are absent); ``labels`` is an array of label ids of
shape ``(n,)`` with values in ``[0, n_labels)`` (integers, or whole-number floats: :mod:`spurious.lexical.labels`);
``weights`` is ``None`` (uniform) or a nonnegative array of shape ``(n,)`` with a positive sum, normalised
internally. Invalid inputs raise :class:`ValueError` naming the problem.
"""

from __future__ import annotations

import math
import os
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import scipy.sparse as sp
import torch

from spurious.core.io import align_to_ids
from spurious.core.train.training import pick_device
from spurious.lexical.labels import check_labels, check_n_labels

OPTIMIZERS = ("lbfgs", "adam")
"""Optimizers accepted by :func:`solve_weights`; the first is the default (see :func:`solve_weights` for why)."""
MIN_COUNT_UNITS = ("instances", "occurrences")
"""What :func:`select_features`'s ``min_count`` counts: the instances containing a type (the default) or its
occurrences, repeats included (the paper's "types that appeared at least 100 times" reads either way)."""
MIN_ESS_FRACTION = 0.1
"""The default floor of :func:`solve_weights` on the effective sample size ``1 / sum q_i^2`` of the q it returns, as
a fraction of the instances: the weighted training set must carry at least the statistical weight of a uniform random
tenth of itself (docs/stubborn-lexical-bias.md argues the value)."""


class ReweightCollapse(ValueError):
    """No iterate of :func:`solve_weights` keeps the effective sample size at or above its floor."""


# --------------------------------------------------------------------------------------------------------------------
# Input validation
# --------------------------------------------------------------------------------------------------------------------


def _presence(features: Any) -> sp.csr_matrix:
    """The ``(n, d)`` 0/1 float64 CSR presence matrix of ``features`` (duplicates summed, explicit zeros dropped)."""
    if not sp.issparse(features):
        raise ValueError(f"features must be a scipy.sparse matrix of shape (n, d), got {type(features).__name__}")
    if len(features.shape) != 2:
        raise ValueError(f"features must be 2-D, got shape {features.shape}")
    csr = sp.csr_matrix(features, copy=True)
    csr.sum_duplicates()
    csr.eliminate_zeros()
    csr.data = np.ones_like(csr.data, dtype=np.float64)
    return csr


def _check_weights(weights: Any, n: int) -> np.ndarray:
    """Weights normalised to sum to one (uniform when ``None``)."""
    if weights is None:
        if n == 0:
            raise ValueError("features has no rows (instances)")
        return np.full(n, 1.0 / n)
    arr = np.asarray(weights, dtype=np.float64)
    if arr.shape != (n,):
        raise ValueError(f"weights must have shape ({n},) like the instances, got {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError("weights must be finite")
    if np.any(arr < 0):
        raise ValueError(f"weights must be nonnegative, found {arr.min()}")
    total = arr.sum()
    if total <= 0:
        raise ValueError("weights must have a positive sum")
    return arr / total


def _prepare(
    features: Any, labels: Any, n_labels: int, weights: Any = None
) -> tuple[sp.csr_matrix, np.ndarray, int, np.ndarray]:
    """Validate the shared arguments; returns (presence CSR, int64 labels, n_labels, normalised weights)."""
    n_labels = check_n_labels(n_labels)
    presence = _presence(features)
    y = check_labels(labels, presence.shape[0], n_labels)
    q = _check_weights(weights, presence.shape[0])
    return presence, y, n_labels, q


def _one_hot(labels: np.ndarray, n_labels: int) -> np.ndarray:
    out = np.zeros((labels.shape[0], n_labels))
    out[np.arange(labels.shape[0]), labels] = 1.0
    return out


# --------------------------------------------------------------------------------------------------------------------
# Measures
# --------------------------------------------------------------------------------------------------------------------


def _conditional(presence: sp.csr_matrix, labels: np.ndarray, n_labels: int, q: np.ndarray) -> np.ndarray:
    joint = np.asarray(presence.T @ (q[:, None] * _one_hot(labels, n_labels)))  # (d, L): sum_i q_i F_ij 1{y_i=y}
    mass = joint.sum(axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(mass > 0, joint / np.where(mass > 0, mass, 1.0), np.nan)


def conditional_label_distribution(features: Any, labels: Any, n_labels: int, weights: Any = None) -> np.ndarray:
    """``q(y | F_j=1)`` for every feature ``j`` and label ``y``, shape ``(d, n_labels)``.

    Rows of features whose instances carry zero total weight (including features that occur nowhere) are NaN: the
    conditional distribution is undefined there, and a NaN cannot be mistaken for a balanced feature.
    """
    presence, y, n_labels, q = _prepare(features, labels, n_labels, weights)
    return _conditional(presence, y, n_labels, q)


ERR_TARGETS = ("uniform", "label_distribution")
"""What :func:`err` compares ``q(y|F_j=1)`` with: ``uniform`` = ``1/L`` (the paper's formula, Eq. 1, and what the
reweighting optimises; the default), ``label_distribution`` = the weighted label distribution ``q(y)`` of the whole
data (the wording of the captions of the paper's Tables 1 and 3). They coincide for balanced labels."""


def err(features: Any, labels: Any, n_labels: int, weights: Any = None, *, target: str = "uniform") -> float:
    """``Err(q) = mean_j mean_y |q(y|F_j=1) - t_y|`` over the features with positive weight (paper Table 1), with
    ``t_y = 1/L`` (``target="uniform"``, the formula) or ``t_y = q(y)``, the label distribution of the whole data
    under the same weights (``target="label_distribution"``, the tables' captions); see :data:`ERR_TARGETS`.

    Features without weight are left out of the mean (their conditional is undefined); raises ValueError when no
    feature is left, since an Err of an empty set would silently read as "perfectly balanced".
    """
    if target not in ERR_TARGETS:
        raise ValueError(f"Err target must be one of {ERR_TARGETS}, got {target!r}")
    presence, y, n_labels, q = _prepare(features, labels, n_labels, weights)
    cond = _conditional(presence, y, n_labels, q)
    present = ~np.isnan(cond[:, 0])
    if not present.any():
        raise ValueError("no feature is present in an instance with positive weight; Err is undefined")
    reference = (
        np.full(n_labels, 1.0 / n_labels) if target == "uniform" else np.bincount(y, weights=q, minlength=n_labels)
    )
    return float(np.mean(np.abs(cond[present] - reference[None, :])))


def err_both(features: Any, labels: Any, n_labels: int, weights: Any = None) -> dict[str, float]:
    """:func:`err` for every target of :data:`ERR_TARGETS`, keyed by target."""
    return {t: err(features, labels, n_labels, weights, target=t) for t in ERR_TARGETS}


def label_balance(features: Any, labels: Any, n_labels: int, weights: Any = None) -> np.ndarray:
    """Per-feature label balance ``mean_y |q(y|F_j=1) - q(y)|``, shape ``(d,)`` (paper Fig. 2).

    ``q(y)`` is the weighted label distribution of the whole data set, so a feature scores 0 when it does not shift
    the label distribution away from the overall one (even if the overall one is itself unbalanced). NaN for features
    without weight.
    """
    presence, y, n_labels, q = _prepare(features, labels, n_labels, weights)
    prior = np.bincount(y, weights=q, minlength=n_labels)
    cond = _conditional(presence, y, n_labels, q)
    return np.mean(np.abs(cond - prior[None, :]), axis=1)


# --------------------------------------------------------------------------------------------------------------------
# Feature selection
# --------------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FeatureSelection:
    """Features kept for reweighting.

    ``columns`` are the kept column indices in vocabulary order, ``names`` their vocabulary entries, and
    ``dropped_missing_label`` the names of features that were frequent enough but lack an instance of some label:
    no reweighting can balance those (the missing label's conditional stays 0), so keeping them would only pull the
    optimum away from the features that can be balanced.
    """

    columns: np.ndarray
    names: list[str]
    dropped_missing_label: list[str] = field(default_factory=list)


def select_features(
    features: Any,
    labels: Any,
    n_labels: int,
    vocabulary: Sequence[str],
    min_count: int = 100,
    *,
    unit: str = "instances",
) -> FeatureSelection:
    """Keep the features counted at least ``min_count`` times and present in at least one instance of every label.

    ``unit="instances"`` (default) counts the instances that contain the feature (presence: a word repeated in one
    instance counts once, as in the paper's definition of ``F_j``); ``unit="occurrences"`` counts its occurrences,
    repeats included, from the values of ``features``, which must then be counts (``feature_matrix(...,
    counting="tokens")``). The paper's "types that appeared at least 100 times" reads either way.
    """
    if unit not in MIN_COUNT_UNITS:
        raise ValueError(f"unit must be one of {MIN_COUNT_UNITS}, got {unit!r}")
    presence, y, n_labels, _ = _prepare(features, labels, n_labels)
    d = presence.shape[1]
    if len(vocabulary) != d:
        raise ValueError(f"vocabulary has {len(vocabulary)} entries but features has {d} columns")
    if isinstance(min_count, bool) or not isinstance(min_count, int | np.integer) or min_count < 1:
        raise ValueError(f"min_count must be a positive integer, got {min_count!r}")
    if unit == "instances":
        counts = np.asarray(presence.getnnz(axis=0))
    else:
        counts = np.asarray(sp.csr_matrix(features).sum(axis=0)).ravel()
        if (counts < presence.getnnz(axis=0)).any():
            raise ValueError("counting occurrences needs a count matrix (values >= 1 where a feature is present)")
    per_label = np.asarray(presence.T @ _one_hot(y, n_labels))  # (d, L) instance counts
    frequent = counts >= min_count
    has_all = (per_label > 0).all(axis=1)
    columns = np.flatnonzero(frequent & has_all)
    dropped = np.flatnonzero(frequent & ~has_all)
    return FeatureSelection(
        columns=columns,
        names=[vocabulary[j] for j in columns],
        dropped_missing_label=[vocabulary[j] for j in dropped],
    )


# --------------------------------------------------------------------------------------------------------------------
# Solver
# --------------------------------------------------------------------------------------------------------------------


@dataclass
class ReweightResult:
    """Output of :func:`solve_weights`.

    ``q``: the instance weights (float64, sum 1) of the iterate ``chosen_step`` (0: the uniform start). ``history``:
    one row per iterate, the uniform start (``step`` 0) first, then one per optimizer step, with ``step``,
    ``objective`` (the optimised, normalised objective ``objective(q) / objective(uniform)``), ``objective_raw``
    (``objective(q)`` itself), ``err`` (Err(q) against 1/L), ``ess`` (the effective sample size ``1 / sum q_i^2``),
    ``evaluations`` (objective/gradient evaluations so far) and ``wall_time_s`` (seconds since the solver started).
    ``objective_raw_initial`` is ``objective(uniform)``; ``steps`` the optimizer steps taken; ``stopped`` why the
    solve stopped and ``selection`` why ``chosen_step`` was returned (sentences); ``err_uniform``, ``err`` and
    ``ess`` the uniform start's Err and the returned q's Err and effective sample size; ``min_ess`` the floor;
    ``q_final`` the last iterate (what the paper's procedure returns; equal to ``q`` when it was chosen).
    """

    q: np.ndarray
    history: list[dict[str, float]]
    converged: bool
    steps: int
    wall_time_s: float
    device: str
    optimizer: str = "lbfgs"
    objective_raw_initial: float = 0.0
    chosen_step: int = 0
    stopped: str = ""
    selection: str = ""
    err_uniform: float = math.nan
    err: float = math.nan
    ess: float = math.nan
    min_ess: float = 0.0
    q_final: np.ndarray | None = None


def _torch_csr(matrix: sp.csr_matrix, device: torch.device) -> torch.Tensor:
    """A scipy CSR matrix as a float64 torch sparse CSR tensor (never densified)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
        return torch.sparse_csr_tensor(
            torch.from_numpy(matrix.indptr.astype(np.int64)),
            torch.from_numpy(matrix.indices.astype(np.int64)),
            torch.from_numpy(matrix.data.astype(np.float64)),
            size=matrix.shape,
            dtype=torch.float64,
            check_invariants=False,
        ).to(device)


class _Objective:
    """``objective(softmax(z))`` and its gradient in ``z``, on two sparse CSR copies of the features.

    Forward: ``G = F^T (q o C)`` (d x L), ``objective = ||G||^2``. Backward (by hand, so only the two sparse products
    are needed and autograd never has to transpose a sparse matrix): ``d objective / dq_i = 2 sum_y (F G)_iy C_iy``,
    then through the softmax ``d/dz_i = q_i (g_i - q.g)``. Values are divided by ``scale`` (the objective at the
    uniform start) so the optimised quantity starts at 1 and tolerances are relative, whatever ``n`` is.
    """

    def __init__(self, presence: sp.csr_matrix, labels: np.ndarray, n_labels: int, device: torch.device) -> None:
        self.ft = _torch_csr(presence.T.tocsr(), device)  # (d, n): F^T (q o C)
        self.f = _torch_csr(presence, device)  # (n, d): F G
        self.c = torch.from_numpy(_one_hot(labels, n_labels) - 1.0 / n_labels).to(device)
        self.scale = 1.0
        self.evaluations = 0
        self.last: tuple[torch.Tensor, torch.Tensor] | None = None  # (q, F^T (q o C)) of the last evaluation

    def err_and_ess(self, q: torch.Tensor, g: torch.Tensor | None = None) -> tuple[float, float]:
        """Err(q) against 1/L (as :func:`err`: the mean over the features with positive weight) and the effective
        sample size ``1 / sum q_i^2`` of a probability vector ``q``. ``g``: ``F^T (q o C)`` when already computed
        (the last evaluation's, :attr:`last`); then ``q(y|F_j=1) - 1/L = g_jy / mass_j`` costs one sparse
        matrix-vector product for the masses."""
        if g is None:
            g = self.ft @ (q[:, None] * self.c)
        mass = self.ft @ q  # (d,): sum_i q_i F_ij
        present = mass > 0
        gap = g[present] / mass[present, None]
        return (float(gap.abs().mean()) if gap.numel() else math.nan), float(1.0 / torch.dot(q, q))

    def raw(self, q: torch.Tensor) -> float:
        g = self.ft @ (q[:, None] * self.c)
        return float((g * g).sum())

    def value_and_grad(self, z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        self.evaluations += 1
        q = torch.softmax(z, dim=0)
        g = self.ft @ (q[:, None] * self.c)
        value = (g * g).sum() / self.scale
        dq = 2.0 / self.scale * ((self.f @ g) * self.c).sum(dim=1)
        dz = q * (dq - torch.dot(q, dq))
        self.last = (q, g)
        return value, dz


def _make_closure(objective: _Objective, z: torch.Tensor) -> Callable[[], torch.Tensor]:
    """Closure for ``optimizer.step``; caches the last evaluation by value.

    ``torch.optim.LBFGS.step`` re-evaluates the objective at its starting point on every call, although the line
    search of the previous call has usually just evaluated exactly that point; the cache makes one step cost one
    line search rather than one line search plus one evaluation.
    """
    cache: dict[str, torch.Tensor] = {}

    def closure() -> torch.Tensor:
        if cache and torch.equal(cache["z"], z):
            z.grad = cache["grad"].clone()
            return cache["value"]
        with torch.no_grad():
            value, grad = objective.value_and_grad(z)
        cache.update(z=z.detach().clone(), value=value, grad=grad)
        z.grad = grad.clone()
        return value

    return closure


def _make_optimizer(name: str, z: torch.Tensor, lr: float | None) -> torch.optim.Optimizer:
    if name == "lbfgs":
        # One LBFGS iteration per step() call (so every iteration is logged and checked); torch's own stopping rules
        # are disabled (tolerances 0) because convergence is decided by solve_weights on the normalised objective.
        return torch.optim.LBFGS(
            [z],
            lr=1.0 if lr is None else lr,
            max_iter=1,
            max_eval=26,  # torch caps the line search at max_eval - 1 evaluations; its default (max_iter * 5 // 4 = 1)
            # would leave no line search at all with max_iter=1 (a failed unit step then freezes the iterate)
            history_size=20,
            tolerance_grad=0.0,
            tolerance_change=0.0,
            line_search_fn="strong_wolfe",
        )
    if name == "adam":
        return torch.optim.Adam([z], lr=0.05 if lr is None else lr)
    raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {name!r}")


def solve_weights(
    features: Any,
    labels: Any,
    n_labels: int,
    *,
    max_steps: int = 500,
    tol: float = 1e-7,
    objective_tol: float = 1e-8,
    min_ess_fraction: float = MIN_ESS_FRACTION,
    device: str = "auto",
    log: Callable[[str], None] | None = None,
    log_every: int = 10,
    optimizer: str = "lbfgs",
    lr: float | None = None,
) -> ReweightResult:
    """Instance weights ``q = softmax(z)``: the paper's objective (module docstring) minimised from ``z = 0``, and of
    its iterates the one with the lowest Err(q) whose effective sample size ``1 / sum q_i^2`` is at least
    ``min_ess_fraction · n``.

    The optimised (and logged) quantity is the *normalised objective* ``objective(q) / objective(uniform)``: it starts
    at 1, so ``tol`` means the same thing for any data set size (the raw objective is of order ``(count_j / n)^2``
    and its gradient in ``z`` of order ``1/n``, which would make absolute tolerances meaningless).

    Stopping, checked after each step; ``converged=True`` when either

    * the normalised objective is at most ``objective_tol`` (default 1e-8: the root-sum-square constraint violation
      is 1e-4 of the uniform start's). On data where every feature can be balanced exactly the objective goes to 0,
      ever more slowly as some weights approach 0, so a relative-decrease test alone would run to ``max_steps``; or
    * the relative decrease of the normalised objective over the step is in ``[0, tol)``: no more progress (the
      usual stop on real data, where the constraints cannot all hold). An increase, possible with Adam, is not
      convergence.

    Otherwise the solver stops after ``max_steps`` steps with ``converged=False``. ``stopped`` says which.

    **Which iterate is returned.** The objective multiplies each constraint by its denominator (footnote 5), so it is
    also 0 where the features' total weight vanishes: the solve can converge onto a handful of instances (on QNLI dev
    at a minimum count of 5 it puts 1/2 on each of two instances with the same features and opposite labels, with
    Err(q) above Err(uniform)). The paper's measure of a q is Err(q) (Table 1), so every iterate's Err(q) and
    effective sample size are tracked (``history``), and ``q`` is the iterate (step ≥ 1) with the lowest Err(q) among
    those whose effective sample size is at least ``min_ess_fraction · n`` (``selection`` says which and what the
    lowest Err overall was). Without such an iterate the solve has collapsed within its first step:
    :class:`ReweightCollapse`, naming the floor. ``min_ess_fraction=0`` returns the lowest-Err iterate whatever its
    effective size; the final iterate is what the paper's procedure returns.

    ``optimizer="lbfgs"`` (default): ``torch.optim.LBFGS`` with a strong-Wolfe line search, one iteration per step.
    The problem is smooth, deterministic and badly conditioned (feature frequencies span three orders of magnitude),
    which is what a quasi-Newton method is for. Measured on the SNLI-sized synthetic problem of
    ``benchmarks/bench_reweight.py`` (550,000 x 3,866, Err(uniform) 0.056, 2 CPU cores): L-BFGS reaches the
    normalised objective 1e-8 in 337 steps / 37 s (Err 0.00013) and 1.5e-5 after 150 steps / 17 s (Err 0.005);
    Adam (lr 0.01 / 0.05 / 0.2) after 500 steps / ~40 s is at 1.3e-3 / 1.2e-5 / 5.6e-4 (Err 0.036 / 0.0044 /
    0.0028). ``"adam"`` is kept for comparison (``lr`` default 0.05). ``lr`` overrides the optimizer's learning
    rate (LBFGS: 1.0, the quasi-Newton step the line search starts from).

    The features stay sparse (torch CSR on ``device``; the ``n x d`` matrix is never densified); computation is in
    float64. ``device="auto"`` takes CUDA when available. On CPU the same inputs give bit-identical ``q`` for the
    same thread count (tested); on CUDA the sparse products may differ in the last bits between runs.
    """
    presence, y, n_labels, _ = _prepare(features, labels, n_labels)
    if isinstance(max_steps, bool) or not isinstance(max_steps, int | np.integer) or max_steps < 1:
        raise ValueError(f"max_steps must be a positive integer, got {max_steps!r}")
    for name, value in (("tol", tol), ("objective_tol", objective_tol)):
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
            raise ValueError(f"{name} must be a finite nonnegative number, got {value!r}")
    if isinstance(min_ess_fraction, bool) or not isinstance(min_ess_fraction, int | float) or not (
        0.0 <= min_ess_fraction <= 1.0
    ):
        raise ValueError(f"min_ess_fraction must be a number in [0, 1], got {min_ess_fraction!r}")
    if isinstance(log_every, bool) or not isinstance(log_every, int | np.integer) or log_every < 1:
        raise ValueError(f"log_every must be a positive integer, got {log_every!r}")
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {optimizer!r}")
    try:
        dev = pick_device(device)
    except RuntimeError as exc:  # torch's unknown device string, or CUDA without one: an invalid input, as any other
        raise ValueError(str(exc)) from exc
    n = presence.shape[0]
    floor = min_ess_fraction * n
    emit = log or (lambda _msg: None)

    start = time.perf_counter()
    objective = _Objective(presence, y, n_labels, dev)
    uniform = torch.full((n,), 1.0 / n, dtype=torch.float64, device=dev)
    initial = objective.raw(uniform)
    err_uniform, _ = objective.err_and_ess(uniform)
    emit(
        f"reweight: {n} instances, {presence.shape[1]} features, {n_labels} labels, {presence.nnz} nonzeros; "
        f"{optimizer} on {dev}; objective(uniform) = {initial:.6g}, Err(uniform) = {err_uniform:.6g}; logging "
        f"objective(q) / objective(uniform), Err(q) and the effective sample size (floor {floor:.1f})"
    )
    history: list[dict[str, float]] = [
        {"step": 0, "objective": 1.0, "objective_raw": initial, "err": err_uniform, "ess": float(n),
         "evaluations": 0, "wall_time_s": time.perf_counter() - start}
    ]  # fmt: skip
    if initial == 0.0:  # every constraint already holds: uniform weights are the solution
        emit("reweight: uniform weights already satisfy every constraint")
        history[0]["objective"] = 0.0
        return ReweightResult(
            uniform.cpu().numpy(), history, True, 0, time.perf_counter() - start, str(dev), optimizer, 0.0,
            chosen_step=0, stopped="uniform weights already satisfy every constraint",
            selection="uniform weights (nothing to reweight)", err_uniform=err_uniform, err=err_uniform,
            ess=float(n), min_ess=floor, q_final=uniform.cpu().numpy(),
        )  # fmt: skip
    objective.scale = initial

    z = torch.zeros(n, dtype=torch.float64, device=dev, requires_grad=True)
    opt = _make_optimizer(optimizer, z, lr)
    closure = _make_closure(objective, z)
    best: tuple[float, int, torch.Tensor] | None = None  # (Err, step, z) of the best iterate above the floor
    previous = 1.0
    converged = False
    stopped = f"stopped at max_steps ({max_steps}) before converging"
    for step in range(1, max_steps + 1):
        if optimizer == "lbfgs":
            opt.step(closure)
        else:
            opt.zero_grad(set_to_none=True)
            closure()
            opt.step()
        # the objective at the new point (a cache hit after an LBFGS line search); either way the objective's last
        # evaluation is then at the new point, and its q and F^T (q o C) give Err(q)
        current = float(closure())
        with torch.no_grad():
            err_q, ess = objective.err_and_ess(*objective.last)
        if ess >= floor and not math.isnan(err_q) and (best is None or err_q < best[0]):
            best = (err_q, step, z.detach().clone())
        elapsed = time.perf_counter() - start
        history.append(
            {
                "step": step,
                "objective": current,
                "objective_raw": current * initial,
                "err": err_q,
                "ess": ess,
                "evaluations": objective.evaluations,
                "wall_time_s": elapsed,
            }
        )
        decrease = (previous - current) / previous if previous > 0 else 0.0
        if current <= objective_tol:
            converged, stopped = True, f"converged: the objective reached {objective_tol:g} of its start"
        elif 0.0 <= decrease < tol:
            converged, stopped = True, f"converged: the objective fell by less than {tol:g} (relative) in a step"
        if step % log_every == 0 or converged or step == max_steps:
            evals = objective.evaluations
            emit(
                f"reweight step {step:>5}: objective {current:.6e}, Err(q) {err_q:.6f}, effective size {ess:.1f} "
                f"({evals} evaluations, {elapsed:.1f} s)"
            )
        previous = current
        if converged:
            break

    steps = len(history) - 1
    overall = min(history[1:], key=lambda row: (math.isnan(row["err"]), row["err"]))
    if best is None:
        raise ReweightCollapse(
            f"reweighting collapsed: every one of its {steps} iterates has an effective sample size below "
            f"min_ess_fraction {min_ess_fraction:g} x {n} = {floor:.1f} (lowest Err(q) {overall['err']:.4g} at "
            f"step {overall['step']}, effective size {overall['ess']:.1f}); lower lexical.reweight.min_ess_fraction "
            "or raise lexical.reweight.min_count"
        )
    err_best, chosen, z_best = best
    q, q_final = (_probabilities(v) for v in (z_best, z.detach()))
    ess_best = float(history[chosen]["ess"])
    selection = (
        f"step {chosen}: the lowest Err(q) of the {steps} iterates"
        if overall["step"] == chosen
        else f"step {chosen}: the lowest Err(q) among the iterates with an effective sample size of at least "
        f"{floor:.1f}; the lowest overall, {overall['err']:.4g} at step {overall['step']}, has an effective sample "
        f"size of {overall['ess']:.1f}"
    )
    if err_best >= err_uniform:
        selection += f"; no iterate above the floor lowers Err below the uniform start's {err_uniform:.4g}"
    wall = time.perf_counter() - start
    emit(
        f"reweight: {stopped} after {steps} steps, {wall:.1f} s; returning {selection}: Err(uniform) "
        f"{err_uniform:.6f} -> Err(q) {err_best:.6f}, effective sample size {ess_best:.1f} of {n}"
    )
    return ReweightResult(
        q, history, converged, steps, wall, str(dev), optimizer, initial, chosen_step=chosen, stopped=stopped,
        selection=selection, err_uniform=err_uniform, err=err_best, ess=ess_best, min_ess=floor, q_final=q_final,
    )  # fmt: skip


def _probabilities(z: torch.Tensor) -> np.ndarray:
    """softmax(z) as a float64 numpy vector summing to 1."""
    with torch.no_grad():
        q = torch.softmax(z, dim=0).cpu().numpy().astype(np.float64)
    return q / q.sum()


def dense_reference_weights(features: Any, labels: Any, n_labels: int, *, steps: int, lr: float = 0.05) -> np.ndarray:
    """Baseline: the straightforward implementation, for benchmarks and tests only.

    Dense float64 ``(n, d)`` feature matrix, ``q = softmax(z)`` from ``z = 0``, full-batch Adam on ``z`` with autograd
    for exactly ``steps`` steps. The loss is ``n^2 * objective(q)`` (the objective in terms of ``w = n q``) only so
    that gradients are not swamped by Adam's ``eps``; Adam is otherwise invariant to that scale.
    """
    presence, y, n_labels, _ = _prepare(features, labels, n_labels)
    if isinstance(steps, bool) or not isinstance(steps, int | np.integer) or steps < 0:
        raise ValueError(f"steps must be a nonnegative integer, got {steps!r}")
    n = presence.shape[0]
    dense = torch.from_numpy(presence.toarray())
    c = torch.from_numpy(_one_hot(y, n_labels) - 1.0 / n_labels)
    z = torch.zeros(n, dtype=torch.float64, requires_grad=True)
    opt = torch.optim.Adam([z], lr=lr)
    for _ in range(steps):
        q = torch.softmax(z, dim=0)
        g = dense.T @ (q[:, None] * c)
        loss = (n * n) * (g * g).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        q = torch.softmax(z, dim=0).numpy().astype(np.float64)
    return q / q.sum()


def read_weights(path: str | os.PathLike, ids: Sequence[str] | pd.Series) -> np.ndarray:
    """The ``q`` column of a weights parquet (``lexical_reweight``), aligned to ``ids``; fails naming the file when
    some ids have no weight (weights computed on another split) or the weights do not sum to 1."""
    from spurious.core import readers

    table = readers.read_parquet_table(path, columns=["id", "q"])
    by_id = pd.Series(table.column("q").to_numpy(), index=table.column("id").to_pylist())
    q = align_to_ids(
        by_id, ids, source=str(path), what="weight", fix="the weights must come from the same training split"
    ).astype(np.float64)
    if not np.isclose(q.sum(), 1.0, atol=1e-6) or (q < 0).any():
        raise ValueError(f"{path}: q must be a probability vector over the training split (sum {q.sum():.6g})")
    return q
