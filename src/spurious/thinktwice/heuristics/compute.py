"""compute_heuristics: any subset of the heuristics on a QA frame (the public entry point); the heuristics themselves
are declared in :mod:`spurious.thinktwice.heuristics.catalog`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from spurious.core.resources import english_stopwords, load_spacy
from spurious.thinktwice.heuristics.catalog import HEURISTICS, SPEC_OF, Questions, validate_request
from spurious.thinktwice.heuristics.parsing import _components, _Job, _JobRunner
from spurious.thinktwice.heuristics.text import _answers, _punkt_and_treebank

if TYPE_CHECKING:  # heavy imports stay lazy: the workflow imports this module in processes that may not use them
    from sklearn.feature_extraction.text import TfidfVectorizer
    from spacy.language import Language


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
    requested, chosen = validate_request(heuristics, compat, variants)
    missing_cols = [c for c in ("id", "context", "question", "answers") if c not in qa_frame.columns]
    if missing_cols:
        raise ValueError(
            f"qa_frame lacks column(s) {missing_cols}; a QA frame has id, title, context, question, answers"
        )
    if len(qa_frame) == 0:
        return pd.DataFrame(
            {"id": pd.Series([], dtype=object), **{h: pd.Series([], dtype=np.float64) for h in requested}}
        )
    specs = [SPEC_OF[h] for h in requested]
    q = _questions(qa_frame, compat == "isbiased", tfidf_contexts)
    parses = frozenset().union(*(spec.parses(chosen.get(spec.name)) for spec in specs))
    if parses - {"words"} and nlp is None:
        nlp = load_spacy()
    distinct_answers = []
    if "answer_entities" in parses:
        distinct_answers = list(dict.fromkeys(a for texts in q.entity_answers() for a in texts))
    jobs = _parse_jobs(parses, nlp, q.contexts, q.distinct_questions, distinct_answers)
    # Load NLTK before forking so that the workers inherit it instead of importing it each (seconds of CPU).
    if any(spec.stopwords for spec in specs):
        q.stopwords = english_stopwords()
    if "words" in parses:
        _punkt_and_treebank()
    runner = _JobRunner(nlp, jobs, threads=threads, batch_size=batch_size)
    runner.start()

    # The heuristics that read no parse run in this process while the workers parse.
    out: dict[str, Any] = {}
    try:
        for spec in specs:
            if not spec.parses(chosen.get(spec.name)):
                out[spec.name] = spec.values(q, chosen.get(spec.name))
    except BaseException:
        runner.abort()
        raise
    q.parsed = _parsed(runner.results(), jobs, q.distinct_questions, distinct_answers)
    for spec in specs:
        if spec.name not in out:
            out[spec.name] = spec.values(q, chosen.get(spec.name))

    frame = pd.DataFrame({"id": q.ids})
    for h in requested:
        frame[h] = np.asarray(out[h], dtype=np.float64)
    return frame


def _questions(qa_frame: pd.DataFrame, compat: bool, tfidf_contexts: Any) -> Questions:
    """The frame's rows as a heuristic's value function reads them; its contexts factorised to distinct texts."""
    contexts_all = [str(c) for c in qa_frame["context"]]
    parsed = [_answers(a) for a in qa_frame["answers"]]
    codes, uniques = pd.factorize(pd.Series(contexts_all, dtype=object), sort=False)
    return Questions(
        ids=qa_frame["id"].astype(str).tolist(),
        contexts_all=contexts_all,
        questions=[str(q) for q in qa_frame["question"]],
        answer_texts=[p[0] for p in parsed],
        answer_starts=[p[1] for p in parsed],
        codes=codes,
        contexts=list(uniques),
        compat=compat,
        tfidf_contexts=tfidf_contexts,
    )


def _parsed(
    feats: dict[str, list[Any]], jobs: dict[str, _Job], distinct_questions: list[str], distinct_answers: list[str]
) -> dict[str, Any]:
    """The runner's per-text results as :data:`~spurious.thinktwice.heuristics.catalog.PARSES`."""
    for name in jobs:  # a job over no texts (empty frame) ran nowhere
        feats.setdefault(name, [])
    parsed: dict[str, Any] = {}
    if "contexts" in feats:
        parsed["context_sentences"] = [(f[0], f[1]) for f in feats["contexts"]]
        parsed["context_entities"] = [f[2] for f in feats["contexts"]]
    if "questions" in feats:
        parsed["question_subjects"] = dict(zip(distinct_questions, feats["questions"], strict=True))
    if "answers" in feats:
        parsed["answer_entities"] = dict(zip(distinct_answers, feats["answers"], strict=True))
    if "context_words" in feats:
        parsed["words"] = (feats["context_words"], dict(zip(distinct_questions, feats["question_words"], strict=True)))
    return parsed


def _parse_jobs(
    parses: frozenset[str],
    nlp: Language | None,
    contexts: list[str],
    distinct_questions: list[str],
    distinct_answers: list[str],
) -> dict[str, _Job]:
    """The per-text jobs that give the requested parses (spaCy, sim-word's tokenisation), by name."""
    jobs: dict[str, _Job] = {}
    if parses & {"context_sentences", "context_entities"}:
        assert nlp is not None
        # NER keeps the parser: in the full pipeline the parser runs first and entities never cross its sentence
        # boundaries, so NER alone finds different entities (e.g. "X. Thus" as one ORG).
        need = ["parser"] + (["ner"] if "context_entities" in parses else [])
        jobs["contexts"] = ("context", _components(nlp, need), contexts)
    if "question_subjects" in parses:
        assert nlp is not None
        jobs["questions"] = ("question", _components(nlp, ["parser"]), distinct_questions)
    if "answer_entities" in parses and distinct_answers:
        assert nlp is not None
        # Answer texts are short and rarely hold a sentence boundary, so their NER runs without the parser (half
        # the cost); on the reference questions this gives the same sim-ents values as the full pipeline.
        jobs["answers"] = ("answer", _components(nlp, ["ner"]), distinct_answers)
    if "words" in parses:
        jobs["context_words"] = ("words", (), contexts)
        jobs["question_words"] = ("words", (), distinct_questions)
    return jobs
