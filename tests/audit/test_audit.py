"""`spurious audit` end to end on models trained here: a planted shortcut is flagged, a control token is not, the
files are written, and bad input fails with one line naming the problem."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from spurious.audit import report, verdict
from spurious.audit.command import run_audit
from spurious.cli import main
from spurious.core.data import classification
from spurious.core.report import figures
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


@pytest.fixture(scope="module")
def audited(planted):
    """One audit of the planted model (with its training data, the planted token and the control word "film"), with
    the figure check on: a figure that fails spurious.core.report.figures.check_figure fails the audit."""
    work, model = planted
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(figures.CHECK_ENV, "1")
        result = run_audit(str(model), "classification", work / "audit", data=str(work / "test.parquet"),
                           train=str(work / "train.parquet"), tokens=("zxq", "film"), device="cpu")
    return work / "audit", result


def test_planted_token_is_flagged_and_a_control_token_is_not(audited):
    out, result = audited
    rows = {r["feature"]: r for r in result["insertion"]}
    assert rows["token:zxq"]["label"] == "positive" and rows["token:zxq"]["p"] < 1e-6
    assert rows["token:zxq"]["flagged"]
    assert rows["token:film"]["p"] > 1e-3 and not rows["token:film"]["flagged"]
    # the written files hold the same numbers, and the page has the summary table and every figure
    saved = json.loads((out / "audit.json").read_text())
    assert {r["feature"]: r["p"] for r in saved["insertion"]}["token:zxq"] == pytest.approx(rows["token:zxq"]["p"])
    assert saved["data"]["why"] == "given with --data" and saved["train"]["sha256"]
    page = (out / "report.html").read_text()
    for anchor in ("id=\"summary\"", "figure-overview", "figure-permutation", "figure-insertion",
                   "inserted token:zxq → positive"):
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


needs_chromium = pytest.mark.skipif(browser.chromium() is None,
                                    reason="no Chromium on this machine (.ci/run installs Debian's chromium)")


@pytest.fixture(scope="module")
def rendered(audited, tmp_path_factory):
    """The page as Chromium builds it (the DOM read back by element id), and its layout in a window 1200 and 700
    CSS pixels wide."""
    out, _ = audited
    profile = tmp_path_factory.mktemp("chromium") / "profile"
    page = browser.parse(browser.dump_dom(out / "report.html", profile))
    layout = {width: browser.measure(out / "report.html", profile, width) for width in (1200, 700)}
    return page, layout


@needs_chromium
def test_report_renders_in_headless_chromium(audited, rendered, tmp_path):
    """The page as a browser builds it: the summary table with a row per diagnostic and an effect class in each, the
    verdict rule and the effect-size cut-offs in words, the settings as key / value rows, and every figure."""
    import subprocess

    out, _ = audited
    parsed, _ = rendered
    shot = tmp_path / "page.png"
    subprocess.run([browser.chromium(), *browser.flags(tmp_path / "profile"), f"--screenshot={shot}",
                    "--window-size=1200,2400", f"file://{out / 'report.html'}"], capture_output=True, timeout=120)
    result = json.loads((out / "audit.json").read_text())
    # a header row, the permutation test, and one row per inserted feature (a BiLSTM has no AFLite row)
    summary = parsed.rows("summary")
    assert len(parsed.tables["summary"]) == 1 + len(result["summary"]) == 1 + 1 + len(result["insertion"])
    assert parsed.figures == {"figure-overview": 0, "figure-permutation": 1, "figure-insertion": 1}  # 0: an <img>
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
    assert [r["effect class"] for r in parsed.rows("insertion")] == expected[1:]
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
    assert settings["alpha"] == "0.05" and settings["top_k"] == "50" and settings["insert_tokens"] == "zxq, film"
    assert settings["label mapping"] == "by name"
    assert not any("{" in cell for row in parsed.tables["settings"] for cell in row)


def _interval(cell: str) -> tuple[float, float]:
    low, high = cell.strip("[]").split(", ")
    return float(low), float(high)


@needs_chromium
def test_page_opens_with_the_overview_figure(audited, rendered):
    """At the top, before the summary: one figure (an image with alt text, loaded) of every shortcut tested, its effect
    in points with its 95 % interval beside it, drawn under the figure check."""
    out, result = audited
    parsed, layout = rendered
    page = layout[1200]
    (image,) = [i for i in page["images"] if i["figure"] == "figure-overview"]
    assert image["complete"] and image["naturalWidth"] > 0 and image["width"] > 600
    figures_top = {f["id"]: f["top"] for f in page["figures"]}
    boxes_top = {b["id"]: b["top"] for b in page["boxes"]}
    assert figures_top["figure-overview"] < boxes_top["summary-box"] == min(boxes_top.values())
    # the alt text and the figure name every shortcut tested with the summary's effect and interval, in points
    summary = parsed.rows("summary")
    assert image["alt"].startswith(f"The effect in points of each of the {len(summary)} shortcuts tested")
    with figures.capture_figures() as drawn:
        report.overview_figure(result)
    (fig,) = drawn
    assert figures.check_figure(fig) == [] and fig.get_size_inches()[0] <= figures.MAX_WIDTH_IN
    ax = fig.axes[0]
    names = [t.get_text() for t in ax.get_yticklabels()]
    numbers = [t.get_text() for t in ax.child_axes[0].get_yticklabels()]
    assert names == ["lexical cues: ACC(U) − ACC(N)"] + [f"{r['feature']} → {r['label']}" for r in result["insertion"]]
    for name, number, row in zip(names, numbers, summary, strict=True):
        assert number == f"{row['effect (points)']} {row['95 % interval (points)']}"
        assert f"{name}: {number} points" in image["alt"]
        assert row["verdict"] in image["alt"]


@needs_chromium
def test_every_rate_names_its_denominator(audited, planted, rendered):
    """A flip rate is over the examples not already predicted the feature's label: the page says how many, and that
    number is the model's own count before any insertion (predicted here independently)."""
    from spurious.lexical.bilstm import predict_bilstm

    out, result = audited
    work, model = planted
    parsed, _ = rendered
    data = classification.read_parquet(work / "test.parquet")
    before = predict_bilstm(model, data, device="cpu")["prediction"].to_numpy()
    names = data.attrs["label_names"]
    evidence = {r["shortcut"]: r["evidence"] for r in parsed.rows("summary")}
    table = {r["feature"]: r for r in parsed.rows("insertion")}
    for r in result["insertion"]:
        m = int(np.sum(before != names.index(r["label"])))
        assert r["n_not_predicted_label_before"] == m and r["n_predicted_label_before"] == len(data) - m
        words = (f"{r['flips_towards']} of {m} examples not already predicted as {r['label']} flipped to it "
                 f"(flip rate {100 * r['flips_towards'] / m:.1f}\u00a0%); {r['flips_away']} of {len(data) - m} "
                 f"predicted as {r['label']} flipped away")
        assert words in evidence[f"inserted {r['feature']} → {r['label']}"]
        row = table[r["feature"]]
        assert (row["flipped to the label (examples, of those not predicted it before)"]
                == f"{r['flips_towards']} of {m}")
        assert row["flipped away (examples, of those predicted it before)"] == f"{r['flips_away']} of {len(data) - m}"
    perm = result["permutation_test"]
    lexical = next(v for k, v in evidence.items() if k.startswith("lexical cues"))
    assert (f"ACC(U) {perm['correct_usual']} of {perm['n_usual']} usual-label instances correct" in lexical
            and f"ACC(N) {perm['correct_unusual']} of {perm['n_unusual']} unusual-label instances" in lexical)
    correct = int(np.sum(before == data["label"].to_numpy()))
    assert parsed.texts["accuracy"].startswith(f"{correct} of {len(data)} examples correct")


@needs_chromium
def test_each_column_holds_one_unit(audited, rendered):
    """The summary's effect is in points for every row (an inserted feature's net shift, the accuracy gap), with its
    interval in points beside it; the detail tables name each column's unit."""
    out, result = audited
    parsed, _ = rendered
    summary = parsed.rows("summary")
    perm = result["permutation_test"]
    expected = [perm["accuracy_gap_points"]] + [100 * r["net_shift"] for r in result["insertion"]]
    intervals = [perm["accuracy_gap_ci_points"]] + [[100 * x for x in r["net_shift_ci"]] for r in result["insertion"]]
    for row, effect, (low, high) in zip(summary, expected, intervals, strict=True):
        assert float(row["effect (points)"]) == pytest.approx(effect, abs=0.005)
        assert _interval(row["95 % interval (points)"]) == pytest.approx((low, high), abs=0.005)
        assert low <= effect <= high
    insertion = parsed.tables["insertion"][0]
    for header in ("net shift (points)", "net shift 95 % interval (points)", "flip rate (%)",
                   "flip rate 95 % interval (%)"):
        assert header in insertion, header
    assert {"ACC(U) (%)", "ACC(N) (%)", "ACC(U) − ACC(N) (points)"} <= set(parsed.tables["permutation"][0])
    for row, r in zip(parsed.rows("insertion"), result["insertion"], strict=True):
        assert float(row["flip rate (%)"]) == pytest.approx(100 * r["flip_rate"], abs=0.05)
        assert float(row["net shift (points)"]) == pytest.approx(100 * r["net_shift"], abs=0.005)


@needs_chromium
def test_tables_scroll_inside_their_boxes(rendered):
    """No table widens the page at 1200 or at 700 CSS pixels: each sits in a box that fits the page, and a table wider
    than its box (the feature-insertion table at 700 pixels) scrolls inside it."""
    parsed, layout = rendered
    for width, page in layout.items():
        assert page["scrollWidth"] <= page["clientWidth"], (width, page["scrollWidth"], page["clientWidth"])
        assert all(t["box"] == "table-box" for t in page["tables"]), page["tables"]
        assert {b["id"] for b in page["boxes"]} == {f"{t}-box" for t in parsed.tables}
        for box in page["boxes"]:
            assert box["left"] >= 0 and box["right"] <= page["clientWidth"], (width, box)
    narrow = {b["id"]: b for b in layout[700]["boxes"]}["insertion-box"]
    assert narrow["scrollWidth"] > narrow["clientWidth"]


def test_a_failing_render_leaves_the_previous_pair_whole(audited, tmp_path, monkeypatch):
    """audit.json and report.html are replaced together: a figure that cannot be drawn while the new pair is made
    leaves both previous files byte for byte, and no temporary file."""
    from matplotlib.figure import Figure

    _, result = audited
    out = tmp_path / "audit"
    report.write_audit(result, out)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    assert sorted(before) == ["audit.json", "audit.provenance.json", "report.html"]
    assert "<footer class='provenance'>" in before["report.html"].decode() and b"git_commit" not in before["audit.json"]
    changed = dict(result, accuracy=result["accuracy"] / 2)

    def no_space(self, *args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Figure, "savefig", no_space)
    with pytest.raises(OSError, match="No space left"):
        report.write_audit(changed, out)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    monkeypatch.undo()
    report.write_audit(changed, out)
    after = {p.name: p.read_bytes() for p in out.iterdir()}
    assert (sorted(after) == sorted(before)
            and all(after[name] != before[name] for name in ("audit.json", "report.html")))
