"""Benchmark: one AFLite filtering iteration (m = 64 partitions, training parts of t = 10,000) on 100,000 × 384
features, our batched torch logistic regression against scikit-learn's ``LogisticRegression`` fitted m times.

Run: ``python benchmarks/bench_aflite.py [--n 100000] [--d 384] [--m 64] [--t 10000] [--device auto] [--json OUT]``.

The features are embedding-like: standard Gaussian with a weak label direction (held-out accuracy about 0.75).
Both sides use the same partitions (``numpy.random.default_rng(0)``, as
``spurious.aflite.filtering.predictability_scores`` draws them), the same objective (L2, C = 1) and the same gradient
tolerance (1e-4); the benchmark reports the time of each, their ratio, and how far the predictability scores agree (they
differ only where a prediction sits on the decision boundary within solver tolerance). Both times include the held-out
predictions; ours also includes copying the features to the device, as every iteration of
``spurious.aflite.filtering.aflite`` does.

**The steady state.** A process's first work on a GPU pays for the device's start-up (the CUDA context, the
libraries' handles, loading kernels), which an AFLite run pays once, not per iteration. Both are kept out of the
fit's time and reported on their own lines: the device start-up (a first tensor on the device), then a first small
fit (the same d and m, a training part of at most 1,000 on twice as many instances) that loads the fit's kernels.
The timed fit follows, with ``torch.cuda.synchronize`` at both ends. scikit-learn runs on the same machine's CPU
cores (its L-BFGS in scipy, NumPy's BLAS threads). **Target (issue 28, on a GPU):** one filtering iteration at least
30x scikit-learn; the benchmark prints the measured ratio, the device, and whether the target is met or by how
much it is missed (on CPU for reference only). On CPU the fitting is memory-bound and scikit-learn converges each
small problem in fewer iterations than the joint L-BFGS, so most of the CPU gain comes from predicting all m
classifiers in one matrix product; the batched fit is built for the GPU, where the m problems run in parallel.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any

import numpy as np
import torch

from spurious.aflite import filtering as aflite
from spurious.core.train.training import pick_device

TARGET_VS_SKLEARN = 30.0  # issue 28: one filtering iteration on a GPU against scikit-learn on the CPU cores
WARM_T = 1000  # the first small fit's training part (at most; never beyond --t)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def synthetic(n: int, d: int) -> tuple[np.ndarray, np.ndarray]:
    """Embedding-like features: standard Gaussian with a weak label direction (held-out accuracy about 0.75)."""
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, n)
    direction = rng.normal(size=d) / np.sqrt(d)
    x = (rng.normal(size=(n, d)) + 0.0375 * np.sqrt(d) * np.outer(2 * y - 1, direction)).astype(np.float32)
    return x, y


def start_device(device: torch.device) -> float:
    """Seconds to bring the device up (on CUDA: the context, by a first tensor there), kept out of the fit's time."""
    t0 = time.perf_counter()
    torch.zeros(1, device=device)
    _sync(device)
    return time.perf_counter() - t0


def first_small_fit(x: np.ndarray, y: np.ndarray, *, m: int, t: int, device: torch.device) -> tuple[float, str]:
    """A small fit before the timed one (same d and m, training part ``min(t, WARM_T)`` on twice as many rows): its
    seconds and shape. It loads the kernels the timed fit uses, a once-per-process cost of a real AFLite run."""
    small_t = min(t, WARM_T)
    small_n = min(len(y), 2 * small_t)
    t0 = time.perf_counter()
    aflite.predictability_scores(x[:small_n], y[:small_n], m=m, t=small_t, seed=1, device=str(device), tol=1e-4)
    _sync(device)
    return time.perf_counter() - t0, f"n {small_n}, m {m}, t {small_t}"


def timed_fit(x: np.ndarray, y: np.ndarray, *, m: int, t: int, device: torch.device) -> tuple[Any, float]:
    """The filtering iteration's scores and its seconds, the device synchronised at both ends."""
    _sync(device)
    t0 = time.perf_counter()
    scores = aflite.predictability_scores(x, y, m=m, t=t, seed=0, device=str(device), tol=1e-4)
    _sync(device)
    return scores, time.perf_counter() - t0


def sklearn_scores(x: np.ndarray, y: np.ndarray, *, m: int, t: int) -> tuple[np.ndarray, np.ndarray, float]:
    """scikit-learn, m separate fits on the same partitions: predictability, held-out counts, seconds."""
    from sklearn.linear_model import LogisticRegression

    n = len(y)
    draw = np.random.default_rng(0)
    rows = [draw.choice(n, size=t, replace=False) for _ in range(m)]
    t0 = time.perf_counter()
    correct = np.zeros(n)
    count = np.zeros(n)
    for train in rows:
        model = LogisticRegression(C=1.0, tol=1e-4, max_iter=1000).fit(x[train], y[train])
        held = np.ones(n, dtype=bool)
        held[train] = False
        correct[held] += model.predict(x[held]) == y[held]
        count[held] += 1
    seconds = time.perf_counter() - t0
    return np.where(count > 0, correct / np.maximum(count, 1), np.nan), count, seconds


def device_label(device: torch.device) -> str:
    if device.type == "cuda":
        return f"{torch.cuda.get_device_name(device)} (cuda)"
    return f"cpu ({torch.get_num_threads()} torch threads)"


def target_line(ratio: float, label: str, device: torch.device) -> tuple[bool, str]:
    """Whether the ratio meets the target, and the line that says so (by how much it is missed, if it is)."""
    met = ratio >= TARGET_VS_SKLEARN
    if met:
        outcome = "met"
    else:
        short = 100 * (1 - ratio / TARGET_VS_SKLEARN)
        outcome = f"MISSED by {TARGET_VS_SKLEARN - ratio:.1f}x ({short:.0f} % short)"
    scope = "" if device.type == "cuda" else " (not a GPU: for reference only, not a check of the target)"
    return met, (
        f"target (issue 28: a GPU, the steady state): one filtering iteration >= {TARGET_VS_SKLEARN:.0f}x "
        f"scikit-learn on the same machine's CPU cores; measured on {label}{scope}: {ratio:.2f}x, {outcome}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--d", type=int, default=384)
    parser.add_argument("--m", type=int, default=64)
    parser.add_argument("--t", type=int, default=10_000)
    parser.add_argument("--device", default="auto", help="auto (CUDA if available), cpu or cuda")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()

    x, y = synthetic(args.n, args.d)
    device = pick_device(args.device)
    label = device_label(device)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(
        f"AFLite filtering iteration: n {args.n}, d {args.d}, m {args.m}, t {args.t}; torch {torch.__version__} "
        f"on {label}; scikit-learn on {cores} CPU cores"
    )
    startup_s = start_device(device)
    print(f"  device start-up ({label}): {startup_s:.2f} s (not in the fit's time)")
    warm_s, warm_shape = first_small_fit(x, y, m=args.m, t=args.t, device=device)
    print(f"  first small fit ({warm_shape}; loads the kernels): {warm_s:.2f} s (not in the fit's time)")
    ours, ours_s = timed_fit(x, y, m=args.m, t=args.t, device=device)
    sk, count, sk_s = sklearn_scores(x, y, m=args.m, t=args.t)

    valid = ~np.isnan(sk)
    diff = np.abs(sk[valid] - ours.predictability[valid])
    same = float(np.mean(diff == 0))
    ratio = sk_s / ours_s
    accuracy = ours.mean_heldout_accuracy
    print(f"  ours (batched torch L-BFGS, steady state): {ours_s:.2f} s; mean held-out accuracy {accuracy:.4f}")
    print(f"  scikit-learn LogisticRegression x {args.m}: {sk_s:.2f} s")
    print(f"ratio scikit-learn / ours: {ratio:.2f}x")
    met, line = target_line(ratio, label, device)
    print(line)
    print(f"predictability scores: identical for {100 * same:.2f} % of instances; max |difference| {diff.max():.4f} "
          f"(one prediction in {int(count.max())} is {1 / count.max():.4f})")
    agree = diff.max() <= 2.0 / count[valid].min()
    print(f"{'PASS' if agree else 'FAIL'}: scores agree up to two boundary predictions per instance")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"n": args.n, "d": args.d, "m": args.m, "t": args.t, "device": str(device),
                       "device_name": label, "cpu_cores": cores, "device_startup_s": startup_s,
                       "first_small_fit_s": warm_s, "first_small_fit": warm_shape, "ours_s": ours_s,
                       "sklearn_s": sk_s, "ratio": ratio, "target_ratio": TARGET_VS_SKLEARN, "target_met": met,
                       "identical_fraction": same, "max_abs_difference": float(diff.max())}, fh, indent=2)
    return 0 if agree else 1


if __name__ == "__main__":
    raise SystemExit(main())
