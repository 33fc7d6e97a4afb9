"""QA fine-tuning and prediction settings: the defaults, which keys change a result, their validation."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from spurious.core.compiled import check_setting
from spurious.core.packing import check_attention_setting
from spurious.core.training import (
    fill_settings,
)

logger = logging.getLogger(__name__)

LogFn = Callable[[str], None]

DEFAULT_SETTINGS: dict[str, Any] = {
    # optimisation (paper App. B.1; the rest are HF TrainingArguments defaults)
    "learning_rate": 2e-5,
    "batch_size": 16,
    "gradient_accumulation_steps": 1,
    "epochs": 3,
    "max_steps": None,
    "warmup_ratio": 0.0,
    "weight_decay": 0.0,
    "max_grad_norm": 1.0,
    # featurisation and post-processing (the authors' evaluation, MIR-MU/isbiased)
    "max_length": 384,
    "stride": 128,
    "n_best": 20,
    "max_answer_length": 30,
    "pad_to_max_length": False,
    # batch widths rounded up to this multiple (an execution setting): auto = 64 on CUDA, exact widths on CPU
    # (spurious.core.training.PAD_MULTIPLE_BY_DEVICE)
    "pad_to_multiple_of": "auto",
    # padded, or packed: windows end to end without padding, attention by varlen_attn on CUDA (spurious.core.packing)
    "attention": "padded",
    # training steps and prediction batches through torch.compile (an execution setting): off, on, or auto = on for
    # CUDA runs long enough to repay the compilation (spurious.core.compiled). off until a GPU run has measured
    # compiled training (its losses against eager ones, its speed): auto and on are unmeasured (docs/gpu.md)
    "compile": "off",
    # none, or a tracker the run is logged to, offline (an execution setting; spurious.core.tracking)
    "tracker": "none",
    "group_by_length": False,
    # validation, early stopping, checkpoints
    "eval_every": 200,
    "eval_max_examples": None,
    "eval_batch_size": 64,
    "early_stopping_patience": 10,
    "keep_best": True,
    "checkpoint_every": 200,
    # runtime
    "seed": 0,
    "device": "auto",
    "bf16": "auto",
    "threads": None,
    "log_every": 50,
    # training processes (DDP, spurious.core.engine): the rules set it to the job's GPU count; the global batch
    # (batch_size x gradient_accumulation_steps) stays the same whatever it is
    "processes": 1,
}
# Seed of the validation subset (eval_max_examples): fixed, so every model and seed is compared on the same questions.
EVAL_SUBSET_SEED = 0


def resolve_settings(settings: Mapping[str, Any] | None) -> dict[str, Any]:
    """Fill in defaults; reject unknown keys (a typo would otherwise silently fall back to a default)."""
    resolved = fill_settings(settings, DEFAULT_SETTINGS, _NULLABLE, "QA")
    check_attention_setting(resolved["attention"], "QA")
    if resolved["stride"] >= resolved["max_length"]:
        raise ValueError(f"stride ({resolved['stride']}) must be smaller than max_length ({resolved['max_length']})")
    resolved["compile"] = check_setting(resolved["compile"])
    return resolved


_NULLABLE = frozenset(
    {"max_steps", "eval_every", "eval_max_examples", "early_stopping_patience", "threads", "max_grad_norm"}
)


