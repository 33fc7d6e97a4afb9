"""Lexical features: the paper's tokenisation (types or tokens per segment), the sparse feature matrix, bigrams."""

from __future__ import annotations

import math
from array import array
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp

DELETED_CHARACTERS: str = "!.()[]{};:\\,?'\""

"""Characters the Gardner et al. (2021) script deletes before splitting (so ``"don't"`` becomes ``"dont"``)."""


COUNTING_MODES: tuple[str, ...] = ("types", "tokens")

"""``"types"``: a word counts once per instance (the paper's instance counts); ``"tokens"``: with repeats."""


_DELETE_TABLE = str.maketrans("", "", DELETED_CHARACTERS)


ZSCORE_COLUMNS: tuple[str, ...] = ("feature", "label", "label_id", "count", "n", "p_hat", "z")


TOP_FEATURE_COLUMNS: tuple[str, ...] = ("label", "label_id", "rank", "feature", "z", "count", "n")


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

