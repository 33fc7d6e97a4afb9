"""Training settings: the defaults QA and classification share, in one table, and the resolved settings that every
training and prediction function reads.

A task (``core.train.qa.settings``, ``core.train.classifier``) lists its keys in the order its ``training.json`` records
them and gives its own values for the keys it does not share (:func:`task_defaults`). Its ``resolve_settings`` fills in
the defaults and validates once; the result is a :class:`ResolvedSettings`: a dict that cannot change, which the
training loop, the featurisation and prediction read as they are given (resolving resolved settings of the same task
returns them unchanged). Importing this module imports nothing heavy.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NoReturn

#: The defaults both QA and classification fine-tuning use (paper App. B.1 for QA; otherwise Hugging Face's
#: TrainingArguments defaults), one value each.
SHARED_DEFAULTS: dict[str, Any] = {
    # optimisation
    "learning_rate": 2e-5,
    "gradient_accumulation_steps": 1,
    "epochs": 3,
    "max_steps": None,
    "warmup_ratio": 0.0,
    "weight_decay": 0.0,
    "max_grad_norm": 1.0,
    # batch widths rounded up to this multiple (an execution setting): auto = 64 on CUDA, exact widths on CPU
    # (spurious.core.train.training.PAD_MULTIPLE_BY_DEVICE)
    "pad_to_multiple_of": "auto",
    # padded, or packed: windows or examples end to end without padding, attention by varlen_attn on CUDA
    # (spurious.core.train.packing)
    "attention": "padded",
    # training steps and prediction batches through torch.compile (an execution setting): off, on, or auto = on for
    # CUDA runs long enough to repay the compilation (spurious.core.train.compiled). off until a GPU run has measured
    # compiled training (its losses against eager ones, its speed): auto and on are unmeasured (docs/gpu.md)
    "compile": "off",
    # none, or a tracker the run is logged to, offline (an execution setting; spurious.core.train.tracking)
    "tracker": "none",
    "group_by_length": False,
    "checkpoint_every": 200,
    # runtime
    "seed": 0,
    "device": "auto",
    "bf16": "auto",
    "threads": None,
    "log_every": 50,
    # training processes (DDP, spurious.core.train.engine): the rules set it to the job's GPU count; the global batch
    # (batch_size x gradient_accumulation_steps) stays the same whatever it is
    "processes": 1,
}


def task_defaults(order: Sequence[str], own: Mapping[str, Any]) -> dict[str, Any]:
    """A task's defaults, keyed in ``order``: its ``own`` value for a key it does not share, else the shared one."""
    unknown = [key for key in order if key not in own and key not in SHARED_DEFAULTS]
    unlisted = sorted(set(own) - set(order))
    if unknown or unlisted or len(set(order)) != len(order):
        raise ValueError(f"task defaults: keys without a value {unknown}, values without a key {unlisted}, or a key "
                         "listed twice")
    return {key: own[key] if key in own else SHARED_DEFAULTS[key] for key in order}


def fill_settings(
    settings: Mapping[str, Any] | None, defaults: Mapping[str, Any], nullable: frozenset[str], what: str
) -> dict[str, Any]:
    """``defaults`` updated by ``settings``; unknown keys are rejected (a typo would otherwise silently fall back to a
    default) and None means "the default" except for the ``nullable`` keys, where it is a value."""
    settings = dict(settings or {})
    unknown = sorted(set(settings) - set(defaults))
    if unknown:
        raise ValueError(f"unknown {what} settings {unknown}; known: {sorted(defaults)}")
    return {**defaults, **{k: v for k, v in settings.items() if v is not None or k in nullable}}


class ResolvedSettings(dict):
    """One task's settings, defaults filled in and validated: read like a dict (``s["key"]``, ``dict(s)``, JSON),
    never changed. A change is new settings: ``resolve_settings({**s, "key": value})``."""

    __slots__ = ("task",)

    def __init__(self, values: Mapping[str, Any], task: str) -> None:
        super().__init__(values)
        self.task = task

    def _refuse(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise TypeError(
            f"resolved {self.task} settings are read-only; resolve new ones from a copy ({{**settings, key: value}})"
        )

    __setitem__ = __delitem__ = update = pop = popitem = clear = setdefault = __ior__ = _refuse  # type: ignore[assignment]

    def __reduce__(self) -> tuple[Any, ...]:  # pickling (processes of a DDP run) rebuilds, never sets items
        return (type(self), (dict(self), self.task))

    def __copy__(self) -> ResolvedSettings:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> ResolvedSettings:
        return self
