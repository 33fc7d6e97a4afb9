"""The audit's files: ``audit.json`` (every number) and ``report.html``, one self-contained page that shows before it
tells: the overview figure first (every shortcut tested, its effect in points with its 95 % interval against the
verdict line, coloured by verdict), then the summary table, the verdict rule and the effect-size classes in words
(:mod:`spurious.audit.verdict`), the settings as a key / value table, and each diagnostic's table and figure. Every
rate on the page names its denominator, every column of numbers holds one unit (named in its header), and every
table scrolls inside its own box when it is wider than the page. The two files are replaced together
(:func:`spurious.core.io.atomic_paths`): a failure while drawing or writing leaves the previous pair whole."""

from __future__ import annotations

import base64
import hashlib
import html
import math
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from spurious.audit import verdict
from spurious.core import provenance
from spurious.core.report.figures import explain_empty, figure_function, fill, svg_text

SUMMARY_COLUMNS = ("shortcut", "evidence", "effect (points)", "95 % interval (points)", "effect class", "test result",
                   "verdict")
#: QA's prediction bias has no interval of its own (it is the gap between two intervals): no interval column.
QA_SUMMARY_COLUMNS = tuple(c for c in SUMMARY_COLUMNS if c != "95 % interval (points)")
NA = "–"
#: The overview figure's colour and marker per verdict (told apart without colour too: filled circle, open square).
VERDICT_STYLE = {verdict.TAKES: ("#b2182b", "o", "#b2182b"), verdict.NO_EVIDENCE: ("#4d4d4d", "s", "white")}


def fingerprint(path: str | os.PathLike) -> dict[str, Any]:
    """sha256 of a file, or of a folder's files (names and contents, sorted); a hub id is recorded as given."""
    p = Path(os.fspath(path))
    if not p.exists():
        return {"id": str(path), "sha256": None}
    digest = hashlib.sha256()
    files = sorted(f for f in p.rglob("*") if f.is_file()) if p.is_dir() else [p]
    for f in files:
        digest.update(str(f.relative_to(p) if p.is_dir() else f.name).encode())
        with open(f, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
    return {"path": str(p.resolve()), "sha256": digest.hexdigest(), "files": len(files)}


def _missing(x: Any) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))


def _fmt(x: Any, digits: int = 2) -> str:
    if _missing(x):
        return NA
    if isinstance(x, float):
        return f"{x:.{digits}f}"
    return str(x)


def _p(p: float | None) -> str:
    if _missing(p):
        return NA
    return f"{p:.1e}" if p < 1e-3 else f"{p:.3f}"


def _p_log10(log10_p: float) -> str:
    """A p-value given as its log10 (the permutation test's can underflow a float)."""
    return _p(10.0**log10_p) if log10_p > -3 else f"10^{log10_p:.1f}"


def _points(x: float | None) -> str:
    return NA if _missing(x) else f"{x:+.2f}"


def _interval(bounds: Sequence[float] | None, scale: float = 1.0, digits: int = 2, sign: str = "+") -> str:
    if bounds is None or any(_missing(b) for b in bounds):
        return NA
    low, high = (scale * b for b in bounds)
    return f"[{low:{sign}.{digits}f}, {high:{sign}.{digits}f}]"


def _share(k: int, n: int) -> str:
    """``k`` of ``n`` as a percentage, NA without a denominator."""
    return f"{100.0 * k / n:.1f}\u00a0%" if n else NA


def _tested(row: Mapping[str, Any]) -> bool:
    """An inserted feature that could be inserted into at least one example (it has a test)."""
    return not _missing(row.get("p"))


def flip_evidence(r: Mapping[str, Any]) -> str:
    """An inserted feature's flips with their denominators, in words."""
    m, b, c, label = r["n_not_predicted_label_before"], r["flips_towards"], r["flips_away"], r["label"]
    rate = f" (flip rate {_share(b, m)})" if m else ""
    return (f"{b} of {m} examples not already predicted as {label} flipped to it{rate}; "
            f"{c} of {r['n_predicted_label_before']} predicted as {label} flipped away")


def permutation_evidence(perm: Mapping[str, Any]) -> str:
    """The permutation test's two accuracies with their denominators, in words."""
    return (f"ACC(U) {perm['correct_usual']} of {perm['n_usual']} usual-label instances correct "
            f"({_share(perm['correct_usual'], perm['n_usual'])}) vs ACC(N) {perm['correct_unusual']} of "
            f"{perm['n_unusual']} unusual-label instances ({_share(perm['correct_unusual'], perm['n_unusual'])})")


def summary_rows(result: Mapping[str, Any]) -> list[dict[str, str]]:
    """One row per candidate shortcut: what it is, the evidence (rates with their denominators), the effect in points
    with its 95 % interval, the effect class, the test's result and the verdict."""
    rows = []
    if result["task"] == "qa":
        for r in result["bias"]:
            where = (f"at threshold {_fmt(r['threshold'], 3)} the {r['biased_group']} segment is better"
                     if r["threshold"] is not None else "no threshold separates the segments")
            rows.append(
                {
                    "shortcut": f"heuristic {r['heuristic']}",
                    "evidence": "prediction bias: the gap between the two segments' bootstrapped 95 % EM intervals "
                    f"(Think Twice Alg. 1); {where}",
                    "effect (points)": _fmt(r["prediction_bias"]),
                    "effect class": _class(verdict.effect_class(r["prediction_bias"])),
                    "test result": "no Human reference" if r["human_bias"] is None
                    else f"Human reference {r['human_bias']:.2f} EM points",
                    "verdict": verdict.verdict_text(r["flagged"]),
                }
            )
        return rows
    perm = result["permutation_test"]
    gap = verdict.accuracy_gap_points(perm["acc_usual"], perm["acc_unusual"])
    rows.append(
        {
            "shortcut": f"lexical cues (top {len(result['top_features'])} z-score types, {perm['features_from']})",
            "evidence": f"exact permutation test, usual vs unusual label (Stubborn Lexical Bias): "
            f"{permutation_evidence(perm)}",
            "effect (points)": _points(gap),
            "95 % interval (points)": _interval(perm.get("accuracy_gap_ci_points")),
            "effect class": _class(verdict.effect_class(gap)),
            "test result": f"one-sided p = {_p_log10(perm['log10_p'])}",
            "verdict": verdict.verdict_text(verdict.permutation_flagged(perm["log10_p"], result["alpha"])),
        }
    )
    pred = result.get("predictability")
    if pred and pred.get("computed"):
        n_predictable = round(pred["share_predictable"] * pred["n_scored"])
        rows.append(
            {
                "shortcut": "training data a linear probe solves (AFLite)",
                "evidence": f"{pred['m']} logistic-regression probes on the model's representations, {pred['t']} "
                f"training instances each, scored held out: {n_predictable} of {pred['n_scored']} instances "
                f"({_share(n_predictable, pred['n_scored'])}) have predictability ≥ {pred['tau']}; the probes' mean "
                f"held-out accuracy {100 * pred['probe_accuracy']:.1f} %",
                "effect (points)": NA,
                "95 % interval (points)": NA,
                "effect class": "not classified (descriptive)",
                "test result": "no test",
                "verdict": verdict.DESCRIPTIVE,
            }
        )
    for r in result["insertion"]:
        if not _tested(r):
            continue
        rows.append(
            {
                "shortcut": f"inserted {r['feature']} → {r['label']}",
                "evidence": f"feature insertion into {r['n_applicable']} examples ({r['segment']}): {flip_evidence(r)}",
                "effect (points)": _points(100.0 * r["net_shift"]),
                "95 % interval (points)": _interval(r.get("net_shift_ci"), scale=100.0),
                "effect class": _class(verdict.effect_class(100.0 * r["net_shift"])),
                "test result": f"p = {_p(r['p'])}, Holm {_p(r['p_holm'])}",
                "verdict": verdict.verdict_text(bool(r["flagged"])),
            }
        )
    return rows


def _class(name: str | None) -> str:
    return name or NA


def _value(x: Any) -> str:
    """A setting's value as a reader reads it: lists joined, mappings as ``key: value`` pairs, empty as none."""
    if x is None or x == {} or x == []:
        return "none"
    if isinstance(x, bool):
        return "true" if x else "false"
    if isinstance(x, Mapping):
        return "; ".join(f"{k}: {_value(v)}" for k, v in x.items())
    if isinstance(x, (list, tuple)):
        return ", ".join(_value(v) for v in x)
    if isinstance(x, float):
        return f"{x:g}"
    return str(x)


def settings_rows(result: Mapping[str, Any]) -> list[dict[str, str]]:
    """The settings the audit ran with, one ``setting`` / ``value`` row each (the report's settings table)."""
    if result["task"] == "qa":
        groups = [("bias search", result["bias_settings"]), ("heuristics", result.get("heuristic_settings") or {}),
                  ("featurisation", result.get("featurisation") or {})]
        rows = [{"setting": f"{group}: {k}", "value": _value(v)} for group, values in groups for k, v in values.items()]
        rows.append({"setting": "Human reference", "value": result["human_reference"]})
        return rows
    settings = result.get("settings") or {"alpha": result["alpha"]}
    rows = [{"setting": k, "value": _value(v)} for k, v in settings.items()]
    rows.append({"setting": "label mapping", "value": str(result["label_mapping"])})
    return rows


# ----------------------------------------------------------------------------------------------------------------------
# the diagnostics' tables: one unit per column, named in the header


def bias_rows(result: Mapping[str, Any]) -> list[dict[str, str]]:
    """QA: the prediction bias per heuristic beside the Human reference."""
    return [
        {
            "heuristic": r["heuristic"],
            "prediction bias (EM points)": _fmt(r["prediction_bias"]),
            "Human reference (EM points)": _fmt(r["human_bias"]),
            "threshold (heuristic value)": _fmt(r["threshold"], 3),
            "better segment": r["biased_group"] or NA,
            "verdict": verdict.verdict_text(r["flagged"]),
            "effect class": _class(r["effect_size_class"]),
        }
        for r in result["bias"]
    ]


def permutation_rows(result: Mapping[str, Any]) -> list[dict[str, str]]:
    """Classification: the permutation test's sets, accuracies and gap."""
    perm = result["permutation_test"]
    return [
        {
            "usual U (instances)": str(perm["n_usual"]),
            "U correct (instances)": str(perm["correct_usual"]),
            "ACC(U) (%)": _fmt(100.0 * perm["acc_usual"], 1) if not _missing(perm["acc_usual"]) else NA,
            "unusual N (instances)": str(perm["n_unusual"]),
            "N correct (instances)": str(perm["correct_unusual"]),
            "ACC(N) (%)": _fmt(100.0 * perm["acc_unusual"], 1) if not _missing(perm["acc_unusual"]) else NA,
            "ACC(U) − ACC(N) (points)": _points(perm["accuracy_gap_points"]),
            "95 % interval (points)": _interval(perm.get("accuracy_gap_ci_points")),
            "one-sided p": _p_log10(perm["log10_p"]),
            "verdict": verdict.verdict_text(perm["flagged"]),
            "effect class": _class(perm["effect_size_class"]),
            "features from": perm["features_from"],
        }
    ]


def insertion_rows(result: Mapping[str, Any]) -> list[dict[str, str]]:
    """Classification: each inserted feature's flips with their denominators, its net shift and its test."""
    rows = []
    for r in result["insertion"]:
        tested = _tested(r)
        m = r.get("n_not_predicted_label_before")
        rows.append(
            {
                "feature": r["feature"],
                "associated label": r.get("label", NA) if tested else NA,
                "examples": str(r["n_applicable"]),
                "flipped to the label (examples, of those not predicted it before)": f"{r['flips_towards']} of {m}"
                if tested else NA,
                "flip rate (%)": _fmt(100.0 * r["flip_rate"], 1) if tested and m else NA,
                "flip rate 95 % interval (%)": _interval(r.get("flip_rate_ci"), 100.0, 1, "") if tested and m else NA,
                "flipped away (examples, of those predicted it before)":
                f"{r['flips_away']} of {r['n_predicted_label_before']}" if tested else NA,
                "net shift (points)": _points(100.0 * r["net_shift"]) if tested else NA,
                "net shift 95 % interval (points)": _interval(r.get("net_shift_ci"), 100.0) if tested else NA,
                "p": _p(r.get("p")),
                "Holm-adjusted p": _p(r.get("p_holm")),
                "verdict": verdict.verdict_text(bool(r.get("flagged"))) if tested else "not tested (no example)",
                "effect class": _class(r.get("effect_size_class")),
            }
        )
    return rows


def predictability_rows(pred: Mapping[str, Any]) -> list[dict[str, str]]:
    """Classification with training data: AFLite's predictability, descriptive."""
    n_predictable = round(pred["share_predictable"] * pred["n_scored"])
    return [
        {
            "representation": pred["representation"],
            "probes": str(pred["m"]),
            "training instances per probe": str(pred["t"]),
            "τ": f"{pred['tau']:g}",
            "instances scored": str(pred["n_scored"]),
            "predictability ≥ τ (instances)": str(n_predictable),
            "predictability ≥ τ (% of scored)": _fmt(100.0 * pred["share_predictable"], 1),
            "probes' mean held-out accuracy (%)": _fmt(100.0 * pred["probe_accuracy"], 1),
        }
    ]


def top_feature_rows(result: Mapping[str, Any], limit: int = 40) -> list[dict[str, str]]:
    """The highest-z word types per label, with the counts their z-score comes from."""
    return [
        {
            "label": r["label"],
            "feature": r["feature"],
            "z-score": _fmt(r["z"]),
            "instances with the feature": str(r["n"]),
            "of which with the label": str(r["count"]),
        }
        for r in result["top_features"][:limit]
    ]


# ----------------------------------------------------------------------------------------------------------------------
# figures


def overview_rows(result: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every shortcut tested, for the overview figure: its name, effect in points, 95 % interval (None where the
    diagnostic has none), verdict, for QA the Human reference (the verdict line), and the effect and interval as the
    summary table writes them (``text``)."""
    if result["task"] == "qa":
        return [
            {"name": f"heuristic {r['heuristic']}", "effect": r["prediction_bias"], "interval": None,
             "verdict": verdict.verdict_text(r["flagged"]), "reference": r["human_bias"],
             "text": _fmt(r["prediction_bias"])}
            for r in result["bias"]
        ]
    rows = []
    perm = result["permutation_test"]
    if perm.get("accuracy_gap_points") is not None:
        interval = perm["accuracy_gap_ci_points"]
        rows.append({"name": "lexical cues: ACC(U) − ACC(N)", "effect": perm["accuracy_gap_points"],
                     "interval": interval, "verdict": verdict.verdict_text(perm["flagged"]), "reference": None,
                     "text": f"{_points(perm['accuracy_gap_points'])} {_interval(interval)}"})
    for r in result["insertion"]:
        if _tested(r):
            interval = [100.0 * x for x in r["net_shift_ci"]]
            rows.append({"name": f"{r['feature']} → {r['label']}", "effect": 100.0 * r["net_shift"],
                         "interval": interval, "verdict": verdict.verdict_text(bool(r["flagged"])), "reference": None,
                         "text": f"{_points(100.0 * r['net_shift'])} {_interval(interval)}"})
    return rows


def overview_alt(result: Mapping[str, Any]) -> str:
    """The overview figure in words (the image's alt text)."""
    rows = overview_rows(result)
    if not rows:
        return "No shortcut could be tested."
    parts = []
    for r in rows:
        reference = "" if r["reference"] is None else f" (Human reference {r['reference']:.2f} points)"
        parts.append(f"{r['name']}: {r['text']} points, {r['verdict']}{reference}")
    return f"The effect in points of each of the {len(rows)} shortcuts tested: " + "; ".join(parts) + "."


@figure_function
def overview_figure(result: Mapping[str, Any]) -> str:
    """Every shortcut tested, one row each: its effect in points (QA: the prediction bias in EM points; classification:
    an inserted feature's net shift, the accuracy gap ACC(U) − ACC(N)) with its 95 % interval, the verdict line (0, no
    effect; QA: each heuristic's Human reference), coloured and marked by verdict, the numbers beside each row. An
    inline SVG."""
    import matplotlib
    from matplotlib.figure import Figure

    rows = overview_rows(result)
    qa = result["task"] == "qa"
    with matplotlib.rc_context({"svg.hashsalt": "spurious-audit-overview", "svg.fonttype": "path", "font.size": 9}):
        fig = Figure(figsize=(10.0, 1.9 + 0.3 * max(len(rows), 1)), layout="constrained")
        ax = fig.subplots()
        against = " against the Human reference" if any(r["reference"] is not None for r in rows) else ""
        ax.set_title(f"Every heuristic tested: prediction bias{against}, by verdict" if qa else
                     "Every shortcut tested: effect with its 95 % interval, by verdict")
        if not rows:
            explain_empty(ax, "no shortcut could be tested: no feature could be inserted into any example, and the "
                          "usual- or the unusual-label set is empty", fontsize=9)
            return svg_text(fig)
        y = list(range(len(rows)))
        ax.axvline(0.0, color="0.55", linestyle="--", linewidth=0.9, label="0: no effect", zorder=1)
        for name, (colour, marker, face) in VERDICT_STYLE.items():
            mine = [(i, r) for i, r in enumerate(rows) if r["verdict"] == name]
            if not mine:
                continue
            xerr = [[r["effect"] - r["interval"][0] if r["interval"] else 0.0 for _, r in mine],
                    [r["interval"][1] - r["effect"] if r["interval"] else 0.0 for _, r in mine]]
            ax.errorbar([r["effect"] for _, r in mine], [i for i, _ in mine], xerr=None if qa else xerr,
                        fmt=marker, color=colour, markerfacecolor=face, markersize=6, capsize=3, linewidth=1.2,
                        label=name, zorder=3)
        references = [(i, r["reference"]) for i, r in enumerate(rows) if r["reference"] is not None]
        if references:
            ax.scatter([v for _, v in references], [i for i, _ in references], marker="|", s=260, linewidths=2,
                       color="#2166ac", label="Human reference (the verdict line)", zorder=2)
        ax.set_yticks(y, [r["name"] for r in rows])
        ax.set_ylim(len(rows) - 0.5, -0.5)
        numbers = ax.secondary_yaxis("right")
        numbers.set_yticks(y, [r["text"] for r in rows])
        numbers.tick_params(length=0)
        ax.set_xlabel("prediction bias (EM points)" if qa else
                      "effect (points): net shift of the predictions to the label; accuracy gap ACC(U) − ACC(N)")
        ax.grid(axis="x", linewidth=0.3, alpha=0.6)
        fig.legend(loc="outside lower center", ncols=4, frameon=False)
        return svg_text(fig)


@figure_function
def qa_figure(result: Mapping[str, Any]) -> str:
    """Prediction bias per heuristic, the model beside the Human reference (as the paper's Figure 2); a heuristic
    without a threshold says so at its bar, and a figure without any says why (the search's reason)."""
    from matplotlib.figure import Figure

    from spurious.thinktwice.report import no_threshold_text

    rows = result["bias"]
    fig = Figure(figsize=(7, 3.2), layout="constrained")
    ax = fig.subplots()
    x = range(len(rows))
    found = [r.get("threshold") is not None or r.get("found", False) for r in rows]
    ax.bar([i - 0.2 for i in x], [r["prediction_bias"] for r in rows], width=0.4, label="model")
    if any(r["human_bias"] is not None for r in rows):
        ax.bar([i + 0.2 for i in x], [r["human_bias"] or 0.0 for r in rows], width=0.4, label="Human")
    ax.set_xticks(list(x), [r["heuristic"] for r in rows])
    ax.set_ylabel("prediction bias (EM points)")
    if not any(found):
        searches = result.get("model_bias") or {}
        settings = result.get("bias_settings", {})
        reasons = dict.fromkeys(no_threshold_text({**settings, **searches.get(r["heuristic"], {})}) for r in rows)
        explain_empty(ax, "; ".join(reasons) + f" (every heuristic: {', '.join(r['heuristic'] for r in rows)})")
    else:
        for i, ok in enumerate(found):
            if not ok:
                ax.text(i - 0.2, 0, "no threshold", rotation=90, ha="center", va="bottom", fontsize=7, color="0.3")
        fig.legend(loc="outside right upper", frameon=False)
    return svg_text(fig)


@figure_function
def insertion_figure(result: Mapping[str, Any]) -> str:
    """Flip rate towards the associated label per inserted feature, with 95 % intervals."""
    from matplotlib.figure import Figure

    rows = [r for r in result["insertion"] if not _missing(r.get("flip_rate"))]
    fig = Figure(figsize=(8, 0.35 * len(rows) + 1.4), layout="constrained")
    ax = fig.subplots()
    if not rows:
        features = ", ".join(dict.fromkeys(str(r["feature"]) for r in result["insertion"]))
        explain_empty(ax, f"no flip rate: no example was applicable to the inserted features ({features})")
        return svg_text(fig)
    y = list(range(len(rows)))
    rates = [100.0 * r["flip_rate"] for r in rows]
    errors = [[100.0 * (r["flip_rate"] - r["flip_rate_ci"][0]) for r in rows],
              [100.0 * (r["flip_rate_ci"][1] - r["flip_rate"]) for r in rows]]
    colors = [VERDICT_STYLE[verdict.verdict_text(bool(r["flagged"]))][0] for r in rows]
    ax.barh(y, rates, xerr=errors, color=colors, edgecolor=colors, linewidth=0.8)  # a rate of 0: a line at 0
    ax.set_yticks(y, [f"{r['feature']} → {r['label']}" for r in rows])
    ax.set_xlabel("flip rate (%) of the examples not already predicted the label")
    # the layout gives the panel its width (the feature names take the rest): wrap the label to it
    fig.draw_without_rendering()
    width_in = ax.get_position().width * fig.get_figwidth()
    ax.set_xlabel(fill(ax.get_xlabel(), width_in, ax.xaxis.label.get_fontsize()))
    ax.invert_yaxis()
    return svg_text(fig)


@figure_function
def permutation_figure(result: Mapping[str, Any]) -> str:
    """Accuracy on the usual- and unusual-label instances (their counts under the bars); an empty set says so at its
    bar."""
    from matplotlib.figure import Figure

    perm = result["permutation_test"]
    fig = Figure(figsize=(4, 3), layout="constrained")
    ax = fig.subplots()
    accuracies = [perm["acc_usual"], perm["acc_unusual"]]
    ax.bar([f"usual label U\n({perm['n_usual']})", f"unusual label N\n({perm['n_unusual']})"],
           [math.nan if _missing(a) else 100.0 * a for a in accuracies], color=["tab:blue", "tab:orange"])
    for x, value in enumerate(accuracies):
        if _missing(value):  # the set is empty: no accuracy
            ax.text(x, 5, "no instances", ha="center", va="bottom", fontsize=8, color="0.3")
    ax.set_xlim(-0.6, 1.6)  # both slots, even when one bar is missing
    ax.set_ylim(0, 100)
    ax.set_ylabel("accuracy (% of the instances)")
    return svg_text(fig)


# ----------------------------------------------------------------------------------------------------------------------
# the page


STYLE = """
body { font-family: system-ui, sans-serif; max-width: 72rem; margin: 2rem auto; padding: 0 1rem; color: #222; }
.table-box { overflow-x: auto; max-width: 100%; margin: 1rem 0; }
table { border-collapse: collapse; font-size: 0.9rem; }
th, td { border: 1px solid #ccc; padding: 0.3rem 0.5rem; text-align: left; vertical-align: top; }
th { background: #f2f2f2; }
td.number { text-align: right; white-space: nowrap; }
figure { margin: 1rem 0; } figure svg, figure img { max-width: 100%; height: auto; } \
#figure-overview img { width: 100%; }
figcaption, .note { color: #444; font-size: 0.9rem; }
.meta { color: #555; font-size: 0.85rem; }
"""


_NUMBER = re.compile(r"^(?:[+-]?\d+(?:\.\d+)?(?:e[+-]\d+)?|\[[^\]]+\]|\d+ of \d+|10\^-?\d+(?:\.\d+)?)$")


def _is_number(text: str) -> bool:
    """A number, an interval ``[a, b]``, a count ``k of n`` or a power of ten: right-aligned in its column."""
    return bool(_NUMBER.match(text))


def _table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str], table_id: str) -> str:
    """A table in a box that scrolls sideways when the table is wider than the page (the page itself never does);
    a column of numbers is right-aligned."""
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    cells = [[_fmt(r.get(c), 3) for c in columns] for r in rows]
    numeric = [all(_is_number(row[k]) or row[k] == NA for row in cells) for k in range(len(columns))]
    body = []
    for row in cells:
        body.append("<tr>" + "".join(
            f"<td class='number'>{html.escape(c)}</td>" if numeric[k] else f"<td>{html.escape(c)}</td>"
            for k, c in enumerate(row)) + "</tr>")
    return (f'<div class="table-box" id="{table_id}-box"><table id="{table_id}"><thead><tr>{head}</tr></thead>'
            f"<tbody>{''.join(body)}</tbody></table></div>")


def _overview(result: Mapping[str, Any]) -> str:
    svg = overview_figure(result)
    source = "data:image/svg+xml;base64," + base64.b64encode(svg.encode("utf-8")).decode("ascii")
    if result["task"] == "qa":
        caption = ("The prediction bias of each heuristic in EM points (Think Twice): a heuristic takes the shortcut "
                   "when its bias is above 0 and above the Human reference's (the blue mark, the verdict line; "
                   "without it, above 0). The prediction bias has no interval of its own: it is the gap between the "
                   "two segments' bootstrapped 95 % EM intervals.")
    else:
        caption = ("Each inserted feature's net shift: the share of the examples predicted its associated label after "
                   "the insertion minus before, in percentage points; and the lexical cues' accuracy gap ACC(U) − "
                   "ACC(N) in accuracy points. The bars are 95 % intervals (Newcombe's score intervals for paired and "
                   "for independent proportions), not adjusted for the number of features; the verdicts come from the "
                   "tests (the exact binomial test, Holm-adjusted, and the exact permutation test), so an interval can "
                   "miss 0 while the adjusted test finds no evidence. The dashed line at 0 is no effect.")
    return (f"<figure id='figure-overview'><img src='{source}' alt='{html.escape(overview_alt(result), quote=True)}'>"
            f"<figcaption>{html.escape(caption)}</figcaption></figure>")


def render_html(result: Mapping[str, Any], record: Mapping[str, Any] | None = None) -> str:
    """The report page; ``record`` (``spurious.core.provenance``: what wrote it) in its footer."""
    title = f"spurious audit: {html.escape(str(result['model']['id']))}"
    parts = [f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
             "<meta name='viewport' content='width=device-width, initial-scale=1'>"
             f"<title>{title}</title><style>{STYLE}</style></head><body><h1>{title}</h1>"]
    parts.append(
        f"<p class='meta'>task {result['task']}; data {html.escape(str(result['data']['id']))} "
        f"({result['n_examples']} examples, chosen: {html.escape(result['data']['why'])}); spurious "
        f"{html.escape(result['version'])}</p>"
    )
    parts.append(_overview(result))
    parts.append("<h2>Summary</h2>")
    parts.append("<p class='note'>Effects in points: QA the prediction bias in EM points; classification an inserted "
                 "feature's net shift in percentage points of the examples and the accuracy gap in accuracy points. "
                 "Every rate names its denominator.</p>")
    columns = QA_SUMMARY_COLUMNS if result["task"] == "qa" else SUMMARY_COLUMNS
    parts.append(_table(result["summary"], columns, "summary"))
    rule = result.get("verdict_rule") or (
        verdict.rule_record("qa", **result["bias_settings"]) if result["task"] == "qa"
        else verdict.rule_record("classification", alpha=result["alpha"])
    )
    parts.append("<section id='verdict-rule'><h2>How the verdicts and effect classes are decided</h2>")
    parts.append(f"<p id='rule-verdict'><strong>Verdict rule.</strong> {html.escape(rule['verdict'])}</p>")
    parts.append(f"<p id='rule-effect'><strong>Effect-size classes.</strong> "
                 f"{html.escape(rule['effect_size']['rule'])}</p>")
    parts.append(_table(verdict.effect_classes_table(), ["class", "effect in points"], "effect-classes"))
    parts.append("</section>")
    parts.append("<h2>Settings</h2>")
    parts.append(_table(settings_rows(result), ["setting", "value"], "settings"))
    figures = []
    if result["task"] == "qa":
        parts.append(f"<h2>Accuracy</h2><p id='accuracy'>EM {result['em']:.2f} and F1 {result['f1']:.2f} (points) on "
                     f"{result['n_examples']} questions (official SQuAD v1.1 script)</p>")
        parts.append(f"<h2>Prediction bias per heuristic</h2><p>Human reference: "
                     f"{html.escape(result['human_reference'])}</p>")
        rows = bias_rows(result)
        parts.append(_table(rows, list(rows[0]) if rows else ["heuristic"], "bias"))
        figures.append(("figure-bias", qa_figure(result), "Prediction bias per heuristic (model and Human)"))
    else:
        correct = round(result["accuracy"] * result["n_examples"])
        parts.append(f"<h2>Accuracy</h2><p id='accuracy'>{correct} of {result['n_examples']} examples correct "
                     f"({_share(correct, result['n_examples'])}; labels matched "
                     f"{html.escape(str(result['label_mapping']))})</p>")
        parts.append("<h2>Permutation test (Stubborn Lexical Bias)</h2>")
        rows = permutation_rows(result)
        parts.append(_table(rows, list(rows[0]), "permutation"))
        figures.append(("figure-permutation", permutation_figure(result), "Accuracy on usual vs unusual label"))
        parts.append("<h2>Feature-insertion test</h2>")
        rows = insertion_rows(result)
        parts.append(_table(rows, list(rows[0]) if rows else ["feature"], "insertion"))
        figures.append(("figure-insertion", insertion_figure(result), "Flip rate per inserted feature, with its 95 % "
                        "Clopper–Pearson interval (red: takes the shortcut)"))
        if pred := result.get("predictability"):
            parts.append("<h2>Training data: AFLite predictability</h2>")
            if pred.get("computed"):
                rows = predictability_rows(pred)
                parts.append(_table(rows, list(rows[0]), "predictability"))
            else:
                parts.append(f"<p>Not computed: {html.escape(pred['reason'])}.</p>")
        parts.append("<h2>Top lexical features per label</h2>")
        rows = top_feature_rows(result)
        parts.append(_table(rows, list(rows[0]) if rows else ["label", "feature"], "top-features"))
    for fig_id, svg, caption in figures:
        parts.append(f"<figure id='{fig_id}'>{svg}<figcaption>{html.escape(caption)}</figcaption></figure>")
    if record is not None:
        parts.append(provenance.footer_html(record))
    parts.append("</body></html>")
    return "\n".join(parts)


def audit_record(result: Mapping[str, Any]) -> dict[str, Any]:
    """What wrote an audit (``spurious.core.provenance``): the environment, the model's and the data's revisions."""
    record = provenance.page_record()
    data = str(result.get("data", {}).get("id", ""))
    revisions = provenance.hub_revisions([str(result["model"]["id"])], [data] if data else [])
    return record | revisions


def write_audit(result: dict[str, Any], out_dir: str | os.PathLike) -> tuple[Path, Path]:
    """Write ``audit.json`` and ``report.html`` into ``out_dir``, the two together: both are written to temporary
    names and renamed only when both exist, so a failure (a figure that cannot be drawn, a full disk) leaves the
    previous pair whole. What wrote them (``audit_record``) is in the page's footer and in
    ``audit.provenance.json`` beside them, never in ``audit.json``."""
    from spurious.core.io import atomic_paths, json_text

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    result = dict(result, summary=summary_rows(result))
    data = json_text(result)
    record = audit_record(result)
    page = render_html(result, record)
    json_path, html_path = out / "audit.json", out / "report.html"
    with atomic_paths(json_path, html_path) as (json_tmp, html_tmp):
        json_tmp.write_text(data, encoding="utf-8")
        html_tmp.write_text(page, encoding="utf-8")
    provenance.write(record, provenance.record_path(json_path))
    return json_path, html_path
