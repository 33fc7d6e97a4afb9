"""Data loading, validation, normalisation and split derivation on the real mirror files."""

from __future__ import annotations

import gzip
import json

import pandas as pd
import pytest

from spurious.core.data import squad
from tests.conftest import NQ_DEV, SQUAD_DEV


def test_squad_dev_loads_whole(squad_dev):
    # SOURCES.md: 48 articles / 2,067 paragraphs / 10,570 questions.
    assert len(squad_dev) == 10570
    assert squad_dev["title"].nunique() == 48
    assert squad_dev["context"].nunique() == 2067
    first = squad_dev.iloc[0]
    assert first["question"] == "Which NFL team represented the AFC at Super Bowl 50?"
    assert first["answers"]["text"][0] == "Denver Broncos"
    assert squad.find_invalid_records(squad_dev).n_invalid == 0


def test_nq_flat_records_load():
    nq = squad.load_flat_json(NQ_DEV)
    # SOURCES.md: 2,356 questions, every answer_start points at its answer text.
    assert len(nq) == 2356
    assert nq["id"].is_unique
    assert squad.find_invalid_records(nq).n_invalid == 0


def test_parquet_round_trip_keeps_schema(tmp_path, squad_dev):
    part = squad_dev.head(50)
    path = tmp_path / "x.parquet"
    squad.write_qa_parquet(part, path, metadata={"k": 1})
    back = squad.read_qa_parquet(path)
    assert list(back.columns) == list(squad.QA_COLUMNS)
    assert back["answers"].tolist() == part["answers"].tolist()
    from spurious.core.io import read_parquet_metadata

    assert read_parquet_metadata(path) == {"k": 1}


def _corrupt(df: pd.DataFrame) -> pd.DataFrame:
    df = df.copy()
    bad = dict(df.at[1, "answers"])
    bad["answer_start"] = [s + 3 for s in bad["answer_start"]]
    df.at[1, "answers"] = bad
    df.at[4, "question"] = "  "
    return df


def test_invalid_records_fail_naming_file_count_and_ids(squad_dev):
    df = _corrupt(squad_dev.head(10))
    with pytest.raises(squad.DataValidationError) as err:
        squad.validate_records(df, source="dev.json", on_invalid="error")
    message = str(err.value)
    assert "dev.json" in message and "2 of 10" in message
    assert df.at[1, "id"] in message and df.at[4, "id"] in message
    assert "on_invalid: drop" in message


def test_invalid_records_dropped_and_counted(squad_dev):
    df = _corrupt(squad_dev.head(10))
    kept, summary = squad.validate_records(df, source="dev.json", on_invalid="drop")
    assert len(kept) == 8
    assert summary["n_dropped"] == 2
    assert set(summary["dropped_ids"]) == {df.at[1, "id"], df.at[4, "id"]}


def test_split_by_title_is_disjoint_seeded_and_sized(squad_dev):
    train, valid = squad.split_by_title(squad_dev, validation_fraction=0.34, seed=0)
    assert set(train["title"]).isdisjoint(valid["title"])
    assert len(train) + len(valid) == len(squad_dev)
    # ceil(0.34 * 48) = 17 validation articles.
    assert valid["title"].nunique() == 17
    # The demo needs at least 3,500 validation questions (issue: both segments above 2 x sample size).
    assert len(valid) >= 3500
    again, _ = squad.split_by_title(squad_dev, validation_fraction=0.34, seed=0)
    assert again["id"].tolist() == train["id"].tolist()
    other, _ = squad.split_by_title(squad_dev, validation_fraction=0.34, seed=1)
    assert set(other["title"]) != set(train["title"])


def test_mirror_takes_precedence_and_missing_source_is_explained(tmp_path, monkeypatch):
    source = {"format": "squad_json", "mirror_path": "squad_v1.1/dev-v1.1.json.gz", "path": "/nonexistent.json"}
    df = squad.load_source(source, mirror=SQUAD_DEV.parents[1])
    assert len(df) == 10570 and df.attrs["source"] == str(SQUAD_DEV)
    monkeypatch.delenv(squad.MIRROR_ENV, raising=False)
    with pytest.raises(FileNotFoundError, match="nonexistent"):
        squad.load_source(source)
    with pytest.raises(FileNotFoundError, match="no hub fallback"):
        squad.load_source({"format": "squad_json", "mirror_path": "nope.json"})


def test_plain_json_and_wrong_format_errors(tmp_path, squad_dev):
    with gzip.open(SQUAD_DEV, "rt") as fh:
        payload = json.load(fh)
    payload["data"] = payload["data"][:1]
    plain = tmp_path / "one.json"
    plain.write_text(json.dumps(payload))
    assert len(squad.load_squad_json(plain)) == sum(len(p["qas"]) for p in payload["data"][0]["paragraphs"])
    flat = tmp_path / "flat.json"
    flat.write_text(json.dumps([{"id": "a", "context": "x"}]))
    with pytest.raises(squad.DataValidationError, match="record 0"):
        squad.load_flat_json(flat)
    with pytest.raises(squad.DataValidationError, match="not an official SQuAD"):
        squad.load_squad_json(flat)


def test_mrqa_records_convert_to_the_squad_layout():
    from spurious.core.data.squad import find_invalid_records, mrqa_to_squad

    context = "Paris is the capital of France. It lies on the Seine."
    rows = pd.DataFrame(
        [
            {
                "subset": "NaturalQuestionsShort",
                "qid": "q1",
                "context": context,
                "question": "capital of france",
                "detected_answers": {
                    "text": ["Paris", "Paris"],
                    "char_spans": [{"start": [0], "end": [4]}, {"start": [0, 0], "end": [4, 4]}],
                },
            },
            {
                "subset": "TriviaQA-web",
                "qid": "q2",
                "context": context,
                "question": "which river",
                # the columnar layout some pyarrow versions give
                "detected_answers": {"text": ["the Seine"], "char_spans": {"start": [[43]], "end": [[51]]}},
            },
        ]
    )
    nq = mrqa_to_squad(rows, "NaturalQuestionsShort")
    assert nq["id"].tolist() == ["q1"]
    assert list(nq.loc[0, "answers"]["text"]) == ["Paris", "Paris"]
    assert list(nq.loc[0, "answers"]["answer_start"]) == [0, 0]
    trivia = mrqa_to_squad(rows, "TriviaQA-web")
    assert list(trivia.loc[0, "answers"]["answer_start"]) == [43] and context[43:52] == "the Seine"
    assert find_invalid_records(trivia).n_invalid == 0
    with pytest.raises(ValueError, match="no records of subset 'SearchQA'"):
        mrqa_to_squad(rows, "SearchQA")
