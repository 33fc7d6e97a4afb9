"""AFLite's out-of-distribution evaluation (Tables 1-2): loading HANS / ANLI / Diagnostics layouts, mapping a model's
labels to the set's, per-group counts and the seed table, all checked against counts worked out by hand."""

from __future__ import annotations

import gzip
import json
import math

import pandas as pd
import pytest

from spurious.aflite import ood as aflite_ood
from spurious.core.data import classification
from spurious.core.data.squad import DataValidationError
from spurious.core.errors import InputError

HANS_COLUMNS = [
    "gold_label", "sentence1_binary_parse", "sentence2_binary_parse", "sentence1_parse", "sentence2_parse",
    "sentence1", "sentence2", "pairID", "heuristic", "subcase", "template",
]
# (gold, premise, hypothesis, heuristic): HANS's release layout (heuristics_evaluation_set.txt)
HANS_ROWS = [
    ("non-entailment", "The doctor saw the lawyer .", "The lawyer saw the doctor .", "lexical_overlap"),
    ("non-entailment", "The judge by the actor stopped .", "The actor stopped .", "subsequence"),
    ("entailment", "The artist slept .", "The artist slept .", "lexical_overlap"),
    ("non-entailment", "If the tourist ran , the actor waited .", "The tourist ran .", "constituent"),
    ("non-entailment", "The senator believed the author .", "The author believed the senator .", "lexical_overlap"),
]


def write_hans(path, rows=HANS_ROWS):
    lines = ["\t".join(HANS_COLUMNS)]
    for i, (gold, s1, s2, heuristic) in enumerate(rows):
        lines.append("\t".join([gold, "(x)", "(y)", "(X)", "(Y)", s1, s2, f"ex{i}", heuristic, "sub", "temp"]))
    path.write_text("\n".join(lines) + "\n")
    return path


def hans_frame(tmp_path):
    return classification.load_source(
        {"format": "glue_tsv", "path": str(write_hans(tmp_path / "hans.txt")),
         "label_names": ["entailment", "non-entailment"], "group_column": "heuristic"}
    )


def predictions(ids, predicted, names):
    out = pd.DataFrame({"id": ids, "prediction": [names.index(p) for p in predicted]})
    out.attrs["label_names"] = list(names)
    return out


def test_hans_layout_loads_with_its_heuristics_as_groups(tmp_path):
    frame = hans_frame(tmp_path)
    assert frame["id"].tolist() == [f"ex{i}" for i in range(5)]
    assert frame.attrs["label_names"] == ["entailment", "non-entailment"] and frame["label"].tolist() == [1, 1, 0, 1, 1]
    assert frame["groups"].tolist() == ["lexical_overlap", "subsequence", "lexical_overlap", "constituent",
                                        "lexical_overlap"]
    # the groups survive the normalised parquet
    classification.write_parquet(frame, tmp_path / "hans.parquet")
    again = classification.read_parquet(tmp_path / "hans.parquet")
    assert again["groups"].tolist() == frame["groups"].tolist()
    with pytest.raises(DataValidationError, match="group column"):
        classification.load_source({"format": "glue_tsv", "path": str(tmp_path / "hans.txt"),
                                    "label_names": ["entailment", "non-entailment"], "group_column": "category"})


def test_anli_jsonl_with_label_aliases_and_gzip(tmp_path):
    records = [
        {"uid": "a1", "premise": "Paris is in France.", "hypothesis": "Paris is French.", "label": "e", "reason": ""},
        {"uid": "a2", "premise": "Rome is old.", "hypothesis": "Rome is new.", "label": "c", "reason": ""},
        {"uid": "a3", "premise": "Bob ran.", "hypothesis": "Bob ran fast.", "label": "n", "reason": ""},
    ]
    path = tmp_path / "test.jsonl.gz"
    with gzip.open(path, "wt") as f:
        f.write("\n".join(json.dumps(r) for r in records) + "\n")
    frame = classification.load_source(
        {"format": "jsonl", "path": str(path), "id_column": "uid",
         "label_aliases": {"e": "entailment", "n": "neutral", "c": "contradiction"},
         "label_names": ["entailment", "neutral", "contradiction"]}
    )
    assert frame["id"].tolist() == ["a1", "a2", "a3"] and frame["label"].tolist() == [0, 2, 1]
    assert frame["text_b"].tolist() == ["Paris is French.", "Rome is new.", "Bob ran fast."]
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{not json\n")
    with pytest.raises(InputError, match="bad.jsonl: not a readable JSON-lines file .*; pass one JSON object per line"):
        classification.load_source({"format": "jsonl", "path": str(bad)})


def test_hans_scoring_maps_three_way_predictions_and_keeps_non_entailment_only(tmp_path):
    frame = hans_frame(tmp_path)
    names = ["entailment", "neutral", "contradiction"]  # an SNLI model
    preds = predictions(frame["id"], ["contradiction", "entailment", "entailment", "neutral", "entailment"], names)
    table, counts = aflite_ood.score_predictions(
        preds, frame, prediction_map={"neutral": "non-entailment", "contradiction": "non-entailment"},
        only_labels=["non-entailment"], group_names={"lexical_overlap": "Lex.", "subsequence": "Subseq.",
                                                     "constituent": "Constit."},
    )
    assert table["mapped"].tolist() == ["non-entailment", "entailment", "entailment", "non-entailment", "entailment"]
    assert table["correct"].tolist() == [True, False, True, True, False]
    assert table["scored"].tolist() == [True, True, False, True, True]  # ex2 is an entailment case
    # by hand: Lex. = ex0 (right), ex4 (wrong); Subseq. = ex1 (wrong); Constit. = ex3 (right); all = 2 of 4
    assert counts == {"all": {"correct": 2, "n": 4}, "Lex.": {"correct": 1, "n": 2},
                      "Subseq.": {"correct": 0, "n": 1}, "Constit.": {"correct": 1, "n": 1}}


def test_unmapped_model_labels_are_a_named_error(tmp_path):
    frame = hans_frame(tmp_path)
    preds = predictions(frame["id"], ["neutral"] * 5, ["entailment", "neutral", "contradiction"])
    with pytest.raises(ValueError, match=r"predicts \['neutral'\].*prediction_map"):
        aflite_ood.score_predictions(preds, frame, source="hans")
    with pytest.raises(ValueError, match="only_labels"):
        aflite_ood.score_predictions(preds, frame, prediction_map={"neutral": "non-entailment"}, only_labels=["x"])
    shuffled = predictions(list(reversed(frame["id"])), ["entailment"] * 5, ["entailment", "non-entailment"])
    with pytest.raises(ValueError, match="order"):
        aflite_ood.score_predictions(shuffled, frame)


def test_membership_groups_count_a_record_in_each_of_its_categories(tmp_path):
    # the NLI Diagnostics' layout: coarse categories as columns, non-empty where the example belongs
    df = pd.DataFrame(
        {
            "Lexical Semantics": ["Negation", "", "Quantifiers"],
            "Predicate-Argument Structure": ["", "", ""],
            "Logic": ["Negation", "Conditionals", ""],
            "Knowledge": ["", "", ""],
            "Premise": ["A cat sat.", "If it rains, we stay.", "All dogs bark."],
            "Hypothesis": ["No cat sat.", "We stay.", "Some dogs bark."],
            "Label": ["contradiction", "neutral", "entailment"],
        }
    )
    path = tmp_path / "diagnostic-full.tsv"
    df.to_csv(path, sep="\t", index=False)
    frame = classification.load_source(
        {"format": "glue_tsv", "path": str(path), "text_columns": ["Premise", "Hypothesis"], "label_column": "Label",
         "label_names": ["entailment", "neutral", "contradiction"],
         "group_columns": ["Knowledge", "Logic", "Predicate-Argument Structure", "Lexical Semantics"]}
    )
    assert frame["groups"].tolist() == ["Logic|Lexical Semantics", "Logic", "Lexical Semantics"]
    preds = predictions(frame["id"], ["contradiction", "entailment", "entailment"], frame.attrs["label_names"])
    _, counts = aflite_ood.score_predictions(preds, frame, group_names={"Lexical Semantics": "LxS."})
    # by hand: row 0 right (Logic, LxS.), row 1 wrong (Logic), row 2 right (LxS.)
    assert counts == {"all": {"correct": 2, "n": 3}, "Logic": {"correct": 1, "n": 2}, "LxS.": {"correct": 2, "n": 2}}


def test_split_groups_pool_over_splits_and_seeds_give_mean_and_sample_std():
    def record(split, seed, train_set, group, correct, n):
        return {"ood": "stress", "split": split, "model": "roberta_large", "train_set": train_set, "seed": seed,
                "counts": {"all": {"correct": correct, "n": n}, group: {"correct": correct, "n": n}}}

    records = [
        # Comp. pools antonym and numerical: seed 0 (30 + 50) / (40 + 60) = 80 %, seed 1 (20 + 50) / 100 = 70 %
        record("antonym", 0, "full", "Comp.", 30, 40), record("numerical_reasoning", 0, "full", "Comp.", 50, 60),
        record("antonym", 1, "full", "Comp.", 20, 40), record("numerical_reasoning", 1, "full", "Comp.", 50, 60),
        record("spelling_error", 0, "aflite", "Noise", 9, 10),
    ]
    summary = {"n_pool": 495000, "n_pool_kept": 182000}  # a filter's summary.json: |D| and |D(AFLite)|
    sized = aflite_ood.training_data("snli", "n182k", {"n": 182000, "tau": 0.75}, summary)
    table = aflite_ood.ood_table(
        records, set_names={"stress": "Stress"}, paper_models={"roberta_large": "RoBERTa"},
        paper_training_data={"stress": "SNLI"}, training={"stress": sized},
    )
    comp = table[(table["group"] == "Comp.") & (table["train_set"] == "D")].iloc[0]
    assert comp["accuracy"] == pytest.approx(75.0) and comp["±"] == pytest.approx(math.sqrt(50.0))  # (80, 70)
    assert comp["seeds"] == 2 and comp["n"] == 100
    assert comp["set"] == "Stress" and comp["accuracy (paper)"] == 77.9 and comp["± (paper)"] == 2.5
    assert comp["trained_on"] == "snli (unfiltered)" and comp["train_size"] == 495000
    noise = table[table["group"] == "Noise"].iloc[0]
    assert noise["train_set"] == "D(AFLite)" and noise["accuracy"] == pytest.approx(90.0) and math.isnan(noise["±"])
    assert noise["accuracy (paper)"] == 79.5
    assert noise["trained_on"] == "snli filters.n182k (n = 182000)" and noise["train_size"] == 182000
    # the groups come before the pooled "all" row of their set
    assert table["group"].tolist().index("all") > table["group"].tolist().index("Comp.")
    # the paper's numbers are RoBERTa trained on SNLI: another training set gets none
    other = aflite_ood.ood_table(records, set_names={"stress": "Stress"}, paper_models={"roberta_large": "RoBERTa"},
                                 paper_training_data={"stress": "MultiNLI"}, training={"stress": sized})
    assert other["accuracy (paper)"].isna().all()


def test_ood_rows_name_their_filtered_set_and_only_a_sized_one_gets_the_papers_values():
    # App. A.5: Table 1's models train on SNLI filtered to n = 182K; the tau-stopped set (Tables 3-4's, about 92k)
    # is another experiment, so its rows say so and get no paper values
    records = [
        {"ood": "hans", "split": "validation", "model": "roberta_large", "train_set": train_set, "seed": 0,
         "counts": {"all": {"correct": 6, "n": 10}, "Lex.": {"correct": 6, "n": 10}}}
        for train_set in ("full", "random_n182k", "aflite_n182k")
    ]
    kwargs = dict(set_names={"hans": "HANS"}, paper_models={"roberta_large": "RoBERTa"},
                  paper_training_data={"hans": "SNLI"})
    sized = aflite_ood.training_data("snli", "n182k", {"n": 182000, "tau": 0.75},
                                     {"n_pool": 495000, "n_pool_kept": 182000})
    table = aflite_ood.ood_table(records, training={"hans": sized}, **kwargs)
    lex = table[table["group"] == "Lex."]
    assert lex["train_set"].tolist() == ["D", "D_rand", "D(AFLite)"]
    assert lex["trained_on"].tolist() == ["snli (unfiltered)"] + ["snli filters.n182k (n = 182000)"] * 2
    assert lex["train_size"].tolist() == [495000, 182000, 182000]
    assert lex["accuracy (paper)"].tolist() == [88.4, 56.6, 94.1]
    stopped = aflite_ood.training_data("snli", None, {"n": None, "tau": 0.75}, {"n_pool": 495000, "n_pool_kept": 92000})
    assert stopped["label"]["aflite"] == "snli filter (tau = 0.75, no n)" and stopped["size"]["random"] == 92000
    tau_records = [dict(r, train_set=r["train_set"].split("_")[0]) for r in records]
    tau_table = aflite_ood.ood_table(tau_records, training={"hans": stopped}, **kwargs)
    assert tau_table["accuracy (paper)"].isna().all() and tau_table["train_size"].tolist()[-1] == 92000
    # without the training data nothing says which set it was: no paper values either
    assert aflite_ood.ood_table(records, **kwargs)["accuracy (paper)"].isna().all()
    assert aflite_ood.train_set_kind("aflite_n182k") == "aflite" and aflite_ood.train_set_kind("full") == "full"


def test_paper_tables_are_transcribed_with_every_cell():
    groups = {name for name, _ in aflite_ood.PAPER_TABLE1}
    assert groups == {"HANS", "NLI-Diagnostics", "Stress"} and len(aflite_ood.PAPER_TABLE1) == 10
    assert all(set(v) == {"full", "random", "aflite"} for v in aflite_ood.PAPER_TABLE1.values())
    assert aflite_ood.PAPER_TABLE1[("HANS", "Constit.")]["aflite"] == (38.5, 15.2)
    assert aflite_ood.PAPER_TABLE2[("Adversarial-NLI", "Rd3")] == {"full": (50.1, None), "aflite": (52.8, None)}
