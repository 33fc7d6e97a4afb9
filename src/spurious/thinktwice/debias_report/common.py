"""Constants and helpers shared by the debiasing report's tables and figures (see the package docstring)."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from spurious.thinktwice import paper_values, track

ORIGINAL = "original"
CONTROL = track.CONTROL
DEBIASING_METHODS: tuple[str, ...] = track.DEBIAS_METHODS
METHOD_LABELS: dict[str, str] = {ORIGINAL: "Original", CONTROL: "Plain", **{m.name: m.label for m in track.METHODS}}
#: Table 1's column suffixes, so that no cell can be read as the other kind: absolute scores (the Original and Plain
#: rows) under ``"<dataset> score"``, differences in points under ``"<dataset> Δ vs plain"`` (each debiased model minus
#: its matched plain control) and ``"<dataset> Δ vs original"`` (minus the original model; the Plain row too).
SCORE = " score"
VS_CONTROL = " Δ vs plain"
VS_ORIGINAL = " Δ vs original"
#: Our method → the paper's row name in ``paper_values.BIAS_METHODS*`` / ``TABLE1``.
PAPER_METHODS: dict[str, str] = {"original": "None", "resam": "ReSam", "lmix": "LMix", "creg": "CReg"}
AVERAGE = "average"
METRICS: tuple[tuple[str, str], ...] = (("EM", "em"), ("F1", "f1"))
QUANTILES: tuple[float, float] = (0.025, 0.975)
N_A = "n/a"

#: Normalised dataset names (lower case, letters and digits only) → the paper's dataset names.
_PAPER_DATASET_ALIASES: dict[str, str] = {
    "adversarialqa": "AdversarialQA",
    "adversarial": "AdversarialQA",
    "advqa": "AdversarialQA",
    "adv": "AdversarialQA",
    "nq": "NaturalQuestions",
    "naturalquestions": "NaturalQuestions",
    "triviaqa": "TriviaQA",
    "trivia": "TriviaQA",
}


# ----------------------------------------------------------------------------------------------------------------------
# helpers


def paper_dataset_name(name: str) -> str | None:
    """The paper's name of our dataset ``name`` ("nq" → "NaturalQuestions"), or None when the paper has none."""
    key = re.sub(r"[^a-z0-9]", "", str(name).casefold())
    return _PAPER_DATASET_ALIASES.get(key)


def _method_of(record: Mapping[str, Any]) -> str:
    """The record's method, lower case; a record without one is an original (non-debiased) model."""
    method = record.get("method")
    return ORIGINAL if method in (None, "", "none", "None") else str(method).casefold()


def _label(method: str) -> str:
    return METHOD_LABELS.get(method, "Human" if method == "human" else method)


def _check_paper_name(paper_name: str | None) -> bool:
    """True when paper values are asked for; the paper's debiasing results exist for BERT-Base only."""
    if paper_name is None:
        return False
    try:
        name = paper_values.canonical_run_name(paper_name)
    except KeyError as exc:
        raise ValueError(str(exc.args[0])) from exc
    if name != paper_values.TABLE1_MODEL:
        raise ValueError(
            f"the paper reports debiasing results for {paper_values.TABLE1_MODEL} only, not for {paper_name!r}"
        )
    return True


def _mean(values: Iterable[float]) -> float:
    vals = [v for v in values if not math.isnan(v)]
    return float(np.mean(vals)) if vals else math.nan


def _round(value: float, digits: int = 2) -> float:
    return round(value, digits) if not math.isnan(value) else math.nan


def _count_text(counts: Iterable[int]) -> int | str:
    """One count as an int, several distinct ones as "1/3" (e.g. seeds per averaged row)."""
    distinct = sorted(set(counts))
    if len(distinct) == 1:
        return distinct[0]
    return "/".join(str(c) for c in distinct)


def _ordered_unique(values: Iterable[Any]) -> list[Any]:
    out: list[Any] = []
    for v in values:
        if v not in out:
            out.append(v)
    return out


def _method_order(methods: Iterable[str]) -> list[str]:
    present = set(methods)
    known = [m for m in (ORIGINAL, CONTROL, *DEBIASING_METHODS, "human") if m in present]
    return known + sorted(present - set(known))


def _rc(salt: str) -> dict[str, Any]:
    return {"svg.hashsalt": salt, "svg.fonttype": "path", "font.size": 8}

