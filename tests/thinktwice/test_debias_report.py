"""Tests for spurious.thinktwice.debias_report and the Table 1 paper values (small constructed inputs, values worked out
by hand)."""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from spurious.thinktwice import debias_report as dr
from spurious.thinktwice import paper_values
from tests.thinktwice.test_report import result

HEURISTICS6 = ("ans-len", "word-dist", "cos-sim", "sim-ents", "sim-word", "subj-pos")


def frame(ids: list[str], em: list[float], f1: list[float] | None = None) -> pd.DataFrame:
    return pd.DataFrame({"id": ids, "prediction_text": "x", "em": em, "f1": f1 if f1 is not None else em})


def meta(run: str, method: str = "original", addressed: str | None = None, seed: int = 0, model: str = "bert") -> dict:
    return {"run": run, "model": model, "seed": seed, "method": method, "addressed": addressed}


def row(df: pd.DataFrame, method: str, addressed: str | None, metric: str = "EM", model: str = "bert") -> pd.Series:
    sel = (df["model"] == model) & (df["method"] == method) & (df["metric"] == metric)
    sel &= df["addressed"].isna() if addressed is None else df["addressed"] == addressed
    assert sel.sum() == 1
    return df[sel].iloc[0]


@pytest.fixture
def hand() -> tuple[dict, list[dict]]:
    """Two datasets of 4 questions; on 'nq' every question's difference is the same (EM 0, F1 +10)."""
    ids = ["q1", "q2", "q3", "q4"]
    predictions = {
        ("bert/seed0", "adv"): frame(ids, [100, 0, 0, 0], [100, 50, 0, 0]),
        # the same questions in another order: aligned by id
        ("bert/resam/ans-len/seed0", "adv"): frame(ids[::-1], [0, 0, 100, 100], [0, 20, 100, 100]),
        ("bert/seed0", "nq"): frame(ids, [100, 0, 100, 0], [100, 30, 100, 40]),
        ("bert/resam/ans-len/seed0", "nq"): frame(ids, [100, 0, 100, 0], [110, 40, 110, 50]),
        ("bert/biasmodel/ans-len/seed0", "adv"): frame(ids, [0, 0, 0, 0]),
    }
    runs = [
        meta("bert/seed0"),
        meta("bert/resam/ans-len/seed0", "resam", "ans-len"),
        meta("bert/biasmodel/ans-len/seed0", "biasmodel", "ans-len"),  # ignored
    ]
    return predictions, runs


# ----------------------------------------------------------------------------------------------------------------------
# paper values


def test_table1_paper_values() -> None:
    for method, rows in paper_values.TABLE1.items():
        assert tuple(rows) == HEURISTICS6  # no ans-pos row: nothing to debias
        cells = [v for r in rows.values() for v in r.values()]
        assert len(cells) == 18
        assert float(np.mean(cells)) == pytest.approx(paper_values.TABLE1_AVERAGE[method], abs=0.01)
    for d, v in paper_values.TABLE1_ORIGINAL.items():  # the Original row is Figure 3's BERT-Base value, rounded
        assert v == pytest.approx(paper_values.OOD_PERFORMANCE["BERT-Base"][d], abs=0.051)
    creg = paper_values.TABLE1["CReg"]  # §5.3: "by 2.8% of an exact match on average and by 7.5 on NQ"; sim-word 1.5
    assert float(np.mean(list(creg["word-dist"].values()))) == pytest.approx(2.8)
    assert creg["word-dist"]["NaturalQuestions"] == 7.5
    assert float(np.mean(list(creg["sim-word"].values()))) == pytest.approx(1.53, abs=0.01)
    assert paper_values.TABLE1["LMix"]["sim-word"]["NaturalQuestions"] == -21.4


def test_paper_dataset_name() -> None:
    assert dr.paper_dataset_name("nq") == "NaturalQuestions"
    assert dr.paper_dataset_name("adversarial_qa") == "AdversarialQA"
    assert dr.paper_dataset_name("TriviaQA") == "TriviaQA"
    assert dr.paper_dataset_name("squad") is None


# ----------------------------------------------------------------------------------------------------------------------
# Table 1


def test_table1_hand_computed(hand: tuple[dict, list[dict]]) -> None:
    predictions, runs = hand
    df = dr.table1(predictions, runs, datasets=["adv", "nq"], iterations=200)
    assert list(df["method"]) == ["Original", "ReSam", "ReSam"] * 2
    assert list(df["metric"]) == ["EM"] * 3 + ["F1"] * 3
    assert "paper" not in " ".join(df.columns) and "biasmodel" not in set(df["method"])
    # absolute scores and differences in columns of their own: no plain runs, so "score" and "Δ vs original"
    values = ["adv score", "nq score", "average score", "adv Δ vs original", "nq Δ vs original",
              "average Δ vs original"]
    assert [c for c in df.columns if not c.endswith(("q025", "q975"))][5:] == values
    original = row(df, "Original", None)
    assert original["adv score"] == 25.0 and original["nq score"] == 50.0 and original["average score"] == 37.5
    assert original["n_seeds"] == 1 and all(math.isnan(original[c]) for c in values[3:])
    em = row(df, "ReSam", "ans-len")
    assert all(math.isnan(em[c]) for c in values[:3])  # a debiased row has no absolute cell
    assert em["adv Δ vs original"] == 25.0  # (0 + 100 + 0 + 0) / 4
    # equal answers: zero width
    assert em["nq Δ vs original"] == em["nq Δ vs original q025"] == em["nq Δ vs original q975"] == 0.0
    assert em["average Δ vs original"] == 12.5
    f1 = row(df, "ReSam", "ans-len", "F1")
    assert f1["adv Δ vs original"] == 17.5  # (0 + 50 + 20 + 0) / 4
    # the same +10 everywhere
    assert f1["nq Δ vs original"] == f1["nq Δ vs original q025"] == f1["nq Δ vs original q975"] == 10.0
    for r in (em, f1):
        for d in ("adv Δ vs original", "average Δ vs original"):
            assert r[f"{d} q025"] <= r[d] <= r[f"{d} q975"] and r[f"{d} q025"] < r[f"{d} q975"]
    avg = row(df, "ReSam", "average")  # one heuristic: its average row repeats it
    assert avg["adv Δ vs original"] == em["adv Δ vs original"]
    assert avg["adv Δ vs original q975"] == em["adv Δ vs original q975"]
    assert "paired bootstrap" in df.attrs["caption"] and "adv 4" in df.attrs["caption"]
    assert "distils from the original model" in df.attrs["caption"]  # CReg's teacher is not the control


def _loop_interval(values: np.ndarray, idx: np.ndarray) -> tuple[float, float]:
    means = [float(np.mean(values[idx[b]])) for b in range(idx.shape[0])]
    q = np.quantile(means, (0.025, 0.975))
    return round(float(q[0]), 2), round(float(q[1]), 2)


def test_table1_intervals_match_a_loop_bootstrap() -> None:
    rng = np.random.default_rng(5)
    n, iterations, seed = 60, 300, 7
    ids = [f"q{i:02d}" for i in range(n)]
    scores = {name: rng.choice([0.0, 100.0], size=n) for name in ("orig", "a", "b")}
    predictions = {(name, "adv"): frame(ids, list(v)) for name, v in scores.items()}
    runs = [meta("orig"), meta("a", "creg", "ans-len"), meta("b", "creg", "cos-sim")]
    df = dr.table1(predictions, runs, datasets=["adv"], iterations=iterations, seed=seed)
    # the documented draws: Generator.integers from SeedSequence([seed, crc32(dataset)])
    idx = np.random.default_rng(np.random.SeedSequence([seed, zlib.crc32(b"adv")])).integers(0, n, (iterations, n))
    assert np.array_equal(idx, dr.bootstrap_indices(n, iterations, seed, "adv"))
    for name, h in (("a", "ans-len"), ("b", "cos-sim")):
        r = row(df, "CReg", h)
        assert (r["adv Δ vs original q025"], r["adv Δ vs original q975"]) == _loop_interval(
            scores[name] - scores["orig"], idx
        )
    avg = row(df, "CReg", "average")  # averaged per draw over the heuristics
    expected = (scores["a"] + scores["b"]) / 2 - scores["orig"]
    assert (avg["adv Δ vs original q025"], avg["adv Δ vs original q975"]) == _loop_interval(expected, idx)
    assert avg["adv Δ vs original"] == round(float(expected.mean()), 2)
    original = row(df, "Original", None)
    assert (original["adv score q025"], original["adv score q975"]) == _loop_interval(scores["orig"], idx)
    again = dr.table1(predictions, runs, datasets=["adv"], iterations=iterations, seed=seed)
    pd.testing.assert_frame_equal(df, again)
    other_seed = dr.table1(predictions, runs, datasets=["adv"], iterations=iterations, seed=seed + 1)
    assert not other_seed.equals(df)


def test_table1_averages_seeds() -> None:
    ids = ["q1", "q2"]
    predictions = {
        ("o0", "nq"): frame(ids, [0, 0]),
        ("o1", "nq"): frame(ids, [100, 0]),
        ("m0", "nq"): frame(ids, [100, 100]),  # +100 against seed 0
        ("m1", "nq"): frame(ids, [100, 0]),  # +0 against seed 1
    }
    runs = [
        meta("o0", seed=0),
        meta("o1", seed=1),
        meta("m0", "lmix", "word-dist", 0),
        meta("m1", "lmix", "word-dist", 1),
    ]
    df = dr.table1(predictions, runs, datasets=["nq"], iterations=50)
    r = row(df, "LMix", "word-dist")
    assert r["nq Δ vs original"] == 50.0 and r["n_seeds"] == 2
    assert row(df, "Original", None)["nq score"] == 25.0 and row(df, "Original", None)["n_seeds"] == 2


def test_table1_errors(hand: tuple[dict, list[dict]]) -> None:
    predictions, runs = hand
    bad = dict(predictions)
    bad[("bert/resam/ans-len/seed0", "nq")] = frame(["q1", "q2", "q3", "q9"], [0, 0, 0, 0])
    with pytest.raises(ValueError, match=r"run 'bert/resam/ans-len/seed0' on 'nq'.*other question ids"):
        dr.table1(bad, runs, datasets=["adv", "nq"])
    bad[("bert/resam/ans-len/seed0", "nq")] = frame(["q1", "q1", "q2", "q3"], [0, 0, 0, 0])
    with pytest.raises(ValueError, match="repeat the id 'q1'"):
        dr.table1(bad, runs, datasets=["nq"])
    with pytest.raises(ValueError, match="no predictions of run 'bert/seed0' on dataset 'trivia'"):
        dr.table1(predictions, runs, datasets=["trivia"])
    orphan = [*runs, meta("bert/creg/ans-len/seed3", "creg", "ans-len", seed=3)]
    with pytest.raises(ValueError, match="no original run of model 'bert', seed 3"):
        dr.table1(predictions, orphan, datasets=["adv"])
    with pytest.raises(ValueError, match="BERT-Base only"):
        dr.table1(predictions, runs, datasets=["adv"], paper_name="RoBERTa-Base")


@pytest.fixture
def full() -> tuple[dict, list[dict], list[str]]:
    """BERT debiased by all three methods for all six heuristics, on the paper's three datasets (4 questions)."""
    datasets = ["adversarialqa", "nq", "triviaqa"]
    ids = ["a", "b", "c", "d"]
    runs = [meta("bert/seed0")]
    predictions = {("bert/seed0", d): frame(ids, [100, 0, 0, 0]) for d in datasets}
    for i, method in enumerate(dr.DEBIASING_METHODS):
        for j, h in enumerate(HEURISTICS6):
            run = f"bert/{method}/{h}/seed0"
            runs.append(meta(run, method, h))
            em = [100, 100 if (i + j) % 2 else 0, 0, 0]
            predictions.update({(run, d): frame(ids, em) for d in datasets})
    return predictions, runs, datasets


def test_table1_paper_columns_and_writer(tmp_path: Path, full: tuple[dict, list[dict], list[str]]) -> None:
    predictions, runs, datasets = full
    df = dr.table1(predictions, runs, datasets=datasets, iterations=100, paper_name="bert-base")
    cols = list(df.columns)
    assert cols.index("nq Δ vs original (paper)") == cols.index("nq Δ vs original q975") + 1
    assert cols.index("nq score (paper)") == cols.index("nq score q975") + 1
    original = row(df, "Original", None)
    # the paper's Original row is absolute: beside our absolute scores, never in a difference column
    assert original["adversarialqa score (paper)"] == 29.8
    assert original["average score (paper)"] == round((29.8 + 67.8 + 46.1) / 3, 2)
    assert math.isnan(original["adversarialqa Δ vs original (paper)"])
    assert math.isnan(row(df, "Original", None, "F1")["nq score (paper)"])  # the paper's values sit beside our EM
    creg = row(df, "CReg", "word-dist")
    assert creg["nq Δ vs original (paper)"] == 7.5 and creg["average Δ vs original (paper)"] == 2.8
    assert math.isnan(creg["nq score (paper)"])
    assert row(df, "LMix", "average")["average Δ vs original (paper)"] == -5.31  # the printed average (all cells)
    assert row(df, "ReSam", "average")["nq Δ vs original (paper)"] == round((-5.6 + 1.3 + 0.3 + 1.5 + 0.1 - 0.7) / 6, 2)
    assert row(df, "ReSam", "ans-len")["adversarialqa Δ vs original"] == 0.0
    assert row(df, "ReSam", "word-dist")["nq Δ vs original"] == 25.0
    assert len(df) == 2 * (1 + 3 * 7)
    assert "caption says F1" in df.attrs["caption"] and "'<dataset> score'" in df.attrs["caption"]

    csv, md = tmp_path / "t1.csv", tmp_path / "t1.md"
    dr.write_table1(df, csv, md)
    back = pd.read_csv(csv)
    assert list(back.columns) == cols and back.loc[1, "nq Δ vs original"] == 0.0 and math.isnan(back.loc[1, "nq score"])
    text = md.read_text()
    lines = text.splitlines()
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    # the Markdown has the CSV's value columns (each with its interval folded into the cell) under the same headers
    assert header == [c for c in cols if not c.endswith(("q025", "q975"))]
    assert header[5:9] == ["adversarialqa score", "adversarialqa score (paper)", "nq score", "nq score (paper)"]
    table = {}
    for line in lines[2:2 + len(df)]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert len(cells) == len(header)
        table[tuple(cells[1:4])] = dict(zip(header, cells, strict=True))
    orig = table[("Original", "–", "EM")]
    assert orig["adversarialqa score"].startswith("25.00 [") and orig["adversarialqa score (paper)"] == "29.80"
    assert orig["adversarialqa Δ vs original"] == "–" and orig["adversarialqa Δ vs original (paper)"] == "–"
    resam = table[("ReSam", "word-dist", "EM")]
    assert resam["nq score"] == "–" and resam["nq Δ vs original"].startswith("**+25.00 [")  # the top gain in bold
    ans_len = table[("ReSam", "ans-len", "EM")]
    assert ans_len["adversarialqa Δ vs original"] == "+0.00 [+0.00, +0.00]"
    assert ans_len["adversarialqa Δ vs original (paper)"] == "-0.80"
    assert "caption says F1" in lines[-1]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t1.csv", "t1.md"]


# ----------------------------------------------------------------------------------------------------------------------
# Figure 5 table and cross-bias matrices


def bias(
    model: str, heuristic: str, value: float, method: str = "original", addressed: str | None = None, **kw
) -> dict:
    kw.setdefault("model_seed", 0)
    return result(model, heuristic, value, method=method, addressed=addressed, split="validation", **kw)


@pytest.fixture
def bias_results() -> list[dict]:
    return [
        bias("bert", "ans-len", 12.0),
        bias("bert", "word-dist", 8.0),
        bias("bert", "cos-sim", 2.0),
        bias("bert", "ans-pos", 0.0, found=False),
        bias("bert", "ans-len", 7.0, "resam", "ans-len"),
        bias("bert", "word-dist", 9.0, "resam", "ans-len"),
        bias("bert", "cos-sim", 0.0, "resam", "ans-len", found=False),
        bias("bert", "ans-len", 13.0, "resam", "word-dist"),
        bias("bert", "word-dist", 5.0, "resam", "word-dist"),
        bias("bert", "ans-len", 12.5, "lmix", "ans-len"),
        bias("bert", "word-dist", 0.0, "lmix", "word-dist", found=False),
        bias("bert", "ans-len", 99.0, "biasmodel", "ans-len"),  # ignored
        result("Human", "ans-len", 13.5, split="validation", annotator=0),
        result("Human", "ans-pos", 0.0, found=False, split="validation", annotator=1),
    ]


def test_methods_bias_table(bias_results: list[dict]) -> None:
    df = dr.methods_bias_table(bias_results, paper_name="BERT-Base")
    key = list(zip(df["heuristic"], df["method"], strict=True))
    assert key == [
        ("ans-len", "Original"), ("ans-len", "ReSam"), ("ans-len", "LMix"), ("ans-len", "Human"),
        ("word-dist", "Original"), ("word-dist", "ReSam"), ("word-dist", "LMix"),
        ("cos-sim", "Original"), ("ans-pos", "Original"), ("ans-pos", "Human"),
    ]  # fmt: skip
    t = df.set_index(["heuristic", "method"])
    assert t.loc[("ans-len", "ReSam"), "prediction_bias"] == 7.0  # the model debiased FOR ans-len
    assert t.loc[("ans-len", "ReSam"), "change"] == -5.0
    assert t.loc[("word-dist", "ReSam"), "prediction_bias"] == 5.0 and t.loc[("word-dist", "ReSam"), "change"] == -3.0
    # test_report.result: the worse segment's q975 lies `bias` under 82, its mean 3 under that, its q025 6 under
    assert t.loc[("ans-len", "ReSam"), "worse_em_q975"] == 75.0 and t.loc[("ans-len", "ReSam"), "worse_em_mean"] == 72.0
    assert t.loc[("ans-len", "ReSam"), "worse_em_q025"] == 69.0 and t.loc[("ans-len", "ReSam"), "worse_size"] == 1651
    lmix = t.loc[("word-dist", "LMix")]
    assert lmix["worse_group"] == "n/a" and lmix["n_found"] == 0 and lmix["prediction_bias"] == 0.0
    assert math.isnan(lmix["worse_em_mean"]) and lmix["change"] == -8.0
    assert math.isnan(t.loc[("ans-len", "Original"), "change"])
    assert t.loc[("ans-len", "Human"), "prediction_bias"] == 13.5
    assert t.loc[("ans-len", "Original"), "prediction_bias (paper)"] == 12.51
    assert t.loc[("ans-len", "LMix"), "prediction_bias (paper)"] == 6.36  # the quantiles CSV's (new) LMix
    assert t.loc[("ans-len", "ReSam"), "worse_em_q975 (paper)"] == 69.75
    assert t.loc[("ans-len", "Human"), "prediction_bias (paper)"] == 13.55
    assert math.isnan(t.loc[("ans-pos", "Original"), "worse_em_q975"])
    assert "100 draws of 800 examples" in df.attrs["caption"]


def test_methods_bias_table_averages_seeds(bias_results: list[dict]) -> None:
    more = [
        bias("bert", "ans-len", 10.0, model_seed=1),
        bias("bert", "ans-len", 0.0, "resam", "ans-len", model_seed=1, found=False),
    ]
    t = dr.methods_bias_table(bias_results + more).set_index(["heuristic", "method"])
    assert t.loc[("ans-len", "Original"), "prediction_bias"] == 11.0 and t.loc[("ans-len", "Original"), "n_seeds"] == 2
    resam = t.loc[("ans-len", "ReSam")]
    assert resam["prediction_bias"] == 3.5 and resam["n_found"] == 1 and resam["worse_em_q975"] == 75.0
    with pytest.raises(ValueError, match="two bias results"):
        dr.methods_bias_table([*bias_results, bias_results[0]])


def test_cross_bias_matrix(bias_results: list[dict]) -> None:
    m = dr.cross_bias_matrix(bias_results, dataset="squad", split="validation", method="ReSam", paper_name="BERT-Base")
    assert list(m.index) == ["ans-len", "word-dist"] and m.index.name == "addressed"
    assert list(m.columns) == ["ans-len", "word-dist", "cos-sim", "others_mean", "diagonal (paper)"]
    assert m.at["ans-len", "ans-len"] == -5.0  # 7 - 12
    assert m.at["ans-len", "word-dist"] == 1.0  # 9 - 8
    assert m.at["ans-len", "cos-sim"] == -2.0  # no threshold counts 0: 0 - 2
    assert m.at["word-dist", "ans-len"] == 1.0 and m.at["word-dist", "word-dist"] == -3.0
    assert math.isnan(m.at["word-dist", "cos-sim"])  # not measured
    assert m.at["ans-len", "others_mean"] == -0.5 and m.at["word-dist", "others_mean"] == 1.0
    assert m.at["ans-len", "diagonal (paper)"] == round(6.87 - 12.51, 2)
    assert m.attrs["n_seeds"] == 1 and "ReSam" in m.attrs["caption"]
    lmix = dr.cross_bias_matrix(bias_results, dataset="squad", split="validation", method="lmix")
    assert lmix.at["ans-len", "ans-len"] == 0.5 and lmix.at["word-dist", "word-dist"] == -8.0
    assert "diagonal (paper)" not in lmix


def test_cross_bias_table_and_markdown(tmp_path: Path, bias_results: list[dict]) -> None:
    from spurious.thinktwice import report

    table = dr.cross_bias_table(bias_results, dataset="squad", split="validation", paper_name="BERT-Base")
    assert list(table.columns) == [
        "versus", "method", "addressed", "n_seeds", "ans-len", "word-dist", "cos-sim", "others_mean",
        "diagonal (paper)",
    ]  # fmt: skip
    assert set(table["versus"]) == {"Original"}  # no plain control: the original model is the baseline
    assert list(zip(table["method"], table["addressed"], strict=True)) == [
        ("ReSam", "ans-len"), ("ReSam", "word-dist"), ("LMix", "ans-len"), ("LMix", "word-dist"),
    ]  # fmt: skip
    assert table.loc[0, "ans-len"] == -5.0 and math.isnan(table.loc[2, "cos-sim"])
    assert table.loc[3, "diagonal (paper)"] == round(0.0 - 8.62, 2)
    report.write_table(table, tmp_path / "c.csv", tmp_path / "c.md")
    text = (tmp_path / "c.md").read_text()
    assert "| Original | ReSam | ans-len | 1 | -5.00 | 1.00 | -2.00 | -0.50 | -5.64 |" in text
    assert "| Original | LMix | word-dist | 1 | – | -8.00 | – |" in text
    methods = dr.methods_bias_table(bias_results)
    report.write_table(methods, tmp_path / "m.csv", tmp_path / "m.md")
    assert (
        "| bert | squad | validation | word-dist | LMix | 1 | 0 | 0.00 | -8.00 | – | n/a | – |"
        in (tmp_path / "m.md").read_text()
    )


def test_cross_bias_matrix_seeds_and_errors(bias_results: list[dict]) -> None:
    two_seeds = bias_results + [
        bias("bert", "ans-len", 10.0, model_seed=1),
        bias("bert", "ans-len", 9.0, "resam", "ans-len", model_seed=1),
    ]
    m = dr.cross_bias_matrix(two_seeds, dataset="squad", split="validation", method="resam")
    assert m.at["ans-len", "ans-len"] == -3.0  # mean of (7 - 12) and (9 - 10)
    assert m.attrs["n_seeds"] == "1/2"
    orphan = [*bias_results, bias("bert", "ans-len", 9.0, "resam", "ans-len", model_seed=4)]
    with pytest.raises(ValueError, match="no original bias result of 'bert', seed 4"):
        dr.cross_bias_matrix(orphan, dataset="squad", split="validation", method="resam")
    other = [*bias_results, bias("roberta", "ans-len", 1.0, "resam", "ans-len")]
    with pytest.raises(ValueError, match="pass model="):
        dr.cross_bias_matrix(other, dataset="squad", split="validation", method="resam")
    with pytest.raises(ValueError, match="no bias results of method 'creg'"):
        dr.cross_bias_matrix(bias_results, dataset="squad", split="validation", method="creg")


# ----------------------------------------------------------------------------------------------------------------------
# Figure 3 table


def metrics(model: str, dataset: str, em: float, f1: float, seed: int = 0, method: str = "original") -> dict:
    return {
        "model": model,
        "dataset": dataset,
        "split": "validation",
        "seed": seed,
        "method": method,
        "addressed": None,
        "exact_match": em,
        "f1": f1,
        "n": 100,
        "run": f"{model}/seed{seed}",
    }


@pytest.fixture
def metric_list() -> list[dict]:
    return [
        metrics("bert", "adversarialqa", 30.0, 40.0),
        metrics("bert", "adversarialqa", 32.0, 42.0, seed=1),
        metrics("bert", "nq", 60.0, 70.0),
        metrics("roberta", "adversarialqa", 40.0, 50.0),
        metrics("roberta", "nq", 70.0, 80.0),
        metrics("bert", "nq", 1.0, 1.0, method="lmix"),  # not an original model
    ]


def test_ood_performance_table(metric_list: list[dict]) -> None:
    df = dr.ood_performance_table(metric_list, paper_names={"bert": "BERT-Base"})
    t = df.set_index(["model", "metric"])
    assert t.loc[("bert", "EM"), "adversarialqa"] == 31.0 and t.loc[("bert", "EM"), "adversarialqa min"] == 30.0
    assert t.loc[("bert", "EM"), "nq"] == 60.0 and t.loc[("bert", "EM"), "average"] == 45.5
    assert t.loc[("bert", "EM"), "n_seeds"] == "1/2"
    assert t.loc[("roberta", "F1"), "average"] == 65.0
    assert t.loc[("bert", "EM"), "nq (paper)"] == 67.85 and math.isnan(t.loc[("bert", "F1"), "nq (paper)"])
    assert math.isnan(t.loc[("roberta", "EM"), "nq (paper)"])


# ----------------------------------------------------------------------------------------------------------------------
# figures


def summary(run: str, method: str, addressed: str | None, offset: float) -> dict:
    curve = [{"step": s, "loss": 3.0 / (1 + s / 100) + offset} for s in (400, 0, 200)]  # unsorted on purpose
    ood = [{"step": s, "loss": 4.0 / (1 + s / 100) + offset} for s in (0, 200, 400)]
    return {"run": run, "method": method, "addressed": addressed, "validation_curves": {"validation": curve, "nq": ood}}


FIGURES: dict[str, Callable[..., None]] = {
    "figure6": lambda data, png, svg: dr.figure6(data["bias"], png, svg, dataset="squad", split="validation"),
    "figure3": lambda data, png, svg: dr.figure3(data["metrics"], png, svg, paper_names={"bert": "BERT-Base"}),
    "figure5": lambda data, png, svg: dr.figure5(data["bias"], png, svg),
    "cross": lambda data, png, svg: dr.figure_cross_bias(data["bias"], png, svg, dataset="squad", split="validation"),
    "loss": lambda data, png, svg: dr.figure_loss_curves(data["summaries"], png, svg, max_step=300),
}


@pytest.fixture
def figure_data(bias_results: list[dict], metric_list: list[dict]) -> dict:
    lmix = summary("bert/lmix/word-dist/seed0", "lmix", "word-dist", 0.1)
    lmix["train_losses"] = [
        {"step": s, "loss": 2.0, "gate": 0.5 + s / 400, "gate_q10": 0.2 + s / 400, "gate_q90": 0.9 + s / 400}
        for s in range(1, 400, 50)
    ]
    summaries = [
        summary("bert/seed0", "original", None, 0.0),
        summary("bert/plain/seed0", "plain", None, 0.05),
        lmix,
        summary("bert/resam/word-dist/seed0", "resam", "word-dist", -0.2),
        {
            "run": "bert/creg/ans-len/seed0",
            "method": "creg",
            "addressed": "ans-len",
            "validation_losses": [{"step": 0, "loss": 3.0}, {"step": 200, "loss": 1.5}],
        },
    ]
    return {"bias": bias_results, "metrics": metric_list, "summaries": summaries}


@pytest.mark.parametrize("name", sorted(FIGURES))
def test_figures_deterministic(tmp_path: Path, figure_data: dict, name: str) -> None:
    png, svg = tmp_path / "f.png", tmp_path / "f.svg"
    FIGURES[name](figure_data, png, svg)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 1000
    text = svg.read_text()
    assert text.lstrip().startswith("<?xml") and "</svg>" in text and "<dc:date>" not in text
    first_png, first_svg = png.read_bytes(), svg.read_bytes()
    FIGURES[name](figure_data, png, svg)
    assert png.read_bytes() == first_png and svg.read_bytes() == first_svg
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.png", "f.svg"]


@pytest.mark.parametrize("name", ["figure3", "cross", "loss"])
def test_figures_atomic_on_error(tmp_path: Path, figure_data: dict, name: str, monkeypatch: pytest.MonkeyPatch) -> None:
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
        FIGURES[name](figure_data, tmp_path / "f.png", tmp_path / "f.svg")
    assert list(tmp_path.iterdir()) == []  # the PNG and the SVG are one pair: neither, and no temporary file


@pytest.mark.parametrize(("max_step", "x_max"), [(10_000, 10_000.0), (250, 200.0), (None, 12_000.0)])
def test_loss_curves_draw_only_the_first_steps(tmp_path: Path, max_step: int | None, x_max: float) -> None:
    """Figs. 8-9 show the first 10,000 steps: points past max_step are not drawn (the lines' and the gate band's x
    data), the axis ends there, and None draws every point. Curves at steps 0, 5,000, 10,000, 12,000 (the gate at
    0, 6,000, 11,000): with 10,000 the last curve point and the 11,000 gate point go; with 250 only steps 0 and 200
    of the short run remain."""
    from matplotlib.collections import PolyCollection

    from spurious.core.report import figures

    long = [{"step": s, "loss": 3.0 - s / 10_000} for s in (0, 5_000, 10_000, 12_000)]
    lmix = {
        "run": "bert/lmix/word-dist/seed0", "method": "lmix", "addressed": "word-dist",
        "validation_curves": {"validation": long, "nq": long},
        "train_losses": [{"step": s, "loss": 1.0, "gate": 1.0, "gate_q10": 0.5, "gate_q90": 1.5}
                         for s in (0, 6_000, 11_000)],
    }  # fmt: skip
    if max_step == 250:  # a short run: nothing beyond 200 besides the cut-off points
        lmix["validation_curves"] = {"validation": [{"step": s, "loss": 1.0} for s in (0, 200, 400)]}
        lmix["train_losses"] = [{"step": s, "loss": 1.0, "gate": 1.0} for s in (0, 100, 300)]
    original = {"run": "bert/seed0", "method": "original", "validation_curves": {"validation": long}}
    with figures.capture_figures() as captured:
        drawn = dr.figure_loss_curves([original, lmix], tmp_path / "a.png", tmp_path / "a.svg", max_step=max_step)
    (fig,) = captured
    xs = [x for ax in fig.axes for line in ax.get_lines() for x in np.asarray(line.get_xdata(), dtype=float)]
    bands = [c for ax in fig.axes for c in ax.collections if isinstance(c, PolyCollection)]
    xs += [float(v) for band in bands for path in band.get_paths() for v in path.vertices[:, 0]]
    # titles: "<method>\n<run>; behind: <control>"
    panel = {ax.get_title().split("\n", 1)[1].split(";")[0]: ax for ax in fig.axes if ax.get_title()}
    if max_step == 250:
        # the original's curve is cut at 5,000 > 250: only step 0 of it remains, behind the LMix panel too
        assert max(xs) == 200.0 and drawn == {"bert/seed0": 0.0, "bert/lmix/word-dist/seed0": 200.0}
        assert panel["bert/lmix/word-dist/seed0"].get_xlim()[1] == 250.0
    else:
        assert max(xs) == x_max and set(drawn.values()) == {x_max}
    if max_step == 10_000:
        assert 11_000.0 not in xs and 12_000.0 not in xs and 10_000.0 in xs and 6_000.0 in xs
        assert panel["bert/seed0"].get_xlim()[1] == 10_000.0
        assert fig.get_suptitle().endswith("; the first 10,000 steps")
    if max_step is None:
        assert 11_000.0 in xs and fig.get_suptitle().endswith("; every step")


def test_figure_inputs_rejected(tmp_path: Path, bias_results: list[dict]) -> None:
    with pytest.raises(ValueError, match="no training summaries"):
        dr.figure_loss_curves([], tmp_path / "a.png", tmp_path / "a.svg")
    with pytest.raises(ValueError, match="no debiasing method"):
        dr.figure_cross_bias(bias_results, tmp_path / "a.png", tmp_path / "a.svg", dataset="nq", split="validation")
    assert list(tmp_path.iterdir()) == []


# ----------------------------------------------------------------------------------------------------------------------
# the matched plain control


@pytest.fixture
def with_control() -> tuple[dict, list[dict]]:
    """4 questions on 'nq': original EM 25, plain 50, LMix (word-dist) 75; F1 = EM."""
    ids = ["q1", "q2", "q3", "q4"]
    predictions = {
        ("bert/seed0", "nq"): frame(ids, [100, 0, 0, 0]),
        ("bert/plain/seed0", "nq"): frame(ids, [100, 100, 0, 0]),
        ("bert/lmix/word-dist/seed0", "nq"): frame(ids, [100, 100, 100, 0]),
    }
    runs = [meta("bert/seed0"), meta("bert/plain/seed0", "plain"),
            meta("bert/lmix/word-dist/seed0", "lmix", "word-dist")]
    return predictions, runs


def test_table1_against_the_matched_control(with_control: tuple[dict, list[dict]]) -> None:
    predictions, runs = with_control
    df = dr.table1(predictions, runs, datasets=["nq"], iterations=100, original_matches_control=False)
    assert list(df["method"]) == ["Original", "Plain", "LMix", "LMix"] * 2
    original, plain, lmix = row(df, "Original", None), row(df, "Plain", None), row(df, "LMix", "word-dist")
    score, vs_plain, vs_original = "nq score", "nq Δ vs plain", "nq Δ vs original"
    # absolute scores (Original 25, Plain 50) only under "score"; differences only under "Δ vs ..."
    assert original[score] == 25.0 and math.isnan(original[vs_plain]) and math.isnan(original[vs_original])
    assert plain[score] == 50.0 and math.isnan(plain[vs_plain]) and plain[vs_original] == 25.0  # 50 - 25
    assert math.isnan(lmix[score]) and lmix[vs_plain] == 25.0 and lmix[vs_original] == 50.0  # 75 - 50, 75 - 25
    assert lmix[f"{vs_plain} q025"] <= 25.0 <= lmix[f"{vs_plain} q975"] and lmix["average Δ vs original"] == 50.0
    for column in [c for c in df.columns if "q0" not in c and "q9" not in c][5:]:
        filled = set(df.loc[df[column].notna(), "method"])
        assert filled == ({"Original", "Plain"} if column.endswith("score") else {"LMix"} | (
            {"Plain"} if "original" in column else set()
        )), column
    caption = df.attrs["caption"]
    assert "matched control" in caption and "measure the budget as well" in caption
    assert "'<dataset> Δ vs plain' = each debiased model minus the Plain model" in caption
    display = dr.table1_display(df)
    cells = display.set_index(["method", "metric", "addressed"], drop=False)
    assert display.loc[1, score].startswith("50.00 [") and display.loc[1, vs_original].startswith("+25.00 [")
    assert display.loc[0, vs_original] == "–" and display.loc[2, vs_plain].startswith("**+25.00 [")
    assert display.loc[2, score] == "–" and display.loc[1, vs_plain] == "–"
    assert len(cells) == 8
    # a debiased run without its seed's plain run, while plain runs exist, is an error
    orphan = [*runs, meta("bert/creg/word-dist/seed1", "creg", "word-dist", seed=1), meta("o1", seed=1)]
    with pytest.raises(ValueError, match="no plain run of model 'bert', seed 1"):
        dr.table1(predictions, orphan, datasets=["nq"])
    same = dr.table1(predictions, runs, datasets=["nq"], iterations=10, original_matches_control=True)
    assert "the two coincide" in same.attrs["caption"]


def test_methods_and_cross_bias_against_the_matched_control(bias_results: list[dict]) -> None:
    control = [
        bias("bert", "ans-len", 10.0, "plain"),
        bias("bert", "word-dist", 6.0, "plain"),
        bias("bert", "cos-sim", 1.0, "plain"),
    ]
    results = bias_results + control
    t = dr.methods_bias_table(results).set_index(["heuristic", "method"])
    assert t.loc[("ans-len", "ReSam"), "change"] == -3.0 and t.loc[("ans-len", "ReSam"), "change_vs_original"] == -5.0
    assert (math.isnan(t.loc[("ans-len", "Plain"), "change"])
            and t.loc[("ans-len", "Plain"), "change_vs_original"] == -2.0)
    assert t.loc[("word-dist", "LMix"), "change"] == -6.0 and t.loc[("word-dist", "LMix"), "change_vs_original"] == -8.0
    m = dr.cross_bias_matrix(results, dataset="squad", split="validation", method="resam")
    assert m.attrs["baseline"] == "plain" and "matched control" in m.attrs["caption"]
    assert (m.at["ans-len", "ans-len"], m.at["ans-len", "word-dist"], m.at["ans-len", "cos-sim"]) == (-3.0, 3.0, -1.0)
    vs_original = dr.cross_bias_matrix(results, dataset="squad", split="validation", method="resam",
                                       baseline="original")
    assert (vs_original.at["ans-len", "ans-len"], vs_original.at["ans-len", "word-dist"]) == (-5.0, 1.0)
    table = dr.cross_bias_table(results, dataset="squad", split="validation")
    assert list(table["versus"]) == ["Plain"] * 4 + ["Original"] * 4
    with pytest.raises(ValueError, match="baseline must be"):
        dr.cross_bias_matrix(results, dataset="squad", split="validation", method="resam", baseline="teacher")
    # Figure 6: per method the row with the most negative diagonal (ReSam: ans-len -3 < word-dist -1; LMix: word-dist
    # 0 - 6 = -6 < ans-len 12.5 - 10 = +2.5)
    fig6 = dr.figure6_table(results, dataset="squad", split="validation")
    assert list(zip(fig6["method"], fig6["addressed"], strict=True)) == [("ReSam", "ans-len"), ("LMix", "word-dist")]
    assert fig6.loc[0, "word-dist"] == 3.0 and fig6.loc[1, "word-dist"] == -6.0 and math.isnan(fig6.loc[1, "ans-len"])
    assert "Plain model" in fig6.attrs["caption"]


def test_runs_table_reports_scales_gate_and_em_ratio() -> None:
    base = {"model": "bert", "seed": 0, "n_train_examples": 100, "n_train_features": 120, "steps": 300}
    summaries = [
        dict(base, run="bert/seed0", method="original"),
        dict(base, run="bert/plain/seed0", method="plain", steps=200),
        dict(
            base, run="bert/lmix/word-dist/seed0", method="lmix", addressed="word-dist", steps=200, scale=0.8,
            scale_source="scale search (results/scale_search/bert/lmix/choice.json)",
            gate={"final_mean": 1.234, "final_q10": 0.5, "final_q90": 2.0},
        ),
        dict(base, run="bert/biasmodel/word-dist/seed0", method="biasmodel", addressed="word-dist"),  # left out
    ]
    metrics = [
        {"run": "bert/seed0", "dataset": "squad", "split": "validation", "exact_match": 50.0, "f1": 60.0},
        {"run": "bert/plain/seed0", "dataset": "squad", "split": "validation", "exact_match": 40.0, "f1": 50.0},
        {"run": "bert/lmix/word-dist/seed0", "dataset": "squad", "split": "validation", "exact_match": 30.0,
         "f1": 41.0},
        {"run": "bert/lmix/word-dist/seed0", "dataset": "nq", "split": "dev", "exact_match": 1.0, "f1": 2.0},
    ]
    df = dr.runs_table(summaries, metrics, id_dataset="squad", id_split="validation")
    assert list(df["method"]) == ["Original", "Plain", "LMix"]
    lmix = df.iloc[2]
    assert lmix["scale"] == 0.8 and lmix["scale_source"].startswith("scale search")
    assert lmix["em_vs_control"] == 0.75 and lmix["gate_final_mean"] == 1.23 and lmix["id_f1"] == 41.0
    assert df.iloc[0]["scale_source"] == "n/a" and math.isnan(df.iloc[1]["em_vs_control"])


def test_quality_floors() -> None:
    runs = pd.DataFrame(
        [
            {"run": "m/plain/seed0", "method": "Plain", "em_vs_control": math.nan, "gate_final_mean": math.nan},
            {"run": "m/lmix/word-dist/seed0", "method": "LMix", "em_vs_control": 0.61, "gate_final_mean": 2.6},
            {"run": "m/creg/word-dist/seed0", "method": "CReg", "em_vs_control": 0.59, "gate_final_mean": math.nan},
            {"run": "m/resam/word-dist/seed0", "method": "ReSam", "em_vs_control": math.nan,
             "gate_final_mean": math.nan},
        ]
    )
    bias_models = pd.DataFrame([{"run": "m/biasmodel/word-dist/seed0", "f1_gap": 10.0, "f1_unbiased": 20.0}])
    checks = dr.quality_floors(runs, bias_models)
    got = {(c.check, c.run.split("/")[1]): c.passed for c in checks.itertuples()}
    assert got == {
        ("ID EM / control EM", "lmix"): True,
        ("LMix gate mean, end of training", "lmix"): False,  # 2.6 > 2.5
        ("ID EM / control EM", "creg"): False,  # 0.59 < 0.6
        ("ID EM / control EM", "resam"): False,  # NaN fails
        ("bias model F1 gap", "biasmodel"): True,  # 10 >= 10
        ("bias model F1, unbiased segment", "biasmodel"): False,  # 20 is not < 20
    }
