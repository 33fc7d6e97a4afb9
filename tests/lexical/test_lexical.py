"""Tests of spurious.lexical.features (Serrano et al. 2023 lexical-bias test); every expected number is worked out by
hand."""

from __future__ import annotations

import logging
import math
from fractions import Fraction

import numpy as np
import pytest
import scipy.sparse as sp

from spurious.lexical import features as lx

# ----------------------------------------------------------------------------------------------------------------
# tokenize
# ----------------------------------------------------------------------------------------------------------------


def test_deleted_characters_are_the_scripts_set():
    assert set(lx.DELETED_CHARACTERS) == set("!.()[]{};:\\,?'\"")
    assert len(lx.DELETED_CHARACTERS) == 15  # ! . ( ) [ ] { } ; : \ , ? ' "
    assert lx.COUNTING_MODES == ("types", "tokens")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Don't stop!", ["dont", "stop"]),
        ("The CAT sat.", ["the", "cat", "sat"]),
        ('(a) [b] {c}; d: e\\f? "g", h', ["a", "b", "c", "d", "ef", "g", "h"]),
        ("  many   spaces\tand\nnewlines ", ["many", "spaces", "and", "newlines"]),
        (" . ! ? ", []),  # tokens that are only deleted characters disappear
        ("well-known $5 #tag", ["well-known", "$5", "#tag"]),  # only the listed characters are deleted
        ("", []),
        (None, []),
        (float("nan"), []),  # pandas' missing text_b
    ],
)
def test_tokenize(text, expected):
    assert lx.tokenize(text) == expected


def test_tokenize_rejects_non_text():
    with pytest.raises(ValueError, match="str or None"):
        lx.tokenize(5)


# ----------------------------------------------------------------------------------------------------------------
# feature_matrix / bigram_matrix
# ----------------------------------------------------------------------------------------------------------------

TOY_A = ["The cat sat on the mat.", "A dog!", "the dog and the cat"]
TOY_B = ["Cat", None, "Dogs."]
# instance 0: the cat sat on the mat cat   instance 1: a dog   instance 2: the dog and the cat dogs
TOY_VOCAB = ["a", "and", "cat", "dog", "dogs", "mat", "on", "sat", "the"]


def test_feature_matrix_types():
    matrix, vocab = lx.feature_matrix(TOY_A, TOY_B)
    assert vocab == TOY_VOCAB
    assert sp.issparse(matrix) and matrix.format == "csr" and matrix.dtype == np.int64
    expected = np.array(
        [
            # a and cat dog dogs mat on sat the
            [0, 0, 1, 0, 0, 1, 1, 1, 1],
            [1, 0, 0, 1, 0, 0, 0, 0, 0],
            [0, 1, 1, 1, 1, 0, 0, 0, 1],
        ]
    )
    np.testing.assert_array_equal(matrix.toarray(), expected)


def test_feature_matrix_tokens_counts_repeats():
    matrix, vocab = lx.feature_matrix(TOY_A, TOY_B, counting="tokens")
    assert vocab == TOY_VOCAB
    expected = np.array(
        [
            # "cat" twice (once in each segment), "the" twice
            [0, 0, 2, 0, 0, 1, 1, 1, 2],
            [1, 0, 0, 1, 0, 0, 0, 0, 0],
            [0, 1, 1, 1, 1, 0, 0, 0, 2],
        ]
    )
    np.testing.assert_array_equal(matrix.toarray(), expected)
    assert matrix.sum() == 7 + 2 + 6  # all tokens of the three instances


def test_feature_matrix_with_vocabulary_follows_its_order_and_ignores_unknown_words():
    types, vocab = lx.feature_matrix(TOY_A, TOY_B, vocabulary=["the", "cat", "zebra"])
    assert vocab == ["the", "cat", "zebra"]
    np.testing.assert_array_equal(types.toarray(), [[1, 1, 0], [0, 0, 0], [1, 1, 0]])
    tokens, _ = lx.feature_matrix(TOY_A, TOY_B, counting="tokens", vocabulary=["the", "cat", "zebra"])
    np.testing.assert_array_equal(tokens.toarray(), [[2, 2, 0], [0, 0, 0], [2, 1, 0]])


def test_feature_matrix_without_text_b_and_empty():
    matrix, vocab = lx.feature_matrix(["b a", "a"], None)
    assert vocab == ["a", "b"]
    np.testing.assert_array_equal(matrix.toarray(), [[1, 1], [1, 0]])
    empty, empty_vocab = lx.feature_matrix([], None)
    assert empty.shape == (0, 0) and empty_vocab == []


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"texts_a": ["a"], "texts_b": ["b", "c"]}, "differ in length"),
        ({"texts_a": "a text", "texts_b": None}, "not a single str"),
        ({"texts_a": ["a"], "texts_b": None, "counting": "lemmas"}, "counting must be one of"),
        ({"texts_a": ["a"], "texts_b": None, "vocabulary": ["a", "a"]}, "duplicate"),
    ],
)
def test_feature_matrix_validates(kwargs, message):
    with pytest.raises(ValueError, match=message):
        lx.feature_matrix(**kwargs)


def test_bigram_matrix_stays_within_segments():
    matrix, vocab = lx.bigram_matrix(["A b. c", "x y x y"], ["d e", None])
    # "c d" would join the end of text_a to the start of text_b: not a bigram.
    assert vocab == ["a b", "b c", "d e", "x y", "y x"]
    np.testing.assert_array_equal(matrix.toarray(), [[1, 1, 1, 0, 0], [0, 0, 0, 1, 1]])  # presence, not counts
    fixed, _ = lx.bigram_matrix(["A b. c"], ["d e"], vocabulary=["c d", "a b"])
    np.testing.assert_array_equal(fixed.toarray(), [[0, 1]])


# ----------------------------------------------------------------------------------------------------------------
# label counts, z-scores, tables, feature selection
# ----------------------------------------------------------------------------------------------------------------

Z_TEXTS = ["good movie", "good film", "good plot", "good bad", "bad movie", "bad bad film"]
Z_LABELS = np.array([0, 0, 0, 1, 1, 1])
# vocabulary: bad film good movie plot


def test_label_counts_types_and_tokens():
    types, vocab = lx.feature_matrix(Z_TEXTS, None)
    assert vocab == ["bad", "film", "good", "movie", "plot"]
    np.testing.assert_array_equal(lx.label_counts(types, Z_LABELS, 2), [[0, 3], [1, 1], [3, 1], [1, 1], [1, 0]])
    tokens, _ = lx.feature_matrix(Z_TEXTS, None, counting="tokens")
    np.testing.assert_array_equal(lx.label_counts(tokens, Z_LABELS, 2), [[0, 4], [1, 1], [3, 1], [1, 1], [1, 0]])


def test_z_scores_by_hand_types():
    matrix, _ = lx.feature_matrix(Z_TEXTS, None)
    z = lx.z_scores(matrix, Z_LABELS, 2)
    # p0 = 1/2, p0(1-p0) = 0.25.
    # good: n_w = 4, count(good, 0) = 3 -> p̂ = 0.75, z = (0.75 - 0.5) / sqrt(0.25/4) = 0.25/0.25 = 1.0; label 1: -1.0
    # bad:  n_w = 3 instances (one has "bad" twice), count(bad, 1) = 3 -> p̂ = 1, z = 0.5 / sqrt(0.25/3) = sqrt(3)
    # film, movie: 1 + 1 -> p̂ = 0.5, z = 0
    # plot: n_w = 1, label 0 -> z = 0.5 / sqrt(0.25/1) = 1.0
    s3 = math.sqrt(3)
    np.testing.assert_allclose(z, [[-s3, s3], [0, 0], [1, -1], [0, 0], [1, -1]], rtol=1e-12, atol=1e-12)


def test_z_scores_by_hand_tokens():
    matrix, _ = lx.feature_matrix(Z_TEXTS, None, counting="tokens")
    z = lx.z_scores(matrix, Z_LABELS, 2)
    # bad now has n_w = 4 occurrences, all label 1: z = 0.5 / sqrt(0.25/4) = 2.0 (types gave sqrt(3))
    np.testing.assert_allclose(z[0], [-2.0, 2.0], rtol=1e-12)


def test_z_scores_three_labels_and_unseen_feature():
    matrix, _ = lx.feature_matrix(["w a", "w b", "w c", "x"], None, vocabulary=["w", "x", "never"])
    z = lx.z_scores(matrix, np.array([2, 2, 2, 0]), 3)
    # w: n_w = 3, all label 2 -> p̂ = 1, p0 = 1/3: z = (2/3) / sqrt((1/3)(2/3)/3) = (2/3) / sqrt(2/27) = sqrt(6)
    #    labels 0, 1: p̂ = 0 -> z = -(1/3) / sqrt(2/27) = -sqrt(6)/2
    # x: n_w = 1, label 0 -> z0 = (2/3) / sqrt(2/9) = sqrt(2), others -(1/3) / sqrt(2/9) = -sqrt(2)/2
    s6, s2 = math.sqrt(6), math.sqrt(2)
    np.testing.assert_allclose(z[0], [-s6 / 2, -s6 / 2, s6], rtol=1e-12)
    np.testing.assert_allclose(z[1], [s2, -s2 / 2, -s2 / 2], rtol=1e-12)
    assert np.isnan(z[2]).all()  # n_w = 0


@pytest.mark.parametrize(
    ("labels", "n_labels", "message"),
    [
        (np.array([0, 0, 0, 1, 1, 2]), 2, "out of range"),
        (np.array([0, 0, 0, 1, 1, -1]), 2, "non-negative"),
        (np.array([0, 0, 0, 1, 1]), 2, "one entry per instance"),
        (np.array([0.5, 0, 0, 1, 1, 1]), 2, "integer"),  # whole-number floats are ids: tests/lexical/test_labels.py
        (np.array([0, 0, 0, 0, 0, 0]), 1, "at least 2"),
    ],
)
def test_z_scores_validates(labels, n_labels, message):
    matrix, _ = lx.feature_matrix(Z_TEXTS, None)
    with pytest.raises(ValueError, match=message):
        lx.z_scores(matrix, labels, n_labels)


def _z_table(**kwargs):
    matrix, vocab = lx.feature_matrix(Z_TEXTS, None, **kwargs)
    return lx.zscore_table(matrix, vocab, Z_LABELS, 2, ["pos", "neg"])


def test_zscore_table_long_format():
    table = _z_table()
    assert list(table.columns) == ["feature", "label", "label_id", "count", "n", "p_hat", "z"]
    assert len(table) == 5 * 2
    good = table[table.feature == "good"].set_index("label")
    assert good.loc["pos", "label_id"] == 0 and good.loc["neg", "label_id"] == 1
    assert good.loc["pos", "count"] == 3 and good.loc["neg", "count"] == 1
    assert (good["n"] == 4).all()
    assert good.loc["pos", "p_hat"] == pytest.approx(0.75)
    assert good.loc["pos", "z"] == pytest.approx(1.0)
    matrix, vocab = lx.feature_matrix(Z_TEXTS, None)
    with pytest.raises(ValueError, match="label_names"):
        lx.zscore_table(matrix, vocab, Z_LABELS, 2, ["pos"])


def test_top_features_ranks_breaks_ties_and_excludes_stop_words():
    table = _z_table()
    # label 0 z: good 1.0, plot 1.0 (tie -> alphabetical), film 0, movie 0, bad -sqrt(3)
    # label 1 z: bad sqrt(3), film 0, movie 0, good -1, plot -1
    top = lx.top_features(table, k=2)
    assert list(top.columns) == ["label", "label_id", "rank", "feature", "z", "count", "n"]
    assert top[["label", "rank", "feature"]].values.tolist() == [
        ["pos", 1, "good"],
        ["pos", 2, "plot"],
        ["neg", 1, "bad"],
        ["neg", 2, "film"],
    ]
    assert top.loc[2, "z"] == pytest.approx(math.sqrt(3)) and top.loc[2, "count"] == 3 and top.loc[2, "n"] == 3
    stopped = lx.top_features(table, k=2, stop_words={"good", "bad"})
    assert stopped["feature"].tolist() == ["plot", "film", "film", "movie"]
    with pytest.raises(ValueError, match="k must be"):
        lx.top_features(table, k=0)


def test_top_features_returns_fewer_when_a_label_runs_out(caplog):
    with caplog.at_level(logging.WARNING, logger="spurious.lexical.features"):
        top = lx.top_features(_z_table(), k=10)
    assert (top.groupby("label_id").size() == 5).all()
    assert "only 5 eligible" in caplog.text


def test_english_stop_words_is_nltk_list():
    stop = lx.english_stop_words()
    assert isinstance(stop, frozenset)
    assert {"the", "no", "not", "don't"} <= stop
    assert "nobody" not in stop  # the paper's top SNLI contradiction word must stay selectable


def test_feature_stop_words_match_contractions_as_the_tokenizer_spells_them():
    # "I don't think it isn't fine" -> tokens i, dont, think, it, isnt, fine: with NLTK's list as written only "i"
    # and "it" are stop words; tokenised like the text, "dont" and "isnt" are too, and "think"/"fine" stay features
    texts = ["I don't think it isn't fine.", "It's a fine film; I didn't think so"]
    matrix, vocab = lx.feature_matrix(texts, None)
    assert {"dont", "isnt", "didnt", "its"} <= set(vocab)
    as_listed = set(vocab) - lx.english_stop_words()
    assert {"dont", "isnt", "didnt"} <= as_listed  # the bug: contractions survive the NLTK list
    stop = lx.feature_stop_words()
    assert set(vocab) - stop == {"think", "fine", "film"}
    assert lx.english_stop_words() <= stop and {"dont", "isnt", "shouldve", "youre"} <= stop
    assert "nobody" not in stop and "think" not in stop
    assert lx.feature_stop_words(["Won't", "the"]) == {"Won't", "wont", "the"}
    table = lx.zscore_table(matrix, vocab, np.array([0, 1]), 2, ["a", "b"])
    assert not set(lx.top_features(table, k=10, stop_words=stop)["feature"]) & {"dont", "isnt", "didnt", "its"}
    with pytest.raises(ValueError, match="not a single str"):
        lx.feature_stop_words("don't")


def test_associated_labels():
    table = _z_table()
    # good: p̂ = (0.75, 0.25) -> 0; bad: (0, 1) -> 1; movie: (0.5, 0.5) tie -> lowest id 0. Duplicates collapse.
    assert lx.associated_labels(table, ["good", "bad", "movie", "good"]) == {"good": 0, "bad": 1, "movie": 0}
    with pytest.raises(ValueError, match="not in the table"):
        lx.associated_labels(table, ["good", "zebra"])
    matrix, vocab = lx.feature_matrix(Z_TEXTS, None, vocabulary=["good", "never"])
    unseen = lx.zscore_table(matrix, vocab, Z_LABELS, 2, ["pos", "neg"])
    with pytest.raises(ValueError, match="no occurrence"):
        lx.associated_labels(unseen, ["never"])


def test_associated_label_is_argmax_not_selection_label():
    # w: counts (45, 50, 5) over 3 labels -> argmax p̂ is label 1, although w also has a high z for label 0.
    texts = ["w"] * 100
    labels = np.array([0] * 45 + [1] * 50 + [2] * 5)
    matrix, vocab = lx.feature_matrix(texts, None)
    table = lx.zscore_table(matrix, vocab, labels, 3, ["a", "b", "c"])
    assert lx.associated_labels(table, ["w"]) == {"w": 1}


# ----------------------------------------------------------------------------------------------------------------
# usual / unusual sets and the permutation test
# ----------------------------------------------------------------------------------------------------------------

EVAL_TEXTS = ["good movie", "good bad", "bad film", "good", "movie"]
EVAL_LABELS = np.array([0, 0, 1, 1, 0])
FEATURE_LABELS = {"good": 0, "bad": 1, "absent": 0, "plot": 1}


def _usual_unusual():
    # "absent" is a column with no occurrence; "plot" is not in the evaluated vocabulary at all.
    matrix, vocab = lx.feature_matrix(EVAL_TEXTS, None, vocabulary=["absent", "bad", "film", "good", "movie"])
    return lx.usual_unusual(matrix, vocab, EVAL_LABELS, FEATURE_LABELS)


def test_usual_unusual_with_an_instance_in_both_sets():
    result = _usual_unusual()
    # 0: good, gold 0 = y_good -> U.   1: good (gold 0 = y_good -> U) and bad (gold 0 != y_bad -> N): both.
    # 2: bad, gold 1 = y_bad -> U.     3: good, gold 1 != y_good -> N.   4: no selected feature.
    np.testing.assert_array_equal(result.in_usual, [True, True, True, False, False])
    np.testing.assert_array_equal(result.in_unusual, [False, True, False, True, False])
    assert result.features_present == ["good", "bad"]
    assert result.per_feature.values.tolist() == [
        ["good", 0, 2, 1],
        ["bad", 1, 1, 1],
        ["absent", 0, 0, 0],
        ["plot", 1, 0, 0],
    ]


def test_usual_unusual_validates():
    matrix, vocab = lx.feature_matrix(EVAL_TEXTS, None)
    with pytest.raises(ValueError, match="non-negative"):
        lx.usual_unusual(matrix, vocab, np.array([0, 0, 1, -1, 0]), FEATURE_LABELS)
    with pytest.raises(ValueError, match="one feature per matrix column"):
        lx.usual_unusual(matrix, vocab[:-1], EVAL_LABELS, FEATURE_LABELS)
    with pytest.raises(ValueError, match="integer label id"):
        lx.usual_unusual(matrix, vocab, EVAL_LABELS, {"good": "pos"})


def test_permutation_test_counts_an_instance_once_in_each_set():
    uu = _usual_unusual()
    result = lx.permutation_test(np.array([True, False, True, False, True]), uu.in_usual, uu.in_unusual)
    # U = {0, 1, 2}: 0 and 2 correct; N = {1, 3}: none correct.  M = 3 + 2 = 5, K = 2 + 0 = 2, draws 3, k = 2:
    # P(X >= 2) = C(2,2) C(3,1) / C(5,3) = 3/10
    assert result["n_usual"] == 3 and result["n_unusual"] == 2
    assert result["correct_usual"] == 2 and result["correct_unusual"] == 0
    assert result["acc_usual"] == pytest.approx(2 / 3) and result["acc_unusual"] == 0.0
    assert result["log10_p"] == pytest.approx(math.log10(0.3), rel=1e-12)
    assert result["p"] == pytest.approx(0.3, rel=1e-12)
    # Instance 1 (in U and N) now correct: it adds one success to each copy.  M = 5, K = 3 + 1 = 4, k = 3:
    # P(X >= 3) = C(4,3) C(1,0) / C(5,3) = 4/10
    both = lx.permutation_test(np.array([1, 1, 1, 0, 1]), uu.in_usual, uu.in_unusual)  # 0/1 ints are accepted
    assert (both["correct_usual"], both["correct_unusual"]) == (3, 1)
    assert both["p"] == pytest.approx(0.4, rel=1e-12)


def test_permutation_test_validates():
    ok = np.array([True, False])
    with pytest.raises(ValueError, match="same length"):
        lx.permutation_test(ok, ok, np.array([True]))
    with pytest.raises(ValueError, match="boolean"):
        lx.permutation_test(np.array([0.5, 1.0]), ok, ok)


def _exact_log_sf(k: int, M: int, K: int, n: int) -> float | None:
    """ln P(X >= k) from exact integer arithmetic (None when the probability is 0)."""
    numerator = sum(math.comb(K, i) * math.comb(M - K, n - i) for i in range(max(k, 0), n + 1))
    if numerator == 0:
        return None
    return math.log(numerator) - math.log(math.comb(M, n))


def test_log_hypergeom_sf_matches_brute_force_on_all_small_cases():
    # SciPy's logsf (sf(x) = P(X > x), hence k - 1), the certain and impossible ends included, against exact fractions
    checked = 0
    for M in range(13):
        for K in range(M + 1):
            for n in range(M + 1):
                lo, hi = max(0, n - (M - K)), min(n, K)
                for k in range(-1, n + 2):
                    got = lx.log_hypergeom_sf(k, M, K, n)
                    p = Fraction(
                        sum(math.comb(K, i) * math.comb(M - K, n - i) for i in range(max(k, 0), n + 1)),
                        math.comb(M, n),
                    )
                    if k <= lo:
                        assert p == 1 and got == 0.0, (k, M, K, n)
                    elif k > hi:
                        assert p == 0 and got == -math.inf, (k, M, K, n)
                    else:
                        assert 0 < p < 1
                        assert math.isclose(got, math.log(p), rel_tol=1e-10, abs_tol=1e-14), (k, M, K, n, got)
                    checked += 1
    assert checked > 5000


def test_log_hypergeom_sf_against_big_integer_arithmetic_in_the_deep_tail():
    M, K, n = 2000, 1100, 1000
    for k in (560, 700, 900, 999, 1000):
        expected = _exact_log_sf(k, M, K, n)
        assert lx.log_hypergeom_sf(k, M, K, n) == pytest.approx(expected, rel=1e-10)
    assert _exact_log_sf(1000, M, K, n) / math.log(10) < -300  # beyond double range: p itself would underflow


def test_log_hypergeom_sf_near_one_keeps_its_precision():
    # P(X >= 1) = 1 - P(X = 0) = 1 - 1/C(1000, 500); ln(1 - x) = -x for x ~ 1e-300
    got = lx.log_hypergeom_sf(1, 1000, 500, 500)
    assert got < 0.0
    assert got == pytest.approx(-1 / math.comb(1000, 500), rel=1e-9)


def test_log_hypergeom_sf_at_the_papers_magnitude():
    # |U| = |N| = 3000, every U correct, every N wrong: M = 6000, K = 3000, draws 3000, k = 3000.
    # The only arrangement as extreme as observed puts all K successes in U: p = 1 / C(6000, 3000).
    M, K, n = 6000, 3000, 3000
    log10_expected = -(math.lgamma(M + 1) - 2 * math.lgamma(n + 1)) / math.log(10)
    assert log10_expected == pytest.approx(-math.log10(math.comb(M, n)), rel=1e-12)  # lgamma vs exact integer
    got = lx.log_hypergeom_sf(3000, M, K, n) / math.log(10)
    assert math.isfinite(got) and got < -700
    assert got == pytest.approx(log10_expected, rel=1e-10)

    correct = np.r_[np.ones(3000, bool), np.zeros(3000, bool)]
    in_usual = np.r_[np.ones(3000, bool), np.zeros(3000, bool)]
    result = lx.permutation_test(correct, in_usual, ~in_usual)
    assert result["acc_usual"] == 1.0 and result["acc_unusual"] == 0.0
    assert result["log10_p"] == pytest.approx(log10_expected, rel=1e-10)
    assert result["p"] == 0.0  # the float underflows; log10_p is what gets reported


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((1, 5, 6, 2), "successes K"),
        ((1, 5, 2, 6), "draws n"),
        ((1, -1, 0, 0), "M must be"),
        ((1.5, 5, 2, 2), "k must be an integer"),
        ((True, 5, 2, 2), "bool"),
    ],
)
def test_log_hypergeom_sf_validates(args, message):
    with pytest.raises(ValueError, match=message):
        lx.log_hypergeom_sf(*args)


# ----------------------------------------------------------------------------------------------------------------
# bigram sample (§6)
# ----------------------------------------------------------------------------------------------------------------


def test_sample_bigrams_only_from_bigrams_in_every_label(caplog):
    texts = ["x y z", "x y w", "z w", "y z"]
    labels = np.array([0, 1, 0, 1])
    matrix, vocab = lx.bigram_matrix(texts, None)
    # x y: labels 0, 1; y z: labels 0, 1; y w: only 1; z w: only 0
    assert vocab == ["x y", "y w", "y z", "z w"]
    assert lx.sample_bigrams(matrix, vocab, labels, 2, n=2) == ["x y", "y z"]
    with caplog.at_level(logging.WARNING, logger="spurious.lexical.features"):
        assert lx.sample_bigrams(matrix, vocab, labels, 2, n=5) == ["x y", "y z"]
    assert "only 2 candidates" in caplog.text
    assert lx.sample_bigrams(matrix, vocab, labels, 2, n=1)[0] in {"x y", "y z"}
    with pytest.raises(ValueError, match="positive"):
        lx.sample_bigrams(matrix, vocab, labels, 2, n=0)


def test_sample_bigrams_is_deterministic_and_independent_of_vocabulary_order():
    # 40 shared bigrams "s<i> t<i>" (one instance per label) and 40 label-0-only bigrams "u<i> v<i>".
    texts = [f"s{i} t{i}" for i in range(40)] * 2 + [f"u{i} v{i}" for i in range(40)]
    labels = np.array([0] * 40 + [1] * 40 + [0] * 40)
    matrix, vocab = lx.bigram_matrix(texts, None)
    first = lx.sample_bigrams(matrix, vocab, labels, 2, n=10, seed=3)
    assert len(set(first)) == 10 and all(b.startswith("s") for b in first)
    assert first == sorted(first)
    assert lx.sample_bigrams(matrix, vocab, labels, 2, n=10, seed=3) == first
    shuffled = list(np.random.default_rng(1).permutation(vocab))
    matrix2, vocab2 = lx.bigram_matrix(texts, None, vocabulary=shuffled)
    assert vocab2 == shuffled != vocab
    assert lx.sample_bigrams(matrix2, vocab2, labels, 2, n=10, seed=3) == first
    # the draw itself: default_rng(seed) choosing positions in the sorted candidate list
    candidates = sorted(f"s{i} t{i}" for i in range(40))
    picked = np.random.default_rng(3).choice(40, size=10, replace=False)
    assert first == sorted(candidates[i] for i in picked)


def test_correct_predictions_accepts_ids_or_names_and_names_what_is_wrong():
    import pandas as pd

    from spurious.lexical.features import correct_predictions

    preds = pd.DataFrame({"id": ["b", "a", "c"], "prediction": ["neutral", 0, "2"]})
    got = correct_predictions(preds, ["a", "b", "c"], np.array([0, 1, 1]), ["entailment", "neutral", "contradiction"])
    assert got.tolist() == [True, True, False]  # a: 0 = 0; b: neutral = 1; c: 2 != 1
    with pytest.raises(ValueError, match=r"p\.csv: 1 of 2 ids have no prediction \(first: \['z'\]\)"):
        correct_predictions(preds, ["a", "z"], np.array([0, 0]), ["x", "y", "w"], source="p.csv")
    with pytest.raises(ValueError, match="first: record b predicts 'neutral'; each prediction must be a label id "
                                         "0-1 or one of"):
        correct_predictions(preds, ["b"], np.array([0]), ["x", "y"])
    with pytest.raises(ValueError, match="needs id and prediction"):
        correct_predictions(preds.rename(columns={"prediction": "pred"}), ["a"], np.array([0]), ["x", "y"])


def test_tables_1_and_3_show_the_configured_err_target_first():
    from spurious.lexical import report as lexical_report

    summary = {"n_instances": 10, "n_features": 3, "n_labels": 2, "converged": True, "steps": 4, "err_uniform": 0.15,
               "err_q": 0.05, "err_vs_label_distribution": {"uniform": 0.04, "q": 0.06}, "effective_sample_size": 7.5,
               "chosen_step": 3}  # fmt: skip
    t1 = lexical_report.table1({"qqp": summary}, {"qqp": "QQP"})
    assert t1.loc[0, "Err(uniform)"] == 0.15 and t1.loc[0, "Err(q)"] == 0.05
    assert t1.loc[0, "Err(uniform) [vs label distribution]"] == 0.04 and t1.loc[0, "Err(uniform) (paper)"] == 0.154
    assert "against 1/|Y|" in t1.attrs["caption"]
    t1 = lexical_report.table1({"qqp": summary}, {"qqp": "QQP"}, err_target="label_distribution")
    assert t1.loc[0, "Err(uniform)"] == 0.04 and t1.loc[0, "Err(q) [vs 1/|Y|]"] == 0.05
    assert "Err is measured against the overall label distribution q(y) (lexical.err_target: label_distribution)" in (
        t1.attrs["caption"])
    t3 = lexical_report.table3({"qqp": {"n_bigrams": 200, **summary}}, {"qqp": "QQP"}, err_target="label_distribution")
    assert t3.loc[0, "Err(q)"] == 0.06
    with pytest.raises(ValueError, match="err_target"):
        lexical_report.table1({"qqp": summary}, {"qqp": "QQP"}, err_target="prior")
