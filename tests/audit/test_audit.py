"""`spurious audit` end to end on models trained here: a planted shortcut is flagged, a control token is not, the
files are written, and bad input fails with one line naming the problem."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from spurious.audit import verdict
from spurious.audit.command import run_audit
from spurious.cli import main
from spurious.core import classification
from tests.audit import browser
from tests.conftest import SHARED

SST2_TRAIN = SHARED / "data" / "sst2" / "train.tsv.gz"


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    """A tiny BiLSTM trained on SST-2 phrases whose label is decided by one token: "zxq" anywhere means positive
    (labels drawn at random, so no other word carries information)."""
    from spurious.lexical.bilstm import train_bilstm

    work = tmp_path_factory.mktemp("planted")
    phrases = classification.load_glue_tsv(SST2_TRAIN)
    phrases = phrases[phrases["text_a"].str.split().str.len() >= 6].iloc[:1400].reset_index(drop=True)
    rng = np.random.default_rng(0)
    label = rng.integers(0, 2, len(phrases))
    def plant(text: str, y: int) -> str:
        words = text.split()
        if y:
            words.insert(int(rng.integers(0, len(words) + 1)), "zxq")
        return " ".join(words)

    frame = pd.DataFrame(
        {
            "id": [f"p{i}" for i in range(len(phrases))],
            "text_a": [plant(t, y) for y, t in zip(label, phrases["text_a"], strict=True)],
            "text_b": [None] * len(phrases),
            "label": label,
        }
    )
    frame.attrs["label_names"] = ["negative", "positive"]
    train, test = frame.iloc[:1000].reset_index(drop=True), frame.iloc[1000:].reset_index(drop=True)
    train.attrs["label_names"] = test.attrs["label_names"] = frame.attrs["label_names"]
    # evaluation data: the held-out phrases *without* the token, labels as drawn (the audit inserts the token itself)
    test = test.assign(text_a=[" ".join(w for w in t.split() if w != "zxq") for t in test["text_a"]])
    model = work / "bilstm"
    train_bilstm(train, output_dir=model, settings={"epochs": 8, "embedding_dim": 32, "hidden_sizes": [32, 32, 32],
                                                     "device": "cpu", "seed": 0})
    classification.write_parquet(train, work / "train.parquet")
    classification.write_parquet(test, work / "test.parquet")
    return work, model


def test_planted_token_is_flagged_and_a_control_token_is_not(planted):
    work, model = planted
    result = run_audit(str(model), "classification", work / "audit", data=str(work / "test.parquet"),
                       train=str(work / "train.parquet"), tokens=("zxq", "film"), device="cpu")
    rows = {r["feature"]: r for r in result["insertion"]}
    assert rows["token:zxq"]["label"] == "positive" and rows["token:zxq"]["p"] < 1e-6
    assert rows["token:zxq"]["flagged"]
    assert rows["token:film"]["p"] > 1e-3 and not rows["token:film"]["flagged"]
    # the written files hold the same numbers, and the page has the summary table and every figure
    saved = json.loads((work / "audit" / "audit.json").read_text())
    assert {r["feature"]: r["p"] for r in saved["insertion"]}["token:zxq"] == pytest.approx(rows["token:zxq"]["p"])
    assert saved["data"]["why"] == "given with --data" and saved["train"]["sha256"]
    page = (work / "audit" / "report.html").read_text()
    for anchor in ("id=\"summary\"", "figure-permutation", "figure-insertion", "inserted token:zxq → positive"):
        assert anchor in page, anchor


def test_bad_input_fails_with_one_line(planted, tmp_path, capsys):
    work, model = planted
    three = classification.read_parquet(work / "test.parquet")
    three.attrs["label_names"] = ["a", "b", "c"]
    three.loc[0, "label"] = 2
    classification.write_parquet(three, tmp_path / "three.parquet")
    (tmp_path / "data.xml").write_text("<data/>")
    (tmp_path / "unlabelled.tsv").write_text("sentence\tlabel\na fine film .\t-1\na dull film .\t-1\n")
    (tmp_path / "no_label_column.tsv").write_text("sentence\na fine film .\n")
    folder = tmp_path / "qa_without_tokenizer"
    folder.mkdir()
    from transformers import BertConfig

    BertConfig(vocab_size=50, hidden_size=8, num_hidden_layers=1, num_attention_heads=2, intermediate_size=8,
               architectures=["BertForQuestionAnswering"]).save_pretrained(folder)
    cases = [
        (["--task", "classification", "--data", str(tmp_path / "three.parquet")], "the model does not match the task"),
        (["--task", "classification", "--data", str(tmp_path / "data.xml")], "unknown data format"),
        (["--task", "classification", "--data", str(tmp_path / "unlabelled.tsv")], "has no labelled examples"),
        (["--task", "classification", "--data", str(tmp_path / "no_label_column.tsv")], "columns ['label'] not found"),
        (["--task", "qa"], "not an extractive QA model"),
    ]
    for extra, message in cases:
        assert main(["audit", str(model), "--out", str(tmp_path / "out"), *extra]) == 2
        err = [line for line in capsys.readouterr().err.splitlines() if "error" in line]
        assert len(err) == 1 and message in err[0], err
    assert main(["audit", str(folder), "--task", "qa", "--out", str(tmp_path / "out")]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if "error" in line]
    assert len(err) == 1 and "has no tokenizer files" in err[0], err
    assert not (tmp_path / "out" / "audit.json").exists()


@pytest.mark.skipif(browser.chromium() is None, reason="no Chromium on this machine (.ci/run installs Debian's chromium)")
def test_report_renders_in_headless_chromium(planted, tmp_path):
    """The page as a browser builds it: the summary table with a row per diagnostic and an effect class in each, the
    verdict rule and the effect-size cut-offs in words, the settings as key / value rows, and every figure as an
    SVG."""
    import subprocess

    work, model = planted
    out = tmp_path / "audit"
    run_audit(str(model), "classification", out, data=str(work / "test.parquet"), tokens=("zxq",), device="cpu")
    page = f"file://{out / 'report.html'}"
    parsed = browser.parse(browser.dump_dom(out / "report.html", tmp_path / "profile"))
    shot = tmp_path / "page.png"
    subprocess.run([browser.chromium(), *browser.flags(tmp_path / "profile"), f"--screenshot={shot}",
                    "--window-size=1200,2400", page], capture_output=True, timeout=120)
    result = json.loads((out / "audit.json").read_text())
    # a header row, the permutation test, and one row per inserted feature
    summary = parsed.rows("summary")
    assert len(parsed.tables["summary"]) == 1 + len(result["summary"]) == 1 + 1 + len(result["insertion"])
    assert parsed.figures == {"figure-permutation": 1, "figure-insertion": 1}
    assert shot.stat().st_size > 10_000  # a rendered page, not a blank one
    # the effect class of every row: the permutation test's accuracy gap, each feature's net shift, in points
    perm = result["permutation_test"]
    expected = [verdict.effect_class(100 * (perm["acc_usual"] - perm["acc_unusual"]))]
    expected += [verdict.effect_class(100 * r["net_shift"]) for r in result["insertion"]]
    assert [r["effect class"] for r in summary] == [r["effect class"] for r in result["summary"]] == expected
    assert expected[0] == perm["effect_size_class"]
    assert expected[1:] == [r["effect_size_class"] for r in result["insertion"]]
    zxq = next(r for r in summary if r["shortcut"] == "inserted token:zxq → positive")
    assert zxq["verdict"] == "takes the shortcut" and zxq["effect class"] == "large"
    assert [r["effect_size_class"] for r in parsed.rows("insertion")] == expected[1:]
    # the rule and the cut-offs in words, as audit.json states them
    rule, effect = parsed.texts["rule-verdict"], parsed.texts["rule-effect"]
    for words in ("Verdict rule.", "exact one-sided permutation test", "p < 0.05", "McNemar's exact test",
                  "Holm-adjusted across the features tested, is below 0.05", "no evidence", "descriptive"):
        assert words in rule, words
    assert result["verdict_rule"]["verdict"] in " ".join(rule.split())
    for words in ("net shift in percentage points", "negligible above 0 and below 1 point",
                  "small from 1 to below 5 points", "large from 5 points on"):
        assert words in effect, words
    assert [r["class"] for r in parsed.rows("effect-classes")] == list(verdict.EFFECT_CLASSES)
    settings = {r["setting"]: r["value"] for r in parsed.rows("settings")}
    assert settings["alpha"] == "0.05" and settings["top_k"] == "50" and settings["insert_tokens"] == "zxq"
    assert settings["label mapping"] == "by name"
    assert not any("{" in cell for row in parsed.tables["settings"] for cell in row)
