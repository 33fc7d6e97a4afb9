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
attention with a block-diagonal mask built from ``cu_seq_lens``. It is as strict as the kernel it stands for: it refuses
what FlashAttention-2's varlen kernel refuses (:func:`flash_attention_problem`: float32 and mixed dtypes, head sizes
that are not a multiple of 8 or exceed 256, a head dimension that is not contiguous, ``cu_seq_lens`` that is not a
contiguous int32 vector), so a path that would crash on a GPU (a pass outside the training's bf16 autocast) crashes on
the CPU too. It runs only when asked for: in tests, or with the environment variable ``SPURIOUS_PACKED_REFERENCE=1``
(slow: a dense ``T x T`` mask); a run without it on a device without ``varlen_attn`` stops at start with an error
naming the setting and the fix. ``SPURIOUS_PACKED_REFERENCE=float32`` (and :data:`REFERENCE_ANY_PRECISION`) lifts
only the precision rule, to compare packed and padded runs to float32 precision: never what a GPU can run.
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
REFERENCE_ATTENTION = "spurious_packed_reference"  # FlashAttention's rules, bf16/fp16 only
REFERENCE_ANY_PRECISION = "spurious_packed_reference_any_precision"  # the same, float32 allowed (formula checks)
REFERENCE_ENV = "SPURIOUS_PACKED_REFERENCE"  # "1": the reference; "float32": the reference in any precision
# What FlashAttention-2's varlen kernel accepts (flash_api.cpp, mha_varlen_fwd): fp16 or bf16 inputs of one dtype, a
# head size that is a multiple of 8 and at most 256, a contiguous last (head) dimension, int32 cu_seqlens
KERNEL_DTYPES = (torch.float16, torch.bfloat16)
HEAD_SIZE_MULTIPLE, MAX_HEAD_SIZE = 8, 256
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
                "for it must be built with spurious.core.train.packing.pack and passed with packing.model_inputs"
            )
        if query.shape[0] != 1:
            raise RuntimeError(f"packed attention takes one packed row, got a batch of {query.shape[0]}")
        return kernel(query, key, value, cu, int(width), scaling), None

    return attention


def _kernel_layout(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor) -> list[torch.Tensor]:
    """``[1, H, T, D]`` (transformers' layout) as the ``[T, H, D]`` views ``varlen_attn`` takes."""
    return [x[0].transpose(0, 1) for x in (query, key, value)]


def _varlen(
    query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, cu: torch.Tensor, width: int, scale: float | None
) -> torch.Tensor:
    """torch's ``varlen_attn`` (CUDA; bf16 or fp16), which takes ``[T, H, D]``."""
    from torch.nn.attention.varlen import varlen_attn

    q, k, v = _kernel_layout(query, key, value)
    return varlen_attn(q, k, v, cu, cu, width, width, scale=scale).unsqueeze(0)


def flash_attention_problem(
    query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, cu: torch.Tensor, *, any_precision: bool = False
) -> str | None:
    """Why FlashAttention-2's varlen kernel would refuse these inputs (``[1, H, T, D]``, as the attention function gets
    them, handed to the kernel as ``[T, H, D]`` views), or None: its checks, in its order (``any_precision`` skips
    the dtype rule)."""
    q, k, v = _kernel_layout(query, key, value)
    dtypes = {x.dtype for x in (q, k, v)}
    if not any_precision and (len(dtypes) > 1 or q.dtype not in KERNEL_DTYPES):
        return (
            f"query, key and value are {', '.join(sorted(str(d) for d in dtypes))}: FlashAttention only supports fp16 "
            "and bf16 (one dtype for all three), so every pass through packed attention must run under the "
            "training's bf16 autocast"
        )
    head_size = q.shape[-1]
    if head_size % HEAD_SIZE_MULTIPLE or head_size > MAX_HEAD_SIZE:
        return (
            f"the head size is {head_size}: FlashAttention needs a multiple of {HEAD_SIZE_MULTIPLE} of at most "
            f"{MAX_HEAD_SIZE}"
        )
    if any(x.stride(-1) != 1 for x in (q, k, v)):
        return "the head dimension of query, key or value is not contiguous, which FlashAttention requires"
    if cu.dtype != torch.int32 or cu.dim() != 1 or not cu.is_contiguous():
        return (
            f"cu_seq_lens is a {cu.dtype} tensor of shape {tuple(cu.shape)}: FlashAttention needs a contiguous "
            "int32 vector"
        )
    return None


def block_diagonal_mask(cu_seq_lens: torch.Tensor, length: int) -> torch.Tensor:
    """``[T, T]`` bool: token i may attend to token j when both lie in the same segment of ``cu_seq_lens``."""
    segment = torch.searchsorted(cu_seq_lens[1:].long(), torch.arange(length, device=cu_seq_lens.device), right=True)
    return segment[:, None] == segment[None, :]


def _block_diagonal(
    query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, cu: torch.Tensor, width: int, scale: float | None,
    *, any_precision: bool = False,
) -> torch.Tensor:
    """The same attention through ``scaled_dot_product_attention`` with a block-diagonal mask (any device; a dense
    ``T x T`` mask), refusing what FlashAttention refuses (``any_precision``: except float32)."""
    problem = flash_attention_problem(query, key, value, cu, any_precision=any_precision)
    if problem is not None:
        raise RuntimeError(f"packed attention (the reference, as strict as FlashAttention's varlen kernel): {problem}")
    mask = block_diagonal_mask(cu, query.shape[2])
    out = torch.nn.functional.scaled_dot_product_attention(query, key, value, attn_mask=mask, scale=scale)
    return out.transpose(1, 2).contiguous()


def _block_diagonal_any_precision(
    query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, cu: torch.Tensor, width: int, scale: float | None
) -> torch.Tensor:
    return _block_diagonal(query, key, value, cu, width, scale, any_precision=True)


varlen_attention = _attention_function(_varlen)
reference_attention = _attention_function(_block_diagonal)
reference_attention_any_precision = _attention_function(_block_diagonal_any_precision)
# every attention implementation that runs packed rows (the batch builders pack for these)
PACKED_IMPLEMENTATIONS = (PACKED_ATTENTION, REFERENCE_ATTENTION, REFERENCE_ANY_PRECISION)


def register() -> None:
    """Make the implementations known to transformers (idempotent)."""
    from transformers import AttentionInterface

    AttentionInterface.register(PACKED_ATTENTION, varlen_attention)
    AttentionInterface.register(REFERENCE_ATTENTION, reference_attention)
    AttentionInterface.register(REFERENCE_ANY_PRECISION, reference_attention_any_precision)


def _transformer(model: torch.nn.Module) -> Any:
    """The transformers model in ``model``: itself, or the first one among its modules (a prompt classifier's LM);
    None when there is none."""
    from transformers import PreTrainedModel

    return next((m for m in model.modules() if isinstance(m, PreTrainedModel)), None)


def position_offset(model: torch.nn.Module) -> int | None:
    """The position id of a window's first token when ``model`` runs packed attention (RoBERTa: ``padding_idx + 1``,
    as its padded positions count), None when it runs padded: batch builders pack exactly when this is not None."""
    transformer = _transformer(model)
    if transformer is None or transformer.config._attn_implementation not in PACKED_IMPLEMENTATIONS:
        return None
    if transformer.config.model_type == "roberta":
        return int(transformer.config.pad_token_id) + 1
    return 0


def _check_varlen(device: torch.device) -> None:
    """Raise ``PackedAttentionUnavailable`` unless ``device`` is a CUDA GPU and torch has ``varlen_attn``."""
    fix = "set attention: padded"
    if device.type != "cuda":
        raise PackedAttentionUnavailable(
            f"attention: packed runs torch's varlen_attn (FlashAttention-2 kernels), which needs a CUDA GPU; this run "
            f"is on {device}: {fix} (to check the packed path on a CPU, slowly, set {REFERENCE_ENV}=1)"
        )
    try:
        import torch.nn.attention.varlen  # noqa: F401
    except ImportError as exc:
        raise PackedAttentionUnavailable(
            f"attention: packed needs torch.nn.attention.varlen, which torch {torch.__version__} lacks ({exc}): "
            f"install a torch that has it, or {fix}"
        ) from exc


def attention_scaling(transformer: Any) -> tuple[int, int, float]:
    """(heads, head size, scaling) of the model's self-attention, the scaling as its attention modules pass it to the
    attention function (``head size ** -0.5`` for BERT, RoBERTa and ELECTRA)."""
    config = transformer.config
    heads = int(config.num_attention_heads)
    head_size = int(config.hidden_size) // heads
    scaling = next((float(m.scaling) for m in transformer.modules() if hasattr(m, "attention_head_size")), None)
    return heads, head_size, head_size**-0.5 if scaling is None else scaling


def startup_probe(attention: AttentionFunction, device: torch.device, transformer: Any) -> None:
    """A forward and backward pass of two windows through ``attention`` (the function training calls), called as the
    model's attention modules call it: query, key and value ``[1, H, T, D]`` in bf16, views of one projection each
    as in training, the model's scaling, ``cu_seq_lens`` and ``max_length`` as ``model_inputs`` passes them."""
    heads, head_size, scaling = attention_scaling(transformer)
    tokens = 8

    def projection() -> torch.Tensor:
        x = torch.randn(1, tokens, heads * head_size, device=device, dtype=torch.bfloat16, requires_grad=True)
        return x.view(1, tokens, heads, head_size).transpose(1, 2)

    cu = torch.tensor([0, 3, tokens], device=device, dtype=torch.int32)
    out, _ = attention(
        None, projection(), projection(), projection(), None, scaling=scaling, dropout=0.0,
        cu_seq_lens_q=cu, cu_seq_lens_k=cu, max_length_q=5, max_length_k=5,
    )  # fmt: skip
    out.float().sum().backward()
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def enable(
    model: torch.nn.Module, setting: str, *, device: torch.device, bf16: bool, log: Callable[[str], None] | None = None
) -> bool:
    """Switch ``model`` to packed attention when ``setting`` is ``packed``; True when it did.

    Checks first, so that a run that cannot pack stops before anything is computed: the model must be BERT, RoBERTa
    or ELECTRA, bf16 must be on, and a short pass of the attention the run will use must go through with the model's
    heads and scaling (``startup_probe``): ``varlen_attn`` on a CUDA GPU, or with ``SPURIOUS_PACKED_REFERENCE=1`` the
    block-diagonal reference, on any device (for checking; slow), which refuses what the kernel refuses
    (``SPURIOUS_PACKED_REFERENCE=float32``: float32 too, and bf16 need not be on). The saved model's config does not
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
    reference = os.environ.get(REFERENCE_ENV, "")
    if reference not in ("", "0", "1", "float32"):
        raise ValueError(
            f"{REFERENCE_ENV} must be 1 (the reference) or float32 (the reference in any precision), got {reference!r}"
        )
    fix = "set attention: padded"
    if reference in ("", "0"):
        _check_varlen(device)
    if not bf16 and reference != "float32":
        raise PackedAttentionUnavailable(
            f"attention: packed runs flash-attention kernels, which have no float32 version, but bf16 is off for this "
            f"run: set bf16: auto (or true), or {fix}"
        )
    implementation = {"1": REFERENCE_ATTENTION, "float32": REFERENCE_ANY_PRECISION}.get(reference, PACKED_ATTENTION)
    attention = {PACKED_ATTENTION: varlen_attention, REFERENCE_ATTENTION: reference_attention,
                 REFERENCE_ANY_PRECISION: reference_attention_any_precision}[implementation]  # fmt: skip
    try:
        startup_probe(attention, device, transformer)
    except Exception as exc:  # the kernel's (or the reference's) own message names the unsupported GPU or head size
        heads, head_size, _ = attention_scaling(transformer)
        what, where, hint = "the packed reference", str(device), ""
        if implementation == PACKED_ATTENTION:
            capability = ".".join(map(str, torch.cuda.get_device_capability(device)))
            what, where = "varlen_attn", f"{torch.cuda.get_device_name(device)} (compute capability {capability})"
            hint = "; its kernels need an Ampere or newer GPU (8.0+) and a head size that is a multiple of 8 up to 256"
        raise PackedAttentionUnavailable(
            f"attention: packed: {what} does not run on {where} with {heads} heads of {head_size} "
            f"({type(exc).__name__}: {exc}){hint}: {fix}"
        ) from exc
    register()
    transformer.set_attn_implementation(implementation)
    if log is not None:
        how = (
            "varlen_attn" if implementation == PACKED_ATTENTION
            else f"the block-diagonal reference ({REFERENCE_ENV}={reference}; for checking, slow)"
        )  # fmt: skip
        log(
            f"attention: packed windows through {how}; no dropout on the attention probabilities "
            "(hidden-state dropout as configured)"
        )
    return True
