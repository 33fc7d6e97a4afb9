"""The training objectives that core.train.qa.train_qa calls per batch: LearnedMixin+H and Confidence Regularization
over stored per-window logits.

An objective works in two parts, so that a training step never waits for the GPU: ``batch_inputs(feature_index,
batch)`` on the host, per micro-batch, before the batch moves to the device (the stored logits of its windows laid out
like the batch, and the checks of its positions and masks, free on host tensors), and ``forward(start_logits,
end_logits, hidden_states, batch)`` on the device, with those inputs in ``batch`` (tensors in, tensors out).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch
from torch import Tensor, nn

from spurious.thinktwice.debias.losses import (
    ENTROPY_ON,
    GATE_INPUTS,
    Compat,
    LearnedMixinGate,
    TokenGate,
    _check_compat,
    _check_positions,
    _check_scale,
    _resolve_mask,
    check_span_mask,
    confidence_regularization_loss,
    learned_mixin_h_loss,
)


def _check_logit_store(name: str, array: np.ndarray) -> None:
    if array.ndim != 3 or array.shape[1] != 2:
        raise ValueError(f"{name} must have shape [N_features, 2, L], got {array.shape}")


def _gather_logits(array: np.ndarray, feature_index: np.ndarray, attention_mask: Tensor) -> tuple[Tensor, Tensor]:
    """The stored start and end logits of this batch's features laid out like the batch (host tensors, float32).

    Stored rows hold each window's logits from position 0, zeros after it (``spurious.core.train.logits``). Batches are
    padded to their own width W (that of the host ``attention_mask``): on the right (BERT-like tokenizers) the first W
    stored columns line up; with left padding (a row whose first position is padding) each row is shifted by its
    padding, as the collated batch is.
    """
    from spurious.core.train.logits import align_to_batch

    mask = attention_mask.numpy()
    width = mask.shape[1]
    idx = np.asarray(feature_index)
    if len(idx) != mask.shape[0]:
        raise ValueError(f"feature_index selects {len(idx)} rows for a batch of {mask.shape[0]}")
    if (mask[:, 0] == 0).any():
        rows = align_to_batch(array, idx, mask, pad_on_right=False)
    else:
        if width > array.shape[2]:
            raise ValueError(f"the batch is {width} tokens wide but the stored logits only {array.shape[2]}")
        rows = np.asarray(array[idx], dtype=np.float32)[:, :, :width]
    tensor = torch.from_numpy(np.ascontiguousarray(rows))
    return tensor[:, 0], tensor[:, 1]


def _reads_padding(compat: Compat, mask_non_context: bool) -> bool:
    """Whether a loss's softmaxes run over every position of the padded batch (the authors' code): it then reads the
    model's outputs at padding tokens, which packed windows (``attention: packed``) do not compute, so ``train_qa``
    refuses to pack it."""
    return compat == "isbiased" or not mask_non_context


def _batch_masks(batch: Mapping[str, Tensor]) -> tuple[Tensor, Tensor]:
    """``(valid_mask, question_mask)`` from the masks that the training loop adds to a batch."""
    missing = [key for key in ("context_mask", "cls_mask", "question_mask") if key not in batch]
    if missing:
        raise KeyError(f"the batch lacks {missing}: the training loop must add context/cls/question masks")
    return batch["context_mask"] | batch["cls_mask"], batch["question_mask"]


def _check_host_batch(batch: Mapping[str, Tensor], valid_mask: Tensor | None, mask_non_context: bool) -> None:
    """The losses' checks of values, made on the host batch (see the module docstring): gold positions within the
    batch and, where the loss masks (``valid_mask``), inside the resolved mask, which has a position in every row."""
    n, width = batch["attention_mask"].shape
    for name in ("start_positions", "end_positions"):
        _check_positions(name, batch[name], n, width)
    if valid_mask is not None:
        mask = _resolve_mask(valid_mask, batch["attention_mask"], mask_non_context)
        check_span_mask(mask, batch["start_positions"], batch["end_positions"])


class LearnedMixinObjective(nn.Module):
    """LMix for the training loop: holds the bias logits and the (trained) gate, computes the loss of a batch.

    The loop adds this module's parameters (the gate) to the optimizer and its ``state_dict`` (the gate only: the
    bias logits are a plain attribute, not a buffer) to checkpoints. ``compat="isbiased"`` uses the per-token gate.
    """

    needs_hidden_states = True

    def __init__(
        self,
        bias_logits: np.ndarray,
        *,
        hidden_size: int,
        entropy_weight: float = 0.4,
        scale: float = 0.2,
        compat: Compat = None,
        mask_non_context: bool = True,
        gate_dim: int = 50,
        entropy_on: str = "bias",
        gate_input: str = "encoder",
    ) -> None:
        super().__init__()
        _check_compat(compat)
        _check_scale(scale)
        if entropy_on not in ENTROPY_ON:
            raise ValueError(f"entropy_on must be one of {ENTROPY_ON}, got {entropy_on!r}")
        if gate_input not in GATE_INPUTS:
            raise ValueError(f"gate_input must be one of {GATE_INPUTS}, got {gate_input!r}")
        self.gate_input = gate_input
        _check_logit_store("bias_logits", bias_logits)
        self.bias_logits = bias_logits
        self.entropy_weight = entropy_weight
        self.entropy_on = entropy_on
        self.scale = scale
        self.compat = compat
        self.mask_non_context = mask_non_context
        self.gate: nn.Module = (
            TokenGate(hidden_size) if compat == "isbiased" else LearnedMixinGate(hidden_size, gate_dim)
        )
        self.reads_padding = _reads_padding(compat, mask_non_context)

    def batch_inputs(self, feature_index: np.ndarray, batch: Mapping[str, Tensor]) -> dict[str, Tensor]:
        """Host part (module docstring): the bias logits of the windows ``feature_index`` (the rows of the training
        features in the collated host ``batch``), and the checks of the batch's positions, masks and gate masks."""
        bias_start, bias_end = _gather_logits(self.bias_logits, feature_index, batch["attention_mask"])
        if self.compat == "isbiased":
            _check_host_batch(batch, None, self.mask_non_context)
        else:
            valid_mask, question_mask = _batch_masks(batch)
            _check_host_batch(batch, valid_mask, self.mask_non_context)
            LearnedMixinGate.check_masks(question_mask, batch["context_mask"])
        return {"bias_start_logits": bias_start, "bias_end_logits": bias_end}

    def forward(
        self, start_logits: Tensor, end_logits: Tensor, hidden_states: Tensor, batch: Mapping[str, Tensor]
    ) -> tuple[Tensor, dict[str, Tensor]]:
        """The loss and its logged values on the device; ``batch`` holds ``batch_inputs``'s tensors."""
        if self.gate_input == "detached":  # the gate learns from the main model's states but cannot reshape them
            hidden_states = hidden_states.detach()
        if self.compat == "isbiased":
            valid_mask, gate = None, self.gate(hidden_states)
        else:
            valid_mask, question_mask = _batch_masks(batch)
            gate = self.gate(hidden_states, question_mask, batch["context_mask"], validate=False)
        return learned_mixin_h_loss(
            start_logits,
            end_logits,
            batch["start_positions"],
            batch["end_positions"],
            batch["bias_start_logits"],
            batch["bias_end_logits"],
            gate,
            valid_mask=valid_mask,
            entropy_weight=self.entropy_weight,
            scale=self.scale,
            compat=self.compat,
            mask_non_context=self.mask_non_context,
            entropy_on=self.entropy_on,
            validate=False,
        )


class ConfidenceRegularizationObjective(nn.Module):
    """CReg for the training loop: holds the teacher and bias logits (plain attributes; no parameters)."""

    needs_hidden_states = False

    def __init__(
        self,
        bias_logits: np.ndarray,
        teacher_logits: np.ndarray,
        *,
        scale: float = 0.2,
        compat: Compat = None,
        mask_non_context: bool = True,
    ) -> None:
        super().__init__()
        _check_compat(compat)
        _check_scale(scale)
        _check_logit_store("bias_logits", bias_logits)
        _check_logit_store("teacher_logits", teacher_logits)
        if bias_logits.shape[0] != teacher_logits.shape[0]:
            raise ValueError(
                f"bias ({bias_logits.shape[0]}) and teacher ({teacher_logits.shape[0]}) logits cover different features"
            )
        self.bias_logits = bias_logits
        self.teacher_logits = teacher_logits
        self.scale = scale
        self.compat = compat
        self.mask_non_context = mask_non_context
        self.reads_padding = _reads_padding(compat, mask_non_context)

    def batch_inputs(self, feature_index: np.ndarray, batch: Mapping[str, Tensor]) -> dict[str, Tensor]:
        """Host part (module docstring): the bias and teacher logits of the windows ``feature_index`` laid out like the
        collated host ``batch``, and the checks of its positions and masks."""
        bias_start, bias_end = _gather_logits(self.bias_logits, feature_index, batch["attention_mask"])
        teacher_start, teacher_end = _gather_logits(self.teacher_logits, feature_index, batch["attention_mask"])
        valid_mask = None if self.compat == "isbiased" else _batch_masks(batch)[0]
        _check_host_batch(batch, valid_mask, self.mask_non_context)
        return {
            "bias_start_logits": bias_start,
            "bias_end_logits": bias_end,
            "teacher_start_logits": teacher_start,
            "teacher_end_logits": teacher_end,
        }

    def forward(
        self, start_logits: Tensor, end_logits: Tensor, hidden_states: Tensor | None, batch: Mapping[str, Tensor]
    ) -> tuple[Tensor, dict[str, Tensor]]:
        """The loss and its logged values on the device; ``batch`` holds ``batch_inputs``'s tensors."""
        valid_mask = None if self.compat == "isbiased" else _batch_masks(batch)[0]
        return confidence_regularization_loss(
            start_logits,
            end_logits,
            batch["start_positions"],
            batch["end_positions"],
            batch["teacher_start_logits"],
            batch["teacher_end_logits"],
            batch["bias_start_logits"],
            batch["bias_end_logits"],
            valid_mask=valid_mask,
            scale=self.scale,
            compat=self.compat,
            mask_non_context=self.mask_non_context,
            validate=False,
        )

