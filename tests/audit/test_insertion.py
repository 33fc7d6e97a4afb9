"""The feature-insertion test (spurious.audit.insertion): counts, p-values and intervals checked by hand."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy.stats import beta

from spurious.audit import insertion as ins
from spurious.audit import intervals


def test_flip_test_counts_p_and_interval_by_hand():
    before = np.array([0, 0, 0, 0, 1, 1, 1, 1, 1, 1])
    after = np.array([1, 1, 1, 0, 1, 1, 1, 1, 1, 0])
    r = ins.flip_test(before, after, 2)
    # towards 1: examples 0-2 (b = 3); away from 1: example 9 (c = 1); not predicted 1 before: 4
    assert (r["label_id"], r["flips_towards"], r["flips_away"], r["n_not_predicted_label_before"]) == (1, 3, 1, 4)
    # two-sided exact binomial with n = 4: P(X >= 3) + P(X <= 1) = (4 + 1 + 4 + 1) / 16
    assert r["p"] == pytest.approx(10 / 16)
    assert r["flip_rate"] == pytest.approx(0.75) and r["net_shift"] == pytest.approx(0.2)
    # Clopper-Pearson for 3 of 4: Beta(0.025; 3, 2) and Beta(0.975; 4, 1)
    assert r["flip_rate_ci"][0] == pytest.approx(beta.ppf(0.025, 3, 2))
    assert r["flip_rate_ci"][1] == pytest.approx(beta.ppf(0.975, 4, 1))
    # the flip rate's denominator and the flips-away one: 4 not predicted 1 before, 6 predicted 1 before
    assert (r["n_not_predicted_label_before"], r["n_predicted_label_before"]) == (4, 6)
    # the net shift's paired table, after x before: both 1 (5 of the 6), after only (3), before only (1), neither (1)
    assert r["net_shift_ci"] == pytest.approx(list(intervals.paired_difference_interval(5, 3, 1, 1)))
    assert r["net_shift_ci"][0] < r["net_shift"] < r["net_shift_ci"][1]


def test_intervals_repeat_the_published_examples():
    """Fagerland, Lydersen and Laake, Statistical Analysis of Contingency Tables (2017): the Newcombe hybrid score
    interval of Perondi et al. (2004), 7/34 vs 1/34: 0.1765 (0.0189 to 0.3404); the Newcombe square-and-add interval
    for paired data of Cavo et al. (2012), table [[59, 6], [16, 80]]: -0.0621 (-0.1186 to -0.0046)."""
    low, high = intervals.difference_interval(7, 34, 1, 34)
    assert (round(low, 4), round(high, 4)) == (0.0189, 0.3404)
    low, high = intervals.paired_difference_interval(59, 6, 16, 80)
    assert (round(low, 4), round(high, 4)) == (-0.1186, -0.0046)
    # Wilson's interval of 0 of 10 (Newcombe 1998, Stat. Med. 17:857, Table I: 0 to 0.2775)
    assert tuple(round(x, 4) for x in intervals.wilson_interval(0, 10)) == (0.0, 0.2775)
    assert all(math.isnan(x) for x in intervals.difference_interval(1, 2, 0, 0))


def test_flip_test_with_three_labels_is_bonferroni_corrected_and_no_flip_gives_one():
    before = np.array([0] * 12 + [1] * 4 + [2] * 4)
    after = np.array([2] * 10 + [0] * 2 + [1] * 4 + [2] * 4)
    r = ins.flip_test(before, after, 3)
    assert r["label_id"] == 2 and (r["flips_towards"], r["flips_away"]) == (10, 0)
    assert r["p"] == pytest.approx(3 * 2 * 0.5**10)
    same = ins.flip_test(before, before, 3)
    assert same["p"] == 1.0 and same["net_shift"] == 0.0


def test_holm_by_hand():
    assert ins.holm([0.01, 0.04, 0.03]).tolist() == pytest.approx([0.03, 0.06, 0.06])
    assert ins.holm([0.5, 0.9]).tolist() == pytest.approx([1.0, 1.0])


def test_insertion_table_with_a_rule_that_reads_the_exclamation_mark():
    frame = pd.DataFrame(
        {
            "id": [str(i) for i in range(40)],
            "text_a": [f"sentence number {i}." for i in range(30)] + [f"loud sentence {i}!" for i in range(10)],
            "text_b": [None] * 40,
            "label": [0, 1] * 20,
        }
    )

    def predict(f: pd.DataFrame) -> np.ndarray:  # a "model" that takes exactly one shortcut
        return np.array([1 if t.endswith("!") else 0 for t in f["text_a"]])

    table = ins.insertion_table(
        frame, predict, ins.insertions(["punctuation:exclamation", "punctuation:semicolon"], tokens=["zxq"]),
        n_labels=2, label_names=["neg", "pos"],
    ).set_index("feature")
    bang = table.loc["punctuation:exclamation"]
    # the 30 sentences without "!" flip to "pos", none flips away: p = 2 * 0.5**30, Holm over 3 features x 3
    assert (bang["label"], bang["flips_towards"], bang["flips_away"], bang["flip_rate"]) == ("pos", 30, 0, 1.0)
    assert bang["p"] == pytest.approx(2 * 0.5**30) and bang["p_holm"] == pytest.approx(3 * 2 * 0.5**30)
    assert bool(bang["flagged"])
    # ";" replaces the final "!" of the 10 loud sentences: they flip away from "pos" (towards "neg")
    semi = table.loc["punctuation:semicolon"]
    assert (semi["label"], semi["flips_towards"], semi["flips_away"]) == ("neg", 10, 0)
    token = table.loc["token:zxq"]
    assert token["flips_towards"] == token["flips_away"] == 0 and token["p"] == 1.0 and not bool(token["flagged"])
    assert math.isclose(token["net_shift"], 0.0)


def test_bad_features_and_tokens_are_named():
    with pytest.raises(ValueError, match="insertion feature 'noun:film': not one of SpuriousBench's; choose from"):
        ins.insertions(["noun:film"])
    with pytest.raises(ValueError, match="one word"):
        ins.insertions([], tokens=["two words"])
