"""Text helpers of the heuristics: NLTK-like word tokenisation (no punkt model offline), TF-IDF, context tokens,
question types, answers."""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import regex

from spurious.thinktwice.heuristics.definitions import QUESTION_TYPE_LABELS

if TYPE_CHECKING:  # heavy imports stay lazy: the workflow imports this module in processes that may not use them
    from sklearn.feature_extraction.text import TfidfVectorizer


_WH_WORDS = frozenset({"who", "whom", "whose", "when", "where", "how", "what", "which"})


# Abbreviations (lower case, without the final period) that do not end a sentence in our Punkt substitute; the
# trained English Punkt model is unavailable offline.  Only alphanumeric ones change sim-word (a token like "Mr."
# that stays attached to its period is dropped by the ``isalnum`` filter), the rest keep sentences whole.
# fmt: off
_PUNKT_ABBREVIATIONS = frozenset(
    {
        "mr", "mrs", "ms", "dr", "st", "jr", "sr", "vs", "etc", "inc", "co", "corp", "ltd", "no", "nos", "jan", "feb",
        "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec", "gen", "gov", "sen", "rep", "rev",
        "prof", "col", "lt", "sgt", "capt", "cmdr", "adm", "ft", "mt", "ave", "blvd", "dept", "univ", "approx", "est",
        "fig", "vol", "ed", "eds", "pp", "cf", "al", "ca", "op", "u.s", "u.k", "u.n", "e.g", "i.e", "a.m", "p.m", "d.c",
        "b.c", "a.d", "ph.d", "u.s.a", "n.y", "l.a",
    }
)


# ``nltk.RegexpTokenizer(r"\w+")`` as the reference ran it: NLTK >= 3.10 compiles every pattern with the third-party
# ``regex`` engine (nltk.redos), whose ``\w`` follows Unicode word properties (combining marks are word characters,
# "½" is not), unlike the stdlib ``re``; these are RegexpTokenizer's flags.
_WORD_RE = regex.compile(r"\w+", regex.UNICODE | regex.MULTILINE | regex.DOTALL)


def fit_tfidf(contexts: Iterable[str]) -> TfidfVectorizer:
    """Fit the cos-sim TF-IDF model as the authors do: ``TfidfVectorizer(stop_words="english")`` on a list of
    contexts.

    Pass the contexts **one per question** (each context repeated once for each of its questions), as the
    authors' code fits on the rows of the SQuAD-train frame: the repetition changes the document frequencies, so
    passing the distinct contexts gives different values.
    """
    from sklearn.feature_extraction.text import TfidfVectorizer

    texts = [str(c) for c in contexts]
    if not texts:
        raise ValueError("fit_tfidf needs at least one context")
    return TfidfVectorizer(stop_words="english", use_idf=True).fit(texts)


@lru_cache(maxsize=1)
def _punkt_and_treebank() -> tuple[Any, Any]:
    from nltk.tokenize import NLTKWordTokenizer
    from nltk.tokenize.punkt import PunktParameters, PunktSentenceTokenizer

    params = PunktParameters()
    params.abbrev_types = set(_PUNKT_ABBREVIATIONS)
    return PunktSentenceTokenizer(params), NLTKWordTokenizer()


def _word_tokenize_like(text: str) -> list[str]:
    """Substitute for ``nltk.word_tokenize`` (which needs the unavailable ``punkt`` model), used by sim-word.

    ``word_tokenize`` is Punkt sentence splitting followed by NLTK's Treebank word tokenizer per sentence.  We run the
    same two NLTK algorithms, but Punkt with untrained parameters plus a hand-listed set of English abbreviations
    (:data:`_PUNKT_ABBREVIATIONS`) instead of the trained English model.  For sim-word only the alphanumeric tokens
    matter, and sentence splitting only decides whether a sentence-final period is split off its word ("end." ->
    "end", "."), so the two tokenisations differ only at rare abbreviation/initial boundaries.
    """
    sentences, words = _punkt_and_treebank()
    return [tok for sent in sentences.tokenize(text) for tok in words.tokenize(sent)]


def _alnum_word_set(text: str) -> frozenset[str]:
    return frozenset(tok for tok in _word_tokenize_like(text) if tok.isalnum())


@dataclass
class _ContextTokens:
    """``\\w+`` tokens of one context with their char spans and an index word -> sorted positions."""

    words: list[str]
    starts: list[int]
    ends: list[int]
    positions: dict[str, list[int]] = field(default_factory=dict)

    @classmethod
    def of(cls, text: str) -> _ContextTokens:
        matches = list(_WORD_RE.finditer(text))
        words = [m.group() for m in matches]
        positions: dict[str, list[int]] = {}
        for j, w in enumerate(words):
            positions.setdefault(w, []).append(j)
        return cls(words, [m.start() for m in matches], [m.end() for m in matches], positions)

    def span_of_chars(self, start: int, end: int) -> tuple[int, int] | None:
        """Indices (first, last) of the tokens overlapping the char span [start, end); None if no token does."""
        first = bisect.bisect_right(self.ends, start)  # first token ending after `start`
        if first >= len(self.words) or self.starts[first] >= end:
            return None
        last = bisect.bisect_left(self.starts, end) - 1  # last token starting before `end`
        return first, last


def _find_sub_list(sub: Sequence[str], seq: Sequence[str]) -> int:
    """Index of the first occurrence of ``sub`` in ``seq``, -1 if none or ``sub`` is empty (authors' helper)."""
    n = len(sub)
    if n == 0:
        return -1
    first = sub[0]
    for i, e in enumerate(seq):
        if e == first and list(seq[i : i + n]) == list(sub):
            return i
    return -1


def _min_abs_distance(positions: Sequence[int], anchor: int) -> int:
    k = bisect.bisect_left(positions, anchor)
    best = abs(positions[k] - anchor) if k < len(positions) else None
    if k > 0:
        d = anchor - positions[k - 1]
        best = d if best is None else min(best, d)
    assert best is not None
    return best


def _question_type(question: str) -> str | None:
    """The :data:`QUESTION_TYPE_LABELS` key of a question, or None (see that table's docstring)."""
    tokens = [t.lower() for t in _WORD_RE.findall(question)]
    for i, tok in enumerate(tokens):
        if tok in _WH_WORDS:
            wh = "what" if tok == "which" else tok
            if i + 1 < len(tokens):
                pair = f"{wh} {tokens[i + 1]}"
                if pair in QUESTION_TYPE_LABELS:
                    return pair
            return wh if wh in QUESTION_TYPE_LABELS else None
    return None


def _answers(cell: Any) -> tuple[list[str], list[int]]:
    """(texts, starts) from an answers cell: a mapping of sequences (lists, tuples or numpy arrays)."""
    if not isinstance(cell, Mapping):
        raise TypeError(f"answers cell must be a mapping with 'text' and 'answer_start', got {type(cell).__name__}")
    texts = [str(t) for t in cell["text"]]
    starts = [int(s) for s in cell["answer_start"]]
    return texts, starts

