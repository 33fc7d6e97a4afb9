"""Running a QA model: the loss, validation loss, logits per window, predictions, and the logits files of the
debiasing methods."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from spurious.core import readers, registry
from spurious.core.errors import rebuild_advice
from spurious.core.models import (
    from_pretrained,
    load_qa_model,
    load_tokenizer,
    model_attention_mask,
    resolve_model,
)
from spurious.core.train import compiled, packing
from spurious.core.train.logits import features_fingerprint, write_feature_logits
from spurious.core.train.qa.features import (
    QAFeatures,
    featurize,
    postprocess_predictions,
    training_features,
)
from spurious.core.train.qa.settings import (
    LogFn,
    logger,
    resolve_settings,
)
from spurious.core.train.training import (
    TRAINING_STATE_FILE,
    StopRequested,
    autocast,
    pad_multiple,
    pick_device,
    to_device,
    use_bf16,
)


def qa_loss(
    start_logits: torch.Tensor,
    end_logits: torch.Tensor,
    start_positions: torch.Tensor,
    end_positions: torch.Tensor,
    attention_mask: torch.Tensor,
) -> torch.Tensor:
    """Mean of start and end cross-entropy with padding masked out (see the module docstring)."""
    pad = attention_mask == 0
    start = start_logits.float().masked_fill(pad, float("-inf"))
    end = end_logits.float().masked_fill(pad, float("-inf"))
    ce = torch.nn.functional.cross_entropy
    return (ce(start, start_positions) + ce(end, end_positions)) / 2


# Batch keys the model receives; the rest (labels, token-kind masks) are for losses and training objectives.
_MODEL_INPUT_KEYS = ("input_ids", "attention_mask", "token_type_ids")


def _model_outputs(model: Any, batch: Mapping[str, torch.Tensor], *, hidden: bool = False) -> tuple[Any, Any, Any]:
    """Start logits, end logits and, with ``hidden``, the last hidden state ``[B, W, H]`` (else None), of a batch on
    the model's device (under the caller's autocast). The attention mask goes in as ``model_attention_mask`` makes
    it, so that no model code waits for the device.

    Hidden states are requested only when needed: returning all layers costs memory on long windows. A packed batch
    (``spurious.core.train.packing``) runs as one row and comes back in the batch's ``[B, W]`` layout, the logits
    ``-inf`` and the hidden states 0 outside the windows.
    """
    packed = packing.is_packed(batch)
    if packed:
        inputs = packing.model_inputs(batch)
    else:
        inputs = {k: batch[k] for k in _MODEL_INPUT_KEYS if k in batch}
        inputs["attention_mask"] = model_attention_mask(model, inputs["attention_mask"])
    out = model(**inputs, output_hidden_states=True) if hidden else model(**inputs)
    start, end, states = out.start_logits, out.end_logits, (out.hidden_states[-1] if hidden else None)
    if packed:
        start, end = packing.unpack(start, batch, float("-inf")), packing.unpack(end, batch, float("-inf"))
        states = None if states is None else packing.unpack(states, batch, 0.0)
    return start, end, states


def _forward(model: Any, batch: Mapping[str, torch.Tensor]) -> tuple[Any, Any]:
    start, end, _ = _model_outputs(model, batch)
    return start, end


def _plain_loss(model: Any, batch: Mapping[str, torch.Tensor]) -> torch.Tensor:
    """``qa_loss`` of the model on a collated batch on its device: the training loss without an objective, and every
    validation loss."""
    start, end = _forward(model, batch)
    return qa_loss(start, end, batch["start_positions"], batch["end_positions"], batch["attention_mask"])


def _model_device(model: Any) -> torch.device:
    return next(model.parameters()).device


@torch.no_grad()
def validation_loss(
    model: Any,
    features: QAFeatures,
    *,
    batch_size: int = 64,
    bf16: bool = False,
    should_stop: Callable[[], bool] | None = None,
    multiple: int = 1,
    compile: str = "off",
    repeats: int = 1,
) -> float:
    """Mean QA loss over all labelled windows of ``features`` (windows sorted by length to pad little).

    ``should_stop`` is polled between batches so a preemption signal does not wait for a long evaluation; the
    evaluation is then abandoned (``StopRequested``) and redone after resumption. ``compile``: the setting
    (``spurious.core.train.compiled.batched``), for ``repeats`` evaluations of these features.
    """
    if features.start_positions is None:
        raise ValueError("validation_loss needs labelled features (featurize(..., labels=True))")
    device = _model_device(model)
    was_training = model.training
    model.eval()
    offset = packing.position_offset(model)
    batches = _length_batches(features, batch_size, multiple, offset is not None)
    loss_of = compiled.batched(_plain_loss, compile, device, [shape for _, shape in batches], repeats=repeats)
    total, count = 0.0, 0
    try:
        for idx, shape in batches:
            if should_stop is not None and should_stop():
                raise StopRequested
            batch = to_device(features.collate(idx, multiple=multiple, packed_offset=offset), device)
            with autocast(device, bf16):
                loss = loss_of(shape, model, batch)
            total += float(loss) * len(idx)
            count += len(idx)
    finally:
        model.train(was_training)
    return total / max(count, 1)


def _length_batches(
    features: QAFeatures, batch_size: int, multiple: int, packed: bool = False
) -> list[tuple[np.ndarray, tuple[int, int]]]:
    """The windows in batches of similar length (sorted by length, to pad little) and each batch's shape (rows and
    sequence length: ``QAFeatures.batch_width``)."""
    lengths = features.lengths
    order = np.argsort(lengths, kind="stable")
    batches = [order[lo : lo + batch_size] for lo in range(0, len(order), batch_size)]
    return [(idx, (len(idx), features.batch_width(lengths[idx], None, multiple, packed))) for idx in batches]


@torch.no_grad()
def predict_logits(
    model: Any,
    features: QAFeatures,
    *,
    batch_size: int = 64,
    bf16: bool = False,
    log: LogFn | None = None,
    multiple: int = 1,
    compile: str = "off",
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Start/end logits of every window (unpadded, float32), batched by length for speed, each batch's width rounded
    up to ``multiple`` (``pad_to_multiple_of``), or packed when the model runs packed attention; ``compile``: the
    setting (``spurious.core.train.compiled.batched``)."""
    device = _model_device(model)
    was_training = model.training
    model.eval()
    starts: list[np.ndarray] = [np.empty(0, np.float32)] * len(features)
    ends: list[np.ndarray] = [np.empty(0, np.float32)] * len(features)
    lengths = features.lengths
    offset = packing.position_offset(model)
    batches = _length_batches(features, batch_size, multiple, offset is not None)
    forward = compiled.batched(_forward, compile, device, [shape for _, shape in batches])
    n_batches = len(batches)
    t0 = time.perf_counter()
    try:
        for b, (idx, shape) in enumerate(batches):
            batch = to_device(features.collate(idx, multiple=multiple, packed_offset=offset), device)
            with autocast(device, bf16):
                s, e = forward(shape, model, batch)
            s, e = s.float().cpu().numpy(), e.float().cpu().numpy()
            width = s.shape[1]
            for j, f in enumerate(idx):
                sl = slice(0, lengths[f]) if features.pad_on_right else slice(width - lengths[f], width)
                starts[f], ends[f] = s[j, sl].copy(), e[j, sl].copy()
            if log is not None and (b + 1) % 20 == 0:
                rate = sum(len(i) for i, _ in batches[: b + 1]) / (time.perf_counter() - t0)
                log(f"predict: batch {b + 1}/{n_batches} ({rate:.1f} windows/s)")
    finally:
        model.train(was_training)
    return starts, ends


def predict_with_model(
    model: Any,
    tokenizer: Any,
    qa_frame: pd.DataFrame,
    *,
    settings: Mapping[str, Any] | None = None,
    log: LogFn | None = None,
) -> dict[str, str]:
    """Predict answers with an already loaded model (used by ``predict_qa`` and for in-process evaluation)."""
    s = resolve_settings(settings)
    features = featurize(qa_frame, tokenizer, max_length=s["max_length"], stride=s["stride"], labels=False)
    device = _model_device(model)
    bf16 = use_bf16(s["bf16"], device)
    starts, ends = predict_logits(
        model, features, batch_size=s["eval_batch_size"], bf16=bf16, log=log,
        multiple=pad_multiple(s["pad_to_multiple_of"], device), compile=s["compile"],
    )
    return postprocess_predictions(features, starts, ends, n_best=s["n_best"], max_answer_length=s["max_answer_length"])


def predict_qa(
    model_dir: str | os.PathLike,
    qa_frame: pd.DataFrame,
    *,
    settings: Mapping[str, Any] | None = None,
    log: LogFn | None = None,
) -> dict[str, str]:
    """Answer every question of ``qa_frame`` with the model in ``model_dir``: ``{id: prediction text}``.

    Uses the same featurisation settings as training (``max_length``, ``stride``), ``eval_batch_size``, ``device``,
    ``bf16`` and ``attention`` (``packed``: windows end to end, ``spurious.core.train.packing``; the same answers up to
    float rounding) from ``settings``; other keys are ignored, so the training settings can be passed as they are.
    """
    s = resolve_settings(settings)
    if s["threads"]:
        torch.set_num_threads(int(s["threads"]))
    device = pick_device(s["device"])
    tokenizer = load_tokenizer(model_dir)
    model = load_qa_model(model_dir).to(device)
    emit = log or logger.info
    packing.enable(model, s["attention"], device=device, bf16=use_bf16(s["bf16"], device), log=emit)
    t0 = time.perf_counter()
    predictions = predict_with_model(model, tokenizer, qa_frame, settings=s, log=emit)
    emit(f"predict: {len(qa_frame)} questions in {time.perf_counter() - t0:.1f}s on {device}")
    return predictions


def _load_trained_qa_model(model_dir: str | os.PathLike) -> Any:
    """Load a QA model that must already have a trained QA head: a freshly initialised one would give random logits."""
    from transformers import AutoModelForQuestionAnswering

    registry.load_model_types()  # a bias model may be of a type a paper adds (Think Twice's overlap model)
    model, info = from_pretrained(AutoModelForQuestionAnswering, model_dir, output_loading_info=True)
    missing = sorted(info.get("missing_keys") or [])
    if missing:
        raise ValueError(
            f"{model_dir} is not a fine-tuned QA model ({len(missing)} weights missing, first: "
            f"{', '.join(missing[:3])}); per-feature logits must come from a trained bias or teacher model"
        )
    return model


def _check_shared_vocabulary(model: Any, model_dir: str | os.PathLike, tokenizer: Any, tokenizer_from: str) -> None:
    """The producer reads the consumer's token ids, so both must share one vocabulary (as in the authors' code).

    The sizes of the consumer's tokenizer, the producer's config and its embedding matrix must agree; if the producer
    ships a tokenizer, its vocabulary must be the consumer's token for token (same size is not enough: cased and
    uncased BERT vocabularies could in principle coincide in size).
    """
    sizes = {
        f"tokenizer of {tokenizer_from}": len(tokenizer),
        f"vocab_size in the config of {model_dir}": getattr(model.config, "vocab_size", None),
        f"embedding rows of {model_dir}": model.get_input_embeddings().num_embeddings,
    }
    if len({v for v in sizes.values() if v is not None}) > 1:
        listed = ", ".join(f"{k}: {v}" for k, v in sizes.items())
        raise ValueError(
            f"the producer model does not share the consumer's vocabulary ({listed}); train the bias/teacher model "
            f"from a checkpoint with the tokenizer of {tokenizer_from}"
        )
    try:
        own = load_tokenizer(model_dir)
    except Exception:  # no tokenizer saved with the producer: the size check above is all we can do
        return
    if own.get_vocab() != tokenizer.get_vocab():
        raise ValueError(
            f"the tokenizer saved with {model_dir} has another vocabulary than the tokenizer of {tokenizer_from}; "
            "train the bias/teacher model from a checkpoint with the consumer's tokenizer"
        )


def infer_feature_logits(
    model_dir: str | os.PathLike,
    frame: pd.DataFrame,
    *,
    tokenizer_from: str | os.PathLike,
    settings: Mapping[str, Any] | None = None,
    output_path: str | os.PathLike,
    log: LogFn | None = None,
) -> dict[str, Any]:
    """Infer the start/end logits of the model in ``model_dir`` (bias model, teacher) on every training window of
    ``frame`` and store them aligned to those windows (``spurious.core.train.logits``); returns the features'
    fingerprint.

    The windows are made exactly as ``train_qa`` makes them (``training_features`` with the tokenizer of
    ``tokenizer_from``, the main model, and the main run's ``max_length``/``stride``), so row ``i`` of the store is the
    ``feature_index`` ``i`` a training objective receives. ``tokenizer_from`` must be the main model's name exactly as
    the consuming ``train_qa`` gets it (``model_name_or_path``): it is the fingerprint's tokenizer name.
    ``eval_batch_size``, ``device``, ``bf16``, ``threads`` and ``attention`` only affect speed (bf16 rounds the stored
    logits; packed windows round differently).
    """
    s = resolve_settings(settings)
    emit = log or logger.info
    if s["threads"]:
        torch.set_num_threads(int(s["threads"]))
    device = pick_device(s["device"])
    tokenizer = load_tokenizer(tokenizer_from)
    model = _load_trained_qa_model(model_dir)
    _check_shared_vocabulary(model, model_dir, tokenizer, str(tokenizer_from))
    packing.enable(model, s["attention"], device=device, bf16=use_bf16(s["bf16"], device), log=emit)
    model.to(device)
    features = training_features(frame, tokenizer, s, tokenizer_name=os.fspath(tokenizer_from))
    fingerprint = features_fingerprint(features)
    t0 = time.perf_counter()
    starts, ends = predict_logits(
        model, features, batch_size=int(s["eval_batch_size"]), bf16=use_bf16(s["bf16"], device), log=emit,
        multiple=pad_multiple(s["pad_to_multiple_of"], device), compile=s["compile"],
    )
    producer = {
        "model_dir": str(model_dir),
        "resolved_model": resolve_model(model_dir),
        "step": _trained_step(model_dir),
        "tokenizer_from": str(tokenizer_from),
        "device": str(device),
        "bf16": use_bf16(s["bf16"], device),
    }
    write_feature_logits(output_path, starts, ends, fingerprint, producer=producer)
    emit(
        f"feature logits of {model_dir}: {len(frame)} questions -> {len(features)} windows in "
        f"{time.perf_counter() - t0:.1f}s, written to {output_path}"
    )
    return fingerprint


def _trained_step(model_dir: str | os.PathLike) -> int | None:
    """The step ``train_qa`` saved the model at (its ``training_state.json``), or None for other checkpoints."""
    state_file = Path(resolve_model(model_dir)) / TRAINING_STATE_FILE
    if not state_file.is_file():
        return None
    return readers.read_json(state_file, fix=rebuild_advice(model_dir)).get("saved_step")


