"""QNLI-style sentence pairs from SQuAD, and a train/test split of QNLI by SQuAD article.

QNLI (Wang et al. 2018, GLUE §3) pairs each SQuAD question with sentences of its paragraph: *entailment* when the
sentence holds the answer, *not_entailment* otherwise, with low-overlap pairs filtered out. Checked against the
mirror's QNLI dev (5,463 pairs, every question a SQuAD v1.1 dev question): every entailment sentence holds an answer
text, no not_entailment sentence does, and a question has one or two pairs (one of each label). The not_entailment
sentence is not the one with the most question words, but is drawn towards overlap: among a question's non-answer
sentences, the chosen one shares no content word with the question in 35 % of pairs, one in 34 %, two in 19 % and
three or more in 12 %, against 45 / 30 / 12 / 13 % over all candidates. Drawing a candidate with probability
proportional to ``1 + overlap`` (its number of question content words) gives 31 / 38 / 21 / 10 % on the same
questions; :func:`squad_to_qnli_pairs` does that, with a seeded generator. GLUE's exact rule is not published.

:func:`split_qnli_by_article` keeps a whole SQuAD article on one side, so that no test sentence (nor any sentence of
its paragraph) is seen in training, even with another question: SQuAD asks about five questions per paragraph, and
an answer-bearing sentence seen in training with its label would leak into a test pair with the same sentence.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import pandas as pd

ENTAILMENT, NOT_ENTAILMENT = 0, 1  # the GLUE label ids of QNLI
LABEL_NAMES = ["entailment", "not_entailment"]


def _words(text: str) -> set[str]:
    return set(re.findall(r"\w+", text.lower()))


def question_key(question: str) -> str:
    """How a QNLI question is matched to a SQuAD question: the text with surrounding and repeated whitespace removed."""
    return " ".join(str(question).split())


def split_sentences(contexts: Iterable[str], nlp: Any) -> dict[str, list[tuple[int, int]]]:
    """Character spans of each distinct context's sentences (spaCy's sentence boundaries), stripped of whitespace."""
    unique = list(dict.fromkeys(contexts))
    spans: dict[str, list[tuple[int, int]]] = {}
    for context, doc in zip(unique, nlp.pipe(unique, batch_size=64), strict=True):
        out = []
        for sent in doc.sents:
            start, end = sent.start_char, sent.end_char
            while start < end and context[start].isspace():
                start += 1
            while end > start and context[end - 1].isspace():
                end -= 1
            if end > start:
                out.append((start, end))
        spans[context] = out
    return spans


def _draw_seed(seed: int, question_id: str) -> np.random.Generator:
    # one generator per question, so that a pair does not depend on which other questions are in the frame
    return np.random.default_rng([seed, zlib.crc32(str(question_id).encode("utf-8"))])


def squad_to_qnli_pairs(
    squad: pd.DataFrame,
    *,
    sentence_spans: dict[str, list[tuple[int, int]]],
    stop_words: Iterable[str],
    seed: int,
) -> pd.DataFrame:
    """One entailment and one not_entailment pair per SQuAD question (columns ``id, text_a, text_b, label, title``).

    ``squad``: SQuAD records (``id, title, context, question, answers``); ``sentence_spans``: from
    :func:`split_sentences` over their contexts. The entailment sentence holds the first answer's span; a question
    whose answer crosses a sentence boundary gives no pair. The not_entailment sentence is drawn among the sentences
    that hold none of the answer texts, with probability proportional to 1 + the number of the question's content
    words (``stop_words`` excluded) it holds; a paragraph without such a sentence gives only the entailment pair.
    Pair ids are ``<question id>-e`` and ``<question id>-n``."""
    stop = set(stop_words)
    rows: list[dict[str, Any]] = []
    for rec in squad.itertuples(index=False):
        context = rec.context
        spans = sentence_spans[context]
        texts = [str(t) for t in rec.answers["text"]]
        a_start = int(rec.answers["answer_start"][0])
        a_end = a_start + len(texts[0])
        holding = [i for i, (s, e) in enumerate(spans) if s <= a_start and a_end <= e]
        if not holding:
            continue
        answer_sentence = context[slice(*spans[holding[0]])]
        rows.append(
            {"id": f"{rec.id}-e", "text_a": rec.question, "text_b": answer_sentence, "label": ENTAILMENT,
             "title": rec.title}
        )
        others = [context[s:e] for s, e in spans if not any(t and t in context[s:e] for t in texts)]
        if not others:
            continue
        q_words = _words(rec.question) - stop
        weight = np.array([1.0 + len(q_words & _words(s)) for s in others])
        choice = int(_draw_seed(seed, rec.id).choice(len(others), p=weight / weight.sum()))
        rows.append(
            {"id": f"{rec.id}-n", "text_a": rec.question, "text_b": others[choice], "label": NOT_ENTAILMENT,
             "title": rec.title}
        )
    return pd.DataFrame(rows, columns=["id", "text_a", "text_b", "label", "title"])


def question_titles(squad: pd.DataFrame) -> dict[str, str]:
    """Each SQuAD question's article title, by :func:`question_key` (the first article where a text repeats)."""
    titles: dict[str, str] = {}
    for question, title in zip(squad["question"], squad["title"], strict=True):
        titles.setdefault(question_key(question), str(title))
    return titles


def split_qnli_by_article(
    qnli: pd.DataFrame,
    squad: pd.DataFrame,
    *,
    validation_fraction: float,
    seed: int,
    source: str = "the QNLI split",
) -> tuple[pd.DataFrame, pd.DataFrame, set[str]]:
    """(train, validation, validation titles): QNLI pairs split by the SQuAD article of their question.

    Titles are shuffled with ``seed`` and assigned to validation until it holds at least ``validation_fraction`` of
    the titles that QNLI's questions come from (rounded up), as :func:`spurious.core.data.squad.split_by_title`. Every
    QNLI question must be a question of ``squad``: a missing one raises ValueError naming it."""
    if not 0.0 < validation_fraction < 1.0:
        raise ValueError(f"validation_fraction must lie in (0, 1), got {validation_fraction}")
    titles = question_titles(squad)
    keys = qnli["text_a"].map(question_key)
    missing = keys[~keys.isin(titles)]
    if len(missing):
        raise ValueError(
            f"{source}: {len(missing)} of {len(qnli)} records have a question that is not in the SQuAD split given as "
            f"derive.squad (first: record {qnli.loc[missing.index[0], 'id']!r}, {missing.iloc[0]!r}); point "
            "derive.squad at the SQuAD split the QNLI split was built from (SQuAD v1.1 dev for QNLI dev), or use "
            "derive.by: text_a"
        )
    title_of = keys.map(titles)
    used = np.array(sorted(title_of.unique()))
    if len(used) < 2:
        raise ValueError(
            f"{source}: its questions come from {len(used)} SQuAD article(s); a split by article needs two"
        )
    order = np.random.default_rng(seed).permutation(len(used))
    n_valid = max(1, int(np.ceil(validation_fraction * len(used))))
    valid_titles = set(used[order[:n_valid]])
    is_valid = title_of.isin(valid_titles)
    return qnli[~is_valid].reset_index(drop=True), qnli[is_valid].reset_index(drop=True), valid_titles


def extra_training_pairs(
    squad: pd.DataFrame,
    qnli: pd.DataFrame,
    excluded_titles: set[str],
    *,
    nlp: Any,
    stop_words: Iterable[str],
    seed: int,
    progress: Callable[[str], None] | None = None,
) -> pd.DataFrame:
    """QNLI-style pairs from the SQuAD questions that are not QNLI questions, outside ``excluded_titles`` (the test
    articles). Ids are prefixed ``squad-`` so that they never collide with QNLI's."""
    known = set(qnli["text_a"].map(question_key))
    keep = ~squad["question"].map(question_key).isin(known) & ~squad["title"].astype(str).isin(excluded_titles)
    pool = squad[keep.to_numpy()]
    if progress:
        progress(f"splitting {pool['context'].nunique()} paragraphs into sentences for {len(pool)} SQuAD questions")
    spans = split_sentences(pool["context"], nlp)
    pairs = squad_to_qnli_pairs(pool, sentence_spans=spans, stop_words=stop_words, seed=seed)
    pairs["id"] = "squad-" + pairs["id"]
    return pairs


def derive_by_article(
    qnli: pd.DataFrame,
    squad: pd.DataFrame,
    *,
    validation_fraction: float,
    seed: int,
    squad_pairs: bool,
    source: str = "the QNLI split",
    log: Callable[[str], None] | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, Any]]:
    """(train, validation, how): :func:`split_qnli_by_article`, and with ``squad_pairs`` the training articles'
    :func:`extra_training_pairs` appended to train. ``how`` records the derivation for the parquet metadata."""
    emit = log or (lambda message: None)
    if squad_pairs and list(qnli.attrs.get("label_names", [])) != LABEL_NAMES:
        raise ValueError(
            f"{source}: labels {qnli.attrs.get('label_names')} are not QNLI's {LABEL_NAMES}; squad_pairs builds QNLI "
            "pairs, so the split must be QNLI with GLUE's label ids"
        )
    train, validation, valid_titles = split_qnli_by_article(
        qnli, squad, validation_fraction=validation_fraction, seed=seed, source=source
    )
    emit(f"by SQuAD article: {len(valid_titles)} articles and {len(validation)} pairs go to validation")
    how: dict[str, Any] = {"by": "squad_article", "validation_titles": sorted(valid_titles)}
    if squad_pairs:
        from spurious.core.resources import english_stopwords, load_spacy

        nlp = load_spacy(exclude=("lemmatizer", "attribute_ruler", "tagger", "ner"))
        extra = extra_training_pairs(
            squad, qnli, valid_titles, nlp=nlp, stop_words=english_stopwords(), seed=seed, progress=emit
        )
        counts = extra["label"].value_counts().sort_index().to_dict()
        emit(
            f"added {len(extra)} QNLI-style pairs from SQuAD questions of the training articles, label counts {counts}"
        )
        train = pd.concat([train, extra[["id", "text_a", "text_b", "label"]]], ignore_index=True)
        how["squad_pairs"] = len(extra)
    train.attrs.update(qnli.attrs)
    validation.attrs.update(qnli.attrs)
    return train, validation, how
