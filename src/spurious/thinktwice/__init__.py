"""Think Twice (Mikula et al., EACL 2024): the seven bias heuristics, the bootstrapped prediction bias with its
threshold search, the debiasing objectives (ReSam, LearnedMixin+H, Confidence Regularization) and their bias models,
and the paper's tables and figures.

Importing the package registers with :mod:`spurious.core.registry` what the paper adds to core: the model type of its
lexical-overlap bias model (:mod:`spurious.thinktwice.overlap_qa`), ``init="overlap"`` of ``core.train.qa.train_qa``,
which builds that model, and the check of the config's ``debias`` section
(:func:`spurious.thinktwice.config.config_problems`, reported on its own before the datasets' task checks). Each
imports its module (torch, transformers; the heuristics' pandas) only when it is used.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from spurious.core import registry

# overlap_qa.MODEL_TYPE, repeated so that registering does not import torch (a test checks that both agree)
OVERLAP_MODEL_TYPE = "spurious_overlap_qa"


def _register_overlap_model() -> None:
    from spurious.thinktwice import overlap_qa  # noqa: F401  (its import registers the type with the Auto classes)


def _overlap_model(checkpoint: str) -> Any:
    from spurious.thinktwice.overlap_qa import from_checkpoint

    return from_checkpoint(checkpoint)


def _config_problems(cfg: dict[str, Any], task: Mapping[str, str], schema: Mapping[str, Any]) -> list[str]:
    # imported when a config is validated, not when the package is: thinktwice.track imports the heuristics (pandas)
    from spurious.thinktwice.config import config_problems

    return config_problems(cfg, task, schema)


registry.register_model_type(OVERLAP_MODEL_TYPE, _register_overlap_model)
registry.register_qa_init("overlap", _overlap_model)
registry.register_config_check("debias", _config_problems, stage="before_tasks")
