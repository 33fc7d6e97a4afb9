"""Training settings: the defaults QA and classification share, in one table, and the resolved settings that every
training and prediction function reads.

A task (``core.train.qa.settings``, ``core.train.classifier``) lists its keys in the order its ``training.json`` records
them and gives its own values and kinds for the keys it does not share (:func:`task_defaults`, :func:`task_kinds`).
Its ``resolve_settings`` fills in the defaults and validates once; the result is a :class:`ResolvedSettings`: typed
(every key's kind is declared once, here or by its task, and every value is checked against it) and frozen, which the
training loop, the featurisation and prediction read as they are given (resolving resolved settings of the same task
returns them unchanged). Importing this module imports nothing heavy.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple, NoReturn


class Kind(NamedTuple):
    """The values a setting takes: ``name`` says them in an error message, ``test`` accepts one."""

    name: str
    test: Callable[[Any], bool]


NUMBER = Kind("a number", lambda v: isinstance(v, numbers.Real) and not isinstance(v, bool))
WHOLE = Kind("a whole number", lambda v: isinstance(v, numbers.Integral) and not isinstance(v, bool))
FLAG = Kind("true or false", lambda v: isinstance(v, bool))
NULL = Kind("null", lambda v: v is None)


def one_of(*values: str) -> Kind:
    """One of the words ``values``."""
    return Kind(" or ".join(repr(v) for v in values), lambda v: isinstance(v, str) and v in values)


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


#: The kinds of the shared settings (the config schema's ``training`` and ``classification_training`` say the same,
#: a test checks it); a setting may take any of its kinds.
SHARED_KINDS: dict[str, tuple[Kind, ...]] = {
    "learning_rate": (NUMBER,),
    "gradient_accumulation_steps": (WHOLE,),
    "epochs": (NUMBER,),
    "max_steps": (WHOLE, NULL),
    "warmup_ratio": (NUMBER,),
    "weight_decay": (NUMBER,),
    "max_grad_norm": (NUMBER, NULL),
    "pad_to_multiple_of": (one_of("auto"), WHOLE),
    "attention": (one_of("padded", "packed"),),
    "compile": (one_of("off", "auto", "on"), FLAG),  # YAML reads unquoted on/off as true/false
    "tracker": (one_of("none", "tensorboard", "mlflow", "wandb"),),
    "group_by_length": (FLAG,),
    "checkpoint_every": (WHOLE,),
    "seed": (WHOLE,),
    "device": (one_of("auto", "cpu", "cuda"),),
    "bf16": (one_of("auto"), FLAG),
    "threads": (WHOLE, NULL),
    "log_every": (WHOLE,),
    "processes": (WHOLE,),
}


def task_defaults(order: Sequence[str], own: Mapping[str, Any]) -> dict[str, Any]:
    """A task's defaults, keyed in ``order``: its ``own`` value for a key it does not share, else the shared one."""
    unknown = [key for key in order if key not in own and key not in SHARED_DEFAULTS]
    unlisted = sorted(set(own) - set(order))
    if unknown or unlisted or len(set(order)) != len(order):
        raise ValueError(f"task defaults: keys without a value {unknown}, values without a key {unlisted}, or a key "
                         "listed twice")
    return {key: own[key] if key in own else SHARED_DEFAULTS[key] for key in order}


def task_kinds(order: Sequence[str], own: Mapping[str, tuple[Kind, ...]]) -> dict[str, tuple[Kind, ...]]:
    """A task's kinds, keyed in ``order``: its ``own`` kinds for a key it does not share, else the shared ones."""
    missing = [key for key in order if key not in own and key not in SHARED_KINDS]
    if missing or sorted(set(own) - set(order)):
        raise ValueError(f"task kinds: keys without a kind {missing}, or kinds without a key")
    return {key: own[key] if key in own else SHARED_KINDS[key] for key in order}


def check_kinds(values: Mapping[str, Any], kinds: Mapping[str, tuple[Kind, ...]], what: str) -> None:
    """A ValueError naming every setting whose value is none of its kinds (and what it takes)."""
    wrong = [f"{key} must be {' or '.join(k.name for k in kinds[key])}, got {value!r}"
             for key, value in values.items() if not any(k.test(value) for k in kinds[key])]
    if wrong:
        raise ValueError(f"{what} settings: " + "; ".join(wrong))


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
    """One task's settings, defaults filled in and validated, every value of its key's kind (``kinds``: a task's
    :func:`task_kinds`; a value of another kind is a ValueError naming the key): read like a dict (``s["key"]``,
    ``dict(s)``, JSON) or by attribute (``s.learning_rate``), never changed. A change is new settings:
    ``resolve_settings({**s, "key": value})``."""

    __slots__ = ("task",)

    def __init__(self, values: Mapping[str, Any], task: str, kinds: Mapping[str, tuple[Kind, ...]]) -> None:
        if list(values) != list(kinds):
            raise ValueError(f"{task} settings: keys {list(values)} are not the task's {list(kinds)}")
        check_kinds(values, kinds, task)
        super().__init__(values)
        self.task = task

    def __getattr__(self, key: str) -> Any:
        try:
            return self[key]
        except KeyError:
            raise AttributeError(f"{self.task} settings have no {key!r}") from None

    def _refuse(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise TypeError(
            f"resolved {self.task} settings are read-only; resolve new ones from a copy ({{**settings, key: value}})"
        )

    __setitem__ = __delitem__ = update = pop = popitem = clear = setdefault = __ior__ = _refuse  # type: ignore[assignment]

    def __reduce__(self) -> tuple[Any, ...]:  # pickling (processes of a DDP run) rebuilds, never sets items
        return (_rebuild, (dict(self), self.task))

    def __copy__(self) -> ResolvedSettings:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> ResolvedSettings:
        return self


def _rebuild(values: dict[str, Any], task: str) -> ResolvedSettings:
    """Unpickled settings: the values were checked when they were resolved."""
    settings = dict.__new__(ResolvedSettings)
    dict.update(settings, values)
    settings.task = task
    return settings
