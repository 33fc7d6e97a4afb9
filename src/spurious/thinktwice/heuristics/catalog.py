"""The heuristics, declared once: one :class:`Heuristic` entry each, in the paper's order (Table 1).

An entry names the heuristic, the authors' column for it, its paper-text variants, what it reads besides the frame
(spaCy parses and tokenisations, which :func:`~spurious.thinktwice.heuristics.compute.compute_heuristics` runs once
for all requested heuristics over distinct texts; NLTK's stop words) and the function giving its value for every
question. Everything else derives from this table: :data:`HEURISTICS`, :data:`VARIANTS`, :data:`ISBIASED_COLUMNS`,
the workflow's wildcard (``spurious.thinktwice.track``) and the config schema's lists of heuristic names.

Adding a heuristic is one entry here plus its value function: ``values(questions, variant)`` returns one float per
row of ``questions`` (a :class:`Questions`), NaN where it cannot be computed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np

from spurious.thinktwice.heuristics.definitions import COMPAT_MODES, QUESTION_TYPE_LABELS
from spurious.thinktwice.heuristics.measures import _ans_len, _ans_pos, _cos_sim, _sim_ents, _subj_pos, _word_dist
from spurious.thinktwice.heuristics.text import _ContextTokens, _question_type

if TYPE_CHECKING:
    from sklearn.feature_extraction.text import TfidfVectorizer

#: The per-text work a heuristic can read from :attr:`Questions.parsed`, computed once over distinct texts:
#: ``context_sentences`` (each distinct context's sentence starts and texts, spaCy's parser), ``context_entities``
#: (its entity labels, spaCy's NER after the parser), ``question_subjects`` (each distinct question's ``nsubj``
#: tokens), ``answer_entities`` (each distinct answer text's entity labels, NER alone), ``words`` (the sets of
#: alphanumeric tokens of each distinct context and question, NLTK's tokenizers).
PARSES: tuple[str, ...] = ("context_sentences", "context_entities", "question_subjects", "answer_entities", "words")


@dataclass
class Questions:
    """What a heuristic's value function reads: the frame's questions, their distinct contexts and the parses.

    ``codes[i]`` is row ``i``'s index into ``contexts`` (distinct contexts, first-seen order). ``parsed`` holds the
    requested :data:`PARSES`, keyed by text: ``parsed["context_sentences"][codes[i]]`` is row ``i``'s context's
    ``(sentence starts, sentence texts)``, ``parsed["question_subjects"][question]``, ``parsed["answer_entities"]
    [answer text]``; ``parsed["words"]`` is ``(one set per distinct context, {question: set})``."""

    ids: list[str]
    contexts_all: list[str]
    questions: list[str]
    answer_texts: list[list[str]]
    answer_starts: list[list[int]]
    codes: np.ndarray
    contexts: list[str]
    compat: bool
    tfidf_contexts: Sequence[str] | TfidfVectorizer | None = None
    stopwords: frozenset[str] = frozenset()
    parsed: dict[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.ids)

    @cached_property
    def distinct_questions(self) -> list[str]:
        return list(dict.fromkeys(self.questions))

    def entity_answers(self) -> list[list[str]]:
        """The gold answers whose entities sim-ents reads: every one (default), the last only (the authors' code,
        which resets its list inside the answer loop)."""
        return [(texts[-1:] if self.compat else texts) for texts in self.answer_texts]


ValuesFn = Callable[[Questions, "str | None"], Sequence[float]]


@dataclass(frozen=True)
class Heuristic:
    """One bias heuristic: its name (the paper's), the authors' column name, its named paper-text variants, the
    :data:`PARSES` it reads (per variant: ``None`` is the default definition) and its value function."""

    name: str
    isbiased_column: str
    values: ValuesFn
    parses: Callable[[str | None], frozenset[str]] = field(default=lambda variant: frozenset())
    variants: tuple[str, ...] = ()
    stopwords: bool = False  # reads NLTK's English stop words (Questions.stopwords)


def _word_dist_values(q: Questions, variant: str | None) -> list[float]:
    tokens = [_ContextTokens.of(c) for c in q.contexts]
    return [
        _word_dist(tokens[q.codes[i]], q.questions[i], q.answer_texts[i], q.answer_starts[i], compat=q.compat,
                   variant=variant, stop=q.stopwords)
        for i in range(len(q))
    ]


def _sim_word_values(q: Questions, variant: str | None) -> list[float]:
    ctx_sets, q_sets = q.parsed["words"]
    return [float(len(ctx_sets[q.codes[i]] & q_sets[q.questions[i]])) for i in range(len(q))]


def _ans_pos_values(q: Questions, variant: str | None) -> list[float]:
    sentences = q.parsed["context_sentences"]
    return [
        _ans_pos(*sentences[q.codes[i]], q.answer_texts[i], q.answer_starts[i], compat=q.compat) for i in range(len(q))
    ]


def _cos_sim_values(q: Questions, variant: str | None) -> np.ndarray:
    return _cos_sim(q.contexts, q.codes, q.questions, q.answer_texts, q.tfidf_contexts, q.contexts_all, variant)


def _ans_len_values(q: Questions, variant: str | None) -> list[float]:
    return [_ans_len(t) for t in q.answer_texts]


def _sim_ents_values(q: Questions, variant: str | None) -> list[float]:
    ctx_labels = q.parsed["context_entities"]
    if variant == "question-type":
        return [_question_type_entities(ctx_labels[q.codes[i]], q.questions[i]) for i in range(len(q))]
    ans_labels = q.parsed["answer_entities"]
    return [
        _sim_ents(ctx_labels[q.codes[i]], (ans_labels[a] for a in answers)) if answers else float("nan")
        for i, answers in enumerate(q.entity_answers())
    ]


def _question_type_entities(context_labels: list[str], question: str) -> float:
    """sim-ents, variant ``question-type``: the context's entities whose label belongs to the question's type (0 for
    a question of no mapped type)."""
    qtype = _question_type(question)
    labels = set(QUESTION_TYPE_LABELS[qtype]) if qtype else set()
    return float(sum(1 for label in context_labels if label in labels))


def _subj_pos_values(q: Questions, variant: str | None) -> list[float]:
    subjects = q.parsed["question_subjects"]
    return [
        _subj_pos_value(q.contexts_all[i], subjects[q.questions[i]], q.answer_starts[i], compat=q.compat,
                        variant=variant)
        for i in range(len(q))
    ]


def _subj_pos_value(
    context: str, subjects: list[str], answer_starts: list[int], *, compat: bool, variant: str | None
) -> float:
    """subj-pos of one question; variant ``categories`` folds counts above 2 into 2 (NaN and the -1 sentinel stay)."""
    value = _subj_pos(context, subjects, answer_starts[0] if answer_starts else None, compat=compat)
    if variant == "categories" and not np.isnan(value) and value >= 0:
        return float(min(value, 2.0))
    return value


def _sim_ents_parses(variant: str | None) -> frozenset[str]:
    # the question-type variant counts the context's entities of the question's type: no answer is parsed
    return frozenset({"context_entities"} if variant == "question-type" else {"context_entities", "answer_entities"})


HEURISTIC_SPECS: tuple[Heuristic, ...] = (
    Heuristic("word-dist", "distances", _word_dist_values, variants=("between",), stopwords=True),
    Heuristic("sim-word", "similar_words", _sim_word_values, parses=lambda variant: frozenset({"words"})),
    Heuristic("ans-pos", "kth_sentence", _ans_pos_values, parses=lambda variant: frozenset({"context_sentences"})),
    Heuristic("cos-sim", "cosine_similarity", _cos_sim_values, variants=("question-answer",)),
    Heuristic("ans-len", "answer_length", _ans_len_values),
    Heuristic("sim-ents", "max_sim_ents", _sim_ents_values, parses=_sim_ents_parses, variants=("question-type",)),
    Heuristic("subj-pos", "answer_subject_positions", _subj_pos_values,
              parses=lambda variant: frozenset({"question_subjects"}), variants=("categories",)),
)
"""All heuristics, in the paper's order."""

SPEC_OF: dict[str, Heuristic] = {spec.name: spec for spec in HEURISTIC_SPECS}

#: All heuristics, with the paper's names, in the paper's order.
HEURISTICS: tuple[str, ...] = tuple(SPEC_OF)
#: Named alternative definitions (taken from the paper's text) per heuristic; select with ``variants={h: name}``.
VARIANTS: dict[str, tuple[str, ...]] = {spec.name: spec.variants for spec in HEURISTIC_SPECS if spec.variants}
#: The reference column names of the authors' code, for readers mapping our output onto theirs.
ISBIASED_COLUMNS: dict[str, str] = {spec.name: spec.isbiased_column for spec in HEURISTIC_SPECS}


def validate_request(
    heuristics: Sequence[str] | str, compat: str | None, variants: Mapping[str, str] | None
) -> tuple[list[str], dict[str, str]]:
    """The requested heuristics (deduplicated, in order) and variants, checked against the catalog."""
    if isinstance(heuristics, str):
        heuristics = [heuristics]
    requested = list(dict.fromkeys(heuristics))
    unknown = [h for h in requested if h not in SPEC_OF]
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
        if h not in SPEC_OF:
            raise ValueError(f"variants: unknown heuristic {h!r}; heuristics with variants: {allowed}")
        if v not in VARIANTS.get(h, ()):
            raise ValueError(f"variants: unknown variant {v!r} for heuristic {h!r}; allowed variants: {allowed}")
    if compat is not None and chosen:
        raise ValueError(
            f"variants {chosen} cannot be combined with compat={compat!r}: compat reproduces the authors' code, "
            "variants follow the paper's text; request them in separate calls"
        )
    return requested, chosen
