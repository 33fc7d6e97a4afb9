"""QNLI-style pairs from SQuAD and the QNLI split by SQuAD article (spurious.core.data.qnli), on hand-built records."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from spurious.core.data import qnli
from tests.conftest import SHARED

QNLI_DEV = SHARED / "data" / "qnli" / "validation" / "0000.parquet"


@pytest.fixture(scope="module")
def spacy_nlp():
    from spurious.core.resources import load_spacy

    return load_spacy(exclude=("lemmatizer", "attribute_ruler", "tagger", "ner"))

CONTEXT = "Paris is the capital of France. The river Seine flows through Paris. Cheese is popular."
# sentence spans written by hand: [0, 31), [32, 68), [69, 87)
SPANS = {CONTEXT: [(0, 31), (32, 68), (69, 87)]}


def squad_record(qid: str, question: str, answer: str, title: str = "France", context: str = CONTEXT) -> dict:
    return {
        "id": qid,
        "title": title,
        "context": context,
        "question": question,
        "answers": {"text": [answer], "answer_start": [context.index(answer)]},
    }


def test_entailment_sentence_holds_the_answer_and_the_other_holds_none():
    squad = pd.DataFrame([squad_record("q1", "What flows through Paris?", "The river Seine")])
    pairs = qnli.squad_to_qnli_pairs(squad, sentence_spans=SPANS, stop_words={"what", "through"}, seed=0)
    assert pairs["id"].tolist() == ["q1-e", "q1-n"]
    assert pairs.loc[0, "text_b"] == "The river Seine flows through Paris."
    assert pairs.loc[0, "label"] == qnli.ENTAILMENT
    assert pairs.loc[1, "text_b"] in {"Paris is the capital of France.", "Cheese is popular."}
    assert pairs.loc[1, "label"] == qnli.NOT_ENTAILMENT
    assert set(pairs["text_a"]) == {"What flows through Paris?"}


def test_not_entailment_draw_is_proportional_to_one_plus_overlap():
    # the answer "France" sits in sentence 0, so the candidates are sentence 1 (it shares "paris" and "seine": weight
    # 3) and sentence 2 ("cheese": weight 2); expected shares 3/5 and 2/5
    question = "Which country has Paris, the Seine and cheese?"
    squad = pd.DataFrame([squad_record(f"q{i}", question, "France") for i in range(4000)])
    pairs = qnli.squad_to_qnli_pairs(squad, sentence_spans=SPANS, stop_words={"which", "has", "the", "and"}, seed=3)
    negatives = pairs[pairs["label"] == qnli.NOT_ENTAILMENT]["text_b"]
    share = float(np.mean(negatives == "The river Seine flows through Paris."))
    assert len(negatives) == 4000
    assert abs(share - 0.6) < 0.03  # binomial standard error 0.0077
    again = qnli.squad_to_qnli_pairs(squad, sentence_spans=SPANS, stop_words={"which", "has", "the", "and"}, seed=3)
    pd.testing.assert_frame_equal(pairs, again)


def test_answer_across_a_sentence_boundary_gives_no_pair_and_no_candidate_gives_one():
    across = squad_record("q1", "What?", "France. The river")
    only = squad_record("q2", "Capital?", "Paris", context="Paris is it.")
    pairs = qnli.squad_to_qnli_pairs(
        pd.DataFrame([across, only]), sentence_spans={**SPANS, "Paris is it.": [(0, 12)]}, stop_words=set(), seed=0
    )
    assert pairs["id"].tolist() == ["q2-e"]


def test_split_by_article_keeps_articles_whole_and_names_a_missing_question():
    titles = [f"t{i}" for i in range(8)]
    squad = pd.DataFrame(
        [squad_record(f"s{t}{k}", f"Question {k} about {t}?", "Paris", title=t) for t in titles for k in range(3)]
    )
    frame = pd.DataFrame(
        {
            "id": [str(i) for i in range(24)],
            "text_a": [f"Question  {k} about {t}? " for t in titles for k in range(3)],  # spacing differs: matched
            "text_b": ["x"] * 24,
            "label": [0, 1] * 12,
        }
    )
    train, valid, valid_titles = qnli.split_qnli_by_article(frame, squad, validation_fraction=0.25, seed=1)
    assert len(valid_titles) == 2 and len(valid) == 6 and len(train) == 18
    assert not {t.split()[-1][:-1] for t in train["text_a"]} & valid_titles
    frame.loc[5, "text_a"] = "Not a SQuAD question?"
    with pytest.raises(ValueError, match="record '5'.*Not a SQuAD question"):
        qnli.split_qnli_by_article(frame, squad, validation_fraction=0.25, seed=1)


def test_extra_pairs_leave_out_qnli_questions_and_validation_articles(spacy_nlp):
    squad = pd.DataFrame(
        [
            squad_record("a", "What flows through Paris?", "The river Seine", title="France"),
            squad_record("b", "What is the capital?", "Paris", title="France"),
            squad_record("c", "What is popular?", "Cheese", title="Food"),
        ]
    )
    frame = pd.DataFrame({"id": ["1"], "text_a": ["What is the capital?"], "text_b": ["x"], "label": [0]})
    extra = qnli.extra_training_pairs(squad, frame, {"Food"}, nlp=spacy_nlp, stop_words=set(), seed=0)
    assert extra["id"].tolist() == ["squad-a-e", "squad-a-n"]
    assert extra.loc[0, "text_b"] == "The river Seine flows through Paris."


def test_mirror_qnli_dev_splits_by_article_and_the_squad_pairs_follow_qnli_rules(squad_dev):
    from spurious.core.data.classification import load_hf_parquet

    frame = load_hf_parquet(QNLI_DEV)
    frame.attrs["label_names"] = qnli.LABEL_NAMES
    train, valid, how = qnli.derive_by_article(frame, squad_dev, validation_fraction=0.25, seed=0, squad_pairs=True)
    # every QNLI dev question is a SQuAD v1.1 dev question (48 articles; 12 go to validation)
    assert len(how["validation_titles"]) == 12
    n_qnli_train = len(frame) - len(valid)
    assert n_qnli_train + len(valid) == 5463
    extra = train.iloc[n_qnli_train:]
    assert how["squad_pairs"] == len(extra) > 8000 and extra["id"].str.startswith("squad-").all()
    titles = qnli.question_titles(squad_dev)
    assert not set(valid["text_a"].map(qnli.question_key).map(titles)) & set(
        train["text_a"].map(qnli.question_key).map(titles)
    )
    answers = dict(zip(squad_dev["id"], squad_dev["answers"], strict=True))
    for pair in extra.sample(500, random_state=0).itertuples():
        texts = answers[pair.id.removeprefix("squad-")[:-2]]["text"]
        holds = [t in pair.text_b for t in texts]
        assert (pair.label == qnli.ENTAILMENT and holds[0]) or (pair.label == qnli.NOT_ENTAILMENT and not any(holds))
