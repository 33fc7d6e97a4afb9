"""Packed windows (the setting ``attention: packed``): a micro-batch's windows laid end to end in one row, no padding.

A padded batch ``[B, W]`` spends the attention and feed-forward work of every padding token; a packed batch is one row
``[1, T]`` holding only the windows' tokens, and attention stays inside each window through ``cu_seq_lens`` (the
cumulative window lengths, FlashAttention-2 style). On CUDA the attention is torch's
``torch.nn.attention.varlen.varlen_attn``, registered with transformers' ``AttentionInterface`` under
:data:`PACKED_ATTENTION`; BERT, RoBERTa and ELECTRA call it with the packed row and pass ``cu_seq_lens_*`` and
``max_length_*`` through to it. Each window gets its own position ids, restarting at its first token (RoBERTa's at
``padding_idx + 1``), and keeps its token type ids, so a window sees exactly the inputs it has in a padded batch.

What the losses read does not change: :func:`pack` keeps the batch's ``[B, W]`` layout (``attention_mask``, labels and
token-kind masks) beside the packed row, and :func:`unpack` lays the packed outputs back into it (start/end logits
with ``-inf`` outside each window, hidden states with 0), so the span loss and every debiasing objective consume the
same ``[B, W]`` tensors as with padding. Classification reads each window's first token ([CLS], ``<s>``), the position
the padded heads read.

Two things differ from padded attention, and the docs (docs/gpu.md) say so: ``varlen_attn`` has no dropout, so packed
*training* runs without dropout on the attention probabilities (hidden-state dropout stays as configured), which makes
``attention`` a result-changing setting; and losses that read the padding positions (the authors' unmasked softmaxes)
cannot be computed, so such objectives are refused at start (``reads_padding``).

The packed length ``T`` is rounded up to a bucket (:func:`bucket_size`), so that a run meets at most
:data:`PACKED_LENGTHS` distinct lengths per number of windows, and compiled steps and CUDA graphs still apply.

A reference for checking on a CPU (:data:`REFERENCE_ATTENTION`): the same packed inputs through scaled-dot-product
attention with a block-diagonal mask built from ``cu_seq_lens``. It runs only when asked for: in tests, or with the
environment variable ``SPURIOUS_PACKED_REFERENCE=1`` (slow: a dense ``T x T`` mask); a run without it on a device
without ``varlen_attn`` stops at start with an error naming the setting and the fix.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import torch

ATTENTION_MODES = ("padded", "packed")
# The attention implementations this module registers with transformers (AttentionInterface)
PACKED_ATTENTION = "spurious_packed_varlen"
REFERENCE_ATTENTION = "spurious_packed_reference"
REFERENCE_ENV = "SPURIOUS_PACKED_REFERENCE"
# The model families whose embeddings take per-window position ids and whose attention calls the registered function
FAMILIES = ("bert", "roberta", "electra")
# At most this many distinct packed lengths per number of windows (CUDA graphs need one static shape each)
PACKED_LENGTHS = 8
BUCKET_MULTIPLE = 64


class PackedAttentionUnavailable(RuntimeError):
    """``attention: packed`` cannot run here (device, torch, precision or model family); the message says the fix."""


def check_attention_setting(value: Any, what: str) -> None:
    if value not in ATTENTION_MODES:
        raise ValueError(f"the {what} setting attention must be one of {list(ATTENTION_MODES)}, got {value!r}")


# ---------------------------------------------------------------------------------------------------------------------
# Buckets


def tail_segments(bucket: int, width: int) -> int:
    """How many segments the padding at the end of a packed row is cut into: enough that none is longer than a window
    (``width``), since ``varlen_attn`` must be given the longest segment's length and is given the width, and that
    every one holds a token."""
    return math.ceil(bucket / width) + 1


def packed_length(n_tokens: int, bucket: int, width: int) -> int:
    """The packed row's length: the windows' tokens plus one token per tail segment, rounded up to ``bucket``."""
    return math.ceil((n_tokens + tail_segments(bucket, width)) / bucket) * bucket


def bucket_size(windows: int, width: int) -> int:
    """The rounding of a packed row of ``windows`` windows of at most ``width`` tokens: the smallest multiple of
    :data:`BUCKET_MULTIPLE` with which every possible row (1 to ``windows x width`` tokens) takes one of at most
    :data:`PACKED_LENGTHS` lengths. For 32 windows of up to 384 tokens: 1600, the lengths 1600, 3200, ..., 12800
    (1536 = 12,288 / 8 leaves no room for the tail tokens of a row of 32 full windows)."""
    if windows < 1 or width < 1:
        raise ValueError(f"bucket_size needs at least one window and one token, got {windows} x {width}")
    most = windows * width
    bucket = BUCKET_MULTIPLE * math.ceil(most / (PACKED_LENGTHS * BUCKET_MULTIPLE))
    while packed_length(most, bucket, width) > PACKED_LENGTHS * bucket:
        bucket += BUCKET_MULTIPLE
    return bucket


def row_length(lengths: np.ndarray, width: int) -> int:
    """The length ``T`` of the packed row of windows of ``lengths`` tokens in a ``[len(lengths), width]`` layout
    (:func:`pack`'s rule): with the number of windows, the shape of a packed batch (its ``cu_seq_lens`` holds
    ``len(lengths) + 1 + tail_segments`` entries, fixed by the two), from which a compiled run learns its shapes."""
    return packed_length(int(np.sum(lengths)), bucket_size(len(lengths), width), width)


# ---------------------------------------------------------------------------------------------------------------------
# Batches


def pack(batch: Mapping[str, torch.Tensor], *, position_offset: int, pad_token_id: int) -> dict[str, torch.Tensor]:
    """A collated (padded) batch with its windows laid end to end in one row.

    ``batch`` holds ``input_ids`` and ``attention_mask`` ``[B, W]`` (and ``token_type_ids``), windows padded on
    either side. The result replaces ``input_ids``/``token_type_ids`` with ``packed_input_ids``,
    ``packed_token_type_ids`` and ``packed_position_ids`` ``[1, T]`` (each window's positions count from
    ``position_offset``), ``cu_seq_lens`` (int32: the start of every window, then of the tail segments, then T) and
    ``packed_index`` ``[B, W]`` (the row position of each window token; 0 outside the windows), and keeps every other
    entry (``attention_mask`` marks the windows in the ``[B, W]`` layout the losses read). ``T`` is
    :func:`row_length`; the padding after the windows is cut into :func:`tail_segments` segments of pad tokens that
    attend only to themselves.
    """
    mask = batch["attention_mask"].numpy().astype(bool)
    n_windows, width = mask.shape
    lengths = mask.sum(axis=1)
    if (lengths == 0).any():
        raise ValueError("pack: a window without tokens")
    n_tokens = int(lengths.sum())
    total = row_length(lengths, width)
    tail_count = tail_segments(bucket_size(n_windows, width), width)
    tail = np.array([len(s) for s in np.array_split(np.arange(total - n_tokens), tail_count)])
    segments = np.concatenate([lengths, tail])
    cu = np.concatenate([[0], np.cumsum(segments)])
    positions = np.arange(total) - np.repeat(cu[:-1], segments) + position_offset
    ids = np.full(total, pad_token_id, dtype=np.int64)
    ids[:n_tokens] = batch["input_ids"].numpy()[mask]  # row-major: window after window, each in token order
    index = np.zeros((n_windows, width), dtype=np.int64)
    index[mask] = np.arange(n_tokens)
    out = {k: v for k, v in batch.items() if k not in ("input_ids", "token_type_ids")}
    out["packed_input_ids"] = torch.from_numpy(ids)[None]
    if "token_type_ids" in batch:
        types = np.zeros(total, dtype=np.int64)
        types[:n_tokens] = batch["token_type_ids"].numpy()[mask]
        out["packed_token_type_ids"] = torch.from_numpy(types)[None]
    out["packed_position_ids"] = torch.from_numpy(positions.astype(np.int64))[None]
    out["cu_seq_lens"] = torch.from_numpy(cu.astype(np.int32))
    out["packed_index"] = torch.from_numpy(index)
    return out


def is_packed(batch: Mapping[str, Any]) -> bool:
    return "cu_seq_lens" in batch


def model_inputs(batch: Mapping[str, torch.Tensor]) -> dict[str, Any]:
    """The keyword arguments of a transformers model for a packed batch on the model's device: the row, its position
    ids and token types, and the window boundaries that the registered attention reads (``max_length_*`` is the
    layout's width, at least every window's length: a Python number, so building it waits for nothing on the device,
    and a compiled step sees a constant)."""
    cu = batch["cu_seq_lens"]
    width = int(batch["packed_index"].shape[1])
    inputs = {
        "input_ids": batch["packed_input_ids"],
        "position_ids": batch["packed_position_ids"],
        "cu_seq_lens_q": cu,
        "cu_seq_lens_k": cu,
        "max_length_q": width,
        "max_length_k": width,
    }
    if "packed_token_type_ids" in batch:
        inputs["token_type_ids"] = batch["packed_token_type_ids"]
    return inputs


def unpack(values: torch.Tensor, batch: Mapping[str, torch.Tensor], fill: float) -> torch.Tensor:
    """Outputs of the packed row ``[1, T, ...]`` in the batch's ``[B, W, ...]`` layout, ``fill`` outside the windows
    (a gather by ``packed_index``, the batch on the device of ``values``: no host sync, and gradients flow back to the
    window tokens only)."""
    inside = batch["attention_mask"].bool()
    gathered = values[0][batch["packed_index"]]
    return gathered.masked_fill(~inside.reshape(*inside.shape, *([1] * (gathered.dim() - 2))), fill)


def window_starts(batch: Mapping[str, torch.Tensor]) -> torch.Tensor:
    """The row position of every window's first token, ``[B]``."""
    n_windows = batch["attention_mask"].shape[0]
    return batch["cu_seq_lens"][:n_windows].long()


def sequence_classification_logits(model: Any, batch: Mapping[str, torch.Tensor]) -> torch.Tensor:
    """The logits ``[B, n_labels]`` of a BERT/RoBERTa/ELECTRA sequence classifier on a packed batch on its device.

    The encoder runs on the packed row; every window's first token ([CLS], ``<s>``) is then handed to the head as a
    sequence of one token, since each family's head reads position 0: BERT through its pooler, dropout and
    classifier, RoBERTa and ELECTRA through their classification heads.
    """
    base = model.base_model
    hidden = base(**model_inputs(batch)).last_hidden_state
    first = hidden[0].index_select(0, window_starts(batch))[:, None]
    if model.config.model_type == "bert":
        return model.classifier(model.dropout(base.pooler(first)))
    return model.classifier(first)


# ---------------------------------------------------------------------------------------------------------------------
# Attention


AttentionFunction = Callable[..., tuple[torch.Tensor, None]]
# (query, key, value [1, H, T, D], cu_seq_lens, max window length, scale) -> the attention output [1, T, H, D]
Kernel = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, int, "float | None"], torch.Tensor]


def _attention_function(kernel: Kernel) -> AttentionFunction:
    """An attention function with transformers' signature that runs ``kernel`` on one packed row, each window
    attending to itself. ``dropout`` is not applied: ``varlen_attn`` has none (see the module docstring), and the
    reference computes what it computes."""

    def attention(
        module: torch.nn.Module,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        attention_mask: torch.Tensor | None,
        scaling: float | None = None,
        dropout: float = 0.0,
        **kwargs: Any,
    ) -> tuple[torch.Tensor, None]:
        cu, width = kwargs.get("cu_seq_lens_q"), kwargs.get("max_length_q")
        if cu is None or width is None:
            raise RuntimeError(
                "the model runs packed attention (attention: packed) but was called without cu_seq_lens: every batch "
                "for it must be built with spurious.core.packing.pack and passed with packing.model_inputs"
            )
        if query.shape[0] != 1:
            raise RuntimeError(f"packed attention takes one packed row, got a batch of {query.shape[0]}")
        return kernel(query, key, value, cu, int(width), scaling), None

    return attention


def _varlen(
    query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, cu: torch.Tensor, width: int, scale: float | None
) -> torch.Tensor:
    """torch's ``varlen_attn`` (CUDA; bf16 or fp16), which takes ``[T, H, D]``."""
    from torch.nn.attention.varlen import varlen_attn

    q, k, v = (x[0].transpose(0, 1) for x in (query, key, value))
    return varlen_attn(q, k, v, cu, cu, width, width, scale=scale).unsqueeze(0)


def block_diagonal_mask(cu_seq_lens: torch.Tensor, length: int) -> torch.Tensor:
    """``[T, T]`` bool: token i may attend to token j when both lie in the same segment of ``cu_seq_lens``."""
    segment = torch.searchsorted(cu_seq_lens[1:].long(), torch.arange(length, device=cu_seq_lens.device), right=True)
    return segment[:, None] == segment[None, :]


def _block_diagonal(
    query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, cu: torch.Tensor, width: int, scale: float | None
) -> torch.Tensor:
    """The same attention through ``scaled_dot_product_attention`` with a block-diagonal mask (any device, any
    precision; a dense ``T x T`` mask)."""
    mask = block_diagonal_mask(cu, query.shape[2])
    out = torch.nn.functional.scaled_dot_product_attention(query, key, value, attn_mask=mask, scale=scale)
    return out.transpose(1, 2).contiguous()


varlen_attention = _attention_function(_varlen)
reference_attention = _attention_function(_block_diagonal)


def register() -> None:
    """Make the two implementations known to transformers (idempotent)."""
    from transformers import AttentionInterface

    AttentionInterface.register(PACKED_ATTENTION, varlen_attention)
    AttentionInterface.register(REFERENCE_ATTENTION, reference_attention)


def _transformer(model: torch.nn.Module) -> Any:
    """The transformers model in ``model``: itself, or the first one among its modules (a prompt classifier's LM);
    None when there is none."""
    from transformers import PreTrainedModel

    return next((m for m in model.modules() if isinstance(m, PreTrainedModel)), None)


def position_offset(model: torch.nn.Module) -> int | None:
    """The position id of a window's first token when ``model`` runs packed attention (RoBERTa: ``padding_idx + 1``,
    as its padded positions count), None when it runs padded: batch builders pack exactly when this is not None."""
    transformer = _transformer(model)
    if transformer is None or transformer.config._attn_implementation not in (PACKED_ATTENTION, REFERENCE_ATTENTION):
        return None
    if transformer.config.model_type == "roberta":
        return int(transformer.config.pad_token_id) + 1
    return 0


def _check_varlen(device: torch.device, bf16: bool, config: Any) -> None:
    """Raise ``PackedAttentionUnavailable`` unless ``varlen_attn`` runs on ``device`` for this model's heads."""
    fix = "set attention: padded"
    if device.type != "cuda":
        raise PackedAttentionUnavailable(
            f"attention: packed runs torch's varlen_attn (FlashAttention-2 kernels), which needs a CUDA GPU; this run "
            f"is on {device}: {fix} (to check the packed path on a CPU, slowly, set {REFERENCE_ENV}=1)"
        )
    try:
        from torch.nn.attention.varlen import varlen_attn
    except ImportError as exc:
        raise PackedAttentionUnavailable(
            f"attention: packed needs torch.nn.attention.varlen, which torch {torch.__version__} lacks ({exc}): "
            f"install a torch that has it, or {fix}"
        ) from exc
    if not bf16:
        raise PackedAttentionUnavailable(
            f"attention: packed runs flash-attention kernels, which have no float32 version, but bf16 is off for this "
            f"run: set bf16: auto (or true), or {fix}"
        )
    heads = int(config.num_attention_heads)
    head_dim = int(config.hidden_size) // heads
    try:  # a forward and backward pass of two windows, with the model's head layout
        q = torch.randn(8, heads, head_dim, device=device, dtype=torch.bfloat16, requires_grad=True)
        cu = torch.tensor([0, 3, 8], device=device, dtype=torch.int32)
        varlen_attn(q, q, q, cu, cu, 5, 5).sum().backward()
        torch.cuda.synchronize(device)
    except Exception as exc:  # the kernels' own message names the unsupported GPU or head size
        name = torch.cuda.get_device_name(device)
        capability = ".".join(map(str, torch.cuda.get_device_capability(device)))
        raise PackedAttentionUnavailable(
            f"attention: packed: varlen_attn does not run on {name} (compute capability {capability}) with "
            f"{heads} heads of {head_dim} ({type(exc).__name__}: {exc}); its kernels need an Ampere or newer GPU "
            f"(8.0+): {fix}"
        ) from exc


def enable(
    model: torch.nn.Module, setting: str, *, device: torch.device, bf16: bool, log: Callable[[str], None] | None = None
) -> bool:
    """Switch ``model`` to packed attention when ``setting`` is ``packed``; True when it did.

    Checks first, so that a run that cannot pack stops before anything is computed: the model must be BERT, RoBERTa
    or ELECTRA, and ``varlen_attn`` must run on ``device`` in bf16 for its heads. With ``SPURIOUS_PACKED_REFERENCE=1``
    the block-diagonal reference runs instead, on any device (for checking; slow). The saved model's config does not
    record the switch."""
    check_attention_setting(setting, "training/prediction")
    if setting == "padded":
        return False
    transformer = _transformer(model)
    family = None if transformer is None else transformer.config.model_type
    if family not in FAMILIES:
        raise PackedAttentionUnavailable(
            f"attention: packed supports {', '.join(FAMILIES)} models; this is a {family!r} model "
            f"({type(transformer or model).__name__}): set attention: padded for it"
        )
    reference = os.environ.get(REFERENCE_ENV, "") == "1"
    if not reference:
        _check_varlen(device, bf16, transformer.config)
    register()
    transformer.set_attn_implementation(REFERENCE_ATTENTION if reference else PACKED_ATTENTION)
    if log is not None:
        how = f"the block-diagonal reference ({REFERENCE_ENV}=1; for checking, slow)" if reference else "varlen_attn"
        log(
            f"attention: packed windows through {how}; no dropout on the attention probabilities "
            "(hidden-state dropout as configured)"
        )
    return True


def use_reference(model: torch.nn.Module) -> None:
    """Switch ``model`` (a transformers model) to the block-diagonal reference, whatever the device: what tests
    compare with padding."""
    register()
    _transformer(model).set_attn_implementation(REFERENCE_ATTENTION)
