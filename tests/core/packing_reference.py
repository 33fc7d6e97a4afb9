"""The packed path on any device, for the tests that compare it with padding: :func:`use_reference` switches a model
to spurious.core.train.packing's block-diagonal reference, which ``packing.enable`` picks only through
``SPURIOUS_PACKED_REFERENCE`` (and after its device and precision checks)."""

from __future__ import annotations

import torch

from spurious.core.train import packing


def use_reference(model: torch.nn.Module, *, any_precision: bool = False) -> None:
    """Switch ``model`` (a transformers model, or a module holding one) to the block-diagonal reference, whatever the
    device (``any_precision``: in float32 too, which the kernel and the default reference refuse)."""
    packing.register()
    implementation = packing.REFERENCE_ANY_PRECISION if any_precision else packing.REFERENCE_ATTENTION
    packing._transformer(model).set_attn_implementation(implementation)
