"""Report tables and the Figure 2-style plot from prediction-bias results.

Input: the result dicts of ``spurious.thinktwice.bias.search_threshold`` (one per model × dataset × heuristic) to which
the workflow adds ``model`` and ``dataset`` (and, for the Human reference, ``model: "Human"`` and ``annotator``). Values
are in percentage points. A result without a found threshold has ``prediction_bias`` 0 (the paper reports "no
threshold" as 0).
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from spurious.core.report.figures import figure_function, save_figure
from spurious.core.report.tables import NA_TEXT, fixed_decimals, format_markdown, write_table
from spurious.thinktwice import paper_values

HUMAN = "Human"
PAPER_SUFFIX = " (paper)"

# NA_TEXT, fixed_decimals, format_markdown and write_table live in core.report.tables (every paper's report formats its
# tables with them); they stay importable from here.
__all__ = [
    "HUMAN",
    "NA_TEXT",
    "bias_table",
    "figure2",
    "fixed_decimals",
    "format_markdown",
    "load_results",
    "ordered_heuristics",
    "thresholds_table",
    "write_table",
]


# ----------------------------------------------------------------------------------------------------------------------
# helpers


def load_results(paths: Iterable[str | os.PathLike], fix: str | None = None) -> list[dict[str, Any]]:
    """Read result JSON files; a file may hold one result or a list of them. A damaged one is an UnreadableFileError
    naming it, with ``fix`` as its advice (default: the readers')."""
    from spurious.core import readers

    results: list[dict[str, Any]] = []
    for path in paths:
        payload = readers.read_json(path, kind="results file", fix=fix)
        if isinstance(payload, list):
            results.extend(payload)
        else:
            results.append(payload)
    return results


def _is_human(model: str) -> bool:
    return str(model).casefold() == HUMAN.casefold()


def ordered_heuristics(names: Iterable[str]) -> list[str]:
    """The distinct ``names`` in the paper's order; names the paper does not know follow, sorted."""
    present = set(names)
    known = [h for h in paper_values.HEURISTIC_ORDER if h in present]
    return known + sorted(present - set(known))


def _ordered_models(results: Sequence[Mapping[str, Any]]) -> list[str]:
    models: list[str] = []
    for r in results:
        m = str(r.get("model", ""))
        if m not in models:
            models.append(m)
    return [m for m in models if not _is_human(m)] + [m for m in models if _is_human(m)]


def _ordered_datasets(results: Sequence[Mapping[str, Any]]) -> list[str]:
    datasets: list[str] = []
    for r in results:
        d = str(r.get("dataset", ""))
        if d not in datasets:
            datasets.append(d)
    return datasets


def _index(results: Sequence[Mapping[str, Any]]) -> dict[tuple[str, str, str], Mapping[str, Any]]:
    """(model, dataset, heuristic) → result; duplicates are an error."""
    out: dict[tuple[str, str, str], Mapping[str, Any]] = {}
    for r in results:
        if "heuristic" not in r:
            raise ValueError(f"result without a 'heuristic' key: keys {sorted(r)}")
        key = (str(r.get("model", "")), str(r.get("dataset", "")), str(r["heuristic"]))
        if key in out:
            raise ValueError(f"two results for model {key[0]!r}, dataset {key[1]!r}, heuristic {key[2]!r}")
        out[key] = r
    return out


def _num(value: Any) -> float:
    """A float, NaN for None / missing."""
    if value is None:
        return math.nan
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def _bias_of(r: Mapping[str, Any]) -> float:
    """The prediction bias of a result: 0 when no threshold was found (as the paper reports it)."""
    if not r.get("found", True):
        return 0.0
    value = _num(r.get("prediction_bias"))
    return 0.0 if math.isnan(value) else max(value, 0.0)


def _group(r: Mapping[str, Any], name: str | None) -> Mapping[str, Any]:
    if name is None:
        return {}
    return (r.get("groups") or {}).get(name) or {}


def _worse_group(r: Mapping[str, Any]) -> str | None:
    """The under-performing group: ``worse_group``, else the side opposite ``biased_group``, else the lower EM q975."""
    worse = r.get("worse_group")
    if worse in ("low", "high"):
        return worse
    biased = r.get("biased_group")
    if biased in ("low", "high"):
        return "high" if biased == "low" else "low"
    q_low, q_high = _num(_group(r, "low").get("em_q975")), _num(_group(r, "high").get("em_q975"))
    if math.isnan(q_low) or math.isnan(q_high) or q_low == q_high:
        return None
    return "low" if q_low < q_high else "high"


def _unique_setting(results: Iterable[Mapping[str, Any]], key: str) -> Any:
    values = sorted({r.get(key) for r in results if r.get(key) is not None}, key=str)
    if not values:
        return None
    if len(values) == 1:
        return values[0]
    return "/".join(str(v) for v in values)


def _settings_text(results: Sequence[Mapping[str, Any]]) -> str:
    sample_size = _unique_setting(results, "sample_size")
    iterations = _unique_setting(results, "iterations")
    replacement = _unique_setting(results, "with_replacement")
    seed = _unique_setting(results, "seed")
    parts = [
        f"bootstrap per segment: {iterations if iterations is not None else '?'} draws of "
        f"{sample_size if sample_size is not None else '?'} examples"
    ]
    if replacement is not None:
        parts.append(
            "with replacement"
            if replacement is True
            else "without replacement"
            if replacement is False
            else f"with_replacement={replacement}"
        )
    if seed is not None:
        parts.append(f"seed {seed}")
    return ", ".join(parts)


def _paper_names(models: Sequence[str], paper_run: str | Mapping[str, str] | None) -> dict[str, str | None]:
    """Our model → the paper run to compare with (Human → the paper's Human reference)."""
    out: dict[str, str | None] = {m: None for m in models}
    if paper_run is None:
        return out
    try:
        if isinstance(paper_run, str):
            name = paper_values.canonical_run_name(paper_run)
            for m in models:
                out[m] = "Human" if _is_human(m) else name
        else:
            for m in models:
                if m in paper_run:
                    out[m] = paper_values.canonical_run_name(paper_run[m])
                elif _is_human(m):
                    out[m] = "Human"
    except KeyError as exc:
        raise ValueError(str(exc.args[0])) from exc
    return out


# ----------------------------------------------------------------------------------------------------------------------
# tables


def bias_table(
    results: Sequence[Mapping[str, Any]], *, paper_run: str | Mapping[str, str] | None = None
) -> pd.DataFrame:
    """Prediction bias per model (rows, Human last) and heuristic (columns, paper order) plus ``average``.

    Columns: ``model``, ``dataset``, one column per present heuristic, ``average`` (the mean over the row's heuristics,
    of the unrounded values), ``sample_size``, ``iterations``. Values are rounded to 2 decimals; a heuristic without a
    threshold counts 0. With ``paper_run`` (a paper run name such as ``"BERT-Base"`` for every non-Human row, or a
    mapping model → paper run) each heuristic ``h`` gets a column ``"h (paper)"`` beside it, and ``"average (paper)"``
    (the mean of the paper's values over the same heuristics); the Human row gets the paper's Human reference. The
    caption (``df.attrs["caption"]``) states the bootstrap settings.
    """
    if not results:
        raise ValueError("no results to tabulate")
    index = _index(results)
    heuristics = ordered_heuristics(h for _, _, h in index)
    models = _ordered_models(results)
    datasets = _ordered_datasets(results)
    paper_names = _paper_names(models, paper_run)

    rows = []
    for model in models:
        for dataset in datasets:
            cell = {h: index.get((model, dataset, h)) for h in heuristics}
            if not any(cell.values()):
                continue
            row: dict[str, Any] = {"model": model, "dataset": dataset}
            ours = []
            paper = paper_values.paper_run(paper_names[model]) if paper_names[model] else None
            paper_present = []
            for h in heuristics:
                r = cell[h]
                value = _bias_of(r) if r is not None else math.nan
                row[h] = round(value, 2) if not math.isnan(value) else math.nan
                if r is not None:
                    ours.append(value)
                if paper_run is not None:
                    p = paper.get(h, math.nan) if paper else math.nan
                    row[h + PAPER_SUFFIX] = p
                    if r is not None and not math.isnan(p):
                        paper_present.append(p)
            row["average"] = round(float(np.mean(ours)), 2) if ours else math.nan
            if paper_run is not None:
                row["average" + PAPER_SUFFIX] = round(float(np.mean(paper_present)), 2) if paper_present else math.nan
            row_results = [r for r in cell.values() if r is not None]
            row["sample_size"] = _unique_setting(row_results, "sample_size")
            row["iterations"] = _unique_setting(row_results, "iterations")
            rows.append(row)

    columns = ["model", "dataset"]
    for h in [*heuristics, "average"]:
        columns.append(h)
        if paper_run is not None:
            columns.append(h + PAPER_SUFFIX)
    columns += ["sample_size", "iterations"]
    df = pd.DataFrame(rows, columns=columns)

    caption = [
        "Prediction bias (Exact match, percentage points): the distance between the two segments' bootstrap "
        f"intervals at the best threshold ({_settings_text(results)}); 0 = no threshold found; average = mean "
        "over the listed heuristics."
    ]
    human = [r for r in results if _is_human(str(r.get("model", "")))]
    if human:
        annot = ", ".join(f"{r['heuristic']}: {r['annotator']}" for r in human if r.get("annotator") is not None)
        caption.append(
            "Human = an annotator's answers scored against the other annotators' answers"
            + (f"; per heuristic the minimum over the three annotators (annotator: {annot})." if annot else ".")
        )
    if paper_run is not None:
        used = sorted({n for n in paper_names.values() if n})
        caption.append(
            f"(paper) = the published values of {', '.join(used)} (Mikula et al., isbiased visualization CSVs; "
            f"{paper_values.ITERATIONS} draws of {paper_values.SAMPLE_SIZE} examples)."
        )
    df.attrs["caption"] = " ".join(caption)
    return df


def figure4_table(
    reference: Sequence[Mapping[str, Any]],
    fixed: Sequence[Mapping[str, Any]],
    human: Sequence[Mapping[str, Any]] = (),
) -> pd.DataFrame:
    """Figure 4 (§5.2) as a table, in the layout of :func:`bias_table` with a ``thresholds from`` column after
    ``dataset``: the reference model's prediction bias at its own best thresholds when its search gives the
    thresholds (``reference``; empty otherwise), then every run measured at the figure's thresholds
    (:func:`spurious.thinktwice.bias.measure_at_threshold` results, each naming its source in ``threshold_from``:
    App. C's published thresholds or a run's search; 0 where the source has no threshold, or where the segments'
    intervals overlap), then the Human row (its own searches). Every result must be on the same dataset and split.
    The caption names the thresholds' source, as does ``df.attrs["thresholds_from"]``."""
    results = [*reference, *fixed, *human]
    if not fixed:
        raise ValueError("Figure 4 needs the results of the runs measured at the figure's thresholds")
    where = {(str(r.get("dataset")), str(r.get("split"))) for r in results}
    if len(where) != 1:
        raise ValueError(f"Figure 4 results come from several splits: {sorted(where)}")
    ref_models = list(dict.fromkeys(str(r.get("model")) for r in reference))
    sources = list(dict.fromkeys(str(r["threshold_from"]) for r in fixed if r.get("threshold_from"))) or ["?"]
    df = bias_table(results)
    per_model: dict[str, str] = {m: "own search" for m in ref_models}
    for r in fixed:
        per_model.setdefault(str(r.get("model")), str(r.get("threshold_from") or "?"))
    for r in human:
        per_model.setdefault(str(r.get("model")), "own search (per annotator)")
    df.insert(2, "thresholds from", [per_model.get(str(m), "?") for m in df["model"]])
    dataset, split = next(iter(where))
    if ref_models:
        source = f"{', '.join(ref_models)}'s own search"
        rows = f"{', '.join(ref_models)}: its own search, as in the bias table; every other model at those thresholds"
    else:
        source = "; ".join(sources)
        rows = "Every model is measured at those thresholds"
    df.attrs["thresholds_from"] = source
    df.attrs["caption"] = (
        f"Figure 4 (§5.2): prediction bias on {dataset}/{split} (EM, points). Thresholds: {source}. {rows}, so all "
        "are cut into the same segments (0 = the source has no threshold for the heuristic, or the intervals overlap "
        f"there; no search maximises these values); {_settings_text(results)}."
        + (" Human = the minimum over the three annotators' own searches, as in the bias table." if human else "")
    )
    return df


def scores_table(metrics: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """SQuAD v1.1 EM/F1 per model (or annotator) and evaluated split, from the predict rules' metrics files."""
    rows = []
    for m in metrics:
        name = str(m["model"])
        if m.get("annotator") is not None:
            name = f"{name} (annotator {m['annotator']})"
        elif m.get("seed") is not None:
            name = f"{name} (seed {m['seed']})"
        rows.append(
            {
                "model": name,
                "dataset": m["dataset"],
                "split": m["split"],
                "n": int(m["n"]),
                "exact_match": round(float(m["exact_match"]), 2),
                "f1": round(float(m["f1"]), 2),
            }
        )
    df = pd.DataFrame(rows, columns=["model", "dataset", "split", "n", "exact_match", "f1"])
    df.attrs["caption"] = (
        "SQuAD v1.1 exact match and F1 (official evaluation semantics) on every evaluated split; an annotator is "
        "scored against the other two of the first three gold answers (questions with fewer than three skipped)."
    )
    return df


THRESHOLD_COLUMNS = (
    "model", "dataset", "heuristic", "found", "threshold", "prediction_bias", "distance_f1", "size_low", "size_high",
    "biased_group", "worse_group", "worse_size", "worse_em_q975",
    "low_em_mean", "low_em_q025", "low_em_q975", "high_em_mean", "high_em_q025", "high_em_q975",
    "sample_size", "iterations", "with_replacement", "seed", "n_evaluated", "n_dropped_negative", "annotator",
)  # fmt: skip


def thresholds_table(
    results: Sequence[Mapping[str, Any]], *, paper_run: str | Mapping[str, str] | None = None
) -> pd.DataFrame:
    """Appendix C layout: one row per model × dataset × heuristic with the threshold, the group sizes, which group is
    biased / worse (under-performing), the worse group's size, each group's EM mean and 2.5%/97.5% quantiles and the
    bootstrap settings.

    With ``paper_run`` the non-Human rows get the paper's Appendix C values (the thresholds picked with BERT-BASE-CASED
    on SQuAD validation and the under-performing group sizes): ``threshold (paper)``, ``worse_size (paper)``, and every
    row with a paper counterpart gets ``prediction_bias (paper)`` and ``worse_em_q975 (paper)`` (the CSVs' quantile).
    """
    if not results:
        raise ValueError("no results to tabulate")
    index = _index(results)
    models = _ordered_models(results)
    datasets = _ordered_datasets(results)
    heuristics = ordered_heuristics(h for _, _, h in index)
    paper_names = _paper_names(models, paper_run)

    rows = []
    for model in models:
        for dataset in datasets:
            for h in heuristics:
                r = index.get((model, dataset, h))
                if r is None:
                    continue
                found = bool(r.get("found", False))
                low, high = _group(r, "low"), _group(r, "high")
                worse = _worse_group(r) if found else None
                threshold = _num(r.get("threshold")) if found else math.nan
                row: dict[str, Any] = {
                    "model": model,
                    "dataset": dataset,
                    "heuristic": h,
                    "found": found,
                    "threshold": round(threshold, 6) if not math.isnan(threshold) else math.nan,
                    "prediction_bias": round(_bias_of(r), 2),
                    "distance_f1": round(max(_num(r.get("distance_f1")), 0.0), 2) if found else 0.0,
                    "size_low": _num(low.get("size")),
                    "size_high": _num(high.get("size")),
                    "biased_group": r.get("biased_group") if found else None,
                    "worse_group": worse,
                    "worse_size": _num(_group(r, worse).get("size")),
                    "worse_em_q975": round(_num(_group(r, worse).get("em_q975")), 2),
                }
                for name, g in (("low", low), ("high", high)):
                    for stat in ("em_mean", "em_q025", "em_q975"):
                        row[f"{name}_{stat}"] = round(_num(g.get(stat)), 2)
                for key in (
                    "sample_size",
                    "iterations",
                    "with_replacement",
                    "seed",
                    "n_evaluated",
                    "n_dropped_negative",
                    "annotator",
                ):
                    row[key] = r.get(key)
                if paper_run is not None:
                    human = _is_human(model)
                    row["threshold" + PAPER_SUFFIX] = (
                        math.nan if human else float(paper_values.APPENDIX_C_THRESHOLDS.get(h, math.nan))
                    )
                    row["worse_size" + PAPER_SUFFIX] = (
                        math.nan if human else float(paper_values.APPENDIX_C_WORSE_SIZE.get(h, math.nan))
                    )
                    name = paper_names[model]
                    row["prediction_bias" + PAPER_SUFFIX] = (
                        paper_values.paper_run(name).get(h, math.nan) if name else math.nan
                    )
                    quantiles = paper_values.paper_quantiles(name) if name else None
                    row["worse_em_q975" + PAPER_SUFFIX] = (quantiles or {}).get(h, math.nan)
                rows.append(row)

    columns = list(THRESHOLD_COLUMNS)
    if not any(r.get("annotator") is not None for r in results):
        columns.remove("annotator")
    if paper_run is not None:
        for base in ("threshold", "worse_size", "prediction_bias", "worse_em_q975"):
            columns.insert(columns.index(base) + 1, base + PAPER_SUFFIX)
    df = pd.DataFrame(rows, columns=columns)
    for col in ("size_low", "size_high", "worse_size", "worse_size" + PAPER_SUFFIX, "annotator"):
        if col in df:
            df[col] = df[col].astype("Int64") if df[col].notna().any() else df[col]

    caption = [
        "Thresholds (Appendix C layout): segments low = {h ≤ threshold}, high = {h > threshold}; worse = the "
        "under-performing segment; EM mean and 2.5%/97.5% bootstrap quantiles per segment "
        f"({_settings_text(results)}). Thresholds are searched on each model's own predictions."
    ]
    if paper_run is not None:
        caption.append(
            "threshold (paper) / worse_size (paper) = the paper's Appendix C values, picked with BERT-BASE-CASED on "
            f"SQuAD validation (n = {paper_values.SQUAD_VALID_SIZE:,}); prediction_bias (paper) and worse_em_q975 "
            "(paper) = the published values of the compared run (the CSVs' quantile column)."
        )
    df.attrs["caption"] = " ".join(caption)
    return df


# ----------------------------------------------------------------------------------------------------------------------
# Figure 2


def _figure_order(index: Mapping[tuple[str, str, str], Mapping[str, Any]], heuristics: list[str]) -> list[str]:
    """Heuristics sorted by the mean bias over the (non-Human) models, largest first; ties in the paper's order."""

    def mean_bias(h: str) -> float:
        vals = [_bias_of(r) for (m, _, hh), r in index.items() if hh == h and not _is_human(m)]
        if not vals:
            vals = [_bias_of(r) for (_, _, hh), r in index.items() if hh == h]
        return float(np.mean(vals)) if vals else 0.0

    return sorted(heuristics, key=lambda h: (-round(mean_bias(h), 9), heuristics.index(h)))


def no_threshold_text(result: Mapping[str, Any]) -> str:
    """Why a bias search found no threshold, in words, from its ``reason`` and settings (``sample_size``,
    ``n_evaluated``), e.g. "no threshold: 20-question samples need ≥ 40 questions; 30 searched"."""
    reason, size, searched = result.get("reason"), result.get("sample_size"), result.get("n_evaluated")
    if reason == "too_few_rows" and size:
        have = f"; {searched} searched" if searched is not None else ""
        return f"no threshold: {size}-question samples need ≥ {2 * int(size)} questions{have}"
    if reason == "no_valid_split" and size:
        return f"no threshold: every split leaves a segment with fewer than {size} questions"
    if reason == "no_significant_difference":
        return "no threshold: the segments' EM intervals overlap at every split"
    return "no threshold found"


#: Heuristic groups per panel row of :func:`figure2` at most, and the inches a legend beside the panels takes.
HEURISTICS_PER_ROW = 4
_LEGEND_IN = 1.6


@figure_function
def figure2(
    results: Sequence[Mapping[str, Any]],
    png_path: str | os.PathLike,
    svg_path: str | os.PathLike,
    *,
    title: str | None = None,
) -> None:
    """Figure 2 style plot, one panel row per dataset and :data:`HEURISTICS_PER_ROW` heuristics (x groups, sorted by
    average bias; fewer per row where many models would make a row wider than the page): per model (bars; Human
    hatched) the lower bar is the worse segment's mean EM with its bootstrap interval (error bar q025–q975), and the
    upper, lighter bar spans the prediction bias on top of the worse segment's q975 (so its top is the better
    segment's q025); the bias is printed above in EM points. A heuristic without a threshold says why
    (:func:`no_threshold_text`): on the panel where no model of a group (or of the panel) has one, else "no
    threshold" at the bar and the reason in the note below.

    Written as PNG and SVG, atomically, with the Agg canvas and no date in the metadata (byte-reproducible).
    """
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    from spurious.core.report import figures

    if not results:
        raise ValueError("no results to plot")
    index = _index(results)
    models = _ordered_models(results)
    datasets = _ordered_datasets(results)
    heuristics = _figure_order(index, ordered_heuristics(h for _, _, h in index))

    n_models = len(models)
    width = 0.8 / max(n_models, 1)
    group_in = 0.45 * n_models + 0.5
    per_row = max(1, min(HEURISTICS_PER_ROW, int((figures.MAX_WIDTH_IN - 1.0 - _LEGEND_IN) // group_in)))
    per_row = min(per_row, len(heuristics))
    chunks = [heuristics[i : i + per_row] for i in range(0, len(heuristics), per_row)]
    panels = []
    for dataset in datasets:
        if _any_drawable(index, dataset):
            panels += [(dataset, chunk) for chunk in chunks]
        else:  # nothing to draw: one panel that says why
            panels.append((dataset, heuristics))
    fig_w = min(figures.MAX_WIDTH_IN, max(6.0, 1.0 + per_row * group_in + _LEGEND_IN))
    rc = {"svg.hashsalt": "spurious-figure2", "svg.fonttype": "path", "font.size": 8, "hatch.linewidth": 0.6}
    with matplotlib.rc_context(rc):
        # a panel with nothing to draw only says why: it needs less height
        heights = [2.9 if _any_drawable(index, dataset) else 1.3 for dataset, _ in panels]
        fig = Figure(figsize=(fig_w, sum(heights) + 0.9), layout="constrained")
        FigureCanvasAgg(fig)
        axes = fig.subplots(len(panels), 1, squeeze=False, height_ratios=heights)[:, 0]
        cmap = matplotlib.colormaps["tab10"]
        colors = {m: ((0.45, 0.45, 0.45, 1.0) if _is_human(m) else cmap(i % 10)) for i, m in enumerate(models)}
        handles: dict[str, Any] = {}
        footnotes: dict[str, list[str]] = {}
        for ax, (dataset, chunk) in zip(axes, panels, strict=True):
            missing = {
                (h, m): index[(m, dataset, h)]
                for h in chunk
                for m in models
                if (m, dataset, h) in index and not _drawable(index[(m, dataset, h)])
            }
            present = [(h, m) for h in chunk for m in models if (m, dataset, h) in index]
            panel_empty = bool(present) and len(missing) == len(present)
            for j, model in enumerate(models):
                color = colors[model]
                light = tuple(0.55 + 0.45 * c for c in color[:3])
                hatch = "//" if _is_human(model) else None
                if model not in handles:
                    handles[model] = Patch(facecolor=color, hatch=hatch, edgecolor="white", label=model)
                for i, h in enumerate(chunk):
                    r = index.get((model, dataset, h))
                    if r is None:
                        continue
                    x = i - 0.4 + width * (j + 0.5)
                    if (h, model) in missing:
                        group_empty = all((h, m) in missing for m in models if (m, dataset, h) in index)
                        if not (panel_empty or group_empty):
                            ax.text(x, 1.5, "no threshold", rotation=90, ha="center", va="bottom", fontsize=6,
                                    color=color)
                            footnotes.setdefault(no_threshold_text(r), []).append(f"{model} on {h}")
                        continue
                    worse = _group(r, _worse_group(r))
                    mean = _num(worse.get("em_mean"))
                    q025, q975 = _num(worse.get("em_q025")), _num(worse.get("em_q975"))
                    bias = _bias_of(r)
                    ax.bar(x, mean, width * 0.92, color=color, hatch=hatch, edgecolor="white", linewidth=0.3)
                    if not (math.isnan(q025) or math.isnan(q975)):
                        ax.errorbar(
                            x,
                            mean,
                            yerr=[[max(mean - q025, 0.0)], [max(q975 - mean, 0.0)]],
                            fmt="none",
                            ecolor="black",
                            elinewidth=0.6,
                            capsize=1.5,
                        )
                    base = q975 if not math.isnan(q975) else mean
                    ax.bar(x, bias, width * 0.92, bottom=base, color=light, hatch=hatch, edgecolor=color, linewidth=0.4)
                    ax.text(x, base + bias + 0.8, f"{bias:.2f} EM pts", rotation=90, ha="center", va="bottom",
                            fontsize=6)
            if dataset:
                ax.set_title(dataset, fontsize=8)
            if panel_empty:
                figures.explain_empty(ax, _reasons_text(missing))
                continue
            group_in_axes = 0.8 / (per_row + 0.2)  # a group's share of the panel's width
            for i, h in enumerate(chunk):
                rows = [missing[(h, m)] for m in models if (h, m) in missing]
                if rows and len(rows) == sum((m, dataset, h) in index for m in models):
                    text = "; ".join(dict.fromkeys(no_threshold_text(r) for r in rows))
                    ax.text(i, 50, figures.fill(text, group_in_axes * fig_w * 0.8, 6.5), ha="center",
                            va="center", fontsize=6.5, color="0.25")
            ax.set_xticks(range(len(chunk)), chunk)
            ax.set_xlim(-0.6, per_row - 0.4)
            ax.set_ylim(0, 135)  # room above 100 for the bias labels
            ax.set_yticks(range(0, 101, 20))
            ax.set_ylabel("Exact match (%)")
            ax.grid(axis="y", linewidth=0.3, alpha=0.6)
            ax.set_axisbelow(True)
        fig.legend(handles=list(handles.values()), loc="outside right upper", fontsize=7, frameon=False)
        fig.suptitle(title or "Prediction bias per model", fontsize=9)
        note = (
            f"Lower bars: the worse segment's EM mean (error bar: 2.5–97.5% quantiles); upper bars: prediction "
            f"bias in EM points (pts), from the worse segment's 97.5% quantile; {_settings_text(results)}."
        )
        note += "".join(f" {reason[0].upper()}{reason[1:]}: {', '.join(where)}." for reason, where in footnotes.items())
        fig.supxlabel(figures.fill(note, fig_w * 0.95, 6), fontsize=6)
        save_figure(fig, png_path, svg_path)


def _reasons_text(missing: Mapping[tuple[str, str], Mapping[str, Any]]) -> str:
    """Why the (heuristic, model) searches of a panel found no threshold: the reason, and which heuristics it holds
    for when they differ."""
    by_reason: dict[str, dict[str, None]] = {}
    for (h, _), r in missing.items():
        by_reason.setdefault(no_threshold_text(r), {})[h] = None
    if len(by_reason) == 1:
        ((reason, hs),) = by_reason.items()
        return f"{reason} (every heuristic: {', '.join(hs)})"
    return "; ".join(f"{reason} ({', '.join(hs)})" for reason, hs in by_reason.items())


def _any_drawable(index: Mapping[tuple[str, str, str], Mapping[str, Any]], dataset: str) -> bool:
    return any(_drawable(r) for (_, d, _), r in index.items() if d == dataset)


def _drawable(result: Mapping[str, Any]) -> bool:
    """A result with a threshold and a worse segment's mean to draw."""
    return bool(result.get("found")) and not math.isnan(_num(_group(result, _worse_group(result)).get("em_mean")))
