"""ReSam: resampling the training data by the bias segments."""

from __future__ import annotations

from typing import Literal

import numpy as np
import pandas as pd


def resample_segments(
    biased: pd.DataFrame,
    unbiased: pd.DataFrame,
    *,
    policy: Literal["upsample", "downsample"] = "upsample",
    ratio: float = 1.0,
    seed: int = 0,
) -> tuple[pd.DataFrame, dict]:
    """ReSam (paper §4.3): rebalance the biased and unbiased segments so that |smaller| / |larger| = ``ratio``.

    ``ratio`` ∈ (0, 1]; 1.0 makes the segments equally large. ``"upsample"`` enlarges the smaller segment to
    round(ratio·|larger|) rows: every original row once, plus extra rows drawn with replacement. ``"downsample"``
    shrinks the larger segment to round(|smaller| / ratio) rows drawn without replacement. A segment already closer
    to balance than ``ratio`` is left alone (resampling never makes the data *less* balanced). The paper leaves the
    policy and the ratio open (the authors' code has no ReSam), hence the parameters; record them with the run.

    Rows keep their original ``id`` (and every other column): upsampled duplicates share an id, which is harmless
    because training treats rows independently, and it lets results be traced back to SQuAD. The result is shuffled
    and re-indexed; everything is deterministic for a seed. Returns the frame and a stats dict for the run log.
    """
    if policy not in ("upsample", "downsample"):
        raise ValueError(f"policy must be 'upsample' or 'downsample', got {policy!r}")
    if not (0.0 < float(ratio) <= 1.0):
        raise ValueError(f"ratio must lie in (0, 1], got {ratio!r}")
    for name, frame in (("biased", biased), ("unbiased", unbiased)):
        if len(frame) == 0:
            raise ValueError(f"resample_segments: the {name} segment is empty")
    if list(biased.columns) != list(unbiased.columns):
        raise ValueError("resample_segments: the biased and unbiased segments have different columns")

    rng = np.random.default_rng(seed)
    segments = {"biased": biased.reset_index(drop=True), "unbiased": unbiased.reset_index(drop=True)}
    # ties: treat the unbiased segment as the smaller one (the paper up-samples unbiased / down-samples biased)
    larger, smaller = ("biased", "unbiased") if len(biased) >= len(unbiased) else ("unbiased", "biased")
    n_larger, n_smaller = len(segments[larger]), len(segments[smaller])
    upsampled = downsampled = None
    if policy == "upsample":
        target = max(1, round(ratio * n_larger))
        if target > n_smaller:
            extra = rng.integers(0, n_smaller, size=target - n_smaller)
            rows = np.concatenate([np.arange(n_smaller), extra])
            segments[smaller] = segments[smaller].iloc[rows]
            upsampled = smaller
    else:
        target = max(1, round(n_smaller / ratio))
        if target < n_larger:
            rows = np.sort(rng.choice(n_larger, size=target, replace=False))
            segments[larger] = segments[larger].iloc[rows]
            downsampled = larger

    combined = pd.concat([segments["biased"], segments["unbiased"]], ignore_index=True)
    combined = combined.iloc[rng.permutation(len(combined))].reset_index(drop=True)
    stats = {
        "policy": policy,
        "ratio": float(ratio),
        "seed": int(seed),
        "n_biased_before": len(biased),
        "n_unbiased_before": len(unbiased),
        "n_biased_after": len(segments["biased"]),
        "n_unbiased_after": len(segments["unbiased"]),
        "upsampled": upsampled,
        "downsampled": downsampled,
    }
    return combined, stats

