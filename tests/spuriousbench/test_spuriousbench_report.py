"""SpuriousBench tables and figures (spurious.spuriousbench.report and .gap_figures) on hand-built metrics, checked by
hand."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from spurious.core.report import figures
from spurious.spuriousbench import gap_figures
from spurious.spuriousbench import report as rep
from spurious.thinktwice import report

EXCL, SEMI, THE = "punctuation:exclamation", "punctuation:semicolon", "determiner:the"
PAPER_NAMES = {"minilm": "BERT-base", "scratch": "BERT-random"}
# Gaps (fractions) per (model, method, feature) for seeds 0, 1, 2. Seed means (%) and sample stds (%):
#   minilm/finetune:  excl 20 ± 10, semi 40 ± 10, the  5 ± 5
#   minilm/balanced:  excl 10 ± 10, semi 30 ± 10, the -5 ± 5
#   scratch/finetune: excl 90 ± 0,  semi 90 ± 10, the 70 ± 10
GAPS = {
    ("minilm", "finetune", EXCL): (0.10, 0.20, 0.30),
    ("minilm", "finetune", SEMI): (0.30, 0.40, 0.50),
    ("minilm", "finetune", THE): (0.00, 0.05, 0.10),
    ("minilm", "balanced", EXCL): (0.00, 0.10, 0.20),
    ("minilm", "balanced", SEMI): (0.20, 0.30, 0.40),
    ("minilm", "balanced", THE): (-0.10, -0.05, 0.00),
    ("scratch", "finetune", EXCL): (0.90, 0.90, 0.90),
    ("scratch", "finetune", SEMI): (0.80, 0.90, 1.00),
    ("scratch", "finetune", THE): (0.60, 0.70, 0.80),
}
DEV = (0.80, 0.82, 0.84)  # dev accuracy per seed: 82 ± 2


def record(model: str, method: str, feature: str, seed: int, gap: float) -> dict:
    return {
        "dataset": "sst2",
        "feature": feature,
        "category": feature.partition(":")[0],
        "kind": "insertion" if feature != THE else "resampling",
        "model": model,
        "model_kind": "random" if model == "scratch" else "pretrained",
        "method": method,
        "seed": seed,
        "gap": gap,
        # supporting and counter symmetric around 50 %, so that acc supporting = 50 + gap / 2
        "acc_supporting": 0.5 + gap / 2,
        "acc_counter": 0.5 - gap / 2,
        "acc_without": 0.6,
        "accuracy": 0.7,
        "dev_accuracy": DEV[seed],
        "n_supporting": 10,
        "n_counter": 10,
        "n_without": 5,
        "paper_name": PAPER_NAMES[model],
    }


def build(gaps=GAPS, seeds=(0, 1, 2)) -> list[dict]:
    # Deliberately out of order: the determiner first, semicolon before exclamation, balanced before finetune.
    out = []
    for feature in (THE, SEMI, EXCL):
        for model, method in (("minilm", "balanced"), ("minilm", "finetune"), ("scratch", "finetune")):
            for seed in seeds:
                out.append(record(model, method, feature, seed, gaps[(model, method, feature)][seed]))
    return out


METRICS = build()


def nan(value) -> bool:
    return isinstance(value, float) and math.isnan(value)


def row(df: pd.DataFrame, **keys) -> pd.Series:
    mask = pd.Series(True, index=df.index)
    for column, value in keys.items():
        mask &= df[column] == value
    assert mask.sum() == 1, keys
    return df[mask].iloc[0]


def test_gap_table_values_and_order():
    df = rep.gap_table(METRICS)
    assert list(df.columns) == list(rep.GAP_TABLE_COLUMNS)
    # category order (punctuation before determiner), features first seen, models first seen, finetune first
    assert list(zip(df["feature"], df["model"], df["method"], strict=True)) == [
        (SEMI, "minilm", "finetune"),
        (SEMI, "minilm", "balanced"),
        (SEMI, "scratch", "finetune"),
        (EXCL, "minilm", "finetune"),
        (EXCL, "minilm", "balanced"),
        (EXCL, "scratch", "finetune"),
        (THE, "minilm", "finetune"),
        (THE, "minilm", "balanced"),
        (THE, "scratch", "finetune"),
    ]
    r = row(df, feature=EXCL, model="minilm", method="finetune")
    assert (r["category"], r["label"], r["seeds"]) == ("punctuation", "BERT-base", 3)
    assert r["gap"] == pytest.approx(20.0) and r["gap ±"] == pytest.approx(10.0)
    assert r["acc supporting"] == pytest.approx(60.0) and r["acc counter"] == pytest.approx(40.0)
    assert r["acc without"] == pytest.approx(60.0) and r["test accuracy"] == pytest.approx(70.0)
    assert r["dev accuracy"] == pytest.approx(82.0) and r["dev accuracy ±"] == pytest.approx(2.0)
    r = row(df, feature=THE, model="minilm", method="balanced")
    assert r["gap"] == pytest.approx(-5.0) and r["gap ±"] == pytest.approx(5.0)
    r = row(df, feature=EXCL, model="scratch", method="finetune")
    assert r["label"] == "BERT-random" and r["gap"] == pytest.approx(90.0) and r["gap ±"] == pytest.approx(0.0)


def test_one_seed_has_no_std(tmp_path):
    df = rep.gap_table([m for m in METRICS if m["seed"] == 1])
    r = row(df, feature=SEMI, model="minilm", method="finetune")
    assert r["seeds"] == 1 and r["gap"] == pytest.approx(40.0) and nan(r["gap ±"]) and nan(r["dev accuracy ±"])
    report.write_table(df, tmp_path / "t.csv", tmp_path / "t.md", digits=rep.DIGITS)
    first = pd.read_csv(tmp_path / "t.csv", keep_default_na=False).iloc[0]
    assert first["gap ±"] == "" and first["gap"] == pytest.approx(40.0)  # an empty CSV cell
    assert "| 40.0 | – |" in (tmp_path / "t.md").read_text(encoding="utf-8")


def test_acc_without_nan_is_skipped():
    metrics = [dict(m) for m in METRICS]
    for m in metrics:
        if m["feature"] == EXCL:
            m["acc_without"] = math.nan if m["seed"] else None  # JSON null or NaN: no feature-free test rows
        elif m["feature"] == SEMI and m["seed"] == 0:
            m["acc_without"] = 0.3
    df = rep.gap_table(metrics)
    assert nan(row(df, feature=EXCL, model="minilm", method="finetune")["acc without"])
    assert row(df, feature=SEMI, model="minilm", method="finetune")["acc without"] == pytest.approx(50.0)


def test_category_table_values_and_order():
    df = rep.category_table(METRICS)
    assert list(df.columns) == list(rep.CATEGORY_TABLE_COLUMNS)
    assert list(zip(df["category"], df["model"], df["method"], strict=True)) == [
        ("punctuation", "minilm", "finetune"),
        ("punctuation", "minilm", "balanced"),
        ("punctuation", "scratch", "finetune"),
        ("determiner", "minilm", "finetune"),
        ("determiner", "minilm", "balanced"),
        ("determiner", "scratch", "finetune"),
    ]
    r = row(df, category="punctuation", model="minilm", method="finetune")
    # features 20 and 40: mean 30, sample std sqrt(((20-30)^2 + (40-30)^2) / 1) = sqrt(200)
    assert (r["features"], r["seeds"], r["label"]) == (2, 3, "BERT-base")
    assert r["gap"] == pytest.approx(30.0) and r["gap ± features"] == pytest.approx(math.sqrt(200))
    assert (r["gap min"], r["gap max"]) == (pytest.approx(20.0), pytest.approx(40.0))
    assert r["gap ± seeds"] == pytest.approx(10.0)
    r = row(df, category="punctuation", model="scratch", method="finetune")
    assert r["gap"] == pytest.approx(90.0) and r["gap ± features"] == pytest.approx(0.0)
    assert r["gap ± seeds"] == pytest.approx(5.0)  # (0 + 10) / 2
    r = row(df, category="determiner", model="minilm", method="balanced")  # one feature: no spread over features
    assert r["features"] == 1 and r["gap"] == pytest.approx(-5.0) and nan(r["gap ± features"])
    assert r["gap min"] == r["gap max"] == pytest.approx(-5.0) and r["gap ± seeds"] == pytest.approx(5.0)


def test_category_mean_is_over_features_of_seed_means():
    # drop seed 2 of semicolon: semicolon 0.30, 0.40 → 35; exclamation 20 → category (20 + 35) / 2 = 27.5,
    # whereas pooling the five runs would give (10 + 20 + 30 + 30 + 40) / 5 = 26
    metrics = [m for m in METRICS if not (m["feature"] == SEMI and m["seed"] == 2)]
    r = row(rep.category_table(metrics), category="punctuation", model="minilm", method="finetune")
    assert r["gap"] == pytest.approx(27.5) and r["seeds"] == 2
    assert r["gap ± seeds"] == pytest.approx((10.0 + math.sqrt(50)) / 2)  # semicolon: std(30, 40) = sqrt(50)


def test_summary_lines():
    lines = rep.summary_lines(METRICS)
    assert lines == [
        "sst2 BERT-base [minilm] finetune: gap % punctuation 30.0, determiner 5.0 (3 features, 3 seeds)",
        "sst2 BERT-base [minilm] balanced: gap % punctuation 20.0, determiner -5.0 (3 features, 3 seeds)",
        "sst2 BERT-random [scratch] finetune: gap % punctuation 90.0, determiner 70.0 (3 features, 3 seeds)",
    ]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"gap": None}, "lacks key\\(s\\) 'gap'"),
        ({"method": "lora"}, "unknown method 'lora'"),
        ({"category": "noun"}, "does not belong to category 'noun'"),
        ({"gap": 20.0, "acc_supporting": 1.0, "acc_counter": 0.8}, "gap = 20.0 is not in"),
        ({"gap": 0.5}, "gap 0.5 != acc_supporting"),
        ({"seed": "0"}, "seed '0' is not an integer"),
    ],
)
def test_invalid_metrics_are_named(change, message):
    bad = dict(METRICS[4])
    for key, value in change.items():
        if value is None:
            del bad[key]
        else:
            bad[key] = value
    with pytest.raises(ValueError, match=message) as info:
        rep.gap_table([*METRICS[:4], bad])
    assert "metrics record 4 (sst2/determiner:the/minilm" in str(info.value)


def test_repeated_seed_and_empty_input_are_errors():
    with pytest.raises(ValueError, match="second record"):
        rep.gap_table([*METRICS, METRICS[0]])
    with pytest.raises(ValueError, match="no metrics records"):
        rep.category_table([])


def test_sizes_table():
    def sizes(feature, prevalence, train=3000):
        return {
            "dataset": "sst2", "feature": feature, "category": feature.partition(":")[0], "kind": "resampling",
            "train": train, "dev": 400, "test_supporting": 590, "test_counter": 1094, "test_without": 0,
            "train_prevalence": prevalence, "train_strength": 0.9, "dev_prevalence": 0.2, "dev_strength": 0.875,
        }  # fmt: skip

    df = rep.sizes_table([sizes(THE, 0.2), sizes("noun:film", 0.25)])
    assert list(df.columns) == list(rep.SIZES_TABLE_COLUMNS)
    assert list(df["feature"]) == ["noun:film", THE]  # CATEGORIES order: noun before determiner
    r = row(df, feature="noun:film")
    counts = ("train", "dev", "test supporting", "test counter", "test without")
    assert [r[c] for c in counts] == [3000, 400, 590, 1094, 0]
    assert r["train prevalence"] == pytest.approx(25.0) and r["train strength"] == pytest.approx(90.0)
    assert r["dev prevalence"] == pytest.approx(20.0) and r["dev strength"] == pytest.approx(87.5)
    bad = sizes(THE, 0.2)
    del bad["dev_strength"]
    with pytest.raises(ValueError, match="sizes record 0 \\(sst2/determiner:the\\) lacks key\\(s\\) 'dev_strength'"):
        rep.sizes_table([bad])
    with pytest.raises(ValueError, match="train_prevalence = 20 is not in"):
        rep.sizes_table([sizes(THE, 20)])


def test_feature_label():
    assert gap_figures.feature_label(EXCL) == "exclamation"
    assert gap_figures.feature_label("syntax:np_np_pp") == "NP -> NP PP"
    assert gap_figures.feature_label("prefix:my_thought") == "My thought:"
    assert gap_figures.feature_label("noun:unknown_word") == "unknown word"


def test_figure2_panels():
    # only minilm has a method besides finetune: one panel, its methods in METHODS order; scratch is named as left out
    panels, left_out = gap_figures.figure2_panels(METRICS)
    assert panels == [("sst2", "BERT-base", [("minilm", "finetune"), ("minilm", "balanced")])]
    assert left_out == ["BERT-random on sst2 (finetune only)"]
    finetuned = [m for m in METRICS if m["method"] == "finetune"]
    assert (gap_figures.figure2_panels(finetuned)
            == ([("sst2", "finetune", [("minilm", "finetune"), ("scratch", "finetune")])], []))


def written(png, svg) -> bool:
    return png.stat().st_size > 1000 and svg.read_text(encoding="utf-8").lstrip().startswith("<?xml")


def test_figures_are_written(tmp_path):
    bars = gap_figures.figure1(METRICS, tmp_path / "f1.png", tmp_path / "f1.svg")
    # Fig. 1's error bars are the spread over the category's features (the paper), not over seeds: punctuation,
    # minilm: features at 20 and 40 -> sqrt(200) (its seed spread is 10); scratch: both at 90 -> 0 (seed spread 5)
    assert set(bars["method"]) == {"finetune"}
    r = row(bars, category="punctuation", model="minilm", method="finetune")
    assert r["error bar"] == pytest.approx(math.sqrt(200)) and r["gap ± seeds"] == pytest.approx(10.0)
    assert row(bars, category="punctuation", model="scratch", method="finetune")["error bar"] == pytest.approx(0.0)
    gap_figures.figure2(METRICS, tmp_path / "f2.png", tmp_path / "f2.svg")
    assert written(tmp_path / "f1.png", tmp_path / "f1.svg") and written(tmp_path / "f2.png", tmp_path / "f2.svg")


def test_figures_with_one_seed_and_one_feature(tmp_path):
    one = [m for m in METRICS if m["seed"] == 0 and m["feature"] == EXCL]
    gap_figures.figure1(one, tmp_path / "f1.png", tmp_path / "f1.svg")
    gap_figures.figure2([m for m in one if m["method"] == "finetune"], tmp_path / "f2.png", tmp_path / "f2.svg")
    assert written(tmp_path / "f1.png", tmp_path / "f1.svg") and written(tmp_path / "f2.png", tmp_path / "f2.svg")
    with pytest.raises(ValueError, match="method 'finetune'"):
        gap_figures.figure1([m for m in one if m["method"] == "balanced"], tmp_path / "x.png", tmp_path / "x.svg")


def test_gap_table_counts_the_seeds_with_constant_predictions():
    metrics = [dict(r) for r in METRICS]
    flagged = [r for r in metrics if r["model"] == "scratch" and r["feature"] == EXCL and r["seed"] in (0, 2)]
    for r in flagged:
        r["constant_prediction"] = True
    df = rep.gap_table(metrics)
    assert row(df, feature=EXCL, model="scratch", method="finetune")["constant"] == 2
    assert row(df, feature=SEMI, model="scratch", method="finetune")["constant"] == 0  # the key is optional


def icl_records(model: str, paper_name: str, shots: int, configured: tuple, realised: tuple) -> list[dict]:
    """In-context records as spurious_icl writes them (the ``icl`` mapping with the configured and realised rates)."""
    out = []
    for seed in (0, 1, 2):
        r = record("minilm", "icl", EXCL, seed, 0.10 * seed)
        r["model"], r["paper_name"] = model, paper_name
        r["icl"] = {
            "shots": shots, "prevalence": configured[0], "strength": configured[1],
            "realised_prevalence": realised[0], "realised_strength": realised[1],
        }  # fmt: skip
        out.append(r)
    return out


# Fig. 4's setting: 8 shots at 20 % / 90 % -> round(1.6) = 2 feature rows, round(0.9 * 2) = 2 of the target label:
# realised 2/8 = 25 %, 2/2 = 100 %; §5.1's 8 shots at 50 % / 100 % -> 4 feature rows, all 4 target: as configured
ICL_FIG4 = icl_records("p20", "GPT-3 (12B), Fig. 4", 8, (0.2, 0.9), (0.25, 1.0))
ICL_51 = icl_records("p50", "GPT-3 (12B)", 8, (0.5, 1.0), (0.5, 1.0))
FIG4_NOTE = "[ICL, 8 shots: realised prevalence 25 % / strength 100 % (configured 20 % / 90 %)]"
SEC51_NOTE = "[ICL, 8 shots: prevalence 50 % / strength 100 %]"


def test_the_realised_rates_are_those_the_icl_draw_holds():
    from spurious.spuriousbench import icl

    train = pd.DataFrame({"has_feature": [True, False] * 20, "label": [0, 0, 1, 1] * 10, "id": range(40)})
    for (prevalence, strength), (realised_p, realised_s) in (((0.2, 0.9), (0.25, 1.0)), ((0.5, 1.0), (0.5, 1.0))):
        demos = icl.draw_demonstrations(
            train, shots=8, prevalence=prevalence, strength=strength, target_label=1, seed=0
        )
        assert demos["has_feature"].mean() == realised_p
        assert (demos.loc[demos["has_feature"], "label"] == 1).mean() == realised_s


def test_icl_rows_are_labelled_with_realised_prevalence_and_strength(tmp_path):
    metrics = [*METRICS, *ICL_FIG4, *ICL_51]
    gaps = rep.gap_table(metrics)
    assert row(gaps, feature=EXCL, model="p20", method="icl")["label"] == f"GPT-3 (12B), Fig. 4 {FIG4_NOTE}"
    assert row(gaps, feature=EXCL, model="p50", method="icl")["label"] == f"GPT-3 (12B) {SEC51_NOTE}"
    assert row(gaps, feature=EXCL, model="minilm", method="finetune")["label"] == "BERT-base"  # not icl: unchanged
    assert row(gaps, feature=EXCL, model="p20", method="icl")["gap"] == pytest.approx(10.0)  # (0 + 10 + 20) / 3
    assert rep.ICL_CAPTION in gaps.attrs["caption"] and "configured" in rep.ICL_CAPTION
    categories = rep.category_table(metrics)
    assert row(categories, model="p20", category="punctuation")["label"] == f"GPT-3 (12B), Fig. 4 {FIG4_NOTE}"
    assert rep.ICL_CAPTION in categories.attrs["caption"]
    assert rep.ICL_CAPTION not in rep.gap_table(METRICS).attrs["caption"]  # no icl rows, no icl sentence
    assert f"sst2 GPT-3 (12B), Fig. 4 {FIG4_NOTE} [p20] icl: gap % punctuation 10.0" in rep.summary_lines(metrics)[3]
    # Figure 2 draws the fine-tuning methods and names the in-context runs as left out; Figure 3 draws those, one
    # panel per dataset, a bar per model, the legend naming each model's demonstrations
    panels, left_out = gap_figures.figure2_panels(metrics)
    assert [title for _, title, _ in panels] == ["BERT-base"] and left_out[-1] == "in-context learning (Figure 3)"
    panels, left_out = gap_figures.figure3_panels(metrics)
    assert panels == [("sst2", "in-context learning", [("p20", "icl"), ("p50", "icl")])]
    assert left_out == ["the fine-tuned models (Figures 1 and 2)"]
    with figures.capture_figures() as captured:
        titles = gap_figures.figure3(metrics, tmp_path / "f3.png", tmp_path / "f3.svg")
    assert titles == ["sst2: in-context learning"] and written(tmp_path / "f3.png", tmp_path / "f3.svg")
    legend = [t.get_text() for t in captured[0].legends[0].get_texts()]
    assert legend == [f"GPT-3 (12B), Fig. 4 {FIG4_NOTE}", f"GPT-3 (12B) {SEC51_NOTE}"]


def test_icl_annotation():
    assert rep.icl_annotation((32, 0.5, 1.0, 0.5, 1.0)) == "ICL, 32 shots: prevalence 50 % / strength 100 %"
    assert rep.icl_annotation((8, 0.1, 0.9, 0.125, 1.0)) == (
        "ICL, 8 shots: realised prevalence 12.5 % / strength 100 % (configured 10 % / 90 %)"
    )
    # no feature rows drawn: the realised strength is undefined
    assert rep.icl_annotation((8, 0.0, 0.9, 0.0, None)) == "ICL, 8 shots: prevalence 0 % / strength –"
    assert rep.icl_annotation((8, 0.2, 0.9, None, None)) == (
        "ICL, 8 shots: configured prevalence 20 % / strength 90 % (realised not recorded)"
    )
    # an icl record without the mapping (older metrics) keeps the plain label
    bare = [{k: v for k, v in r.items() if k != "icl"} for r in ICL_51]
    assert row(rep.gap_table(bare), model="p50")["label"] == "GPT-3 (12B)"


def paper_layout_metrics() -> list[dict]:
    """One record per run of configs/paper-spurious.yaml, as spurious_report gets them: every dataset's trained
    features x its models x their methods x seeds."""
    import yaml

    from spurious.workflow.config import validate_config
    from tests.conftest import REPO

    cfg = yaml.safe_load((REPO / "configs" / "paper-spurious.yaml").read_text())
    bench = validate_config(cfg)["spuriousbench"]
    out = []
    for dataset, spec in bench["datasets"].items():
        for k, feature in enumerate(spec["train_features"]):
            for model in spec["models"]:
                settings = bench["models"][model]
                for method in settings["methods"]:
                    for seed in settings["seeds"]:
                        r = dict(record("minilm", method, feature, seed, 0.05 * (k % 7) + 0.02 * seed), dataset=dataset,
                                 model=model, paper_name=settings["paper_name"])  # fmt: skip
                        if method == "icl":
                            icl = settings["icl"]
                            rows = round(icl["prevalence"] * icl["shots"])
                            r["icl"] = {"shots": icl["shots"], "prevalence": icl["prevalence"],
                                        "strength": icl["strength"], "realised_prevalence": rows / icl["shots"],
                                        "realised_strength": round(icl["strength"] * rows) / rows}  # fmt: skip
                        out.append(r)
    return out


def test_figures_2_and_3_lay_out_the_paper_config_as_the_paper(tmp_path):
    # The paper config runs BERT-base with four methods on SST-2 and MNLI, BERT-large and BERT-random fine-tuned
    # there, BERT-base fine-tuned on sst2_negative (App. D), five in-context models on SST-2 and three on MNLI. Its
    # Figure 2 was 17 panels in one column (858 x 7,365 px), 8 of them empty: the paper's Fig. 2 is BERT-base's
    # methods on SST-2 and MNLI, its Fig. 3 the in-context results. (The rehearsal, `make rehearse-spurious`, draws
    # the same panels at its sizes under the figure check.)
    from matplotlib.container import BarContainer

    metrics = paper_layout_metrics()
    with figures.capture_figures(write=False) as captured:
        two = gap_figures.figure2(metrics, tmp_path / "f2.png", tmp_path / "f2.svg")
        three = gap_figures.figure3(metrics, tmp_path / "f3.png", tmp_path / "f3.svg")
    assert two == ["sst2: BERT-base (bert_base)", "mnli: BERT-base (bert_base)"]
    assert three == ["sst2: in-context learning", "mnli: in-context learning"]
    _, left_out = gap_figures.figure2_panels(metrics)
    assert left_out == ["BERT-large on sst2 and mnli (finetune only)", "BERT-random on sst2 and mnli (finetune only)",
                        "BERT-base (bert_base_negative) on sst2_negative (finetune only)",
                        "in-context learning (Figure 3)"]  # fmt: skip
    assert gap_figures.figure3_panels(metrics)[1] == ["sst2_negative (no in-context runs)",
                                              "the fine-tuned models (Figures 1 and 2)"]  # fmt: skip
    for fig, n_bars in zip(captured, ([4, 4], [5, 3]), strict=True):
        width, height = fig.get_size_inches()
        assert figures.check_figure(fig) == [] and width <= figures.MAX_WIDTH_IN and height <= 1.5 * width
        assert [sum(isinstance(c, BarContainer) for c in ax.containers) for ax in fig.axes] == n_bars
        assert all(ax.patches for ax in fig.axes)  # no empty panel
        assert "Not drawn: " in fig._supxlabel.get_text()
