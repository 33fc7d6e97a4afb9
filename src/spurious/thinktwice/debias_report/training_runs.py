"""Figures 8/9 (validation loss curves), the runs table, the quality floors and the bias models' table."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from spurious.core.report import figures
from spurious.core.report.figures import figure_function, save_figure
from spurious.thinktwice import paper_values
from spurious.thinktwice.debias_report.common import (
    CONTROL,
    DEBIASING_METHODS,
    METHOD_LABELS,
    N_A,
    ORIGINAL,
    _label,
    _method_of,
    _ordered_unique,
    _rc,
    _round,
)
from spurious.thinktwice.report import _num


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


@figure_function
def figure_loss_curves(
    summaries: Sequence[Mapping[str, Any]],
    png_path: str | os.PathLike,
    svg_path: str | os.PathLike,
    *,
    max_step: int | None = None,
    id_name: str = "validation",
    title: str | None = None,
) -> dict[str, float]:
    """Figures 8/9: validation loss against training step, one panel per run: the original runs, the plain controls
    (the original behind them) and the debiased runs with their control behind them (the plain run of the same model
    and seed where there is one, else the original) in lighter, thinner lines, as in the paper; one colour per
    dataset, the in-distribution curve (``id_name``) solid and the OOD ones dashed. LMix panels also show the gate on
    a right-hand axis (its batch mean per step, black dotted, with the 10-90 % band), so a gate that runs away is
    visible. The step axis has whole ticks; a panel without points says so; the legend sits below the panels.

    ``max_step``: only the points at steps <= ``max_step`` are drawn (the paper's Figs. 8-9 show the first 10,000
    steps; the workflow passes ``debias.report.loss_curve_max_steps``), and a panel whose curves went further ends
    its x axis there; None draws every point. The title states the limit. Returns, per panel (its run), the largest
    step drawn (NaN for a panel without points)."""
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
    drawn: dict[str, float] = {}

    def kept(steps: np.ndarray) -> np.ndarray:
        return steps <= max_step if max_step is not None else np.ones(len(steps), dtype=bool)

    fig_w = max(5.0, 1.0 + 3.6 * cols)
    with matplotlib.rc_context(_rc("spurious-loss-curves")):
        fig = Figure(figsize=(fig_w, 1.2 + 2.8 * n_rows), layout="constrained")
        FigureCanvasAgg(fig)
        axes = fig.subplots(n_rows, cols, squeeze=False).ravel()
        for ax, (summary, base) in zip(axes, panels, strict=False):
            shown: list[float] = []
            cut = False
            for run, light in ((base, True), (summary, False)):
                if run is None:
                    continue
                for name, (steps, losses) in _curves(run).items():
                    keep = kept(steps)
                    shown += steps[keep].tolist()
                    cut = cut or not keep.all()
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
            ax.set_title(f"{label}\n" + figures.fill(f"{summary.get('run', '')}{behind}", 3.2, 7), fontsize=7)
            ax.set_xlabel("step")
            figures.count_axis(ax.xaxis)
            ax.set_ylabel("validation loss")
            ax.grid(linewidth=0.3, alpha=0.6)
            gate = _gate_curve(summary)
            if gate is not None:
                any_gate = True
                steps, mean, q10, q90 = gate
                keep = kept(steps)
                shown += steps[keep].tolist()
                cut = cut or not keep.all()
                twin = ax.twinx()
                twin.fill_between(steps[keep], q10[keep], q90[keep], color="black", alpha=0.12, linewidth=0)
                twin.plot(steps[keep], mean[keep], color="black", linewidth=1.0, linestyle=":")
                twin.set_ylabel("LMix gate g(x)")
                twin.set_ylim(bottom=0.0)
            if cut and max_step is not None:
                ax.set_xlim(right=max_step)
            if not shown:
                limit = f" at or before step {max_step:,}" if cut and max_step is not None else ""
                figures.explain_empty(ax, f"no validation loss recorded{limit} in this run's training summary")
            drawn[str(summary.get("run", ""))] = max(shown) if shown else math.nan
        for ax in axes[len(panels) :]:
            ax.set_visible(False)
        handles = [Line2D([], [], color=colors[n], linestyle="-" if n == id_name else "--", label=n) for n in names]
        if len(panels) > len(originals):
            handles += [
                Line2D([], [], color="black", linewidth=1.2, label="the panel's run"),
                Line2D([], [], color="black", linewidth=0.7, alpha=0.4, label="its control (plain, else original)"),
            ]
        if any_gate:
            handles.append(
                Line2D([], [], color="black", linewidth=1.0, linestyle=":",
                       label="gate mean (10-90 % band), right axis")
            )
        fig.legend(handles=handles, loc="outside lower center", ncols=min(3, len(handles)), fontsize=7, frameon=False)
        limit = "every step" if max_step is None else f"the first {max_step:,} steps"
        heading = f"{title or 'Validation loss during training (in-distribution solid, OOD dashed)'}; {limit}"
        fig.suptitle(figures.fill(heading, fig_w * 0.9, 9), fontsize=9)
        save_figure(fig, png_path, svg_path)
    return drawn


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
FLOORS = {
    "em_vs_control_min": 0.6, "gate_min": 0.2, "gate_max": 2.5, "bias_gap_min": 10.0, "bias_unbiased_f1_max": 20.0
}


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
