"""Lexical (unigram / bigram) bias in classification data and models (Serrano, Dodge & Smith 2023, §2–§4, §6).

The paper asks whether word-label correlations in *training* data reappear as a model bias, using the evaluated
(test) data even though that data is itself biased.  The pieces, in pipeline order:

1. **Features** (:func:`tokenize`, :func:`feature_matrix`, :func:`bigram_matrix`).  Tokenisation is the one of the
   Gardner et al. (2021) z-statistics script (reference-notes §F): lower-case, delete :data:`DELETED_CHARACTERS`,
   split on whitespace.  An instance is the concatenation of its two segments (premise + hypothesis, question +
   sentence, question pair), so a word counts once for the instance whichever segment it sits in.
2. **z-scores** (:func:`label_counts`, :func:`z_scores`, :func:`zscore_table`): for feature ``w`` and label ``ℓ``,
   ``p̂ = count(w, ℓ) / n_w`` and ``z = (p̂ − p0) / sqrt(p0 (1 − p0) / n_w)`` with the *uniform* ``p0 = 1/|labels|``
   (not the label prior), exactly as the script does.  ``counting="types"`` (default) counts a word once per
   instance, so ``n_w`` is the number of instances containing ``w``; ``"tokens"`` counts repeats, the public
   script's default (its printout wrongly calls them types).
3. **Feature selection** (:func:`top_features`, :func:`feature_stop_words`, :func:`associated_labels`): per label the
   ``k = 50`` highest-z non-stop-word types on train (NLTK's list, tokenised like the features: ``don't`` →
   ``dont``); each selected feature's most-associated label ``y_j = argmax_y p̂(y | w)`` on train.
4. **Usual / unusual sets** (:func:`usual_unusual`) on the evaluated data: ``U_j`` = instances containing ``j`` whose
   gold label is ``y_j``, ``N_j`` = those with another gold label; ``U = ∪ U_j`` and ``N = ∪ N_j`` may overlap.
5. **Exact permutation test** (:func:`permutation_test`, :func:`log_hypergeom_sf`): under H0 the correct
   predictions are spread uniformly over the pooled multiset ``U ⊎ N``, so the number correct in ``U`` is
   hypergeometric and ``p = P(X ≥ observed)``.  The paper reports p down to ``1e-762``, far below the smallest
   double, so the tail is summed in log space and ``log10 p`` is the number to report.
6. **Bigrams** (§6, :func:`sample_bigrams`): adjacent token pairs within a segment, sampled uniformly (seeded) from
   those present in at least one instance of every label.

Label ids are integers ``0 .. n_labels − 1`` everywhere; label names are only attached in tables.
"""

from __future__ import annotations

import logging
import math
import operator
from array import array
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import scipy.sparse as sp
from scipy.special import gammaln, logsumexp

from spurious.core.io import align_to_ids

__all__ = [
    "DELETED_CHARACTERS",
    "COUNTING_MODES",
    "tokenize",
    "feature_matrix",
    "bigram_matrix",
    "label_counts",
    "z_scores",
    "zscore_table",
    "top_features",
    "english_stop_words",
    "feature_stop_words",
    "associated_labels",
    "UsualUnusual",
    "usual_unusual",
    "log_hypergeom_sf",
    "permutation_test",
    "sample_bigrams",
    "correct_predictions",
    "model_bias_test",
]

log = logging.getLogger(__name__)

DELETED_CHARACTERS: str = "!.()[]{};:\\,?'\""
"""Characters the Gardner et al. (2021) script deletes before splitting (so ``"don't"`` becomes ``"dont"``)."""

COUNTING_MODES: tuple[str, ...] = ("types", "tokens")
"""``"types"``: a word counts once per instance (the paper's instance counts); ``"tokens"``: with repeats."""

_DELETE_TABLE = str.maketrans("", "", DELETED_CHARACTERS)

ZSCORE_COLUMNS: tuple[str, ...] = ("feature", "label", "label_id", "count", "n", "p_hat", "z")
TOP_FEATURE_COLUMNS: tuple[str, ...] = ("label", "label_id", "rank", "feature", "z", "count", "n")


# ----------------------------------------------------------------------------------------------------------------
# Tokenisation and feature matrices
# ----------------------------------------------------------------------------------------------------------------


def tokenize(text: str | None) -> list[str]:
    """Split ``text`` into the z-statistics script's tokens: lower-case, delete :data:`DELETED_CHARACTERS`, split on
    whitespace (empty tokens dropped).

    ``None`` and a float NaN (how pandas spells a missing ``text_b``) mean "no segment" and give ``[]``; any other
    non-string is a caller error, because silently ``str()``-ing it would invent features.
    """
    if text is None or (isinstance(text, float) and math.isnan(text)):
        return []
    if not isinstance(text, str):
        raise ValueError(f"tokenize expects a str or None, got {type(text).__name__}: {text!r}")
    return text.lower().translate(_DELETE_TABLE).split()


def _segments(texts_a: Sequence[str], texts_b: Sequence[str | None] | None) -> Iterable[tuple[Any, Any]]:
    """Pair each text_a with its text_b (or ``None``), after checking that the two sequences line up."""
    if isinstance(texts_a, str) or isinstance(texts_b, str):
        # A bare string is a Sequence[str] too and would be read character by character.
        raise ValueError("texts_a and texts_b must be sequences of texts, not a single str")
    n = len(texts_a)
    if texts_b is None:
        return ((a, None) for a in texts_a)
    if len(texts_b) != n:
        raise ValueError(f"texts_a and texts_b differ in length: {n} != {len(texts_b)}")
    return zip(texts_a, texts_b, strict=True)


def _vocabulary_index(vocabulary: Sequence[str]) -> dict[str, int]:
    if isinstance(vocabulary, str):
        raise ValueError("vocabulary must be a sequence of features, not a single str")
    index = {w: i for i, w in enumerate(vocabulary)}
    if len(index) != len(vocabulary):
        dupes = sorted(w for w, c in Counter(vocabulary).items() if c > 1)
        raise ValueError(f"vocabulary has duplicate entries: {dupes[:10]}")
    return index


def _build_csr(
    items_per_row: Iterable[list[str]], *, binary: bool, vocabulary: Sequence[str] | None
) -> tuple[sp.csr_matrix, list[str]]:
    """Build an ``n × d`` int64 CSR matrix from each row's feature strings, without an intermediate dense array.

    Why by hand: ``CountVectorizer`` would re-tokenise and cannot express the script's tokenisation plus
    segment handling; building ``indptr``/``indices``/``data`` with a dict vocabulary is linear and takes a few
    seconds for SNLI's 550k instances.  With ``vocabulary=None`` ids are assigned in first-seen order and
    remapped to sorted order at the end (one sort of the vocabulary instead of one per row).
    """
    grow = vocabulary is None
    index: dict[str, int] = {} if grow else _vocabulary_index(vocabulary)  # type: ignore[arg-type]
    indptr = array("q", [0])
    indices = array("q")
    data = array("q")
    for items in items_per_row:
        if binary:
            if grow:
                indices.extend([index.setdefault(t, len(index)) for t in set(items)])
            else:
                indices.extend([index[t] for t in set(items) if t in index])
        else:
            counts = Counter(items)
            if grow:
                for t, c in counts.items():
                    indices.append(index.setdefault(t, len(index)))
                    data.append(c)
            else:
                for t, c in counts.items():
                    i = index.get(t)
                    if i is not None:
                        indices.append(i)
                        data.append(c)
        indptr.append(len(indices))

    n_rows, n_cols = len(indptr) - 1, len(index)
    idx = np.frombuffer(indices, dtype=np.int64) if len(indices) else np.zeros(0, dtype=np.int64)
    if grow:
        words = list(index)
        order = sorted(range(n_cols), key=words.__getitem__)
        remap = np.empty(n_cols, dtype=np.int64)
        remap[np.asarray(order, dtype=np.int64)] = np.arange(n_cols, dtype=np.int64)
        idx = remap[idx] if len(idx) else idx
        vocab = [words[i] for i in order]
    else:
        vocab = list(vocabulary)  # type: ignore[arg-type]
    values = np.ones(len(idx), dtype=np.int64) if binary else np.frombuffer(data, dtype=np.int64).copy()
    matrix = sp.csr_matrix(
        (values, idx.copy(), np.frombuffer(indptr, dtype=np.int64).copy()), shape=(n_rows, n_cols), dtype=np.int64
    )
    matrix.sort_indices()
    return matrix, vocab


def feature_matrix(
    texts_a: Sequence[str],
    texts_b: Sequence[str | None] | None,
    *,
    counting: str = "types",
    vocabulary: Sequence[str] | None = None,
) -> tuple[sp.csr_matrix, list[str]]:
    """Unigram counts per instance (``text_a`` + ``text_b`` concatenated) as an ``n × d`` int64 CSR matrix.

    ``counting="types"`` gives 0/1 presence (so column sums are instance counts), ``"tokens"`` counts repeats.
    With ``vocabulary=None`` the columns are all types seen, sorted; with a vocabulary (e.g. the training one, to
    featurise test data consistently) the columns follow it and unknown words are ignored.
    Returns ``(matrix, vocabulary)``.
    """
    if counting not in COUNTING_MODES:
        raise ValueError(f"counting must be one of {COUNTING_MODES}, got {counting!r}")
    rows = (tokenize(a) + tokenize(b) for a, b in _segments(texts_a, texts_b))
    return _build_csr(rows, binary=counting == "types", vocabulary=vocabulary)


def _bigrams(tokens: list[str]) -> list[str]:
    # Tokens never contain whitespace, so "w1 w2" is an unambiguous key.
    return [f"{u} {v}" for u, v in zip(tokens, tokens[1:], strict=False)]


def bigram_matrix(
    texts_a: Sequence[str],
    texts_b: Sequence[str | None] | None,
    *,
    vocabulary: Sequence[str] | None = None,
) -> tuple[sp.csr_matrix, list[str]]:
    """Bigram presence (0/1) per instance, bigrams written ``"w1 w2"`` with :func:`tokenize`'s tokens.

    Pairs are formed within each segment only: the last word of a premise and the first of its hypothesis are not
    adjacent text, so such a "bigram" would be an artefact of concatenation.  Vocabulary handling as in
    :func:`feature_matrix`.
    """
    rows = (_bigrams(tokenize(a)) + _bigrams(tokenize(b)) for a, b in _segments(texts_a, texts_b))
    return _build_csr(rows, binary=True, vocabulary=vocabulary)


# ----------------------------------------------------------------------------------------------------------------
# z-scores and feature selection
# ----------------------------------------------------------------------------------------------------------------


def _as_csr(matrix: Any) -> sp.csr_matrix:
    if sp.issparse(matrix):
        return sp.csr_matrix(matrix)
    arr = np.asarray(matrix)
    if arr.ndim != 2:
        raise ValueError(f"matrix must be 2-D (instances × features), got shape {arr.shape}")
    return sp.csr_matrix(arr)


def _check_labels(labels: Any, n_rows: int, n_labels: int | None) -> np.ndarray:
    """Return ``labels`` as an int64 vector of length ``n_rows`` with ids in ``[0, n_labels)``."""
    arr = np.asarray(labels)
    if arr.ndim != 1 or arr.shape[0] != n_rows:
        raise ValueError(f"labels must be a 1-D array with one entry per instance ({n_rows}), got shape {arr.shape}")
    if arr.size and not (np.issubdtype(arr.dtype, np.integer) or arr.dtype == bool):
        raise ValueError(f"labels must be integer label ids, got dtype {arr.dtype}")
    arr = arr.astype(np.int64, copy=False)
    if arr.size and arr.min() < 0:
        raise ValueError(
            f"labels must be non-negative label ids; got {int(arr.min())} (drop instances without a gold label, "
            "e.g. SNLI's '-', before calling)"
        )
    if n_labels is not None and arr.size and arr.max() >= n_labels:
        raise ValueError(f"label id {int(arr.max())} is out of range for n_labels={n_labels}")
    return arr


def _check_n_labels(n_labels: int, minimum: int = 1) -> int:
    try:
        value = operator.index(n_labels)
    except TypeError as exc:
        raise ValueError(f"n_labels must be an integer, got {n_labels!r}") from exc
    if value < minimum:
        raise ValueError(f"n_labels must be at least {minimum}, got {value}")
    return value


def label_counts(matrix: Any, labels: np.ndarray, n_labels: int) -> np.ndarray:
    """Sum of each feature's matrix values per gold label: a ``(d, n_labels)`` array.

    With a types (0/1) matrix entry ``[w, ℓ]`` is the number of instances of label ``ℓ`` containing ``w``; with a
    tokens matrix it is the number of occurrences.  Computed as one sparse product with a label indicator matrix.
    """
    n_labels = _check_n_labels(n_labels)
    csr = _as_csr(matrix)
    y = _check_labels(labels, csr.shape[0], n_labels)
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
    _check_n_labels(n_labels, minimum=2)
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
    n_labels = _check_n_labels(n_labels, minimum=2)
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


# ----------------------------------------------------------------------------------------------------------------
# Usual / unusual sets and the permutation test
# ----------------------------------------------------------------------------------------------------------------


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
    y = _check_labels(labels, csr.shape[0], None)
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


def _log_comb(n: int, k: np.ndarray | int) -> np.ndarray:
    """``ln C(n, k)`` via ``gammaln`` (valid for ``0 ≤ k ≤ n``), exact to double precision in log space."""
    k = np.asarray(k, dtype=np.float64)
    return gammaln(n + 1.0) - gammaln(k + 1.0) - gammaln(n - k + 1.0)


def log_hypergeom_sf(k: int, M: int, K: int, n: int) -> float:
    """Natural log of ``P(X ≥ k)`` for ``X ~ Hypergeometric(population M, successes K, draws n)``.

    Why our own: the permutation test's p reaches ``1e-762`` (paper Table 2), which underflows any float, so the tail
    ``Σ_{i ≥ k} C(K, i) C(M − K, n − i) / C(M, n)`` is summed in log space (``gammaln`` + ``logsumexp``).  When the
    upper tail holds most of the mass its log is taken as ``log1p(−P(X < k))`` instead, which stays accurate as
    p → 1.  Returns exactly ``0.0`` for ``k ≤ max(0, n − (M − K))`` (certain) and ``-inf`` for ``k > min(n, K)``
    (impossible).
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
    lo, hi = max(0, n - (M - K)), min(n, K)
    if k <= lo:
        return 0.0
    if k > hi:
        return -math.inf
    support = np.arange(lo, hi + 1, dtype=np.int64)
    log_pmf = _log_comb(K, support) + _log_comb(M - K, n - support) - _log_comb(M, n)
    upper = float(logsumexp(log_pmf[k - lo :]))
    lower = float(logsumexp(log_pmf[: k - lo]))
    result = upper if upper <= lower else math.log1p(-math.exp(lower))
    return min(result, 0.0)


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


# ----------------------------------------------------------------------------------------------------------------
# Bigram sample (§6)
# ----------------------------------------------------------------------------------------------------------------


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


# ----------------------------------------------------------------------------------------------------------------
# The model-bias test end to end (workflow rule and CLI)
# ----------------------------------------------------------------------------------------------------------------


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
    with the data about which label is gold."""
    missing_cols = [c for c in ("id", "prediction") if c not in predictions.columns]
    if missing_cols:
        raise ValueError(
            f"{source}: no column(s) {missing_cols} (has {list(predictions.columns)}); a predictions file needs id and prediction"
        )
    by_id = pd.Series(predictions["prediction"].to_numpy(), index=predictions["id"].astype(str))
    if by_id.index.duplicated().any():
        raise ValueError(f"{source}: duplicate ids, first {by_id.index[by_id.index.duplicated()][:3].tolist()}")
    raw = pd.Series(
        align_to_ids(by_id, ids, source=source, what="prediction", fix="predict the whole evaluated split"),
        index=[str(i) for i in ids],
    )
    names = [str(n) for n in label_names]
    index = {n: i for i, n in enumerate(names)}
    predicted = np.empty(len(raw), dtype=np.int64)
    for k, (rec_id, value) in enumerate(raw.items()):
        text = str(value).strip()
        if text in index:
            predicted[k] = index[text]
        elif text.lstrip("-").isdigit() and 0 <= int(text) < len(names):
            predicted[k] = int(text)
        else:
            raise ValueError(f"{source}: record {rec_id} predicts {value!r}, neither a label id nor one of {names}")
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
