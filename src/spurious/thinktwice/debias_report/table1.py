"""Table 1: OOD performance of the debiased models, as differences to the plain control and the original."""

from __future__ import annotations

import math
import os
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from spurious.core import readers
from spurious.core.io import atomic_path
from spurious.thinktwice import paper_values, report
from spurious.thinktwice.debias_report.common import (
    AVERAGE,
    CONTROL,
    DEBIASING_METHODS,
    METHOD_LABELS,
    METRICS,
    ORIGINAL,
    PAPER_METHODS,
    QUANTILES,
    SCORE,
    VS_CONTROL,
    VS_ORIGINAL,
    _check_paper_name,
    _count_text,
    _label,
    _mean,
    _method_of,
    _ordered_unique,
    _round,
    paper_dataset_name,
)
from spurious.thinktwice.report import PAPER_SUFFIX


@dataclass(frozen=True)
class _Run:
    run: str
    model: str
    seed: Any
    method: str
    addressed: str | None


def load_predictions(source: pd.DataFrame | str | os.PathLike) -> pd.DataFrame:
    """The ``id``, ``em``, ``f1`` columns of a predictions frame or parquet file (other columns are not needed)."""
    frame = source if isinstance(source, pd.DataFrame) else readers.read_parquet(source, columns=["id", "em", "f1"])
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


def _pair_runs(
    runs: Sequence[_Run],
) -> tuple[dict[str, dict[tuple[str, Any], _Run]], dict[tuple[str, str, str], list[_Run]]]:
    """(baselines, debiased): the original and plain run of every (model, seed), and the debiased runs by (model,
    method, addressed heuristic); ValueError for a duplicate baseline or a debiased or plain run without its
    baselines."""
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
            raise ValueError(
                f"plain run {controls[key].run!r} has no original run of model {key[0]!r}, seed {key[1]!r}"
            )
    return baselines, debiased


def _bootstrap_scores(
    predictions: Mapping[tuple[str, str], pd.DataFrame | str | os.PathLike],
    runs: Sequence[_Run],
    datasets: Sequence[str],
    iterations: int,
    seed: int,
) -> tuple[dict[tuple[str, str], np.ndarray], dict[tuple[str, str], np.ndarray], dict[str, int]]:
    """Per (run, dataset): the mean EM and F1 and their paired bootstrap draws (the same resampled questions for every
    run of a dataset); and each dataset's number of questions."""
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
    return points, draws, sizes


def _table1_caption(
    *,
    with_controls: bool,
    original_matches_control: bool | None,
    iterations: int,
    seed: int,
    sizes: Mapping[str, int],
    datasets: Sequence[str],
    with_paper: bool,
) -> str:
    """Table 1's caption: what each row is compared with, the bootstrap, the question counts, the paper's column."""
    if with_controls:
        control_text = (
            "Absolute scores and differences have their own columns: '<dataset> score' = the absolute score of the "
            "Original and Plain rows; '<dataset> Δ vs plain' = each debiased model minus the Plain model of the same "
            "model and seed (the matched control: standard fine-tuning with the debiased runs' training data, steps, "
            "initialisation and seed, so the difference is the method's alone); '<dataset> Δ vs original' = the "
            "difference to the original model instead (the paper's comparison; the Plain row there = plain minus "
            "original)"
        )
        if original_matches_control is True:
            control_text += (
                "; here the original model was trained on the same data with the same budget, so the two coincide "
                "up to training noise."
            )
        elif original_matches_control is False:
            control_text += (
                "; here the original model was trained on other data or with another budget, so those differences "
                "measure the budget as well as the method."
            )
        else:
            control_text += "."
    else:
        control_text = (
            "Absolute scores and differences have their own columns: '<dataset> score' = the absolute score of the "
            "Original rows; '<dataset> Δ vs original' = each debiased model minus the original model of the same "
            "model and seed (no plain control was configured"
            + (
                "; the original model was trained on the same data with the same budget)."
                if original_matches_control
                else "; if the original model had other data or another budget, the differences measure that too)."
            )
        )
    caption = [
        "Table 1 (OOD performance of the debiasing methods): per method and addressed heuristic, the difference in "
        "points of exact match (EM) and F1 (the row's metric). " + control_text + " "
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
            "TriviaQA: its original model's scores beside our Original EM row's, its differences to its original "
            "model beside our EM rows' comparison with the original): the "
            "paper's caption says F1, but its Original row (29.8 / 67.8 / 46.1) is the EM of its Figure 3 data and "
            "§5.3 reads the table in exact match. Its averages over datasets, and over heuristics per dataset, are "
            "means of its printed cells; the method average over everything is the printed one when all its cells "
            "are present."
        )
    return " ".join(caption)


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
    the original run; pairs are compared question by question (ids must match). Rows, per model and metric (EM, then
    F1): ``Original``, ``Plain``, then per method one row per addressed heuristic (paper order) and an ``average`` row
    (mean over the heuristics).

    Absolute scores and differences never share a column (a cell is NaN where its kind does not apply): columns
    ``model``, ``method``, ``addressed``, ``metric``, ``n_seeds``, then three groups, each per dataset and ``average``
    (the mean over the datasets) with the value and its 95% bootstrap interval (``"<col> q025"``/``"<col> q975"``):
    ``"<d> score"`` (:data:`SCORE`: the absolute score of the Original and Plain rows), ``"<d> Δ vs plain"``
    (:data:`VS_CONTROL`, with plain runs only: each debiased model minus its plain control) and ``"<d> Δ vs
    original"`` (:data:`VS_ORIGINAL`: minus the original model, as the paper reports it; the Plain row too, the
    debiased rows without plain runs). With ``paper_name="BERT-Base"`` the paper's values follow on the EM rows: its
    original scores in ``"<d> score (paper)"``, its differences in ``"<d> Δ vs original (paper)"``.
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
    baselines, debiased = _pair_runs(runs)
    originals, controls = baselines[ORIGINAL], baselines[CONTROL]

    points, draws, sizes = _bootstrap_scores(predictions, runs, datasets, iterations, seed)

    def score(run: str, dataset: str, m: int) -> _Cell:
        return _Cell(float(points[(run, dataset)][m]), draws[(run, dataset)][:, m])

    def diff(r: _Run, dataset: str, m: int, against: str) -> _Cell:
        base = baselines[against][(r.model, r.seed)].run
        a, b = score(r.run, dataset, m), score(base, dataset, m)
        return _Cell(a.point - b.point, a.draws - b.draws)

    # the column groups: absolute scores, then differences to the plain control (with plain runs) and to the original
    groups = [SCORE, CONTROL, ORIGINAL] if controls else [SCORE, ORIGINAL]
    suffix = {SCORE: SCORE, CONTROL: VS_CONTROL, ORIGINAL: VS_ORIGINAL}
    with_paper_column = {SCORE: with_paper, CONTROL: False, ORIGINAL: with_paper}
    models = _ordered_unique(r.model for r in runs if r.method == ORIGINAL)
    present_methods = [m for m in methods if any(k[1] == m for k in debiased)]
    columns = ["model", "method", "addressed", "metric", "n_seeds"]
    for group in groups:
        for d in [*datasets, AVERAGE]:
            name = d + suffix[group]
            columns += [name, f"{name} q025", f"{name} q975"]
            if with_paper_column[group]:
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
        # the paper's Original row is absolute (its scores), every other row a difference to its original model
        paper_group = SCORE if method == ORIGINAL else ORIGINAL
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
                if with_paper_column[group]:
                    out[name + PAPER_SUFFIX] = _round(paper.get(d, math.nan)) if group == paper_group else math.nan
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
            # the Original row: its absolute scores only (its differences to itself would be all zeros)
            rows.append(row(model, ORIGINAL, None, metric, len(originals_of), {SCORE: absolute}))
            if controls_of:
                plain_abs = {d: _Cell.mean([score(r.run, d, m) for r in controls_of]) for d in datasets}
                plain_vs = {d: _Cell.mean([diff(r, d, m, ORIGINAL) for r in controls_of]) for d in datasets}
                rows.append(row(model, CONTROL, None, metric, len(controls_of), {SCORE: plain_abs, ORIGINAL: plain_vs}))
            for method in present_methods:
                heuristics = heuristics_by_method[method]
                if not heuristics:
                    continue
                per_h: dict[str, dict[str, dict[str, _Cell]]] = {}
                counts = []
                for h in heuristics:
                    group_runs = debiased[(model, method, h)]
                    per_h[h] = {
                        g: {d: _Cell.mean([diff(r, d, m, g) for r in group_runs]) for d in datasets}
                        for g in groups
                        if g != SCORE
                    }
                    counts.append(len(group_runs))
                    rows.append(row(model, method, h, metric, len(group_runs), per_h[h]))
                averaged = {
                    g: {d: _Cell.mean([per_h[h][g][d] for h in heuristics]) for d in datasets}
                    for g in groups
                    if g != SCORE
                }
                rows.append(row(model, method, AVERAGE, metric, _count_text(counts), averaged, heuristics))

    df = pd.DataFrame(rows, columns=columns)
    df.attrs["caption"] = _table1_caption(
        with_controls=bool(controls), original_matches_control=original_matches_control, iterations=iterations,
        seed=seed, sizes=sizes, datasets=datasets, with_paper=with_paper,
    )
    return df


def _signed(value: float, signed: bool) -> str:
    if value is None or math.isnan(value):
        return report.NA_TEXT
    return f"{value:+.2f}" if signed else f"{value:.2f}"


def table1_display(df: pd.DataFrame) -> pd.DataFrame:
    """Table 1 for reading, with the numeric frame's headers: one text cell per value column, "+1.23 [+0.40, +2.05]"
    (the ``Δ`` columns signed, the ``score`` columns absolute: "25.00 [...]"), the paper's value in the column beside
    it; per model and metric the largest gain per ``Δ`` column among the heuristic rows (all methods) is in **bold**,
    like the paper's top gains."""
    datasets = [c for c in df.columns if f"{c} q025" in df.columns]
    out = df[["model", "method", "addressed", "metric", "n_seeds"]].copy()
    baseline_rows = df["method"].isin([METHOD_LABELS[ORIGINAL], METHOD_LABELS[CONTROL]])
    is_heuristic_row = ~baseline_rows & (df["addressed"] != AVERAGE)
    for d in datasets:
        # the column says what its cells are: absolute scores (" score") or differences (" Δ vs ...")
        signed_column = not d.endswith(SCORE)
        best = df[is_heuristic_row].groupby(["model", "metric"])[d].transform("max")
        texts = []
        for i in df.index:
            if math.isnan(df.at[i, d]):
                texts.append(report.NA_TEXT)
                continue
            text = f"{_signed(df.at[i, d], signed_column)} [{_signed(df.at[i, f'{d} q025'], signed_column)}, "
            text += f"{_signed(df.at[i, f'{d} q975'], signed_column)}]"
            if signed_column and is_heuristic_row[i] and df.at[i, d] == best.get(i):
                text = f"**{text}**"
            texts.append(text)
        out[d] = texts
        if d + PAPER_SUFFIX in df.columns:
            out[d + PAPER_SUFFIX] = [_signed(v, signed_column) for v in df[d + PAPER_SUFFIX]]
    out.attrs["caption"] = df.attrs.get("caption")
    return out


def write_table1(df: pd.DataFrame, csv_path: str | os.PathLike, md_path: str | os.PathLike) -> None:
    """Write Table 1 atomically: the numeric frame as CSV (for further analysis), :func:`table1_display` as Markdown
    (one readable cell per value column, where ``report.write_table`` would print three numeric columns each); both
    carry the same ``score`` / ``Δ vs plain`` / ``Δ vs original`` headers."""
    with atomic_path(csv_path) as tmp:
        df.to_csv(tmp, index=False)
    display = table1_display(df)
    text = report.format_markdown(display, df.attrs.get("caption"))
    with atomic_path(md_path) as tmp:
        tmp.write_text(text, encoding="utf-8")


