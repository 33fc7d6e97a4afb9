"""The training objectives that core.qa.train_qa calls per batch: LearnedMixin+H and Confidence Regularization over stored per-window logits."""

from __future__ import annotations

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
    _check_scale,
    confidence_regularization_loss,
    learned_mixin_h_loss,
)


def _check_logit_store(name: str, array: np.ndarray) -> None:
    if array.ndim != 3 or array.shape[1] != 2:
        raise ValueError(f"{name} must have shape [N_features, 2, L], got {array.shape}")


def _gather_logits(
    array: np.ndarray, feature_index: np.ndarray, like: Tensor, attention_mask: Tensor | None = None
) -> tuple[Tensor, Tensor]:
    """The stored start and end logits of this batch's features laid out like the batch, on ``like``'s device.

    Stored rows hold each window's logits from position 0, zeros after it (``spurious.core.logits``). Batches are padded
    to their own width W: on the right (BERT-like tokenizers) the first W stored columns line up; with left padding
    (a row whose first position is padding) each row is shifted by its padding, as the collated batch is.
    """
    from spurious.core.logits import align_to_batch

    width = like.shape[1]
    idx = np.asarray(feature_index)
    if len(idx) != like.shape[0]:
        raise ValueError(f"feature_index selects {len(idx)} rows for a batch of {like.shape[0]}")
    if attention_mask is not None and bool((attention_mask[:, 0] == 0).any()):
        rows = align_to_batch(array, idx, attention_mask, pad_on_right=False)
    else:
        if width > array.shape[2]:
            raise ValueError(f"the batch is {width} tokens wide but the stored logits only {array.shape[2]}")
        rows = np.asarray(array[idx], dtype=np.float32)[:, :, :width]
    tensor = torch.from_numpy(np.ascontiguousarray(rows)).to(like.device)
    return tensor[:, 0], tensor[:, 1]


def _reads_padding(compat: Compat, mask_non_context: bool) -> bool:
    """Whether a loss's softmaxes run over every position of the padded batch (the authors' code): it then reads the
    model's outputs at padding tokens, which packed windows (``attention: packed``) do not compute, so ``train_qa``
    refuses to pack it."""
    return compat == "isbiased" or not mask_non_context


def _batch_masks(batch: dict[str, Tensor]) -> tuple[Tensor, Tensor]:
    """``(valid_mask, question_mask)`` from the masks that the training loop adds to a batch."""
    missing = [key for key in ("context_mask", "cls_mask", "question_mask") if key not in batch]
    if missing:
        raise KeyError(f"the batch lacks {missing}: the training loop must add context/cls/question masks")
    return batch["context_mask"] | batch["cls_mask"], batch["question_mask"]


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

    def forward(
        self,
        start_logits: Tensor,
        end_logits: Tensor,
        hidden_states: Tensor,
        batch: dict[str, Tensor],
        feature_index: np.ndarray,
    ) -> tuple[Tensor, dict[str, float]]:
        bias_start, bias_end = _gather_logits(self.bias_logits, feature_index, start_logits, batch.get("attention_mask"))
        if self.gate_input == "detached":  # the gate learns from the main model's states but cannot reshape them
            hidden_states = hidden_states.detach()
        if self.compat == "isbiased":
            valid_mask, gate = None, self.gate(hidden_states)
        else:
            valid_mask, question_mask = _batch_masks(batch)
            gate = self.gate(hidden_states, question_mask, batch["context_mask"])
        return learned_mixin_h_loss(
            start_logits,
            end_logits,
            batch["start_positions"],
            batch["end_positions"],
            bias_start,
            bias_end,
            gate,
            valid_mask=valid_mask,
            entropy_weight=self.entropy_weight,
            scale=self.scale,
            compat=self.compat,
            mask_non_context=self.mask_non_context,
            entropy_on=self.entropy_on,
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

    def forward(
        self,
        start_logits: Tensor,
        end_logits: Tensor,
        hidden_states: Tensor | None,
        batch: dict[str, Tensor],
        feature_index: np.ndarray,
    ) -> tuple[Tensor, dict[str, float]]:
        bias_start, bias_end = _gather_logits(self.bias_logits, feature_index, start_logits, batch.get("attention_mask"))
        teacher_start, teacher_end = _gather_logits(self.teacher_logits, feature_index, start_logits, batch.get("attention_mask"))
        valid_mask = None if self.compat == "isbiased" else _batch_masks(batch)[0]
        return confidence_regularization_loss(
            start_logits,
            end_logits,
            batch["start_positions"],
            batch["end_positions"],
            teacher_start,
            teacher_end,
            bias_start,
            bias_end,
            valid_mask=valid_mask,
            scale=self.scale,
            compat=self.compat,
            mask_non_context=self.mask_non_context,
        )

