"""The tables of the SpuriousBench track ("What Spurious Features Can Pretrained Language Models Combat?", §2.2, §4,
App. E) and the checks of the records they and its figures read.

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
* :func:`summary_lines`: one log line per (dataset, model, method) with the category means.
* :func:`validated_metrics`, :func:`model_labels`, :func:`first_seen`: the checked records, the models' labels and
  the first-seen order that the tables and the figures (:mod:`spurious.spuriousbench.gap_figures`: Figs. 1-3) share.

Rows are ordered by dataset (first seen), category (:data:`spurious.spuriousbench.construction.CATEGORIES` order),
feature (first seen), model (first seen), method (:data:`METHODS` order). Write the tables with
``spurious.thinktwice.report.write_table(df, csv, md, digits=DIGITS)``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from spurious.spuriousbench.construction import CATEGORIES, KINDS
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
    "first_seen",
    "gap_table",
    "icl_annotation",
    "model_labels",
    "sizes_table",
    "summary_lines",
    "validated_metrics",
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


def validated_metrics(metrics: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
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


def first_seen(values: Iterable[str]) -> list[str]:
    """The distinct ``values`` in the order they first occur (the row order of datasets, features and models)."""
    return list(dict.fromkeys(values))


def model_labels(records: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """model → its paper name (else the config name); two models with one paper name get the config name added."""
    labels = {r["model"]: r["paper_name"] or r["model"] for r in records}
    counts: dict[str, int] = {}
    for label in labels.values():
        counts[label] = counts.get(label, 0) + 1
    return {m: (f"{label} ({m})" if counts[label] > 1 and label != m else label) for m, label in labels.items()}


def _ordered_cells(records: Sequence[Mapping[str, Any]]) -> dict[Cell, list[Mapping[str, Any]]]:
    """Records per (dataset, feature, model, method) in the module's row order; records within a cell by seed."""
    datasets = {d: k for k, d in enumerate(first_seen(r["dataset"] for r in records))}
    features = {f: k for k, f in enumerate(first_seen(r["feature"] for r in records))}
    models = {m: k for k, m in enumerate(first_seen(r["model"] for r in records))}
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
    records = validated_metrics(metrics)
    labels = model_labels(records)
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
    datasets = {d: k for k, d in enumerate(first_seen(features["dataset"]))}
    models = {m: k for k, m in enumerate(first_seen(features["model"]))}
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
    datasets = {d: k for k, d in enumerate(first_seen(r["dataset"] for r in rows))}
    features = {f: k for k, f in enumerate(first_seen(r["feature"] for r in rows))}
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
