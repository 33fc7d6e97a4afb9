"""Settings compared by content, and the configuration checks every track shares: which settings change a result
(:func:`result_settings`), a setting's content-only ``repr`` (:func:`canonical`, :class:`RuleSettings`) that the
workflow's rules compare, the error an invalid configuration raises, and a track's classification dataset entry.
Loading and validating a whole config is the workflow's (:mod:`spurious.workflow.config`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

DERIVED_SPLITS = ("train", "validation")

#: Settings that change how a job runs, never what it computes (up to floating-point differences between devices):
#: they are left out of the training fingerprints (a checkpoint stays resumable when they change) and out of the
#: workflow's rerun decisions (:class:`RuleSettings`).
RUNTIME_SETTINGS = frozenset(
    {"device", "bf16", "threads", "log_every", "checkpoint_every", "eval_batch_size", "processes", "gather_memory_mb",
     "pad_to_multiple_of", "compile", "tracker"}
)


#: Result-changing settings added after results existed, with the value that computes what was computed before them.
#: At that value a setting is left out of the result settings (the rerun decisions, checkpoint folders and training
#: fingerprints), so that its arrival reruns no finished job and leaves every checkpoint resumable. ``attention``:
#: packed training has no dropout on the attention probabilities (spurious.core.train.packing), padded is the old path.
#: ``min_count_unit`` (lexical.reweight): instances is how min_count always counted, occurrences the other reading.
NEUTRAL_DEFAULTS: dict[str, Any] = {"attention": "padded", "min_count_unit": "instances"}
_UNSET = object()


def result_settings(settings: Mapping[str, Any]) -> dict[str, Any]:
    """The settings that can change a result: all but :data:`RUNTIME_SETTINGS` and those at their
    :data:`NEUTRAL_DEFAULTS` value (compared by content, :func:`canonical`)."""
    return canonical({
        k: v
        for k, v in settings.items()
        if k not in RUNTIME_SETTINGS and NEUTRAL_DEFAULTS.get(k, _UNSET) != v
    })


def content_repr(value: Any) -> str:
    """``repr(value)`` that depends on its content only: the keys of every mapping in sorted order, and a whole float
    written as the integer it equals (``3.0`` as ``3``: YAML's ``epochs: 3`` and ``epochs: 3.0`` are one setting).
    Lists keep their order, which means something (heuristic names, seeds)."""
    if isinstance(value, Mapping) and not isinstance(value, RuleSettings):
        items = sorted(value.items(), key=lambda item: repr(item[0]))
        return "{" + ", ".join(f"{content_repr(k)}: {content_repr(v)}" for k, v in items) + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(content_repr(v) for v in value) + "]"
    if isinstance(value, float) and value.is_integer():
        return repr(int(value))
    return repr(value)


class ContentDict(dict):
    """A dict whose ``repr`` is :func:`content_repr`'s. Snakemake's params rerun trigger compares the ``repr`` of
    every param of a builtin type, so a param built from the config in the config's key order would rerun its job
    when only the order changed (any YAML round trip); as a ContentDict it reruns when the content does. Its own
    order, which a script may show (a report's rows), stays the config's."""

    def __repr__(self) -> str:
        return content_repr(self)


class ContentList(list):
    """A list whose ``repr`` is :func:`content_repr`'s (mappings in it compared by content, see
    :class:`ContentDict`)."""

    def __repr__(self) -> str:
        return content_repr(self)


class ContentFloat(float):
    """A float whose ``repr`` is :func:`content_repr`'s: ``3.0`` compares as ``3``."""

    def __repr__(self) -> str:
        return content_repr(float(self))


class UnorderedList(list):
    """A list whose order follows the config's mappings only (the runs of a report): its ``repr`` sorts the items'
    :func:`content_repr`, so that reordering the config compares equal."""

    def __repr__(self) -> str:
        return "[" + ", ".join(sorted(content_repr(v) for v in self)) + "]"


def unordered(items: Any) -> UnorderedList:
    """``items`` as a param compared without regard to their order (:class:`UnorderedList`)."""
    return UnorderedList(items)


def canonical(value: Any) -> Any:
    """``value`` as a rule param that Snakemake's params trigger compares by content (:func:`content_repr`): a
    mapping becomes a :class:`ContentDict`, a list or tuple a :class:`ContentList`, a float a
    :class:`ContentFloat`; what is in them, and every other value, is passed unchanged. Every param a rule derives
    from the config goes through it (tests/core/test_rerun.py checks every job of every shipped config)."""
    if isinstance(value, RuleSettings):
        return value
    if isinstance(value, Mapping):
        return ContentDict(value)
    if isinstance(value, list | tuple):
        return ContentList(value)
    if isinstance(value, float) and not isinstance(value, ContentFloat):
        return ContentFloat(value)
    return value


class RuleSettings(Mapping):
    """A rule's settings handed to its script as a Snakemake ``param`` that does not trigger reruns.

    Snakemake's params rerun trigger compares only params of builtin types (``dict`` among them) and skips any other
    object; this read-only mapping is such an object. A rule passes it as ``settings`` and the result-changing part
    (:func:`result_settings`) beside it as a plain dict, which the trigger compares: changing ``device`` or
    ``checkpoint_every`` then reruns nothing, changing ``learning_rate`` reruns the job. Scripts read it like a dict."""

    def __init__(self, settings: Mapping[str, Any]) -> None:
        self._settings = dict(settings)

    def __getitem__(self, key: str) -> Any:
        return self._settings[key]

    def __iter__(self):
        return iter(self._settings)

    def __len__(self) -> int:
        return len(self._settings)

    def __repr__(self) -> str:
        return f"RuleSettings({self._settings!r})"


class ConfigError(ValueError):
    """The configuration is invalid; the message names the key and what is allowed."""


def available_splits(cfg: Mapping[str, Any], dataset: str) -> set[str]:
    """The declared, derived and subset splits of a dataset; none for an undeclared one (reported elsewhere)."""
    ds = cfg["datasets"].get(dataset)
    if ds is None:
        return set()
    names = set(ds["splits"])
    if ds.get("derive"):
        names |= set(DERIVED_SPLITS)
    return names | set(ds.get("subsets", {}))


def classification_dataset_problems(
    cfg: Mapping[str, Any],
    task: Mapping[str, str],
    key: str,
    name: str,
    spec: Mapping[str, Any],
    split_keys: tuple[str, ...],
    track: str,
) -> list[str]:
    """A track's dataset entry ``key``: the dataset is declared, is a classification dataset, and each split named
    under ``split_keys`` (null allowed) exists."""
    if name not in task:
        return [f"config key '{key}': unknown dataset; declared: {sorted(task)}"]
    problems = []
    if task[name] != "classification":
        problems.append(f"config key '{key}': a {task[name]} dataset; {track} needs classification")
    for split in split_keys:
        if spec[split] is not None and spec[split] not in available_splits(cfg, name):
            problems.append(
                f"config key '{key}.{split}': dataset {name!r} has no split {spec[split]!r}; "
                f"available: {sorted(available_splits(cfg, name))}"
            )
    return problems
