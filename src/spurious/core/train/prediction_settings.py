"""The training settings a trained classifier's predictions read, declared once for the three classification papers
(AFLite, SpuriousBench, Stubborn Lexical Bias).

Their predict rules take these keys of a model's training settings as params (``rules/common.smk``), so that a change
to one of them is seen by the rule, and their adapters pass the same keys to
:func:`spurious.core.train.classifier.predict_classifier` through :func:`classifier_prediction_arguments`. Importing
this module imports nothing heavy: the Snakefile does it on every start."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: The training settings a classifier's predictions read (the predict rules' params, compared by content).
CLASSIFIER_PREDICTION_KEYS: tuple[str, ...] = (
    "eval_batch_size",
    "max_length",
    "device",
    "bf16",
    "pad_to_multiple_of",
    "attention",
    "compile",
)
#: The keys whose keyword argument of ``predict_classifier`` has another name; every other key is its own.
_ARGUMENT_NAMES: dict[str, str] = {"eval_batch_size": "batch_size"}


def classifier_prediction_arguments(settings: Mapping[str, Any]) -> dict[str, Any]:
    """The keyword arguments of :func:`spurious.core.train.classifier.predict_classifier` that a predict rule's settings
    param gives: every key of :data:`CLASSIFIER_PREDICTION_KEYS` (``eval_batch_size`` as ``batch_size``). A missing
    key raises ``KeyError``."""
    return {_ARGUMENT_NAMES.get(key, key): settings[key] for key in CLASSIFIER_PREDICTION_KEYS}
