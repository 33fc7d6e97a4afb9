"""The spurious-gap figures of the SpuriousBench track, Figures 1-3 ("What Spurious Features Can Pretrained Language
Models Combat?", §4-§5), drawn from the metrics records that :mod:`spurious.spuriousbench.report` checks and
tabulates (its module docstring describes them; every figure reports percentages, aggregated as its tables).

* :func:`figure1`: per dataset the category means of every finetuned model (Fig. 1: BERT-base / -large / -random).
* :func:`figure2`: per dataset and feature the gap of each fine-tuning method (finetune / balanced / prompt /
  bitfit) of the models trained with several (Fig. 2); :func:`figure2_panels` says which panels it draws.
* :func:`figure3`: per dataset and feature the gap of each in-context model (Fig. 3, with Figs. 4-5's settings);
  :func:`figure3_panels` says which panels it draws.
* :func:`feature_label`: a feature's short axis label.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from spurious.core.report import figures
from spurious.core.report.figures import figure_function, save_figure
from spurious.spuriousbench.construction import CATEGORIES, FEATURES
from spurious.spuriousbench.report import category_table, first_seen, gap_table, model_labels, validated_metrics
from spurious.spuriousbench.track import METHODS

__all__ = [
    "Panel",
    "feature_label",
    "figure1",
    "figure2",
    "figure2_panels",
    "figure3",
    "figure3_panels",
]

_METHOD_COLORS = {"finetune": "C0", "balanced": "C1", "prompt": "C2", "bitfit": "C4", "icl": "C5"}


def feature_label(feature: str) -> str:
    """A short axis label: the part after "category:" with underscores as spaces ("punctuation:exclamation" →
    "exclamation"); known n-gram prefixes and syntax features as the paper prints them ("prefix:my_thought" →
    "My thought:", "syntax:np_np_pp" → "NP -> NP PP")."""
    spec = FEATURES.get(feature)
    if spec is not None and spec.category in ("prefix", "syntax"):
        return spec.value.strip()
    return feature.partition(":")[2].replace("_", " ") or feature


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
    datasets = first_seen(cat["dataset"])
    models = first_seen(cat["model"])
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
    every = validated_metrics(metrics)
    labels = model_labels(every)
    records = [r for r in every if r["method"] != "icl"]
    left_out = ["in-context learning (Figure 3)"] if len(records) < len(every) else []
    datasets = first_seen(r["dataset"] for r in records)
    models = first_seen(r["model"] for r in records)
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
    records = validated_metrics(metrics)
    icl = [r for r in records if r["method"] == "icl"]
    datasets = first_seen(r["dataset"] for r in records)
    with_icl = first_seen(r["dataset"] for r in icl)
    panels = [
        (d, "in-context learning", [(m, "icl") for m in first_seen(r["model"] for r in icl if r["dataset"] == d)])
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
    panels. At most :data:`~spurious.core.report.figures.MAX_WIDTH_IN` wide and, up to that width, at most 1.5 times as
    tall as wide."""
    table = gap_table(metrics)
    drawn = {(m, x) for _, _, bars in panels for m, x in bars}
    table = table[[cell in drawn for cell in zip(table["model"], table["method"], strict=True)]]
    labels = {(m, x): label for m, x, label in zip(table["model"], table["method"], table["label"], strict=True)}
    models = first_seen(m for _, _, bars in panels for m, _ in bars)
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
    features = {d: first_seen(table.loc[table["dataset"] == d, "feature"]) for d, _, _ in panels}
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
