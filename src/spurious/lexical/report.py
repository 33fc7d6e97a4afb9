"""Tables 1-3, App. A.1 and Figure 2 of "Stubborn Lexical Bias in Data and Models" (Serrano, Dodge, Smith 2023).

Every table is written as CSV (numbers) and Markdown (formatted), with the paper's published values beside ours for
datasets whose ``paper_name`` is set. The paper's values are transcribed from its text
(``shared/papers/004_a761b58523a6f606.txt``): Table 1 (Err of unigram features), Table 2 (permutation-test
p-values), Table 3 (Err of 200 sampled bigrams) and the SNLI lists of App. A.1.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from spurious.core.figures import figure_function, save_figure
from spurious.core.tables import fixed_decimals

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
        ["outside", "outdoors", "person", "near", "people", "animal", "human", "humans", "least", "someone", "moving", "instrument", "something", "animals", "sport", "together", "wet", "touching", "vehicle", "things", "theres", "clothes", "multiple", "picture", "proximity", "interacting", "physical", "using", "activity", "canine", "music", "active", "musical", "object", "wears", "motion", "consuming", "clothed", "clothing", "mammals", "working", "objects", "present", "kid", "holding", "affection", "holds", "close", "instruments", "sitted"]
    ),
    "contradiction": tuple(
        ["sleeping", "nobody", "cat", "eating", "sitting", "tv", "alone", "swimming", "asleep", "inside", "bed", "couch", "cats", "naked", "driving", "home", "empty", "eats", "car", "nothing", "running", "watching", "woman", "movie", "basketball", "nap", "television", "pool", "sleep", "anything", "moon", "beach", "man", "quietly", "laying", "room", "frowning", "sleeps", "riding", "flying", "sits", "napping", "crying", "house", "desert", "dancing", "bench", "theater", "indoors", "pizza"]
    ),
    "neutral": tuple(
        ["friends", "tall", "trying", "waiting", "new", "sad", "owner", "first", "competition", "going", "favorite", "friend", "winning", "vacation", "get", "date", "birthday", "wife", "work", "brothers", "ready", "party", "mother", "family", "sisters", "championship", "win", "husband", "time", "fun", "siblings", "getting", "fetch", "parents", "tired", "school", "father", "best", "money", "day", "married", "son", "competing", "way", "wants", "professional", "trip", "likes", "show", "got"]
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
        "reweighting q (features: types in at least min_count training instances and in every label). Lower is "
        "better. " + _err_caption(err_target)
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
                "accuracy": float(np.mean([accuracy.get((dataset, model, weighting, r["seed"]), np.nan) for r in runs])),
                "ACC(U)": float(np.mean([r["acc_usual"] for r in runs])),
                "ACC(N)": float(np.mean([r["acc_unusual"] for r in runs])),
                "|U|": runs[0]["n_usual"],
                "|N|": runs[0]["n_unusual"],
                "features in test": runs[0]["n_features_present"],
                f"log10 p{PAPER_SUFFIX}": ", ".join(fixed_decimals(paper_log10(p), 1) for p in paper) if paper else None,
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


@figure_function
def figure2(balances: Mapping[str, pd.DataFrame], png_path: str | os.PathLike, svg_path: str | os.PathLike) -> None:
    """Label balance of each evaluation feature under uniform weights (x) and under q (y), one panel per dataset.
    Points under the diagonal are features q balances better; those above it are labelled (the paper labels them)."""
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    with matplotlib.rc_context({"svg.hashsalt": "lexical-figure2", "svg.fonttype": "path", "font.size": 8}):
        n = max(1, len(balances))
        fig = Figure(figsize=(3.6 * n, 3.4))
        FigureCanvasAgg(fig)
        for k, (dataset, df) in enumerate(balances.items()):
            ax = fig.add_subplot(1, n, k + 1)
            top = float(max(df["balance_uniform"].max(), df["balance_q"].max(), 1e-3)) * 1.05 if len(df) else 1.0
            ax.plot([0, top], [0, top], color="0.6", lw=0.8, ls="--", label="no change")
            ax.scatter(df["balance_uniform"], df["balance_q"], s=10, alpha=0.75, color="tab:blue")
            worse = df[df["balance_q"] > df["balance_uniform"] + 1e-12]
            # points often coincide (rare, single-label types): one label per point, naming up to three features;
            # the points q worsens most are labelled
            worse = worse.assign(change=worse["balance_q"] - worse["balance_uniform"])
            groups = worse.groupby(["balance_uniform", "balance_q"], sort=False)["feature"].apply(list)
            order = worse.groupby(["balance_uniform", "balance_q"], sort=False)["change"].max().sort_values(ascending=False)
            for x, y in order.index[:6]:
                names = [str(f) for f in groups[(x, y)]]
                text = ", ".join(names[:3]) + (f" +{len(names) - 3}" if len(names) > 3 else "")
                ax.annotate(text, (x, y), fontsize=6, xytext=(3, 2), textcoords="offset points")
            better = int((df["balance_q"] < df["balance_uniform"]).sum())
            ax.set_title(f"{dataset}: q better for {better} of {len(df)} features")
            ax.set_xlabel("label balance, uniform weights")
            ax.set_ylabel("label balance, q")
            ax.set_xlim(0, top)
            ax.set_ylim(0, top)
        fig.tight_layout()
        save_figure(fig, png_path, svg_path)
