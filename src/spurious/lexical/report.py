"""Tables 1-3, App. A.1 and Figure 2 of "Stubborn Lexical Bias in Data and Models" (Serrano, Dodge, Smith 2023).

Every table is written as CSV (numbers) and Markdown (formatted), with the paper's published values beside ours for
datasets whose ``paper_name`` is set. The paper's values are transcribed from its text
(Serrano et al. 2023, https://aclanthology.org/2023.findings-acl.516): Table 1 (Err of unigram features), Table 2
(permutation-test p-values), Table 3 (Err of 200 sampled bigrams) and the SNLI lists of App. A.1.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from spurious.core.report.figures import figure_function, save_figure
from spurious.core.report.tables import fixed_decimals

# Table 1: |D|, number of features, |Y|, Err(uniform), Err(q).
PAPER_TABLE1: dict[str, tuple[int, int, int, float, float]] = {
    "SNLI": (549_367, 3866, 3, 0.057, 0.040),
    "MNLI": (392_376, 6854, 3, 0.022, 0.084),
    "QNLI": (104_743, 3770, 2, 0.042, 0.012),
    "QQP": (363_831, 4386, 2, 0.154, 0.047),
}
# Table 2: p-values per seed, as printed ("Approx. 10^-638" for the QQP LSTMs). Rows: (dataset, model kind, weighting)
# with model kind "finetuned" (RoBERTa-large, 3 seeds) or "lstm" (from scratch, 1 seed).
PAPER_TABLE2: dict[tuple[str, str, str], tuple[str, ...]] = {
    ("SNLI", "finetuned", "uniform"): ("1.9e-35", "1.1e-23", "2.2e-23"),
    ("SNLI", "finetuned", "q"): ("1.2e-14", "1.7e-14", "3.2e-14"),
    ("QNLI", "finetuned", "uniform"): ("5.7e-3", "2.4e-2", "5.3e-2"),
    ("QNLI", "finetuned", "q"): ("3.7e-1", "7.6e-1", "2.6e-1"),
    ("QQP", "finetuned", "uniform"): ("2.4e-26", "2.6e-20", "2.3e-17"),
    ("QQP", "finetuned", "q"): ("7.6e-20", "5.9e-7", "1.2e-5"),
    ("SNLI", "lstm", "uniform"): ("5.9e-83",),
    ("SNLI", "lstm", "q"): ("2.0e-75",),
    ("QNLI", "lstm", "uniform"): ("3.1e-61",),
    ("QNLI", "lstm", "q"): ("1.6e-10",),
    ("QQP", "lstm", "uniform"): ("1e-638",),
    ("QQP", "lstm", "q"): ("1e-762",),
}
# Table 3: Err(uniform), Err(q) of 200 sampled bigrams.
PAPER_TABLE3: dict[str, tuple[float, float]] = {"SNLI": (0.059, 0.122), "QNLI": (0.134, 0.173), "QQP": (0.215, 0.224)}
# App. A.1: SNLI's 50 highest-z non-stop-word types per label, in the paper's order.
PAPER_A1_SNLI: dict[str, tuple[str, ...]] = {
    "entailment": tuple(
        ["outside", "outdoors", "person", "near", "people", "animal", "human", "humans", "least", "someone", "moving",
         "instrument", "something", "animals", "sport", "together", "wet", "touching", "vehicle", "things", "theres",
         "clothes", "multiple", "picture", "proximity", "interacting", "physical", "using", "activity", "canine",
         "music", "active", "musical", "object", "wears", "motion", "consuming", "clothed", "clothing", "mammals",
         "working", "objects", "present", "kid", "holding", "affection", "holds", "close", "instruments", "sitted"]
    ),
    "contradiction": tuple(
        ["sleeping", "nobody", "cat", "eating", "sitting", "tv", "alone", "swimming", "asleep", "inside", "bed",
         "couch", "cats", "naked", "driving", "home", "empty", "eats", "car", "nothing", "running", "watching", "woman",
         "movie", "basketball", "nap", "television", "pool", "sleep", "anything", "moon", "beach", "man", "quietly",
         "laying", "room", "frowning", "sleeps", "riding", "flying", "sits", "napping", "crying", "house", "desert",
         "dancing", "bench", "theater", "indoors", "pizza"]
    ),
    "neutral": tuple(
        ["friends", "tall", "trying", "waiting", "new", "sad", "owner", "first", "competition", "going", "favorite",
         "friend", "winning", "vacation", "get", "date", "birthday", "wife", "work", "brothers", "ready", "party",
         "mother", "family", "sisters", "championship", "win", "husband", "time", "fun", "siblings", "getting", "fetch",
         "parents", "tired", "school", "father", "best", "money", "day", "married", "son", "competing", "way", "wants",
         "professional", "trip", "likes", "show", "got"]
    ),
}
PAPER_SUFFIX = " (paper)"


def paper_log10(p: str) -> float:
    """log10 of a p-value as the paper prints it ("1.9e-35", "1e-762"), without underflowing to -inf."""
    mantissa, _, exponent = p.lower().partition("e")
    return math.log10(float(mantissa)) + (int(exponent) if exponent else 0)


ERR_TARGET_WORDS = {"uniform": "1/|Y|", "label_distribution": "the overall label distribution q(y)"}


def _errs(summary: Mapping[str, Any], err_target: str) -> dict[str, float]:
    """Err(uniform) and Err(q) of a reweighting or bigram summary against ``err_target`` (``spurious.lexical.reweight.
    ERR_TARGETS``), and against the other target in columns marked ``[vs <other>]``."""
    if err_target not in ERR_TARGET_WORDS:
        raise ValueError(f"lexical.err_target must be one of {list(ERR_TARGET_WORDS)}, got {err_target!r}")
    formula = {"uniform": summary["err_uniform"], "q": summary["err_q"]}
    caption = summary.get("err_vs_label_distribution") or {"uniform": math.nan, "q": math.nan}
    main, other = (formula, caption) if err_target == "uniform" else (caption, formula)
    tag = "label distribution" if err_target == "uniform" else "1/|Y|"
    return {
        "Err(uniform)": main["uniform"],
        "Err(q)": main["q"],
        f"Err(uniform) [vs {tag}]": other["uniform"],
        f"Err(q) [vs {tag}]": other["q"],
    }


def _err_caption(err_target: str) -> str:
    other = "label_distribution" if err_target == "uniform" else "uniform"
    return (
        f"Err is measured against {ERR_TARGET_WORDS[err_target]} (lexical.err_target: {err_target}); the columns in "
        f"brackets against {ERR_TARGET_WORDS[other]}. The paper's formula says 1/|Y|, its captions the label "
        "distribution; both agree for balanced labels."
    )


def table1(
    summaries: Mapping[str, Mapping[str, Any]], paper_names: Mapping[str, str | None], *, err_target: str = "uniform"
) -> pd.DataFrame:
    """One row per dataset: |D|, features, |Y|, Err(uniform), Err(q) of the reweighting (against ``err_target``,
    the other target in bracketed columns), and the paper's row."""
    rows = []
    for dataset, s in summaries.items():
        paper = PAPER_TABLE1.get(paper_names.get(dataset) or "")
        errs = _errs(s, err_target)
        rows.append(
            {
                "dataset": dataset,
                "|D|": s["n_instances"],
                "features": s["n_features"],
                "|Y|": s["n_labels"],
                "Err(uniform)": errs.pop("Err(uniform)"),
                "Err(q)": errs.pop("Err(q)"),
                **errs,
                "effective size": s["effective_sample_size"],
                "step": s["chosen_step"],
                "converged": s["converged"],
                "steps": s["steps"],
                f"|D|{PAPER_SUFFIX}": paper[0] if paper else None,
                f"features{PAPER_SUFFIX}": paper[1] if paper else None,
                f"Err(uniform){PAPER_SUFFIX}": paper[3] if paper else None,
                f"Err(q){PAPER_SUFFIX}": paper[4] if paper else None,
            }
        )
    df = pd.DataFrame(rows)
    df.attrs["caption"] = (
        "Table 1: Err = mean over features j and labels y of |q(y | F_j=1) − t_y|, for uniform weights and for the "
        "reweighting q (features: types counted at least min_count times in training and present in every label). "
        "Lower is better. q is the iterate (step) of the solve with the lowest Err(q) among those whose effective "
        "sample size 1 / Σ q_i² (effective size) is at least lexical.reweight.min_ess_fraction of |D|; converged and "
        "steps describe the solve. " + _err_caption(err_target)
    )
    return df


def model_kind(init: str) -> str:
    """The paper's Table 2 block of a model: fine-tuned pretrained transformers, or models trained from scratch
    (a randomly initialised transformer, or the paper's BiLSTM over CBOW embeddings)."""
    return "finetuned" if init == "pretrained" else "from scratch"


def table2(
    results: Sequence[Mapping[str, Any]],
    metrics: Sequence[Mapping[str, Any]],
    models: Mapping[str, Mapping[str, Any]],
    paper_names: Mapping[str, str | None],
) -> pd.DataFrame:
    """One row per (dataset, model, weighting): log10 p per seed (the paper's layout), the accuracies on U and N,
    the sizes of U and N, the test accuracy, and the paper's log10 p values for the matching row."""
    accuracy = {(m["dataset"], m["model"], m["weighting"], m["seed"]): m["accuracy"] for m in metrics}
    groups: dict[tuple[str, str, str], list[Mapping[str, Any]]] = {}
    for r in results:
        groups.setdefault((r["dataset"], r["model"], r["weighting"]), []).append(r)
    rows = []
    for (dataset, model, weighting), runs in groups.items():
        runs = sorted(runs, key=lambda r: r["seed"])
        spec = models[model]
        paper_key = (paper_names.get(dataset) or "", spec.get("paper_name") or "", weighting)
        paper = PAPER_TABLE2.get(paper_key)
        rows.append(
            {
                "dataset": dataset,
                "model": model,
                "kind": model_kind(spec["init"]),
                "weighting": weighting,
                "seeds": ", ".join(str(r["seed"]) for r in runs),
                "log10 p": ", ".join(fixed_decimals(r["log10_p"], 1) for r in runs),
                "log10 p (max)": max(r["log10_p"] for r in runs),
                "accuracy": float(
                    np.mean([accuracy.get((dataset, model, weighting, r["seed"]), np.nan) for r in runs])
                ),
                "ACC(U)": float(np.mean([r["acc_usual"] for r in runs])),
                "ACC(N)": float(np.mean([r["acc_unusual"] for r in runs])),
                "|U|": runs[0]["n_usual"],
                "|N|": runs[0]["n_unusual"],
                "features in test": runs[0]["n_features_present"],
                f"log10 p{PAPER_SUFFIX}": (
                    ", ".join(fixed_decimals(paper_log10(p), 1) for p in paper) if paper else None
                ),
            }
        )
    df = pd.DataFrame(rows)
    df.attrs["caption"] = (
        "Table 2: exact one-sided permutation test per seed (log10 p; p = probability that the usual-label test "
        "instances get at least their observed number of correct predictions if the correct predictions were spread "
        "uniformly over the usual and unusual instances). ACC(U), ACC(N) and accuracy: means over seeds. The paper's "
        "finetuned rows are RoBERTa-large (3 seeds), its from-scratch rows 3-layer BiLSTMs (1 seed)."
    )
    return df


def table3(
    bigrams: Mapping[str, Mapping[str, Any]], paper_names: Mapping[str, str | None], *, err_target: str = "uniform"
) -> pd.DataFrame:
    """Err of the sampled bigrams under uniform weights and under the unigram q (the paper: it gets worse), against
    ``err_target`` (the other target in bracketed columns)."""
    rows = []
    for dataset, b in bigrams.items():
        paper = PAPER_TABLE3.get(paper_names.get(dataset) or "")
        errs = _errs(b, err_target)
        rows.append(
            {
                "dataset": dataset,
                "bigrams": b["n_bigrams"],
                "Err(uniform)": errs.pop("Err(uniform)"),
                "Err(q)": errs.pop("Err(q)"),
                **errs,
                f"Err(uniform){PAPER_SUFFIX}": paper[0] if paper else None,
                f"Err(q){PAPER_SUFFIX}": paper[1] if paper else None,
            }
        )
    df = pd.DataFrame(rows)
    df.attrs["caption"] = (
        "Table 3: Err of bigrams sampled (seeded) among those present in at least one training instance of every "
        "label, under uniform weights and under the unigram-derived q. " + _err_caption(err_target)
    )
    return df


def appendix_a1(top: Mapping[str, pd.DataFrame], paper_names: Mapping[str, str | None]) -> pd.DataFrame:
    """The selected types per (dataset, label) in rank order; for SNLI the paper's list and the overlap beside."""
    rows = []
    for dataset, frame in top.items():
        is_snli = (paper_names.get(dataset) or "") == "SNLI"
        for label, group in frame.groupby("label", sort=False):
            ours = group.sort_values("rank")["feature"].astype(str).tolist()
            paper = list(PAPER_A1_SNLI.get(str(label), ())) if is_snli else []
            rows.append(
                {
                    "dataset": dataset,
                    "label": label,
                    "k": len(ours),
                    "types": " ".join(ours),
                    f"types{PAPER_SUFFIX}": " ".join(paper) if paper else None,
                    "overlap with paper": len(set(ours) & set(paper)) if paper else None,
                }
            )
    df = pd.DataFrame(rows)
    df.attrs["caption"] = (
        "App. A.1: per label, the types with the highest z-scores on the training data (stop words excluded), in rank "
        "order; these are the features of the permutation test."
    )
    return df


#: Points closer than this share of the axis range (in x and in y) are drawn as one point of :func:`figure2`.
COINCIDENT = 0.02
#: How many points above the diagonal :func:`figure2` labels per panel (those q worsens most).
LABELLED = 6


def _coincident_groups(df: pd.DataFrame, tolerance: float) -> list[list[int]]:
    """Row positions of ``df`` grouped so that each group's points lie within ``tolerance`` of its first point (in
    x and in y), in the order of the rows."""
    groups: list[list[int]] = []
    anchors: list[tuple[float, float]] = []
    for i, (x, y) in enumerate(zip(df["balance_uniform"], df["balance_q"], strict=True)):
        for group, (ax_, ay) in zip(groups, anchors, strict=True):
            if abs(x - ax_) <= tolerance and abs(y - ay) <= tolerance:
                group.append(i)
                break
        else:
            groups.append([i])
            anchors.append((x, y))
    return groups


def _place_labels(ax: Any, points: list[tuple[float, float, str, float]], renderer: Any) -> list[str]:
    """Annotate each (x, y, text, marker radius in points) beside its point where the label overlaps no placed label,
    no point and stays inside the panel: the first free of eight positions around the point, then farther out.
    Returns the texts that found no place."""
    from matplotlib.transforms import Bbox

    taken: list[Any] = []
    for x, y, _, radius in points:
        cx, cy = ax.transData.transform((x, y))
        r = radius * ax.figure.dpi / 72
        taken.append(Bbox([[cx - r, cy - r], [cx + r, cy + r]]))
    inside = ax.get_window_extent(renderer)
    unplaced = []
    for x, y, text, radius in points:
        placed = False
        for distance in (1.0, 2.5, 4.5):
            d = (radius + 2) * distance
            for dx, dy, ha, va in ((d, d, "left", "bottom"), (d, -d, "left", "top"), (-d, d, "right", "bottom"),
                                   (-d, -d, "right", "top"), (0, d + 2, "center", "bottom"),
                                   (0, -d - 2, "center", "top"), (d + 2, 0, "left", "center"),
                                   (-d - 2, 0, "right", "center")):  # fmt: skip
                label = ax.annotate(text, (x, y), xytext=(dx, dy), textcoords="offset points", ha=ha, va=va,
                                    fontsize=6)
                box = label.get_window_extent(renderer)
                free = all(not box.overlaps(b) for b in taken)
                if free and inside.containsx(box.x0) and inside.containsx(box.x1) and inside.containsy(box.y0) \
                        and inside.containsy(box.y1):
                    taken.append(box)
                    placed = True
                    break
                label.remove()
            if placed:
                break
        if not placed:
            unplaced.append(text)
    return unplaced


@figure_function
def figure2(balances: Mapping[str, pd.DataFrame], png_path: str | os.PathLike, svg_path: str | os.PathLike) -> None:
    """Label balance of each evaluation feature under uniform weights (x) and under q (y), one panel per dataset
    (three per row). Points under the diagonal are features q balances better; the :data:`LABELLED` points above it
    that q worsens most are labelled (the paper labels them) without overlapping each other or leaving the panel
    (a label with no free place is listed under the panel). Features within :data:`COINCIDENT` of each other (rare,
    single-label types often share one balance) are one point whose area grows with their number, and its label
    lists them."""
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D

    from spurious.core.report import figures

    n = max(1, len(balances))
    cols = min(3, n)
    rows = math.ceil(n / cols)
    with matplotlib.rc_context({"svg.hashsalt": "lexical-figure2", "svg.fonttype": "path", "font.size": 8}):
        fig = Figure(figsize=(max(4.6, 4.0 * cols), 3.9 * rows + 0.5), layout="constrained")
        FigureCanvasAgg(fig)
        axes = fig.subplots(rows, cols, squeeze=False).ravel()
        for ax in axes[len(balances) :]:
            ax.set_visible(False)
        pending = []
        for ax, (dataset, df) in zip(axes, balances.items(), strict=False):
            df = df.reset_index(drop=True)
            top = float(max(df["balance_uniform"].max(), df["balance_q"].max(), 1e-3)) * 1.05 if len(df) else 1.0
            ax.plot([0, top], [0, top], color="0.6", lw=0.8, ls="--")
            groups = _coincident_groups(df, COINCIDENT * top)
            sizes = np.array([12.0 * len(g) for g in groups])
            xs = np.array([df.loc[g[0], "balance_uniform"] for g in groups], dtype=float)
            ys = np.array([df.loc[g[0], "balance_q"] for g in groups], dtype=float)
            ax.scatter(xs, ys, s=sizes, alpha=0.75, color="tab:blue", linewidths=0)
            # the points q worsens most, labelled with every feature they hold (up to three, then "+k")
            change = [max(df.loc[g, "balance_q"] - df.loc[g, "balance_uniform"]) for g in groups]
            worse = sorted((k for k, c in enumerate(change) if c > 1e-12), key=lambda k: -change[k])[:LABELLED]
            labels = []
            for k in worse:
                names = [str(df.loc[i, "feature"]) for i in groups[k]]
                text = ", ".join(names[:3]) + (f" +{len(names) - 3}" if len(names) > 3 else "")
                labels.append((xs[k], ys[k], text, math.sqrt(sizes[k] / math.pi)))
            pending.append((ax, labels))
            better = int((df["balance_q"] < df["balance_uniform"]).sum())
            shared = ""
            if len(groups) < len(df):
                shared = f"\n{len(groups)} points: features within {COINCIDENT:.0%} share one"
            ax.set_title(figures.fill(f"{dataset}: q better for {better} of {len(df)} features", 3.6, 8) + shared,
                         fontsize=8)
            ax.set_xlabel("label balance, uniform weights")
            ax.set_ylabel("label balance, q")
            ax.set_xlim(0, top)
            ax.set_ylim(0, top)
            if not len(df):
                figures.explain_empty(ax, "no evaluation features for this dataset")
        handles = [
            Line2D([], [], color="0.6", lw=0.8, ls="--", label="no change (q = uniform)"),
            Line2D([], [], color="tab:blue", alpha=0.75, marker="o", ls="none", label="features (area: how many)"),
        ]
        fig.legend(handles=handles, loc="outside lower center", ncols=2, fontsize=7, frameon=False)
        # fix the layout, then place the labels where they collide with nothing
        with figures.figure_style():
            fig.canvas.draw()
        fig.set_layout_engine("none")
        renderer = fig.canvas.get_renderer()
        for ax, labels in pending:
            unplaced = _place_labels(ax, labels, renderer)
            if unplaced:
                ax.set_xlabel(figures.fill("label balance, uniform weights; also above the diagonal: "
                                           + "; ".join(unplaced), 3.6, 8))
        save_figure(fig, png_path, svg_path)
