"""Prediction bias (Think Twice, §3 and Algorithm 1, App. C; the authors' ``find_longest_distance``, MIR-MU/isbiased).

A heuristic ``h`` assigns every evaluated example a value. For a threshold ``t`` the examples split into the *low*
segment ``L = {h <= t}`` and the *high* segment ``H = {h > t}``. Each segment is evaluated on ``iterations`` random
samples of ``sample_size`` rows; the distance between the two segments' [2.5 %, 97.5 %] intervals of the sample EMs
is the *prediction bias* at ``t`` (0 when the intervals overlap). The threshold is searched over the reference grid
and chosen by the reference's rule. Per-example EM/F1 (0/100 and 0..100, see :mod:`spurious.core.metrics`) are computed
once by the caller; here a sample's EM is the mean of its rows' EMs, which equals the official corpus EM of the
sample (the reference re-runs the squad metric for each of its 200 samples per threshold).

Deliberate differences from the reference code (MIR-MU/isbiased ``find_longest_distance``), each documented where it
is implemented:

* sampling is seeded (the authors' is not): one fresh generator per (seed, heuristic, threshold index), so a result
  does not depend on which other heuristics or thresholds were evaluated;
* ``-1`` sentinels of word-dist / subj-pos are dropped before the grid is built as well as before splitting
  (the reference builds the grid on all rows; with a sentinel the minimum is ``-1`` and the grid starts at 0 either
  way unless every real value is positive), and :func:`split_by_threshold` drops them too unless
  ``compat_sentinels_in_low``;
* (not a difference: the first accepted threshold must have a *positive* EM distance, as in the reference,
  the authors' ``find_longest_distance``, and paper App. C "only one significant threshold");
* no threshold gives ``found=False`` and prediction bias 0.0 (the reference returns ``-1``, which its downstream
  scripts report as 0), with the ``reason`` (:data:`NOT_FOUND_REASONS`); a search on fewer than twice
  ``sample_size`` rows, which no threshold can ever satisfy, is an :class:`InsufficientRowsError` unless the caller
  allows it (``allow_too_few_rows``; the reference silently returns ``-1``).
"""

from __future__ import annotations

import logging
import zlib
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike

from spurious.core.metrics import score_predictions

log = logging.getLogger(__name__)

#: Why a search found no threshold (the result's ``reason``; ``None`` when one was found).
NOT_FOUND_REASONS: dict[str, str] = {
    "too_few_rows": "fewer than 2 x sample_size rows: no threshold can leave sample_size rows on both sides",
    "no_valid_split": "every threshold of the grid leaves one segment with fewer than sample_size rows",
    "no_significant_difference": "the segments' EM intervals overlap at every valid threshold",
}


class InsufficientRowsError(ValueError):
    """A threshold search that cannot find a threshold whatever the predictions: too few rows for the sample size."""

__all__ = [
    "DROP_NEGATIVE_HEURISTICS",
    "QUANTILES",
    "GROUPS",
    "threshold_grid",
    "threshold_rng",
    "draw_sample_indices",
    "bootstrap_segment",
    "interval_distance",
    "select_best_threshold",
    "measure_at_threshold",
    "search_threshold",
    "search_thresholds",
    "InsufficientRowsError",
    "NOT_FOUND_REASONS",
    "split_by_threshold",
    "annotator_predictions",
    "human_scores",
    "human_skipped_count",
    "HumanScores",
    "human_bias",
]

#: Heuristics whose value ``-1`` is a "not computable" sentinel (word-dist: answer or question word not found in the
#: context; subj-pos: a question subject missing from the context). Their negative rows are excluded by default.
DROP_NEGATIVE_HEURISTICS: frozenset[str] = frozenset({"word-dist", "subj-pos"})
#: Lower and upper quantile of the sample metrics (Algorithm 1: q↓ = 0.025, q↑ = 0.975).
QUANTILES: tuple[float, float] = (0.025, 0.975)
GROUPS: tuple[str, str] = ("low", "high")
_MAX_GRID = 1_000_000
_STAT_KEYS = ("em_mean", "em_q025", "em_q975", "f1_mean", "f1_q025", "f1_q975")


# ---------------------------------------------------------------------------------------------------------------------
# Building blocks


def _as_1d_float(values: ArrayLike, name: str) -> np.ndarray:
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
    if not np.isfinite(arr).all():
        bad = int((~np.isfinite(arr)).sum())
        raise ValueError(
            f"{name} holds {bad} NaN/infinite values; heuristics mark 'not computable' with -1, so a NaN is a bug "
            "upstream (fix or drop those rows before the search)"
        )
    return arr


def threshold_grid(values: ArrayLike) -> np.ndarray:
    """The reference's candidate thresholds for heuristic ``values`` (the authors' ``find_longest_distance``).

    ``start = int(min) + 1`` if ``min > 0`` else ``0``; step ``1`` if ``max > 1`` else ``0.1``; thresholds are
    emitted while ``t < max``. The 0.1 steps are *accumulated* in float64 exactly like the reference's
    ``t += 0.1`` loop (0, 0.1, 0.2, 0.30000000000000004, …, 0.7999999999999999, 0.8999999999999999), not computed as
    ``i / 10``: the split is ``h <= t``, so a value of exactly 0.8 lies in the *high* segment at the accumulated
    "0.8" threshold, as in the reference. For the same reason a maximum of exactly 1.0 yields an 11th threshold,
    0.9999999999999999. The grid is empty for an empty input, and when ``0 < min`` and ``max <= 1``.
    """
    v = _as_1d_float(values, "values")
    if v.size == 0:
        return np.empty(0, dtype=np.float64)
    lo, hi = float(v.min()), float(v.max())
    t: float = int(lo) + 1 if lo > 0 else 0
    step: float = 1 if hi > 1 else 0.1
    if (hi - t) / step > _MAX_GRID:
        raise ValueError(f"threshold grid from {t} to {hi} in steps of {step} would exceed {_MAX_GRID} entries")
    out: list[float] = []
    while t < hi:
        out.append(t)
        t += step
    return np.asarray(out, dtype=np.float64)


def threshold_rng(seed: int, heuristic: str, index: int) -> np.random.Generator:
    """A fresh generator for threshold number ``index`` (position in the grid) of ``heuristic``.

    Derived from ``(seed, crc32(heuristic), index)`` through :class:`numpy.random.SeedSequence`, so the draws of a
    threshold are reproducible and independent of the other heuristics and thresholds (crc32, unlike ``hash``, is
    stable across interpreter runs).
    """
    if int(seed) < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed}")
    key = zlib.crc32(heuristic.encode("utf-8"))
    return np.random.default_rng(np.random.SeedSequence([int(seed), key, int(index)]))


def draw_sample_indices(
    rng: np.random.Generator, n: int, sample_size: int, iterations: int, *, with_replacement: bool = False
) -> np.ndarray:
    """An ``(iterations, sample_size)`` matrix of row positions into a segment of ``n`` rows.

    Without replacement (default, the reference's ``DataFrame.sample(n=sample_size)``: subsampling), each row is
    one ``Generator.choice(n, sample_size, replace=False)`` (a partial Fisher–Yates shuffle in C, ~35 µs): measured
    several times faster than the vectorised alternatives for segments of 1k–10k rows (``n`` random keys per
    iteration + ``argpartition``: ~25 ms per 100 × 9.5k; ``Generator.permuted`` of a tiled ``arange``: ~10 ms), and
    plainly uniform. With replacement (a true bootstrap) it is one vectorised ``Generator.integers`` call.
    """
    if with_replacement:
        return rng.integers(0, n, size=(iterations, sample_size))
    if sample_size > n:
        raise ValueError(f"cannot draw {sample_size} of {n} rows without replacement")
    out = np.empty((iterations, sample_size), dtype=np.int64)
    for i in range(iterations):
        out[i] = rng.choice(n, sample_size, replace=False)
    return out


def bootstrap_segment(em: np.ndarray, f1: np.ndarray, indices: np.ndarray) -> dict[str, float]:
    """Mean and [2.5 %, 97.5 %] quantiles of the per-sample mean EM and F1 (``indices``: one sample per row).

    Quantiles use numpy's default linear interpolation, the same as pandas' ``Series.quantile`` in the reference.
    """
    em_means = em[indices].mean(axis=1)
    f1_means = f1[indices].mean(axis=1)
    em_q = np.quantile(em_means, QUANTILES)
    f1_q = np.quantile(f1_means, QUANTILES)
    return {
        "em_mean": float(em_means.mean()),
        "em_q025": float(em_q[0]),
        "em_q975": float(em_q[1]),
        "f1_mean": float(f1_means.mean()),
        "f1_q025": float(f1_q[0]),
        "f1_q975": float(f1_q[1]),
    }


def interval_distance(low_q025: float, low_q975: float, high_q025: float, high_q975: float) -> float:
    """Gap between the low segment's and the high segment's intervals; 0 when they overlap or touch.

    L entirely above H → ``L.q025 − H.q975``; entirely below → ``H.q025 − L.q975`` (the reference's strict
    comparisons, so touching intervals give 0).
    """
    if low_q975 > high_q025 and low_q025 > high_q975:
        return float(low_q025 - high_q975)
    if high_q975 > low_q025 and high_q025 > low_q975:
        return float(high_q025 - low_q975)
    return 0.0


def select_best_threshold(
    entries: Sequence[Mapping[str, Any]], sample_size: int, *, accept_zero_distance: bool = False
) -> int | None:
    """Index of the chosen grid entry (the authors' ``find_longest_distance``), or ``None``.

    Entries are visited in ascending threshold order; only ``distance_em`` decides. Nothing accepted yet: accept a
    valid entry with a positive distance, whatever its segment sizes (both are ``>= sample_size`` by validity).
    Afterwards accept an entry if ``(d > best or (d > 0 and the current best's smaller segment < 2*sample_size))``
    and both its segments exceed ``2*sample_size`` (the reference's hard-coded 1600 for ``sample_size=800``). So a
    later, larger-segment threshold can replace a small-segment first hit even with a smaller distance.
    ``accept_zero_distance=True`` accepts the first valid entry even at distance 0: not a search rule (the reference
    requires a positive distance) but what :func:`measure_at_threshold` needs to report a single given threshold.
    """
    two_k = 2 * sample_size
    best: int | None = None
    best_distance = 0.0
    best_smaller = 0
    for i, entry in enumerate(entries):
        if not entry["valid"]:
            continue
        d = float(entry["distance_em"])
        size_low, size_high = int(entry["size_low"]), int(entry["size_high"])
        if best is None:
            accept = d >= 0.0 if accept_zero_distance else d > 0.0
        else:
            accept = (
                (d > best_distance or (d > 0.0 and best_smaller < two_k)) and size_low > two_k and size_high > two_k
            )
        if accept:
            best, best_distance, best_smaller = i, d, min(size_low, size_high)
    return best


def _resolve_drop_negative(heuristic: str | None, drop_negative: bool | None) -> bool:
    if drop_negative is not None:
        return bool(drop_negative)
    # Without a heuristic name: only sentinel-bearing heuristics have negative values at all, so dropping is safe.
    return True if heuristic is None else heuristic in DROP_NEGATIVE_HEURISTICS


# ---------------------------------------------------------------------------------------------------------------------
# Threshold search


def search_threshold(
    values: ArrayLike,
    em: ArrayLike,
    f1: ArrayLike,
    *,
    heuristic: str,
    sample_size: int = 800,
    iterations: int = 100,
    seed: int = 0,
    with_replacement: bool = False,
    drop_negative: bool | None = None,
    accept_zero_distance: bool = False,
    thresholds: ArrayLike | None = None,
    allow_too_few_rows: bool = False,
) -> dict[str, Any]:
    """Search the threshold that maximises the prediction bias of one heuristic (Alg. 1 + App. C).

    Data of fewer than ``2 * sample_size`` rows can never give a threshold: that raises
    :class:`InsufficientRowsError` naming the sizes, unless ``allow_too_few_rows``. Enough rows of which too few
    have a value (sentinels dropped), or an allowed small input, give ``found`` False with ``reason``
    ``too_few_rows`` and a logged warning.

    ``thresholds`` replaces the grid of candidates (default :func:`threshold_grid` of the values); see
    :func:`measure_at_threshold` for a single fixed one (it passes ``accept_zero_distance=True``, see
    :func:`select_best_threshold`; a search keeps the default, the reference's positive-distance rule).

    ``values``, ``em`` and ``f1`` are aligned per evaluated example (EM 0/100, F1 0..100). ``drop_negative``
    (default: ``heuristic in DROP_NEGATIVE_HEURISTICS``) removes rows with ``values < 0`` before the grid and the
    splits. A grid entry is valid when both segments hold at least ``sample_size`` rows; for a valid entry the low
    segment's samples are drawn first, then the high segment's, from :func:`threshold_rng` ``(seed, heuristic,
    index)``; sample indices refer to the segment's rows in input order (``values[values <= t]``).

    Returns a JSON-serialisable dict: ``heuristic, found, reason, threshold, prediction_bias, distance_em, distance_f1,
    biased_group, worse_group, sample_size, iterations, with_replacement, seed, n_evaluated, n_dropped_negative,
    groups, grid``; ``n_evaluated`` counts the rows searched, after the ``n_dropped_negative`` sentinel rows were
    removed. ``prediction_bias`` is ``distance_em`` at the chosen threshold, 0.0 when none was found (then
    ``threshold``, the distances, the groups' statistics and ``biased_group``/``worse_group`` are ``None``).
    ``biased_group`` is the segment with the higher EM 97.5 % quantile (ties → "high", as the reference's split).
    ``groups[g]`` = ``{size, em_mean, em_q025, em_q975, f1_mean, f1_q025, f1_q975}`` of the samples' means at the
    chosen threshold; ``grid`` lists ``{threshold, size_low, size_high, valid, distance_em, distance_f1}`` for every
    candidate (distances ``None`` when invalid).
    """
    if not isinstance(heuristic, str) or not heuristic:
        raise ValueError("heuristic must be a non-empty string (it names the result and seeds the sampling)")
    if int(sample_size) < 1 or int(iterations) < 1:
        raise ValueError(f"sample_size and iterations must be positive, got {sample_size} and {iterations}")
    sample_size, iterations, seed = int(sample_size), int(iterations), int(seed)
    v = _as_1d_float(values, "values")
    em_arr = _as_1d_float(em, "em")
    f1_arr = _as_1d_float(f1, "f1")
    if not (len(v) == len(em_arr) == len(f1_arr)):
        raise ValueError(f"values, em and f1 differ in length: {len(v)}, {len(em_arr)}, {len(f1_arr)}")
    if int(seed) < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed}")

    n_dropped = 0
    if _resolve_drop_negative(heuristic, drop_negative):
        keep = v >= 0
        n_dropped = int((~keep).sum())
        if n_dropped:
            v, em_arr, f1_arr = v[keep], em_arr[keep], f1_arr[keep]
    n = len(v)
    if n + n_dropped < 2 * sample_size and not allow_too_few_rows:
        # the data itself is too small for the sample size: a setting to fix, not a result
        raise InsufficientRowsError(
            f"{heuristic}: {n + n_dropped} rows cannot give two segments of sample_size {sample_size} each (needs at "
            f"least {2 * sample_size}); lower the sample size (bias.sample_size in the config, --sample-size on the "
            "command line) or accept a result without a threshold (bias.allow_too_few_rows, --allow-too-few-rows)"
        )
    if n < 2 * sample_size:
        # allowed, or too few rows *with a value* (word-dist's and subj-pos's sentinels dropped): a property of the
        # heuristic on this data, reported with its reason
        log.warning(
            "%s: %d rows to search%s, fewer than 2 x sample_size %d: no threshold possible (reason too_few_rows)",
            heuristic, n, f" after dropping {n_dropped} rows without a value" if n_dropped else "", sample_size,
        )
    grid = threshold_grid(v) if thresholds is None else np.sort(_as_1d_float(thresholds, "thresholds"))
    sorted_v = np.sort(v)
    # |L| for every threshold at once; ``side="right"`` counts values <= t, the split's comparison.
    sizes_low = np.searchsorted(sorted_v, grid, side="right")

    entries: list[dict[str, Any]] = []
    stats: dict[int, tuple[dict[str, float], dict[str, float]]] = {}
    for i, (t, n_low) in enumerate(zip(grid.tolist(), sizes_low.tolist(), strict=True)):
        n_high = n - n_low
        valid = n_low >= sample_size and n_high >= sample_size
        entry: dict[str, Any] = {
            "threshold": float(t),
            "size_low": int(n_low),
            "size_high": int(n_high),
            "valid": bool(valid),
            "distance_em": None,
            "distance_f1": None,
        }
        if valid:
            rng = threshold_rng(seed, heuristic, i)
            low_mask = v <= t
            segments = []
            for mask, size in ((low_mask, n_low), (~low_mask, n_high)):
                idx = draw_sample_indices(rng, size, sample_size, iterations, with_replacement=with_replacement)
                segments.append(bootstrap_segment(em_arr[mask], f1_arr[mask], idx))
            low, high = segments
            entry["distance_em"] = interval_distance(low["em_q025"], low["em_q975"], high["em_q025"], high["em_q975"])
            entry["distance_f1"] = interval_distance(low["f1_q025"], low["f1_q975"], high["f1_q025"], high["f1_q975"])
            stats[i] = (low, high)
        entries.append(entry)

    best = select_best_threshold(entries, sample_size, accept_zero_distance=accept_zero_distance)
    groups: dict[str, dict[str, Any]]
    reason = None
    if best is None:
        if n < 2 * sample_size:
            reason = "too_few_rows"
        elif not any(e["valid"] for e in entries):
            reason = "no_valid_split"
        else:
            reason = "no_significant_difference"
        groups = {g: {"size": None, **dict.fromkeys(_STAT_KEYS)} for g in GROUPS}
        threshold = distance_em = distance_f1 = biased = worse = None
        prediction_bias = 0.0
    else:
        chosen = entries[best]
        low, high = stats[best]
        groups = {
            "low": {"size": chosen["size_low"], **low},
            "high": {"size": chosen["size_high"], **high},
        }
        threshold = chosen["threshold"]
        distance_em, distance_f1 = chosen["distance_em"], chosen["distance_f1"]
        prediction_bias = float(distance_em)
        # The reference's split_data_by_heuristics: L is biased iff L's EM 97.5 % quantile is strictly higher.
        biased = "low" if low["em_q975"] > high["em_q975"] else "high"
        worse = "high" if biased == "low" else "low"
    return {
        "heuristic": heuristic,
        "found": best is not None,
        "reason": reason,
        "threshold": threshold,
        "prediction_bias": prediction_bias,
        "distance_em": distance_em,
        "distance_f1": distance_f1,
        "biased_group": biased,
        "worse_group": worse,
        "sample_size": sample_size,
        "iterations": iterations,
        "with_replacement": bool(with_replacement),
        "seed": seed,
        "n_evaluated": int(n),
        "n_dropped_negative": n_dropped,
        "groups": groups,
        "grid": entries,
    }


def measure_at_threshold(
    values: ArrayLike,
    em: ArrayLike,
    f1: ArrayLike,
    threshold: float,
    *,
    heuristic: str,
    sample_size: int = 800,
    iterations: int = 100,
    seed: int = 0,
    with_replacement: bool = False,
    drop_negative: bool | None = None,
    allow_too_few_rows: bool = False,
) -> dict[str, Any]:
    """Prediction bias at a given threshold, e.g. one found on another dataset (paper §5.2, Fig. 4: the
    SQuAD-optimal thresholds applied to OOD data). Same result layout as :func:`search_threshold`; ``found`` is
    whether both segments hold at least ``sample_size`` rows, and ``prediction_bias`` is then the EM-interval
    distance, which may be 0 when the intervals overlap (no search: the threshold is not chosen to maximise it)."""
    return search_threshold(
        values,
        em,
        f1,
        heuristic=heuristic,
        sample_size=sample_size,
        iterations=iterations,
        seed=seed,
        with_replacement=with_replacement,
        drop_negative=drop_negative,
        accept_zero_distance=True,
        thresholds=[float(threshold)],
        allow_too_few_rows=allow_too_few_rows,
    )


def search_thresholds(
    values_by_heuristic: Mapping[str, ArrayLike] | pd.DataFrame,
    em: ArrayLike,
    f1: ArrayLike,
    **kwargs: Any,
) -> dict[str, dict[str, Any]]:
    """:func:`search_threshold` for several heuristics (a mapping, or a heuristics frame whose ``id`` column is
    skipped); ``kwargs`` are passed through. Results are independent of each other by construction."""
    if isinstance(values_by_heuristic, pd.DataFrame):
        items = [(str(c), values_by_heuristic[c].to_numpy()) for c in values_by_heuristic.columns if c != "id"]
    else:
        items = [(str(k), v) for k, v in values_by_heuristic.items()]
    return {name: search_threshold(vals, em, f1, heuristic=name, **kwargs) for name, vals in items}


# ---------------------------------------------------------------------------------------------------------------------
# Splitting


def split_by_threshold(
    qa_frame: pd.DataFrame,
    values: ArrayLike,
    threshold: float | None,
    biased_group: str | None,
    *,
    heuristic: str | None = None,
    drop_negative: bool | None = None,
    compat_sentinels_in_low: bool = False,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Split ``qa_frame`` into ``(biased, unbiased)`` at ``threshold`` (low = ``values <= threshold``).

    ``values`` are aligned with ``qa_frame`` by position (computed on *this* frame, which may differ from the one the
    threshold was searched on, e.g. SQuAD-train for bias models). ``biased_group`` is "low" or "high", usually the
    search result's ``biased_group``.

    Negative (sentinel) rows are handled as in the search: dropped when ``drop_negative`` (default: the heuristic is
    in :data:`DROP_NEGATIVE_HEURISTICS`; ``True`` when no ``heuristic`` is given, as only sentinels are negative),
    i.e. returned in neither frame. ``compat_sentinels_in_low=True`` reproduces the reference's
    ``split_data_by_heuristics``, which does not drop them, so they land in the low segment. Both returned frames
    carry ``attrs`` ``{"threshold", "biased_group", "n_dropped_negative"}`` so callers can record the count.
    """
    if threshold is None:
        raise ValueError("no threshold: the search found none for this heuristic, so there is nothing to split on")
    if biased_group not in GROUPS:
        raise ValueError(f"biased_group must be 'low' or 'high', got {biased_group!r}")
    v = _as_1d_float(values, "values")
    if len(v) != len(qa_frame):
        raise ValueError(f"values ({len(v)}) and qa_frame ({len(qa_frame)}) differ in length")
    if compat_sentinels_in_low:
        if drop_negative:
            raise ValueError("compat_sentinels_in_low keeps the negative rows; it contradicts drop_negative=True")
        keep = np.ones(len(v), dtype=bool)
    elif _resolve_drop_negative(heuristic, drop_negative):
        keep = v >= 0
    else:
        keep = np.ones(len(v), dtype=bool)
    low = keep & (v <= float(threshold))
    high = keep & (v > float(threshold))
    biased_mask, unbiased_mask = (low, high) if biased_group == "low" else (high, low)
    n_dropped = int((~keep).sum())
    if n_dropped:
        log.info("split on %s: %d rows with a negative sentinel value excluded", heuristic or "values", n_dropped)
    attrs = {"threshold": float(threshold), "biased_group": biased_group, "n_dropped_negative": n_dropped}
    biased = qa_frame[biased_mask].reset_index(drop=True)
    unbiased = qa_frame[unbiased_mask].reset_index(drop=True)
    biased.attrs.update(attrs)
    unbiased.attrs.update(attrs)
    return biased, unbiased


# ---------------------------------------------------------------------------------------------------------------------
# Human ("natural") prediction bias, §3 "Interpretation"

_N_ANNOTATORS = 3


def annotator_predictions(qa_frame: pd.DataFrame, k: int) -> tuple[pd.DataFrame, dict[str, str], pd.DataFrame]:
    """Annotator ``k`` (0, 1, 2) as a "model" answering SQuAD-dev.

    Returns ``(frame, predictions, references)``: ``frame`` = the questions with at least three gold answers, with all
    their gold answers (so heuristics are computed on it exactly as for models); ``predictions`` = id → the ``k``-th
    gold answer text; ``references`` = ``frame`` whose answers are only the *other two* of the first three gold
    answers (what annotator ``k`` is scored against, with :func:`spurious.core.metrics.score_predictions`).
    """
    if k not in range(_N_ANNOTATORS):
        raise ValueError(f"annotator index must be 0, 1 or 2, got {k}")
    has_three = np.array([len(a["text"]) >= _N_ANNOTATORS for a in qa_frame["answers"]], dtype=bool)
    frame = qa_frame[has_three].reset_index(drop=True)
    others = [j for j in range(_N_ANNOTATORS) if j != k]
    predictions: dict[str, str] = {}
    ref_answers = []
    for qid, answers in zip(frame["id"], frame["answers"], strict=True):
        texts, starts = list(answers["text"]), list(answers["answer_start"])
        predictions[str(qid)] = str(texts[k])
        ref_answers.append({"text": [str(texts[j]) for j in others], "answer_start": [int(starts[j]) for j in others]})
    references = frame.copy()
    references["answers"] = ref_answers
    return frame, predictions, references


def human_skipped_count(qa_frame: pd.DataFrame) -> int:
    """Number of questions the Human model skips: those with fewer than three gold answers."""
    return int(sum(len(a["text"]) < _N_ANNOTATORS for a in qa_frame["answers"]))


class HumanScores(list):
    """The three annotators' predictions frames (a plain list, indexable by annotator) plus ``n_skipped``."""

    n_skipped: int = 0


def human_scores(qa_frame: pd.DataFrame) -> HumanScores:
    """Predictions frames (``id, prediction_text, em, f1``) of annotators 0, 1, 2, as a list; its ``n_skipped``
    attribute (also :func:`human_skipped_count`, and each frame's ``attrs["n_skipped"]``) counts the skipped questions
    (fewer than three gold answers; SQuAD v1.1 dev has 139 with one or two).

    Annotator ``k`` is scored against the other two of the first three gold answers only (answers 4–6 of some dev
    questions are repeats or come from extra annotators; using them would make the three "human models" incomparable).
    """
    out = HumanScores()
    n_skipped = human_skipped_count(qa_frame)
    for k in range(_N_ANNOTATORS):
        _, predictions, references = annotator_predictions(qa_frame, k)
        scored = score_predictions(references, predictions)
        scored.attrs["n_skipped"] = n_skipped
        out.append(scored)
    out.n_skipped = n_skipped
    if n_skipped:
        log.info("human scores: skipped %d of %d questions with fewer than 3 gold answers", n_skipped, len(qa_frame))
    return out


def _min_over_annotators(results: Sequence[Mapping[str, Any]], what: str) -> dict[str, Any]:
    biases = []
    for k, res in enumerate(results):
        if "prediction_bias" not in res:
            raise ValueError(f"{what}: annotator {k}'s entry is not a search_threshold result (no prediction_bias)")
        biases.append(float(res["prediction_bias"]))
    k_min = int(np.argmin(biases))
    chosen = dict(results[k_min])
    chosen["annotator"] = chosen.get("annotator", k_min)
    chosen["per_annotator_bias"] = biases
    return chosen


def human_bias(
    results_per_annotator: Sequence[Mapping[str, Any]],
) -> dict[str, Any]:
    """The *Human* model's natural prediction bias: the minimum over the annotators' prediction bias (§3).

    Two input shapes, both a list with one entry per annotator:

    * each entry a :func:`search_threshold` result for the *same* heuristic (the workflow's per-heuristic rule):
      returns that heuristic's Human result, i.e. the result of the annotator with the smallest prediction bias (the
      first on ties), with ``annotator`` (the result's own ``annotator`` field if it has one, else its list index)
      and ``per_annotator_bias`` (all annotators' biases) added; its ``groups``/``threshold`` are that annotator's;
    * each entry a mapping heuristic → result: returns heuristic → the above.
    """
    if not results_per_annotator:
        raise ValueError("human_bias needs the search results of at least one annotator")
    if all("prediction_bias" in res for res in results_per_annotator):
        names = {res.get("heuristic") for res in results_per_annotator}
        if len(names) > 1:
            raise ValueError(f"human_bias got results of different heuristics {sorted(map(str, names))}")
        return _min_over_annotators(results_per_annotator, "human_bias")
    names = list(results_per_annotator[0])
    for k, res in enumerate(results_per_annotator):
        if set(res) != set(names):
            raise ValueError(f"annotator {k} has heuristics {sorted(res)}, annotator 0 has {sorted(names)}")
    return {name: _min_over_annotators([res[name] for res in results_per_annotator], name) for name in names}
