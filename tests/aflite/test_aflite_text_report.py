"""Reporting of AFLite's text experiments (Tables 3-4, iteration curves) on hand-built metrics, checked by hand."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from spurious.aflite import report as rep
from spurious.thinktwice import report

PAPER_NAMES = {"datasets": {"qnli": "QNLI", "toy": None}, "models": {"minilm": "RoBERTa", "bow": None}}
N_TRAIN = {("qnli", "full"): 1000, ("qnli", "random"): 300, ("qnli", "aflite"): 300, ("toy", "full"): 500}
N_TRAIN[("toy", "aflite")] = 200


def record(dataset, model, inputs, train_set, seed, original, filtered):
    return {
        "dataset": dataset,
        "model": model,
        "train_set": train_set,
        "inputs": inputs,
        "seed": seed,
        "n_train": N_TRAIN[(dataset, train_set)],
        "accuracy_original": original,
        "accuracy_filtered": filtered,
        "n_dev_original": 100,
        "n_dev_filtered": 40,
    }


# The order matters: a partial-input record comes first and "bow" after "minilm"; the table must still list the
# full-input rows first. qnli/minilm/partial has no random model, toy none at all (missing cells).
METRICS = [
    record("qnli", "minilm", "partial", "full", 0, 0.61, 0.45),
    record("qnli", "minilm", "full", "full", 0, 0.80, 0.55),
    record("qnli", "minilm", "full", "full", 1, 0.84, 0.57),
    record("qnli", "minilm", "full", "random", 0, 0.78, 0.50),
    record("qnli", "minilm", "full", "aflite", 0, 0.75, 0.60),
    record("qnli", "minilm", "full", "aflite", 1, 0.77, 0.66),
    record("qnli", "bow", "full", "full", 0, 0.70, 0.40),
    record("qnli", "minilm", "partial", "aflite", 0, 0.58, 0.50),
    record("toy", "minilm", "full", "full", 0, 0.90, 0.60),
    record("toy", "minilm", "full", "full", 1, 0.93, 0.62),
    record("toy", "minilm", "full", "aflite", 0, 0.80, 0.70),
]
SQRT2, SQRT8, SQRT18, SQRT4_5 = 1.4142135624, 2.8284271247, 4.2426406871, 2.1213203436


def nan(value) -> bool:
    return value is pd.NA or (isinstance(value, float) and math.isnan(value))


def test_paper_lookup():
    assert rep.paper_accuracy("SNLI", "BERT", True) == (71.5, 70.1, 48.4)
    assert rep.paper_accuracy("SNLI", "RoBERTa", False) == (92.6, 88.3, 62.6)
    # Table 4 with its blocks' dataset labels swapped back as the paper's text gives them (RoBERTa on filtered data:
    # 66.2 for MultiNLI, 77.7 for QNLI; printed under the other dataset's name)
    assert rep.paper_accuracy("MultiNLI", "RoBERTa", False) == (90.3, None, 66.2)
    assert rep.paper_accuracy("QNLI", "RoBERTa", False) == (93.7, None, 77.7)
    assert rep.paper_accuracy("QNLI", "BERT", True) == (62.6, None, 56.6)
    assert rep.paper_accuracy("QNLI", "ELECTRA", False) is None
    assert rep.paper_accuracy("QQP", "BERT", False) is None


def test_text_table_rows_means_and_paper_values():
    df = rep.text_table(METRICS, PAPER_NAMES)
    assert list(df.columns) == list(rep.TEXT_TABLE_COLUMNS)
    assert list(zip(df["dataset"], df["model"], strict=True)) == [
        ("qnli", "minilm"),
        ("qnli", "bow"),
        ("qnli", "minilm-PartialInput"),
        ("qnli", "Training set size"),
        ("toy", "minilm"),
        ("toy", "Training set size"),
    ]
    qnli, bow, partial, qnli_size, toy, toy_size = (df.iloc[i] for i in range(6))

    # qnli/minilm: D = (80 + 84) / 2, D_rand = 78 (one seed), D(AFLite) from the *filtered* dev: (60 + 66) / 2
    assert qnli["D"] == pytest.approx(82.0)
    assert qnli["D ±"] == pytest.approx(SQRT8)  # values 80, 84: ((2² + 2²) / 1) ** 0.5
    assert qnli["D_rand"] == pytest.approx(78.0) and nan(qnli["D_rand ±"])
    assert qnli["D(AFLite)"] == pytest.approx(63.0)
    assert qnli["D(AFLite) ±"] == pytest.approx(SQRT18)  # values 60, 66
    assert qnli["Δ"] == pytest.approx(-19.0)
    assert qnli["seeds"] == 1  # the random cell has one seed
    assert qnli["D (paper)"] == 93.7 and nan(qnli["D_rand (paper)"])
    assert qnli["D(AFLite) (paper)"] == 77.7 and qnli["Δ (paper)"] == pytest.approx(-16.0)

    # bow has no paper name and only the full train set
    assert bow["D"] == pytest.approx(70.0) and bow["seeds"] == 1
    for column in ("D_rand", "D(AFLite)", "Δ", "D ±", "D (paper)", "D(AFLite) (paper)", "Δ (paper)"):
        assert nan(bow[column]), column

    assert partial["D"] == pytest.approx(61.0) and nan(partial["D_rand"])
    assert partial["D(AFLite)"] == pytest.approx(50.0) and partial["Δ"] == pytest.approx(-11.0)
    assert (partial["D (paper)"], partial["D(AFLite) (paper)"]) == (63.9, 59.4)
    assert partial["Δ (paper)"] == pytest.approx(-4.5) and nan(partial["D_rand (paper)"])

    assert (qnli_size["D"], qnli_size["D_rand"], qnli_size["D(AFLite)"], qnli_size["Δ"]) == (1000, 300, 300, -700)
    assert nan(qnli_size["seeds"]) and nan(qnli_size["D (paper)"])  # Table 4 has no size row

    # toy: no paper name, so no paper values even though minilm has one
    assert toy["D"] == pytest.approx(91.5) and toy["D ±"] == pytest.approx(SQRT4_5)  # values 90, 93
    assert toy["D(AFLite)"] == pytest.approx(70.0) and toy["Δ"] == pytest.approx(-21.5) and toy["seeds"] == 1
    assert nan(toy["D_rand"]) and nan(toy["D (paper)"]) and nan(toy["Δ (paper)"])
    assert toy_size["D"] == 500 and nan(toy_size["D_rand"]) and toy_size["D(AFLite)"] == 200
    assert toy_size["Δ"] == -300


def test_snli_size_row_has_the_paper_sizes():
    metrics = [{**r, "dataset": "snli"} for r in METRICS if r["dataset"] == "qnli"]
    df = rep.text_table(metrics, {"datasets": {"snli": "SNLI"}, "models": {"minilm": "BERT"}})
    size = df[df["model"] == "Training set size"].iloc[0]
    assert (size["D (paper)"], size["D_rand (paper)"], size["D(AFLite) (paper)"]) == (550000, 92000, 92000)
    assert size["Δ (paper)"] == -458000
    partial = df[df["model"] == "minilm-PartialInput"].iloc[0]
    assert (partial["D (paper)"], partial["D_rand (paper)"], partial["D(AFLite) (paper)"]) == (71.5, 70.1, 48.4)
    assert partial["Δ (paper)"] == pytest.approx(-23.1)


def test_markdown_rounds_to_one_decimal_and_sizes_to_integers(tmp_path):
    df = rep.text_table(METRICS, PAPER_NAMES)
    report.write_table(df, tmp_path / "t.csv", tmp_path / "t.md", digits=1, whole_rows=rep.size_rows(df))
    lines = (tmp_path / "t.md").read_text(encoding="utf-8").splitlines()
    assert lines[2].startswith("| qnli | minilm | 82.0 | 78.0 | 63.0 | -19.0 | 1 | 93.7 | – | 77.7 | -16.0 | 2.8 | – |")
    assert lines[5] == "| qnli | Training set size | 1000 | 300 | 300 | -700 | – | – | – | – | – | – | – | – |"
    assert pd.read_csv(tmp_path / "t.csv")["D"].iloc[0] == pytest.approx(82.0)


def test_duplicate_seed_and_unknown_train_set_are_errors():
    with pytest.raises(ValueError, match="two metrics records"):
        rep.text_table([*METRICS, METRICS[0]], PAPER_NAMES)
    with pytest.raises(ValueError, match="unknown train_set"):
        rep.accuracy_matrix([{**METRICS[0], "train_set": "D_92k"}])


def test_accuracy_matrix():
    df = rep.accuracy_matrix(METRICS)
    assert df.shape == (8, 10)
    assert list(df.columns) == list(rep.MATRIX_COLUMNS)
    assert list(zip(df["dataset"], df["model"], df["inputs"], df["train_set"], strict=True)) == [
        ("qnli", "minilm", "full", "full"),
        ("qnli", "minilm", "full", "random"),
        ("qnli", "minilm", "full", "aflite"),
        ("qnli", "minilm", "partial", "full"),
        ("qnli", "minilm", "partial", "aflite"),
        ("qnli", "bow", "full", "full"),
        ("toy", "minilm", "full", "full"),
        ("toy", "minilm", "full", "aflite"),
    ]
    aflite = df.iloc[2]
    assert aflite["n_train"] == 300 and aflite["seeds"] == 2
    assert aflite["original dev"] == pytest.approx(76.0) and aflite["original dev ±"] == pytest.approx(SQRT2)
    assert aflite["filtered dev"] == pytest.approx(63.0) and aflite["filtered dev ±"] == pytest.approx(SQRT18)
    assert nan(df.iloc[1]["original dev ±"])


def iteration_frame(sizes: list[int], accuracies: list[float]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "iteration": range(len(accuracies)),
            "size_before": sizes[:-1],
            "removed": [a - b for a, b in zip(sizes[:-1], sizes[1:], strict=True)],
            "size_after": sizes[1:],
            "mean_heldout_accuracy": accuracies,
            "n_above_tau": [a - b for a, b in zip(sizes[:-1], sizes[1:], strict=True)],
            "seconds": [1.0] * len(accuracies),
        },
        columns=["iteration", "size_before", "removed", "size_after", "mean_heldout_accuracy", "n_above_tau",
                 "seconds"],
    )


def test_iterations_figure_is_written_and_deterministic(tmp_path):
    iterations = {
        "qnli": iteration_frame([1000, 800, 650, 600], [0.81, 0.74, 0.66]),
        "empty": iteration_frame([500], []),
        "toy": iteration_frame([500, 200], [0.9]),
    }
    svgs = []
    for k in range(2):
        png, svg = tmp_path / f"f{k}.png", tmp_path / f"f{k}.svg"
        rep.iterations_figure(iterations, png, svg)
        assert png.stat().st_size > 1000 and svg.stat().st_size > 1000
        svgs.append(svg.read_bytes())
    assert svgs[0] == svgs[1]
    # matplotlib names each text drawn as paths in an SVG comment: the legend names qnli and toy, not "empty",
    # which the note under the panels names as a dataset without iterations
    assert svgs[0].count(b"<!-- qnli -->") == 1 and svgs[0].count(b"<!-- toy -->") == 1
    assert b"<!-- empty -->" not in svgs[0] and b"<!-- empty: no iteration -->" in svgs[0]


def test_iterations_figure_without_any_iteration(tmp_path, recwarn):
    rep.iterations_figure({"empty": iteration_frame([500], [])}, tmp_path / "e.png", tmp_path / "e.svg")
    assert (tmp_path / "e.png").stat().st_size > 1000 and (tmp_path / "e.svg").stat().st_size > 1000
    assert not [w for w in recwarn if "legend" in str(w.message).lower()]
