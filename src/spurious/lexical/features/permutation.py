"""The exact permutation test for a model's lexical bias: usual and unusual examples, the hypergeometric tail, bigram
samples."""

from __future__ import annotations

import logging
import math
import operator
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import scipy.sparse as sp
from scipy.stats import hypergeom

from spurious.core.io import align_to_ids
from spurious.lexical.features.tokens import _vocabulary_index, feature_matrix
from spurious.lexical.features.zscores import _as_csr, associated_labels, label_counts
from spurious.lexical.labels import check_labels

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class UsualUnusual:
    """Membership of the evaluated instances in ``U = ∪ U_j`` and ``N = ∪ N_j`` (they may overlap).

    ``per_feature`` has one row per selected feature (``feature``, ``label_id`` = ``y_j``, ``n_usual`` = ``|U_j|``,
    ``n_unusual`` = ``|N_j|``), including features absent from the evaluated data (0, 0); ``features_present``
    lists, in selection order, those that occur at least once.
    """

    in_usual: np.ndarray
    in_unusual: np.ndarray
    features_present: list[str]
    per_feature: pd.DataFrame


def usual_unusual(
    matrix: Any,
    vocabulary: Sequence[str],
    labels: np.ndarray,
    feature_labels: Mapping[str, int],
) -> UsualUnusual:
    """Build the usual-label set ``U`` and unusual-label set ``N`` on the evaluated data (paper §3, Figure 1).

    ``matrix``/``vocabulary`` featurise the evaluated instances, ``labels`` are their gold label ids and
    ``feature_labels`` maps each selected feature to its training label ``y_j`` (:func:`associated_labels`).
    Instance ``i`` is in ``U`` when it contains some ``j`` with gold ``y_j`` and in ``N`` when it contains some
    ``j`` with another gold label; both can hold.
    """
    csr = _as_csr(matrix)
    if isinstance(vocabulary, str) or len(vocabulary) != csr.shape[1]:
        raise ValueError(f"vocabulary must list one feature per matrix column ({csr.shape[1]})")
    y = check_labels(labels, csr.shape[0], None)
    if not isinstance(feature_labels, Mapping):
        raise ValueError(f"feature_labels must map feature -> label id, got {type(feature_labels).__name__}")
    selected: list[tuple[str, int]] = []
    for feature, label in feature_labels.items():
        try:
            label_id = operator.index(label)
        except TypeError as exc:
            raise ValueError(f"feature_labels[{feature!r}] must be an integer label id, got {label!r}") from exc
        if label_id < 0:
            raise ValueError(f"feature_labels[{feature!r}] must be a non-negative label id, got {label_id}")
        selected.append((feature, label_id))

    index = _vocabulary_index(vocabulary)
    cols = [index.get(f, -1) for f, _ in selected]
    known = [c for c in cols if c >= 0]
    csc = sp.csc_matrix(csr[:, known]) if known else sp.csc_matrix((csr.shape[0], 0), dtype=csr.dtype)
    csc.eliminate_zeros()  # explicit zeros are not occurrences

    in_usual = np.zeros(csr.shape[0], dtype=bool)
    in_unusual = np.zeros(csr.shape[0], dtype=bool)
    present: list[str] = []
    n_usual: list[int] = []
    n_unusual: list[int] = []
    position = 0
    for (feature, label_id), col in zip(selected, cols, strict=True):
        if col < 0:
            rows = np.zeros(0, dtype=np.int64)
        else:
            rows = csc.indices[csc.indptr[position] : csc.indptr[position + 1]]
            position += 1
        usual = y[rows] == label_id
        in_usual[rows[usual]] = True
        in_unusual[rows[~usual]] = True
        if len(rows):
            present.append(feature)
        n_usual.append(int(usual.sum()))
        n_unusual.append(int((~usual).sum()))
    per_feature = pd.DataFrame(
        {
            "feature": [f for f, _ in selected],
            "label_id": np.asarray([lab for _, lab in selected], dtype=np.int64),
            "n_usual": np.asarray(n_usual, dtype=np.int64),
            "n_unusual": np.asarray(n_unusual, dtype=np.int64),
        }
    )
    return UsualUnusual(in_usual=in_usual, in_unusual=in_unusual, features_present=present, per_feature=per_feature)


def _check_count(name: str, value: int) -> int:
    if isinstance(value, bool | np.bool_):
        raise ValueError(f"{name} must be an integer, got a bool")
    try:
        return operator.index(value)
    except TypeError as exc:
        raise ValueError(f"{name} must be an integer, got {value!r}") from exc


def log_hypergeom_sf(k: int, M: int, K: int, n: int) -> float:
    """Natural log of ``P(X ≥ k)`` for ``X ~ Hypergeometric(population M, successes K, draws n)``.

    The permutation test's p reaches ``1e-762`` (paper Table 2), which underflows any float, so the tail is taken in
    log space: ``scipy.stats.hypergeom.logsf(k − 1, M, K, n)`` (SciPy's ``sf(x)`` is ``P(X > x)``), accurate in the
    deep tail and as p → 1 (tested against exact rational arithmetic, down to ``log p ≈ −4154``).  Returns exactly
    ``0.0`` for ``k ≤ max(0, n − (M − K))`` (certain) and ``-inf`` for ``k > min(n, K)`` (impossible), also where
    SciPy has no distribution (``M = 0``).
    """
    k = _check_count("k", k)
    M = _check_count("M", M)
    K = _check_count("K", K)
    n = _check_count("n", n)
    if M < 0:
        raise ValueError(f"population size M must be >= 0, got {M}")
    if not 0 <= K <= M:
        raise ValueError(f"number of successes K must lie in [0, M={M}], got {K}")
    if not 0 <= n <= M:
        raise ValueError(f"number of draws n must lie in [0, M={M}], got {n}")
    if k <= max(0, n - (M - K)):
        return 0.0
    if k > min(n, K):
        return -math.inf
    return min(float(hypergeom.logsf(k - 1, M, K, n)), 0.0)


def _as_bool_vector(name: str, values: Any) -> np.ndarray:
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be a 1-D array, got shape {arr.shape}")
    if arr.dtype == bool:
        return arr
    if arr.size and not (np.issubdtype(arr.dtype, np.number) and np.isin(arr, (0, 1)).all()):
        raise ValueError(f"{name} must be boolean (or 0/1), got dtype {arr.dtype}")
    return arr.astype(bool)


def permutation_test(correct: np.ndarray, in_usual: np.ndarray, in_unusual: np.ndarray) -> dict[str, Any]:
    """Exact one-sided permutation test of H1: ACC(U) > ACC(N) (paper §3.1–3.2).

    The pooled population is ``U ⊎ N`` with multiplicity (an instance in both sets counts once in each, with the
    same correctness), so ``M = |U| + |N|``, ``K`` = correct in U + correct in N, and under H0 the number correct in
    ``U`` is ``Hypergeometric(M, K, |U|)``; ``p = P(X ≥ observed)``.  Returns ``n_usual``, ``n_unusual``,
    ``correct_usual``, ``correct_unusual``, ``acc_usual``, ``acc_unusual`` (NaN for an empty set), ``log10_p`` (the
    number to report) and ``p = 10 ** log10_p`` (0.0 once it underflows).
    """
    correct = _as_bool_vector("correct", correct)
    in_usual = _as_bool_vector("in_usual", in_usual)
    in_unusual = _as_bool_vector("in_unusual", in_unusual)
    if not (len(correct) == len(in_usual) == len(in_unusual)):
        raise ValueError(
            f"correct, in_usual and in_unusual must have the same length, got "
            f"{len(correct)}, {len(in_usual)}, {len(in_unusual)}"
        )
    n_u, n_n = int(in_usual.sum()), int(in_unusual.sum())
    c_u, c_n = int((correct & in_usual).sum()), int((correct & in_unusual).sum())
    if n_u == 0 or n_n == 0:
        log.warning("permutation_test: empty usual (%d) or unusual (%d) set; the test is uninformative", n_u, n_n)
    log_p = log_hypergeom_sf(c_u, n_u + n_n, c_u + c_n, n_u)
    log10_p = log_p / math.log(10.0) if math.isfinite(log_p) else -math.inf
    return {
        "n_usual": n_u,
        "n_unusual": n_n,
        "correct_usual": c_u,
        "correct_unusual": c_n,
        "acc_usual": c_u / n_u if n_u else math.nan,
        "acc_unusual": c_n / n_n if n_n else math.nan,
        "log10_p": log10_p,
        "p": 10.0**log10_p,
    }


def sample_bigrams(
    matrix: Any,
    vocabulary: Sequence[str],
    labels: np.ndarray,
    n_labels: int,
    *,
    n: int = 200,
    seed: int = 0,
) -> list[str]:
    """Sample ``n`` features uniformly without replacement among those present in ≥ 1 instance of every label.

    The candidates are sorted before ``numpy.random.default_rng(seed)`` draws, so the sample depends only on the
    data and the seed (not on vocabulary order); the sample is returned sorted.  With fewer than ``n`` candidates
    all of them are returned (sorted) and a warning is logged.
    """
    n = _check_count("n", n)
    if n < 1:
        raise ValueError(f"n must be a positive integer, got {n}")
    seed = _check_count("seed", seed)
    csr = _as_csr(matrix)
    if isinstance(vocabulary, str) or len(vocabulary) != csr.shape[1]:
        raise ValueError(f"vocabulary must list one feature per matrix column ({csr.shape[1]})")
    counts = label_counts(csr, labels, n_labels)
    everywhere = np.flatnonzero((counts > 0).all(axis=1))
    candidates = sorted(vocabulary[i] for i in everywhere)
    if len(candidates) < n:
        log.warning("sample_bigrams: only %d candidates present in every label (n=%d); using all", len(candidates), n)
        return candidates
    picked = np.random.default_rng(seed).choice(len(candidates), size=n, replace=False)
    return sorted(candidates[i] for i in picked)


def _is_empty(value: Any) -> bool:
    return value is None or (pd.api.types.is_scalar(value) and pd.isna(value)) or not str(value).strip()


def _label_id(value: Any, index: Mapping[str, int]) -> int | None:
    """A prediction as a label id: a label name, or an id written as an integer, an integral float (``1.0``, how
    pandas reads an id column with an empty cell) or their text; None when it is empty or neither."""
    if _is_empty(value):
        return None
    text = str(value).strip()
    if text in index:
        return index[text]
    try:
        number = float(text)
    except ValueError:
        return None
    if not number.is_integer() or not 0 <= number < len(index):
        return None
    return int(number)


def correct_predictions(
    predictions: pd.DataFrame,
    ids: Sequence[str],
    labels: np.ndarray,
    label_names: Sequence[str],
    *,
    source: str = "predictions",
) -> np.ndarray:
    """Whether each evaluated instance (``ids`` with gold ``labels``) was predicted correctly.

    ``predictions`` needs ``id`` and ``prediction`` columns; a prediction is a label id or a label name. Correctness
    is recomputed from the gold labels of the evaluated data, so a predictions file made elsewhere cannot disagree
    with the data about which label is gold. An empty or unknown prediction is an error naming its record, in the
    file's order, and its line when ``predictions.attrs["first_line"]`` gives the line of the first row (a CSV: 2)."""
    missing_cols = [c for c in ("id", "prediction") if c not in predictions.columns]
    if missing_cols:
        raise ValueError(
            f"{source}: no column(s) {missing_cols} (has {list(predictions.columns)}); a predictions file needs id "
            "and prediction"
        )
    by_id = pd.Series(predictions["prediction"].to_numpy(), index=predictions["id"].astype(str))
    if by_id.index.duplicated().any():
        repeated = list(dict.fromkeys(by_id.index[by_id.index.duplicated()]))
        raise ValueError(
            f"{source}: {len(repeated)} id(s) have more than one prediction (first: {', '.join(repeated[:5])}); keep "
            "one prediction per id"
        )
    wanted = [str(i) for i in ids]
    align_to_ids(by_id, wanted, source=source, what="prediction", fix="predict the whole evaluated split")
    names = [str(n) for n in label_names]
    index = {n: i for i, n in enumerate(names)}
    evaluated = set(wanted)
    label_ids = {rec_id: _label_id(v, index) for rec_id, v in by_id.items() if rec_id in evaluated}
    bad = [k for k, rec_id in enumerate(by_id.index) if rec_id in evaluated and label_ids[rec_id] is None]
    if bad:
        k = bad[0]  # the first in the file's order
        first_line = predictions.attrs.get("first_line")
        where = f"record {by_id.index[k]}" + (f" (line {k + first_line})" if first_line is not None else "")
        value = by_id.iloc[k]
        what = "has no prediction" if _is_empty(value) else f"predicts {value!r}"
        raise ValueError(
            f"{source}: {len(bad)} of {len(wanted)} predictions are empty or not a label; first: {where} {what}; "
            f"each prediction must be a label id 0-{len(names) - 1} or one of {names}"
        )
    predicted = np.array([label_ids[i] for i in wanted], dtype=np.int64)
    return predicted == np.asarray(labels)


def model_bias_test(
    train_table: pd.DataFrame,
    top: pd.DataFrame,
    texts_a: Sequence[str],
    texts_b: Sequence[str | None] | None,
    labels: np.ndarray,
    correct: np.ndarray,
    *,
    counting: str = "types",
) -> dict[str, Any]:
    """The paper's model-bias test (§3–§4): the selected features ``top`` with their training labels (from the
    z-score table of the training data), U and N on the evaluated instances, and the exact permutation test on
    which of them the model got right. Returns the test's numbers plus the feature and set sizes."""
    features = list(dict.fromkeys(top["feature"].astype(str)))
    feature_labels = associated_labels(train_table, features)
    matrix, vocabulary = feature_matrix(texts_a, texts_b, counting=counting, vocabulary=features)
    sets = usual_unusual(matrix, vocabulary, labels, feature_labels)
    result = permutation_test(correct, sets.in_usual, sets.in_unusual)
    covered = sets.in_usual | sets.in_unusual
    result.update(
        n_features_selected=len(features),
        n_features_present=len(sets.features_present),
        n_evaluated=int(len(labels)),
        n_in_usual_or_unusual=int(covered.sum()),
        n_in_both=int((sets.in_usual & sets.in_unusual).sum()),
        accuracy=float(np.mean(correct)) if len(correct) else float("nan"),
    )
    return result

