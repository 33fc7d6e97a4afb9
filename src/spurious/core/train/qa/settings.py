"""QA fine-tuning and prediction settings: the defaults, which keys change a result, their validation."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from spurious.core.train.compiled import check_setting
from spurious.core.train.packing import check_attention_setting
from spurious.core.train.settings import (
    FLAG,
    NULL,
    WHOLE,
    ResolvedSettings,
    fill_settings,
    task_defaults,
    task_kinds,
)

logger = logging.getLogger(__name__)

LogFn = Callable[[str], None]

# the order training.json records them in
_ORDER = ("learning_rate", "batch_size", "gradient_accumulation_steps", "epochs", "max_steps", "warmup_ratio",
     "weight_decay", "max_grad_norm", "max_length", "stride", "n_best", "max_answer_length", "pad_to_max_length",
     "pad_to_multiple_of", "attention", "compile", "tracker", "group_by_length", "eval_every", "eval_max_examples",
     "eval_batch_size", "early_stopping_patience", "keep_best", "checkpoint_every", "seed", "device", "bf16",
     "threads", "log_every", "processes")
DEFAULT_SETTINGS: dict[str, Any] = task_defaults(
    _ORDER,
    {
        "batch_size": 16,  # paper App. B.1
        # featurisation and post-processing (the authors' evaluation, MIR-MU/isbiased)
        "max_length": 384,
        "stride": 128,
        "n_best": 20,
        "max_answer_length": 30,
        "pad_to_max_length": False,
        # validation, early stopping, checkpoints
        "eval_every": 200,
        "eval_max_examples": None,
        "eval_batch_size": 64,
        "early_stopping_patience": 10,
        "keep_best": True,
    },
)
KINDS = task_kinds(
    _ORDER,
    {
        "batch_size": (WHOLE,),
        "max_length": (WHOLE,),
        "stride": (WHOLE,),
        "n_best": (WHOLE,),
        "max_answer_length": (WHOLE,),
        "pad_to_max_length": (FLAG,),
        "eval_every": (WHOLE, NULL),
        "eval_max_examples": (WHOLE, NULL),
        "eval_batch_size": (WHOLE,),
        "early_stopping_patience": (WHOLE, NULL),
        "keep_best": (FLAG,),
    },
)
# Seed of the validation subset (eval_max_examples): fixed, so every model and seed is compared on the same questions.
EVAL_SUBSET_SEED = 0


def resolve_settings(settings: Mapping[str, Any] | None) -> ResolvedSettings:
    """Fill in defaults; reject unknown keys (a typo would otherwise silently fall back to a default). Resolved QA
    settings are returned as they are: resolved once, passed down unchanged."""
    if isinstance(settings, ResolvedSettings) and settings.task == "QA":
        return settings
    resolved = fill_settings(settings, DEFAULT_SETTINGS, _NULLABLE, "QA")
    check_attention_setting(resolved["attention"], "QA")
    if resolved["stride"] >= resolved["max_length"]:
        raise ValueError(f"stride ({resolved['stride']}) must be smaller than max_length ({resolved['max_length']})")
    resolved["compile"] = check_setting(resolved["compile"])
    return ResolvedSettings(resolved, "QA", KINDS)


_NULLABLE = frozenset(
    {"max_steps", "eval_every", "eval_max_examples", "early_stopping_patience", "threads", "max_grad_norm"}
)


