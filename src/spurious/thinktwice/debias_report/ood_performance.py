"""Figure 3: OOD performance of the original models."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from spurious.core.report.figures import figure_function, save_figure
from spurious.thinktwice import paper_values, report
from spurious.thinktwice.debias_report.common import (
    AVERAGE,
    ORIGINAL,
    _count_text,
    _mean,
    _method_of,
    _ordered_unique,
    _rc,
    _round,
    paper_dataset_name,
)
from spurious.thinktwice.report import PAPER_SUFFIX


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


@figure_function
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
        save_figure(fig, png_path, svg_path)


