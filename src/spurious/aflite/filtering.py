"""AFLite (Le Bras et al., ICML 2020): adversarial filtering of dataset biases by predictability scores.

Algorithm 1 of the paper, on pre-computed representations Φ(X):

* **Predictability scores.** ``m`` random partitions of the current set S, each into a training part of size ``t``
  and the held-out rest; a linear classifier per partition is fitted on the training part and predicts the held-out
  part only. p̃(i) = (correct out-of-sample predictions of i) / (out-of-sample predictions of i); an instance never
  held out has no score (NaN), never a 0 (a pitfall of third-party scripts that average in-train rounds as 0).
* **Filtering.** Remove up to ``k`` instances with the highest p̃ among those with p̃ ≥ τ (``greedy``), or draw them
  with probability proportional to p̃ (``sample``: the slice sampling of App. A.1 (C), Gumbel top-k over log p̃,
  seeded); stop when fewer than ``k`` pass τ or when |S| reaches the target size n. The slice that would cut S below
  n is cut to |S| − n, so a run that reaches n ends at exactly n (the paper's "target dataset size": App. A.5 fixes
  n = 182K for SNLI's out-of-distribution models, and Table 1 calls that set "size 182k").

The ``m`` classifiers of one iteration are fitted together: a batched softmax logistic regression in torch (GPU
when present) whose objective is scikit-learn's ``LogisticRegression(C=C)`` for every number of labels (L2 penalty
on the weights, not the intercept, plus ``C`` × the summed cross-entropy; :func:`fit_logistic_batched` derives the
two-label case), minimised by L-BFGS. The classifiers are independent, so minimising the sum of their objectives fits
each one.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from spurious.core import readers
from spurious.core.io import atomic_path, write_json
from spurious.core.train.training import pick_device

log = logging.getLogger(__name__)
SELECTIONS = ("greedy", "sample")


def fit_logistic_batched(
    features: torch.Tensor,
    labels: torch.Tensor,
    train_rows: torch.Tensor,
    n_classes: int,
    *,
    C: float = 1.0,  # noqa: N803 - scikit-learn's name for the inverse regularisation strength
    max_iter: int = 100,
    tol: float = 1e-6,
    chunk: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Fit one logistic regression per row of ``train_rows`` ([m, t] indices into ``features`` [n, d]), each equal
    to scikit-learn's ``LogisticRegression(C=C)`` fitted on the same rows.

    The model is a softmax over ``n_classes`` columns, ``p(y | x) = softmax(x W + b)``, and the objective per
    classifier is ``λ · ½‖W‖² + C · Σ_{i in its training part} CE(x_i W + b, y_i)`` with

    * ``λ = 1`` for three or more labels: scikit-learn's multinomial objective (``½‖W‖²_F``; the intercepts are not
      penalised, and are unique only up to a common shift, which no prediction sees);
    * ``λ = 2`` for two labels. scikit-learn fits two labels with a single logit ``x w + b`` and the penalty
      ``½‖w‖²``. A two-column softmax depends on its columns only through ``w = W₁ − W₀`` (and ``b = b₁ − b₀``),
      and of all ``W`` with the same difference the penalty is smallest at ``W₀ = −w/2, W₁ = w/2``, where
      ``½‖W‖² = ½(‖w‖²/4 + ‖w‖²/4) = ¼‖w‖²``: with ``λ = 1`` the two-column fit is the one-logit fit at penalty
      ``¼‖w‖²``, i.e. scikit-learn's at ``2C`` (half the stated regularisation). With ``λ = 2`` it is
      ``½‖w‖² + C · Σ log(1 + exp(∓(x w + b)))``, scikit-learn's at ``C``, with ``coef_ = W₁ − W₀`` (tested against
      scikit-learn for two and three labels at several C). The softmax with the penalty scaled is kept rather than a
      separate one-logit path so that one code path (and one chunking) fits every label count.

    The training rows are gathered once ([m, t, d]), so an evaluation costs m·t·d, not m·n·d.

    ``chunk``: when the gather of all m training parts would not fit in memory, the objective is evaluated over
    ``chunk`` classifiers at a time, each chunk's rows gathered again at every evaluation (a second pass over
    m·t·d floats per evaluation: slower, never larger than chunk·t·d). The optimiser is the same single L-BFGS over
    all m classifiers and every classifier's value and gradient come from the same operations on its own rows, so
    the fit does not depend on the chunk size (tested). Returns (W [m, d, C], b [m, C]) in the features' dtype."""
    if features.shape[0] != labels.shape[0]:
        raise ValueError(f"features ({features.shape[0]}) and labels ({labels.shape[0]}) differ in rows")
    m, t = train_rows.shape
    d = features.shape[1]
    size = m if chunk is None else max(1, min(int(chunk), m))
    starts = range(0, m, size)
    gathered = features[train_rows] if size == m else None  # [m, t, d], kept across evaluations
    one_hot = torch.nn.functional.one_hot(labels[train_rows], n_classes).to(features.dtype)  # [m, t, C]
    weight = torch.zeros(m, d, n_classes, dtype=features.dtype, device=features.device, requires_grad=True)
    bias = torch.zeros(m, n_classes, dtype=features.dtype, device=features.device, requires_grad=True)
    scale = 1.0 / t  # an O(1) objective for L-BFGS whatever t is
    penalty = 2.0 if n_classes == 2 else 1.0  # λ: scikit-learn's C for two labels too (docstring)

    def chunk_objective(lo: int) -> torch.Tensor:
        """Each classifier's objective in [lo, lo + size), scaled: a vector, so that the total below sums the same
        m numbers in the same order whatever the chunk size."""
        hi = min(lo + size, m)
        x = gathered if gathered is not None else features[train_rows[lo:hi]]
        logits = torch.bmm(x, weight[lo:hi]) + bias[lo:hi, None, :]
        ce = -(one_hot[lo:hi] * torch.log_softmax(logits, dim=-1)).sum(dim=(1, 2))
        return scale * (0.5 * penalty * (weight[lo:hi] ** 2).sum(dim=(1, 2)) + C * ce)

    optimizer = torch.optim.LBFGS(
        [weight, bias], lr=1.0, max_iter=max_iter, tolerance_grad=tol, tolerance_change=tol * 1e-3,
        history_size=20, line_search_fn="strong_wolfe",
    )

    def closure() -> torch.Tensor:
        optimizer.zero_grad()
        values = torch.empty(m, dtype=features.dtype, device=features.device)
        for lo in starts:
            value = chunk_objective(lo)
            value.sum().backward()  # a classifier's gradient depends on its own rows only
            values[lo : lo + len(value)] = value.detach()
        return values.sum()

    optimizer.step(closure)
    return weight.detach(), bias.detach()


def free_memory_bytes(device: torch.device) -> int:
    """What the device has free now: CUDA's free memory, else the host's available memory (/proc/meminfo)."""
    if device.type == "cuda":
        return int(torch.cuda.mem_get_info(device)[0])
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 1 << 62  # unknown: no limit


GATHER_FRACTION = 0.5  # of the free memory, for the gathered rows; the rest for L-BFGS's history and the predictions


def classifiers_per_chunk(m: int, t: int, d: int, budget_bytes: int) -> int:
    """How many classifiers' training rows (t·d float32 each) fit in ``budget_bytes`` at once (at least 1, at most m).
    """
    return int(max(1, min(m, budget_bytes // max(1, t * d * 4))))


@dataclass
class Scores:
    """One filtering phase: p̃ per instance of S (NaN where never held out), how many out-of-sample predictions each
    got, and the mean held-out accuracy of the m classifiers."""

    predictability: np.ndarray
    n_predictions: np.ndarray
    mean_heldout_accuracy: float


def predictability_scores(
    features: np.ndarray | torch.Tensor,
    labels: np.ndarray,
    *,
    m: int,
    t: int,
    seed: int,
    C: float = 1.0,  # noqa: N803
    max_iter: int = 100,
    tol: float = 1e-4,
    device: str = "auto",
    n_classes: int | None = None,
    gather_memory_mb: int | None = None,
) -> Scores:
    """Algorithm 1's filtering phase: m random partitions with training parts of size t, out-of-sample predictions
    only. The partitions are drawn from ``numpy.random.default_rng(seed)``; ``tol`` is the gradient tolerance
    (scikit-learn's default 1e-4 on the same, per-training-example objective).

    ``gather_memory_mb``: the memory the m gathered training parts (m·t·d float32) may take; None: half of what the
    device has free. Beyond it the classifiers are fitted in chunks, with identical scores (``fit_logistic_batched``).
    """
    y = np.asarray(labels, dtype=np.int64)
    n = len(y)
    if not 0 < t < n:
        raise ValueError(f"the training part t ({t}) must lie between 0 and |S| ({n}) exclusive")
    if m < 1:
        raise ValueError(f"m must be at least 1, got {m}")
    classes = int(n_classes if n_classes is not None else y.max() + 1)
    dev = pick_device(device)
    x = torch.as_tensor(np.asarray(features), dtype=torch.float32, device=dev)
    if x.ndim != 2 or x.shape[0] != n:
        raise ValueError(f"features must be a 2-d array with one row per label ({n}), got shape {tuple(x.shape)}")
    rng = np.random.default_rng(seed)
    rows = np.stack([rng.choice(n, size=t, replace=False) for _ in range(m)])
    masks = np.zeros((m, n), dtype=bool)
    np.put_along_axis(masks, rows, True, axis=1)
    y_t = torch.tensor(y, device=dev)  # a copy: y may be a read-only view (a parquet column)
    budget = (
        int(gather_memory_mb) * 2**20 if gather_memory_mb is not None else int(GATHER_FRACTION * free_memory_bytes(dev))
    )
    chunk = classifiers_per_chunk(m, t, x.shape[1], budget)
    if chunk < m:
        log.info(
            f"AFLite: the {m} training parts ({m * t * x.shape[1] * 4 / 2**30:.1f} GiB) exceed "
            f"{budget / 2**30:.1f} GiB: fitting {chunk} classifiers at a time"
        )
    weight, bias = fit_logistic_batched(
        x, y_t, torch.as_tensor(rows, device=dev), classes, C=C, max_iter=max_iter, tol=tol, chunk=chunk
    )
    with torch.no_grad():
        predicted = (torch.einsum("nd,mdc->mnc", x, weight) + bias[:, None, :]).argmax(-1).cpu().numpy()  # [m, n]
    heldout = ~masks
    correct = (predicted == y[None, :]) & heldout
    n_predictions = heldout.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        p = np.where(n_predictions > 0, correct.sum(axis=0) / np.maximum(n_predictions, 1), np.nan)
    accuracy = float(correct.sum() / heldout.sum())
    return Scores(p, n_predictions, accuracy)


def select_greedy(scores: np.ndarray, *, k: int, tau: float) -> np.ndarray:
    """Up to ``k`` positions with the highest p̃ among those with p̃ ≥ τ (NaN never qualifies); ties by position."""
    eligible = np.flatnonzero(np.nan_to_num(scores, nan=-1.0) >= tau)
    order = eligible[np.lexsort((eligible, -scores[eligible]))]
    return np.sort(order[:k])


def select_sample(scores: np.ndarray, *, k: int, tau: float, rng: np.random.Generator) -> np.ndarray:
    """Slice sampling (App. A.1 (C)): up to ``k`` of the positions with p̃ ≥ τ, drawn without replacement with
    probability proportional to p̃ (Gumbel top-k over log p̃)."""
    eligible = np.flatnonzero(np.nan_to_num(scores, nan=-1.0) >= tau)
    if len(eligible) <= k:
        return eligible
    with np.errstate(divide="ignore"):
        keys = np.log(scores[eligible]) + rng.gumbel(size=len(eligible))
    return np.sort(eligible[np.argsort(-keys, kind="stable")[:k]])


@dataclass
class AFLiteResult:
    kept: np.ndarray  # positions (into the input) of the instances kept, ascending
    iterations: list[dict[str, Any]] = field(default_factory=list)  # size, removed, mean held-out accuracy, seconds
    scores: list[np.ndarray] = field(default_factory=list)  # p̃ over the input per iteration (NaN outside S)
    stopped: str = ""


def aflite(
    features: np.ndarray,
    labels: np.ndarray,
    *,
    n: int,
    m: int,
    t: int,
    k: int,
    tau: float,
    seed: int = 0,
    selection: str = "greedy",
    C: float = 1.0,  # noqa: N803
    max_iter: int = 100,
    device: str = "auto",
    gather_memory_mb: int | None = None,
    log_fn: Callable[[str], None] | None = None,
    state_dir: str | os.PathLike | None = None,
) -> AFLiteResult:
    """Algorithm 1: filter until |S| = n or fewer than k instances reach τ. Each iteration removes up to
    min(k, |S| − n) instances (the last slice is cut so that S never falls below n; each iteration's ``slice``
    records its size), and one that finds fewer than its slice at p̃ ≥ τ is the last. Iteration ``i`` draws its
    partitions with seed ``seed * 1_000_003 + i`` (and its slice sample from the same stream), so a run is
    reproducible.

    ``state_dir``: every finished iteration is saved there (atomically), and a later call with the same data and
    settings resumes after the last saved one, giving the result an uninterrupted run gives. Another dataset or
    other settings in the same folder is an error, not a silent restart.

    ``gather_memory_mb``: see ``predictability_scores`` (an execution setting: the scores do not depend on it)."""
    if selection not in SELECTIONS:
        raise ValueError(f"selection must be one of {SELECTIONS}, got {selection!r}")
    if k < 1 or not 0.0 <= tau <= 1.0:
        raise ValueError(f"k must be positive and tau in [0, 1], got k={k}, tau={tau}")
    if not 0 < t < n:
        raise ValueError(f"Algorithm 1 needs 0 < t < n (the training part must fit in every S); got t={t}, n={n}")
    emit = log_fn or log.info
    y = np.asarray(labels, dtype=np.int64)
    n_classes = int(y.max() + 1)
    x = np.asarray(features, dtype=np.float32)
    current = np.arange(len(y))
    result = AFLiteResult(kept=current)
    iteration = 0
    state = None
    if state_dir is not None:
        fingerprint = {
            "n": n, "m": m, "t": t, "k": k, "tau": tau, "seed": seed, "selection": selection, "C": C,
            "max_iter": max_iter, "data_sha256": _data_sha256(x, y),
        }
        if n_classes == 2:
            # iterations saved before two-label fits matched scikit-learn's C (they were fitted at 2C) lack this
            # key, so they are refused rather than resumed
            fingerprint["two_label_fit"] = "scikit-learn C"
        state = _IterationState(Path(state_dir), fingerprint)
        for record, full in state.load():
            result.iterations.append(record)
            result.scores.append(full)
            current = np.setdiff1d(current, np.asarray(record["removed_positions"], dtype=np.int64))
        iteration = len(result.iterations)
        if iteration:
            emit(f"AFLite resumed after iteration {iteration - 1} from {state_dir}: |S| = {len(current)}")
    # the k rule: an iteration that removed fewer than its slice is the last one (also when it was saved)
    stopped_on_k = bool(result.iterations) and result.iterations[-1]["removed"] < _slice(result.iterations[-1], k)
    while not stopped_on_k and len(current) > n:
        t0 = time.perf_counter()
        size = min(k, len(current) - n)  # never below n: the slice that would cross it is cut to |S| - n
        scores = predictability_scores(
            x[current], y[current], m=m, t=t, seed=seed * 1_000_003 + iteration, C=C, max_iter=max_iter,
            device=device, n_classes=n_classes, gather_memory_mb=gather_memory_mb,
        )
        if selection == "greedy":
            picked = select_greedy(scores.predictability, k=size, tau=tau)
        else:
            picked = select_sample(
                scores.predictability, k=size, tau=tau, rng=np.random.default_rng([seed, iteration, 1])
            )
        full = np.full(len(y), np.nan)
        full[current] = scores.predictability
        result.scores.append(full)
        removed = current[picked]
        current = np.setdiff1d(current, removed)
        result.iterations.append(
            {
                "iteration": iteration,
                "size_before": int(len(current) + len(removed)),
                "slice": int(size),
                "removed": int(len(removed)),
                "size_after": int(len(current)),
                "mean_heldout_accuracy": scores.mean_heldout_accuracy,
                "n_above_tau": int(np.sum(np.nan_to_num(scores.predictability, nan=-1.0) >= tau)),
                "seconds": time.perf_counter() - t0,
                "removed_positions": removed.tolist(),
            }
        )
        if state is not None:
            state.save(result.iterations[-1], full)
        emit(
            f"AFLite iteration {iteration}: |S| {len(current) + len(removed)} -> {len(current)}, removed "
            f"{len(removed)} (p >= {tau}: {result.iterations[-1]['n_above_tau']}), mean held-out accuracy "
            f"{scores.mean_heldout_accuracy:.4f}, {result.iterations[-1]['seconds']:.1f}s"
        )
        iteration += 1
        stopped_on_k = len(removed) < size
    if stopped_on_k:
        last = _slice(result.iterations[-1], k)
        result.stopped = f"fewer than {'k=' if last == k else 'the slice of '}{last} instances reach tau={tau}"
    else:
        result.stopped = f"|S| = {len(current)} reached the target size n = {n}"
    result.kept = current
    emit(f"AFLite stopped: {result.stopped}; kept {len(current)} of {len(y)}")
    return result


def _slice(record: dict[str, Any], k: int) -> int:
    """The slice size an iteration asked for (k, or |S| - n for the last one; records saved before ``slice`` was
    kept asked for k)."""
    return int(record.get("slice", k))


def _data_sha256(features: np.ndarray, labels: np.ndarray) -> str:
    digest = hashlib.sha256(np.ascontiguousarray(features).tobytes())
    digest.update(np.ascontiguousarray(labels).tobytes())
    return digest.hexdigest()


class _IterationState:
    """One ``iteration_NNNNN.npz`` per finished iteration (its record and p̃ over the input) beside a
    ``settings.json`` naming the data and settings they belong to."""

    def __init__(self, folder: Path, fingerprint: dict[str, Any]) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        settings = folder / "settings.json"
        if settings.exists():
            saved = readers.read_json(settings, fix=f"delete {folder} to start the filtering again")
            if saved != fingerprint:
                changed = sorted(key for key in fingerprint if saved.get(key) != fingerprint[key])
                raise ValueError(
                    f"{folder}: saved AFLite iterations belong to other data or settings (differs in {changed}); "
                    "delete the folder to start again"
                )
        else:
            write_json(fingerprint, settings)

    def load(self) -> list[tuple[dict[str, Any], np.ndarray]]:
        saved = []
        for i, path in enumerate(sorted(self.folder.glob("iteration_*.npz"))):
            if path.name != f"iteration_{i:05d}.npz":
                raise ValueError(f"{self.folder}: saved iterations are not consecutive at {path.name}")
            archive = readers.read_npz(path, fix=f"delete {self.folder} to start the filtering again")
            saved.append((json.loads(str(archive["record"])), archive["scores"]))
        return saved

    def save(self, record: dict[str, Any], scores: np.ndarray) -> None:
        path = self.folder / f"iteration_{record['iteration']:05d}.npz"
        with atomic_path(path) as tmp, open(tmp, "wb") as f:
            np.savez(f, record=np.asarray(json.dumps(record)), scores=scores)
