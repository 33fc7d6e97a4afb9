"""Think Twice (Mikula et al., EACL 2024): the seven bias heuristics, the bootstrapped prediction bias with its
threshold search, the debiasing objectives (ReSam, LearnedMixin+H, Confidence Regularization) and their bias models,
and the paper's tables and figures.

Importing the package registers with :mod:`spurious.core.registry` what the paper adds to core: the model type of its
lexical-overlap bias model (:mod:`spurious.thinktwice.overlap_qa`) and ``init="overlap"`` of ``core.qa.train_qa``,
which builds that model. Both import the module (torch, transformers) only when they are used.
"""

from __future__ import annotations

from typing import Any

from spurious.core import registry

# overlap_qa.MODEL_TYPE, repeated so that registering does not import torch (a test checks that both agree)
OVERLAP_MODEL_TYPE = "spurious_overlap_qa"


def _register_overlap_model() -> None:
    from spurious.thinktwice import overlap_qa  # noqa: F401  (its import registers the type with the Auto classes)


def _overlap_model(checkpoint: str) -> Any:
    from spurious.thinktwice.overlap_qa import from_checkpoint

    return from_checkpoint(checkpoint)


registry.register_model_type(OVERLAP_MODEL_TYPE, _register_overlap_model)
registry.register_qa_init("overlap", _overlap_model)
