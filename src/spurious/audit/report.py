"""The audit's files: ``audit.json`` (every number) and ``report.html`` (one self-contained page: the summary table
first, the verdict rule and the effect-size classes in words (:mod:`spurious.audit.verdict`), the settings as a
key / value table, then each diagnostic's table and figure, figures inlined as SVG)."""

from __future__ import annotations

import hashlib
import html
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from spurious.audit import verdict
from spurious.core.figures import figure_function, svg_text

SUMMARY_COLUMNS = ("shortcut", "evidence", "effect size", "effect class", "interval / p", "verdict")


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


def _fmt(x: Any, digits: int = 2) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    if isinstance(x, float):
        return f"{x:.{digits}f}"
    return str(x)


def _p(p: float | None) -> str:
    if p is None or (isinstance(p, float) and math.isnan(p)):
        return "–"
    return f"{p:.1e}" if p < 1e-3 else f"{p:.3f}"


def summary_rows(result: Mapping[str, Any]) -> list[dict[str, str]]:
    """One row per candidate shortcut: what it is, the evidence, effect size, interval or p-value, and the verdict."""
    rows = []
    if result["task"] == "qa":
        for r in result["bias"]:
            human = "no Human reference" if r["human_bias"] is None else f"Human {r['human_bias']:.2f}"
            rows.append(
                {
                    "shortcut": f"heuristic {r['heuristic']}",
                    "evidence": "prediction bias (bootstrapped EM intervals of the two segments, Think Twice Alg. 1)",
                    "effect size": f"{r['prediction_bias']:.2f} EM points ({r['biased_group'] or 'no'} segment better)",
                    "effect class": _class(verdict.effect_class(r["prediction_bias"])),
                    "interval / p": f"threshold {_fmt(r['threshold'], 3)}; {human}",
                    "verdict": verdict.verdict_text(r["flagged"]),
                }
            )
        return rows
    perm = result["permutation_test"]
    gap = verdict.accuracy_gap_points(perm["acc_usual"], perm["acc_unusual"])
    rows.append(
        {
            "shortcut": f"lexical cues (top {len(result['top_features'])} z-score types, {perm['features_from']})",
            "evidence": "exact permutation test, usual vs unusual label (Stubborn Lexical Bias)",
            "effect size": f"ACC(U) {_fmt(perm['acc_usual'], 3)} vs ACC(N) {_fmt(perm['acc_unusual'], 3)} "
            f"(gap {_fmt(gap)} points)",
            "effect class": _class(verdict.effect_class(gap)),
            "interval / p": f"p = 10^{perm['log10_p']:.1f}",
            "verdict": verdict.verdict_text(verdict.permutation_flagged(perm["log10_p"], result["alpha"])),
        }
    )
    pred = result.get("predictability")
    if pred and pred.get("computed"):
        rows.append(
            {
                "shortcut": "training data a linear probe solves (AFLite)",
                "evidence": f"{pred['m']} logistic-regression probes on the model's representations, {pred['t']} "
                "training instances each, scored held out",
                "effect size": f"{pred['share_predictable']:.1%} of {pred['n_scored']} instances with predictability "
                f"≥ {pred['tau']}",
                "effect class": "not classified (descriptive)",
                "interval / p": f"probe accuracy {pred['probe_accuracy']:.3f}",
                "verdict": verdict.DESCRIPTIVE,
            }
        )
    for r in result["insertion"]:
        if r.get("p") is None or (isinstance(r.get("p"), float) and math.isnan(r["p"])):
            continue
        low, high = r["flip_rate_ci"]
        rows.append(
            {
                "shortcut": f"inserted {r['feature']} → {r['label']}",
                "evidence": f"feature-insertion test on {r['n_applicable']} examples ({r['segment']})",
                "effect size": f"flip rate {r['flip_rate']:.3f} (net shift {r['net_shift']:+.3f}, "
                f"{100 * r['net_shift']:+.2f} points)",
                "effect class": _class(verdict.effect_class(100.0 * r["net_shift"])),
                "interval / p": f"95 % CI [{low:.3f}, {high:.3f}]; p = {_p(r['p'])} (Holm {_p(r['p_holm'])})",
                "verdict": verdict.verdict_text(bool(r["flagged"])),
            }
        )
    return rows


def _class(name: str | None) -> str:
    return name or "–"


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


def _table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str], table_id: str) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(_fmt(r.get(c), 3))}</td>" for c in columns) + "</tr>" for r in rows
    )
    return f'<table id="{table_id}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _svg(fig: Any) -> str:
    import matplotlib.pyplot as plt

    text = svg_text(fig)
    plt.close(fig)
    return text


@figure_function
def qa_figure(result: Mapping[str, Any]) -> str:
    """Prediction bias per heuristic, the model beside the Human reference (as the paper's Figure 2); a heuristic
    without a threshold says so at its bar, and a figure without any says why (the search's reason)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from spurious.core.figures import explain_empty
    from spurious.thinktwice.report import no_threshold_text

    rows = result["bias"]
    fig, ax = plt.subplots(figsize=(7, 3.2), layout="constrained")
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
    return _svg(fig)


@figure_function
def insertion_figure(result: Mapping[str, Any]) -> str:
    """Flip rate towards the associated label per inserted feature, with 95 % intervals."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from spurious.core.figures import explain_empty, fill

    rows = [r for r in result["insertion"] if r.get("flip_rate") is not None and not math.isnan(r["flip_rate"])]
    fig, ax = plt.subplots(figsize=(7, 0.35 * len(rows) + 1.2), layout="constrained")
    if not rows:
        features = ", ".join(dict.fromkeys(str(r["feature"]) for r in result["insertion"]))
        explain_empty(ax, f"no flip rate: no example was applicable to the inserted features ({features})")
        return _svg(fig)
    y = list(range(len(rows)))
    rates = [r["flip_rate"] for r in rows]
    errors = [[r["flip_rate"] - r["flip_rate_ci"][0] for r in rows], [r["flip_rate_ci"][1] - r["flip_rate"] for r in rows]]
    colors = ["tab:red" if r["flagged"] else "tab:gray" for r in rows]
    ax.barh(y, rates, xerr=errors, color=colors, edgecolor=colors, linewidth=0.8)  # a rate of 0: a line at 0
    ax.set_yticks(y, [f"{r['feature']} → {r['label']}" for r in rows])
    ax.set_xlabel("share of examples not predicted the label that flip to it (red: flagged)")
    fig.canvas.draw()  # the layout gives the panel its width (the feature names take the rest): wrap the label to it
    width_in = ax.get_position().width * fig.get_figwidth()
    ax.set_xlabel(fill(ax.get_xlabel(), width_in, ax.xaxis.label.get_fontsize()))
    ax.invert_yaxis()
    return _svg(fig)


@figure_function
def permutation_figure(result: Mapping[str, Any]) -> str:
    """Accuracy on the usual- and unusual-label instances; an empty set says so at its bar."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    perm = result["permutation_test"]
    fig, ax = plt.subplots(figsize=(4, 3), layout="constrained")
    accuracies = [perm["acc_usual"], perm["acc_unusual"]]
    ax.bar(["usual label U", "unusual label N"], accuracies, color=["tab:blue", "tab:orange"])
    for x, value in enumerate(accuracies):
        if value is None or math.isnan(value):  # the set is empty: no accuracy
            ax.text(x, 0.05, "no instances", ha="center", va="bottom", fontsize=8, color="0.3")
    ax.set_xlim(-0.6, 1.6)  # both slots, even when one bar is missing
    ax.set_ylim(0, 1)
    ax.set_ylabel("accuracy")
    return _svg(fig)


STYLE = """
body { font-family: system-ui, sans-serif; max-width: 72rem; margin: 2rem auto; padding: 0 1rem; color: #222; }
table { border-collapse: collapse; margin: 1rem 0; font-size: 0.9rem; }
th, td { border: 1px solid #ccc; padding: 0.3rem 0.5rem; text-align: left; vertical-align: top; }
th { background: #f2f2f2; }
figure { margin: 1rem 0; } figure svg { max-width: 100%; height: auto; }
.meta { color: #555; font-size: 0.85rem; }
"""


def render_html(result: Mapping[str, Any]) -> str:
    """The report page."""
    title = f"spurious audit: {html.escape(str(result['model']['id']))}"
    parts = [f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{title}</title>",
             f"<style>{STYLE}</style></head><body><h1>{title}</h1>"]
    parts.append(
        f"<p class='meta'>task {result['task']}; data {html.escape(str(result['data']['id']))} "
        f"({result['n_examples']} examples, chosen: {html.escape(result['data']['why'])}); spurious "
        f"{html.escape(result['version'])}</p>"
    )
    parts.append("<h2>Summary</h2>")
    parts.append(_table(result["summary"], SUMMARY_COLUMNS, "summary"))
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
        parts.append(f"<h2>Accuracy</h2><p>EM {result['em']:.2f}, F1 {result['f1']:.2f} (official SQuAD v1.1 script)</p>")
        parts.append(f"<h2>Prediction bias per heuristic</h2><p>Human reference: "
                     f"{html.escape(result['human_reference'])}</p>")
        parts.append(_table(result["bias"], ["heuristic", "prediction_bias", "threshold", "biased_group", "human_bias",
                                             "flagged", "effect_size_class"], "bias"))
        figures.append(("figure-bias", qa_figure(result), "Prediction bias per heuristic (model and Human)"))
    else:
        parts.append(f"<h2>Accuracy</h2><p>{result['accuracy']:.4f} on {result['n_examples']} examples "
                     f"(labels matched {result['label_mapping']})</p>")
        perm = result["permutation_test"]
        parts.append("<h2>Permutation test (Stubborn Lexical Bias)</h2>")
        parts.append(_table([perm], ["n_usual", "acc_usual", "n_unusual", "acc_unusual", "accuracy_gap_points",
                                     "log10_p", "flagged", "effect_size_class", "features_from"], "permutation"))
        figures.append(("figure-permutation", permutation_figure(result), "Accuracy on usual vs unusual label"))
        parts.append("<h2>Feature-insertion test</h2>")
        parts.append(_table(result["insertion"], ["feature", "label", "n_applicable", "flips_towards", "flips_away",
                                                  "flip_rate", "net_shift", "p", "p_holm", "flagged",
                                                  "effect_size_class"], "insertion"))
        figures.append(("figure-insertion", insertion_figure(result), "Flip rate per inserted feature"))
        if pred := result.get("predictability"):
            parts.append("<h2>Training data: AFLite predictability</h2>")
            if pred.get("computed"):
                parts.append(_table([pred], ["representation", "m", "t", "tau", "n_scored", "share_predictable",
                                             "probe_accuracy"], "predictability"))
            else:
                parts.append(f"<p>Not computed: {html.escape(pred['reason'])}.</p>")
        parts.append("<h2>Top lexical features per label</h2>")
        parts.append(_table(result["top_features"][:40], ["label", "feature", "z", "n"], "top-features"))
    for fig_id, svg, caption in figures:
        parts.append(f"<figure id='{fig_id}'>{svg}<figcaption>{html.escape(caption)}</figcaption></figure>")
    parts.append("</body></html>")
    return "\n".join(parts)


def write_audit(result: dict[str, Any], out_dir: str | os.PathLike) -> tuple[Path, Path]:
    """Write ``audit.json`` and ``report.html`` into ``out_dir`` (each to a temporary name, then renamed)."""
    from spurious.core.io import atomic_path, write_json

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    result = dict(result, summary=summary_rows(result))
    write_json(result, out / "audit.json")
    page = render_html(result)
    with atomic_path(out / "report.html") as tmp:
        Path(tmp).write_text(page, encoding="utf-8")
    return out / "audit.json", out / "report.html"
