"""compute_heuristics: any subset of the seven heuristics on a QA frame (the public entry point)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from spurious.core.resources import english_stopwords, load_spacy
from spurious.thinktwice.heuristics.definitions import HEURISTICS, QUESTION_TYPE_LABELS, _validate
from spurious.thinktwice.heuristics.measures import _ans_len, _ans_pos, _cos_sim, _sim_ents, _subj_pos, _word_dist
from spurious.thinktwice.heuristics.parsing import _components, _Job, _JobRunner
from spurious.thinktwice.heuristics.text import _answers, _ContextTokens, _punkt_and_treebank, _question_type

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
    if want & {"ans-pos", "sim-ents", "subj-pos"} and nlp is None:
        nlp = load_spacy()
    jobs = _parse_jobs(want, nlp, contexts, distinct_questions, distinct_answers)
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
            out["sim-ents"] = [_question_type_entities(ctx_labels[codes[i]], questions[i]) for i in range(n)]
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
        out["subj-pos"] = [
            _subj_pos_value(
                contexts_all[i],
                subjects[questions[i]],
                answer_starts[i],
                compat=is_compat,
                variant=chosen.get("subj-pos"),
            )
            for i in range(n)
        ]

    frame = pd.DataFrame({"id": ids})
    for h in requested:
        frame[h] = np.asarray(out[h], dtype=np.float64)
    return frame



def _parse_jobs(
    want: set[str],
    nlp: Language | None,
    contexts: list[str],
    distinct_questions: list[str],
    distinct_answers: list[str],
) -> dict[str, _Job]:
    """The per-text jobs the requested heuristics need (spaCy parses, sim-word's tokenisation), by name."""
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
    return jobs


def _question_type_entities(context_labels: list[str], question: str) -> float:
    """sim-ents, variant ``question-type``: the context's entities whose label belongs to the question's type (0 for
    a question of no mapped type)."""
    qtype = _question_type(question)
    labels = set(QUESTION_TYPE_LABELS[qtype]) if qtype else set()
    return float(sum(1 for label in context_labels if label in labels))


def _subj_pos_value(
    context: str, subjects: list[str], answer_starts: list[int], *, compat: bool, variant: str | None
) -> float:
    """subj-pos of one question; variant ``categories`` folds counts above 2 into 2 (NaN and the -1 sentinel stay)."""
    value = _subj_pos(context, subjects, answer_starts[0] if answer_starts else None, compat=compat)
    if variant == "categories" and not np.isnan(value) and value >= 0:
        return float(min(value, 2.0))
    return value
