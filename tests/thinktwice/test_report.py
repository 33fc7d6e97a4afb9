"""Tests for spurious.thinktwice.report and spurious.thinktwice.paper_values (hand-made result dicts, values worked out
by hand)."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pandas as pd
import pytest

from spurious.core.io import write_json
from spurious.core.report import tables
from spurious.thinktwice import paper_values, report


def _group(size: int, em_mean: float, q025: float, q975: float) -> dict:
    return {
        "size": size,
        "em_mean": em_mean,
        "em_q025": q025,
        "em_q975": q975,
        "f1_mean": em_mean + 5,
        "f1_q025": q025 + 5,
        "f1_q975": q975 + 5,
    }


def result(
    model: str,
    heuristic: str,
    bias: float,
    *,
    found: bool = True,
    threshold: float | None = 7.0,
    biased: str | None = "low",
    dataset: str = "squad",
    sizes: tuple[int, int] = (8919, 1651),
    **extra,
) -> dict:
    """A search_threshold-style result; the worse group's interval lies ``bias`` below the biased group's."""
    worse = None if biased is None else ("high" if biased == "low" else "low")
    if found:
        good = _group(sizes[0] if biased == "low" else sizes[1], 85.0, 82.0, 88.0)
        bad_q975 = 82.0 - bias
        bad = _group(sizes[1] if biased == "low" else sizes[0], bad_q975 - 3.0, bad_q975 - 6.0, bad_q975)
        groups = {biased: good, worse: bad}
    else:
        groups = {"low": {"size": None, "em_mean": None}, "high": {"size": None, "em_mean": None}}
        threshold, biased, worse = None, None, None
    r = {
        "model": model,
        "dataset": dataset,
        "heuristic": heuristic,
        "found": found,
        "threshold": threshold,
        "prediction_bias": bias if found else 0.0,
        "distance_em": bias if found else -1.0,
        "distance_f1": (bias - 0.5) if found else -1.0,
        "biased_group": biased,
        "worse_group": worse,
        "sample_size": 800,
        "iterations": 100,
        "with_replacement": False,
        "seed": 0,
        "n_evaluated": 10570,
        "n_dropped_negative": 12,
        "groups": groups,
        "grid": [],
    }
    r.update(extra)
    return r


@pytest.fixture
def results() -> list[dict]:
    return [
        result("bert", "word-dist", 8.6),
        result("bert", "ans-len", 12.5, threshold=4.0, biased="high", sizes=(3124, 7446)),
        result("bert", "ans-pos", 0.0, found=False),
        result("Human", "word-dist", 0.3, annotator=1),
        result("Human", "ans-len", 13.5, threshold=4.0, biased="high", sizes=(3124, 7446), annotator=0),
        result("Human", "ans-pos", 0.0, found=False, annotator=2),
        result("roberta", "ans-len", 10.87, threshold=4.0, biased="high", sizes=(3124, 7446)),
        result("roberta", "word-dist", 4.814, threshold=6.0),
        result("roberta", "ans-pos", 0.0, found=False),
    ]


# ----------------------------------------------------------------------------------------------------------------------
# paper_values


def test_paper_values_averages_match_their_rows() -> None:
    for table in (
        paper_values.BIAS_MODELS_ALL,
        paper_values.BIAS_METHODS,
        paper_values.BIAS_METHODS_NEW,
        paper_values.BIAS_OOD,
        paper_values.QUANTILE_MODELS,
        paper_values.QUANTILE_OOD,
    ):
        for name, row in table.items():
            mean = sum(row[h] for h in paper_values.HEURISTIC_ORDER) / 7
            assert mean == pytest.approx(row["average"], abs=0.006), name


def test_paper_values_lookup() -> None:
    assert paper_values.paper_run("bert-base")["word-dist"] == 8.62
    assert paper_values.paper_run("BERT-Base+LMix-new") == paper_values.BIAS_METHODS_NEW["LMix"]
    assert paper_values.paper_run("LMix")["ans-len"] == 10.12
    assert paper_values.paper_run("Human")["ans-len"] == 13.55
    assert paper_values.paper_run("RoBERTa-Large_Trivia")["ans-len"] == 43.24
    assert paper_values.paper_quantiles("RoBERTa-Large")["ans-len"] == 78.13
    assert paper_values.APPENDIX_C_THRESHOLDS["cos-sim"] == 0.1
    assert sum(paper_values.APPENDIX_C_WORSE_SIZE.values()) == 1651 + 3281 + 3124 + 954 + 5006 + 1672
    with pytest.raises(KeyError, match="unknown paper run"):
        paper_values.paper_run("GPT-5")


# ----------------------------------------------------------------------------------------------------------------------
# bias_table


def test_bias_table_values_and_average(results: list[dict]) -> None:
    df = report.bias_table(results)
    assert list(df["model"]) == ["bert", "roberta", "Human"]  # first appearance, Human last
    assert list(df.columns) == [
        "model",
        "dataset",
        "ans-len",
        "word-dist",
        "ans-pos",
        "average",
        "sample_size",
        "iterations",
    ]
    bert = df.set_index("model").loc["bert"]
    assert bert["ans-len"] == 12.5 and bert["word-dist"] == 8.6 and bert["ans-pos"] == 0.0
    assert bert["average"] == pytest.approx((12.5 + 8.6 + 0.0) / 3, abs=0.005)  # 7.03
    assert bert["average"] == 7.03
    roberta = df.set_index("model").loc["roberta"]
    assert roberta["word-dist"] == 4.81  # rounded to 2 decimals
    assert roberta["average"] == round((10.87 + 4.814 + 0) / 3, 2)  # 5.23, from the unrounded values
    human = df.set_index("model").loc["Human"]
    assert human["average"] == round((13.5 + 0.3 + 0.0) / 3, 2)
    assert bert["sample_size"] == 800 and bert["iterations"] == 100
    assert "100 draws of 800 examples" in df.attrs["caption"]
    assert "without replacement" in df.attrs["caption"]
    assert "word-dist: 1" in df.attrs["caption"]  # the Human annotator per heuristic


def test_bias_table_paper_columns(results: list[dict]) -> None:
    df = report.bias_table(results, paper_run="BERT-Base").set_index("model")
    cols = list(df.columns)
    assert cols.index("ans-len (paper)") == cols.index("ans-len") + 1
    assert cols.index("average (paper)") == cols.index("average") + 1
    assert df.loc["bert", "ans-len (paper)"] == 12.51
    assert df.loc["bert", "word-dist (paper)"] == 8.62
    assert df.loc["bert", "ans-pos (paper)"] == 0.0
    assert df.loc["bert", "average (paper)"] == round((12.51 + 8.62 + 0) / 3, 2)
    assert df.loc["Human", "ans-len (paper)"] == 13.55
    assert df.loc["Human", "word-dist (paper)"] == 0.30
    assert "BERT-Base" in df.attrs["caption"]


def test_bias_table_paper_mapping_and_full_average() -> None:
    values = paper_values.BIAS_MODELS["RoBERTa-Large"]
    results = [result("rl", h, values[h], found=values[h] > 0) for h in paper_values.HEURISTIC_ORDER]
    results.append(result("other", "ans-len", 1.0))
    df = report.bias_table(results, paper_run={"rl": "roberta-large"}).set_index("model")
    assert list(df.columns[1:15:2]) == list(paper_values.HEURISTIC_ORDER)
    assert df.loc["rl", "average"] == 2.76 and df.loc["rl", "average (paper)"] == 2.76
    for h in paper_values.HEURISTIC_ORDER:
        assert df.loc["rl", h] == df.loc["rl", f"{h} (paper)"]
    assert math.isnan(df.loc["other", "ans-len (paper)"])
    assert df.loc["other", "average"] == 1.0  # the mean over its own heuristics only
    with pytest.raises(ValueError, match="unknown paper run"):
        report.bias_table(results, paper_run="nonexistent")


def test_bias_table_rejects_duplicates_and_empty(results: list[dict]) -> None:
    with pytest.raises(ValueError, match="two results"):
        report.bias_table([*results, results[0]])
    with pytest.raises(ValueError, match="no results"):
        report.bias_table([])


def test_bias_table_several_datasets(results: list[dict]) -> None:
    ood = [result("bert", "ans-len", 40.0, dataset="nq")]
    df = report.bias_table(results + ood)
    assert list(zip(df["model"], df["dataset"], strict=True)) == [
        ("bert", "squad"),
        ("bert", "nq"),
        ("roberta", "squad"),
        ("Human", "squad"),
    ]
    nq = df[df["dataset"] == "nq"].iloc[0]
    assert nq["average"] == 40.0 and math.isnan(nq["word-dist"])


# ----------------------------------------------------------------------------------------------------------------------
# thresholds_table


def test_thresholds_table(results: list[dict]) -> None:
    df = report.thresholds_table(results, paper_run="BERT-Base")
    assert list(df["heuristic"][:3]) == ["ans-len", "word-dist", "ans-pos"]
    row = df[(df["model"] == "bert") & (df["heuristic"] == "word-dist")].iloc[0]
    assert row["found"] and row["threshold"] == 7.0
    assert row["size_low"] == 8919 and row["size_high"] == 1651
    assert row["size_low"] + row["size_high"] == 10570
    assert row["biased_group"] == "low" and row["worse_group"] == "high" and row["worse_size"] == 1651
    assert row["worse_em_q975"] == round(82.0 - 8.6, 2)
    assert row["low_em_mean"] == 85.0 and row["low_em_q025"] == 82.0 and row["high_em_q975"] == 73.4
    assert row["threshold (paper)"] == 7 and row["worse_size (paper)"] == 1651
    assert row["prediction_bias (paper)"] == 8.62 and row["worse_em_q975 (paper)"] == 70.69
    alen = df[(df["model"] == "bert") & (df["heuristic"] == "ans-len")].iloc[0]
    assert alen["worse_group"] == "low" and alen["worse_size"] == 3124 and alen["worse_size (paper)"] == 3124
    missing = df[(df["model"] == "bert") & (df["heuristic"] == "ans-pos")].iloc[0]
    assert not missing["found"] and math.isnan(missing["threshold"]) and missing["prediction_bias"] == 0.0
    assert pd.isna(missing["worse_group"]) and pd.isna(missing["worse_size"])
    assert math.isnan(missing["threshold (paper)"])  # the paper found no ans-pos threshold either
    human = df[(df["model"] == "Human") & (df["heuristic"] == "word-dist")].iloc[0]
    assert human["annotator"] == 1 and math.isnan(human["threshold (paper)"])
    assert human["prediction_bias (paper)"] == 0.30
    assert "Appendix C" in df.attrs["caption"]


def test_thresholds_table_worse_group_inferred() -> None:
    r = result("m", "cos-sim", 2.0, threshold=0.30000000000000004, biased="high")
    r.pop("worse_group")
    df = report.thresholds_table([r])
    assert df.loc[0, "worse_group"] == "low" and df.loc[0, "threshold"] == 0.3
    assert "threshold (paper)" not in df and "annotator" not in df


# ----------------------------------------------------------------------------------------------------------------------
# write_table / format_markdown (spurious.core.report.tables, importable from the report as before)


def test_the_table_helpers_are_cores() -> None:
    assert report.write_table is tables.write_table and report.format_markdown is tables.format_markdown
    assert report.fixed_decimals is tables.fixed_decimals and report.NA_TEXT == tables.NA_TEXT == "–"
    assert [tables.fixed_decimals(v, 1) for v in (-0.04, 1.25, None, float("nan"))] == ["0.0", "1.2", "–", "–"]


def test_write_table_csv_and_markdown(tmp_path: Path, results: list[dict]) -> None:
    df = report.bias_table(results, paper_run="BERT-Base")
    csv, md = tmp_path / "out" / "bias.csv", tmp_path / "out" / "bias.md"
    report.write_table(df, csv, md)
    back = pd.read_csv(csv)
    assert list(back.columns) == list(df.columns)
    assert back.loc[0, "word-dist"] == 8.6 and back.loc[0, "word-dist (paper)"] == 8.62
    text = md.read_text()
    lines = text.splitlines()
    assert lines[0].startswith("| model | dataset | ans-len | ans-len (paper) | word-dist |")
    assert re.fullmatch(r"\|(:---\||---:\|)+", lines[1])
    assert "| bert | squad | 12.50 | 12.51 | 8.60 | 8.62 | 0.00 | 0.00 | 7.03 | 7.04 | 800 | 100 |" in text
    assert lines[4].startswith("| Human |")
    assert all(line.count("|") == lines[0].count("|") for line in lines[:5])
    assert "100 draws of 800 examples" in lines[-1]  # the caption under the table
    assert sorted(p.name for p in csv.parent.iterdir()) == ["bias.csv", "bias.md"]


def test_format_markdown_cells() -> None:
    df = pd.DataFrame(
        {
            "name": ["a|b", None],
            "flag": [True, False],
            "size": pd.array([3, None], dtype="Int64"),
            "x": [0.1, 1 / 3],
            "y": [1e-5, 2.0],
        }
    )
    text = report.format_markdown(df, caption="Caption.")
    assert "| a\\|b | yes | 3 | 0.10 | 1e-05 |" in text
    assert "| – | no | – | 0.33 | 2.00 |" in text
    assert text.endswith("\nCaption.\n")


def test_write_table_atomic_on_error(tmp_path: Path, results: list[dict], monkeypatch: pytest.MonkeyPatch) -> None:
    df = report.thresholds_table(results)
    csv, md = tmp_path / "t.csv", tmp_path / "t.md"

    def boom(*args, **kwargs):
        raise RuntimeError("disk full")

    # the CSV and the Markdown are one pair: a failure while making either leaves the previous pair whole
    report.write_table(df.iloc[:1], csv, md)
    before = {p.name: p.read_bytes() for p in (csv, md)}
    # write_table lives in core.report.tables (report re-exports it)
    monkeypatch.setattr(tables, "format_markdown", boom)
    with pytest.raises(RuntimeError, match="disk full"):
        report.write_table(df, csv, md)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before  # no temporary file left behind
    monkeypatch.undo()
    monkeypatch.setattr(pd.DataFrame, "to_csv", boom)
    with pytest.raises(RuntimeError):
        report.write_table(df, csv, md)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before
    monkeypatch.undo()
    report.write_table(df, csv, md)
    assert csv.read_bytes() != before["t.csv"] and md.read_bytes() != before["t.md"]


# ----------------------------------------------------------------------------------------------------------------------
# figure2


def test_figure2_writes_deterministic_files(tmp_path: Path, results: list[dict]) -> None:
    results = results + [result("bert", "sim-word", 1.0, dataset="nq")]
    png, svg = tmp_path / "fig2.png", tmp_path / "fig2.svg"
    report.figure2(results, png, svg)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = svg.read_text()
    assert text.lstrip().startswith("<?xml") and "</svg>" in text
    assert "<dc:date>" not in text
    first_png, first_svg = png.read_bytes(), svg.read_bytes()
    report.figure2(results, png, svg)
    assert png.read_bytes() == first_png and svg.read_bytes() == first_svg
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fig2.png", "fig2.svg"]


def test_figure2_order_and_na(results: list[dict]) -> None:
    index = report._index(results)
    heuristics = report.ordered_heuristics(h for _, _, h in index)
    # mean over the non-Human models: ans-len 11.685, word-dist 6.707, ans-pos 0
    assert report._figure_order(index, heuristics) == ["ans-len", "word-dist", "ans-pos"]


def test_figure2_atomic_on_error(tmp_path: Path, results: list[dict], monkeypatch: pytest.MonkeyPatch) -> None:
    from matplotlib.figure import Figure

    calls = {"n": 0}
    original = Figure.savefig

    def failing_second(self, fname, **kwargs):
        calls["n"] += 1
        if calls["n"] == 2:
            raise OSError("no space")
        return original(self, fname, **kwargs)

    monkeypatch.setattr(Figure, "savefig", failing_second)
    with pytest.raises(OSError, match="no space"):
        report.figure2(results, tmp_path / "f.png", tmp_path / "f.svg")
    assert list(tmp_path.iterdir()) == []  # the PNG and the SVG are one pair: neither, and no temporary file


def test_load_results(tmp_path: Path, results: list[dict]) -> None:
    write_json(results[0], tmp_path / "a.json")
    write_json(results[1:3], tmp_path / "b.json")
    loaded = report.load_results([tmp_path / "a.json", tmp_path / "b.json"])
    assert [r["heuristic"] for r in loaded] == ["word-dist", "ans-len", "ans-pos"]


def test_figure4_table_reference_fixed_and_human() -> None:
    reference = [
        result("roberta_large", "word-dist", 4.8, split="validation"),
        result("roberta_large", "ans-pos", 0.0, found=False, split="validation"),
    ]
    fixed = [
        result("roberta_large_nq", "word-dist", 3.62, split="validation", threshold_from="roberta_large/seed0"),
        result("roberta_large_nq", "ans-pos", 0.0, found=False, split="validation"),
    ]
    human = [result("Human", "word-dist", 0.3, split="validation", annotator=1)]
    df = report.figure4_table(reference, fixed, human)
    assert list(df["model"]) == ["roberta_large", "roberta_large_nq", "Human"]
    t = df.set_index("model")
    assert t.loc["roberta_large_nq", "word-dist"] == 3.62 and t.loc["roberta_large", "ans-pos"] == 0.0
    assert "roberta_large: its own search" in df.attrs["caption"] and "same segments" in df.attrs["caption"]
    assert "Thresholds: roberta_large's own search. roberta_large: its own search" in df.attrs["caption"]
    assert list(df["thresholds from"]) == ["own search", "roberta_large/seed0", "own search (per annotator)"]
    with pytest.raises(ValueError, match="several splits"):
        report.figure4_table(reference, [result("x", "word-dist", 1.0, split="train")])
    with pytest.raises(ValueError, match="needs the results of the runs measured"):
        report.figure4_table(reference, [])


def test_figure4_at_appendix_c_thresholds(tmp_path: Path) -> None:
    """Fig. 4's caption: splits "maximal for the SQuAD-trained model (Appx. C)": App. C's published BERT-base-cased
    thresholds (word-dist 7, ans-len 4, cos-sim 0.1; ans-pos none), the SQuAD model among the fixed rows."""
    ref = paper_values.appendix_c_reference("word-dist")
    assert (ref["found"], ref["threshold"]) == (True, 7.0)
    assert paper_values.appendix_c_reference("cos-sim")["threshold"] == 0.1
    assert paper_values.appendix_c_reference("ans-pos")["found"] is False
    assert paper_values.appendix_c_reference("ans-pos")["threshold"] is None
    source = paper_values.APPENDIX_C_SOURCE
    fixed = [
        result("roberta_large", "word-dist", 4.0, split="validation", threshold_from=source),
        result("roberta_large", "ans-pos", 0.0, found=False, split="validation", threshold_from=source),
        result("roberta_large_nq", "word-dist", 3.62, split="validation", threshold_from=source),
        result("roberta_large_nq", "ans-pos", 0.0, found=False, split="validation", threshold_from=source),
    ]
    human = [result("Human", "word-dist", 0.3, split="validation", annotator=1)]
    df = report.figure4_table([], fixed, human)
    assert list(df["model"]) == ["roberta_large", "roberta_large_nq", "Human"]
    assert list(df["thresholds from"]) == [source, source, "own search (per annotator)"]
    assert df.attrs["thresholds_from"] == source
    caption = df.attrs["caption"]
    assert caption.startswith(
        "Figure 4 (§5.2): prediction bias on squad/validation (EM, points). Thresholds: Appendix C (the optimal "
        "thresholds of BERT-base-cased on SQuAD validation, as published). Every model is measured at those "
        "thresholds, so all are cut into the same segments"
    )
    assert "its own search" not in caption
    t = df.set_index("model")
    assert t.loc["roberta_large", "word-dist"] == 4.0 and t.loc["roberta_large_nq", "ans-pos"] == 0.0
    report.write_table(df, tmp_path / "f4.csv", tmp_path / "f4.md")
    assert "thresholds from" in (tmp_path / "f4.csv").read_text().splitlines()[0]
    assert "Thresholds: Appendix C" in (tmp_path / "f4.md").read_text()
