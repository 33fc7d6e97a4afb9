"""Benchmark: the prediction-bias threshold search for all seven heuristics on SQuAD v1.1 dev (10,570 questions).

Run: ``python benchmarks/bench_bias.py [--data PATH] [--repeat N] [--budget SECONDS]``.

Inputs are realistic but cheap: per-example EM/F1 of a "model" that answers with the second annotator's answer
(scored against the other gold answers, ~81 EM), and heuristic values that are real where they are cheap to compute
(ans-len, sim-word, a token-overlap stand-in for cos-sim, a sentence-count stand-in for ans-pos) and drawn at random
with the real value ranges otherwise (word-dist 0..40 with -1 sentinels, sim-ents 0..14, subj-pos -1..5). The search
itself uses the defaults (800 × 100, without replacement), so its cost depends on the inputs only through the number of
valid thresholds.

The baseline times the reference's way (isbiased ``_compute_metrics_for_bunch``): per threshold, per segment, 100 ×
``DataFrame.sample(n=800)`` followed by the mean, then pandas quantiles. It is given precomputed per-example EM/F1
(the reference even re-runs the squad metric on every sample, so it is slower still). It is timed on a few valid
thresholds and **extrapolated** to the number of valid thresholds of our run. Exits non-zero when our search's median
time exceeds the budget (5 s).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from spurious.core.data.squad import load_squad_json
from spurious.core.metrics import score_predictions
from spurious.thinktwice.bias import DROP_NEGATIVE_HEURISTICS, search_thresholds

# the data mirror (make data; the Makefile exports SPURIOUS_DATA_MIRROR), else ../shared beside the checkout
DEFAULT_DATA = (
    Path(os.environ.get("SPURIOUS_DATA_MIRROR") or Path(__file__).resolve().parents[2] / "shared" / "data")
    / "squad_v1.1" / "dev-v1.1.json.gz"
)
_WORD = re.compile(r"\w+")


def realistic_inputs(frame: pd.DataFrame, seed: int = 0) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
    """Heuristic values and per-example EM/F1 (see the module docstring)."""
    rng = np.random.default_rng(seed)
    n = len(frame)
    preds = {}
    refs = []
    for qid, answers in zip(frame["id"], frame["answers"], strict=True):
        texts = list(answers["text"])
        preds[qid] = texts[1] if len(texts) > 1 else texts[0]
        others = texts[:1] + texts[2:] if len(texts) > 1 else texts
        refs.append({"text": others, "answer_start": [0] * len(others)})
    scored = score_predictions(frame.assign(answers=refs), preds)

    ans_len, sim_word, overlap, ans_pos = [], [], [], []
    for context, question, answers in zip(frame["context"], frame["question"], frame["answers"], strict=True):
        ans_len.append(np.mean([len(_WORD.findall(t)) for t in answers["text"]]))
        c_tokens, q_tokens = set(_WORD.findall(context)), set(_WORD.findall(question))
        sim_word.append(len(c_tokens & q_tokens))
        overlap.append(len(c_tokens & q_tokens) / np.sqrt(len(c_tokens) * max(len(q_tokens), 1)))
        ans_pos.append(context[: int(answers["answer_start"][0])].count(". "))
    values = {
        "word-dist": np.where(rng.random(n) < 0.05, -1, rng.integers(0, 41, n)).astype(float),
        "sim-word": np.asarray(sim_word, dtype=float),
        "ans-pos": np.asarray(ans_pos, dtype=float),
        "cos-sim": np.asarray(overlap, dtype=float),
        "ans-len": np.asarray(ans_len, dtype=float),
        "sim-ents": rng.integers(0, 15, n).astype(float),
        "subj-pos": rng.integers(-1, 6, n).astype(float),
    }
    return values, scored["em"].to_numpy(), scored["f1"].to_numpy()


def naive_threshold(df: pd.DataFrame, column: str, threshold: float, sample_size: int, iterations: int) -> float:
    """One threshold the reference's way; returns the EM distance (computed, so nothing is optimised away)."""
    data_higher, data_lower = [x for _, x in df.groupby(df[column] <= threshold)]
    quantiles = []
    for segment in (data_lower, data_higher):
        exact, f1 = [], []
        for _ in range(iterations):
            sample = segment.sample(n=sample_size)
            exact.append(sample["em"].mean())
            f1.append(sample["f1"].mean())
        metrics = pd.DataFrame({"exact_match": exact, "f1": f1})
        quantiles.append((metrics["exact_match"].quantile(0.025), metrics["exact_match"].quantile(0.975)))
    (l025, l975), (h025, h975) = quantiles
    if l025 > h975:
        return l025 - h975
    if h025 > l975:
        return h025 - l975
    return 0.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--repeat", type=int, default=3, help="timed runs of our search (the median decides)")
    parser.add_argument("--naive-thresholds", type=int, default=2, help="thresholds timed for the baseline")
    parser.add_argument("--budget", type=float, default=5.0, help="seconds allowed for our 7-heuristic search")
    args = parser.parse_args(argv)

    frame = load_squad_json(args.data)
    t0 = time.perf_counter()
    values, em, f1 = realistic_inputs(frame)
    prep = time.perf_counter() - t0
    print(f"data: {args.data} ({len(frame)} questions); inputs prepared in {prep:.2f} s (not timed below)")
    print(f"model stand-in: EM {em.mean():.2f}, F1 {f1.mean():.2f}")

    times = []
    results: dict = {}
    for _ in range(max(1, args.repeat)):
        t0 = time.perf_counter()
        results = search_thresholds(values, em, f1, sample_size=800, iterations=100, seed=0)
        times.append(time.perf_counter() - t0)
    ours = statistics.median(times)
    n_valid = sum(e["valid"] for r in results.values() for e in r["grid"])
    n_grid = sum(len(r["grid"]) for r in results.values())
    print()
    print(f"{'heuristic':<10} {'grid':>5} {'valid':>5} {'found':>6} {'threshold':>10} {'bias':>7} {'dropped':>8}")
    for name, r in results.items():
        valid = sum(e["valid"] for e in r["grid"])
        thr = "-" if r["threshold"] is None else f"{r['threshold']:.4g}"
        print(
            f"{name:<10} {len(r['grid']):>5} {valid:>5} {r['found']!s:>6} {thr:>10} {r['prediction_bias']:>7.2f} "
            f"{r['n_dropped_negative']:>8}"
        )

    # Baseline: time a few valid thresholds, extrapolate to all valid thresholds of our run.
    valid_pairs = [(name, e["threshold"]) for name, r in results.items() for e in r["grid"] if e["valid"]]
    timed = valid_pairs[: max(1, args.naive_thresholds)]
    frames = {}
    t_naive = 0.0
    for name, thr in timed:
        if name not in frames:
            v = values[name]
            keep = v >= 0 if name in DROP_NEGATIVE_HEURISTICS else np.ones(len(v), dtype=bool)
            frames[name] = pd.DataFrame({name: v[keep], "em": em[keep], "f1": f1[keep]})
        t0 = time.perf_counter()
        naive_threshold(frames[name], name, thr, 800, 100)
        t_naive += time.perf_counter() - t0
    per_threshold = t_naive / len(timed)
    naive_total = per_threshold * n_valid

    print()
    print(f"ours   (7 heuristics, {n_grid} grid entries, {n_valid} valid): median {ours:.3f} s over {len(times)} runs "
          f"({', '.join(f'{t:.3f}' for t in times)})")  # fmt: skip
    print(f"naive  (reference style, DataFrame.sample + mean): {per_threshold:.3f} s per valid threshold, timed on "
          f"{len(timed)} threshold(s) {timed}")  # fmt: skip
    print(f"naive  EXTRAPOLATED to {n_valid} valid thresholds: {naive_total:.1f} s")
    print(f"speed-up (naive extrapolated / ours): {naive_total / ours:.0f}x")
    status = "PASS" if ours < args.budget else "FAIL"
    print(f"{status}: ours {ours:.3f} s {'<' if ours < args.budget else '>='} budget {args.budget:.1f} s")
    return 0 if status == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())
