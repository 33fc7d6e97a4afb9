"""Tables and Figures 1-2 of the SpuriousBench track ("What Spurious Features Can Pretrained Language Models
Combat?", §2.2, §4, App. E).

Inputs are plain records (the workflow reads them from JSON):

* ``metrics``: one dict per trained run (dataset × feature × model × method × seed) with the keys of
  :data:`METRIC_KEYS` (``paper_name`` optional). Fractions in [0, 1]; ``gap`` = ``acc_supporting − acc_counter``
  (§2.2) in [−1, 1]; ``acc_without`` may be NaN / None (a test set without feature-free rows).
  An in-context (``method == "icl"``) record may carry the ``icl`` mapping spurious_icl writes (``shots``,
  ``prevalence`` / ``strength`` as configured, ``realised_prevalence`` / ``realised_strength`` of the drawn
  demonstrations): its rows' ``label`` (tables, Fig. 2 titles) then states the shots and the realised values, and
  the configured ones where rounding moved them (:func:`icl_annotation`; 8 shots at 20 % / 90 % realise 25 % / 100 %).
* ``sizes``: one dict per (dataset, feature) with the keys of :data:`SIZE_KEYS` (the split sizes and the measured
  prevalence / strength of train and dev, as fractions).

Every table and figure reports percentages (×100). Aggregation follows §4.1: "we repeat the experiments three times
with different random seeds to obtain the average spurious gap. We then average the spurious gaps of features within
each category": first the mean over seeds per feature, then the mean over the category's features.

* :func:`gap_table`: one row per (dataset, feature, model, method), means and sample std over seeds.
* :func:`category_table`: one row per (dataset, category, model, method), the Figure 1 numbers.
* :func:`sizes_table`: the App. E layout (Table 2 of the paper) with our train / dev sizes and measured rates.
* :func:`figure1`: per dataset the category means of every finetuned model (Fig. 1: BERT-base / -large / -random).
* :func:`figure2`: per dataset and feature the gap of each fine-tuning method (finetune / balanced / prompt /
  bitfit) of the models trained with several (Fig. 2).
* :func:`figure3`: per dataset and feature the gap of each in-context model (Fig. 3, with Figs. 4-5's settings).
* :func:`summary_lines`: one log line per (dataset, model, method) with the category means.

Rows are ordered by dataset (first seen), category (:data:`spurious.spuriousbench.construction.CATEGORIES` order),
feature (first seen), model (first seen), method (:data:`METHODS` order). Write the tables with
``spurious.thinktwice.report.write_table(df, csv, md, digits=DIGITS)``.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from spurious.core import figures
from spurious.core.figures import figure_function, save_figure
from spurious.spuriousbench.construction import CATEGORIES, FEATURES, KINDS
from spurious.spuriousbench.track import METHODS  # §4-§5, in the tables' order

__all__ = [
    "CATEGORY_TABLE_COLUMNS",
    "DIGITS",
    "GAP_TABLE_COLUMNS",
    "ICL_CAPTION",
    "METHODS",
    "METRIC_KEYS",
    "SIZE_KEYS",
    "SIZES_TABLE_COLUMNS",
    "category_table",
    "feature_label",
    "figure1",
    "figure2",
    "figure2_panels",
    "figure3",
    "figure3_panels",
    "gap_table",
    "icl_annotation",
    "sizes_table",
    "summary_lines",
]

DIGITS = 1
"""Decimals of the percentages in the Markdown tables."""
ICL_CAPTION = (
    " In-context (icl) rows: the label gives, in square brackets, the number of demonstrations and their realised "
    "prevalence and strength (what the drawn demonstrations hold, as the metrics record it); where rounding at that "
    "number of shots moved them off the configured values, the configured ones follow in brackets (e.g. 8 shots at "
    "20 % / 90 % hold 2 feature rows, both of the target label: realised 25 % / 100 %)."
)
"""Appended to the captions of the tables (and figures) that have in-context rows."""

METRIC_KEYS: tuple[str, ...] = (
    "dataset",
    "feature",
    "category",
    "model",
    "method",
    "seed",
    "gap",
    "acc_supporting",
    "acc_counter",
    "acc_without",
    "accuracy",
    "dev_accuracy",
)
"""Keys every metrics record must have (``paper_name``, ``kind``, ``model_kind`` and the sizes are optional here)."""
SIZE_KEYS: tuple[str, ...] = (
    "dataset",
    "feature",
    "category",
    "kind",
    "train",
    "dev",
    "test_supporting",
    "test_counter",
    "test_without",
    "train_prevalence",
    "train_strength",
    "dev_prevalence",
    "dev_strength",
)
"""Keys every sizes record must have."""

GAP_TABLE_COLUMNS: tuple[str, ...] = (
    "dataset",
    "category",
    "feature",
    "model",
    "label",
    "method",
    "seeds",
    "gap",
    "gap ±",
    "acc supporting",
    "acc counter",
    "acc without",
    "dev accuracy",
    "dev accuracy ±",
    "test accuracy",
    "constant",
)
CATEGORY_TABLE_COLUMNS: tuple[str, ...] = (
    "dataset",
    "category",
    "model",
    "label",
    "method",
    "features",
    "seeds",
    "gap",
    "gap ± features",
    "gap min",
    "gap max",
    "gap ± seeds",
)
SIZES_TABLE_COLUMNS: tuple[str, ...] = (
    "dataset",
    "category",
    "feature",
    "kind",
    "train",
    "dev",
    "test supporting",
    "test counter",
    "test without",
    "train prevalence",
    "train strength",
    "dev prevalence",
    "dev strength",
)

# gap must equal acc_supporting − acc_counter up to float noise; a larger difference means mixed-up inputs
_GAP_TOLERANCE = 1e-6
_METHOD_COLORS = {"finetune": "C0", "balanced": "C1", "prompt": "C2", "bitfit": "C4", "icl": "C5"}

Cell = tuple[str, str, str, str]  # (dataset, feature, model, method)


# ----------------------------------------------------------------------------------------------------------------------
# validation


def _describe(record: Mapping[str, Any], index: int, what: str) -> str:
    """A record's position and identity for error messages (whatever of it is there)."""
    parts = [str(record[k]) for k in ("dataset", "feature", "model", "method") if k in record]
    if "seed" in record:
        parts.append(f"seed {record['seed']}")
    return f"{what} record {index} ({'/'.join(parts) or 'no identifying keys'})"


def _require_keys(records: Sequence[Mapping[str, Any]], keys: Sequence[str], what: str) -> None:
    if not records:
        raise ValueError(f"no {what} records")
    for i, r in enumerate(records):
        if not isinstance(r, Mapping):
            raise ValueError(f"{what} record {i} is a {type(r).__name__}, not a mapping")
        missing = [k for k in keys if k not in r]
        if missing:
            raise ValueError(f"{_describe(r, i, what)} lacks key(s) {', '.join(repr(k) for k in missing)}")


def _number(r: Mapping[str, Any], key: str, where: str, *, low: float, high: float, nan_ok: bool = False) -> float:
    value = r[key]
    if value is None and nan_ok:
        return math.nan
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        raise ValueError(f"{where}: {key} = {value!r} is not a number")
    x = float(value)
    if math.isnan(x) and nan_ok:
        return x
    # a value outside the range is most likely a percentage passed as a fraction (or vice versa)
    if not low <= x <= high:
        raise ValueError(f"{where}: {key} = {value!r} is not in [{low}, {high}] (fractions expected)")
    return x


def _check_category(r: Mapping[str, Any], where: str) -> str:
    category, feature = r["category"], str(r["feature"])
    if category not in CATEGORIES:
        raise ValueError(f"{where}: unknown category {category!r} (known: {CATEGORIES})")
    # the feature name is "category:value"; a mismatch means the record was assembled wrongly
    if feature.partition(":")[0] != category:
        raise ValueError(f"{where}: feature {feature!r} does not belong to category {category!r}")
    return category


def _metrics(metrics: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Validated, normalised copies of the metrics records (see :data:`METRIC_KEYS`)."""
    _require_keys(metrics, METRIC_KEYS, "metrics")
    out: list[dict[str, Any]] = []
    seen: set[tuple[str, str, str, str, int]] = set()
    paper_names: dict[str, str | None] = {}
    for i, r in enumerate(metrics):
        where = _describe(r, i, "metrics")
        category = _check_category(r, where)
        if r["method"] not in METHODS:
            raise ValueError(f"{where}: unknown method {r['method']!r} (known: {METHODS})")
        seed = r["seed"]
        if isinstance(seed, bool) or not isinstance(seed, int | np.integer):
            raise ValueError(f"{where}: seed {seed!r} is not an integer")
        rec: dict[str, Any] = {
            "dataset": str(r["dataset"]),
            "feature": str(r["feature"]),
            "category": category,
            "model": str(r["model"]),
            "method": str(r["method"]),
            "seed": int(seed),
            "gap": _number(r, "gap", where, low=-1.0, high=1.0),
        }
        for key in ("acc_supporting", "acc_counter", "accuracy", "dev_accuracy"):
            rec[key] = _number(r, key, where, low=0.0, high=1.0)
        rec["acc_without"] = _number(r, "acc_without", where, low=0.0, high=1.0, nan_ok=True)
        if abs(rec["gap"] - (rec["acc_supporting"] - rec["acc_counter"])) > _GAP_TOLERANCE:
            raise ValueError(
                f"{where}: gap {rec['gap']} != acc_supporting − acc_counter "
                f"({rec['acc_supporting']} − {rec['acc_counter']})"
            )
        key = (rec["dataset"], rec["feature"], rec["model"], rec["method"], rec["seed"])
        if key in seen:
            raise ValueError(f"{where}: a second record for the same dataset, feature, model, method and seed")
        seen.add(key)
        paper_name = r.get("paper_name") or None
        if rec["model"] in paper_names and paper_names[rec["model"]] != paper_name:
            raise ValueError(
                f"{where}: model {rec['model']!r} has paper_name {paper_name!r} here and "
                f"{paper_names[rec['model']]!r} in an earlier record"
            )
        paper_names[rec["model"]] = paper_name
        rec["paper_name"] = paper_name
        # optional: a run that predicts one label for every test row (its gap is ±100 % or 0 and says nothing)
        rec["constant_prediction"] = bool(r.get("constant_prediction", False))
        rec["icl"] = _icl_setting(r, where) if rec["method"] == "icl" else None
        out.append(rec)
    return out


IclSetting = tuple[int | None, float | None, float | None, float | None, float | None]
# (shots, configured prevalence, configured strength, realised prevalence, realised strength)


def _icl_setting(r: Mapping[str, Any], where: str) -> IclSetting | None:
    """An icl record's demonstrations: the shots, the configured and the realised prevalence and strength (the
    ``icl`` mapping spurious_icl writes); None when the record has no ``icl`` mapping."""
    icl = r.get("icl")
    if not isinstance(icl, Mapping):
        return None
    values: list[float | None] = []
    for key in ("prevalence", "strength", "realised_prevalence", "realised_strength"):
        values.append(None if icl.get(key) is None else _number(icl, key, f"{where} icl", low=0.0, high=1.0))
    shots = icl.get("shots")
    return (None if shots is None else int(shots), *values)  # type: ignore[return-value]


def _percent(value: float | None) -> str:
    """A fraction as a percentage with at most one decimal ("25 %", "12.5 %"); "–" when undefined."""
    if value is None:
        return "–"
    return f"{100.0 * value:.1f}".rstrip("0").rstrip(".") + " %"


def icl_annotation(setting: IclSetting) -> str:
    """What an in-context row's label says about its demonstrations: the shots and the *realised* prevalence and
    strength (what the draw holds: ``round(π k)`` feature rows, ``round(s · round(π k))`` of them with the target
    label), and the configured values in brackets where rounding moved them, e.g. ``"ICL, 8 shots: realised
    prevalence 25 % / strength 100 % (configured 20 % / 90 %)"``; ``"ICL, 8 shots: prevalence 50 % / strength
    100 %"`` where they agree. The realised strength is undefined ("–") without feature rows."""
    shots, prevalence, strength, realised_prevalence, realised_strength = setting
    head = "ICL" if shots is None else f"ICL, {shots} shots"
    configured = f"{_percent(prevalence)} / {_percent(strength)}"
    if realised_prevalence is None:
        return (
            f"{head}: configured prevalence {_percent(prevalence)} / strength {_percent(strength)} "
            "(realised not recorded)"
        )
    realised = f"prevalence {_percent(realised_prevalence)} / strength {_percent(realised_strength)}"
    same = prevalence is not None and abs(realised_prevalence - prevalence) < 1e-9
    if realised_strength is not None:
        same = same and strength is not None and abs(realised_strength - strength) < 1e-9
    if same:
        return f"{head}: {realised}"
    return f"{head}: realised {realised} (configured {configured})"


def _icl_annotations(records: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """model → :func:`icl_annotation` of its icl records (the distinct ones joined by "; "); models without icl
    records (or whose icl records carry no ``icl`` mapping) are absent."""
    settings: dict[str, list[IclSetting]] = {}
    for r in records:
        if r["method"] == "icl" and r["icl"] is not None:
            own = settings.setdefault(r["model"], [])
            if r["icl"] not in own:
                own.append(r["icl"])
    return {model: "; ".join(icl_annotation(s) for s in own) for model, own in settings.items()}


def _row_label(labels: Mapping[str, str], annotations: Mapping[str, str], model: str, method: str) -> str:
    """The ``label`` of a table row: the model's label, for an in-context row followed by its demonstrations'
    realised prevalence and strength in square brackets."""
    if method == "icl" and model in annotations:
        return f"{labels[model]} [{annotations[model]}]"
    return labels[model]


def _first_seen(values: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(values))


def _model_labels(records: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """model → its paper name (else the config name); two models with one paper name get the config name added."""
    labels = {r["model"]: r["paper_name"] or r["model"] for r in records}
    counts: dict[str, int] = {}
    for label in labels.values():
        counts[label] = counts.get(label, 0) + 1
    return {m: (f"{label} ({m})" if counts[label] > 1 and label != m else label) for m, label in labels.items()}


def _ordered_cells(records: Sequence[Mapping[str, Any]]) -> dict[Cell, list[Mapping[str, Any]]]:
    """Records per (dataset, feature, model, method) in the module's row order; records within a cell by seed."""
    datasets = {d: k for k, d in enumerate(_first_seen(r["dataset"] for r in records))}
    features = {f: k for k, f in enumerate(_first_seen(r["feature"] for r in records))}
    models = {m: k for k, m in enumerate(_first_seen(r["model"] for r in records))}
    categories = {c: k for k, c in enumerate(CATEGORIES)}
    methods = {m: k for k, m in enumerate(METHODS)}
    cells: dict[Cell, list[Mapping[str, Any]]] = {}
    for r in records:
        cells.setdefault((r["dataset"], r["feature"], r["model"], r["method"]), []).append(r)

    def rank(cell: Cell) -> tuple[int, int, int, int, int]:
        dataset, feature, model, method = cell
        category = feature.partition(":")[0]
        return datasets[dataset], categories[category], features[feature], models[model], methods[method]

    return {cell: sorted(cells[cell], key=lambda r: r["seed"]) for cell in sorted(cells, key=rank)}


def _mean(values: Sequence[float]) -> float:
    """Mean in % of the finite values; NaN when there are none."""
    finite = [v for v in values if not math.isnan(v)]
    return 100.0 * float(np.mean(finite)) if finite else math.nan


def _std(values: Sequence[float]) -> float:
    """Sample std (ddof=1) in %; NaN for fewer than two values."""
    return 100.0 * float(np.std(values, ddof=1)) if len(values) > 1 else math.nan


def feature_label(feature: str) -> str:
    """A short axis label: the part after "category:" with underscores as spaces ("punctuation:exclamation" →
    "exclamation"); known n-gram prefixes and syntax features as the paper prints them ("prefix:my_thought" →
    "My thought:", "syntax:np_np_pp" → "NP -> NP PP")."""
    spec = FEATURES.get(feature)
    if spec is not None and spec.category in ("prefix", "syntax"):
        return spec.value.strip()
    return feature.partition(":")[2].replace("_", " ") or feature


# ----------------------------------------------------------------------------------------------------------------------
# tables


def gap_table(metrics: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """One row per (dataset, feature, model, method), columns :data:`GAP_TABLE_COLUMNS`.

    ``label``: the model's ``paper_name`` (else ``model``); ``seeds``: the number of runs; ``gap`` / ``gap ±``: mean
    and sample std (ddof=1; NaN for one seed, an empty CSV cell and "–" in the Markdown) of the spurious gap;
    ``acc supporting`` / ``acc counter`` / ``acc without`` / ``test accuracy``: means over seeds (``acc without`` over
    the seeds where it is defined, NaN if none); ``dev accuracy`` / ``dev accuracy ±``: mean and sample std of the
    in-distribution dev accuracy. All in %. Row order: see the module docstring. Raises ``ValueError`` for an
    invalid record (missing key, unknown category or method, a fraction out of range, a gap that is not
    ``acc_supporting − acc_counter``, a repeated seed).
    """
    records = _metrics(metrics)
    labels = _model_labels(records)
    annotations = _icl_annotations(records)
    rows = []
    for (dataset, feature, model, method), runs in _ordered_cells(records).items():
        gaps = [r["gap"] for r in runs]
        dev = [r["dev_accuracy"] for r in runs]
        rows.append(
            {
                "dataset": dataset,
                "category": runs[0]["category"],
                "feature": feature,
                "model": model,
                "label": _row_label(labels, annotations, model, method),
                "method": method,
                "seeds": len(runs),
                "gap": _mean(gaps),
                "gap ±": _std(gaps),
                "acc supporting": _mean([r["acc_supporting"] for r in runs]),
                "acc counter": _mean([r["acc_counter"] for r in runs]),
                "acc without": _mean([r["acc_without"] for r in runs]),
                "dev accuracy": _mean(dev),
                "dev accuracy ±": _std(dev),
                "test accuracy": _mean([r["accuracy"] for r in runs]),
                "constant": sum(r["constant_prediction"] for r in runs),
            }
        )
    df = pd.DataFrame(rows, columns=list(GAP_TABLE_COLUMNS))
    df.attrs["caption"] = (
        "Spurious gap per feature (%, §2.2): accuracy on the supporting test examples (feature present, target "
        "label) minus accuracy on the counter-examples (feature present, other label); mean and sample std (±) over "
        "seeds. acc without: test examples without the feature; dev accuracy: the in-distribution dev split (same "
        "prevalence and strength as train); test accuracy: the whole test set. All means over seeds. constant: seeds "
        "whose model predicts one label for every test example: with a dev accuracy near 50 % it learned nothing and "
        "its gap says nothing; where every test example has the feature (punctuation, prefixes) it may instead have "
        "given them all the feature's label."
    )
    if annotations:
        df.attrs["caption"] += ICL_CAPTION
    return df


def category_table(metrics: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """One row per (dataset, category, model, method), columns :data:`CATEGORY_TABLE_COLUMNS` (all gaps in %).

    Aggregation order (§4.1, Figure 1):

    1. per feature, the mean of the gap over its seeds (the ``gap`` column of :func:`gap_table`);
    2. over the category's features, of those seed means: ``gap`` (mean), ``gap ± features`` (sample std, ddof=1;
       NaN for one feature), ``gap min`` and ``gap max``; ``features``: their number;
    3. ``gap ± seeds``: per feature the sample std over seeds (``gap ±`` of :func:`gap_table`), averaged over the
       category's features that have at least two seeds (NaN if none has).

    A feature with more seeds therefore weighs no more than one with fewer. ``seeds``: the fewest seeds behind a
    feature of the row. Row order: dataset, category, model, method (as in :func:`gap_table`).
    """
    features = gap_table(metrics)
    groups: dict[tuple[str, str, str, str], pd.DataFrame] = {
        key: group for key, group in features.groupby(["dataset", "category", "model", "method"], sort=False)
    }
    order = {key: k for k, key in enumerate(groups)}
    datasets = {d: k for k, d in enumerate(_first_seen(features["dataset"]))}
    models = {m: k for k, m in enumerate(_first_seen(features["model"]))}
    categories = {c: k for k, c in enumerate(CATEGORIES)}
    methods = {m: k for k, m in enumerate(METHODS)}

    def rank(key: tuple[str, str, str, str]) -> tuple[int, ...]:
        dataset, category, model, method = key
        return datasets[dataset], categories[category], models[model], methods[method], order[key]

    rows = []
    for key in sorted(groups, key=rank):
        dataset, category, model, method = key
        group = groups[key]
        means = group["gap"].to_numpy(dtype=float)
        seed_stds = group["gap ±"].dropna().to_numpy(dtype=float)
        rows.append(
            {
                "dataset": dataset,
                "category": category,
                "model": model,
                "label": group["label"].iloc[0],
                "method": method,
                "features": len(means),
                "seeds": int(group["seeds"].min()),
                "gap": float(means.mean()),
                "gap ± features": float(np.std(means, ddof=1)) if len(means) > 1 else math.nan,
                "gap min": float(means.min()),
                "gap max": float(means.max()),
                "gap ± seeds": float(seed_stds.mean()) if len(seed_stds) else math.nan,
            }
        )
    df = pd.DataFrame(rows, columns=list(CATEGORY_TABLE_COLUMNS))
    df.attrs["caption"] = (
        "Spurious gap per category (%, Figure 1): per feature the mean over seeds, then over the category's features "
        "their mean (gap), sample std (± features), minimum and maximum; ± seeds: the sample std over seeds, averaged "
        "over the features. seeds: the fewest seeds behind a feature."
    )
    if ICL_CAPTION in features.attrs.get("caption", ""):
        df.attrs["caption"] += ICL_CAPTION
    return df


def sizes_table(sizes: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """App. E layout, one row per (dataset, feature), columns :data:`SIZES_TABLE_COLUMNS`: the split sizes (integers)
    and the measured prevalence and strength of train and dev in % (§2.2: prevalence = share of examples with the
    feature, strength = share of the target label among them). Rows by dataset (first seen), category
    (``CATEGORIES`` order), feature (first seen). Raises ``ValueError`` for a missing key, an unknown category or
    kind, a negative size, a rate outside [0, 1] or a repeated (dataset, feature)."""
    _require_keys(sizes, SIZE_KEYS, "sizes")
    rows = []
    seen: set[tuple[str, str]] = set()
    for i, r in enumerate(sizes):
        where = _describe(r, i, "sizes")
        category = _check_category(r, where)
        if r["kind"] not in KINDS:
            raise ValueError(f"{where}: unknown kind {r['kind']!r} (known: {KINDS})")
        key = (str(r["dataset"]), str(r["feature"]))
        if key in seen:
            raise ValueError(f"{where}: a second sizes record for dataset {key[0]!r}, feature {key[1]!r}")
        seen.add(key)
        row: dict[str, Any] = {"dataset": key[0], "category": category, "feature": key[1], "kind": r["kind"]}
        for src, column in (
            ("train", "train"),
            ("dev", "dev"),
            ("test_supporting", "test supporting"),
            ("test_counter", "test counter"),
            ("test_without", "test without"),
        ):
            value = r[src]
            if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 0:
                raise ValueError(f"{where}: {src} = {value!r} is not a non-negative integer")
            row[column] = int(value)
        for src in ("train_prevalence", "train_strength", "dev_prevalence", "dev_strength"):
            row[src.replace("_", " ")] = 100.0 * _number(r, src, where, low=0.0, high=1.0)
        rows.append(row)
    datasets = {d: k for k, d in enumerate(_first_seen(r["dataset"] for r in rows))}
    features = {f: k for k, f in enumerate(_first_seen(r["feature"] for r in rows))}
    categories = {c: k for k, c in enumerate(CATEGORIES)}
    rows.sort(key=lambda r: (datasets[r["dataset"]], categories[r["category"]], features[r["feature"]]))
    df = pd.DataFrame(rows, columns=list(SIZES_TABLE_COLUMNS))
    df.attrs["caption"] = (
        "Split sizes per feature (App. E): train and dev (feature correlated with the target label), and the test "
        "set's supporting examples (feature, target label), counter-examples (feature, other label) and examples "
        "without the feature. Prevalence (share of examples with the feature) and strength (share of the target "
        "label among them) as measured on train and dev, in %."
    )
    return df


def summary_lines(metrics: Sequence[Mapping[str, Any]]) -> list[str]:
    """One log line per (dataset, model, method): the mean gap (%) of every category (:func:`category_table`), e.g.
    ``"sst2 BERT-base [minilm] finetune: gap % punctuation 30.0, determiner 5.0 (3 features, 3 seeds)"``."""
    table = category_table(metrics)
    lines = []
    for (dataset, model, method), group in table.groupby(["dataset", "model", "method"], sort=False):
        label = group["label"].iloc[0]
        name = label if label == model else f"{label} [{model}]"
        gaps = ", ".join(f"{c} {g:.1f}" for c, g in zip(group["category"], group["gap"], strict=True))
        low, high = int(group["seeds"].min()), int(group["seeds"].max())
        seeds = f"{low} seeds" if low == high else f"{low}-{high} seeds"
        lines.append(f"{dataset} {name} {method}: gap % {gaps} ({int(group['features'].sum())} features, {seeds})")
    return lines


# ----------------------------------------------------------------------------------------------------------------------
# figures


def _short(label: str, limit: int = 22) -> str:
    """A tick label cut to ``limit`` characters (the long n-gram prefixes), with an ellipsis."""
    return label if len(label) <= limit else label[: limit - 1].rstrip() + "…"


def _errorbars(ax: Any, x: np.ndarray, y: np.ndarray, err: np.ndarray) -> None:
    """Black error bars where the std is defined (one seed or one feature: none)."""
    ok = np.isfinite(err)
    if ok.any():
        ax.errorbar(x[ok], y[ok], yerr=err[ok], fmt="none", ecolor="black", elinewidth=0.7, capsize=2, zorder=3)


@figure_function
def figure1(
    metrics: Sequence[Mapping[str, Any]], png_path: str | os.PathLike, svg_path: str | os.PathLike
) -> pd.DataFrame:
    """Figure 1: the finetuned models' spurious gap per category, one panel (row) per dataset.

    x: the dataset's categories (``CATEGORIES`` order); one bar per model (``method == "finetune"`` records only;
    legend: ``paper_name``, else ``model``); bar height: ``gap`` of :func:`category_table` (mean over features of
    the seed means); error bar: its ``gap ± features``, the sample std over the category's features of their seed
    means, as the paper's black bars (none for a category of one feature); dots: the features' seed means. The
    spread over seeds stays in :func:`category_table` (``gap ± seeds``). Returns the plotted bars (the finetune rows
    of :func:`category_table` with ``error bar``). Raises ``ValueError`` without finetune records.
    """
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    categories_table = category_table(metrics)
    cat = categories_table[categories_table["method"] == "finetune"].assign(
        **{"error bar": lambda d: d["gap ± features"]}
    )
    if cat.empty:
        raise ValueError("figure1 needs metrics records with method 'finetune'")
    features = gap_table(metrics)
    features = features[features["method"] == "finetune"]
    datasets = _first_seen(cat["dataset"])
    models = _first_seen(cat["model"])
    labels = dict(zip(cat["model"], cat["label"], strict=True))
    n_categories = max(cat.groupby("dataset")["category"].nunique())
    width = 0.8 / len(models)

    with matplotlib.rc_context({"svg.hashsalt": "spuriousbench-figure1", "svg.fonttype": "path", "font.size": 7}):
        fig = Figure(figsize=(max(4.0, 0.35 * len(models) * n_categories + 1.5), 2.3 * len(datasets) + 0.6))
        fig.set_layout_engine("constrained")
        FigureCanvasAgg(fig)
        for row, dataset in enumerate(datasets):
            ax = fig.add_subplot(len(datasets), 1, row + 1)
            panel = cat[cat["dataset"] == dataset]
            categories = [c for c in CATEGORIES if c in set(panel["category"])]
            for k, model in enumerate(models):
                bars = panel[panel["model"] == model]
                if bars.empty:
                    continue
                offset = (k - (len(models) - 1) / 2) * width
                x = np.array([categories.index(c) for c in bars["category"]], dtype=float) + offset
                y = bars["gap"].to_numpy(dtype=float)
                color = f"C{k % 10}"
                ax.bar(x, y, width * 0.92, color=color, alpha=0.85, zorder=2)
                _errorbars(ax, x, y, bars["error bar"].to_numpy(dtype=float))
                own = features[(features["dataset"] == dataset) & (features["model"] == model)]
                for xc, category in zip(x, bars["category"], strict=True):
                    means = own.loc[own["category"] == category, "gap"].to_numpy(dtype=float)
                    # spread the dots over the bar so that equal values stay visible side by side
                    xs = xc + (np.linspace(-0.3, 0.3, len(means)) * width if len(means) > 1 else np.zeros(1))
                    ax.scatter(xs, means, s=7, facecolor="white", edgecolor="black", linewidths=0.5, zorder=4)
            ax.axhline(0.0, color="0.3", linewidth=0.6, zorder=1)
            ax.set_xticks(range(len(categories)), categories)
            ax.set_xlim(-0.6, len(categories) - 0.4)
            ax.set_ylabel("spurious gap (%)")
            ax.set_title(dataset)
            ax.grid(axis="y", linewidth=0.3, alpha=0.6)
            ax.set_axisbelow(True)
        handles = [Patch(color=f"C{k % 10}", alpha=0.85, label=labels[m]) for k, m in enumerate(models)]
        fig.legend(handles=handles, loc="outside upper center", ncols=len(handles), frameon=False)
        fig.supxlabel(
            "bars: mean over the category's features of the mean over seeds;\nerror bars: sample std over the "
            "category's features (the paper's); dots: the features",
            fontsize=6,
        )
        save_figure(fig, png_path, svg_path)
    return cat.reset_index(drop=True)


Panel = tuple[str, str, list[tuple[str, str]]]
"""One panel of :func:`figure2` / :func:`figure3`: (dataset, title, bars), bars = the (model, method) pairs drawn
side by side for each feature."""


def _and(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def figure2_panels(metrics: Sequence[Mapping[str, Any]]) -> tuple[list[Panel], list[str]]:
    """The panels of :func:`figure2` (the paper's Fig. 2: the training methods) and what it leaves out, in words.

    A model trained with more than one fine-tuning method (finetune, balanced, prompt, bitfit) on a dataset gets a
    panel there (title: its label) with a bar per method, datasets first-seen, then models; the (dataset, model)
    pairs with one method only are left out ("BERT-large on sst2 and mnli (finetune only)"; Figure 1 shows standard
    fine-tuning), and so are the in-context runs (Figure 3). Where no model has several methods, each dataset with
    fine-tuning results gets one panel titled "finetune" with a bar per (model, method): a per-feature view of
    Figure 1. Returns ``(panels, left_out)``."""
    every = _metrics(metrics)
    labels = _model_labels(every)
    records = [r for r in every if r["method"] != "icl"]
    left_out = ["in-context learning (Figure 3)"] if len(records) < len(every) else []
    datasets = _first_seen(r["dataset"] for r in records)
    models = _first_seen(r["model"] for r in records)
    ran = {(r["dataset"], r["model"], r["method"]) for r in records}
    methods = {(d, m): [x for x in METHODS if (d, m, x) in ran] for d in datasets for m in models}
    panels = [(d, labels[m], [(m, x) for x in methods[d, m]]) for d in datasets for m in models
              if len(methods[d, m]) > 1]  # fmt: skip
    if not panels:
        panels = [(d, "finetune", [(m, x) for m in models for x in methods[d, m]]) for d in datasets]
        return panels, left_out
    alone: dict[tuple[str, tuple[str, ...]], list[str]] = {}
    for d in datasets:
        for m in models:
            if len(methods[d, m]) == 1:
                alone.setdefault((labels[m], tuple(methods[d, m])), []).append(d)
    left_out = [f"{label} on {_and(ds)} ({_and(list(ms))} only)" for (label, ms), ds in alone.items()] + left_out
    return panels, left_out


def figure3_panels(metrics: Sequence[Mapping[str, Any]]) -> tuple[list[Panel], list[str]]:
    """The panels of :func:`figure3` (the paper's Fig. 3: in-context learning) and what it leaves out, in words: one
    panel per dataset with in-context results, titled "in-context learning", with a bar per in-context model (its
    demonstrations in the legend); datasets without them are named ("sst2_negative (no in-context runs)"), and so
    are the fine-tuned models (Figures 1 and 2). Returns ``(panels, left_out)``."""
    records = _metrics(metrics)
    icl = [r for r in records if r["method"] == "icl"]
    datasets = _first_seen(r["dataset"] for r in records)
    with_icl = _first_seen(r["dataset"] for r in icl)
    panels = [
        (d, "in-context learning", [(m, "icl") for m in _first_seen(r["model"] for r in icl if r["dataset"] == d)])
        for d in with_icl
    ]
    without = [d for d in datasets if d not in with_icl]
    left_out = [f"{_and(without)} (no in-context runs)"] if icl and without else []
    if len(icl) < len(records):
        left_out.append("the fine-tuned models (Figures 1 and 2)")
    return panels, left_out


@dataclass
class _GapPanels:
    """What :func:`figure2` and :func:`figure3` draw: the panels, the gap table of their cells, each dataset's
    features, the legend (name → colour), the figure size and the note under the panels."""

    panels: list[Panel]
    table: pd.DataFrame
    features: dict[str, list[str]]
    colors: dict[tuple[str, str], str]
    legend: dict[str, str]
    size: tuple[float, float]
    note: str


def _gap_panels(metrics: Sequence[Mapping[str, Any]], panels: list[Panel], left_out: list[str]) -> _GapPanels:
    """The layout of ``panels`` stacked in one column (a dataset such as SST-2 with 28 features needs the page's
    width): every drawn feature of a dataset in each of its panels; the legend names the methods when every panel
    shows one model, else the models (an in-context model with its demonstrations); ``left_out`` is named under the
    panels. At most :data:`~spurious.core.figures.MAX_WIDTH_IN` wide and, up to that width, at most 1.5 times as
    tall as wide."""
    table = gap_table(metrics)
    drawn = {(m, x) for _, _, bars in panels for m, x in bars}
    table = table[[cell in drawn for cell in zip(table["model"], table["method"], strict=True)]]
    labels = {(m, x): label for m, x, label in zip(table["model"], table["method"], table["label"], strict=True)}
    models = _first_seen(m for _, _, bars in panels for m, _ in bars)
    methods_view = all(len({m for m, _ in bars}) == 1 and bars[0][1] != "icl" for _, _, bars in panels)
    legend: dict[str, str] = {}
    colors: dict[tuple[str, str], str] = {}
    for model, method in (cell for _, _, bars in panels for cell in bars):
        if methods_view:
            name, color = method, _METHOD_COLORS[method]
        else:
            label = labels[model, method]
            name = label if method in ("finetune", "icl") else f"{label}, {method}"
            color = f"C{models.index(model) % 10}"
        legend.setdefault(name, color)
        colors[model, method] = color
    features = {d: _first_seen(table.loc[table["dataset"] == d, "feature"]) for d, _, _ in panels}
    widest = max((len(f) for f in features.values()), default=1)
    bars_per_feature = max((len(bars) for _, _, bars in panels), default=1)
    longest = max((len(n) for n in legend), default=0)
    legend_lines = len(legend) if longest > 40 else math.ceil(len(legend) / 4)
    height = 2.7 * max(1, len(panels)) + 0.5 + 0.15 * legend_lines + 0.3 * bool(left_out)
    width = max(4.0, (0.12 * bars_per_feature + 0.12) * widest + 1.2, height / 1.5, longest * 0.6 * 7 / 72 + 0.6)
    width = min(figures.MAX_WIDTH_IN, width)
    note = "bars: mean over seeds; error bars: sample std over seeds" if panels else ""
    if left_out:
        note += ("\n" if note else "") + figures.fill(f"Not drawn: {'; '.join(left_out)}.", 0.95 * width, 6)
    return _GapPanels(panels, table, features, colors, legend, (width, height), note)


def _draw_gap_panels(fig: Any, layout: _GapPanels, empty: str) -> list[str]:
    """Draw :func:`_gap_panels`' layout into ``fig``: per panel the dataset's features on x (grouped by category:
    dotted separators, category names above the panel), a bar per (model, method) of the panel (mean gap over
    seeds; error bar: sample std over seeds); without panels one that says ``empty``. Returns the panel titles."""
    from matplotlib.patches import Patch
    from matplotlib.transforms import blended_transform_factory

    panels, table = layout.panels, layout.table
    fig_w = layout.size[0]
    titles = [f"{dataset}: {title}" for dataset, title, _ in panels]
    axes = []
    for i, (dataset, _, bars) in enumerate(panels):
        width = 0.8 / len(bars)
        ax = fig.add_subplot(len(panels), 1, i + 1)
        axes.append(ax)
        feats = layout.features[dataset]
        panel = table[table["dataset"] == dataset]
        ax.set_title(figures.fill(titles[i], 0.95 * fig_w, 7.5), pad=12, fontsize=7.5)
        for k, (model, method) in enumerate(bars):
            sub = panel[(panel["model"] == model) & (panel["method"] == method)]
            color = layout.colors[model, method]
            x = np.array([feats.index(f) for f in sub["feature"]], dtype=float)
            x += (k - (len(bars) - 1) / 2) * width
            y = sub["gap"].to_numpy(dtype=float)
            # an edge in the bar's colour: a gap of 0 shows as a line at 0, not as nothing
            ax.bar(x, y, width * 0.92, color=color, alpha=0.85, edgecolor=color, linewidth=0.8, zorder=2)
            _errorbars(ax, x, y, sub["gap ±"].to_numpy(dtype=float))
        # categories: a dotted line between two, the name centred above its features
        feature_categories = [f.partition(":")[0] for f in feats]
        above = blended_transform_factory(ax.transData, ax.transAxes)
        start = 0
        for end in range(1, len(feats) + 1):
            if end == len(feats) or feature_categories[end] != feature_categories[start]:
                center = (start + end - 1) / 2
                ax.text(center, 1.01, feature_categories[start], transform=above, ha="center", va="bottom")
                if end < len(feats):
                    ax.axvline(end - 0.5, color="0.5", linewidth=0.6, linestyle=":")
                start = end
        ax.axhline(0.0, color="0.3", linewidth=0.6, zorder=1)
        ax.set_xticks(range(len(feats)), [_short(feature_label(f)) for f in feats], fontsize=6)
        ax.set_xlim(-0.6, len(feats) - 0.4)
        ax.set_ylabel("spurious gap (%)")
        ax.grid(axis="y", linewidth=0.3, alpha=0.6)
        ax.set_axisbelow(True)
    if not panels:
        figures.explain_empty(fig.add_subplot(1, 1, 1), empty)
    if layout.legend:
        handles = [Patch(color=color, alpha=0.85, label=name) for name, color in layout.legend.items()]
        ncols = 1 if max(len(n) for n in layout.legend) > 40 else min(len(handles), 4)
        fig.legend(handles=handles, loc="outside upper center", ncols=ncols, frameon=False)
    if layout.note:
        fig.supxlabel(layout.note, fontsize=6)
    # the feature names stand upright only where, side by side, they would touch
    figures.rotate_crowded_ticklabels(axes, rotation=90)
    return titles


@figure_function
def figure2(
    metrics: Sequence[Mapping[str, Any]], png_path: str | os.PathLike, svg_path: str | os.PathLike
) -> list[str]:
    """Figure 2 (the paper's Fig. 2, "Training BERT-base with different methods"): the spurious gap of every
    feature per fine-tuning method, one panel per (dataset, model) trained with several methods, stacked
    (:func:`figure2_panels`, which also names what is left out, under the panels). Returns the panel titles
    ("<dataset>: <model label>"), top to bottom."""
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    layout = _gap_panels(metrics, *figure2_panels(metrics))
    with matplotlib.rc_context({"svg.hashsalt": "spuriousbench-figure2", "svg.fonttype": "path", "font.size": 7}):
        fig = Figure(figsize=layout.size, layout="constrained")
        FigureCanvasAgg(fig)
        titles = _draw_gap_panels(fig, layout, "no fine-tuning results")
        save_figure(fig, png_path, svg_path)
    return titles


@figure_function
def figure3(
    metrics: Sequence[Mapping[str, Any]], png_path: str | os.PathLike, svg_path: str | os.PathLike
) -> list[str]:
    """Figure 3 (the paper's Fig. 3, with Figs. 4-5's settings as more bars): the spurious gap of every feature per
    in-context model, one panel per dataset with in-context results, stacked (:func:`figure3_panels`), each
    model's demonstrations (shots, realised and configured prevalence and strength) in the legend; without
    in-context results one panel says so. Returns the panel titles."""
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    layout = _gap_panels(metrics, *figure3_panels(metrics))
    with matplotlib.rc_context({"svg.hashsalt": "spuriousbench-figure3", "svg.fonttype": "path", "font.size": 7}):
        fig = Figure(figsize=layout.size, layout="constrained")
        FigureCanvasAgg(fig)
        titles = _draw_gap_panels(fig, layout, "no in-context results: no model of this run has the method icl")
        save_figure(fig, png_path, svg_path)
    return titles
