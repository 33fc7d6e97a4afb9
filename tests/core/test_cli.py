"""Tests for the ``spurious`` command line (real SQuAD v1.1 dev records from ../shared)."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from spurious import cli
from spurious.core.io import read_parquet_metadata
from tests.conftest import SQUAD_DEV

FAST_HEURISTICS = "word-dist,ans-len,cos-sim,sim-word"  # no spaCy: seconds on the whole dev set


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture(scope="module")
def squad_payload() -> dict:
    with gzip.open(SQUAD_DEV, "rt", encoding="utf-8") as fh:
        return json.load(fh)


@pytest.fixture
def small_squad(tmp_path: Path, squad_payload: dict) -> Path:
    """Official-format file with the first 5 questions of the first paragraph (Super Bowl 50)."""
    article = squad_payload["data"][0]
    paragraph = dict(article["paragraphs"][0])
    paragraph["qas"] = paragraph["qas"][:5]
    path = tmp_path / "small.json"
    path.write_text(json.dumps({"version": "1.1", "data": [{"title": article["title"], "paragraphs": [paragraph]}]}))
    return path


# Hand-made predictions for the 5 questions; EM / F1 worked out by hand with the official normalisation
# (lower case, no punctuation, no articles a/an/the, whitespace tokens; max over the gold answers).
HAND_PREDICTIONS = {
    # gold "Denver Broncos" ×3: "the" is dropped → exact match.                                 EM 100, F1 100
    "56be4db0acb8001400a502ec": "the Denver Broncos",
    # gold "Carolina Panthers": 1 shared token, P = 1/1, R = 1/2 → F1 = 2/3.                       EM 0, F1 66.67
    "56be4db0acb8001400a502ed": "Carolina",
    # "levis stadium santa clara" vs "levis stadium": P = 2/4, R = 2/2 → 2/3 (vs "santa clara california": 4/7,
    # vs the long answer: P = 4/4, R = 4/11 → 8/15); max 2/3.                                       EM 0, F1 66.67
    "56be4db0acb8001400a502ee": "Levi's Stadium, Santa Clara",
    # gold "Denver Broncos": P = 1, R = 1/2 → 2/3.                                                  EM 0, F1 66.67
    "56be4db0acb8001400a502ef": "Denver",
    # gold "gold": punctuation and case are normalised away.                                      EM 100, F1 100
    "56be4db0acb8001400a502f0": "Gold!",
}


def test_heuristic_names_agree_with_the_module() -> None:
    from spurious.thinktwice.heuristics import HEURISTICS

    assert tuple(cli.HEURISTIC_NAMES) == tuple(HEURISTICS)


# ----------------------------------------------------------------------------------------------------------------------
# evaluate


def test_evaluate_hand_computed(tmp_path: Path, small_squad: Path, capsys: pytest.CaptureFixture[str]) -> None:
    preds = tmp_path / "preds.json"
    preds.write_text(json.dumps(HAND_PREDICTIONS))
    per_example = tmp_path / "per_example.parquet"
    rc, out, err = run_cli(capsys, "evaluate", small_squad, preds, "--per-example", per_example)
    assert rc == 0, err
    lines = out.strip().splitlines()
    assert len(lines) == 1
    scores = json.loads(lines[0])
    assert list(scores) == ["exact_match", "f1"]  # the official script's output
    assert scores["exact_match"] == pytest.approx(40.0, abs=1e-9)  # (100 + 0 + 0 + 0 + 100) / 5
    assert scores["f1"] == pytest.approx(80.0, abs=1e-9)  # (100 + 3 × 200/3 + 100) / 5
    frame = pd.read_parquet(per_example)
    assert list(frame.columns) == ["id", "prediction_text", "em", "f1"]
    assert frame["em"].tolist() == [100.0, 0.0, 0.0, 0.0, 100.0]
    np.testing.assert_allclose(frame["f1"], [100.0, 200 / 3, 200 / 3, 200 / 3, 100.0])
    assert read_parquet_metadata(per_example)["predictions"] == str(preds)


def test_evaluate_flat_records_and_gzip(
    tmp_path: Path, squad_payload: dict, capsys: pytest.CaptureFixture[str]
) -> None:
    paragraph = squad_payload["data"][0]["paragraphs"][0]
    records = [
        {
            "id": q["id"],
            "context": paragraph["context"],
            "question": q["question"],
            "answers": {
                "text": [a["text"] for a in q["answers"]],
                "answer_start": [a["answer_start"] for a in q["answers"]],
            },
        }
        for q in paragraph["qas"][:5]
    ]
    data = tmp_path / "flat.json.gz"
    with gzip.open(data, "wt", encoding="utf-8") as fh:
        json.dump(records, fh)
    preds = tmp_path / "preds.json"
    preds.write_text(json.dumps(HAND_PREDICTIONS))
    rc, out, err = run_cli(capsys, "evaluate", data, preds)
    assert rc == 0, err
    assert json.loads(out) == pytest.approx({"exact_match": 40.0, "f1": 80.0})


def test_evaluate_missing_predictions(tmp_path: Path, small_squad: Path, capsys: pytest.CaptureFixture[str]) -> None:
    preds = tmp_path / "partial.json"
    partial = dict(HAND_PREDICTIONS)
    del partial["56be4db0acb8001400a502f0"]
    partial["not-a-question"] = "ignored"
    preds.write_text(json.dumps(partial))
    rc, out, err = run_cli(capsys, "evaluate", small_squad, preds)
    assert rc == 2 and out == ""
    assert str(preds) in err and "56be4db0acb8001400a502f0" in err and "--allow-missing" in err
    assert "Traceback" not in err
    rc, out, err = run_cli(capsys, "evaluate", small_squad, preds, "--allow-missing")
    assert rc == 0
    # one summary line for the missing answers, one for the id that is not a question (issue 14)
    assert "1 of 5 questions have no prediction and score 0 (first ids: 56be4db0acb8001400a502f0)" in err
    assert f"1 of 5 predictions in {preds} have ids that are not in the data file and are ignored" in err
    assert "not-a-question" in err and len(err.strip().splitlines()) == 2
    # the official script divides by all 5 questions: EM 100/5, F1 (100 + 3 × 200/3) / 5
    assert json.loads(out) == pytest.approx({"exact_match": 20.0, "f1": 60.0})


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["evaluate", "{tmp}/nope.json", "{preds}"], ["{tmp}/nope.json", "does not exist"]),
        (["evaluate", "{data}", "{tmp}/nope.json"], ["predictions file", "{tmp}/nope.json", "does not exist"]),
        (["evaluate", "{data}", "{list_preds}"], ["{list_preds}", "{{question id: answer text}}"]),
        (["evaluate", "{data}", "{not_json}"], ["{not_json}", "not a readable JSON file"]),
        (["evaluate", "{bad_data}", "{preds}"], ["{bad_data}", "1 of 5 records are invalid", "--on-invalid drop"]),
        (["bias", "{data}", "{preds}", "--heuristics", "word-dist,bogus"], ["bogus", "ans-len", "--heuristics"]),
        (
            ["bias", "{data}", "{preds}", "--heuristics", "ans-len"],
            ["{data}", "5 rows cannot give two segments of sample_size 800", "--sample-size", "--allow-too-few-rows"],
        ),
        (["annotate", "{data}", "{tmp}/o.parquet", "--heuristics", "nope"], ["unknown heuristic", "nope"]),
        (
            ["annotate", "{data}", "{tmp}/o.parquet", "--heuristics", "word-dist", "--variant", "x"],
            ["HEURISTIC=VARIANT"],
        ),
        (
            ["bias", "{data}", "{preds}", "--heuristics-file", "{tmp}/h.parquet"],
            ["{tmp}/h.parquet", "spurious annotate"],
        ),
        (["report", "{tmp}/r.json", "--out-dir", "{tmp}/rep"], ["{tmp}/r.json", "does not exist"]),
    ],
)
def test_user_errors_exit_2(
    tmp_path: Path, small_squad: Path, capsys: pytest.CaptureFixture[str], argv: list[str], expected: list[str]
) -> None:
    preds = tmp_path / "preds.json"
    preds.write_text(json.dumps(HAND_PREDICTIONS))
    list_preds = tmp_path / "list.json"
    list_preds.write_text(json.dumps(list(HAND_PREDICTIONS.values())))
    not_json = tmp_path / "broken.json"
    not_json.write_text("{oops")
    payload = json.loads(small_squad.read_text())
    payload["data"][0]["paragraphs"][0]["qas"][1]["answers"][0]["answer_start"] += 1
    bad_data = tmp_path / "bad.json"
    bad_data.write_text(json.dumps(payload))
    names = {
        "tmp": tmp_path,
        "preds": preds,
        "data": small_squad,
        "list_preds": list_preds,
        "not_json": not_json,
        "bad_data": bad_data,
    }
    rc, out, err = run_cli(capsys, *(a.format(**names) for a in argv))
    assert rc == 2
    assert err.startswith(f"spurious {argv[0]}: error: ")
    assert "Traceback" not in err
    for text in expected:
        assert text.format(**names) in err


def test_on_invalid_drop(tmp_path: Path, small_squad: Path, capsys: pytest.CaptureFixture[str]) -> None:
    payload = json.loads(small_squad.read_text())
    payload["data"][0]["paragraphs"][0]["qas"][1]["answers"][0]["answer_start"] += 1  # "Carolina" question
    bad_data = tmp_path / "bad.json"
    bad_data.write_text(json.dumps(payload))
    preds = tmp_path / "preds.json"
    preds.write_text(json.dumps(HAND_PREDICTIONS))
    rc, out, err = run_cli(capsys, "evaluate", bad_data, preds, "--on-invalid", "drop")
    assert rc == 0, err
    assert json.loads(out) == pytest.approx({"exact_match": 50.0, "f1": (200 + 400 / 3) / 4})


def test_console_script_exit_code(tmp_path: Path) -> None:
    """The installed entry point (``python -m spurious.cli`` is the same main) returns 2 without a traceback."""
    proc = subprocess.run(
        [sys.executable, "-m", "spurious.cli", "evaluate", str(tmp_path / "x.json"), str(tmp_path / "y.json")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2
    assert "does not exist" in proc.stderr and "Traceback" not in proc.stderr
    proc = subprocess.run([sys.executable, "-m", "spurious.cli", "bogus"], capture_output=True, text=True, check=False)
    assert proc.returncode == 2  # argparse usage errors exit 2 as well


# ----------------------------------------------------------------------------------------------------------------------
# annotate


def test_annotate_all_heuristics(tmp_path: Path, squad_payload: dict, capsys: pytest.CaptureFixture[str]) -> None:
    from spurious.core.data.squad import load_squad_json
    from spurious.thinktwice.heuristics import compute_heuristics

    article = squad_payload["data"][1]
    subset = {"version": "1.1", "data": [{"title": article["title"], "paragraphs": article["paragraphs"][:3]}]}
    data = tmp_path / "subset.json"
    data.write_text(json.dumps(subset))
    out_path = tmp_path / "h.parquet"
    rc, out, err = run_cli(capsys, "annotate", data, out_path)
    assert rc == 0, err
    values = pd.read_parquet(out_path)
    assert list(values.columns) == ["id", *cli.HEURISTIC_NAMES]
    frame = load_squad_json(data)
    assert values["id"].tolist() == frame["id"].tolist()
    pd.testing.assert_frame_equal(values, compute_heuristics(frame))
    meta = read_parquet_metadata(out_path)
    assert meta["heuristics"] == list(cli.HEURISTIC_NAMES) and meta["compat"] is None
    assert meta["tfidf_reference"] == "self"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["h.parquet", "subset.json"]

    # --compat isbiased and a TF-IDF reference file are passed through
    rc, _, err = run_cli(
        capsys,
        "annotate",
        data,
        out_path,
        "--heuristics",
        "cos-sim,word-dist",
        "--compat",
        "isbiased",
        "--tfidf-reference",
        SQUAD_DEV,
    )
    assert rc == 0, err
    values = pd.read_parquet(out_path)
    assert list(values.columns) == ["id", "cos-sim", "word-dist"]
    dev = load_squad_json(SQUAD_DEV)
    expected = compute_heuristics(
        frame, ["cos-sim", "word-dist"], compat="isbiased", tfidf_contexts=dev["context"].tolist()
    )
    pd.testing.assert_frame_equal(values, expected)
    assert read_parquet_metadata(out_path)["compat"] == "isbiased"


# ----------------------------------------------------------------------------------------------------------------------
# bias, end to end on the whole SQuAD dev set


@pytest.fixture(scope="module")
def human_files(tmp_path_factory: pytest.TempPathFactory, squad_payload: dict) -> tuple[Path, Path, int]:
    """SQuAD dev questions with ≥3 answers as flat records whose gold answers are annotators 1 and 3; the
    predictions are annotator 2's answers (a "human model", as the paper's Human reference)."""
    records, predictions = [], {}
    for article in squad_payload["data"]:
        for paragraph in article["paragraphs"]:
            for q in paragraph["qas"]:
                answers = q["answers"]
                if len(answers) < 3:
                    continue
                gold = [answers[0], answers[2]]
                records.append(
                    {
                        "id": q["id"],
                        "title": article["title"],
                        "context": paragraph["context"],
                        "question": q["question"],
                        "answers": {
                            "text": [a["text"] for a in gold],
                            "answer_start": [a["answer_start"] for a in gold],
                        },
                    }
                )
                predictions[q["id"]] = answers[1]["text"]
    root = tmp_path_factory.mktemp("human")
    data, preds = root / "squad_dev_human.json", root / "annotator2.json"
    data.write_text(json.dumps(records))
    preds.write_text(json.dumps(predictions))
    return data, preds, len(records)


def test_predictions_for_another_split_are_an_error(
    tmp_path: Path, small_squad: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    preds = tmp_path / "train_preds.json"
    preds.write_text(json.dumps({f"train-{i}": "x" for i in range(7)}))
    for extra in ([], ["--allow-missing"]):
        rc, out, err = run_cli(capsys, "evaluate", small_squad, preds, *extra)
        assert rc == 2 and out == ""
        assert f"none of the 7 ids in predictions file {preds} is a question of the data file" in err
        assert "another split" in err


def test_bias_on_too_few_questions_reports_no_threshold_only_when_allowed(
    tmp_path: Path, small_squad: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    preds = tmp_path / "preds.json"
    preds.write_text(json.dumps(HAND_PREDICTIONS))
    out_json = tmp_path / "bias.json"
    rc, out, err = run_cli(
        capsys, "bias", small_squad, preds, "--heuristics", "ans-len", "--allow-too-few-rows", "--json", out_json
    )
    assert rc == 0, err
    assert "ans-len: no threshold (fewer than 2 x sample_size rows" in err
    (result,) = json.loads(out_json.read_text())
    assert result["found"] is False and result["reason"] == "too_few_rows" and result["n_evaluated"] == 5
    assert "too_few_rows" in out  # the printed table's reason column


def test_bias_end_to_end(
    tmp_path: Path, human_files: tuple[Path, Path, int], capsys: pytest.CaptureFixture[str]
) -> None:
    from spurious.core.data.squad import load_flat_json
    from spurious.thinktwice.bias import threshold_grid
    from spurious.thinktwice.heuristics import compute_heuristics

    data, preds, n_questions = human_files
    assert n_questions > 10000  # SQuAD dev: 10,570 questions, a few with fewer than three answers
    out_json = tmp_path / "bias.json"
    rc, out, err = run_cli(
        capsys,
        "bias",
        data,
        preds,
        "--heuristics",
        FAST_HEURISTICS,
        "--sample-size",
        "200",
        "--iterations",
        "20",
        "--seed",
        "3",
        "--json",
        out_json,
    )
    assert rc == 0, err
    results = json.loads(out_json.read_text())
    assert [r["heuristic"] for r in results] == FAST_HEURISTICS.split(",")
    values = compute_heuristics(load_flat_json(data), FAST_HEURISTICS.split(","))
    for r in results:
        assert r["model"] == "annotator2" and r["dataset"] == "squad_dev_human"
        assert (r["sample_size"], r["iterations"], r["seed"], r["with_replacement"]) == (200, 20, 3, False)
        assert r["n_evaluated"] + r["n_dropped_negative"] == n_questions
        v = values[r["heuristic"]].to_numpy()
        kept = v[v >= 0] if r["heuristic"] == "word-dist" else v
        assert r["n_dropped_negative"] == len(v) - len(kept)
        grid = [g["threshold"] for g in r["grid"]]
        np.testing.assert_allclose(grid, threshold_grid(kept))
        for g in r["grid"]:
            assert g["size_low"] + g["size_high"] == r["n_evaluated"]
            assert g["size_low"] == int((kept <= g["threshold"]).sum())
            assert g["valid"] == (min(g["size_low"], g["size_high"]) >= 200)
        if r["found"]:
            assert r["threshold"] in grid
            low, high = r["groups"]["low"], r["groups"]["high"]
            assert low["size"] + high["size"] == r["n_evaluated"]
            assert low["size"] >= 200 and high["size"] >= 200
            assert r["prediction_bias"] == r["distance_em"] > 0
            assert {r["biased_group"], r["worse_group"]} == {"low", "high"}
            for g in (low, high):
                assert 0 <= g["em_q025"] <= g["em_mean"] <= g["em_q975"] <= 100
        else:
            assert r["threshold"] is None and r["prediction_bias"] == 0.0
    by_name = {r["heuristic"]: r for r in results}
    assert by_name["ans-len"]["found"]  # the paper's human ans-len bias is 13.55 points
    assert by_name["ans-len"]["biased_group"] == "low"  # short answers are matched more often

    # the printed table: one row per heuristic with its threshold and bias
    lines = out.splitlines()
    assert lines[0].startswith("# squad_dev_human:") and "EM" in lines[0]
    assert "20 draws of 200 examples without replacement, seed 3" in lines[1]
    header = lines[2].split()
    assert header[:4] == ["heuristic", "found", "threshold", "prediction_bias"]
    rows = {line.split()[0]: line.split() for line in lines[3:]}
    assert set(rows) == set(by_name)
    assert float(rows["ans-len"][3]) == pytest.approx(by_name["ans-len"]["prediction_bias"], abs=0.006)
    assert int(rows["ans-len"][5]) == by_name["ans-len"]["groups"]["low"]["size"]

    # the same from precomputed heuristics (annotate → --heuristics-file), and the report on the JSON
    hfile = tmp_path / "h.parquet"
    assert cli.main(["annotate", str(data), str(hfile), "--heuristics", FAST_HEURISTICS]) == 0
    out_json2 = tmp_path / "bias2.json"
    rc, _, err = run_cli(
        capsys,
        "bias",
        data,
        preds,
        "--heuristics",
        "ans-len",
        "--heuristics-file",
        hfile,
        "--sample-size",
        "200",
        "--iterations",
        "20",
        "--seed",
        "3",
        "--json",
        out_json2,
    )
    assert rc == 0, err
    assert json.loads(out_json2.read_text()) == [by_name["ans-len"]]

    rc, out, err = run_cli(capsys, "report", out_json, "--out-dir", tmp_path / "report", "--paper-run", "BERT-Base")
    assert rc == 0, err
    produced = sorted(p.name for p in (tmp_path / "report").iterdir())
    assert produced == [
        "figure2.png",
        "figure2.svg",
        "prediction_bias.csv",
        "prediction_bias.md",
        "thresholds.csv",
        "thresholds.md",
    ]
    assert all((tmp_path / "report" / name).stat().st_size > 0 for name in produced)
    table = pd.read_csv(tmp_path / "report" / "prediction_bias.csv")
    assert table.loc[0, "ans-len"] == round(by_name["ans-len"]["prediction_bias"], 2)
    assert table.loc[0, "ans-len (paper)"] == 12.51
    assert "| annotator2 |" in out

    # the six files are one report: a figure that cannot be drawn leaves the previous six whole, no temporary file
    from matplotlib.figure import Figure

    before = {p.name: p.read_bytes() for p in (tmp_path / "report").iterdir()}

    def no_space(self, *args, **kwargs):
        raise OSError(28, "No space left on device")

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Figure, "savefig", no_space)
        with pytest.raises(OSError, match="No space left"):
            cli.main(["report", str(out_json), "--out-dir", str(tmp_path / "report")])  # without --paper-run
    assert {p.name: p.read_bytes() for p in (tmp_path / "report").iterdir()} == before
    rc, _, err = run_cli(capsys, "report", out_json, "--out-dir", tmp_path / "report")
    assert rc == 0, err
    assert (tmp_path / "report" / "prediction_bias.csv").read_bytes() != before["prediction_bias.csv"]


def test_classification_predictions_formats_and_wrong_format_errors(tmp_path: Path) -> None:
    # the official QA-style JSON object is accepted for classifiers too
    (tmp_path / "p.json").write_text(json.dumps({"a": "entailment", "b": 1}))
    frame = cli.load_classification_predictions(tmp_path / "p.json")
    assert frame["id"].tolist() == ["a", "b"] and frame["prediction"].tolist() == ["entailment", 1]
    # a JSON list, or a CSV without the columns: the accepted formats are named, the file is not printed
    (tmp_path / "list.json").write_text(json.dumps(["entailment"] * 3))
    with pytest.raises(cli.CLIError, match=r"list.json: a JSON list, not an object \{id: prediction\}; "
                                           r"pass .*JSON object"):
        cli.load_classification_predictions(tmp_path / "list.json")
    long_header = ",".join(f"column number {i} with a very long name indeed" for i in range(40))
    (tmp_path / "wide.csv").write_text(long_header + "\n" + ",".join("x" * 40) + "\n")
    with pytest.raises(cli.CLIError) as info:
        cli.load_classification_predictions(tmp_path / "wide.csv")
    message = str(info.value)
    assert "no column(s) ['id', 'prediction'] (it has 40 columns:" in message and ", ...)" in message
    assert "parquet, CSV, TSV or JSON lines" in message and len(message) < 500
