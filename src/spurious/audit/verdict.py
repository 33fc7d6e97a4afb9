"""The audit's verdict rules and effect-size classes, stated once: the code that decides a verdict calls the
functions here, the report prints the texts (:func:`rule_texts`) and ``audit.json`` stores them (``verdict_rule``).

A verdict says whether a diagnostic found the shortcut (QA: beyond the Human reference; classification: beyond
chance at ``alpha``); the effect-size class says how large the effect is, so that "takes the shortcut" with a
negligible effect can be told from a large one. Classes, of an effect in points (QA: the prediction bias in EM
points; classification: the accuracy gap ACC(U) − ACC(N) in accuracy points and an inserted feature's net shift in
percentage points of the examples):

* ``none``: 0 or below (no effect in the shortcut's direction; QA: no threshold found);
* ``negligible``: above 0 and below :data:`NEGLIGIBLE_BELOW` (1 point);
* ``small``: from 1 point to below :data:`LARGE_FROM` (5 points);
* ``large``: 5 points or more.

Why 1 and 5 (checked against :mod:`spurious.thinktwice.paper_values` in ``tests/audit/test_verdict.py``): in Think
Twice's Figure 2 the Human reference's prediction bias is below 1 EM point on six of the seven heuristics (at most
0.74; ans-len 13.55), so a bias under 1 point is within what human annotators show; the four encoder models' biases
are 0–3.25 points on five heuristics and 4.81–12.51 on ans-len and word-dist, the paper's two largest, and 5 points
separates the two groups (all but RoBERTa-large's word-dist, 4.81). Classification uses the same scale in points of
its accuracy measures, so one class means one size across the report.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

#: Effect-size cut-offs in points: below NEGLIGIBLE_BELOW (and above 0) negligible; from LARGE_FROM on large.
NEGLIGIBLE_BELOW = 1.0
LARGE_FROM = 5.0
#: The classes, smallest first.
EFFECT_CLASSES: tuple[str, ...] = ("none", "negligible", "small", "large")

TAKES = "takes the shortcut"
NO_EVIDENCE = "no evidence"
DESCRIPTIVE = "descriptive (no test)"


def effect_class(points: float | None) -> str | None:
    """The class of an effect of ``points`` points (module docstring); ``None`` for a missing or NaN effect. The
    value is rounded to 9 decimals first, so that e.g. a net shift of 7 in 100 examples (7.000000000000001 points in
    floating point) is classed as the 7 it is."""
    if points is None or (isinstance(points, float) and math.isnan(points)):
        return None
    p = round(float(points), 9)
    if p <= 0:
        return "none"
    if p < NEGLIGIBLE_BELOW:
        return "negligible"
    if p < LARGE_FROM:
        return "small"
    return "large"


def qa_flagged(prediction_bias: float, human_bias: float | None) -> bool:
    """QA: a positive prediction bias larger than the Human reference's (or any positive one without it)."""
    return bool(prediction_bias > 0 and (human_bias is None or prediction_bias > human_bias))


def permutation_flagged(log10_p: float, alpha: float) -> bool:
    """Classification, lexical cues: the permutation test's p below ``alpha``."""
    return bool(log10_p < math.log10(alpha))


def verdict_text(flagged: bool) -> str:
    return TAKES if flagged else NO_EVIDENCE


def accuracy_gap_points(acc_usual: float | None, acc_unusual: float | None) -> float | None:
    """ACC(U) − ACC(N) in accuracy points; ``None`` when either set is empty (NaN accuracy)."""
    if acc_usual is None or acc_unusual is None or math.isnan(acc_usual) or math.isnan(acc_unusual):
        return None
    return 100.0 * (acc_usual - acc_unusual)


def qa_rule(settings: Mapping[str, Any]) -> str:
    """The QA verdict rule in words, with the search settings it ran with."""
    draw = "with" if settings.get("with_replacement") else "without"
    ss = settings["sample_size"]
    return (
        f"A heuristic gets “{TAKES}” when both hold: (1) the model's prediction bias is above 0, i.e. the threshold "
        f"search (Think Twice, Algorithm 1) found a threshold at which both segments hold at least {ss} questions and "
        "the two segments' 95 % intervals of exact match do not overlap, each interval being the 2.5 % and 97.5 % "
        f"quantiles of the EM of {settings['iterations']} random samples of {ss} questions drawn from the segment "
        f"{draw} replacement (seed {settings['seed']}); the prediction bias is the gap between the two intervals in "
        "EM points, 0 when no threshold qualifies; and (2) it is larger than the Human reference's prediction bias "
        "for the same heuristic on the same questions and settings (three annotators as models, each scored against "
        "the other two, the smallest of their three biases). Where the Human reference is not computed, (1) alone "
        f"decides. Any other heuristic gets “{NO_EVIDENCE}”. No p-value is computed: the non-overlap of the two "
        "bootstrap intervals is the test, and the many thresholds searched are not corrected for. A verdict of "
        f"“{NO_EVIDENCE}” with a large effect means the model's bias is real but not larger than the annotators'."
    )


def classification_rule(alpha: float) -> str:
    """The classification verdict rules in words, at significance level ``alpha``."""
    return (
        f"Lexical cues: “{TAKES}” when the exact one-sided permutation test (hypergeometric) of ACC(U) > ACC(N), "
        "the model's accuracy on the instances holding a top-z word type of their own gold label (usual, U) against "
        f"those holding one of another label (unusual, N; an instance can be in both), gives p < {alpha:g}. "
        f"Inserted features: “{TAKES}” when the exact "
        "two-sided binomial test (McNemar's exact test) of the predictions flipping towards against away from the "
        "feature's associated label (its p multiplied by the number of labels when there are more than two), "
        f"Holm-adjusted across the features tested, is below {alpha:g}. Otherwise “{NO_EVIDENCE}”. AFLite's "
        "predictability of the training data is descriptive: no test, no verdict, no effect class."
    )


EFFECT_MEASURES = {
    "qa": "the prediction bias in EM points",
    "classification": "the accuracy gap ACC(U) − ACC(N) in accuracy points; for an inserted feature its net shift "
    "in percentage points of the examples",
}


def effect_rule(task: str) -> str:
    """The effect-size classes and their cut-offs in words, with the task's effect measures."""
    lo, hi = f"{NEGLIGIBLE_BELOW:g}", f"{LARGE_FROM:g}"
    none = "no threshold found" if task == "qa" else "no shift towards the label, or U no better than N"
    return (
        f"The class of each effect, {EFFECT_MEASURES[task]}: none at 0 or below ({none}); "
        f"negligible above 0 and below {lo} point; small from {lo} to below {hi} points; large from {hi} points on. "
        f"Why these cut-offs: in Think Twice's Figure 2 the Human reference's prediction bias is below {lo} EM point "
        "on six of the seven heuristics (at most 0.74; ans-len 13.55), so a bias under 1 point is within what human "
        "annotators show; the four encoder models' biases are 0–3.25 points on five heuristics and 4.81–12.51 on "
        f"ans-len and word-dist, the paper's two largest, and {hi} points separates the two groups (all but "
        "RoBERTa-large's word-dist, 4.81). "
        + ("" if task == "qa" else "The classification audit uses the same cut-offs in points of its accuracy "
           "measures, so that a class means one size across audits. ")
        + "The class describes the size only; the verdict says whether the effect is there beyond "
        + ("the Human reference." if task == "qa" else "chance.")
    )


def effect_classes_table() -> list[dict[str, str]]:
    """The classes with their ranges, for the report's table."""
    lo, hi = f"{NEGLIGIBLE_BELOW:g}", f"{LARGE_FROM:g}"
    return [
        {"class": "none", "effect in points": "≤ 0"},
        {"class": "negligible", "effect in points": f"> 0 and < {lo}"},
        {"class": "small", "effect in points": f"≥ {lo} and < {hi}"},
        {"class": "large", "effect in points": f"≥ {hi}"},
    ]


def rule_record(task: str, **settings: Any) -> dict[str, Any]:
    """What ``audit.json`` stores as ``verdict_rule``: the verdict rule and the effect-size classes, in words and
    as numbers. ``settings``: QA the search settings (sample_size, iterations, seed, with_replacement); classification
    ``alpha``."""
    text = qa_rule(settings) if task == "qa" else classification_rule(settings["alpha"])
    return {
        "verdict": text,
        "effect_size": {
            "measure": EFFECT_MEASURES[task],
            "unit": "points",
            "classes": list(EFFECT_CLASSES),
            "negligible_below": NEGLIGIBLE_BELOW,
            "large_from": LARGE_FROM,
            "rule": effect_rule(task),
        },
    }
