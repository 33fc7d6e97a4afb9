"""The audit's verdict rules and effect-size classes (spurious.audit.verdict): the classes at their cut-offs, checked
by hand; the cut-offs' stated reasons against the paper's published values; the demo audit's two cases (a flagged
0.25-point bias, an unflagged 12.62-point one) as the report's summary and settings tables read them."""

from __future__ import annotations

import math

import pytest

from spurious.audit import report, verdict
from spurious.thinktwice import paper_values


@pytest.mark.parametrize(
    ("points", "expected"),
    [
        (None, None),
        (math.nan, None),
        (-3.0, "none"),  # e.g. U less accurate than N, or a net shift away
        (0.0, "none"),  # QA: no threshold found
        (1e-12, "none"),  # floating-point noise around 0
        (0.01, "negligible"),
        (0.25, "negligible"),  # the demo's sim-word
        (0.999, "negligible"),
        (1.0, "small"),  # the lower cut-off belongs to small
        (1.0 - 1e-12, "small"),  # 0.9999999999990000 is 1 up to floating point
        (4.99, "small"),
        (5.0, "large"),  # the upper cut-off belongs to large
        (12.62, "large"),  # the demo's ans-len
        (100.0, "large"),
    ],
)
def test_effect_class_at_the_cut_offs(points, expected):
    assert verdict.effect_class(points) == expected


def test_effect_class_of_net_shifts_and_accuracy_gaps_as_computed():
    """The classification effects in points, from the counts the insertion and permutation tests report: (b − c) / n
    and ACC(U) − ACC(N). 7 / 100 is 7.000000000000001 points in floating point and 1 / 3 − 0.3233… is a gap of 1."""
    assert 100 * (7 / 100) != 7 and verdict.effect_class(100 * (7 / 100)) == "large"
    assert verdict.effect_class(100 * ((3 - 2) / 100)) == "small"  # b − c = 1 of 100 examples: 1 point
    assert verdict.effect_class(100 * ((10 - 9) / 200)) == "negligible"  # 0.5 point
    assert verdict.effect_class(100 * ((5 - 5) / 100)) == "none"
    assert verdict.effect_class(100 * ((45 - 40) / 100)) == "large"  # exactly 5 points
    assert verdict.accuracy_gap_points(0.80, 0.75) == pytest.approx(5.0)
    assert verdict.effect_class(verdict.accuracy_gap_points(0.80, 0.75)) == "large"
    assert verdict.effect_class(verdict.accuracy_gap_points(0.76, 0.75)) == "small"
    assert verdict.accuracy_gap_points(0.8, math.nan) is None and verdict.effect_class(None) is None


def test_verdict_rules_at_their_boundaries():
    assert verdict.qa_flagged(0.25, None) and verdict.qa_flagged(0.25, 0.0)
    assert not verdict.qa_flagged(12.62, 16.24)
    assert not verdict.qa_flagged(2.0, 2.0)  # not larger than the Human reference
    assert not verdict.qa_flagged(0.0, None)
    assert not verdict.permutation_flagged(math.log10(0.05), 0.05)  # p = alpha is not below it
    assert verdict.permutation_flagged(math.log10(0.0499), 0.05)


def test_the_cut_offs_reasons_hold_for_the_papers_values():
    """What the page says about the cut-offs, against spurious.thinktwice.paper_values (Think Twice, Figure 2)."""
    human = {h: paper_values.HUMAN[h] for h in paper_values.HEURISTIC_ORDER}
    below = [h for h, v in human.items() if v < verdict.NEGLIGIBLE_BELOW]
    assert len(below) == 6 and max(human[h] for h in below) == 0.74 and human["ans-len"] == 13.55
    models = paper_values.BIAS_MODELS
    assert len(models) == 4
    large = ("ans-len", "word-dist")
    rest = [m[h] for m in models.values() for h in paper_values.HEURISTIC_ORDER if h not in large]
    assert min(rest) == 0.0 and max(rest) == 3.25 < verdict.LARGE_FROM
    big = sorted(m[h] for m in models.values() for h in large)
    assert (big[0], big[-1]) == (4.81, 12.51)
    assert [v for v in big if v < verdict.LARGE_FROM] == [models["RoBERTa-Large"]["word-dist"]]
    for words in ("at most 0.74", "ans-len 13.55", "0–3.25", "4.81–12.51", "RoBERTa-large's word-dist, 4.81"):
        assert words in verdict.effect_rule("qa"), words


def demo_like_result() -> dict:
    """A QA result with the two rows of the demo audit's report that prompted the classes."""
    rows = [("sim-word", 0.25, 0.0, True), ("ans-len", 12.62, 16.24, False)]
    search = {"sample_size": 400, "iterations": 100, "seed": 0, "with_replacement": False, "allow_too_few_rows": False}
    return {
        "task": "qa",
        "bias": [{"heuristic": h, "prediction_bias": b, "threshold": 1.0, "biased_group": "high", "human_bias": hb,
                  "flagged": verdict.qa_flagged(b, hb), "effect_size_class": verdict.effect_class(b)}
                 for h, b, hb, _ in rows],
        "bias_settings": search,
        "heuristic_settings": {"names": ["sim-word", "ans-len"], "compat": None, "variants": {},
                               "tfidf_contexts": "results/data/squad/derived_s0/train.parquet"},
        "featurisation": {"max_length": 384, "stride": 128, "from": "training.json"},
        "human_reference": "annotators 0-2, each scored against the other two",
    }


def test_demo_cases_read_as_negligible_and_large():
    summary = report.summary_rows(demo_like_result())
    assert [(r["effect class"], r["verdict"]) for r in summary] == [
        ("negligible", "takes the shortcut"), ("large", "no evidence")]
    assert summary[1]["test result"] == "Human reference 16.24 EM points"
    assert [r["effect (points)"] for r in summary] == ["0.25", "12.62"]


def test_settings_rows_are_keys_and_values():
    rows = {r["setting"]: r["value"] for r in report.settings_rows(demo_like_result())}
    assert rows["bias search: sample_size"] == "400" and rows["bias search: with_replacement"] == "false"
    assert rows["heuristics: compat"] == "none" and rows["heuristics: variants"] == "none"
    assert rows["heuristics: names"] == "sim-word, ans-len" and rows["featurisation: max_length"] == "384"
    assert rows["Human reference"].startswith("annotators 0-2")
    assert all("{" not in v and "'" not in v for v in rows.values())


def test_rule_record_states_the_rule_and_the_cut_offs():
    qa = verdict.rule_record("qa", sample_size=400, iterations=100, seed=0, with_replacement=False)
    assert "100 random samples of 400 questions drawn from the segment without replacement" in qa["verdict"]
    assert "larger than the Human reference" in qa["verdict"] and "No p-value" in qa["verdict"]
    assert qa["effect_size"] | {"rule": None} == {
        "measure": "the prediction bias in EM points", "unit": "points",
        "classes": ["none", "negligible", "small", "large"], "negligible_below": 1.0, "large_from": 5.0, "rule": None}
    cls = verdict.rule_record("classification", alpha=0.05)
    assert "p < 0.05" in cls["verdict"] and "Holm-adjusted" in cls["verdict"] and "descriptive" in cls["verdict"]
    assert cls["effect_size"]["negligible_below"] == 1.0 and "net shift" in cls["effect_size"]["measure"]
