"""The per-question values of the seven heuristics (one float per row; shared per-context work is cached by the
caller)."""

from __future__ import annotations

import bisect
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from spurious.thinktwice.heuristics.text import _WORD_RE, _ContextTokens, _find_sub_list, _min_abs_distance, fit_tfidf

if TYPE_CHECKING:  # heavy imports stay lazy: the workflow imports this module in processes that may not use them
    from sklearn.feature_extraction.text import TfidfVectorizer


def _word_dist(
    ctx: _ContextTokens,
    question: str,
    texts: list[str],
    starts: list[int],
    *,
    compat: bool,
    variant: str | None,
    stop: frozenset[str],
) -> float:
    """word-dist: token distance between the answer and the closest context occurrence of a question word.

    Tokens are ``\\w+`` matches (NLTK ``RegexpTokenizer(r"\\w+")``); question words are the question's tokens that
    are not NLTK English stop words; matching against the context is case-sensitive (as in the authors' code).

    * default: the answer is anchored at its first token, located by ``answer_start`` of the first gold answer; value
      = min over occurrences j of a question word of ``|j - anchor|``; stop words filtered case-insensitively.
    * compat: anchor = first occurrence of the first answer's token sequence anywhere in the context
      (``answer_start`` ignored); stop-word filter case-sensitive.
    * variant ``between`` (paper: "number of words between the closest question word and the answer span"): the
      answer span is the tokens overlapping the first gold answer's chars; value = min over occurrences outside the
      span of the number of tokens strictly between the occurrence and the span (0 for an adjacent word);
      occurrences inside the span do not count.

    -1 when not computable: the answer has no word token / is not found, or no question word occurs in the context
    (outside the span, for ``between``).  NaN when the example has no gold answer.
    """
    if not texts:
        return float("nan")
    q_tokens = _WORD_RE.findall(question)
    if compat:
        anchor = _find_sub_list(_WORD_RE.findall(texts[0]), ctx.words)
        if anchor < 0:
            return -1.0
        words = {w for w in q_tokens if w not in stop}
        span = (anchor, anchor)
    else:
        found = ctx.span_of_chars(starts[0], starts[0] + len(texts[0]))
        if found is None:
            return -1.0
        span = found
        words = {w for w in q_tokens if w.lower() not in stop}
    best: int | None = None
    for w in words:
        positions = ctx.positions.get(w)
        if not positions:
            continue
        if variant == "between":
            first, last = span
            k = bisect.bisect_left(positions, first)
            if k > 0:  # closest occurrence before the span
                d = first - positions[k - 1] - 1
                best = d if best is None else min(best, d)
            k = bisect.bisect_right(positions, last)
            if k < len(positions):  # closest occurrence after the span
                d = positions[k] - last - 1
                best = d if best is None else min(best, d)
        else:
            d = _min_abs_distance(positions, span[0])
            best = d if best is None else min(best, d)
    return -1.0 if best is None else float(best)


def _ans_pos(
    sent_starts: list[int], sent_texts: list[str], texts: list[str], starts: list[int], *, compat: bool
) -> float:
    """ans-pos: 0-based index of the context sentence holding the answer (sentences from spaCy's parser).

    * default: the sentence in which the first gold answer starts (``answer_start``; a start in the whitespace
      between two sentences counts for the earlier one).
    * compat: the first sentence whose text contains the first answer's text as a substring (an earlier duplicate
      wins); if none does (the answer crosses a sentence boundary) the number of sentences.
    NaN when the example has no gold answer.
    """
    if not texts:
        return float("nan")
    if compat:
        answer = texts[0]
        for k, sent in enumerate(sent_texts):
            if answer in sent:
                return float(k)
        return float(len(sent_texts))
    return float(max(0, bisect.bisect_right(sent_starts, starts[0]) - 1))


def _ans_len(texts: list[str]) -> float:
    """ans-len: mean over the gold answers of the number of ``\\w+`` tokens (same in every mode); NaN if none."""
    if not texts:
        return float("nan")
    return sum(len(_WORD_RE.findall(t)) for t in texts) / len(texts)


def _sim_ents(ctx_labels: list[str], answer_labels: Iterable[list[str]]) -> float:
    """max over the answers' entity labels of how often the label occurs among the context's entities; 0 if none."""
    counts = Counter(ctx_labels)
    return float(max((counts[label] for labels in answer_labels for label in labels), default=0))


def _subj_pos(context: str, subjects: list[str], answer_start: int | None, *, compat: bool) -> float:
    """subj-pos: how many occurrences of the question's subject precede the answer in the context.

    Subjects are the question tokens with dependency ``nsubj`` (spaCy parser).  For a subject whose text is a
    case-sensitive substring of the context, count its (regex-escaped, non-overlapping) occurrences starting at or
    before ``answer_start`` of the first gold answer.

    * default (order-independent): the maximum count over the subjects found in the context; -1 only when the
      question has subjects but **none** of them occurs in the context; 0 when the question has no subject.
    * compat: the authors' loop, where a subject missing from the context sets the value to -1 and a later found
      subject sets it back to the running maximum, so the result depends on the subjects' order.
    NaN when the example has no gold answer.
    """
    if answer_start is None:
        return float("nan")
    running_max = 0
    pos = 0
    any_found = False
    for subject in subjects:
        if subject in context:
            counter = 0
            for m in re.finditer(re.escape(subject), context):
                if answer_start < m.start():
                    break
                counter += 1
            running_max = max(running_max, counter)
            pos = running_max
            any_found = True
        else:
            pos = -1
    if compat:
        return float(pos)
    if subjects and not any_found:
        return -1.0
    return float(running_max)


def _cos_sim(
    contexts: list[str],
    codes: np.ndarray,
    questions: list[str],
    answer_texts: list[list[str]],
    tfidf_contexts: Sequence[str] | TfidfVectorizer | None,
    contexts_all: list[str],
    variant: str | None,
) -> np.ndarray:
    """Row-wise cosine of TF-IDF vectors (context vs question, or question vs first answer for the variant).

    TfidfVectorizer rows are L2-normalised, so the cosine is the row-wise dot product (0 for an empty vector, as
    sklearn's ``cosine_similarity`` gives).  Distinct contexts are transformed once.
    """
    if tfidf_contexts is None:
        vectorizer = fit_tfidf(contexts_all)
    elif hasattr(tfidf_contexts, "transform"):
        vectorizer = tfidf_contexts
    else:
        vectorizer = fit_tfidf(tfidf_contexts)
    q_vecs = vectorizer.transform(questions)
    if variant == "question-answer":
        other = vectorizer.transform([t[0] if t else "" for t in answer_texts])
    else:
        other = vectorizer.transform(contexts)[np.asarray(codes)]
    values = np.asarray(q_vecs.multiply(other).sum(axis=1), dtype=np.float64).ravel()
    if variant == "question-answer":
        values[[not t for t in answer_texts]] = np.nan
    return values

