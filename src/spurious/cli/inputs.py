"""The CLI's side of a user's input: heuristic and variant arguments, the check of predictions against the data; the
file readers live in :mod:`spurious.core.data.inputs` (the audit uses them too) and are importable from here as
before."""

from __future__ import annotations

import sys
from collections.abc import Sequence

import pandas as pd

from spurious.core.data.inputs import (
    PREDICTION_FORMATS,
    InputError,
    _is_official_squad,
    _read_json_file,
    load_classification_file,
    load_classification_predictions,
    load_data,
    load_predictions,
)

__all__ = [
    "COMPAT_CHOICES",
    "EXIT_USAGE",
    "HEURISTIC_NAMES",
    "PREDICTION_FORMATS",
    "CLIError",
    "_check_predictions",
    "_is_official_squad",
    "_read_json_file",
    "load_classification_file",
    "load_classification_predictions",
    "load_data",
    "load_predictions",
    "parse_heuristics",
    "parse_variants",
]


EXIT_USAGE = 2


# The heuristic names (spurious.thinktwice.heuristics.HEURISTICS); repeated here so that parsing arguments and the error
# messages do not import the heavy module (spaCy, scikit-learn). A test checks that both agree.
HEURISTIC_NAMES: tuple[str, ...] = ("word-dist", "sim-word", "ans-pos", "cos-sim", "ans-len", "sim-ents", "subj-pos")


COMPAT_CHOICES: tuple[str, ...] = ("isbiased",)

#: A user error: reported as one line on stderr, exit status 2. It is the file readers' InputError, so that the CLI
#: reports their errors as its own.
CLIError = InputError


def _check_predictions(frame: pd.DataFrame, predictions: dict[str, str], path: str, allow_missing: bool) -> None:
    """Every question needs an answer (or --allow-missing); predictions for ids outside the data are counted and
    ignored, and a file none of whose ids is in the data (another split's predictions) is an error."""
    ids = frame["id"].astype(str).tolist()
    known = set(ids)
    extra = [i for i in predictions if i not in known]
    if predictions and len(extra) == len(predictions):
        raise CLIError(
            f"none of the {len(predictions)} ids in predictions file {path} is a question of the data file (first "
            f"ids: {', '.join(extra[:5])}); are these predictions for another split or dataset?"
        )
    if extra:
        print(
            f"spurious: warning: {len(extra)} of {len(predictions)} predictions in {path} have ids that are not in "
            f"the data file and are ignored (first ids: {', '.join(extra[:5])})",
            file=sys.stderr,
        )
    missing = [i for i in ids if i not in predictions]
    if not missing:
        return
    if not allow_missing:
        raise CLIError(
            f"predictions file {path} has no answer for {len(missing)} of {len(ids)} questions (first ids: "
            f"{', '.join(missing[:5])}); predict every question of the data file, or pass --allow-missing to score "
            "them 0 like the official script"
        )
    # one line, where the official script prints one per unanswered question
    print(
        f"spurious: {len(missing)} of {len(ids)} questions have no prediction and score 0 (first ids: "
        f"{', '.join(missing[:5])})",
        file=sys.stderr,
    )


def parse_heuristics(text: str | None) -> list[str]:
    """``"word-dist,ans-len"`` → a validated list (all heuristics when ``text`` is None, empty or ``all``)."""
    if text is None or text.strip() in ("", "all"):
        return list(HEURISTIC_NAMES)
    names = [h.strip() for h in text.split(",") if h.strip()]
    unknown = [h for h in names if h not in HEURISTIC_NAMES]
    if unknown:
        raise CLIError(
            f"unknown heuristic(s) {', '.join(unknown)} in --heuristics; choose from {', '.join(HEURISTIC_NAMES)} "
            "(comma-separated)"
        )
    return list(dict.fromkeys(names))


def parse_variants(items: Sequence[str] | None) -> dict[str, str]:
    variants: dict[str, str] = {}
    for item in items or ():
        heuristic, sep, name = item.partition("=")
        if not sep or not heuristic or not name:
            raise CLIError(f"--variant {item!r}: expected HEURISTIC=VARIANT, e.g. word-dist=between")
        variants[heuristic.strip()] = name.strip()
    return variants
