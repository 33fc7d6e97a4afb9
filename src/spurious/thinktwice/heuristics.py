"""The seven bias-exploiting heuristics of *Think Twice* (paper §4.1; reference-notes §A.1).

Each heuristic maps a QA example to a scalar attribute ``A_h`` that the prediction-bias search (``spurious.thinktwice.bias``)
thresholds.  :func:`compute_heuristics` evaluates any subset of them on a QA frame and returns ``id`` plus one
float64 column per heuristic, named as in :data:`HEURISTICS`.

Three definitions are available, because the paper's text, the authors' code and a corrected version of that code
disagree, and each is needed for a different purpose:

* **default** (``compat=None``): the authors' code definition (``MIR-MU/isbiased``, ``isbiased/heuristics.py``) with
  its bugs fixed, so that our numbers are comparable with the paper's thresholds but not tied to accidents:

  - *word-dist* anchors the answer at its ``answer_start`` (the code takes the first occurrence of the answer's
    tokens anywhere in the context) and filters question stop words case-insensitively (the code keeps "What",
    "The", ... because NLTK's list is lower case);
  - *ans-pos* takes the sentence in which the answer starts (at ``answer_start``), not the first sentence that
    happens to contain the answer string;
  - *sim-ents* uses the entity labels of *every* gold answer (the code resets its list inside the answer loop and
    so keeps only the last answer's labels);
  - *subj-pos* is order-independent: the maximum over the question subjects found in the context (the code lets a
    later subject that is missing from the context overwrite an earlier hit with -1).

* ``compat="isbiased"``: the authors' code, bugs included, for checking against their published values.  Two parts
  cannot be exact offline because NLTK's ``punkt`` model is unavailable; see :func:`_word_tokenize_like` (sim-word:
  NLTK's Punkt algorithm with a listed abbreviation set + NLTK's Treebank tokenizer) and :func:`_ans_pos` (spaCy
  dependency-parser sentences instead of ``sent_tokenize``) for the documented substitutes.  On the 5,397
  questions of the even-numbered SQuAD-dev articles it reproduces the authors' published values of word-dist,
  cos-sim, ans-len, sim-ents and subj-pos for every question (``tests/thinktwice/test_heuristics.py``).

* ``variants``: where the paper's prose defines a heuristic differently from the code, that definition is offered
  by name (see :data:`VARIANTS`); variants build on the default definitions.

spaCy work (sentences, entities, question subjects) runs batched with ``nlp.pipe`` over *distinct* texts only and
only for the heuristics that need it, in ``threads`` forked worker processes (:class:`_JobRunner`), because parsing
dominates the run time (SQuAD dev: 10,570 questions but only 2,067 distinct contexts).  All seven heuristics on
SQuAD dev take ~60 CPU-seconds (``benchmarks/bench_heuristics.py``).
"""

from __future__ import annotations

import bisect
import logging
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import regex

from spurious.core.progress import Progress
from spurious.core.resources import english_stopwords, load_spacy

if TYPE_CHECKING:  # heavy imports stay lazy: the workflow imports this module in processes that may not use them
    from sklearn.feature_extraction.text import TfidfVectorizer
    from spacy.language import Language

log = logging.getLogger(__name__)

HEURISTICS: tuple[str, ...] = ("word-dist", "sim-word", "ans-pos", "cos-sim", "ans-len", "sim-ents", "subj-pos")
"""All heuristics, with the paper's names, in the paper's order."""

VARIANTS: dict[str, tuple[str, ...]] = {
    "word-dist": ("between",),
    "cos-sim": ("question-answer",),
    "sim-ents": ("question-type",),
    "subj-pos": ("categories",),
}
"""Named alternative definitions (taken from the paper's text) per heuristic; select with ``variants={h: name}``."""

COMPAT_MODES: tuple[str, ...] = ("isbiased",)


# The reference column names of the authors' code, for readers mapping our output onto theirs.
ISBIASED_COLUMNS: dict[str, str] = {
    "word-dist": "distances",
    "sim-word": "similar_words",
    "ans-pos": "kth_sentence",
    "cos-sim": "cosine_similarity",
    "ans-len": "answer_length",
    "sim-ents": "max_sim_ents",
    "subj-pos": "answer_subject_positions",
}

QUESTION_TYPE_LABELS: dict[str, tuple[str, ...]] = {
    "who": ("PERSON", "ORG", "NORP"),
    "whom": ("PERSON", "ORG", "NORP"),
    "whose": ("PERSON", "ORG", "NORP"),
    "when": ("DATE", "TIME"),
    "where": ("GPE", "LOC", "FAC"),
    "how many": ("CARDINAL", "QUANTITY", "MONEY", "PERCENT"),
    "how much": ("CARDINAL", "QUANTITY", "MONEY", "PERCENT"),
    "how long": ("DATE", "TIME", "QUANTITY"),
    "how old": ("DATE", "CARDINAL"),
    "how far": ("QUANTITY",),
    "how big": ("QUANTITY",),
    "how large": ("QUANTITY", "CARDINAL"),
    "how tall": ("QUANTITY",),
    "how high": ("QUANTITY",),
    "how fast": ("QUANTITY",),
    "what year": ("DATE",),
    "what date": ("DATE",),
    "what day": ("DATE",),
    "what month": ("DATE",),
    "what century": ("DATE",),
    "what decade": ("DATE",),
    "what time": ("TIME", "DATE"),
    "what percentage": ("PERCENT",),
    "what percent": ("PERCENT",),
    "what country": ("GPE",),
    "what city": ("GPE",),
    "what state": ("GPE",),
    "what language": ("LANGUAGE",),
    "what nationality": ("NORP",),
    "what religion": ("NORP",),
    "what company": ("ORG",),
    "what organization": ("ORG",),
    "what team": ("ORG",),
}
"""Question type -> spaCy entity labels, for the ``sim-ents: question-type`` variant (paper: "named entities of the
question type, i.e. personal names if the question starts with 'Who'").  The type of a question is read at its first
wh-word (``who whom whose when where how what which``): the two-word key ``"<wh> <next word>"`` is tried first
(``which`` is looked up as ``what``), then the wh-word alone.  A question whose first wh-word has no entry (plain
"what ...", "why ...", "how did ...") has no type and gets 0."""

_WH_WORDS = frozenset({"who", "whom", "whose", "when", "where", "how", "what", "which"})

# Abbreviations (lower case, without the final period) that do not end a sentence in our Punkt substitute; the
# trained English Punkt model is unavailable offline.  Only alphanumeric ones change sim-word (a token like "Mr."
# that stays attached to its period is dropped by the ``isalnum`` filter), the rest keep sentences whole.
# fmt: off
_PUNKT_ABBREVIATIONS = frozenset(
    {
        "mr", "mrs", "ms", "dr", "st", "jr", "sr", "vs", "etc", "inc", "co", "corp", "ltd", "no", "nos", "jan", "feb",
        "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec", "gen", "gov", "sen", "rep", "rev", "prof",
        "col", "lt", "sgt", "capt", "cmdr", "adm", "ft", "mt", "ave", "blvd", "dept", "univ", "approx", "est", "fig",
        "vol", "ed", "eds", "pp", "cf", "al", "ca", "op", "u.s", "u.k", "u.n", "e.g", "i.e", "a.m", "p.m", "d.c", "b.c",
        "a.d", "ph.d", "u.s.a", "n.y", "l.a",
    }
)
# fmt: on

# ``nltk.RegexpTokenizer(r"\w+")`` as the reference ran it: NLTK >= 3.10 compiles every pattern with the third-party
# ``regex`` engine (nltk.redos), whose ``\w`` follows Unicode word properties (combining marks are word characters,
# "½" is not), unlike the stdlib ``re``; these are RegexpTokenizer's flags.
_WORD_RE = regex.compile(r"\w+", regex.UNICODE | regex.MULTILINE | regex.DOTALL)


# ---------------------------------------------------------------------------------------------------------------
# Resources
# ---------------------------------------------------------------------------------------------------------------


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


# ---------------------------------------------------------------------------------------------------------------
# Tokenisation helpers
# ---------------------------------------------------------------------------------------------------------------


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


# ---------------------------------------------------------------------------------------------------------------
# Input handling and validation
# ---------------------------------------------------------------------------------------------------------------


def _validate(
    heuristics: Sequence[str] | str, compat: str | None, variants: Mapping[str, str] | None
) -> tuple[list[str], dict[str, str]]:
    if isinstance(heuristics, str):
        heuristics = [heuristics]
    requested = list(dict.fromkeys(heuristics))
    unknown = [h for h in requested if h not in HEURISTICS]
    if unknown:
        raise ValueError(f"unknown heuristic(s) {unknown}; allowed: {', '.join(HEURISTICS)}")
    if not requested:
        raise ValueError(f"no heuristic requested; allowed: {', '.join(HEURISTICS)}")
    if compat is not None and compat not in COMPAT_MODES:
        raise ValueError(
            f"unknown compat mode {compat!r}; allowed: None (fixed definitions) or {', '.join(COMPAT_MODES)}"
        )
    chosen = dict(variants or {})
    allowed = "; ".join(f"{h}: {', '.join(v)}" for h, v in VARIANTS.items())
    for h, v in chosen.items():
        if h not in HEURISTICS:
            raise ValueError(f"variants: unknown heuristic {h!r}; heuristics with variants: {allowed}")
        if v not in VARIANTS.get(h, ()):
            raise ValueError(f"variants: unknown variant {v!r} for heuristic {h!r}; allowed variants: {allowed}")
    if compat is not None and chosen:
        raise ValueError(
            f"variants {chosen} cannot be combined with compat={compat!r}: compat reproduces the authors' code, "
            "variants follow the paper's text; request them in separate calls"
        )
    return requested, chosen


def _answers(cell: Any) -> tuple[list[str], list[int]]:
    """(texts, starts) from an answers cell: a mapping of sequences (lists, tuples or numpy arrays)."""
    if not isinstance(cell, Mapping):
        raise TypeError(f"answers cell must be a mapping with 'text' and 'answer_start', got {type(cell).__name__}")
    texts = [str(t) for t in cell["text"]]
    starts = [int(s) for s in cell["answer_start"]]
    return texts, starts


# ---------------------------------------------------------------------------------------------------------------
# spaCy features (batched over distinct texts)
# ---------------------------------------------------------------------------------------------------------------


# A job is one kind of per-text work over a list of distinct texts; the kinds and what they extract:
#   "context":  spaCy (parser [+ ner]) -> (sentence start chars, sentence texts, entity labels)
#   "question": spaCy (parser)         -> texts of the tokens with dependency nsubj, in order
#   "answer":   spaCy (ner)            -> entity labels
#   "words":    NLTK tokenizers        -> frozenset of alphanumeric tokens (sim-word)
_Job = tuple[str, tuple[str, ...], list[str]]  # (kind, spaCy components to run, texts)

_WORKER_NLP: Language | None = None  # the pipeline the (forked) workers use; set only while a job batch runs


def _extract_context(doc: Any) -> tuple[list[int], list[str], list[str]]:
    sents = list(doc.sents)  # the parser's sentence boundaries (it is always on for contexts)
    return [s.start_char for s in sents], [s.text for s in sents], [e.label_ for e in doc.ents]


def _extract_question(doc: Any) -> list[str]:
    return [t.text for t in doc if t.dep_ == "nsubj"]


def _extract_answer(doc: Any) -> list[str]:
    return [e.label_ for e in doc.ents]


_EXTRACTORS = {"context": _extract_context, "question": _extract_question, "answer": _extract_answer}


def _run_task(task: tuple[str, tuple[str, ...], list[str], int]) -> list[Any]:
    """Run one chunk of a job (in a worker process or in-process) and return compact per-text features."""
    kind, components, texts, batch_size = task
    if kind == "words":
        return [_alnum_word_set(t) for t in texts]
    nlp = _WORKER_NLP
    assert nlp is not None
    disable = [name for name in nlp.pipe_names if name not in components]
    extract = _EXTRACTORS[kind]
    return [extract(doc) for doc in nlp.pipe(texts, batch_size=batch_size, disable=disable)]


def _components(nlp: Language, need: Iterable[str]) -> tuple[str, ...]:
    """The pipeline components to run for ``need`` (plus the shared embedding layers they listen to)."""
    need = set(need)
    missing = sorted(need - set(nlp.pipe_names))
    if missing:
        raise ValueError(
            f"the spaCy pipeline lacks component(s) {missing} (has {nlp.pipe_names}); sentence boundaries and "
            "subjects need the dependency 'parser', entities need 'ner'"
        )
    shared = {"tok2vec", "transformer"} if "parser" in need or "ner" in need else set()
    return tuple(name for name in nlp.pipe_names if name in need or name in shared)


def _can_fork() -> bool:
    import multiprocessing as mp

    return "fork" in mp.get_all_start_methods() and not mp.current_process().daemon


class _JobRunner:
    """Run text jobs over ``threads`` forked worker processes (or in-process), chunked and batched.

    Why not ``nlp.pipe(n_process=...)``: spaCy's multiprocessing sends every parsed ``Doc`` back to the parent as
    bytes, and ``Doc.from_bytes`` (msgpack plus a catalogue entry-point lookup per call) cost more CPU in the parent
    than the parsing itself (profiled: ~70 s for the 27k distinct SQuAD-dev texts).  Our workers are forked from
    the parent, so they share the loaded pipeline without pickling it, run ``nlp.pipe`` (batched, ``batch_size``)
    on their chunk, and return only the few features the heuristics read.  Chunks of the costliest jobs are
    dispatched first; the parent computes the spaCy-free heuristics meanwhile (:meth:`start` is asynchronous).
    """

    def __init__(self, nlp: Language | None, jobs: dict[str, _Job], *, threads: int, batch_size: int) -> None:
        self.jobs = {name: job for name, job in jobs.items() if job[2]}
        self.nlp = nlp
        self.batch_size = max(1, int(batch_size))
        self.threads = max(1, int(threads))
        self._pool: Any = None
        self._async: Any = None
        self._tasks: list[tuple[str, int, tuple[str, tuple[str, ...], list[str], int]]] = []
        self._blas: Any = None

    def start(self) -> None:
        global _WORKER_NLP
        order = {"context": 0, "question": 1, "answer": 2, "words": 3}  # costliest per text first
        # several chunks per process balance the workers; in-process, chunks only pace the progress report
        n_chunks = self.threads * 4 if self.threads > 1 else 8
        for name, (kind, components, texts) in sorted(self.jobs.items(), key=lambda kv: order[kv[1][0]]):
            size = max(1, -(-len(texts) // n_chunks))
            for k, i in enumerate(range(0, len(texts), size)):
                self._tasks.append((name, k, (kind, components, texts[i : i + size], self.batch_size)))
        from threadpoolctl import threadpool_limits

        # One BLAS thread per process while the jobs run (parallelism comes from the processes; a forked worker
        # inherits the limit); restored in results().
        self._blas = threadpool_limits(limits=1, user_api="blas")
        _WORKER_NLP = self.nlp
        if self.threads > 1 and len(self._tasks) > 1 and _can_fork():
            import multiprocessing as mp

            self._pool = mp.get_context("fork").Pool(min(self.threads, len(self._tasks)))
            # imap submits every task now and yields the results in order as they come (for the progress report)
            self._async = self._pool.imap(_run_task, [t[2] for t in self._tasks], chunksize=1)

    def abort(self) -> None:
        """Stop the workers and restore the BLAS limits (the caller failed before collecting the results)."""
        global _WORKER_NLP
        if self._pool is not None:
            self._pool.terminate()
            self._pool.join()
        _WORKER_NLP = None
        if self._blas is not None:
            self._blas.restore_original_limits()

    def results(self) -> dict[str, list[Any]]:
        """Per job, the features of its texts in input order (blocks until the workers are done)."""
        global _WORKER_NLP
        try:
            chunks: list[Any] = []
            with Progress(len(self._tasks), "heuristics: text chunks parsed", log, unit="chunks") as bar:
                if self._pool is not None:
                    for values in self._async:
                        chunks.append(values)
                        bar.update()
                    self._pool.close()
                    self._pool.join()
                else:
                    for task in self._tasks:
                        chunks.append(_run_task(task[2]))
                        bar.update()
        finally:
            if self._pool is not None:
                self._pool.terminate()
            _WORKER_NLP = None
            self._blas.restore_original_limits()
        out: dict[str, list[Any]] = {name: [] for name in self.jobs}  # jobs without texts stay absent
        for (name, _k, _task), values in zip(self._tasks, chunks, strict=True):  # tasks are in chunk order per job
            out[name].extend(values)
        return out


# ---------------------------------------------------------------------------------------------------------------
# The heuristics (one value per row; shared per-context work is cached by the caller)
# ---------------------------------------------------------------------------------------------------------------


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


# ---------------------------------------------------------------------------------------------------------------
# Public entry point
# ---------------------------------------------------------------------------------------------------------------


def compute_heuristics(
    qa_frame: pd.DataFrame,
    heuristics: Sequence[str] | str = HEURISTICS,
    *,
    compat: str | None = None,
    variants: Mapping[str, str] | None = None,
    tfidf_contexts: Sequence[str] | TfidfVectorizer | None = None,
    nlp: Language | None = None,
    threads: int = 1,
    batch_size: int = 256,
) -> pd.DataFrame:
    """Compute the requested heuristics for every row of a QA frame.

    Args:
        qa_frame: QA frame (``id, context, question, answers``; ``answers`` cells are mappings of sequences).
        heuristics: names from :data:`HEURISTICS` (default: all seven).
        compat: ``None`` for the bug-fixed definitions, ``"isbiased"`` to reproduce the authors' code.
        variants: ``{heuristic: variant}`` to use the paper's text instead (names in :data:`VARIANTS`):
            ``word-dist: between``, ``cos-sim: question-answer``, ``sim-ents: question-type``,
            ``subj-pos: categories``.  Not combinable with ``compat``.
        tfidf_contexts: the contexts to fit cos-sim's TF-IDF on, one per question (the paper fits on SQuAD-train),
            or an already fitted vectorizer from :func:`fit_tfidf`; ``None`` fits on this frame's contexts, one
            per question.
        nlp: a loaded spaCy pipeline with ``parser`` and ``ner`` (default: :func:`load_spacy`); only loaded when a
            requested heuristic needs it (ans-pos, sim-ents, subj-pos).
        threads: at most this many worker processes for the per-text work (spaCy parses, sim-word tokenisation);
            each runs ``nlp.pipe`` batched over its share of the distinct texts (see :class:`_JobRunner` for why
            not ``nlp.pipe(n_process=...)``).  1 runs everything in this process.
        batch_size: ``nlp.pipe`` batch size.

    Returns:
        A frame with ``id`` and one float64 column per requested heuristic, in the order requested, row-aligned
        with ``qa_frame``.  -1 marks "not computable" where the authors' code uses it (word-dist, subj-pos); NaN
        marks an example without gold answers in the heuristics that read the answer (all but sim-word, cos-sim
        and sim-ents ``question-type``).

    Heuristic definitions (details in the per-heuristic helpers of this module):
        * word-dist — see :func:`_word_dist`.
        * sim-word — size of the intersection of the sets of alphanumeric tokens of question and context
          (case-sensitive), tokenised by :func:`_word_tokenize_like` (substitute for ``nltk.word_tokenize``).
        * ans-pos — see :func:`_ans_pos`; sentences are ``doc.sents`` from spaCy's **dependency parser** (the
          ``senter`` component stays off), the substitute for NLTK's ``sent_tokenize``.
        * cos-sim — cosine of the TF-IDF vectors of context and question; variant ``question-answer`` (paper's
          text): of question and first gold answer.
        * ans-len — see :func:`_ans_len`.
        * sim-ents — spaCy NER labels: max over the answer entity labels (NER run on each answer text alone, as the
          authors do) of the label's count among the context's entities; default: labels of every gold answer,
          compat: of the last gold answer only; variant ``question-type``: number of context entities whose label
          belongs to the question's type (:data:`QUESTION_TYPE_LABELS`; 0 for an unmapped question).
        * subj-pos — see :func:`_subj_pos`; variant ``categories`` (paper's text) folds the default count into
          0 = answer before the subject, 1 = after one occurrence, 2 = after several occurrences, and keeps -1
          (no question subject occurs in the context; a question without subject gets 0, as in the default).
    """
    requested, chosen = _validate(heuristics, compat, variants)
    missing_cols = [c for c in ("id", "context", "question", "answers") if c not in qa_frame.columns]
    if missing_cols:
        raise ValueError(
            f"qa_frame lacks column(s) {missing_cols}; a QA frame has id, title, context, question, answers"
        )
    is_compat = compat == "isbiased"
    n = len(qa_frame)
    if n == 0:
        return pd.DataFrame(
            {"id": pd.Series([], dtype=object), **{h: pd.Series([], dtype=np.float64) for h in requested}}
        )
    ids = qa_frame["id"].astype(str).tolist()
    contexts_all = [str(c) for c in qa_frame["context"]]
    questions = [str(q) for q in qa_frame["question"]]
    parsed = [_answers(a) for a in qa_frame["answers"]]
    answer_texts = [p[0] for p in parsed]
    answer_starts = [p[1] for p in parsed]
    codes, uniques = pd.factorize(pd.Series(contexts_all, dtype=object), sort=False)
    contexts: list[str] = list(uniques)

    want = set(requested)
    ents_variant = chosen.get("sim-ents")
    sim_ents_answers: list[list[str]] = []
    if "sim-ents" in want and ents_variant is None:
        # compat: only the last gold answer's labels count (authors' bug); default: every gold answer.
        sim_ents_answers = [(t[-1:] if is_compat else t) for t in answer_texts]
    distinct_answers = list(dict.fromkeys(a for texts in sim_ents_answers for a in texts))
    distinct_questions = list(dict.fromkeys(questions))

    # Per-text work over distinct texts, only for the heuristics that need it.
    need_spacy = bool(want & {"ans-pos", "sim-ents", "subj-pos"})
    if need_spacy and nlp is None:
        nlp = load_spacy()
    jobs: dict[str, _Job] = {}
    if want & {"ans-pos", "sim-ents"}:
        assert nlp is not None
        # NER keeps the parser: in the full pipeline the parser runs first and entities never cross its sentence
        # boundaries, so NER alone finds different entities (e.g. "X. Thus" as one ORG).
        need = ["parser"] + (["ner"] if "sim-ents" in want else [])
        jobs["contexts"] = ("context", _components(nlp, need), contexts)
    if "subj-pos" in want:
        assert nlp is not None
        jobs["questions"] = ("question", _components(nlp, ["parser"]), distinct_questions)
    if distinct_answers:
        assert nlp is not None
        # Answer texts are short and rarely hold a sentence boundary, so their NER runs without the parser (half
        # the cost); on the reference questions this gives the same sim-ents values as the full pipeline.
        jobs["answers"] = ("answer", _components(nlp, ["ner"]), distinct_answers)
    if "sim-word" in want:
        jobs["context_words"] = ("words", (), contexts)
        jobs["question_words"] = ("words", (), distinct_questions)
    # Load NLTK before forking so that the workers inherit it instead of importing it each (seconds of CPU).
    stop = english_stopwords() if "word-dist" in want else frozenset()
    if "sim-word" in want:
        _punkt_and_treebank()
    runner = _JobRunner(nlp, jobs, threads=threads, batch_size=batch_size)
    runner.start()

    # The heuristics without per-text jobs run in this process while the workers parse.
    out: dict[str, Any] = {"id": ids}
    try:
        if "word-dist" in want:
            tokens = [_ContextTokens.of(c) for c in contexts]
            variant = chosen.get("word-dist")
            out["word-dist"] = [
                _word_dist(
                    tokens[codes[i]],
                    questions[i],
                    answer_texts[i],
                    answer_starts[i],
                    compat=is_compat,
                    variant=variant,
                    stop=stop,
                )
                for i in range(n)
            ]
        if "cos-sim" in want:
            out["cos-sim"] = _cos_sim(
                contexts, codes, questions, answer_texts, tfidf_contexts, contexts_all, chosen.get("cos-sim")
            )
        if "ans-len" in want:
            out["ans-len"] = [_ans_len(t) for t in answer_texts]
    except BaseException:
        runner.abort()
        raise
    feats = runner.results()
    for name in jobs:  # a job over no texts (empty frame) ran nowhere
        feats.setdefault(name, [])
    if "sim-word" in want:
        q_sets = dict(zip(distinct_questions, feats["question_words"], strict=True))
        ctx_sets = feats["context_words"]
        out["sim-word"] = [float(len(ctx_sets[codes[i]] & q_sets[questions[i]])) for i in range(n)]
    if "ans-pos" in want:
        ctx_feats = feats["contexts"]
        out["ans-pos"] = [
            _ans_pos(
                ctx_feats[codes[i]][0], ctx_feats[codes[i]][1], answer_texts[i], answer_starts[i], compat=is_compat
            )
            for i in range(n)
        ]
    if "sim-ents" in want:
        ctx_labels = [f[2] for f in feats["contexts"]]
        if ents_variant == "question-type":
            values = []
            for i in range(n):
                qtype = _question_type(questions[i])
                labels = set(QUESTION_TYPE_LABELS[qtype]) if qtype else set()
                values.append(float(sum(1 for lab in ctx_labels[codes[i]] if lab in labels)))
            out["sim-ents"] = values
        else:
            ans_labels = dict(zip(distinct_answers, feats.get("answers", []), strict=True))
            out["sim-ents"] = [
                _sim_ents(ctx_labels[codes[i]], (ans_labels[a] for a in sim_ents_answers[i]))
                if sim_ents_answers[i]
                else float("nan")
                for i in range(n)
            ]
    if "subj-pos" in want:
        subjects = dict(zip(distinct_questions, feats["questions"], strict=True))
        values = [
            _subj_pos(
                contexts_all[i],
                subjects[questions[i]],
                answer_starts[i][0] if answer_starts[i] else None,
                compat=is_compat,
            )
            for i in range(n)
        ]
        if chosen.get("subj-pos") == "categories":
            values = [v if np.isnan(v) or v < 0 else float(min(v, 2.0)) for v in values]
        out["subj-pos"] = values

    frame = pd.DataFrame({"id": ids})
    for h in requested:
        frame[h] = np.asarray(out[h], dtype=np.float64)
    return frame


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
