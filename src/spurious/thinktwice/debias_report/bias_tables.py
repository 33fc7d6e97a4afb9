"""Figure 5 (prediction bias per method) and Figures 6/7 (cross-bias matrices)."""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from spurious.core.report import figures
from spurious.core.report.figures import figure_function, save_figure
from spurious.thinktwice import paper_values, report
from spurious.thinktwice.debias_report.common import (
    CONTROL,
    DEBIASING_METHODS,
    N_A,
    ORIGINAL,
    PAPER_METHODS,
    _check_paper_name,
    _count_text,
    _label,
    _mean,
    _method_of,
    _method_order,
    _ordered_unique,
    _rc,
    _round,
)
from spurious.thinktwice.report import PAPER_SUFFIX, _bias_of, _group, _is_human, _num, _unique_setting, _worse_group


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
        "change_vs_original", "threshold", "worse_group", "worse_size", "worse_em_mean", "worse_em_q025",
        "worse_em_q975", "sample_size", "iterations",
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


@figure_function
def figure5(
    bias_results: Sequence[Mapping[str, Any]],
    png_path: str | os.PathLike,
    svg_path: str | os.PathLike,
    *,
    dataset: str | None = None,
    split: str | None = None,
    title: str | None = None,
) -> None:
    """Figure 5: per heuristic, one bar per method (the debiased models measured on the heuristic they address), drawn
    like Figure 2 (:func:`spurious.thinktwice.report.figure2`): the worse segment's EM mean with its bootstrap interval
    and the prediction bias on top; where no threshold was found, why (the first seed's ``reason``). One panel row per
    model, dataset and split (and four heuristics); several seeds are averaged as in :func:`methods_bias_table`."""
    table = methods_bias_table(bias_results, dataset=dataset, split=split)
    cells = _methods_cells(_select(bias_results, dataset, split))
    methods = {_label(k[4]): k[4] for k in cells}
    results = []
    for rec in table.to_dict("records"):
        panel = f"{rec['model']}: {rec['dataset']}/{rec['split']}"
        found = rec["n_found"] > 0
        seeds = cells[(rec["model"], rec["dataset"], rec["split"], rec["heuristic"], methods[rec["method"]])]
        # why no seed found a threshold (the first seed's reason): the figure says it on the panel
        why = {k: seeds[0].get(k) for k in ("reason", "n_evaluated")} if not found else {}
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
                **why,
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
        f"{_baseline_text(baseline)} (same seed), in points; negative = less bias; 0 counted where no threshold was "
        f"found; mean over seeds (n = {n_seeds}). others_mean = the mean over the row's other heuristics. A bias is "
        "a distance between bootstrap intervals and has no interval of its own."
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
    ax.set_xticks(np.arange(len(columns)) + 0.5, list(columns))
    ax.set_yticks(np.arange(len(rows)) + 0.5, list(rows))
    ax.invert_yaxis()
    ax.set_xlabel("measured heuristic")
    return mesh


@figure_function
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
    panel_w, panel_h = 1.4 + 0.75 * n_cols, 1.3 + 0.45 * n_rows
    # as many heat maps side by side as fit the page beside the colour bar, the others in further rows
    grid_cols = max(1, min(len(methods), int((figures.MAX_WIDTH_IN - 1.4) // panel_w)))
    grid_rows = math.ceil(len(methods) / grid_cols)
    fig_w = min(figures.MAX_WIDTH_IN, max(5.5, 1.4 + panel_w * grid_cols))
    with matplotlib.rc_context(_rc("spurious-cross-bias")):
        fig = Figure(figsize=(fig_w, max(3.0, 0.7 + panel_h * grid_rows)), layout="constrained")
        FigureCanvasAgg(fig)
        axes = fig.subplots(grid_rows, grid_cols, squeeze=False).ravel()
        mesh = None
        for ax, m in zip(axes, methods, strict=False):
            v = values[m]
            mesh = _heatmap(ax, v.to_numpy(dtype=float), list(v.index), list(v.columns), vmax)
            ax.set_title(f"{_label(m)} (seeds: {matrices[m].attrs['n_seeds']})", fontsize=8)
            ax.set_ylabel("addressed heuristic")
        for ax in axes[len(methods) :]:
            ax.set_visible(False)
        shown = list(axes[: len(methods)])
        fig.colorbar(mesh, ax=shown, label=f"Δ prediction bias vs. {versus}\n(EM points)", shrink=0.9)
        heading = title or f"Cross-bias change of the debiased models ({dataset}/{split})"
        fig.suptitle(figures.fill(heading, fig_w * 0.9, 9), fontsize=9)
        figures.rotate_crowded_ticklabels(shown, rotation=45)
        save_figure(fig, png_path, svg_path)


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
    measured = report.ordered_heuristics(
        c for c in df.columns if c not in {"method", "addressed", "n_seeds", "others_mean"}
    )
    df = df[["method", "addressed", "n_seeds", *measured, "others_mean"]]
    df.attrs["caption"] = (
        f"Figure 6 ({dataset}/{split}): per method, the addressed heuristic with the largest reduction of its own "
        f"prediction bias, and the change of every prediction bias, minus {_baseline_text(baseline)}, in points "
        "(others_mean = the mean over the other heuristics). The full matrix is the cross-bias table (Figure 7)."
    )
    df.attrs["baseline"] = baseline
    return df


@figure_function
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
        fig.colorbar(mesh, ax=ax, label=f"Δ prediction bias vs. {versus}\n(EM points)", shrink=0.9)
        heading = f"Cross-bias change where each method reduces its bias most ({dataset}/{split})"
        fig.suptitle(figures.fill(heading, fig.get_size_inches()[0] * 0.9, 9), fontsize=9)
        figures.rotate_crowded_ticklabels([ax], rotation=45)
        save_figure(fig, png_path, svg_path)
    return table


