"""AFLite on text classification data (Le Bras et al. 2020, §4): the data flow around Algorithm 1.

1. **Warm-up split.** A random fraction of the training split (the paper: 10 %) fine-tunes the encoder whose
   representations AFLite filters on; that fraction is then discarded: the *pool* (the rest) is D from here on.
   The draw is stratified by label (``classification.split_random``), so D keeps the label distribution.
2. **Representations Φ** of the pool and the dev set (``spurious.core.train.embeddings``): the warm-up model's, a frozen
   encoder's, or features the user supplies.
3. **Filtering** (``filter_pool_and_dev``): one AFLite run over the pool and the dev set together, so the filtered
   dev set D(AFLite)'s dev comes from the same filtering as its training set (the paper's in-distribution benchmark
   re-estimation filters the dataset, then evaluates on what is left of its dev set).
4. **Training sets** (``training_sets``): D (the pool), D_rand (a seeded random subset of D of the filtered size)
   and D(AFLite) (the pool's kept instances); ``partial_input`` builds the partial-input baseline (hypothesis only
   for NLI, answer sentence only for QNLI).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from spurious.aflite import filtering as aflite
from spurious.aflite.track import TRAIN_SETS
from spurious.core.data import classification, squad

TRAINING_SETS = TRAIN_SETS


def split_warmup(train: pd.DataFrame, *, fraction: float, seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(pool, warm-up): ``fraction`` of each label's examples, drawn with ``seed``, go to the warm-up."""
    return classification.split_random(train, validation_fraction=fraction, seed=seed)


def resolve_target_size(n: int | None, t: int) -> int:
    """Algorithm 1's n. The paper sets τ and does not control n (Table 8); ``None`` means the same here: n = t + 1,
    the smallest S the m partitions can still hold out from."""
    return t + 1 if n is None else int(n)


def filter_pool_and_dev(
    pool_features: np.ndarray,
    pool_labels: np.ndarray,
    dev_features: np.ndarray,
    dev_labels: np.ndarray,
    *,
    settings: Mapping[str, Any],
    device: str = "auto",
    gather_memory_mb: int | None = None,
    log_fn: Callable[[str], None] | None = None,
    state_dir: str | os.PathLike | None = None,
) -> tuple[pd.DataFrame, aflite.AFLiteResult]:
    """AFLite over pool ∪ dev. Returns one row per instance in input order (the pool's rows, then the dev set's):
    ``part``, ``position`` (row in its part), ``label``, ``removed_at`` (the iteration that removed it, -1 if kept)
    and ``last_score`` (its p̃ in the last iteration it took part in), with the AFLite result (positions into the
    concatenation)."""
    if pool_features.shape[1] != dev_features.shape[1]:
        raise ValueError(
            f"pool and dev representations differ in width ({pool_features.shape[1]} vs {dev_features.shape[1]})"
        )
    for part, features, labels in (("pool", pool_features, pool_labels), ("dev", dev_features, dev_labels)):
        if len(features) != len(labels):
            raise ValueError(f"{part}: {len(features)} representations for {len(labels)} examples")
    features = np.concatenate([pool_features, dev_features]).astype(np.float32)
    labels = np.concatenate([pool_labels, dev_labels]).astype(np.int64)
    t = int(settings["t"])
    result = aflite.aflite(
        features,
        labels,
        n=resolve_target_size(settings.get("n"), t),
        m=int(settings["m"]),
        t=t,
        k=int(settings["k"]),
        tau=float(settings["tau"]),
        seed=int(settings["seed"]),
        selection=settings.get("selection", "greedy"),
        C=float(settings.get("C", 1.0)),
        device=device,
        gather_memory_mb=gather_memory_mb,
        log_fn=log_fn,
        state_dir=state_dir,
    )
    removed_at = np.full(len(labels), -1, dtype=np.int64)
    for record in result.iterations:
        removed_at[np.asarray(record["removed_positions"], dtype=np.int64)] = record["iteration"]
    last_score = np.full(len(labels), np.nan)
    for scores in result.scores:  # later iterations overwrite: each instance's last p̃
        last_score = np.where(np.isnan(scores), last_score, scores)
    table = pd.DataFrame(
        {
            "part": ["pool"] * len(pool_labels) + ["dev"] * len(dev_labels),
            "position": np.concatenate([np.arange(len(pool_labels)), np.arange(len(dev_labels))]),
            "label": labels,
            "removed_at": removed_at,
            "last_score": last_score,
        }
    )
    return table, result


def kept_rows(table: pd.DataFrame, part: str) -> np.ndarray:
    """Positions (rows of ``part``) that AFLite kept, ascending."""
    rows = table[(table["part"] == part) & (table["removed_at"] < 0)]
    return np.sort(rows["position"].to_numpy())


def attach_ids(table: pd.DataFrame, pool: pd.DataFrame, dev: pd.DataFrame) -> pd.DataFrame:
    """The filtering table with each row's example id (ids repeat across parts in GLUE files: keep ``part``)."""
    ids = np.concatenate([pool["id"].astype(str).to_numpy(), dev["id"].astype(str).to_numpy()])
    if len(ids) != len(table):
        raise ValueError(f"the filtering table has {len(table)} rows for {len(ids)} examples")
    return table.assign(id=ids)[["part", "position", "id", "label", "removed_at", "last_score"]]


def training_sets(pool: pd.DataFrame, table: pd.DataFrame, *, seed: int) -> dict[str, pd.DataFrame]:
    """D (the pool), D(AFLite) (its kept rows) and D_rand (a random subset of D of |D(AFLite)| rows, drawn with
    ``seed``); each keeps the pool's row order and label names."""
    kept = pool.iloc[kept_rows(table, "pool")].reset_index(drop=True)
    sets = {
        "full": pool.reset_index(drop=True),
        "random": squad.sample_questions(pool, max_examples=len(kept), seed=seed),
        "aflite": kept,
    }
    for frame in sets.values():
        frame.attrs.update(pool.attrs)
    return sets


def filtered_dev(dev: pd.DataFrame, table: pd.DataFrame) -> pd.DataFrame:
    frame = dev.iloc[kept_rows(table, "dev")].reset_index(drop=True)
    frame.attrs.update(dev.attrs)
    return frame


def partial_input(frame: pd.DataFrame, column: str) -> pd.DataFrame:
    """The partial-input baseline's view: only ``column`` (``text_b``: the hypothesis of an NLI pair, the sentence of
    a QNLI pair) as a single-segment input."""
    if column not in ("text_a", "text_b"):
        raise ValueError(f"partial input must be text_a or text_b, got {column!r}")
    if frame[column].isna().any():
        raise ValueError(f"partial input {column} is missing in {int(frame[column].isna().sum())} examples")
    out = frame.assign(text_a=frame[column], text_b=None)
    out.attrs.update(frame.attrs, is_pair=False)
    return out
