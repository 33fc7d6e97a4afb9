"""Benchmark: instance reweighting against lexical bias (spurious.lexical.reweight.solve_weights) at SNLI scale.

Run: ``python benchmarks/bench_reweight.py [--instances N] [--features D] [--budget SECONDS] [--json PATH]``.

The problem is synthetic but shaped like SNLI in the paper's Table 1 (549,367 instances, 3,866 features present in at
least 100 instances, 3 labels, Err(uniform) 0.057): 550,000 instances with balanced random labels; each instance draws
15-25 word types (with replacement, so slightly fewer distinct ones) from a Zipf-like distribution over 3,866 types
(``p_j ~ 1 / (j + 10)^1.25``, from ~180 to ~260,000 instances per type); each type prefers one random label with a
log-odds strength drawn from an exponential distribution (scale 0.33), which plants feature-label correlations of
varying strength and gives Err(uniform) ~0.056. Every type ends up in at least 100 instances and in every label
(checked with ``select_features``). Generated with ``numpy.random.default_rng(seed)`` in a few seconds.

Sections (all timed in this run, same process, same threads):

1. the full problem: ``solve_weights`` with its defaults (L-BFGS), against a wall-time budget (120 s on 2 cores);
   then the same with ``optimizer="adam"`` for the same step cap, for the choice of the default;
2. a random subsample (20,000 instances, the same 3,866 features): the dense baseline ``dense_reference_weights``
   (dense float64 matrix, full-batch Adam with autograd) against ``solve_weights(optimizer="adam")`` for the same
   number of steps, i.e. the same algorithm, so the Errs must match (tolerance 1e-3) and the time ratio is the
   implementation's speed-up; then ``solve_weights`` with its defaults against the same dense run (time ratio, and
   the default must reach an Err no higher than the dense baseline's).

Exits non-zero when any PASS/FAIL line fails.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch

from spurious.lexical.reweight import dense_reference_weights, err, select_features, solve_weights


def synthetic_problem(
    n: int = 550_000,
    d: int = 3866,
    n_labels: int = 3,
    *,
    seed: int = 0,
    draws: tuple[int, int] = (15, 25),
    zipf_offset: float = 10.0,
    zipf_exponent: float = 1.25,
    bias_scale: float = 0.33,
) -> tuple[sp.csr_matrix, np.ndarray]:
    """The synthetic (features, labels) problem of the module docstring: 0/1 CSR ``(n, d)`` and int labels ``(n,)``."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, n_labels, n)
    frequency = 1.0 / (np.arange(d) + zipf_offset) ** zipf_exponent
    frequency /= frequency.sum()
    logits = np.zeros((d, n_labels))
    logits[np.arange(d), rng.integers(0, n_labels, d)] = rng.exponential(bias_scale, d)
    label_given_type = np.exp(logits)
    label_given_type /= label_given_type.sum(axis=1, keepdims=True)
    per_instance = rng.integers(draws[0], draws[1] + 1, n)
    rows, cols = [], []
    for y in range(n_labels):
        members = np.flatnonzero(labels == y)
        p = frequency * label_given_type[:, y]  # p(type | label) ~ p(type) p(label | type)
        cols.append(rng.choice(d, size=int(per_instance[members].sum()), p=p / p.sum()))
        rows.append(np.repeat(members, per_instance[members]))
    rows_all, cols_all = np.concatenate(rows), np.concatenate(cols)
    features = sp.csr_matrix((np.ones(rows_all.size), (rows_all, cols_all)), shape=(n, d))
    features.data[:] = 1.0  # repeated draws of a type in one instance: present once
    return features, labels


def effective_fraction(q: np.ndarray) -> float:
    """Kish effective sample size as a fraction of n: 1 for uniform weights, smaller the more uneven they are."""
    return float(1.0 / np.sum(q * q) / q.size)


def status(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instances", type=int, default=550_000)
    parser.add_argument("--features", type=int, default=3866)
    parser.add_argument("--labels", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-steps", type=int, default=500, help="solve_weights step cap (its default)")
    parser.add_argument("--budget", type=float, default=120.0, help="seconds allowed for solve_weights on the full set")
    parser.add_argument("--adam-steps", type=int, default=500, help="Adam comparison on the full set (0: skip)")
    parser.add_argument("--subsample", type=int, default=20_000, help="instances for the dense comparison (0: skip)")
    parser.add_argument("--dense-steps", type=int, default=300, help="Adam steps of the dense baseline")
    parser.add_argument("--match-tol", type=float, default=1e-3, help="allowed |Err dense - Err ours| (same algorithm)")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--json", default=None, help="also write the results here")
    args = parser.parse_args(argv)

    t0 = time.perf_counter()
    features, labels = synthetic_problem(args.instances, args.features, args.labels, seed=args.seed)
    gen_s = time.perf_counter() - t0
    n, d = features.shape
    counts = features.getnnz(axis=0)
    selection = select_features(features, labels, args.labels, [f"w{j}" for j in range(d)], min_count=100)
    n_dropped = len(selection.dropped_missing_label)
    err_uniform = err(features, labels, args.labels)
    print(f"synthetic problem: {n} instances, {d} features, {args.labels} labels (seed {args.seed}); generated in "
          f"{gen_s:.1f} s (not timed below)")  # fmt: skip
    print(f"  {features.nnz / n:.1f} features per instance; instances per feature min {counts.min()}, median "
          f"{int(np.median(counts))}, max {counts.max()}; kept by select_features(min_count=100): "
          f"{selection.columns.size}/{d} (dropped for a missing label: {n_dropped})")  # fmt: skip
    print(f"  torch {torch.__version__}, {torch.get_num_threads()} threads; Err(uniform) = {err_uniform:.4f} "
          f"(paper, SNLI: 0.057)")  # fmt: skip
    results: dict[str, Any] = {
        "benchmark": "bench_reweight",
        "instances": n,
        "features": d,
        "labels": args.labels,
        "seed": args.seed,
        "nnz": int(features.nnz),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "err_uniform": err_uniform,
    }
    checks: list[bool] = [selection.columns.size == d]

    # 1. The full problem.
    full = solve_weights(features, labels, args.labels, max_steps=args.max_steps, device=args.device)
    err_full = err(features, labels, args.labels, full.q)
    last = full.history[-1] if full.history else {"objective": 0.0, "evaluations": 0}
    print()
    print(f"full problem, solve_weights defaults ({full.optimizer}, device {full.device}):")
    print(f"  steps {full.steps}, converged {full.converged}, objective/objective(uniform) {last['objective']:.3e}, "
          f"{last['evaluations']} evaluations, {full.wall_time_s:.1f} s")  # fmt: skip
    print(f"  Err(uniform) {err_uniform:.4f} -> Err(q) {err_full:.6f}; weights n*q in [{full.q.min() * n:.2g}, "
          f"{full.q.max() * n:.3g}], effective sample size {effective_fraction(full.q):.2f} n")  # fmt: skip
    ok_time = full.wall_time_s < args.budget
    ok_err = err_full < 0.5 * err_uniform
    checks += [ok_time, ok_err]
    print(f"{status(ok_time)}: solve_weights {full.wall_time_s:.1f} s {'<' if ok_time else '>='} target "
          f"{args.budget:.0f} s")  # fmt: skip
    print(f"{status(ok_err)}: Err(q) {err_full:.6f} {'<' if ok_err else '>='} Err(uniform) / 2 = {err_uniform / 2:.4f}")
    results["full"] = {
        "optimizer": full.optimizer,
        "device": full.device,
        "steps": full.steps,
        "converged": full.converged,
        "objective": last["objective"],
        "evaluations": last["evaluations"],
        "wall_time_s": full.wall_time_s,
        "err": err_full,
        "effective_fraction": effective_fraction(full.q),
        "budget_s": args.budget,
    }

    if args.adam_steps > 0:
        adam = solve_weights(
            features, labels, args.labels, max_steps=args.adam_steps, optimizer="adam", device=args.device
        )
        err_adam = err(features, labels, args.labels, adam.q)
        print(f"  for comparison, optimizer='adam' (lr 0.05): {adam.steps} steps, objective "
              f"{adam.history[-1]['objective']:.3e}, Err(q) {err_adam:.6f}, {adam.wall_time_s:.1f} s")  # fmt: skip
        print(f"  ratio Err adam / Err {full.optimizer}: {err_adam / max(err_full, 1e-300):.1f}x; "
              f"objective ratio {adam.history[-1]['objective'] / max(last['objective'], 1e-300):.1f}x")  # fmt: skip
        results["full_adam"] = {
            "steps": adam.steps,
            "objective": adam.history[-1]["objective"],
            "wall_time_s": adam.wall_time_s,
            "err": err_adam,
        }

    # 2. Subsample: dense baseline vs ours.
    if args.subsample > 0:
        rng = np.random.default_rng(args.seed + 1)
        rows = np.sort(rng.choice(n, size=min(args.subsample, n), replace=False))
        sub_x, sub_y = features[rows], labels[rows]
        sub_uniform = err(sub_x, sub_y, args.labels)
        t0 = time.perf_counter()
        q_dense = dense_reference_weights(sub_x, sub_y, args.labels, steps=args.dense_steps)
        dense_s = time.perf_counter() - t0
        err_dense = err(sub_x, sub_y, args.labels, q_dense)
        same = solve_weights(
            sub_x, sub_y, args.labels, max_steps=args.dense_steps, tol=0.0, objective_tol=0.0, optimizer="adam",
            device=args.device,
        )  # fmt: skip
        err_same = err(sub_x, sub_y, args.labels, same.q)
        default = solve_weights(sub_x, sub_y, args.labels, max_steps=args.max_steps, device=args.device)
        err_default = err(sub_x, sub_y, args.labels, default.q)
        print()
        print(f"subsample: {rows.size} instances, the same {d} features; Err(uniform) {sub_uniform:.4f}")
        print(f"  dense baseline (dense float64 {rows.size}x{d}, Adam lr 0.05, autograd), {args.dense_steps} steps: "
              f"Err {err_dense:.6f}, {dense_s:.2f} s")  # fmt: skip
        print(f"  ours, optimizer='adam' (same algorithm), {same.steps} steps: Err {err_same:.6f}, "
              f"{same.wall_time_s:.2f} s")  # fmt: skip
        print(f"  ours, defaults ({default.optimizer}): {default.steps} steps, converged {default.converged}: "
              f"Err {err_default:.6f}, {default.wall_time_s:.2f} s")  # fmt: skip
        print(f"speed-up, same algorithm (dense / ours adam): {dense_s / same.wall_time_s:.1f}x")
        print(f"speed-up (dense / ours defaults): {dense_s / default.wall_time_s:.1f}x")
        ok_match = abs(err_dense - err_same) <= args.match_tol
        ok_default = err_default <= err_dense
        checks += [ok_match, ok_default]
        print(f"{status(ok_match)}: |Err dense - Err ours adam| = {abs(err_dense - err_same):.2e} "
              f"{'<=' if ok_match else '>'} {args.match_tol:.0e}")  # fmt: skip
        print(f"{status(ok_default)}: Err ours defaults {err_default:.6f} {'<=' if ok_default else '>'} Err dense "
              f"{err_dense:.6f}")  # fmt: skip
        results["subsample"] = {
            "instances": int(rows.size),
            "err_uniform": sub_uniform,
            "dense_steps": args.dense_steps,
            "dense_s": dense_s,
            "dense_err": err_dense,
            "ours_adam_s": same.wall_time_s,
            "ours_adam_err": err_same,
            "ours_default_s": default.wall_time_s,
            "ours_default_err": err_default,
            "ours_default_steps": default.steps,
            "speedup_same_algorithm": dense_s / same.wall_time_s,
            "speedup_default": dense_s / default.wall_time_s,
            "match_tol": args.match_tol,
        }

    results["pass"] = all(checks)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
        print(f"wrote {args.json}")
    return 0 if all(checks) else 1


if __name__ == "__main__":
    sys.exit(main())
