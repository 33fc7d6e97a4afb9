"""SQuAD v1.1 EM/F1: hand-checked cases and a check on the real dev set against an independent loop."""

from __future__ import annotations

import gzip
import json
import re
import string
from collections import Counter

import numpy as np
import pandas as pd
import pytest

from spurious.core.data.squad import load_squad_json
from spurious.core.metrics import evaluate, exact_match, f1_score, normalize_answer, score_predictions
from tests.conftest import SQUAD_DEV


def _frame(rows: list[tuple[str, list[str]]]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "id": [r[0] for r in rows],
            "title": "t",
            "context": "c",
            "question": "q",
            "answers": [{"text": r[1], "answer_start": [0] * len(r[1])} for r in rows],
        }
    )


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("The  Cat!", "cat"),  # article, punctuation, case, whitespace
        ("a an the", ""),
        ("theater and anthem", "theater and anthem"),  # articles only as whole words
        ("the-end", "theend"),  # punctuation goes first, so "the" is no longer a whole word
        ("A.B.C.", "abc"),
        ("  Hello,\tWorld.\n", "hello world"),
        ("An apple a day", "apple day"),
    ],
)
def test_normalize_answer(raw: str, expected: str) -> None:
    assert normalize_answer(raw) == expected


def test_exact_match_case_punctuation_articles() -> None:
    assert exact_match("the Eiffel Tower.", ["Eiffel tower"]) == 100.0
    assert exact_match("Eiffel", ["Eiffel tower"]) == 0.0
    assert exact_match("Paris", ["London", "paris!"]) == 100.0  # max over golds
    assert exact_match("Paris", "Paris") == 100.0  # a bare string is one gold, not a list of characters


def test_f1_partial_overlap_by_hand() -> None:
    # pred -> [quick, brown, fox], gold -> [quick, fox, jumps]: 2 common; P = R = 2/3; F1 = 2/3.
    assert f1_score("The quick brown fox", ["quick fox jumps"]) == pytest.approx(200.0 / 3.0)
    # Multiset overlap: pred [x, x, y], gold [x, y, y, z]: common = min(2,1) + min(1,2) = 2;
    # P = 2/3, R = 2/4 = 1/2; F1 = 2 * (1/3) / (7/6) = 4/7.
    assert f1_score("x x y", ["x y y z"]) == pytest.approx(400.0 / 7.0)
    # No common token -> 0.
    assert f1_score("red", ["blue"]) == 0.0


def test_multiple_golds_maximised_independently() -> None:
    golds = ["Denver Broncos", "the Broncos", "Broncos win"]
    # EM via "the Broncos" (normalises to "broncos"); F1 also 100 through that gold.
    assert exact_match("Broncos", golds) == 100.0
    assert f1_score("Broncos", golds) == 100.0
    # "Denver Broncos team": best F1 against "Denver Broncos": P = 2/3, R = 1 -> 0.8.
    assert exact_match("Denver Broncos team", golds) == 0.0
    assert f1_score("Denver Broncos team", golds) == pytest.approx(80.0)


def test_empty_prediction_and_empty_normalised_gold() -> None:
    assert exact_match("", ["Paris"]) == 0.0
    assert f1_score("", ["Paris"]) == 0.0
    # A gold that normalises to "" matches an empty (or article-only) prediction exactly, but F1 has no common
    # token, so it is 0 -- the official script's behaviour.
    assert exact_match("", ["The"]) == 100.0
    assert exact_match("an", ["The"]) == 100.0
    assert f1_score("", ["The"]) == 0.0
    with pytest.raises(ValueError):
        exact_match("x", [])


def test_score_predictions_frame_and_missing() -> None:
    frame = _frame([("q1", ["Paris"]), ("q2", ["the cat sat"]), ("q3", ["The"])])
    preds = {"q1": "paris", "q2": "cat", "q3": "", "extra": "ignored"}
    scores = score_predictions(frame, preds)
    assert list(scores.columns) == ["id", "prediction_text", "em", "f1"]
    assert scores["id"].tolist() == ["q1", "q2", "q3"]
    assert scores["em"].tolist() == [100.0, 0.0, 100.0]
    # q2: pred [cat], gold [cat, sat]: P = 1, R = 1/2 -> F1 = 2/3.
    assert scores["f1"].tolist() == pytest.approx([100.0, 200.0 / 3.0, 0.0])

    with pytest.raises(ValueError, match=r"2 of 3 questions have no prediction \(first ids: q2, q3\)"):
        score_predictions(frame, {"q1": "paris"})
    missing = score_predictions(frame, {"q1": "paris"}, allow_missing=True)
    # Missing questions score 0 like the official script, even q3 whose gold normalises to "".
    assert missing["em"].tolist() == [100.0, 0.0, 0.0]
    assert missing["prediction_text"].tolist() == ["paris", "", ""]


def test_score_predictions_accepts_numpy_answer_arrays() -> None:
    frame = _frame([("q1", ["a"])])
    frame["answers"] = [{"text": np.array(["Rome", "Roma"]), "answer_start": np.array([0, 0])}]
    assert score_predictions(frame, {"q1": "Roma"})["em"].tolist() == [100.0]


def test_evaluate_totals_by_hand() -> None:
    frame = _frame([("q1", ["Paris"]), ("q2", ["the cat sat"]), ("q3", ["dog"]), ("q4", ["x"])])
    preds = {"q1": "Paris", "q2": "cat", "q3": "dog", "q4": "y"}
    result = evaluate(frame, preds)
    # EM: 1 + 0 + 1 + 0 = 2 of 4 -> 50; F1: 1 + 2/3 + 1 + 0 = 8/3 of 4 -> 66.67.
    assert result == {"exact_match": 50.0, "f1": pytest.approx(100.0 * (8.0 / 3.0) / 4.0), "n": 4}
    # Missing predictions count in the denominator with score 0 (official script).
    assert evaluate(frame, {"q1": "Paris"}, allow_missing=True)["exact_match"] == 25.0
    assert evaluate(frame.iloc[:0], {}) == {"exact_match": 0.0, "f1": 0.0, "n": 0}


# --------------------------------------------------------------------------------------------------------------------
# Real SQuAD v1.1 dev, against a straightforward re-implementation of the official script


def _official_normalize(s: str) -> str:
    s = s.lower()
    s = "".join(ch for ch in s if ch not in set(string.punctuation))
    s = re.sub(r"\b(a|an|the)\b", " ", s)
    return " ".join(s.split())


def _official_f1(prediction: str, gold: str) -> float:
    p, g = _official_normalize(prediction).split(), _official_normalize(gold).split()
    same = sum((Counter(p) & Counter(g)).values())
    if same == 0:
        return 0
    precision, recall = 1.0 * same / len(p), 1.0 * same / len(g)
    return (2 * precision * recall) / (precision + recall)


@pytest.fixture(scope="module")
def squad_dev() -> pd.DataFrame:
    if not SQUAD_DEV.exists():
        pytest.skip(f"{SQUAD_DEV} not available")
    return load_squad_json(SQUAD_DEV)


def test_first_gold_scores_100_everywhere(squad_dev: pd.DataFrame) -> None:
    preds = {qid: answers["text"][0] for qid, answers in zip(squad_dev["id"], squad_dev["answers"], strict=True)}
    scores = score_predictions(squad_dev, preds)
    assert len(scores) == 10570
    assert (scores["em"] == 100.0).all()
    assert (scores["f1"] == 100.0).all()
    assert evaluate(squad_dev, preds) == {"exact_match": 100.0, "f1": 100.0, "n": 10570}


def test_second_annotator_matches_independent_loop(squad_dev: pd.DataFrame) -> None:
    # Human-performance style: the second annotator's answer against the *other* gold answers (questions with at
    # least two answers). The expectation reads the raw JSON independently of spurious.core.data.squad and scores it
    # with the official script's arithmetic.
    with gzip.open(SQUAD_DEV, "rt", encoding="utf-8") as fh:
        dataset = json.load(fh)["data"]
    em_total = f1_total = 0.0
    total = 0
    for article in dataset:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                texts = [a["text"] for a in qa["answers"]]
                if len(texts) < 2:
                    continue
                total += 1
                pred, golds = texts[1], texts[:1] + texts[2:]
                em_total += max(float(_official_normalize(pred) == _official_normalize(g)) for g in golds)
                f1_total += max(_official_f1(pred, g) for g in golds)
    expected_em = 100.0 * em_total / total
    expected_f1 = 100.0 * f1_total / total

    keep = [len(a["text"]) >= 2 for a in squad_dev["answers"]]
    frame = squad_dev[keep].reset_index(drop=True)
    preds = {qid: a["text"][1] for qid, a in zip(frame["id"], frame["answers"], strict=True)}
    frame["answers"] = [
        {"text": list(a["text"][:1]) + list(a["text"][2:]), "answer_start": [0] * (len(a["text"]) - 1)}
        for a in frame["answers"]
    ]
    result = evaluate(frame, preds)
    assert result["n"] == total == 10570 - 3  # three dev questions have a single answer
    assert result["exact_match"] == expected_em
    assert result["f1"] == expected_f1
    # Plausible human agreement (the SQuAD paper reports ~80 EM / ~90 F1 for humans).
    assert 75.0 < result["exact_match"] < 90.0
    assert result["exact_match"] < result["f1"] < 95.0
