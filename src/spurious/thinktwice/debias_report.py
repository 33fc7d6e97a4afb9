"""Report of the debiasing experiments: the paper's Table 1, Figures 3, 5, 6/7 (cross-bias) and 8/9 (validation loss).

Inputs, as the workflow writes them:

- per-example predictions per (run, dataset): a frame (or parquet path) with ``id``, ``em`` (0/100) and ``f1`` (0–100);
- metrics dicts (``exact_match``, ``f1``, ``n``, ``model``, ``seed``, ``dataset``, ``split``, ``run``, ``method``,
  ``addressed``);
- bias results: the dicts of ``spurious.thinktwice.bias.search_threshold`` plus ``model``, ``model_seed``, ``run``, ``dataset``,
  ``split``, ``method``, ``addressed``;
- training summaries (``training.json``) with ``validation_curves: {name: [{step, loss}]}``.

``method`` is one of ``original``, ``plain``, ``resam``, ``lmix``, ``creg`` (``biasmodel`` and unknown methods are
ignored); ``addressed`` is the heuristic a debiased model was trained against. ``plain`` is the matched control:
standard fine-tuning with the debiased runs' training data, steps, initialisation and seed, so that a difference to
it is the method's alone. A debiased model is compared with the plain run of the same model name and seed where there
is one and, as a second column group, with the *original* model (the paper's comparison). All values are percentage points. Tables are DataFrames with a caption in
``df.attrs["caption"]`` (write them with :func:`spurious.thinktwice.report.write_table`, Table 1 with :func:`write_table1`);
figures are written as PNG and SVG, atomically and byte-reproducibly (Agg canvas, no dates in the metadata).
"""

from __future__ import annotations

import math
import os
import re
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from spurious.core.io import atomic_path
from spurious.thinktwice import paper_values, report
from spurious.thinktwice.report import PAPER_SUFFIX, _bias_of, _group, _is_human, _num, _unique_setting, _worse_group

__all__ = [
    "DEBIASING_METHODS",
    "METHOD_LABELS",
    "bootstrap_indices",
    "cross_bias_matrix",
    "cross_bias_table",
    "figure3",
    "figure5",
    "figure_cross_bias",
    "figure_loss_curves",
    "load_predictions",
    "methods_bias_table",
    "figure6",
    "figure6_table",
    "ood_performance_table",
    "paper_dataset_name",
    "quality_floors",
    "runs_table",
    "table1",
    "table1_display",
    "write_table1",
]

ORIGINAL = "original"
CONTROL = "plain"
DEBIASING_METHODS: tuple[str, ...] = ("resam", "lmix", "creg")
METHOD_LABELS: dict[str, str] = {
    "original": "Original",
    "plain": "Plain",
    "resam": "ReSam",
    "lmix": "LMix",
    "creg": "CReg",
}
#: Columns of the second group of Table 1 (differences to the original model) end with this.
VS_ORIGINAL = " vs original"
#: Our method → the paper's row name in ``paper_values.BIAS_METHODS*`` / ``TABLE1``.
PAPER_METHODS: dict[str, str] = {"original": "None", "resam": "ReSam", "lmix": "LMix", "creg": "CReg"}
AVERAGE = "average"
METRICS: tuple[tuple[str, str], ...] = (("EM", "em"), ("F1", "f1"))
QUANTILES: tuple[float, float] = (0.025, 0.975)
N_A = "n/a"

#: Normalised dataset names (lower case, letters and digits only) → the paper's dataset names.
_PAPER_DATASET_ALIASES: dict[str, str] = {
    "adversarialqa": "AdversarialQA",
    "adversarial": "AdversarialQA",
    "advqa": "AdversarialQA",
    "adv": "AdversarialQA",
    "nq": "NaturalQuestions",
    "naturalquestions": "NaturalQuestions",
    "triviaqa": "TriviaQA",
    "trivia": "TriviaQA",
}


# ----------------------------------------------------------------------------------------------------------------------
# helpers


def paper_dataset_name(name: str) -> str | None:
    """The paper's name of our dataset ``name`` ("nq" → "NaturalQuestions"), or None when the paper has none."""
    key = re.sub(r"[^a-z0-9]", "", str(name).casefold())
    return _PAPER_DATASET_ALIASES.get(key)


def _method_of(record: Mapping[str, Any]) -> str:
    """The record's method, lower case; a record without one is an original (non-debiased) model."""
    method = record.get("method")
    return ORIGINAL if method in (None, "", "none", "None") else str(method).casefold()


def _label(method: str) -> str:
    return METHOD_LABELS.get(method, "Human" if method == "human" else method)


def _check_paper_name(paper_name: str | None) -> bool:
    """True when paper values are asked for; the paper's debiasing results exist for BERT-Base only."""
    if paper_name is None:
        return False
    try:
        name = paper_values.canonical_run_name(paper_name)
    except KeyError as exc:
        raise ValueError(str(exc.args[0])) from exc
    if name != paper_values.TABLE1_MODEL:
        raise ValueError(
            f"the paper reports debiasing results for {paper_values.TABLE1_MODEL} only, not for {paper_name!r}"
        )
    return True


def _mean(values: Iterable[float]) -> float:
    vals = [v for v in values if not math.isnan(v)]
    return float(np.mean(vals)) if vals else math.nan


def _round(value: float, digits: int = 2) -> float:
    return round(value, digits) if not math.isnan(value) else math.nan


def _count_text(counts: Iterable[int]) -> int | str:
    """One count as an int, several distinct ones as "1/3" (e.g. seeds per averaged row)."""
    distinct = sorted(set(counts))
    if len(distinct) == 1:
        return distinct[0]
    return "/".join(str(c) for c in distinct)


def _ordered_unique(values: Iterable[Any]) -> list[Any]:
    out: list[Any] = []
    for v in values:
        if v not in out:
            out.append(v)
    return out


def _method_order(methods: Iterable[str]) -> list[str]:
    present = set(methods)
    known = [m for m in (ORIGINAL, CONTROL, *DEBIASING_METHODS, "human") if m in present]
    return known + sorted(present - set(known))


# ----------------------------------------------------------------------------------------------------------------------
# Table 1: OOD performance of the debiased models, as differences to the original model


@dataclass(frozen=True)
class _Run:
    run: str
    model: str
    seed: Any
    method: str
    addressed: str | None


def load_predictions(source: pd.DataFrame | str | os.PathLike) -> pd.DataFrame:
    """The ``id``, ``em``, ``f1`` columns of a predictions frame or parquet file (other columns are not needed)."""
    frame = source if isinstance(source, pd.DataFrame) else pd.read_parquet(source, columns=["id", "em", "f1"])
    missing = {"id", "em", "f1"} - set(frame.columns)
    if missing:
        raise ValueError(f"predictions lack the columns {sorted(missing)}")
    return frame[["id", "em", "f1"]]


def _parse_runs(runs_meta: Sequence[Mapping[str, Any]], methods: Sequence[str]) -> list[_Run]:
    runs = []
    for meta in runs_meta:
        method = _method_of(meta)
        if method not in (ORIGINAL, CONTROL) and method not in methods:
            continue  # bias models, methods not asked for
        addressed = meta.get("addressed")
        if method not in (ORIGINAL, CONTROL) and not addressed:
            raise ValueError(f"debiased run {meta['run']!r} ({method}) names no addressed heuristic")
        runs.append(_Run(str(meta["run"]), str(meta["model"]), meta.get("seed"), method, addressed or None))
    return runs


def bootstrap_indices(n: int, iterations: int, seed: int, dataset: str) -> np.ndarray:
    """The ``(iterations, n)`` question positions resampled (with replacement) for ``dataset``.

    One matrix per dataset, shared by every model evaluated on it: the bootstrap is *paired* (a model and its original
    are scored on the same resampled questions), and averages over heuristics or seeds are taken per draw. Drawn by
    ``Generator.integers`` from ``SeedSequence([seed, crc32(dataset)])``, so a dataset's draws do not depend on which
    other datasets are in the table.
    """
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), zlib.crc32(str(dataset).encode("utf-8"))]))
    return rng.integers(0, n, size=(iterations, n))


def _bootstrap_means(indices: np.ndarray, scores: np.ndarray, block: int = 128) -> np.ndarray:
    """``scores[indices].mean(axis=1)`` for every column of ``scores`` (n × k) at once: (iterations × k).

    Computed as (resample counts) @ scores in blocks of draws, so the memory stays at block × n whatever k is.
    """
    iterations, n = indices.shape
    out = np.empty((iterations, scores.shape[1]), dtype=np.float64)
    for start in range(0, iterations, block):
        rows = indices[start : start + block]
        offsets = (np.arange(rows.shape[0]) * n)[:, None]
        counts = np.bincount((rows + offsets).ravel(), minlength=rows.shape[0] * n).reshape(rows.shape[0], n)
        out[start : start + rows.shape[0]] = counts @ scores / n
    return out


def _aligned_scores(frame: pd.DataFrame, ids: np.ndarray, run: str, dataset: str) -> np.ndarray:
    """(n × 2) EM and F1 of ``frame`` in the order of ``ids``; an error naming run and dataset if the ids differ."""
    if frame["id"].duplicated().any():
        dup = frame.loc[frame["id"].duplicated(), "id"].iloc[0]
        raise ValueError(f"predictions of run {run!r} on {dataset!r} repeat the id {dup!r}")
    own = pd.Index(frame["id"].astype(str))
    if len(own) != len(ids) or not own.isin(ids).all():
        missing = sorted(set(ids) - set(own))[:3]
        extra = sorted(set(own) - set(ids))[:3]
        raise ValueError(
            f"predictions of run {run!r} on {dataset!r} cover other question ids than the rest of the runs "
            f"({len(own)} vs {len(ids)} ids; missing e.g. {missing}, extra e.g. {extra})"
        )
    values = frame.set_index(own)[["em", "f1"]].reindex(ids).to_numpy(dtype=np.float64)
    if not np.isfinite(values).all():
        raise ValueError(f"predictions of run {run!r} on {dataset!r} hold NaN/infinite em or f1 values")
    return values


def _dataset_scores(
    predictions: Mapping[tuple[str, str], Any], runs: Sequence[_Run], dataset: str
) -> tuple[dict[str, np.ndarray], int]:
    """run → aligned (n × 2) EM/F1 scores on ``dataset``; the id order is the sorted ids of the first run."""
    frames = {}
    for r in runs:
        if (r.run, dataset) not in predictions:
            raise ValueError(f"no predictions of run {r.run!r} on dataset {dataset!r}")
        frames[r.run] = load_predictions(predictions[(r.run, dataset)])
    ids = np.sort(frames[runs[0].run]["id"].astype(str).unique())
    return {run: _aligned_scores(frame, ids, run, dataset) for run, frame in frames.items()}, len(ids)


@dataclass
class _Cell:
    """A table value: the point estimate and its bootstrap draws (aligned across cells of the same dataset)."""

    point: float
    draws: np.ndarray

    @staticmethod
    def mean(cells: Sequence[_Cell]) -> _Cell:
        return _Cell(float(np.mean([c.point for c in cells])), np.mean([c.draws for c in cells], axis=0))

    def interval(self) -> tuple[float, float]:
        q = np.quantile(self.draws, QUANTILES)
        return float(q[0]), float(q[1])


def _table1_paper(method: str, addressed: str, datasets: Sequence[str], heuristics: Sequence[str]) -> dict[str, float]:
    """The paper's Table 1 values for one row, keyed like our columns (dataset names and ``average``).

    Averages are means of the paper's cells over the datasets (and, for the method average, heuristics) that the row
    shares with the paper; the method average is the printed one when the row covers the paper's whole table.
    """
    paper_ds = {d: paper_dataset_name(d) for d in datasets}
    paper_ds = {d: p for d, p in paper_ds.items() if p in paper_values.TABLE1_DATASETS}
    out = {d: math.nan for d in [*datasets, AVERAGE]}
    if method == ORIGINAL:
        for d, p in paper_ds.items():
            out[d] = paper_values.TABLE1_ORIGINAL[p]
        out[AVERAGE] = _mean(out[d] for d in paper_ds)
        return out
    table = paper_values.TABLE1.get(PAPER_METHODS.get(method, ""), {})
    rows = [h for h in heuristics if h in table] if addressed == AVERAGE else [addressed] if addressed in table else []
    if not rows:
        return out
    for d, p in paper_ds.items():
        out[d] = _mean(table[h][p] for h in rows)
    out[AVERAGE] = _mean(table[h][p] for h in rows for p in paper_ds.values())
    full = set(rows) == set(table) and set(paper_ds.values()) == set(paper_values.TABLE1_DATASETS)
    if addressed == AVERAGE and full:
        out[AVERAGE] = paper_values.TABLE1_AVERAGE[PAPER_METHODS[method]]
    return out


def table1(
    predictions: Mapping[tuple[str, str], pd.DataFrame | str | os.PathLike],
    runs_meta: Sequence[Mapping[str, Any]],
    *,
    datasets: Sequence[str],
    iterations: int = 1000,
    seed: int = 0,
    methods: Sequence[str] = DEBIASING_METHODS,
    paper_name: str | None = None,
    original_matches_control: bool | None = None,
) -> pd.DataFrame:
    """The paper's Table 1: each debiased model's score minus its control's, per dataset, in EM and F1.

    ``predictions`` maps (run, dataset) → per-example predictions; ``runs_meta`` lists the runs (``run``, ``model``,
    ``seed``, ``method``, ``addressed``). The control of a debiased run is the ``plain`` run of the same model and seed
    (the matched control: same training data, steps, initialisation and seed) when the runs include plain runs, else
    the original run; pairs are compared question by question (ids must match). With plain runs a second column group
    ``"<d> vs original"`` gives the differences to the original model, as the paper reports them. Rows, per model and
    metric (EM, then F1): ``Original`` (absolute scores), ``Plain`` (absolute scores; in the second group, plain minus
    original), then per method one row per addressed heuristic (paper order) and an ``average`` row (mean over the
    heuristics). Columns: ``model``, ``method``, ``addressed``, ``metric``, ``n_seeds``, then per dataset and
    ``average`` (the mean over the datasets) the value and its 95% bootstrap interval ``"<d> q025"``/``"<d> q975"``
    (with ``paper_name="BERT-Base"`` also the paper's value, beside the comparison with the original, on the EM rows).
    With several seeds the per-seed differences are averaged; ``n_seeds`` counts them. ``original_matches_control``
    (from the configuration: did the original model train on the same data with the same budget?) only changes the
    caption.

    The interval is a paired percentile bootstrap: ``iterations`` resamples of the dataset's questions (see
    :func:`bootstrap_indices`), the same for every model on that dataset, and every average is taken per draw, so
    its interval accounts for the shared questions. Values are rounded to 2 decimals.
    """
    if not datasets:
        raise ValueError("no datasets for Table 1")
    if iterations < 1:
        raise ValueError(f"iterations must be positive, got {iterations}")
    with_paper = _check_paper_name(paper_name)
    methods = [m.casefold() for m in methods]
    runs = _parse_runs(runs_meta, methods)
    baselines: dict[str, dict[tuple[str, Any], _Run]] = {ORIGINAL: {}, CONTROL: {}}
    for r in runs:
        if r.method in baselines:
            if (r.model, r.seed) in baselines[r.method]:
                raise ValueError(f"two {r.method} runs of model {r.model!r}, seed {r.seed!r}")
            baselines[r.method][(r.model, r.seed)] = r
    originals, controls = baselines[ORIGINAL], baselines[CONTROL]
    if not originals:
        raise ValueError("no original (non-debiased) run in runs_meta")
    debiased: dict[tuple[str, str, str], list[_Run]] = {}
    for r in runs:
        if r.method in baselines:
            continue
        for name, found in ((ORIGINAL, originals), (CONTROL, controls if controls else None)):
            if found is not None and (r.model, r.seed) not in found:
                raise ValueError(f"debiased run {r.run!r} has no {name} run of model {r.model!r}, seed {r.seed!r}")
        debiased.setdefault((r.model, r.method, str(r.addressed)), []).append(r)
    for key in controls:
        if key not in originals:
            raise ValueError(f"plain run {controls[key].run!r} has no original run of model {key[0]!r}, seed {key[1]!r}")

    # per dataset: point estimates and paired bootstrap draws of every run's mean EM/F1
    points: dict[tuple[str, str], np.ndarray] = {}
    draws: dict[tuple[str, str], np.ndarray] = {}
    sizes: dict[str, int] = {}
    for dataset in datasets:
        scores, sizes[dataset] = _dataset_scores(predictions, runs, dataset)
        order = list(scores)
        matrix = np.concatenate([scores[run] for run in order], axis=1)  # n × (2 runs)
        boot = _bootstrap_means(bootstrap_indices(sizes[dataset], iterations, seed, dataset), matrix)
        for i, run in enumerate(order):
            points[(run, dataset)] = matrix[:, 2 * i : 2 * i + 2].mean(axis=0)
            draws[(run, dataset)] = boot[:, 2 * i : 2 * i + 2]

    def score(run: str, dataset: str, m: int) -> _Cell:
        return _Cell(float(points[(run, dataset)][m]), draws[(run, dataset)][:, m])

    def diff(r: _Run, dataset: str, m: int, against: str) -> _Cell:
        base = baselines[against][(r.model, r.seed)].run
        a, b = score(r.run, dataset, m), score(base, dataset, m)
        return _Cell(a.point - b.point, a.draws - b.draws)

    groups = [CONTROL, ORIGINAL] if controls else [ORIGINAL]
    suffix = {CONTROL: "", ORIGINAL: VS_ORIGINAL if controls else ""}
    models = _ordered_unique(r.model for r in runs if r.method == ORIGINAL)
    present_methods = [m for m in methods if any(k[1] == m for k in debiased)]
    columns = ["model", "method", "addressed", "metric", "n_seeds"]
    for group in groups:
        for d in [*datasets, AVERAGE]:
            name = d + suffix[group]
            columns += [name, f"{name} q025", f"{name} q975"]
            if with_paper and group == ORIGINAL:
                columns.append(name + PAPER_SUFFIX)

    def row(
        model: str,
        method: str,
        addressed: str | None,
        metric: str,
        n_seeds: Any,
        by_group: dict[str, dict[str, _Cell] | None],
        heuristics: Sequence[str] = (),
    ) -> dict[str, Any]:
        out: dict[str, Any] = {
            "model": model,
            "method": _label(method),
            "addressed": addressed,
            "metric": metric,
            "n_seeds": n_seeds,
        }
        paper = {}
        if with_paper and metric == "EM":
            paper = _table1_paper(method, addressed or "", datasets, heuristics)
        for group in groups:
            cells = by_group.get(group)
            if cells is not None:
                cells = {**cells, AVERAGE: _Cell.mean([cells[d] for d in datasets])}
            for d in [*datasets, AVERAGE]:
                name = d + suffix[group]
                if cells is None:
                    out[name] = out[f"{name} q025"] = out[f"{name} q975"] = math.nan
                else:
                    lo, hi = cells[d].interval()
                    out[name], out[f"{name} q025"], out[f"{name} q975"] = _round(cells[d].point), _round(lo), _round(hi)
                if with_paper and group == ORIGINAL:
                    out[name + PAPER_SUFFIX] = _round(paper.get(d, math.nan))
        return out

    rows = []
    for model in models:
        originals_of = [r for (m, _), r in originals.items() if m == model]
        controls_of = [r for (m, _), r in controls.items() if m == model]
        heuristics_by_method = {
            method: report.ordered_heuristics(a for (m, meth, a) in debiased if m == model and meth == method)
            for method in present_methods
        }
        for metric, _ in METRICS:
            m = 0 if metric == "EM" else 1
            absolute = {d: _Cell.mean([score(r.run, d, m) for r in originals_of]) for d in datasets}
            # the Original row's scores are absolute: in the first column group only (the second would be all zeros)
            rows.append(row(model, ORIGINAL, None, metric, len(originals_of), {groups[0]: absolute}))
            if controls_of:
                plain_abs = {d: _Cell.mean([score(r.run, d, m) for r in controls_of]) for d in datasets}
                plain_vs = {d: _Cell.mean([diff(r, d, m, ORIGINAL) for r in controls_of]) for d in datasets}
                rows.append(row(model, CONTROL, None, metric, len(controls_of), {CONTROL: plain_abs, ORIGINAL: plain_vs}))
            for method in present_methods:
                heuristics = heuristics_by_method[method]
                if not heuristics:
                    continue
                per_h: dict[str, dict[str, dict[str, _Cell]]] = {}
                counts = []
                for h in heuristics:
                    group_runs = debiased[(model, method, h)]
                    per_h[h] = {
                        g: {d: _Cell.mean([diff(r, d, m, g) for r in group_runs]) for d in datasets} for g in groups
                    }
                    counts.append(len(group_runs))
                    rows.append(row(model, method, h, metric, len(group_runs), per_h[h]))
                averaged = {g: {d: _Cell.mean([per_h[h][g][d] for h in heuristics]) for d in datasets} for g in groups}
                rows.append(row(model, method, AVERAGE, metric, _count_text(counts), averaged, heuristics))

    df = pd.DataFrame(rows, columns=columns)
    if controls:
        control_text = (
            "Control: each debiased model minus the Plain model of the same model and seed (the matched control: "
            "standard fine-tuning with the debiased runs' training data, steps, initialisation and seed, so the "
            "difference is the method's alone); the Original and Plain rows give absolute scores. The columns "
            "'<dataset> vs original' give the differences to the original model instead (the paper's comparison; the "
            "Plain row there = plain minus original)"
        )
        if original_matches_control is True:
            control_text += "; here the original model was trained on the same data with the same budget, so the two coincide up to training noise."
        elif original_matches_control is False:
            control_text += (
                "; here the original model was trained on other data or with another budget, so those differences "
                "measure the budget as well as the method."
            )
        else:
            control_text += "."
    else:
        control_text = (
            "Control: each debiased model minus the original model of the same model and seed (no plain control was "
            "configured"
            + (
                "; the original model was trained on the same data with the same budget)."
                if original_matches_control
                else "; if the original model had other data or another budget, the differences measure that too)."
            )
            + " The Original rows give absolute scores."
        )
    caption = [
        "Table 1 (OOD performance of the debiasing methods): per method and addressed heuristic, the difference in "
        "points of exact match (EM) and F1. " + control_text + " "
        f"[q025, q975] = 95% paired bootstrap interval ({iterations} resamples of each dataset's questions with "
        f"replacement, the same resampled questions for every model on a dataset, seed {seed}); the averages (over "
        "datasets, and the method's average row over heuristics) are taken per bootstrap draw. Several seeds: the "
        "per-seed differences are averaged (n_seeds). Questions: "
        + ", ".join(f"{d} {sizes[d]:,}" for d in datasets)
        + ". Confidence Regularization distils from the original model (its teacher, App. B.2.2), which may be "
        "stronger than the plain control when the original had more data or steps: CReg's difference to the control "
        "then includes what the teacher knows beyond the control's budget."
    ]
    if with_paper:
        caption.append(
            f"(paper) = the paper's Table 1 ({paper_values.TABLE1_MODEL}; AdversarialQA / NaturalQuestions / "
            "TriviaQA, differences to its original model), beside our EM rows' comparison with the original: the "
            "paper's caption says F1, but its Original row (29.8 / 67.8 / 46.1) is the EM of its Figure 3 data and "
            "§5.3 reads the table in exact match. Its averages over datasets, and over heuristics per dataset, are "
            "means of its printed cells; the method average over everything is the printed one when all its cells "
            "are present."
        )
    df.attrs["caption"] = " ".join(caption)
    return df


def _signed(value: float, signed: bool) -> str:
    if value is None or math.isnan(value):
        return report.NA_TEXT
    return f"{value:+.2f}" if signed else f"{value:.2f}"


def table1_display(df: pd.DataFrame) -> pd.DataFrame:
    """Table 1 for reading: one text cell per dataset, "+1.23 [+0.40, +2.05]" (differences signed, Original rows
    absolute), the paper's value in the column beside it; per model and metric the largest gain per dataset among
    the heuristic rows (all methods) is in **bold**, like the paper's top gains."""
    datasets = [c for c in df.columns if f"{c} q025" in df.columns]
    out = df[["model", "method", "addressed", "metric", "n_seeds"]].copy()
    baseline_rows = df["method"].isin([METHOD_LABELS[ORIGINAL], METHOD_LABELS[CONTROL]])
    is_heuristic_row = ~baseline_rows & (df["addressed"] != AVERAGE)
    for d in datasets:
        # absolute: the baseline rows of the first column group; differences: everything else
        is_diff = ~baseline_rows if not d.endswith(VS_ORIGINAL) else df["method"] != METHOD_LABELS[ORIGINAL]
        best = df[is_heuristic_row].groupby(["model", "metric"])[d].transform("max")
        texts = []
        for i in df.index:
            if math.isnan(df.at[i, d]):
                texts.append(report.NA_TEXT)
                continue
            signed = bool(is_diff[i])
            text = f"{_signed(df.at[i, d], signed)} [{_signed(df.at[i, f'{d} q025'], signed)}, "
            text += f"{_signed(df.at[i, f'{d} q975'], signed)}]"
            if is_heuristic_row[i] and not math.isnan(df.at[i, d]) and df.at[i, d] == best.get(i):
                text = f"**{text}**"
            texts.append(text)
        out[d] = texts
        if d + PAPER_SUFFIX in df.columns:
            out[d + PAPER_SUFFIX] = [_signed(v, bool(s)) for v, s in zip(df[d + PAPER_SUFFIX], is_diff, strict=True)]
    out.attrs["caption"] = df.attrs.get("caption")
    return out


def write_table1(df: pd.DataFrame, csv_path: str | os.PathLike, md_path: str | os.PathLike) -> None:
    """Write Table 1 atomically: the numeric frame as CSV (for further analysis), :func:`table1_display` as Markdown
    (one readable cell per dataset, where ``report.write_table`` would print three numeric columns each)."""
    with atomic_path(csv_path) as tmp:
        df.to_csv(tmp, index=False)
    display = table1_display(df)
    text = report.format_markdown(display, df.attrs.get("caption"))
    with atomic_path(md_path) as tmp:
        tmp.write_text(text, encoding="utf-8")


# ----------------------------------------------------------------------------------------------------------------------
# Figure 5: prediction bias per method (a debiased model measured on the heuristic it addresses)


def _select(results: Iterable[Mapping[str, Any]], dataset: str | None, split: str | None) -> list[Mapping[str, Any]]:
    out = []
    for r in results:
        if dataset is not None and str(r.get("dataset")) != dataset:
            continue
        if split is not None and str(r.get("split")) != split:
            continue
        out.append(r)
    return out


def _seed_of(r: Mapping[str, Any]) -> Any:
    return r.get("model_seed", r.get("annotator"))


def _by_seed(results: Sequence[Mapping[str, Any]], what: str) -> list[Mapping[str, Any]]:
    """The results of one cell, one per seed (sorted); two for the same seed are an error."""
    seeds: dict[str, Mapping[str, Any]] = {}
    for r in results:
        key = str(_seed_of(r))
        if key in seeds:
            raise ValueError(f"two bias results for {what}, seed {key}")
        seeds[key] = r
    return [seeds[k] for k in sorted(seeds)]


def _aggregate(results: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Mean over seeds: prediction bias (0 where no threshold), and the worse segment's EM mean and interval over the
    seeds that found a threshold; thresholds and worse groups as the single value or "a/b" when the seeds differ."""
    found = [r for r in results if r.get("found")]
    worse = [(r, _worse_group(r)) for r in found]
    stats = {
        key: _mean(_num(_group(r, w).get(key)) for r, w in worse) for key in ("em_mean", "em_q025", "em_q975", "size")
    }
    thresholds = [{"threshold": round(_num(r.get("threshold")), 6)} for r in found]
    return {
        "n_seeds": len(results),
        "n_found": len(found),
        "prediction_bias": float(np.mean([_bias_of(r) for r in results])),
        "threshold": _unique_setting(thresholds, "threshold") if found else None,
        "worse_group": _unique_setting([{"w": w} for _, w in worse], "w") if found else N_A,
        "worse_size": stats["size"],
        "worse_em_mean": stats["em_mean"],
        "worse_em_q025": stats["em_q025"],
        "worse_em_q975": stats["em_q975"],
        "sample_size": _unique_setting(results, "sample_size"),
        "iterations": _unique_setting(results, "iterations"),
        "with_replacement": _unique_setting(results, "with_replacement"),
        "seed": _unique_setting(results, "seed"),
    }


def _methods_cells(
    results: Sequence[Mapping[str, Any]],
) -> dict[tuple[str, str, str, str, str], list[Mapping[str, Any]]]:
    """(model, dataset, split, heuristic, method) → the seeds' results of the Figure 5 cell.

    An original model and the plain control count for every heuristic; a debiased model only for the heuristic it
    addresses; Human results (method "human") are attached to every model evaluated on the same dataset and split.
    """
    cells: dict[tuple[str, str, str, str, str], list[Mapping[str, Any]]] = {}
    human: list[Mapping[str, Any]] = []
    for r in results:
        if "heuristic" not in r:
            raise ValueError(f"result without a 'heuristic' key: keys {sorted(r)}")
        if _is_human(str(r.get("model", ""))):
            human.append(r)
            continue
        method = _method_of(r)
        if method not in (ORIGINAL, CONTROL, *DEBIASING_METHODS):
            continue
        if method not in (ORIGINAL, CONTROL) and r.get("addressed") != r["heuristic"]:
            continue
        key = (str(r.get("model", "")), str(r.get("dataset", "")), str(r.get("split", "")), str(r["heuristic"]), method)
        cells.setdefault(key, []).append(r)
    settings = _ordered_unique(k[:3] for k in cells)
    for r in human:
        for model, dataset, split in settings:
            if (dataset, split) == (str(r.get("dataset", "")), str(r.get("split", ""))):
                cells.setdefault((model, dataset, split, str(r["heuristic"]), "human"), []).append(r)
    return cells


def methods_bias_table(
    bias_results: Sequence[Mapping[str, Any]],
    *,
    dataset: str | None = None,
    split: str | None = None,
    paper_name: str | None = None,
) -> pd.DataFrame:
    """Figure 5 as a table: per model, dataset, split, heuristic (paper order) and method (Original, Plain, ReSam,
    LMix, CReg, Human), the prediction bias and the worse segment's EM mean with its bootstrap interval (q025–q975). A
    debiased method's row is the model debiased *for that heuristic*. Several seeds are averaged (``n_seeds``;
    ``n_found`` = seeds with a threshold); ``worse_group`` is "n/a" when no seed found a threshold (bias 0, as the
    paper reports it). ``change`` = the bias minus the control's (Plain, the matched control, where there is one,
    else Original); ``change_vs_original`` = the bias minus the Original's. With ``paper_name="BERT-Base"``: the paper's
    Figure 5 values (``bias_significance_methods_quantiles.csv``: bias, and the worse segment's q975; the paper's 0
    quantile for "no threshold" is shown as missing). Human results (``model: "Human"``) should be the Human row of
    ``spurious.thinktwice.bias.human_bias`` (the minimum over the annotators), one per heuristic.
    """
    with_paper = _check_paper_name(paper_name)
    cells = _methods_cells(_select(bias_results, dataset, split))
    if not cells:
        raise ValueError("no original or debiased bias results to tabulate")
    rows = []
    for model, ds, sp in _ordered_unique(k[:3] for k in cells):
        heuristics = report.ordered_heuristics(k[3] for k in cells if k[:3] == (model, ds, sp))
        for h in heuristics:
            base: dict[str, float] = {}
            for method in _method_order(k[4] for k in cells if k[:4] == (model, ds, sp, h)):
                group = _by_seed(cells[(model, ds, sp, h, method)], f"{model} {method} on {ds}/{sp}, {h}")
                agg = _aggregate(group)
                if method in (ORIGINAL, CONTROL):
                    base[method] = agg["prediction_bias"]
                row: dict[str, Any] = {"model": model, "dataset": ds, "split": sp, "heuristic": h}
                row["method"] = _label(method)
                row.update(agg)
                # the control's own row has no change (Original, and Plain when it is the control)
                control = base.get(CONTROL, base.get(ORIGINAL))
                is_control = method in (ORIGINAL, CONTROL)
                row["change"] = agg["prediction_bias"] - control if control is not None and not is_control else math.nan
                row["change_vs_original"] = (
                    agg["prediction_bias"] - base[ORIGINAL] if ORIGINAL in base and method != ORIGINAL else math.nan
                )
                if with_paper:
                    name = "Human" if method == "human" else PAPER_METHODS.get(method)
                    bias = paper_values.HUMAN if method == "human" else paper_values.BIAS_METHODS_NEW.get(name, {})
                    quantile = paper_values.QUANTILE_METHODS.get(name or "", {}).get(h, math.nan)
                    row["prediction_bias" + PAPER_SUFFIX] = bias.get(h, math.nan)
                    row["worse_em_q975" + PAPER_SUFFIX] = math.nan if quantile == 0 else quantile
                for key in (
                    "prediction_bias", "change", "change_vs_original", "worse_em_mean", "worse_em_q025", "worse_em_q975"
                ):  # fmt: skip
                    row[key] = _round(row[key])
                rows.append(row)
    columns = [
        "model", "dataset", "split", "heuristic", "method", "n_seeds", "n_found", "prediction_bias", "change",
        "change_vs_original", "threshold", "worse_group", "worse_size", "worse_em_mean", "worse_em_q025", "worse_em_q975",
        "sample_size", "iterations",
    ]  # fmt: skip
    if with_paper:
        columns.insert(columns.index("prediction_bias") + 1, "prediction_bias" + PAPER_SUFFIX)
        columns.insert(columns.index("worse_em_q975") + 1, "worse_em_q975" + PAPER_SUFFIX)
    has_control = any(k[4] == CONTROL for k in cells)
    if not has_control:  # change is already the difference to the original model
        columns.remove("change_vs_original")
    df = pd.DataFrame(rows, columns=columns)
    df["worse_size"] = df["worse_size"].round().astype("Int64")
    caption = [
        "Prediction bias per debiasing method (Figure 5): a debiased model is measured on the heuristic it was "
        "debiased for; worse = the under-performing segment, its EM mean and 2.5%/97.5% bootstrap quantiles "
        f"({report._settings_text([r for v in cells.values() for r in v])}); n/a = no threshold found (bias 0). "
        "Several seeds: means over the seeds (the worse segment's values over the seeds that found a threshold)."
    ]
    if has_control:
        caption.append(
            "Control: change = bias minus the Plain model's (the matched control: standard fine-tuning with the "
            "debiased runs' data, steps, initialisation and seed); change_vs_original = bias minus the Original's "
            "(the paper's comparison)."
        )
    else:
        caption.append("Control: change = bias minus the Original's (no plain control configured).")
    if with_paper:
        caption.append(
            "(paper) = the paper's Figure 5 values for BERT-Base (bias_significance_methods_quantiles.csv; its LMix "
            "is the CSV's newer LMix run, the older one is paper_values.BIAS_METHODS)."
        )
    df.attrs["caption"] = " ".join(caption)
    return df


def figure5(
    bias_results: Sequence[Mapping[str, Any]],
    png_path: str | os.PathLike,
    svg_path: str | os.PathLike,
    *,
    dataset: str | None = None,
    split: str | None = None,
    title: str | None = None,
) -> None:
    """Figure 5: per heuristic, one bar per method (the debiased models measured on the heuristic they address),
    drawn like Figure 2 (:func:`spurious.thinktwice.report.figure2`): the worse segment's EM mean with its bootstrap interval
    and the prediction bias on top; "n/a" where no threshold was found. One panel per model, dataset and split;
    several seeds are averaged as in :func:`methods_bias_table`."""
    table = methods_bias_table(bias_results, dataset=dataset, split=split)
    results = []
    for rec in table.to_dict("records"):
        panel = f"{rec['model']}: {rec['dataset']}/{rec['split']}"
        found = rec["n_found"] > 0
        worse = {"size": rec["worse_size"], "em_mean": rec["worse_em_mean"]}
        worse.update(em_q025=rec["worse_em_q025"], em_q975=rec["worse_em_q975"])
        results.append(
            {
                "model": rec["method"],
                "dataset": panel,
                "heuristic": rec["heuristic"],
                "found": found,
                "prediction_bias": rec["prediction_bias"],
                "worse_group": "low" if found else None,
                "groups": {"low": worse if found else {}, "high": {}},
                **{k: rec[k] for k in ("sample_size", "iterations")},
            }
        )
    report.figure2(results, png_path, svg_path, title=title or "Prediction bias per debiasing method")


# ----------------------------------------------------------------------------------------------------------------------
# Figures 6/7: cross-bias matrices


def _single_model(results: Sequence[Mapping[str, Any]], model: str | None, what: str) -> str:
    models = _ordered_unique(str(r.get("model", "")) for r in results if not _is_human(str(r.get("model", ""))))
    if model is not None:
        if model not in models:
            raise ValueError(f"no {what} of model {model!r}; models: {models}")
        return model
    if len(models) != 1:
        raise ValueError(f"{what} of {len(models)} models {models}: pass model=")
    return models[0]


def _baseline_text(baseline: str) -> str:
    if baseline == CONTROL:
        return "the Plain model's (the matched control: same data, steps, initialisation and seed)"
    return "the original model's"


def _cross_caption(n_seeds: int | str, with_paper: bool, baseline: str = ORIGINAL) -> str:
    text = (
        "prediction bias of the model debiased for the row heuristic on the column heuristic minus "
        f"{_baseline_text(baseline)} (same seed), in points; negative = less bias; 0 counted where no threshold was found; mean over "
        f"seeds (n = {n_seeds}). others_mean = the mean over the row's other heuristics. A bias is a distance between "
        "bootstrap intervals and has no interval of its own."
    )
    if with_paper:
        text += " diagonal (paper) = the paper's change on the addressed heuristic (Figure 5 data, BERT-Base)."
    return text


def cross_bias_matrix(
    bias_results: Sequence[Mapping[str, Any]],
    *,
    dataset: str,
    split: str,
    method: str,
    model: str | None = None,
    paper_name: str | None = None,
    baseline: str = "auto",
) -> pd.DataFrame:
    """Figures 6/7: the change of prediction bias caused by debiasing for one heuristic, on every heuristic.

    Rows (index ``addressed``) = the heuristic the model was debiased for, columns (``measured``) = the heuristic the
    bias is measured on, both in the paper's order; value = the bias of the debiased model minus the baseline's
    (``"plain"``, the matched control; ``"original"``; ``"auto"`` = plain where the model has plain results, else
    original; same model and seed), in points, averaged over the seeds (0 = no threshold, as the paper counts it);
    NaN where nothing was measured. ``others_mean`` = the row's mean over the off-diagonal cells (the paper's "enlarges
    other biases by … on average"). With ``paper_name="BERT-Base"`` ``diagonal (paper)`` = the paper's change on the
    addressed heuristic (its Figure 5 values minus the original's; the off-diagonal values are only in its figures).
    """
    with_paper = _check_paper_name(paper_name)
    method = method.casefold()
    selected = [r for r in _select(bias_results, dataset, split) if not _is_human(str(r.get("model", "")))]
    debiased_results = [r for r in selected if _method_of(r) == method]
    if not debiased_results:
        raise ValueError(f"no bias results of method {method!r} on {dataset}/{split}")
    model = _single_model(debiased_results, model, f"{method} bias results")
    baseline = _resolve_baseline(selected, model, baseline)
    original: dict[tuple[str, str], float] = {}
    for r in selected:
        if _method_of(r) == baseline and str(r.get("model")) == model:
            key = (str(r.get("model_seed")), str(r["heuristic"]))
            if key in original:
                raise ValueError(f"two {baseline} bias results of {model!r}, seed {key[0]}, {key[1]}")
            original[key] = _bias_of(r)
    diffs: dict[tuple[str, str], dict[str, float]] = {}
    for r in debiased_results:
        if str(r.get("model")) != model:
            continue
        seed, h, addressed = str(r.get("model_seed")), str(r["heuristic"]), str(r.get("addressed"))
        if (seed, h) not in original:
            raise ValueError(f"no {baseline} bias result of {model!r}, seed {seed}, on {h} ({dataset}/{split})")
        cell = diffs.setdefault((addressed, h), {})
        if seed in cell:
            raise ValueError(f"two {method} bias results of {model!r} for {addressed}, seed {seed}, on {h}")
        cell[seed] = _bias_of(r) - original[(seed, h)]
    rows_h = report.ordered_heuristics(a for a, _ in diffs)
    cols_h = report.ordered_heuristics(h for _, h in diffs)
    matrix = pd.DataFrame(
        [[_mean(diffs.get((a, h), {}).values()) for h in cols_h] for a in rows_h],
        index=pd.Index(rows_h, name="addressed"),
        columns=pd.Index(cols_h, name="measured"),
    )
    matrix["others_mean"] = [_mean(matrix.at[a, h] for h in cols_h if h != a) for a in rows_h]
    if with_paper:
        table = paper_values.BIAS_METHODS_NEW
        paper = table.get(PAPER_METHODS.get(method, ""), {})
        matrix["diagonal" + PAPER_SUFFIX] = [paper[a] - table["None"][a] if a in paper else math.nan for a in rows_h]
    matrix = matrix.round(2)
    n_seeds = _count_text([len(v) for v in diffs.values()])
    matrix.attrs["caption"] = (
        f"Cross-bias change ({_label(method)}, {model}, {dataset}/{split}): "
        f"{_cross_caption(n_seeds, with_paper, baseline)}"
    )
    matrix.attrs["n_seeds"] = n_seeds
    matrix.attrs["baseline"] = baseline
    return matrix


def _resolve_baseline(results: Sequence[Mapping[str, Any]], model: str, baseline: str) -> str:
    """``"auto"`` → ``"plain"`` when the model has plain (matched-control) results, else ``"original"``."""
    if baseline not in ("auto", CONTROL, ORIGINAL):
        raise ValueError(f"baseline must be 'auto', 'plain' or 'original', got {baseline!r}")
    if baseline != "auto":
        return baseline
    has_control = any(_method_of(r) == CONTROL and str(r.get("model")) == model for r in results)
    return CONTROL if has_control else ORIGINAL


def cross_bias_table(
    bias_results: Sequence[Mapping[str, Any]],
    *,
    dataset: str,
    split: str,
    methods: Sequence[str] | None = None,
    model: str | None = None,
    paper_name: str | None = None,
) -> pd.DataFrame:
    """The :func:`cross_bias_matrix` of every method (default: each debiasing method present) stacked into one table
    (columns ``method``, ``addressed``, then the measured heuristics), for a single CSV/Markdown file."""
    methods = _present_methods(bias_results, dataset, split, methods)
    has_control = any(_method_of(r) == CONTROL for r in _select(bias_results, dataset, split))
    baselines = [CONTROL, ORIGINAL] if has_control else [ORIGINAL]
    frames = []
    for baseline in baselines:
        for m in methods:
            matrix = cross_bias_matrix(
                bias_results,
                dataset=dataset,
                split=split,
                method=m,
                model=model,
                paper_name=paper_name if baseline == ORIGINAL else None,
                baseline=baseline,
            )
            frames.append(
                matrix.reset_index().assign(method=_label(m), versus=_label(baseline), n_seeds=matrix.attrs["n_seeds"])
            )
    table = pd.concat(frames, ignore_index=True)
    extra = ["others_mean"] + (["diagonal" + PAPER_SUFFIX] if paper_name is not None else [])
    measured = report.ordered_heuristics(
        c for c in table.columns if c not in {"method", "versus", "addressed", "n_seeds", *extra}
    )
    table = table[["versus", "method", "addressed", "n_seeds", *measured, *extra]]
    table.columns.name = None
    per_method = [str(f["n_seeds"].iloc[0]) for f in frames]
    n_seeds = (
        per_method[0]
        if len(set(per_method)) == 1
        else ", ".join(f"{_label(m)} {n}" for m, n in zip(methods, per_method, strict=True))
    )
    caption = _cross_caption(n_seeds, paper_name is not None, baselines[0])
    if has_control:
        caption += (
            " Rows with versus = Original give the same differences to the original model instead (the paper's "
            "comparison; the paper's diagonal is shown beside those)."
        )
    table.attrs["caption"] = f"Cross-bias change per method ({dataset}/{split}): {caption}"
    return table


def _present_methods(
    bias_results: Sequence[Mapping[str, Any]], dataset: str, split: str, methods: Sequence[str] | None
) -> list[str]:
    """``methods`` lower-cased, or the debiasing methods with bias results on ``dataset``/``split``."""
    present = {_method_of(r) for r in _select(bias_results, dataset, split)}
    chosen = [m.casefold() for m in methods] if methods is not None else [m for m in DEBIASING_METHODS if m in present]
    if not chosen:
        raise ValueError(f"no debiasing method's bias results on {dataset}/{split}")
    return chosen


def _rc(salt: str) -> dict[str, Any]:
    return {"svg.hashsalt": salt, "svg.fonttype": "path", "font.size": 8}


def _save(fig: Any, png_path: str | os.PathLike, svg_path: str | os.PathLike) -> None:
    """PNG then SVG, each atomically, without the dates and software versions that would make the bytes differ."""
    with atomic_path(Path(png_path)) as tmp:
        fig.savefig(tmp, format="png", dpi=150, metadata={"Software": None})
    with atomic_path(Path(svg_path)) as tmp:
        fig.savefig(tmp, format="svg", metadata={"Date": None, "Creator": None})


def _heatmap(ax: Any, values: np.ndarray, rows: Sequence[str], columns: Sequence[str], vmax: float) -> Any:
    """One diverging heat map of bias changes (points) centred at 0, the values printed in the cells ("–" = not
    measured), rows top to bottom; returns the mesh for a colour bar."""
    import matplotlib
    from matplotlib.colors import Normalize

    cmap = matplotlib.colormaps["RdBu_r"].with_extremes(bad=(0.9, 0.9, 0.9, 1.0))
    mesh = ax.pcolormesh(
        np.ma.masked_invalid(values), cmap=cmap, norm=Normalize(-vmax, vmax), edgecolors="white", linewidth=0.5
    )
    for (i, j), x in np.ndenumerate(values):
        text = report.NA_TEXT if math.isnan(x) else f"{x:+.2f}"
        color = "white" if not math.isnan(x) and abs(x) > 0.6 * vmax else "black"
        ax.text(j + 0.5, i + 0.5, text, ha="center", va="center", fontsize=6.5, color=color)
    ax.set_xticks(np.arange(len(columns)) + 0.5, list(columns), rotation=45, ha="right")
    ax.set_yticks(np.arange(len(rows)) + 0.5, list(rows))
    ax.invert_yaxis()
    ax.set_xlabel("measured heuristic")
    return mesh


def figure_cross_bias(
    bias_results: Sequence[Mapping[str, Any]],
    png_path: str | os.PathLike,
    svg_path: str | os.PathLike,
    *,
    dataset: str,
    split: str,
    methods: Sequence[str] | None = None,
    model: str | None = None,
    title: str | None = None,
) -> None:
    """Figure 7: one heat map of :func:`cross_bias_matrix` per method (default: every debiasing method present),
    against the matched plain control where there is one (else the original model), diverging colours centred at 0
    (red = more bias than the baseline, blue = less), the values printed in the cells ("–" = not measured)."""
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    methods = _present_methods(bias_results, dataset, split, methods)
    matrices = {
        m: cross_bias_matrix(bias_results, dataset=dataset, split=split, method=m, model=model) for m in methods
    }
    versus = _label(next(iter(matrices.values())).attrs["baseline"]).lower()
    values = {m: mat[[c for c in mat.columns if c != "others_mean"]] for m, mat in matrices.items()}
    vmax = max([0.5] + [float(np.nanmax(np.abs(v.to_numpy()))) for v in values.values() if v.notna().any().any()])
    n_cols = max(v.shape[1] for v in values.values())
    n_rows = max(v.shape[0] for v in values.values())
    with matplotlib.rc_context(_rc("spurious-cross-bias")):
        fig = Figure(figsize=(1.0 + 0.75 * n_cols * len(methods), 1.6 + 0.45 * n_rows), layout="constrained")
        FigureCanvasAgg(fig)
        axes = fig.subplots(1, len(methods), squeeze=False)[0]
        mesh = None
        for ax, m in zip(axes, methods, strict=True):
            v = values[m]
            mesh = _heatmap(ax, v.to_numpy(dtype=float), list(v.index), list(v.columns), vmax)
            ax.set_title(f"{_label(m)} (seeds: {matrices[m].attrs['n_seeds']})", fontsize=8)
        axes[0].set_ylabel("addressed heuristic")
        fig.colorbar(mesh, ax=list(axes), label=f"Δ prediction bias vs. {versus} (points)", shrink=0.9)
        fig.suptitle(title or f"Cross-bias change of the debiased models ({dataset}/{split})", fontsize=9)
        _save(fig, png_path, svg_path)


def figure6_table(
    bias_results: Sequence[Mapping[str, Any]],
    *,
    dataset: str,
    split: str,
    methods: Sequence[str] | None = None,
    model: str | None = None,
) -> pd.DataFrame:
    """Figure 6's selection of the cross-bias matrix: per method, the row of the heuristic whose addressing reduced
    its own prediction bias the most (the most negative diagonal cell; the paper's "cases where each method delivers
    the largest Prediction bias reduction"), with its changes on every heuristic and ``others_mean``.

    A method none of whose rows has a measured diagonal is left out. The baseline is that of
    :func:`cross_bias_matrix` (``"auto"``: the plain control where there is one)."""
    rows = []
    baseline = ORIGINAL
    for m in _present_methods(bias_results, dataset, split, methods):
        matrix = cross_bias_matrix(bias_results, dataset=dataset, split=split, method=m, model=model)
        baseline = matrix.attrs["baseline"]
        diagonal = {a: matrix.at[a, a] for a in matrix.index if a in matrix.columns and not math.isnan(matrix.at[a, a])}
        if not diagonal:
            continue
        best = min(diagonal, key=lambda a: (diagonal[a], report.ordered_heuristics(diagonal).index(a)))
        row = {"method": _label(m), "addressed": best, "n_seeds": matrix.attrs["n_seeds"]}
        row.update({c: matrix.at[best, c] for c in matrix.columns})
        rows.append(row)
    if not rows:
        raise ValueError(f"no debiased model measured on the heuristic it addresses ({dataset}/{split})")
    df = pd.DataFrame(rows)
    measured = report.ordered_heuristics(c for c in df.columns if c not in {"method", "addressed", "n_seeds", "others_mean"})
    df = df[["method", "addressed", "n_seeds", *measured, "others_mean"]]
    df.attrs["caption"] = (
        f"Figure 6 ({dataset}/{split}): per method, the addressed heuristic with the largest reduction of its own "
        f"prediction bias, and the change of every prediction bias, minus {_baseline_text(baseline)}, in points "
        "(others_mean = the mean over the other heuristics). The full matrix is the cross-bias table (Figure 7)."
    )
    df.attrs["baseline"] = baseline
    return df


def figure6(
    bias_results: Sequence[Mapping[str, Any]],
    png_path: str | os.PathLike,
    svg_path: str | os.PathLike,
    *,
    dataset: str,
    split: str,
    methods: Sequence[str] | None = None,
    model: str | None = None,
) -> pd.DataFrame:
    """Figure 6: :func:`figure6_table` as one heat map (a row per method, labelled with the addressed heuristic),
    coloured like :func:`figure_cross_bias`. Returns the table."""
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    table = figure6_table(bias_results, dataset=dataset, split=split, methods=methods, model=model)
    measured = [c for c in table.columns if c not in {"method", "addressed", "n_seeds", "others_mean"}]
    values = table[measured].to_numpy(dtype=float)
    vmax = max(0.5, float(np.nanmax(np.abs(values))) if np.isfinite(values).any() else 0.5)
    labels = [f"{r.method} · {r.addressed}" for r in table.itertuples()]
    with matplotlib.rc_context(_rc("spurious-figure6")):
        fig = Figure(figsize=(2.0 + 0.75 * len(measured), 1.4 + 0.45 * len(labels)), layout="constrained")
        FigureCanvasAgg(fig)
        ax = fig.subplots()
        mesh = _heatmap(ax, values, labels, measured, vmax)
        versus = _label(table.attrs["baseline"]).lower()
        fig.colorbar(mesh, ax=ax, label=f"Δ prediction bias vs. {versus} (points)", shrink=0.9)
        fig.suptitle(f"Cross-bias change where each method reduces its bias most ({dataset}/{split})", fontsize=9)
        _save(fig, png_path, svg_path)
    return table


# ----------------------------------------------------------------------------------------------------------------------
# Figure 3: OOD performance of the original models


def ood_performance_table(
    metrics: Sequence[Mapping[str, Any]],
    *,
    datasets: Sequence[str] | None = None,
    paper_names: Mapping[str, str] | None = None,
) -> pd.DataFrame:
    """Figure 3 as a table: the original (non-debiased) models' EM and F1 per dataset (default: every dataset in
    ``metrics``, in order of appearance) and their ``average``; rows = model × metric, averaged over the seeds
    (``n_seeds``; ``"<d> min"``/``"<d> max"`` = the range over the seeds, as the metrics carry no interval). With
    ``paper_names`` (our model → the paper's model) ``"<d> (paper)"`` holds the paper's Figure 3 values on the EM
    rows (the paper's caption says F1, but they are the EM of its Table 1's Original row).
    """
    originals = [m for m in metrics if _method_of(m) == ORIGINAL]
    if datasets is None:
        datasets = _ordered_unique(str(m["dataset"]) for m in originals)
    if not originals or not datasets:
        raise ValueError("no metrics of original models to plot")
    by_key: dict[tuple[str, str], dict[str, Mapping[str, Any]]] = {}
    for m in originals:
        if str(m["dataset"]) not in datasets:
            continue
        seeds = by_key.setdefault((str(m["model"]), str(m["dataset"])), {})
        seed = str(m.get("seed"))
        if seed in seeds:
            raise ValueError(f"two metrics of model {m['model']!r}, seed {seed}, on {m['dataset']!r} (one split each)")
        seeds[seed] = m
    models = _ordered_unique(k[0] for k in by_key)
    rows = []
    for model in models:
        paper_model = (paper_names or {}).get(model)
        paper = paper_values.OOD_PERFORMANCE.get(paper_model, {}) if paper_model else {}
        for metric, key in (("EM", "exact_match"), ("F1", "f1")):
            row: dict[str, Any] = {"model": model, "metric": metric}
            counts = []
            for d in datasets:
                vals = [float(m[key]) for m in by_key.get((model, d), {}).values()]
                counts.append(len(vals))
                row[d] = _round(_mean(vals))
                row[f"{d} min"] = _round(min(vals)) if vals else math.nan
                row[f"{d} max"] = _round(max(vals)) if vals else math.nan
                if paper_names is not None:
                    row[d + PAPER_SUFFIX] = (
                        paper.get(paper_dataset_name(d) or "", math.nan) if metric == "EM" else math.nan
                    )
            row["n_seeds"] = _count_text(counts)
            row[AVERAGE] = _round(_mean(row[d] for d in datasets))
            if paper_names is not None:
                row[AVERAGE + PAPER_SUFFIX] = _round(_mean(row[d + PAPER_SUFFIX] for d in datasets))
            rows.append(row)
    columns = ["model", "metric", "n_seeds"]
    for d in [*datasets, AVERAGE]:
        columns += [d] + ([f"{d} min", f"{d} max"] if d != AVERAGE else [])
        columns += [d + PAPER_SUFFIX] if paper_names is not None else []
    df = pd.DataFrame(rows, columns=columns)
    df.attrs["caption"] = (
        "OOD performance per pre-trained model (Figure 3): exact match (EM) and F1 of the original models on each "
        "dataset, mean over seeds (min/max: their range); average = the mean over the datasets."
        + (
            " (paper) = the paper's Figure 3 values (ood_performance_models.csv), beside our EM: its caption says F1, "
            "but BERT-Base's values are the EM of Table 1's Original row."
            if paper_names is not None
            else ""
        )
    )
    return df


def figure3(
    metrics: Sequence[Mapping[str, Any]],
    png_path: str | os.PathLike,
    svg_path: str | os.PathLike,
    *,
    datasets: Sequence[str] | None = None,
    paper_names: Mapping[str, str] | None = None,
    title: str | None = None,
) -> None:
    """Figure 3: grouped bars of the original models' F1 (top) and EM (bottom) per dataset and on average, the value
    above each bar; with several seeds the bar is their mean and a whisker spans their range. With ``paper_names``
    the paper's values are black diamonds on the EM panel (see :func:`ood_performance_table`)."""
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    table = ood_performance_table(metrics, datasets=datasets, paper_names=paper_names)
    groups = [c for c in table.columns if f"{c} min" in table.columns] + [AVERAGE]
    models = _ordered_unique(table["model"])
    width = 0.8 / len(models)
    fig_w = max(5.0, 1.5 + len(groups) * (0.5 * len(models) + 0.4))
    with matplotlib.rc_context(_rc("spurious-figure3")):
        fig = Figure(figsize=(fig_w, 6.0), layout="constrained")
        FigureCanvasAgg(fig)
        axes = fig.subplots(2, 1)
        cmap = matplotlib.colormaps["tab10"]
        for ax, metric in zip(axes, ("F1", "EM"), strict=True):
            rows = table[table["metric"] == metric].set_index("model")
            for j, model in enumerate(models):
                xs = np.arange(len(groups)) - 0.4 + width * (j + 0.5)
                vals = np.array([rows.at[model, g] for g in groups], dtype=float)
                ax.bar(xs, np.nan_to_num(vals), width * 0.92, color=cmap(j % 10), label=model)
                for i, g in enumerate(groups[:-1]):
                    lo, hi = rows.at[model, f"{g} min"], rows.at[model, f"{g} max"]
                    if not math.isnan(lo) and hi > lo:
                        ax.errorbar(
                            xs[i],
                            vals[i],
                            yerr=[[vals[i] - lo], [hi - vals[i]]],
                            fmt="none",
                            ecolor="black",
                            elinewidth=0.6,
                            capsize=1.5,
                        )
                for x, v in zip(xs, vals, strict=True):
                    text = report.NA_TEXT if math.isnan(v) else f"{v:.1f}"
                    ax.text(x, (0 if math.isnan(v) else v) + 1.0, text, ha="center", va="bottom", fontsize=6)
                if metric == "EM" and paper_names is not None:
                    paper = np.array([rows.at[model, g + PAPER_SUFFIX] for g in groups], dtype=float)
                    ax.scatter(xs, paper, marker="D", s=10, color="black", zorder=3, label="paper" if j == 0 else None)
            ax.set_xticks(range(len(groups)), groups)
            ax.set_xlim(-0.6, len(groups) - 0.4)
            ax.set_ylim(0, 105)
            ax.set_ylabel(f"{metric} (%)")
            ax.grid(axis="y", linewidth=0.3, alpha=0.6)
            ax.set_axisbelow(True)
        handles, labels = axes[1].get_legend_handles_labels()
        fig.legend(handles, labels, loc="outside right upper", fontsize=7, frameon=False)
        fig.suptitle(title or "OOD performance per pre-trained model", fontsize=9)
        _save(fig, png_path, svg_path)


# ----------------------------------------------------------------------------------------------------------------------
# Figures 8/9: validation loss curves


def _curves(summary: Mapping[str, Any]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """name → (steps, losses) sorted by step; a summary without ``validation_curves`` has its ID curve only."""
    raw = summary.get("validation_curves")
    if raw is None:
        raw = {"validation": summary.get("validation_losses") or []}
    out = {}
    for name, points in raw.items():
        pts = sorted((float(p["step"]), _num(p.get("loss"))) for p in points)
        out[str(name)] = (np.array([s for s, _ in pts]), np.array([v for _, v in pts]))
    return out


def _model_seed(summary: Mapping[str, Any]) -> tuple[str, str]:
    """(model, seed) of a training summary: its fields, else parsed from a run name like "minilm/lmix/x/seed0"."""
    parts = str(summary.get("run", "")).split("/")
    model = summary.get("model", parts[0])
    seed = summary.get("seed")
    if seed is None:
        seed = parts[-1].removeprefix("seed") if len(parts) > 1 and parts[-1].startswith("seed") else None
    return str(model), str(seed)


def _gate_curve(summary: Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """(steps, mean, q10, q90) of an LMix run's gate from its ``train_losses`` rows; None for other runs."""
    rows = [r for r in summary.get("train_losses") or [] if "gate" in r]
    if not rows:
        return None
    steps = np.array([float(r["step"]) for r in rows])
    mean = np.array([float(r["gate"]) for r in rows])
    q10 = np.array([float(r.get("gate_q10", r["gate"])) for r in rows])
    q90 = np.array([float(r.get("gate_q90", r["gate"])) for r in rows])
    return steps, mean, q10, q90


def figure_loss_curves(
    summaries: Sequence[Mapping[str, Any]],
    png_path: str | os.PathLike,
    svg_path: str | os.PathLike,
    *,
    max_step: int | None = None,
    id_name: str = "validation",
    title: str | None = None,
) -> None:
    """Figures 8/9: validation loss against training step, one panel per run: the original runs, the plain controls
    (the original behind them) and the debiased runs with their control behind them (the plain run of the same model
    and seed where there is one, else the original) in lighter, thinner lines, as in the paper; one colour per
    dataset, the in-distribution curve (``id_name``) solid and the OOD ones dashed. LMix panels also show the gate on
    a right-hand axis (its batch mean per step, black, with the 10-90 % band), so a gate that runs away is visible.
    ``max_step`` cuts the x axis (the paper shows the first 10,000 steps)."""
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D

    if not summaries:
        raise ValueError("no training summaries to plot")
    originals = {_model_seed(s): s for s in summaries if _method_of(s) == ORIGINAL}
    controls = {_model_seed(s): s for s in summaries if _method_of(s) == CONTROL}
    debiased = [s for s in summaries if _method_of(s) in DEBIASING_METHODS]
    order = {m: i for i, m in enumerate(DEBIASING_METHODS)}
    heuristic_rank = {h: i for i, h in enumerate(paper_values.HEURISTIC_ORDER)}
    debiased.sort(
        key=lambda s: (
            order[_method_of(s)],
            heuristic_rank.get(str(s.get("addressed")), len(heuristic_rank)),
            str(s.get("addressed")),
            str(s.get("run")),
        )
    )
    panels = [(s, None) for s in originals.values()]
    panels += [(s, originals.get(key)) for key, s in controls.items()]
    panels += [(s, controls.get(_model_seed(s), originals.get(_model_seed(s)))) for s in debiased]
    names = _ordered_unique(n for s in summaries for n in sorted(_curves(s), key=lambda n: (n != id_name, n)))
    cmap = matplotlib.colormaps["tab10"]
    colors = {n: cmap(i % 10) for i, n in enumerate(names)}
    cols = min(3, len(panels))
    n_rows = math.ceil(len(panels) / cols)
    any_gate = False
    with matplotlib.rc_context(_rc("spurious-loss-curves")):
        fig = Figure(figsize=(1.0 + 3.6 * cols, 0.6 + 2.6 * n_rows), layout="constrained")
        FigureCanvasAgg(fig)
        axes = fig.subplots(n_rows, cols, squeeze=False).ravel()
        for ax, (summary, base) in zip(axes, panels, strict=False):
            for run, light in ((base, True), (summary, False)):
                if run is None:
                    continue
                for name, (steps, losses) in _curves(run).items():
                    keep = steps <= max_step if max_step is not None else np.ones(len(steps), dtype=bool)
                    ax.plot(
                        steps[keep],
                        losses[keep],
                        color=colors[name],
                        linestyle="-" if name == id_name else "--",
                        linewidth=0.7 if light else 1.2,
                        alpha=0.4 if light else 1.0,
                    )
            method = _method_of(summary)
            label = _label(method) + (f" · {summary.get('addressed')}" if summary.get("addressed") else "")
            behind = f"; behind: {_label(_method_of(base)).lower()}" if base is not None else ""
            ax.set_title(f"{label} ({summary.get('run', '')}{behind})", fontsize=7)
            ax.set_xlabel("step")
            ax.set_ylabel("validation loss")
            ax.grid(linewidth=0.3, alpha=0.6)
            gate = _gate_curve(summary)
            if gate is not None:
                any_gate = True
                steps, mean, q10, q90 = gate
                keep = steps <= max_step if max_step is not None else np.ones(len(steps), dtype=bool)
                twin = ax.twinx()
                twin.fill_between(steps[keep], q10[keep], q90[keep], color="black", alpha=0.12, linewidth=0)
                twin.plot(steps[keep], mean[keep], color="black", linewidth=0.8)
                twin.set_ylabel("LMix gate g(x)")
                twin.set_ylim(bottom=0.0)
        for ax in axes[len(panels) :]:
            ax.set_visible(False)
        handles = [Line2D([], [], color=colors[n], linestyle="-" if n == id_name else "--", label=n) for n in names]
        if len(panels) > len(originals):
            handles += [
                Line2D([], [], color="black", linewidth=1.2, label="the panel's run"),
                Line2D([], [], color="black", linewidth=0.7, alpha=0.4, label="its control (plain, else original)"),
            ]
        if any_gate:
            handles.append(Line2D([], [], color="black", linewidth=0.8, label="gate mean (10-90 % band), right axis"))
        fig.legend(handles=handles, loc="outside right upper", fontsize=7, frameon=False)
        fig.suptitle(title or "Validation loss during training (in-distribution solid, OOD dashed)", fontsize=9)
        _save(fig, png_path, svg_path)


def runs_table(
    summaries: Sequence[Mapping[str, Any]],
    metrics: Sequence[Mapping[str, Any]],
    *,
    id_dataset: str,
    id_split: str,
) -> pd.DataFrame:
    """One row per trained run of the experiment (original, plain, debiased): what it was trained on and with, the
    scale it used and where that came from (``config``, ``scale search (<choice file>)``), the LMix gate at the end of
    training, and its in-distribution EM/F1 with ``em_vs_control`` = its EM / the matched control's EM (the plain run
    of the same model and seed, else the original).

    ``summaries`` are training summaries with ``run``, ``model``, ``seed``, ``method``, ``addressed``; ``metrics`` the
    prediction metrics (``run``, ``dataset``, ``split``, ``exact_match``, ``f1``)."""
    scores = {
        str(m["run"]): m for m in metrics if str(m.get("dataset")) == id_dataset and str(m.get("split")) == id_split
    }
    rows = []
    for s in summaries:
        method = _method_of(s)
        if method not in (ORIGINAL, CONTROL, *DEBIASING_METHODS):
            continue
        gate = s.get("gate") or {}
        score = scores.get(str(s["run"]), {})
        rows.append(
            {
                "run": s["run"],
                "method": _label(method),
                "addressed": s.get("addressed"),
                "seed": s.get("seed"),
                "scale": s.get("scale", math.nan),
                "scale_source": s.get("scale_source", N_A),
                "train_questions": s.get("n_train_examples"),
                "train_windows": s.get("n_train_features"),
                "steps": s.get("steps"),
                "saved_step": s.get("saved_step"),
                "init": s.get("init"),
                "gate_final_mean": gate.get("final_mean", math.nan),
                "gate_final_q10": gate.get("final_q10", math.nan),
                "gate_final_q90": gate.get("final_q90", math.nan),
                "id_em": score.get("exact_match", math.nan),
                "id_f1": score.get("f1", math.nan),
                "_key": _model_seed(s),
                "_method": method,
            }
        )
    if not rows:
        raise ValueError("no original, plain or debiased training summaries")
    controls = {r["_key"]: r["id_em"] for r in rows if r["_method"] == CONTROL}
    originals = {r["_key"]: r["id_em"] for r in rows if r["_method"] == ORIGINAL}
    for r in rows:
        if r["_method"] in (ORIGINAL, CONTROL):
            r["em_vs_control"] = math.nan
            continue
        base = controls.get(r["_key"], originals.get(r["_key"], math.nan))
        r["em_vs_control"] = r["id_em"] / base if base and not math.isnan(base) else math.nan
    order = {m: i for i, m in enumerate((ORIGINAL, CONTROL, *DEBIASING_METHODS))}
    rank = {h: i for i, h in enumerate(paper_values.HEURISTIC_ORDER)}
    rows.sort(key=lambda r: (order[r["_method"]], rank.get(str(r["addressed"]), -1), str(r["run"])))
    df = pd.DataFrame(rows).drop(columns=["_key", "_method"])
    for key in ("id_em", "id_f1", "gate_final_mean", "gate_final_q10", "gate_final_q90"):
        df[key] = df[key].astype(float).round(2)
    df["em_vs_control"] = df["em_vs_control"].astype(float).round(3)
    control = "the Plain run" if controls else "the original run"
    df.attrs["caption"] = (
        f"The runs of the debiasing experiment: training data (questions, windows), steps (saved_step = the kept "
        f"checkpoint), initialisation, the scale s each method used and where it came from (config, or the scale "
        f"search's choice file), the LMix gate at the end of training (mean and 10/90 % quantiles over the last 10 % "
        f"of steps), and the in-distribution EM/F1 on {id_dataset}/{id_split}; em_vs_control = EM / the EM of "
        f"{control} of the same model and seed."
    )
    return df


#: Quality floors of the debiasing demo (issue 12): a debiased model keeps most of its control's in-distribution EM,
#: the LMix gate neither vanishes nor runs away, and the bias model is a shortcut, not a general QA model.
FLOORS = {"em_vs_control_min": 0.6, "gate_min": 0.2, "gate_max": 2.5, "bias_gap_min": 10.0, "bias_unbiased_f1_max": 20.0}


def quality_floors(runs: pd.DataFrame, bias_models: pd.DataFrame, floors: Mapping[str, float] = FLOORS) -> pd.DataFrame:
    """The floors a debiasing run must meet to be read as a result, one row per check (``check``, ``run``,
    ``value``, ``floor``, ``passed``), from :func:`runs_table` and :func:`bias_models_table`:

    * every debiased model's in-distribution EM is at least ``em_vs_control_min`` of its matched control's;
    * every LMix model's gate mean at the end of training lies in [``gate_min``, ``gate_max``];
    * every bias model's F1 gap is at least ``bias_gap_min`` points while its F1 on the unbiased validation segment
      stays below ``bias_unbiased_f1_max`` (a competent general QA model would give the methods nothing to remove).
    """
    rows = []
    debiased = runs[runs["method"].isin([METHOD_LABELS[m] for m in DEBIASING_METHODS])]
    if debiased.empty:
        raise ValueError("no debiased runs to check")
    for r in debiased.itertuples():
        rows.append(("ID EM / control EM", r.run, r.em_vs_control, f">= {floors['em_vs_control_min']:g}",
                     bool(r.em_vs_control >= floors["em_vs_control_min"])))  # fmt: skip
        if r.method == METHOD_LABELS["lmix"]:
            ok = floors["gate_min"] <= r.gate_final_mean <= floors["gate_max"]
            rows.append(("LMix gate mean, end of training", r.run, r.gate_final_mean,
                         f"in [{floors['gate_min']:g}, {floors['gate_max']:g}]", bool(ok)))  # fmt: skip
    for r in bias_models.itertuples():
        rows.append(("bias model F1 gap", r.run, r.f1_gap, f">= {floors['bias_gap_min']:g}",
                     bool(r.f1_gap >= floors["bias_gap_min"])))  # fmt: skip
        rows.append(("bias model F1, unbiased segment", r.run, r.f1_unbiased, f"< {floors['bias_unbiased_f1_max']:g}",
                     bool(r.f1_unbiased < floors["bias_unbiased_f1_max"])))  # fmt: skip
    df = pd.DataFrame(rows, columns=["check", "run", "value", "floor", "passed"])
    df.attrs["caption"] = (
        "Quality floors of the debiasing experiment: a NaN value fails (e.g. no control's EM, no gate record)."
    )
    return df


#: The demo's quality floor (issue text): the bias model must be clearly better on its biased segment.
BIAS_MODEL_MIN_GAP = 10.0


def bias_models_table(summaries: Sequence[Mapping[str, Any]], *, min_gap: float = BIAS_MODEL_MIN_GAP) -> pd.DataFrame:
    """One row per bias model: the kept checkpoint's F1 (and EM) on the biased and the unbiased validation segment,
    their gap, and whether the gap reaches ``min_gap`` points (LMix and CReg have little to work with otherwise).

    Reads the training summaries' ``selection_history`` (one entry per evaluation: ``step``, ``score`` = F1 gap,
    ``f1_biased``, ``f1_unbiased``, ``em_biased``, ``em_unbiased``) at ``best_step``."""
    rows = []
    for s in summaries:
        history = s.get("selection_history") or []
        if not history:
            raise ValueError(f"training summary of {s.get('run', '?')} has no selection_history: is it a bias model?")
        best = max(history, key=lambda h: h["score"]) if s.get("best_step") is None else next(
            h for h in history if h["step"] == s["best_step"]
        )
        rows.append(
            {
                "run": s.get("run"),
                "addressed": s.get("addressed"),
                "kept_step": int(best["step"]),
                "steps": s.get("steps"),
                "f1_biased": _round(best["f1_biased"]),
                "f1_unbiased": _round(best["f1_unbiased"]),
                "f1_gap": _round(best["f1_biased"] - best["f1_unbiased"]),
                "em_biased": _round(best["em_biased"]),
                "em_unbiased": _round(best["em_unbiased"]),
                "gap_at_least_min": bool(best["f1_biased"] - best["f1_unbiased"] >= min_gap),
            }
        )
    df = pd.DataFrame(rows)
    df.attrs["caption"] = (
        f"Bias models (App. B.2.1): F1/EM on the biased and the unbiased validation segment at the kept checkpoint "
        f"(the evaluation with the largest F1 gap); gap_at_least_min: gap >= {min_gap:g} points."
    )
    return df
