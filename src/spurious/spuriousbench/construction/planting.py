"""Planting a feature at a prevalence and strength (train/dev), the independent test set, the spurious gap."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from spacy.language import Language
from spurious.spuriousbench.construction.features import (
    GROUPS,
    PAPER_PREVALENCE,
    PAPER_STRENGTH,
    PAPER_TARGET_LABEL,
    FeatureSpec,
    SyntaxParser,
    _spec,
    round_half_up,
)
from spurious.spuriousbench.construction.predicates import (
    can_insert,
    has_feature,
    insert,
)
from spurious.spuriousbench.construction.text import (
    ParseCache,
    _cache,
)


def _check_pool(pool: pd.DataFrame, spec: FeatureSpec, target_label: int) -> np.ndarray:
    missing = [c for c in ("text_a", "label") if c not in pool.columns]
    if missing:
        raise ValueError(f"{spec.name}: the pool lacks the columns {missing}")
    labels = pool["label"].to_numpy()
    bad = sorted(set(labels.tolist()) - {0, 1})
    if bad:
        raise ValueError(f"{spec.name}: labels must be 0/1 (collapse MNLI to entailment vs not first); found {bad}")
    if target_label not in (0, 1):
        raise ValueError(f"{spec.name}: target_label must be 0 or 1, got {target_label!r}")
    return labels.astype(int)


def _target(spec: FeatureSpec, target_label: int | None) -> int:
    if target_label is not None:
        return int(target_label)
    return spec.target_label if spec.target_label is not None else PAPER_TARGET_LABEL


@dataclass
class _Cells:
    """Per label: ``has`` (feature present), ``ins`` (absent but insertable), ``bare`` (absent, not insertable)."""

    has: dict[int, np.ndarray] = field(default_factory=dict)
    ins: dict[int, np.ndarray] = field(default_factory=dict)
    bare: dict[int, np.ndarray] = field(default_factory=dict)

    def capable(self, y: int) -> int:
        return len(self.has[y]) + len(self.ins[y])

    def absent(self, y: int) -> int:
        return len(self.ins[y]) + len(self.bare[y])


def _cells(
    pool: pd.DataFrame,
    spec: FeatureSpec,
    labels: np.ndarray,
    cache: ParseCache,
    syntax_parser: SyntaxParser | None,
    stop_words: Iterable[str] | None,
) -> tuple[_Cells, np.ndarray]:
    texts = pool["text_a"].astype(str).tolist()
    if spec.needs_parse and not (spec.category == "syntax" and syntax_parser is not None):
        cache.docs(texts)  # one batch for the predicate and insertability
    has = has_feature(pool, spec, cache=cache, syntax_parser=syntax_parser, stop_words=stop_words)
    insertable = can_insert(pool, spec, cache=cache) & ~has
    cells = _Cells()
    for y in (0, 1):
        is_y = labels == y
        cells.has[y] = np.flatnonzero(is_y & has)
        cells.ins[y] = np.flatnonzero(is_y & insertable)
        cells.bare[y] = np.flatnonzero(is_y & ~has & ~insertable)
    return cells, has


def _infeasible(spec: FeatureSpec, what: str, y: int, need: int, have: int, n: int) -> ValueError:
    return ValueError(
        f"{spec.name}: the pool ({n} rows) cannot supply {need} {what} examples with label {y}: it has {have}"
    )


def _select(
    cells: _Cells, y: int, n_feature: int, n_without: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """``n_feature`` examples of label ``y`` with (or receiving) the feature and ``n_without`` without it, disjoint.

    The feature examples are drawn uniformly from ``has ∪ ins`` except that at most ``|ins| + |bare| − n_without``
    come from ``ins`` (so enough absent examples remain); the absent ones uniformly from what is left."""
    capable = np.concatenate([cells.has[y], cells.ins[y]])
    is_ins = np.concatenate([np.zeros(len(cells.has[y]), bool), np.ones(len(cells.ins[y]), bool)])
    max_ins = len(cells.ins[y]) + len(cells.bare[y]) - n_without
    order = rng.permutation(len(capable))
    chosen: list[int] = []
    n_ins = 0
    for k in order:
        if len(chosen) == n_feature:
            break
        if is_ins[k]:
            if n_ins >= max_ins:
                continue
            n_ins += 1
        chosen.append(int(capable[k]))
    feature_idx = np.array(sorted(chosen), dtype=int)
    left = np.setdiff1d(np.concatenate([cells.ins[y], cells.bare[y]]), feature_idx)
    without_idx = np.sort(rng.choice(left, size=n_without, replace=False)) if n_without else np.array([], int)
    return feature_idx, without_idx


def _feasible(cells: _Cells, y: int, n_feature: int, n_without: int) -> bool:
    total = cells.capable(y) + len(cells.bare[y])
    return n_feature <= cells.capable(y) and n_without <= cells.absent(y) and n_feature + n_without <= total


def _check_feasible(spec: FeatureSpec, cells: _Cells, y: int, n_feature: int, n_without: int, n: int) -> None:
    kind_note = " (already having it or able to receive it)" if spec.kind == "insertion" else ""
    if n_feature > cells.capable(y):
        raise _infeasible(spec, f"feature-bearing{kind_note}", y, n_feature, cells.capable(y), n)
    if n_without > cells.absent(y):
        raise _infeasible(spec, "feature-free", y, n_without, cells.absent(y), n)
    total = cells.capable(y) + len(cells.bare[y])
    if n_feature + n_without > total:
        raise _infeasible(spec, "feature-bearing + feature-free", y, n_feature + n_without, total, n)


def _assemble(
    pool: pd.DataFrame,
    spec: FeatureSpec,
    picks: list[tuple[np.ndarray, bool]],
    cache: ParseCache,
    rng: np.random.Generator,
    syntax_parser: SyntaxParser | None,
    stop_words: Iterable[str] | None,
    has: np.ndarray,
) -> pd.DataFrame:
    """Rows ``picks`` = [(indices, with_feature)], insertions done, shuffled; columns has_feature / inserted /
    original_text added; ``has_feature`` re-measured on the final texts and checked."""
    idx = np.concatenate([p for p, _ in picks]).astype(int)
    want = np.concatenate([np.full(len(p), flag, dtype=bool) for p, flag in picks])
    frame = pool.iloc[idx].reset_index(drop=True).copy()
    frame["original_text"] = frame["text_a"]
    inserted = want & ~has[idx]
    if inserted.any():
        texts = frame["text_a"].astype(str).tolist()
        ins_rows = np.flatnonzero(inserted)
        docs = cache.docs([texts[i] for i in ins_rows]) if spec.category == "adverb" else [None] * len(ins_rows)
        for i, doc in zip(ins_rows, docs, strict=True):
            texts[i] = insert(texts[i], spec, doc)
        frame["text_a"] = texts
    frame["inserted"] = inserted
    measured = has_feature(frame, spec, cache=cache, syntax_parser=syntax_parser, stop_words=stop_words)
    if not np.array_equal(measured, want):  # pragma: no cover - an insertion that does not create its feature
        bad = frame.loc[measured != want, "text_a"].head(3).tolist()
        raise RuntimeError(f"{spec.name}: constructed rows do not have the intended feature value, e.g. {bad}")
    frame["has_feature"] = measured
    order = rng.permutation(len(frame))
    frame = frame.iloc[order].reset_index(drop=True)
    frame.attrs = dict(pool.attrs)
    return frame


def construct_split(
    pool: pd.DataFrame,
    feature: FeatureSpec | str,
    *,
    size: int,
    prevalence: float = PAPER_PREVALENCE,
    strength: float = PAPER_STRENGTH,
    target_label: int | None = None,
    seed: int,
    nlp: Language | None = None,
    cache: ParseCache | None = None,
    syntax_parser: SyntaxParser | None = None,
    stop_words: Iterable[str] | None = None,
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """A train or dev split of ``size`` rows (even) with the exact prevalence and strength (§2.2, §3, App. B).

    Counts: ``n_f = round(π·N)`` with the feature, ``n_f* = round(s·n_f)`` of them with ``y*`` (the target label)
    and ``n_f − n_f*`` with the other label; ``N/2 − n_f*`` and ``N/2 − (n_f − n_f*)`` without the feature, so both
    labels have ``N/2`` rows.  Returns the rows (shuffled; ``text_a`` after insertion, ``original_text`` before it,
    ``has_feature``, ``inserted``) and the stats: measured prevalence / strength / sizes next to the configured ones
    (also in ``frame.attrs["spuriousbench"]``).  ``ValueError`` when the pool cannot supply a count.
    """
    spec = _spec(feature)
    y_star = _target(spec, target_label)
    labels = _check_pool(pool, spec, y_star)
    if size <= 0 or size % 2:
        raise ValueError(f"{spec.name}: size must be a positive even number (balanced labels), got {size}")
    if not (0.0 <= prevalence <= 1.0 and 0.0 <= strength <= 1.0):
        raise ValueError(f"{spec.name}: prevalence and strength must lie in [0, 1], got {prevalence}, {strength}")
    n_f = round_half_up(prevalence * size)
    n_ft = round_half_up(strength * n_f)
    n_fo = n_f - n_ft
    half = size // 2
    if n_ft > half or n_fo > half:
        raise ValueError(
            f"{spec.name}: prevalence {prevalence} and strength {strength} need {n_ft} feature rows with label "
            f"{y_star} and {n_fo} with the other, more than the {half} rows per label of a balanced split of {size}"
        )
    y_other = 1 - y_star
    need = {y_star: (n_ft, half - n_ft), y_other: (n_fo, half - n_fo)}
    cache = _cache(cache, nlp)
    cells, has = _cells(pool, spec, labels, cache, syntax_parser, stop_words)
    for y, (nf, nw) in need.items():
        _check_feasible(spec, cells, y, nf, nw, len(pool))
    rng = np.random.default_rng(seed)
    picks: list[tuple[np.ndarray, bool]] = []
    for y in (y_star, y_other):
        f_idx, w_idx = _select(cells, y, *need[y], rng)
        picks += [(f_idx, True), (w_idx, False)]
    frame = _assemble(pool, spec, picks, cache, rng, syntax_parser, stop_words, has)

    f = frame["has_feature"].to_numpy()
    y = frame["label"].to_numpy()
    n_feat = int(f.sum())
    stats: dict[str, Any] = {
        "feature": spec.name,
        "kind": spec.kind,
        "target_label": y_star,
        "seed": seed,
        "size": len(frame),
        "size_config": size,
        "prevalence": n_feat / len(frame),
        "prevalence_config": prevalence,
        "strength": float((f & (y == y_star)).sum() / n_feat) if n_feat else math.nan,
        "strength_config": strength,
        "n_feature": n_feat,
        "n_feature_target": int((f & (y == y_star)).sum()),
        "n_feature_other": int((f & (y != y_star)).sum()),
        "n_without_target": int((~f & (y == y_star)).sum()),
        "n_without_other": int((~f & (y != y_star)).sum()),
        "n_label": {int(k): int((y == k).sum()) for k in (0, 1)},
        "n_inserted": int(frame["inserted"].sum()),
        "pool_size": len(pool),
    }
    frame.attrs["spuriousbench"] = stats
    return frame, stats


def construct_test(
    pool: pd.DataFrame,
    feature: FeatureSpec | str,
    *,
    size: int | None = None,
    feature_rate: float | None = None,
    target_label: int | None = None,
    seed: int,
    nlp: Language | None = None,
    cache: ParseCache | None = None,
    syntax_parser: SyntaxParser | None = None,
    stop_words: Iterable[str] | None = None,
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """A test set in which the feature and the label are independent (§2.2, §3).

    Per label ``f`` rows with the feature (inserted for insertion features when absent) and ``w`` without, the same
    ``f`` and ``w`` for both labels, so labels are balanced and ``P(s | y)`` is the same for both.  Column
    ``group``: ``"supporting"`` (feature, ``y = y*``), ``"counter"`` (feature, ``y ≠ y*``), ``"without"``.

    * ``size`` and ``feature_rate`` both ``None`` (default): the largest such set, ``f = min_y |rows of label y that
      have or can receive the feature|`` and ``w`` the most feature-free rows left in both labels (for punctuation
      and prefixes every row can receive the feature, so ``w = 0``, as in the paper's all-inserted tests);
    * ``feature_rate`` ``r``: per label ``f = round(r·n)``, ``w = n − f`` with ``n = size/2`` or, without ``size``,
      the largest feasible ``n``;
    * ``size`` alone: ``r`` is the rate of the largest set.
    """
    spec = _spec(feature)
    y_star = _target(spec, target_label)
    labels = _check_pool(pool, spec, y_star)
    cache = _cache(cache, nlp)
    cells, has = _cells(pool, spec, labels, cache, syntax_parser, stop_words)
    if size is not None and (size <= 0 or size % 2):
        raise ValueError(f"{spec.name}: size must be a positive even number (balanced labels), got {size}")
    if feature_rate is not None and not 0.0 <= feature_rate <= 1.0:
        raise ValueError(f"{spec.name}: feature_rate must lie in [0, 1], got {feature_rate}")
    f_max = min(cells.capable(0), cells.capable(1))
    # feature-free rows left per label when f_max rows are taken for the feature, has-rows first
    w_max = min(cells.absent(y) - max(0, f_max - len(cells.has[y])) for y in (0, 1))
    rate = feature_rate
    if rate is None and size is not None:
        rate = f_max / (f_max + w_max) if f_max + w_max else 0.0
    if rate is None:
        n_f, n_w = f_max, w_max
    else:
        if size is not None:
            n = size // 2
        else:
            n = 0
            hi = min(cells.capable(y) + len(cells.bare[y]) for y in (0, 1))
            for cand in range(hi, 0, -1):
                cf = round_half_up(rate * cand)
                if all(_feasible(cells, y, cf, cand - cf) for y in (0, 1)):
                    n = cand
                    break
        n_f = round_half_up(rate * n)
        n_w = n - n_f
    for y in (0, 1):
        _check_feasible(spec, cells, y, n_f, n_w, len(pool))
    if n_f == 0:
        raise ValueError(f"{spec.name}: no test rows with the feature (pool of {len(pool)} rows)")
    rng = np.random.default_rng(seed)
    picks: list[tuple[np.ndarray, bool]] = []
    for y in (y_star, 1 - y_star):
        f_idx, w_idx = _select(cells, y, n_f, n_w, rng)
        picks += [(f_idx, True), (w_idx, False)]
    frame = _assemble(pool, spec, picks, cache, rng, syntax_parser, stop_words, has)
    f = frame["has_feature"].to_numpy()
    y = frame["label"].to_numpy()
    frame["group"] = np.where(f & (y == y_star), "supporting", np.where(f, "counter", "without"))
    counts = frame["group"].value_counts()
    stats: dict[str, Any] = {
        "feature": spec.name,
        "kind": spec.kind,
        "target_label": y_star,
        "seed": seed,
        "size": len(frame),
        "n_supporting": int(counts.get("supporting", 0)),
        "n_counter": int(counts.get("counter", 0)),
        "n_without": int(counts.get("without", 0)),
        "n_label": {int(k): int((y == k).sum()) for k in (0, 1)},
        "feature_rate": {int(k): float(f[y == k].mean()) for k in (0, 1)},
        "n_inserted": int(frame["inserted"].sum()),
        "pool_size": len(pool),
    }
    frame.attrs["spuriousbench"] = stats
    return frame, stats


def spurious_gap(correct: np.ndarray | Sequence[bool], group: np.ndarray | Sequence[str]) -> dict[str, float | int]:
    """§2.2: ``acc(supporting) − acc(counter)`` from per-row correctness and :func:`construct_test`'s groups; also
    the accuracy without the feature and overall (``nan`` for an empty group)."""
    correct = np.asarray(correct, dtype=bool)
    group = np.asarray(group, dtype=object)
    if correct.shape != group.shape:
        raise ValueError(f"correct and group differ in shape: {correct.shape} vs {group.shape}")
    unknown = sorted(set(group.tolist()) - set(GROUPS))
    if unknown:
        raise ValueError(f"unknown groups {unknown}; expected {GROUPS}")

    def acc(mask: np.ndarray) -> float:
        return float(correct[mask].mean()) if mask.any() else math.nan

    sup, cnt, wo = (group == g for g in GROUPS)
    out: dict[str, float | int] = {
        "acc_supporting": acc(sup),
        "acc_counter": acc(cnt),
        "n_supporting": int(sup.sum()),
        "n_counter": int(cnt.sum()),
        "acc_without": acc(wo),
        "n_without": int(wo.sum()),
        "accuracy": acc(np.ones(len(correct), dtype=bool)),
    }
    out["gap"] = out["acc_supporting"] - out["acc_counter"]
    return out


