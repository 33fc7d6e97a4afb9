"""Feature z-scores per label (Gardner et al.'s test as the paper applies it), the top features, stop words, the
selection step."""

from __future__ import annotations

import logging
import operator
from collections.abc import Collection, Iterable, Sequence
from typing import Any

import numpy as np
import pandas as pd
import scipy.sparse as sp

from spurious.lexical.features.tokens import TOP_FEATURE_COLUMNS, ZSCORE_COLUMNS, feature_matrix, tokenize
from spurious.lexical.labels import check_labels, check_n_labels

log = logging.getLogger(__name__)


def _as_csr(matrix: Any) -> sp.csr_matrix:
    if sp.issparse(matrix):
        return sp.csr_matrix(matrix)
    arr = np.asarray(matrix)
    if arr.ndim != 2:
        raise ValueError(f"matrix must be 2-D (instances × features), got shape {arr.shape}")
    return sp.csr_matrix(arr)


def label_counts(matrix: Any, labels: np.ndarray, n_labels: int) -> np.ndarray:
    """Sum of each feature's matrix values per gold label: a ``(d, n_labels)`` array.

    With a types (0/1) matrix entry ``[w, ℓ]`` is the number of instances of label ``ℓ`` containing ``w``; with a
    tokens matrix it is the number of occurrences.  Computed as one sparse product with a label indicator matrix.
    """
    n_labels = check_n_labels(n_labels, minimum=1)
    csr = _as_csr(matrix)
    y = check_labels(labels, csr.shape[0], n_labels)
    indicator = sp.csr_matrix(
        (np.ones(len(y), dtype=csr.dtype), (y, np.arange(len(y)))), shape=(n_labels, csr.shape[0])
    )
    return np.asarray((indicator @ csr).toarray()).T


def _z_from_counts(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(n_w, p̂, z)`` from a ``(d, L)`` count array; features never seen (``n_w = 0``) get NaN p̂ and z."""
    n_labels = counts.shape[1]
    p0 = 1.0 / n_labels
    n_w = counts.sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        p_hat = counts / n_w[:, None].astype(np.float64)
        z = (p_hat - p0) / np.sqrt(p0 * (1.0 - p0) / n_w[:, None].astype(np.float64))
    unseen = n_w == 0
    p_hat[unseen] = np.nan
    z[unseen] = np.nan
    return n_w, p_hat, z


def z_scores(matrix: Any, labels: np.ndarray, n_labels: int) -> np.ndarray:
    """z-score of every (feature, label) pair on the given (training) data: a ``(d, n_labels)`` float array.

    ``z = (p̂ − p0) / sqrt(p0 (1 − p0) / n_w)`` with ``p̂ = count(w, ℓ) / n_w`` and uniform ``p0 = 1 / n_labels``
    (Gardner et al. 2021: under the null "a single word is uninformative" every label is equally likely, whatever
    the label prior).  Needs at least two labels, since ``p0 (1 − p0)`` is 0 for one label.
    """
    check_n_labels(n_labels)
    return _z_from_counts(label_counts(matrix, labels, n_labels))[2]


def zscore_table(
    matrix: Any,
    vocabulary: Sequence[str],
    labels: np.ndarray,
    n_labels: int,
    label_names: Sequence[str],
) -> pd.DataFrame:
    """All (feature, label) statistics in long format, one row per pair (features in vocabulary order, then labels).

    Columns: ``feature``, ``label`` (name), ``label_id``, ``count`` (``count(w, ℓ)``), ``n`` (``n_w``), ``p_hat``,
    ``z``.  This one table feeds :func:`top_features` and :func:`associated_labels`, so selection and ``y_j`` are
    guaranteed to come from the same counts.
    """
    n_labels = check_n_labels(n_labels)
    csr = _as_csr(matrix)
    if isinstance(vocabulary, str) or len(vocabulary) != csr.shape[1]:
        raise ValueError(f"vocabulary must list one feature per matrix column ({csr.shape[1]})")
    if isinstance(label_names, str) or len(label_names) != n_labels:
        raise ValueError(f"label_names must give one name per label ({n_labels}), got {label_names!r}")
    counts = label_counts(csr, labels, n_labels)
    n_w, p_hat, z = _z_from_counts(counts)
    d = len(vocabulary)
    return pd.DataFrame(
        {
            "feature": np.repeat(np.asarray(list(vocabulary), dtype=object), n_labels),
            "label": np.tile(np.asarray([str(x) for x in label_names], dtype=object), d),
            "label_id": np.tile(np.arange(n_labels, dtype=np.int64), d),
            "count": counts.reshape(-1),
            "n": np.repeat(n_w, n_labels),
            "p_hat": p_hat.reshape(-1),
            "z": z.reshape(-1),
        },
        columns=list(ZSCORE_COLUMNS),
    )


def _require_columns(table: pd.DataFrame, columns: Iterable[str], what: str) -> None:
    if not isinstance(table, pd.DataFrame):
        raise ValueError(f"{what} expects a pandas DataFrame (from zscore_table), got {type(table).__name__}")
    missing = [c for c in columns if c not in table.columns]
    if missing:
        raise ValueError(f"{what}: table lacks columns {missing} (expected the output of zscore_table)")


def top_features(table: pd.DataFrame, *, k: int = 50, stop_words: Collection[str] = ()) -> pd.DataFrame:
    """Per label, the ``k`` features with the highest z for that label, stop words excluded.

    Ties in z are broken by the feature string so that the selection is reproducible.  Features with NaN z (never
    seen) are skipped.  A feature may be selected for more than one label (the paper's "roughly 150" for 3
    labels); deduplicate before :func:`associated_labels`.  Columns: ``label``, ``label_id``, ``rank`` (1..k),
    ``feature``, ``z``, ``count``, ``n``; rows ordered by label id, then rank.
    """
    _require_columns(table, ("feature", "label", "label_id", "z", "count", "n"), "top_features")
    try:
        k = operator.index(k)
    except TypeError as exc:
        raise ValueError(f"k must be a positive integer, got {k!r}") from exc
    if k < 1:
        raise ValueError(f"k must be a positive integer, got {k}")
    if isinstance(stop_words, str):
        raise ValueError("stop_words must be a collection of words, not a single str")
    stop = frozenset(stop_words)
    keep = table["z"].notna() & ~table["feature"].isin(stop)
    ranked = table.loc[keep].sort_values(["label_id", "z", "feature"], ascending=[True, False, True], kind="mergesort")
    top = ranked.groupby("label_id", sort=True).head(k).copy()
    top["rank"] = top.groupby("label_id").cumcount().astype(np.int64) + 1
    for label_id, size in top.groupby("label_id").size().items():
        if size < k:
            log.warning("top_features: label %s has only %d eligible features (k=%d)", label_id, size, k)
    return top.loc[:, list(TOP_FEATURE_COLUMNS)].reset_index(drop=True)


def english_stop_words() -> frozenset[str]:
    """NLTK's English stop-word list (the paper excludes stop words from the selected features).

    Delegates to the project's single NLTK loader, which honours ``NLTK_DATA`` and fails with a clear message when
    the corpus is missing.  The list is returned as NLTK spells it: contractions keep their apostrophe
    (``"don't"``), so they never match a token, which has none (``"dont"``): feature selection uses
    :func:`feature_stop_words`, which adds the tokenised forms.
    """
    from spurious.core.resources import english_stopwords

    return english_stopwords()


def feature_stop_words(stop_words: Collection[str] | None = None) -> frozenset[str]:
    """Stop words in the feature space of :func:`tokenize`: each word as listed and as :func:`tokenize` spells it.

    NLTK writes contractions with an apostrophe (``"don't"``, ``"isn't"``), which :func:`tokenize` deletes from the
    text, so the listed forms never match a feature (``"dont"``, ``"isnt"``) and such types could be selected as
    lexical features although the paper excludes stop words.  Normalising both sides with the same function fixes
    that; the normalised form also covers the same string without an apostrophe in the text, which the tokenizer
    conflates anyway (NLTK's ``"won't"`` → ``"wont"``).  ``stop_words``: a list to normalise (default: NLTK's,
    :func:`english_stop_words`)."""
    if isinstance(stop_words, str):
        raise ValueError("stop_words must be a collection of words, not a single str")
    words = english_stop_words() if stop_words is None else stop_words
    return frozenset(w for word in words for w in (word, *tokenize(word)))


def select_features(
    frame: pd.DataFrame, *, counting: str = "types", top_k: int = 50, stop_words: str = "nltk"
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(z-score table, the ``top_k`` highest-z types per label) of a labelled classification frame, ``stop_words``
    ``nltk`` or ``none``: the lexical track's features rule, the CLI's lexical-test and the audit."""
    names = list(frame.attrs["label_names"])
    matrix, vocabulary = feature_matrix(frame["text_a"], frame["text_b"], counting=counting)
    table = zscore_table(matrix, vocabulary, frame["label"].to_numpy(), len(names), names)
    stop = feature_stop_words() if stop_words == "nltk" else frozenset()
    return table, top_features(table, k=top_k, stop_words=stop)


def associated_labels(table: pd.DataFrame, features: Sequence[str]) -> dict[str, int]:
    """Each feature's most-associated training label ``y_j = argmax_y p̂(y | w)``; ties go to the lowest label id.

    ``features`` may repeat (a feature selected for two labels): the result has one entry per distinct feature,
    in first-seen order.  A feature absent from ``table`` or never seen in its data (NaN p̂) is an error, because
    it has no associated label.
    """
    _require_columns(table, ("feature", "label_id", "p_hat"), "associated_labels")
    if isinstance(features, str):
        raise ValueError("features must be a sequence of features, not a single str")
    wanted = list(dict.fromkeys(features))
    rows = table.loc[table["feature"].isin(wanted), ["feature", "label_id", "p_hat"]]
    missing = sorted(set(wanted) - set(rows["feature"]))
    if missing:
        raise ValueError(f"associated_labels: features not in the table: {missing[:10]}")
    unseen = sorted(set(rows.loc[rows["p_hat"].isna(), "feature"]))
    if unseen:
        raise ValueError(f"associated_labels: features with no occurrence (NaN p_hat): {unseen[:10]}")
    best = rows.sort_values(["feature", "p_hat", "label_id"], ascending=[True, False, True], kind="mergesort")
    best = best.drop_duplicates("feature", keep="first")
    lookup = dict(zip(best["feature"], best["label_id"].astype(np.int64), strict=True))
    return {f: int(lookup[f]) for f in wanted}

