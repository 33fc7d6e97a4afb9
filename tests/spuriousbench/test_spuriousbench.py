"""SpuriousBench construction (spurious.spuriousbench.construction): detokenisation, feature predicates, insertion,
exact prevalence / strength, independent test sets, spurious gap, SST-2 pools.  Expected values are literal and were
checked by hand (sentences, parses, counts) rather than recomputed with the code under test."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pandas as pd
import pytest

from spurious.core.data.classification import load_glue_tsv
from spurious.spuriousbench import construction as sb
from tests.conftest import SHARED

SST2 = SHARED / "data" / "sst2"


@pytest.fixture(scope="module")
def nlp():
    return sb.load_nlp()


@pytest.fixture(scope="module")
def sst2_train():
    return load_glue_tsv(SST2 / "train.tsv.gz", label_names=["negative", "positive"])


@pytest.fixture(scope="module")
def sst2_dev():
    return load_glue_tsv(SST2 / "dev.tsv", label_names=["negative", "positive"])


@pytest.fixture(scope="module")
def pools(sst2_train, sst2_dev):
    return sb.sst2_pools(sst2_train, sst2_dev, seed=0)


@pytest.fixture(scope="module")
def cache(nlp):
    return sb.ParseCache(nlp)


# ---------------------------------------------------------------------------------------------------------------
# Feature table
# ---------------------------------------------------------------------------------------------------------------


def test_feature_table_matches_paper_table_1():
    sst2 = [sb.FEATURES[n] for n in sb.SST2_FEATURES]
    assert len(sst2) == 28
    by_cat: dict[str, list[str]] = {}
    for spec in sst2:
        by_cat.setdefault(spec.category, []).append(spec.value)
        assert spec.target_label is None  # Table 1 gives none; the construction takes target_label
    assert by_cat["punctuation"] == ["!", ";", "*"]
    assert by_cat["adverb"] == ["actually", "surprisingly", "generally", "completely"]
    assert by_cat["noun"] == ["film", "movie", "show", "drama", "play"]
    assert by_cat["determiner"] == ["the", "a", "that"]
    assert by_cat["preposition"] == ["to", "in", "of"]
    assert by_cat["prefix"] == [
        "For those who haven't watched it yet,",
        "My thought: ",
        "From the press: ",
        "I have to say, ",
        "What you have to know: ",
    ]
    assert by_cat["syntax"] == ["AdjP", "NP -> NP PP", "NP -> Det N", "S -> NP VP", "S -> VP"]
    kinds = {spec.category: spec.kind for spec in sst2}
    assert kinds == {
        "punctuation": "insertion",
        "adverb": "insertion",
        "prefix": "insertion",
        "noun": "resampling",
        "determiner": "resampling",
        "preposition": "resampling",
        "syntax": "resampling",
    }
    mnli = [sb.FEATURES[n] for n in sb.MNLI_FEATURES]
    assert len(mnli) == 25
    assert sorted(s.value for s in mnli if s.category == "adverb") == ["just", "only", "really", "very", "well"]
    assert all(s.kind == "resampling" for s in mnli if s.category != "punctuation")
    assert sb.FEATURES["overlap:lexical_overlap"].datasets == ("mnli",)
    assert (sb.PAPER_PREVALENCE, sb.PAPER_STRENGTH, sb.PAPER_TARGET_LABEL) == (0.2, 0.9, 1)


# ---------------------------------------------------------------------------------------------------------------
# Text
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("row", "raw", "expected"),
    [
        (
            0,
            "it 's a charming and often affecting journey . ",
            "it's a charming and often affecting journey.",
        ),
        (
            8,
            "you do n't have to know about music to appreciate the film 's easygoing blend of comedy and romance . ",
            "you don't have to know about music to appreciate the film's easygoing blend of comedy and romance.",
        ),
        (
            42,
            "the subtle strength of `` elling '' is that it never loses touch with the reality of the grim "
            "situation . ",
            'the subtle strength of "elling" is that it never loses touch with the reality of the grim situation.',
        ),
        (
            47,
            "a subtle and well-crafted ( for the most part ) chiller . ",
            "a subtle and well-crafted (for the most part) chiller.",
        ),
        (
            93,
            "if steven soderbergh 's ` solaris ' is a failure it is a glorious failure . ",
            "if steven soderbergh's 'solaris' is a failure it is a glorious failure.",
        ),
        (
            107,
            "what the director ca n't do is make either of val kilmer 's two personas interesting or worth caring "
            "about . ",
            "what the director can't do is make either of val kilmer's two personas interesting or worth caring about.",
        ),
        (
            192,
            "a celebration of quirkiness , eccentricity , and certain individuals ' tendency to let it all hang out , "
            "and damn the consequences . ",
            "a celebration of quirkiness, eccentricity, and certain individuals' tendency to let it all hang out, "
            "and damn the consequences.",
        ),
        (
            840,
            "what is 100 % missing here is a script of even the most elemental literacy , an inkling of genuine wit , "
            "and anything resembling acting . ",
            "what is 100% missing here is a script of even the most elemental literacy, an inkling of genuine wit, "
            "and anything resembling acting.",
        ),
        (
            12,
            "... the film suffers from a lack of humor ( something needed to balance out the violence ) ... ",
            "... the film suffers from a lack of humor (something needed to balance out the violence)...",
        ),
    ],
)
def test_detokenize_real_dev_rows(sst2_dev, row, raw, expected):
    assert sst2_dev["text_a"][row] == raw
    assert sb.detokenize(raw) == expected


def test_detokenize_real_train_rows_and_ptb_brackets(sst2_train):
    assert sst2_train["text_a"][2207] == "you ca n't help but feel ` stoked . ' "
    assert sb.detokenize(sst2_train["text_a"][2207]) == "you can't help but feel 'stoked.'"
    assert (
        sst2_train["text_a"][2418]
        == "the most horrific movie experience i 've had since `` ca n't stop the music . '' "
    )
    assert (
        sb.detokenize(sst2_train["text_a"][2418])
        == "the most horrific movie experience i've had since \"can't stop the music.\""
    )
    assert sb.detokenize("the draw -lrb- for a while -rrb- is gon na work .") == "the draw (for a while) is gonna work."


def test_whole_sentence_rule():
    assert sb.is_whole_sentence("it 's a charming and often affecting journey . ")
    assert sb.is_whole_sentence("`` mr. deeds '' is suitable summer entertainment . ''")
    assert sb.is_whole_sentence("... a triumph of emotionally and narratively complex filmmaking .")
    assert not sb.is_whole_sentence("contains no wit , only labored gags ")  # phrase, no final punctuation
    assert not sb.is_whole_sentence("good .")  # fewer than 3 tokens
    rows = [
        "steers , in his feature film debut , has created a brilliant motion picture . ",
        "has created a brilliant motion picture . ",  # a sub-phrase that also ends with "."
        "a brilliant motion picture",
        "the film is good . ",
    ]
    assert sb.whole_sentence_mask(rows).tolist() == [True, False, False, True]


def test_whole_sentences_of_sst2_train(sst2_train):
    mask = sb.whole_sentence_mask(sst2_train["text_a"].tolist())
    kept = sst2_train[mask]
    assert len(kept) == 6933 and kept["text_a"].nunique() == 6933
    # SST's train split has 3,610 positive sentences (and 3,310 negative ones) after removing neutral ones
    assert int((kept["label"] == 1).sum()) == 3610
    assert int((kept["label"] == 0).sum()) == 3323


def test_pools_are_disjoint(pools, sst2_dev):
    assert {k: len(v) for k, v in pools.items()} == {"train": 5546, "dev": 832, "test": 1427}
    assert len(pools["train"]) + len(pools["dev"]) + len(pools["test"]) == 6933 + 872
    for a, b in (("train", "dev"), ("train", "test"), ("dev", "test")):
        for col in ("id", "text_a", "glue_text"):
            assert not set(pools[a][col]) & set(pools[b][col]), (a, b, col)
    test = pools["test"]
    assert (test["source"] == "dev").sum() == 872  # every dev.tsv row
    assert set(test.loc[test["source"] == "dev", "glue_text"]) == {" ".join(t.split()) for t in sst2_dev["text_a"]}
    assert set(pools["train"]["source"]) == set(pools["dev"]["source"]) == {"train"}
    assert pools["test"]["text_a"][0] == "it's a charming and often affecting journey."
    assert pools["train"].attrs["label_names"] == ["negative", "positive"]


def test_pools_are_seeded(sst2_train, sst2_dev, pools):
    again = sb.sst2_pools(sst2_train, sst2_dev, seed=0)
    other = sb.sst2_pools(sst2_train, sst2_dev, seed=1)
    for name in pools:
        pd.testing.assert_frame_equal(again[name], pools[name])
    assert set(other["train"]["id"]) != set(pools["train"]["id"])


# ---------------------------------------------------------------------------------------------------------------
# Predicates and insertion
# ---------------------------------------------------------------------------------------------------------------


def test_insert_punctuation_replaces_final_mark():
    assert sb.insert("a fine film.", "punctuation:exclamation") == "a fine film!"
    assert sb.insert("is it good?", "punctuation:semicolon") == "is it good;"
    assert sb.insert("a fine film...", "punctuation:asterisk") == "a fine film*"
    assert sb.insert("unflinchingly bleak and desperate", "punctuation:exclamation") == (
        "unflinchingly bleak and desperate!"
    )
    assert sb.insert("'easily my choice for one of the year's best films.'", "punctuation:exclamation") == (
        "'easily my choice for one of the year's best films'!"
    )


def test_insert_prefix():
    assert sb.insert("a fine film.", "prefix:my_thought") == "My thought: a fine film."
    assert sb.insert("a fine film.", "prefix:for_those_who_havent_watched_it_yet") == (
        "For those who haven't watched it yet, a fine film."
    )
    assert sb.insert("a fine film.", "prefix:i_have_to_say") == "I have to say, a fine film."


def test_insert_adverb_before_first_adjective(nlp):
    text = "the plot is predictable."
    assert sb.insert(text, "adverb:completely", nlp(text)) == "the plot is completely predictable."
    text = "the story is full of surprises."
    assert sb.insert(text, "adverb:surprisingly", nlp(text)) == "the story is surprisingly full of surprises."
    # the article follows the inserted adverb
    text = "steers has created a brilliant motion picture."
    assert sb.insert(text, "adverb:actually", nlp(text)) == "steers has created an actually brilliant motion picture."
    assert sb.insert(text, "adverb:generally", nlp(text)) == "steers has created a generally brilliant motion picture."
    text = "it is an odd film."
    assert sb.insert(text, "adverb:surprisingly", nlp(text)) == "it is a surprisingly odd film."
    text = "nobody watched it."
    assert sb.can_insert([text], "adverb:actually", nlp=nlp).tolist() == [False]
    with pytest.raises(ValueError, match="no adjective"):
        sb.insert(text, "adverb:actually", nlp(text))
    with pytest.raises(ValueError, match="re-sampling"):
        sb.insert(text, "noun:film")


def test_insertion_feature_predicates(nlp):
    texts = ["what a film!", "a fine film.", "wow ?!? great.", "a film * with stars"]
    assert sb.has_feature(texts, "punctuation:exclamation").tolist() == [True, False, True, False]
    assert sb.has_feature(texts, "punctuation:asterisk").tolist() == [False, False, False, True]
    pre = ["My thought: a fine film.", "my thought: a fine film.", "my thoughts: fine", "a fine film."]
    assert sb.has_feature(pre, "prefix:my_thought").tolist() == [True, True, False, False]
    # an input that already contains the adverb has the feature wherever the adverb is
    adv = ["it actually works.", "actually, a fine film.", "a factually fine film."]
    assert sb.has_feature(adv, "adverb:actually", nlp=nlp).tolist() == [True, True, False]


def test_resampling_word_predicates(nlp):
    texts = [
        "the film was a delight.",
        "the films were long.",
        "it was filmed in paris.",
        "that movie is one of the best.",
        "a show to remember.",
        "a b-movie.",
    ]
    assert sb.has_feature(texts, "noun:film", nlp=nlp).tolist() == [True, False, False, False, False, False]
    assert sb.has_feature(texts, "noun:movie", nlp=nlp).tolist() == [False, False, False, True, False, True]
    assert sb.has_feature(texts, "noun:show", nlp=nlp).tolist() == [False, False, False, False, True, False]
    assert sb.has_feature(texts, "determiner:the", nlp=nlp).tolist() == [True, True, False, True, False, False]
    assert sb.has_feature(texts, "determiner:a", nlp=nlp).tolist() == [True, False, False, False, True, True]
    assert sb.has_feature(texts, "determiner:that", nlp=nlp).tolist() == [False, False, False, True, False, False]
    assert sb.has_feature(texts, "preposition:of", nlp=nlp).tolist() == [False, False, False, True, False, False]
    assert sb.has_feature(texts, "preposition:in", nlp=nlp).tolist() == [False, False, True, False, False, False]
    assert sb.has_feature(texts, "preposition:to", nlp=nlp).tolist() == [False, False, False, False, True, False]
    # pairs: single-text features read the premise
    pairs = pd.DataFrame({"text_a": ["the film was long.", "it was long."], "text_b": ["it was.", "the film was."]})
    assert sb.has_feature(pairs, "noun:film", nlp=nlp).tolist() == [True, False]


@pytest.mark.parametrize(
    ("feature", "with_it", "without_it"),
    [
        ("syntax:adjp", "the plot is predictable.", "the actors sing a song."),
        ("syntax:adjp", "a very good film.", "the brilliant actress delivers a brilliant performance."),
        ("syntax:np_np_pp", "i saw the end of the movie.", "i saw the movie yesterday."),
        ("syntax:np_det_n", "they like the cast.", "his movie bored me."),
        ("syntax:s_np_vp", "nobody watched it.", "see this movie."),
        ("syntax:s_vp", "see this movie.", "nobody watched it."),
        ("syntax:s_vp", "she wants to leave.", "the film is good."),
    ],
)
def test_syntax_features_from_dependencies(nlp, feature, with_it, without_it):
    assert sb.has_feature([with_it, without_it], feature, nlp=nlp).tolist() == [True, False]


def test_syntax_questions_are_not_s_np_vp(nlp):
    # "is it good?" is SQ in the Penn Treebank, with an ADJP
    assert sb.has_feature(["is it good?"], "syntax:s_np_vp", nlp=nlp).tolist() == [False]
    assert sb.has_feature(["is it good?"], "syntax:adjp", nlp=nlp).tolist() == [True]


TREE_PLOT = "(ROOT (S (NP-SBJ (DT the) (NN plot)) (VP (VBZ is) (ADJP-PRD (JJ predictable))) (. .)))"
TREE_SEE = (
    "(ROOT (S (NP-SBJ (-NONE- *)) (VP (VB see) (NP (NP (DT the) (NN end)) (PP (IN of) (NP (DT the) (NN movie)))))"
    " (. .)))"
)


def test_tree_productions_and_syntax_hook():
    assert sb.tree_productions(TREE_PLOT) == [
        ("NP", ("DT", "NN")),
        ("ADJP", ("JJ",)),
        ("VP", ("VBZ", "ADJP")),
        ("S", ("NP", "VP")),
        ("ROOT", ("S",)),
    ]
    assert sb.syntax_features_from_tree(TREE_PLOT) == {
        "AdjP": True,
        "NP -> NP PP": False,
        "NP -> Det N": True,
        "S -> NP VP": True,
        "S -> VP": False,
    }
    assert sb.syntax_features_from_tree(TREE_SEE) == {
        "AdjP": False,
        "NP -> NP PP": True,
        "NP -> Det N": True,
        "S -> NP VP": False,  # the empty subject is removed: S -> VP
        "S -> VP": True,
    }
    seen: list[list[str]] = []

    def parser(texts):
        seen.append(list(texts))
        return [TREE_PLOT if "plot" in t else TREE_SEE for t in texts]

    texts = ["the plot is predictable.", "see the end of the movie."]
    assert sb.has_feature(texts, "syntax:s_vp", syntax_parser=parser).tolist() == [False, True]
    assert sb.has_feature(texts, "syntax:adjp", syntax_parser=parser).tolist() == [True, False]
    assert seen[0] == texts


def test_lexical_overlap_mccoy_pairs():
    # McCoy et al. (2019) lexical-overlap examples: every content word of the hypothesis is in the premise
    assert sb.lexical_overlap("The doctor was paid by the actor.", "The doctor paid the actor.")
    assert sb.lexical_overlap("The judge by the actor stopped the banker.", "The banker stopped the actor.")
    assert sb.lexical_overlap("The lawyer was advised by the actor.", "The actor advised the lawyer.")
    assert not sb.lexical_overlap("The lawyer saw the doctor.", "The doctor saw the judge.")
    assert not sb.lexical_overlap("The doctor paid the actor.", "The doctors paid the actor.")  # no stemming
    assert sb.lexical_overlap("The actor's film was long.", "It was the actor's.")  # "s", "it", "was" are stop words
    pairs = pd.DataFrame(
        {
            "text_a": ["The doctor was paid by the actor.", "The lawyer saw the doctor."],
            "text_b": ["The doctor paid the actor.", "The doctor saw the judge."],
            "label": [1, 0],
        }
    )
    assert sb.has_feature(pairs, "overlap:lexical_overlap").tolist() == [True, False]
    assert sb.has_feature([("a b", "b")], "overlap:lexical_overlap", stop_words=set()).tolist() == [True]
    with pytest.raises(ValueError, match="sentence pairs"):
        sb.has_feature(["The doctor paid the actor."], "overlap:lexical_overlap")


def test_parse_cache_parses_each_text_once(nlp):
    cache = sb.ParseCache(nlp)
    cache.docs(["a fine film.", "a bad film.", "a fine film."])
    assert cache.n_parsed == 2
    sb.has_feature(["a fine film.", "a bad film."], "syntax:adjp", cache=cache)
    sb.can_insert(["a fine film."], "adverb:actually", cache=cache)
    assert cache.n_parsed == 2 and len(cache) == 2


# ---------------------------------------------------------------------------------------------------------------
# Construction
# ---------------------------------------------------------------------------------------------------------------


def _check_exact(stats, frame, *, size, prevalence, strength, n_feature, n_target):
    assert stats["size"] == stats["size_config"] == len(frame) == size
    assert stats["prevalence"] == stats["prevalence_config"] == prevalence
    assert stats["strength"] == stats["strength_config"] == strength
    assert stats["n_feature"] == n_feature and stats["n_feature_target"] == n_target
    assert stats["n_label"] == {0: size // 2, 1: size // 2}
    assert (frame["label"] == 1).sum() == (frame["label"] == 0).sum() == size // 2
    assert frame.attrs["spuriousbench"] == stats


def test_construct_split_insertion_on_sst2(pools, cache):
    frame, stats = sb.construct_split(pools["dev"], "punctuation:exclamation", size=100, seed=3, cache=cache)
    # 20 % of 100 = 20 rows with "!", 90 % of them (18) positive
    _check_exact(stats, frame, size=100, prevalence=0.2, strength=0.9, n_feature=20, n_target=18)
    bang = frame["text_a"].str.contains("!", regex=False).to_numpy()  # counted without the code under test
    assert bang.sum() == 20 and (bang & (frame["label"] == 1)).sum() == 18
    assert (frame["has_feature"].to_numpy() == bang).all()
    inserted = frame[frame["inserted"]]
    assert (inserted["text_a"].str.endswith("!")).all()
    assert (inserted["text_a"] != inserted["original_text"]).all()
    assert (frame.loc[~frame["inserted"], "text_a"] == frame.loc[~frame["inserted"], "original_text"]).all()
    assert set(frame["id"]) <= set(pools["dev"]["id"]) and frame["id"].is_unique
    # the paper's dev size
    frame, stats = sb.construct_split(pools["dev"], "prefix:from_the_press", size=400, seed=3, cache=cache)
    _check_exact(stats, frame, size=400, prevalence=0.2, strength=0.9, n_feature=80, n_target=72)
    assert frame["text_a"].str.startswith("From the press: ").sum() == 80


def test_construct_split_adverb_insertion(pools, cache):
    frame, stats = sb.construct_split(pools["dev"], "adverb:surprisingly", size=50, seed=5, cache=cache)
    _check_exact(stats, frame, size=50, prevalence=0.2, strength=0.9, n_feature=10, n_target=9)
    has = frame["text_a"].map(lambda t: "surprisingly" in re.findall(r"[a-z]+", t)).to_numpy()
    assert has.sum() == 10 and (has & (frame["label"] == 1)).sum() == 9
    # counts that are not exact are rounded half up: 20 % of 60 = 12, 90 % of 12 = 10.8 -> 11
    frame, stats = sb.construct_split(pools["dev"], "adverb:surprisingly", size=60, seed=5, cache=cache)
    assert (stats["n_feature"], stats["n_feature_target"], stats["strength"]) == (12, 11, 11 / 12)


def test_construct_split_resampling_on_sst2(pools, cache):
    frame, stats = sb.construct_split(pools["dev"], "preposition:of", size=100, seed=7, cache=cache)
    _check_exact(stats, frame, size=100, prevalence=0.2, strength=0.9, n_feature=20, n_target=18)
    of = frame["glue_text"].map(lambda t: "of" in re.split(r"[\s-]+", t)).to_numpy()  # GLUE tokens, not spaCy
    assert of.sum() == 20 and (of & (frame["label"] == 1)).sum() == 18
    assert not frame["inserted"].any() and (frame["text_a"] == frame["original_text"]).all()
    # other settings: prevalence 50 %, strength 100 % (the paper's GPT-3 prompts), negative target (App. D)
    frame, stats = sb.construct_split(
        pools["dev"], "determiner:that", size=40, prevalence=0.5, strength=1.0, target_label=0, seed=1, cache=cache
    )
    assert stats["prevalence"] == 0.5 and stats["strength"] == 1.0 and stats["target_label"] == 0
    assert stats["n_feature_target"] == 20 and stats["n_feature_other"] == 0
    assert frame.loc[frame["has_feature"], "label"].eq(0).all()


def test_construct_split_syntax_on_sst2(pools, cache):
    frame, stats = sb.construct_split(pools["dev"], "syntax:s_vp", size=50, seed=2, cache=cache)
    _check_exact(stats, frame, size=50, prevalence=0.2, strength=0.9, n_feature=10, n_target=9)


def test_construct_split_is_seeded(pools, cache):
    a, _ = sb.construct_split(pools["dev"], "punctuation:semicolon", size=40, seed=11, cache=cache)
    b, _ = sb.construct_split(pools["dev"], "punctuation:semicolon", size=40, seed=11, cache=cache)
    c, _ = sb.construct_split(pools["dev"], "punctuation:semicolon", size=40, seed=12, cache=cache)
    pd.testing.assert_frame_equal(a, b)
    assert a["id"].tolist() != c["id"].tolist()


def test_construct_split_errors(pools, cache):
    small = pools["dev"].head(30)
    with pytest.raises(ValueError, match=r"preposition:of: the pool \(30 rows\) cannot supply \d+ .* it has \d+"):
        sb.construct_split(small, "preposition:of", size=100, seed=0, cache=cache)
    # the paper's train size for "film": 540 positive rows with "film" are needed
    with pytest.raises(ValueError, match="noun:film: .*cannot supply 540 feature-bearing examples with label 1"):
        sb.construct_split(pools["train"], "noun:film", size=3000, seed=0, cache=cache)
    with pytest.raises(ValueError, match="even"):
        sb.construct_split(pools["dev"], "preposition:of", size=101, seed=0, cache=cache)
    with pytest.raises(ValueError, match="more than the 10 rows per label"):
        sb.construct_split(pools["dev"], "preposition:of", size=20, prevalence=1.0, strength=1.0, seed=0, cache=cache)


def test_construct_split_sentence_pairs():
    rows = []
    for i in range(16):  # overlap: hypothesis content words all in the premise
        rows.append((f"the doctor{i} was paid by the actor{i}.", f"the doctor{i} paid the actor{i}.", i % 2))
    for i in range(24):
        rows.append((f"the lawyer{i} saw the doctor{i}.", f"the doctor{i} saw the judge{i}.", i % 2))
    pool = pd.DataFrame(rows, columns=["text_a", "text_b", "label"])
    pool.insert(0, "id", [str(i) for i in range(len(pool))])
    frame, stats = sb.construct_split(
        pool, "overlap:lexical_overlap", size=20, prevalence=0.4, strength=0.75, seed=0, stop_words={"the", "was", "by"}
    )
    assert (stats["n_feature"], stats["n_feature_target"], stats["n_feature_other"]) == (8, 6, 2)
    assert frame["text_a"].str.startswith("the doctor").sum() == 8


def test_construct_test_independence(pools, cache):
    test = pools["test"]
    frame, stats = sb.construct_test(test, "preposition:in", seed=0, cache=cache)
    y = frame["label"].to_numpy()
    f = frame["has_feature"].to_numpy()
    assert stats["n_supporting"] == stats["n_counter"] == int((f & (y == 1)).sum()) == int((f & (y == 0)).sum())
    assert stats["n_label"][0] == stats["n_label"][1]
    assert stats["feature_rate"][0] == stats["feature_rate"][1]
    # the largest such set: every row of the rarer label that contains "in" (counted on GLUE tokens, split at
    # hyphens as spaCy does: "guy-in-a-dress" contains "in")
    has_in = test["glue_text"].map(lambda t: "in" in re.split(r"[\s-]+", t))
    assert stats["n_supporting"] == min(int((has_in & (test["label"] == k)).sum()) for k in (0, 1))
    assert set(frame["group"]) == {"supporting", "counter", "without"}
    assert (frame.loc[frame["group"] == "supporting", "label"] == 1).all()
    assert (frame.loc[frame["group"] == "counter", "label"] == 0).all()
    assert not frame.loc[frame["group"] == "without", "has_feature"].any()
    # a fixed size and feature rate
    frame, stats = sb.construct_test(test, "preposition:in", size=100, feature_rate=0.5, seed=0, cache=cache)
    assert (stats["n_supporting"], stats["n_counter"], stats["n_without"]) == (25, 25, 50)
    assert stats["feature_rate"] == {0: 0.5, 1: 0.5}


def test_construct_test_insertion(pools, cache):
    frame, stats = sb.construct_test(pools["dev"], "punctuation:exclamation", seed=0, cache=cache)
    n_neg = int((pools["dev"]["label"] == 0).sum())  # every row can receive "!": all of the smaller label
    assert stats["n_supporting"] == stats["n_counter"] == n_neg and stats["n_without"] == 0
    assert frame["text_a"].str.contains("!", regex=False).all()
    frame, stats = sb.construct_test(pools["dev"], "prefix:my_thought", size=40, feature_rate=0.5, seed=0, cache=cache)
    assert (stats["n_supporting"], stats["n_counter"], stats["n_without"]) == (10, 10, 20)
    assert frame["text_a"].str.startswith("My thought: ").sum() == 20


def test_spurious_gap_hand_example():
    correct = np.array([True, True, False, True, False, True, True])
    group = np.array(["supporting"] * 4 + ["counter"] * 2 + ["without"])
    gap = sb.spurious_gap(correct, group)
    assert gap["acc_supporting"] == 0.75 and gap["acc_counter"] == 0.5 and gap["gap"] == 0.25
    assert (gap["n_supporting"], gap["n_counter"], gap["n_without"]) == (4, 2, 1)
    assert gap["acc_without"] == 1.0 and gap["accuracy"] == pytest.approx(5 / 7)
    empty = sb.spurious_gap(np.array([True]), np.array(["supporting"]))
    assert math.isnan(empty["acc_counter"]) and math.isnan(empty["gap"])
    with pytest.raises(ValueError, match="unknown groups"):
        sb.spurious_gap(np.array([True]), np.array(["support"]))


def test_build_suite_small(pools, cache):
    small = {name: frame.head(400) for name, frame in pools.items()}
    out = sb.build_suite(
        small,
        ["punctuation:asterisk", "preposition:of", "noun:show"],
        train_size=100,
        dev_size=40,
        seed=0,
        cache=cache,
    )
    assert set(out["features"]) == {"punctuation:asterisk", "preposition:of"}
    assert set(out["errors"]) == {"noun:show"} and "noun:show" in out["errors"]["noun:show"]
    train, train_stats = out["features"]["preposition:of"]["train"]
    assert (train_stats["prevalence"], train_stats["strength"], len(train)) == (0.2, 0.9, 100)
    dev_stats = out["features"]["preposition:of"]["dev"][1]
    assert (dev_stats["n_feature"], dev_stats["n_feature_target"], dev_stats["size"]) == (8, 7, 40)
    again = sb.build_suite(small, ["preposition:of"], train_size=100, dev_size=40, seed=0, cache=cache)
    pd.testing.assert_frame_equal(
        again["features"]["preposition:of"]["test"][0], out["features"]["preposition:of"]["test"][0]
    )


# ---------------------------------------------------------------------------------------------------------------
# Data balancing (§4.2), MNLI pools, split files
# ---------------------------------------------------------------------------------------------------------------


def _constructed(n_sup: int, n_cnt: int, n_without: int) -> pd.DataFrame:
    rows = [(1, True)] * n_sup + [(0, True)] * n_cnt + [(0, False)] * n_without
    frame = pd.DataFrame(
        {
            "id": [str(i) for i in range(len(rows))],
            "text_a": [f"text {i}" for i in range(len(rows))],
            "text_b": None,
            "label": [y for y, _ in rows],
            "has_feature": [f for _, f in rows],
        }
    )
    frame.attrs["label_names"] = ["negative", "positive"]
    return frame


def test_balancing_meets_in_the_middle_and_keeps_rows_without_the_feature():
    # 18 supporting, 2 counter: both to (18 + 2) / 2 = 10; counter rows repeated 5 times each
    frame = _constructed(18, 2, 80)
    out = sb.balance_supporting_counter(frame, target_label=1, seed=0)
    f = out["has_feature"].to_numpy()
    assert ((out["label"] == 1) & f).sum() == 10 and ((out["label"] == 0) & f).sum() == 10
    assert (~f).sum() == 80 and len(out) == 100
    counter_ids = out.loc[f & (out["label"] == 0), "id"].str.split("#").str[0]
    assert counter_ids.value_counts().to_dict() == {"18": 5, "19": 5}
    assert out["id"].is_unique and out.attrs["label_names"] == ["negative", "positive"]
    supporting = out.loc[f & (out["label"] == 1), "id"]
    assert supporting.isin(frame["id"]).all() and supporting.is_unique  # down-sampled without replacement
    again = sb.balance_supporting_counter(frame, target_label=1, seed=0)
    pd.testing.assert_frame_equal(out, again)


def test_balancing_with_an_uneven_remainder_and_the_other_target():
    # target 0: supporting = label 0 with the feature (7), counter = label 1 (3); m = round(5) = 5
    frame = _constructed(3, 7, 0)  # label 1 x3 (feature), label 0 x7 (feature)
    out = sb.balance_supporting_counter(frame, target_label=0, seed=1)
    assert (out["label"] == 0).sum() == 5 and (out["label"] == 1).sum() == 5
    # 5 = 1 x 3 + 2: every counter row once, two of them twice
    assert sorted(out.loc[out["label"] == 1, "id"].str.split("#").str[0].value_counts().tolist()) == [1, 2, 2]
    with pytest.raises(ValueError, match="0 counter examples"):
        sb.balance_supporting_counter(_constructed(5, 0, 5), target_label=1, seed=0)


def test_mnli_pools_collapse_to_entailment_and_stay_disjoint():
    names = ["entailment", "neutral", "contradiction"]
    train = pd.DataFrame(
        {"id": range(10), "text_a": [f"p{i}" for i in range(10)], "text_b": [f"h{i}" for i in range(10)],
         "label": [0, 1, 2, 0, 1, 2, 0, 1, 2, 0]}
    )
    train.attrs["label_names"] = names
    test = pd.DataFrame(
        {"id": range(3), "text_a": ["p0", "q1", "q2"], "text_b": ["h0", "g1", "g2"], "label": [2, 0, 1]}
    )
    test.attrs["label_names"] = names
    pools = sb.mnli_pools(train, test, seed=0, dev_fraction=0.2)
    assert len(pools["train"]) == 8 and len(pools["dev"]) == 2
    both = pd.concat([pools["train"], pools["dev"]])
    assert dict(zip(both["text_a"], both["label"], strict=True)) == {f"p{i}": int(i % 3 == 0) for i in range(10)}
    # the test pair already in train ("p0", "h0") is dropped; entailment -> 1
    assert pools["test"]["text_a"].tolist() == ["q1", "q2"] and pools["test"]["label"].tolist() == [1, 0]
    assert pools["test"].attrs["label_names"] == ["non_entailment", "entailment"] and pools["test"].attrs["is_pair"]
    bad = train.copy()
    bad.attrs["label_names"] = ["yes", "maybe", "no"]
    with pytest.raises(ValueError, match="no 'entailment'"):
        sb.mnli_pools(bad, test, seed=0)


def test_feature_paths_round_trip_and_unknown_features_fail():
    for name in sb.FEATURES:
        assert sb.feature_from_path(sb.feature_path(name)) == name
    assert sb.feature_path("syntax:np_det_n") == "syntax/np_det_n"
    with pytest.raises(KeyError, match="unknown SpuriousBench feature 'noun:cinema'"):
        sb.feature_from_path("noun/cinema")


def test_split_files_keep_every_column_and_the_stats(tmp_path, pools):
    frame, stats = sb.construct_split(
        pools["train"], "punctuation:exclamation", size=100, seed=0, cache=sb.ParseCache(sb.load_nlp())
    )
    sb.write_split(frame, tmp_path / "train.parquet")
    back = sb.read_split(tmp_path / "train.parquet")
    assert (back.attrs["label_names"] == ["negative", "positive"]
            and back.attrs["spuriousbench"] == json.loads(json.dumps(stats)))
    assert back["has_feature"].sum() == 20 and ((back["label"] == 1) & back["has_feature"]).sum() == 18
    pd.testing.assert_frame_equal(back[frame.columns].reset_index(drop=True), frame.reset_index(drop=True),
                                  check_dtype=False)
