"""Out-of-distribution evaluation of AFLite's text models (Le Bras et al. 2020, §4.1, Tables 1-2, App. A.4).

The paper trains RoBERTa-large on SNLI's D, on a random subsample of D of the filtered size (D_182k) and on the
AFLite-filtered D(φ_RoBERTa), and evaluates each

* zero-shot (Table 1) on HANS (the non-entailment cases of its three heuristics), the NLI Diagnostics (its four
  coarse categories) and the NLI stress tests (competence, distraction, noise), mean and std over 5 seeds;
* after fine-tuning on each Adversarial NLI round's training data (Table 2, one run per cell), on that round's test.

Here an *OOD set* (``aflite.text.ood.<name>`` in a config) is any classification dataset of the workflow. Its
splits are scored by every full-input model trained for one AFLite dataset (``models_from``); optionally after
fine-tuning on a training split of the OOD dataset (``finetune``, the Table 2 protocol). What the paper leaves to
the reader is explicit here:

* ``prediction_map``: a model's label -> the OOD set's label, for sets with other labels than the training data
  (HANS has entailment / non-entailment: an SNLI model's neutral and contradiction both mean non-entailment, the
  mapping of McCoy et al. 2019). Labels with the same name need no entry.
* ``only_labels``: score only records with these gold labels (HANS: non-entailment, as Table 1's caption says).
* groups: per split (``splits: {split: group}``; the stress tests' six files in three categories) or per record
  (``splits: {split: null}`` with the dataset's ``group_column`` / ``group_columns``, renamed by ``groups``). A
  record in several groups (the Diagnostics' categories overlap) counts in each. Group accuracies pool the
  examples of all splits in the group; ``all`` pools every scored example.

* ``models_filter``: which filtered set of the ``models_from`` dataset the D_rand and D(AFLite) models were trained
  on: null for the dataset's own filter (τ-stopped in the paper config: Tables 3-4's 92k SNLI set), or a
  ``filters.<name>`` entry (App. A.5: "we explicitly set n = 182K for SNLI ... for the out-of-distribution
  generalization experiments"; the paper config's ``n182k``). Their train sets are then ``random_<name>`` and
  ``aflite_<name>``; D (``full``) is the same for every filter.

:func:`score_predictions` turns one model's predictions on one split into correct counts per group;
:func:`ood_table` pools them per seed and reports mean ± sample std over seeds, the filtered set each model was
trained on and its realised size (:func:`training_data`), and the paper's values beside ours where the setting is
the paper's: RoBERTa trained on SNLI filtered to a target size n (the τ-stopped set is not Table 1's 182k one).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from spurious.core import readers
from spurious.core.data.classification import GROUP_SEPARATOR
from spurious.core.errors import rebuild_advice

ALL = "all"
TRAIN_SET_LABELS: dict[str, str] = {"full": "D", "random": "D_rand", "aflite": "D(AFLite)"}
PAPER_SUFFIX = " (paper)"

# Table 1 (RoBERTa-large trained on SNLI): zero-shot accuracy (%) as (mean, std over 5 seeds) per train set
# (full = D, 550k; random = D_182k; aflite = D(φ_RoBERTa), 182k). Transcribed from the paper's Table 1.
PAPER_TABLE1: dict[tuple[str, str], dict[str, tuple[float, float | None]]] = {
    ("HANS", "Lex."): {"full": (88.4, 2.2), "random": (56.6, 14.7), "aflite": (94.1, 3.5)},
    ("HANS", "Subseq."): {"full": (28.2, 3.4), "random": (19.6, 5.6), "aflite": (46.3, 6.0)},
    ("HANS", "Constit."): {"full": (21.7, 7.1), "random": (13.8, 2.9), "aflite": (38.5, 15.2)},
    ("NLI-Diagnostics", "Knowl."): {"full": (51.8, 1.6), "random": (56.4, 0.8), "aflite": (53.9, 1.6)},
    ("NLI-Diagnostics", "Logic"): {"full": (57.8, 1.7), "random": (53.9, 1.5), "aflite": (58.7, 1.2)},
    ("NLI-Diagnostics", "PAS"): {"full": (72.6, 1.3), "random": (71.2, 1.1), "aflite": (69.9, 0.9)},
    ("NLI-Diagnostics", "LxS."): {"full": (65.7, 1.9), "random": (65.6, 1.7), "aflite": (66.5, 1.7)},
    ("Stress", "Comp."): {"full": (77.9, 2.5), "random": (68.4, 3.0), "aflite": (79.1, 1.0)},
    ("Stress", "Distr."): {"full": (73.5, 2.9), "random": (73.0, 3.0), "aflite": (72.0, 1.8)},
    ("Stress", "Noise"): {"full": (79.8, 0.8), "random": (78.6, 0.4), "aflite": (79.5, 0.4)},
}
# Table 2 (RoBERTa-large pre-trained on SNLI D or D(φ_RoBERTa), fine-tuned on each round's training data): test
# accuracy (%), one run per cell (App. A.4: no seed average), no random-subsample row.
PAPER_TABLE2: dict[tuple[str, str], dict[str, tuple[float, float | None]]] = {
    ("Adversarial-NLI", "Rd1"): {"full": (58.5, None), "aflite": (65.1, None)},
    ("Adversarial-NLI", "Rd2"): {"full": (48.3, None), "aflite": (49.1, None)},
    ("Adversarial-NLI", "Rd3"): {"full": (50.1, None), "aflite": (52.8, None)},
}
PAPER_OOD: dict[tuple[str, str], dict[str, tuple[float, float | None]]] = {**PAPER_TABLE1, **PAPER_TABLE2}
# the paper's OOD rows are RoBERTa-large trained on SNLI
PAPER_MODEL, PAPER_TRAINING_DATA = "RoBERTa", "SNLI"

OOD_COLUMNS: tuple[str, ...] = (
    "set", "group", "model", "train_set", "trained_on", "train_size", "accuracy", "±", "seeds", "n",
    f"accuracy{PAPER_SUFFIX}", f"±{PAPER_SUFFIX}",
)


def train_set_kind(train_set: str) -> str:
    """``full``, ``random`` or ``aflite`` of a train set id (``aflite_n182k``: a filters.n182k set's D(AFLite))."""
    return train_set.split("_", 1)[0]


def training_data(
    dataset: str, filter_name: str | None, settings: Mapping[str, Any], summary: Mapping[str, Any]
) -> dict[str, Any]:
    """What an OOD set's models were trained on, for the table: ``label`` per train set kind (the dataset and the
    filtered set: ``snli filters.n182k (n = 182000)`` or ``snli filter (tau = 0.75, no n)``; D is unfiltered),
    ``size`` per kind (the realised sizes: |D| = the pool, |D_rand| = |D(AFLite)| = the pool rows the filter kept)
    and ``n`` (the filter's target size; None when τ alone stopped it). ``summary``: the filter's summary.json."""
    n = settings.get("n")
    where = f"filters.{filter_name}" if filter_name else "filter"
    stop = f"n = {n}" if n is not None else f"tau = {settings.get('tau')}, no n"
    filtered = f"{dataset} {where} ({stop})"
    kept = int(summary["n_pool_kept"])
    return {
        "label": {"full": f"{dataset} (unfiltered)", "random": filtered, "aflite": filtered},
        "size": {"full": int(summary["n_pool"]), "random": kept, "aflite": kept},
        "n": n,
    }


def model_label_names(model_dir: str) -> list[str]:
    """A trained sequence classifier's label names, in index order, from its ``config.json``."""
    config_file = Path(model_dir) / "config.json"
    if not config_file.is_file():
        raise FileNotFoundError(f"{model_dir}: no config.json; not a trained sequence classifier")
    id2label = readers.read_json(config_file, kind="model config", fix=rebuild_advice(model_dir)).get("id2label") or {}
    return [str(id2label[k]) for k in sorted(id2label, key=int)]


def check_same_labels(model_dir: str, label_names: Sequence[str], *, source: str) -> None:
    """Fine-tuning a trained model on an OOD training split keeps its head: the labels must be the same, in the same
    order (a permuted set would silently retrain the head)."""
    have = model_label_names(model_dir)
    if have != list(label_names):
        raise ValueError(
            f"{source}: its labels {list(label_names)} differ from the model's {have} ({model_dir}); rename them with "
            "label_aliases (and order them with label_names) in the dataset's source config"
        )


def map_predictions(
    predicted: Sequence[str], data_labels: Sequence[str], prediction_map: Mapping[str, str] | None, *, source: str
) -> list[str]:
    """Model label names -> the evaluation set's label names through ``prediction_map`` (identity for labels it
    does not name). A model label that maps to no label of the data is a configuration error, named."""
    mapping = dict(prediction_map or {})
    known = set(data_labels)
    unmapped = sorted({p for p in predicted if mapping.get(p, p) not in known})
    if unmapped:
        raise ValueError(
            f"{source}: the model predicts {unmapped}, which are not labels of the evaluation data {list(data_labels)}"
            "; map them with prediction_map: {model label: data label} in the OOD set's config"
        )
    return [mapping.get(p, p) for p in predicted]


def score_predictions(
    predictions: pd.DataFrame,
    frame: pd.DataFrame,
    *,
    prediction_map: Mapping[str, str] | None = None,
    only_labels: Sequence[str] | None = None,
    split_group: str | None = None,
    group_names: Mapping[str, str] | None = None,
    source: str = "evaluation data",
) -> tuple[pd.DataFrame, dict[str, dict[str, int]]]:
    """One model's predictions on one evaluation split -> (per-record table, {group: {correct, n}}).

    ``predictions``: ``id, prediction`` with the model's label names in ``attrs["label_names"]`` (the output of
    :func:`spurious.core.train.classifier.predict_classifier` with ``check_labels=False``); ``frame``: the evaluation
    split (a classification frame, optionally with ``groups``). ``split_group``: every record's group; otherwise the
    records' own ``groups``, renamed by ``group_names``. Every scored record also counts in :data:`ALL`."""
    model_labels = list(predictions.attrs["label_names"])
    data_labels = list(frame.attrs["label_names"])
    if len(predictions) != len(frame) or (
        predictions["id"].astype(str).to_numpy() != frame["id"].astype(str).to_numpy()
    ).any():
        raise ValueError(f"{source}: the predictions are not in the evaluation data's order (ids differ)")
    unknown = sorted(set(only_labels or []) - set(data_labels))
    if unknown:
        raise ValueError(f"{source}: only_labels {unknown} are not labels of the evaluation data {data_labels}")
    predicted = [model_labels[int(i)] for i in predictions["prediction"]]
    mapped = map_predictions(predicted, data_labels, prediction_map, source=source)
    gold = [data_labels[int(i)] for i in frame["label"]]
    if split_group is not None:
        groups = [[split_group]] * len(frame)
    elif "groups" in frame.columns:
        rename = dict(group_names or {})
        groups = [
            [rename.get(g, g) for g in str(value).split(GROUP_SEPARATOR)]
            if value is not None and value == value
            else []
            for value in frame["groups"]
        ]
    else:
        groups = [[] for _ in range(len(frame))]
    table = pd.DataFrame(
        {
            "id": frame["id"].astype(str).to_numpy(),
            "gold": gold,
            "predicted": predicted,
            "mapped": mapped,
            "correct": np.array(mapped) == np.array(gold),
            "groups": [GROUP_SEPARATOR.join(g) for g in groups],
        }
    )
    scored = np.array([only_labels is None or g in only_labels for g in gold], dtype=bool)
    table["scored"] = scored
    counts: dict[str, dict[str, int]] = {ALL: {"correct": 0, "n": 0}}
    for ok, record_groups, use in zip(table["correct"], groups, scored, strict=True):
        if not use:
            continue
        for name in (ALL, *dict.fromkeys(record_groups)):
            cell = counts.setdefault(name, {"correct": 0, "n": 0})
            cell["correct"] += int(ok)
            cell["n"] += 1
    return table, counts


def pooled_accuracy(records: Sequence[Mapping[str, Any]]) -> dict[tuple[str, str, str, str, int], tuple[int, int]]:
    """Metrics records (one per OOD set, split, model, train set, seed; ``counts`` as :func:`score_predictions`
    returns) -> {(set, group, model, train_set, seed): (correct, n)} pooled over the set's splits."""
    pooled: dict[tuple[str, str, str, str, int], list[int]] = {}
    for r in records:
        for group, cell in r["counts"].items():
            key = (str(r["ood"]), str(group), str(r["model"]), str(r["train_set"]), int(r["seed"]))
            total = pooled.setdefault(key, [0, 0])
            total[0] += int(cell["correct"])
            total[1] += int(cell["n"])
    return {k: (v[0], v[1]) for k, v in pooled.items()}


def ood_table(
    records: Sequence[Mapping[str, Any]],
    *,
    set_names: Mapping[str, str] | None = None,
    paper_models: Mapping[str, str | None] | None = None,
    paper_training_data: Mapping[str, str | None] | None = None,
    training: Mapping[str, Mapping[str, Any]] | None = None,
) -> pd.DataFrame:
    """Tables 1-2: accuracy (%) per (OOD set, group, model, train set), mean and sample std (ddof = 1) over seeds,
    the number of seeds and of scored examples (per seed), what the models were trained on and its size, the
    paper's value beside ours.

    ``set_names``: OOD set -> the paper's name (``HANS``, ``NLI-Diagnostics``, ``Stress``, ``Adversarial-NLI``);
    ``paper_models``: model -> paper model name; ``paper_training_data``: OOD set -> the paper name of the data its
    models were trained on; ``training``: OOD set -> :func:`training_data` (``trained_on`` and ``train_size``;
    empty where not given). Paper values appear only for the paper's setting: RoBERTa trained on SNLI filtered to a
    target size n (App. A.5), so a set without ``training`` or with a τ-stopped filter gets none."""
    names = dict(set_names or {})
    models = dict(paper_models or {})
    trained_on = dict(paper_training_data or {})
    trained = dict(training or {})
    pooled = pooled_accuracy(records)
    cells: dict[tuple[str, str, str, str], list[tuple[int, int]]] = {}
    for (ood, group, model, train_set, _seed), value in sorted(pooled.items(), key=lambda kv: kv[0][4]):
        cells.setdefault((ood, group, model, train_set), []).append(value)
    # sets and groups in the order the records first name them (a split's own order: HANS's Lex., Subseq., Constit.)
    order_sets = list(dict.fromkeys(str(r["ood"]) for r in records))
    order_groups = list(dict.fromkeys(str(g) for r in records for g in r["counts"]))
    train_order = {t: i for i, t in enumerate(TRAIN_SET_LABELS)}  # by kind: full, random, aflite
    rows = []
    for (ood, group, model, train_set), values in sorted(
        cells.items(),
        key=lambda kv: (
            order_sets.index(kv[0][0]), kv[0][1] == ALL, order_groups.index(kv[0][1]), kv[0][2],
            train_order.get(train_set_kind(kv[0][3]), 99),
        ),
    ):
        acc = np.array([100.0 * c / n if n else math.nan for c, n in values])
        paper_name = names.get(ood) or ood
        kind = train_set_kind(train_set)
        data = trained.get(ood) or {}
        paper = None
        if (
            models.get(model) == PAPER_MODEL
            and trained_on.get(ood) == PAPER_TRAINING_DATA
            and data.get("n") is not None
        ):
            paper = PAPER_OOD.get((paper_name, group), {}).get(kind)
        rows.append(
            {
                "set": paper_name,
                "group": group,
                "model": model,
                "train_set": TRAIN_SET_LABELS.get(kind, train_set),
                "trained_on": (data.get("label") or {}).get(kind, ""),
                "train_size": (data.get("size") or {}).get(kind),
                "accuracy": float(np.mean(acc)),
                "±": float(np.std(acc, ddof=1)) if len(acc) > 1 else math.nan,
                "seeds": len(acc),
                "n": int(values[0][1]),
                f"accuracy{PAPER_SUFFIX}": math.nan if paper is None else paper[0],
                f"±{PAPER_SUFFIX}": math.nan if paper is None or paper[1] is None else paper[1],
            }
        )
    table = pd.DataFrame(rows, columns=list(OOD_COLUMNS))
    table["train_size"] = table["train_size"].astype("Int64")  # whole numbers, empty where unknown
    return table
