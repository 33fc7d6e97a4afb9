"""SQuAD v1.1 exact match and F1, with the semantics of the official ``evaluate-v1.1.py``.

Our own implementation (the ``evaluate`` package would fetch its metric script from the hub, which the workflow
cannot rely on). The behaviour mirrors the official script line by line:

* ``normalize_answer``: lower-case, drop every ``string.punctuation`` character, replace the whole words
  ``a``/``an``/``the`` by a space, collapse whitespace.
* exact match: normalised strings are equal; F1: token-level over the normalised whitespace tokens, using the
  multiset (``Counter``) intersection, 0 when no token is shared (so an empty prediction or an empty normalised gold
  gives F1 0, while an empty prediction against a gold that normalises to ``""`` is an exact match).
* Each score is the maximum over the gold answers (EM and F1 maximised independently).

Scale convention of the project (``docs/CONTRACTS.md``): per-example EM is 0 or 100 and F1 lies in [0, 100], so
plain means are the official corpus-level percentages.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

__all__ = [
    "normalize_answer",
    "exact_match",
    "f1_score",
    "score_predictions",
    "evaluate",
    "PREDICTION_COLUMNS",
]

PREDICTION_COLUMNS = ("id", "prediction_text", "em", "f1")

_PUNCTUATION = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize_answer(s: str) -> str:
    """Normalise an answer string exactly as the official SQuAD v1.1 script does.

    The order matters and is the official one: lower-case, remove punctuation, remove articles, fix whitespace
    (removing punctuation first turns e.g. ``"the-end"`` into ``"theend"``, which keeps its article-like prefix).
    """
    text = s.lower()
    text = "".join(ch for ch in text if ch not in _PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def _check_golds(golds: Sequence[str] | Iterable[str]) -> list[str]:
    if isinstance(golds, str):
        # A bare string would otherwise be iterated character by character.
        golds = [golds]
    golds = [str(g) for g in golds]
    if not golds:
        raise ValueError(
            "at least one gold answer is needed to score a prediction (the official script has no rule for an "
            "unanswerable SQuAD v1.1 question)"
        )
    return golds


# The single-pair scores are kept on the official 0..1 scale so that corpus totals can be accumulated with the
# official arithmetic (bit-identical); the public per-example values are scaled to 0..100.
def _em_single(prediction_norm: str, gold_norm: str) -> float:
    return 1.0 if prediction_norm == gold_norm else 0.0


def _f1_single(prediction_tokens: list[str], gold_tokens: list[str]) -> float:
    common = Counter(prediction_tokens) & Counter(gold_tokens)
    num_same = sum(common.values())
    if num_same == 0:
        return 0.0
    precision = 1.0 * num_same / len(prediction_tokens)
    recall = 1.0 * num_same / len(gold_tokens)
    return (2 * precision * recall) / (precision + recall)


def exact_match(prediction: str, golds: Sequence[str] | str) -> float:
    """Exact match (0 or 100) of ``prediction`` against the best-matching gold answer."""
    pred = normalize_answer(prediction)
    return 100.0 * max(_em_single(pred, normalize_answer(g)) for g in _check_golds(golds))


def f1_score(prediction: str, golds: Sequence[str] | str) -> float:
    """Token-level F1 (0..100) of ``prediction`` against the best-matching gold answer."""
    pred_tokens = normalize_answer(prediction).split()
    return 100.0 * max(_f1_single(pred_tokens, normalize_answer(g).split()) for g in _check_golds(golds))


def _score_one(prediction: str, golds: list[str]) -> tuple[float, float]:
    """EM and F1 on the 0..1 scale, sharing the normalisation of the prediction and the golds."""
    pred_norm = normalize_answer(prediction)
    pred_tokens = pred_norm.split()
    em = f1 = 0.0
    for g in golds:
        g_norm = normalize_answer(g)
        em = max(em, _em_single(pred_norm, g_norm))
        f1 = max(f1, _f1_single(pred_tokens, g_norm.split()))
    return em, f1


def _score_frame(
    qa_frame: pd.DataFrame, predictions: Mapping[str, str], allow_missing: bool
) -> tuple[list[str], list[str], list[float], list[float]]:
    """Ids, prediction texts and 0..1 EM/F1 per question of ``qa_frame`` (shared by the two public entry points)."""
    ids = [str(i) for i in qa_frame["id"]]
    missing = [i for i in ids if i not in predictions]
    if missing and not allow_missing:
        first = ", ".join(missing[:5])
        raise ValueError(
            f"{len(missing)} of {len(ids)} questions have no prediction (first ids: {first}); pass "
            "allow_missing=True to score them as 0 like the official script"
        )
    texts: list[str] = []
    ems: list[float] = []
    f1s: list[float] = []
    for qid, answers in zip(ids, qa_frame["answers"], strict=True):
        if qid not in predictions:
            texts.append("")
            ems.append(0.0)
            f1s.append(0.0)
            continue
        prediction = str(predictions[qid])
        try:
            golds = _check_golds(answers["text"])
        except ValueError as exc:
            raise ValueError(f"question {qid}: {exc}") from exc
        em, f1 = _score_one(prediction, golds)
        texts.append(prediction)
        ems.append(em)
        f1s.append(f1)
    return ids, texts, ems, f1s


def score_predictions(
    qa_frame: pd.DataFrame, predictions: Mapping[str, str], *, allow_missing: bool = False
) -> pd.DataFrame:
    """Per-example scores: a *predictions frame* ``[id, prediction_text, em, f1]`` in the order of ``qa_frame``.

    Gold answers are ``qa_frame["answers"][i]["text"]`` (any sequence; numpy arrays after a parquet round trip).
    Predictions for ids that are not in ``qa_frame`` are ignored, as the official script does. A question without a
    prediction is an error (a silently lower score is the worse failure), unless ``allow_missing``: then, like the
    official script ("Unanswered question ... will receive score 0"), it scores EM = F1 = 0 with an empty
    ``prediction_text`` (not the score of ``""``, which would be an exact match for a gold that normalises to ``""``).
    """
    ids, texts, ems, f1s = _score_frame(qa_frame, predictions, allow_missing)
    return pd.DataFrame(
        {
            "id": ids,
            "prediction_text": texts,
            "em": 100.0 * np.asarray(ems, dtype=np.float64),
            "f1": 100.0 * np.asarray(f1s, dtype=np.float64),
        },
        columns=list(PREDICTION_COLUMNS),
    )


def evaluate(
    qa_frame: pd.DataFrame, predictions: Mapping[str, str], *, allow_missing: bool = False
) -> dict[str, float | int]:
    """Corpus-level ``{"exact_match", "f1", "n"}`` equal to the totals of the official script.

    ``n`` counts every question of ``qa_frame`` (missing ones included when ``allow_missing``, as the official
    script divides by all questions of the dataset).
    """
    _, _, ems, f1s = _score_frame(qa_frame, predictions, allow_missing)
    n = len(ems)
    if n == 0:
        return {"exact_match": 0.0, "f1": 0.0, "n": 0}
    # Sequential Python-float sums of the 0..1 scores, then 100 * sum / total: the official script's arithmetic.
    em_total = 0.0
    f1_total = 0.0
    for em, f1 in zip(ems, f1s, strict=True):
        em_total += em
        f1_total += f1
    return {"exact_match": 100.0 * em_total / n, "f1": 100.0 * f1_total / n, "n": n}
