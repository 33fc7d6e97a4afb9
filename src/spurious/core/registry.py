"""What the papers add to core, registered by each paper package's ``__init__``.

``core`` imports no paper. A paper that adds a model type, a way to start QA training or checks of its config section
registers them here, and ``spurious/__init__.py`` imports the four paper packages (``spurious.papers.load_papers``),
so whatever imports a part of ``spurious`` (the Snakefile, the ``spurious`` command, a workflow adapter, a test) has
them all before it loads a model or validates a config. What a paper registers are functions that import its heavy
modules (torch, transformers, pandas) only when called, so registering costs nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

#: ``check(cfg, task, schema) -> problems``: ``cfg`` is the whole config after schema validation (a check may fill in
#: defaults that depend on other keys), ``task`` maps each dataset to ``qa`` or ``classification``, ``schema`` is the
#: loaded config schema (with its ``$defs``, for a check that validates a merged part against one, as Think Twice's
#: debiasing stages' training settings); one line per problem, naming the config key.
ConfigCheck = Callable[[dict[str, Any], Mapping[str, str], Mapping[str, Any]], list[str]]
#: When ``validate_config`` runs a registered check, after the schema and the cross-references between sections:
#: ``before_tasks`` checks first, each reporting its problems on its own (the ConfigError comes before any later check
#: runs); then the datasets' task checks and the ``with_tasks`` checks, whose problems are reported together. Within a
#: stage the checks run in registration order (``load_papers``' import order), which is the order of the report.
CONFIG_CHECK_STAGES = ("before_tasks", "with_tasks")
#: ``build(checkpoint) -> model``: a QA model (the ``AutoModelForQuestionAnswering`` interface) built from a checkpoint.
QAInit = Callable[[str], Any]

_model_types: dict[str, Callable[[], None]] = {}
_model_types_loaded: set[str] = set()
_qa_inits: dict[str, QAInit] = {}
_config_checks: dict[str, ConfigCheck] = {}
_config_check_stages: dict[str, str] = {}


def _add(table: dict[str, Any], kind: str, name: str, value: Any) -> None:
    # Two papers claiming one name would silently shadow each other; the same function again is harmless.
    if table.get(name, value) is not value:
        raise ValueError(f"{kind} {name!r} is already registered ({table[name]!r})")
    table[name] = value


def register_model_type(model_type: str, register: Callable[[], None]) -> None:
    """``register()`` makes the transformers ``model_type`` loadable with the Auto classes (it imports the module
    that calls ``AutoConfig.register``); core runs it before it loads any model or config."""
    _add(_model_types, "model type", model_type, register)


def load_model_types() -> None:
    """Run every registered model type's ``register()`` once (``core.models`` calls this before loading)."""
    for model_type, register in list(_model_types.items()):
        if model_type not in _model_types_loaded:
            register()
            _model_types_loaded.add(model_type)


def model_types() -> tuple[str, ...]:
    """The registered model types, in registration order."""
    return tuple(_model_types)


def register_qa_init(name: str, build: QAInit) -> None:
    """``train_qa(..., init=name)`` starts from ``build(checkpoint)`` instead of the checkpoint's weights."""
    _add(_qa_inits, "QA init", name, build)


def qa_init(name: str) -> QAInit | None:
    """The registered builder of ``init=name``; None when no paper registered it."""
    return _qa_inits.get(name)


def qa_inits() -> tuple[str, ...]:
    """The registered init names, in registration order."""
    return tuple(_qa_inits)


def register_config_check(section: str, check: ConfigCheck, stage: str = "with_tasks") -> None:
    """``validate_config`` runs ``check`` on every config (once per ``section``, the config key the paper owns), at
    ``stage`` (:data:`CONFIG_CHECK_STAGES`)."""
    if stage not in CONFIG_CHECK_STAGES:
        raise ValueError(f"config check {section!r}: unknown stage {stage!r}; known: {', '.join(CONFIG_CHECK_STAGES)}")
    if _config_check_stages.get(section, stage) != stage:
        raise ValueError(f"config check {section!r} is already registered at stage {_config_check_stages[section]!r}")
    _add(_config_checks, "config check", section, check)
    _config_check_stages[section] = stage


def config_checks(stage: str | None = None) -> Mapping[str, ConfigCheck]:
    """The registered config checks by section, in registration order (read-only); only those of ``stage`` when it
    is given."""
    if stage is None:
        return MappingProxyType(_config_checks)
    if stage not in CONFIG_CHECK_STAGES:
        raise ValueError(f"unknown config check stage {stage!r}; known: {', '.join(CONFIG_CHECK_STAGES)}")
    return MappingProxyType({s: check for s, check in _config_checks.items() if _config_check_stages[s] == stage})
