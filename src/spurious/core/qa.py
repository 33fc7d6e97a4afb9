"""Extractive QA: featurisation, fine-tuning with resumable checkpoints, and span prediction.

Mirrors the Hugging Face ``run_qa.py`` recipe that the paper used (App. B.1; reference-notes §A.2):

* Featurisation: question (left-stripped) + context, ``only_second`` truncation with ``max_length``/``stride`` sliding
  windows, offset mappings; a window's start/end labels are the (inclusive) token indices of the first gold answer, or
  the CLS index when the answer is not wholly inside the window.
* Post-processing: the ``n_best`` highest start and end logits of every window, spans of at most
  ``max_answer_length`` tokens lying in the context, score = start + end logit, best over all windows of a question;
  an empty string when no valid span exists.
* Training: our own loop (AdamW + linear schedule, gradient clipping at 1.0 as the HF ``Trainer`` defaults) instead of
  the ``Trainer``, because we need exact resumption after preemption (SLURM) and a deterministic data order per seed.
  The validation loss is evaluated every ``eval_every`` steps, early stopping counts evaluations without improvement,
  and the checkpoint with the lowest validation loss is the one saved.
* Debiasing hooks of ``train_qa``: a training objective replacing the QA loss (LearnedMixin, confidence
  regularisation; it reads per-feature bias/teacher logits that ``infer_feature_logits`` stores, ``spurious.core.logits``),
  a custom checkpoint selection (the biased-minus-unbiased F1 gap for bias models, ``segment_gap_selection``), and
  validation-loss curves on extra (e.g. out-of-distribution) frames.

The QA loss is computed here, not by the model: cross-entropy of start and end positions averaged, with padding
positions masked out. HF heads use the same formula but leave padding in the softmax, which would make the loss depend
on how a batch happens to be padded; masking makes dynamic padding (much faster on CPU) exact.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from spurious.core.config import RUNTIME_SETTINGS
from spurious.core.data import sample_questions
from spurious.core.logits import features_fingerprint, ids_sha256, write_feature_logits
from spurious.core.models import load_qa_model, load_tokenizer, quiet_transformers, resolve_model
from spurious.core.training import (
    OBJECTIVE_STATE_FILE,
    TRAINING_STATE_FILE,
    PreemptionGuard,
    StopRequested,
    TrainingPreempted,
    autocast,
    cpu_copy,
    epoch_order,
    fill_settings,
    format_eta,
    latest_checkpoint,
    param_groups,
    pick_device,
    restore_checkpoint,
    rng_states,
    save_checkpoint,
    save_model_dir,
    seed_everything,
    set_rng_states,
    use_bf16,
)

logger = logging.getLogger(__name__)

LogFn = Callable[[str], None]

DEFAULT_SETTINGS: dict[str, Any] = {
    # optimisation (paper App. B.1; the rest are HF TrainingArguments defaults)
    "learning_rate": 2e-5,
    "batch_size": 16,
    "gradient_accumulation_steps": 1,
    "epochs": 3,
    "max_steps": None,
    "warmup_ratio": 0.0,
    "weight_decay": 0.0,
    "max_grad_norm": 1.0,
    # featurisation and post-processing (reference-notes §A.2)
    "max_length": 384,
    "stride": 128,
    "n_best": 20,
    "max_answer_length": 30,
    "pad_to_max_length": False,
    "group_by_length": False,
    # validation, early stopping, checkpoints
    "eval_every": 200,
    "eval_max_examples": None,
    "eval_batch_size": 64,
    "early_stopping_patience": 10,
    "keep_best": True,
    "checkpoint_every": 200,
    # runtime
    "seed": 0,
    "device": "auto",
    "bf16": "auto",
    "threads": None,
    "log_every": 50,
}
# Keys that do not change the result of a run: a checkpoint may be resumed with other values for them.
_RUNTIME_KEYS = RUNTIME_SETTINGS  # not part of the run fingerprint
# Seed of the validation subset (eval_max_examples): fixed, so every model and seed is compared on the same questions.
EVAL_SUBSET_SEED = 0


def resolve_settings(settings: Mapping[str, Any] | None) -> dict[str, Any]:
    """Fill in defaults; reject unknown keys (a typo would otherwise silently fall back to a default)."""
    resolved = fill_settings(settings, DEFAULT_SETTINGS, _NULLABLE, "QA")
    if resolved["stride"] >= resolved["max_length"]:
        raise ValueError(f"stride ({resolved['stride']}) must be smaller than max_length ({resolved['max_length']})")
    return resolved


_NULLABLE = frozenset(
    {"max_steps", "eval_every", "eval_max_examples", "early_stopping_patience", "threads", "max_grad_norm"}
)


# ---------------------------------------------------------------------------------------------------------------------
# Featurisation
# ---------------------------------------------------------------------------------------------------------------------


@dataclass
class QAFeatures:
    """Tokenised sliding windows of a QA frame (unpadded; batches are padded when collated).

    ``context_offsets[i]`` is an ``(n_tokens, 2)`` array of character offsets into the example's context, ``-1`` for
    tokens outside the context (question, special tokens), which post-processing must never pick.

    The optional fields are filled by ``featurize`` (hand-built features may leave them out): ``sequence_ids[i]`` holds
    the tokenizer's sequence id of every token (``-1`` for special tokens; the question is sequence 0 with right
    padding, 1 with left padding), ``cls_index[i]`` the position of the CLS token (the label of windows without the
    answer), and ``max_length``/``stride``/``tokenizer_name``/``vocab_size`` record how the windows were made, so that
    logits stored per feature (``spurious.core.logits``) can be checked against the features that consume them.
    """

    input_ids: list[np.ndarray]
    token_type_ids: list[np.ndarray] | None
    context_offsets: list[np.ndarray]
    example_index: np.ndarray
    start_positions: np.ndarray | None
    end_positions: np.ndarray | None
    example_ids: list[str]
    contexts: list[str]
    pad_token_id: int
    pad_token_type_id: int = 0
    pad_on_right: bool = True
    sequence_ids: list[np.ndarray] | None = None
    cls_index: np.ndarray | None = None
    max_length: int | None = None
    stride: int | None = None
    tokenizer_name: str | None = None
    vocab_size: int | None = None

    def __len__(self) -> int:
        return len(self.input_ids)

    @property
    def lengths(self) -> np.ndarray:
        return np.fromiter((len(x) for x in self.input_ids), dtype=np.int64, count=len(self.input_ids))

    @property
    def question_sequence_id(self) -> int:
        """The sequence id of the question: ``featurize`` puts it first with right padding, second with left."""
        return 0 if self.pad_on_right else 1

    def collate(self, indices: Sequence[int] | np.ndarray, pad_to: int | None = None) -> dict[str, torch.Tensor]:
        """Pad the windows ``indices`` into a batch (to the longest one, or to ``pad_to``), with labels if present.

        With left padding the label positions move right by the padding added, so they still point at the same token.
        Besides the model inputs, the batch holds boolean ``[B, W]`` masks for training objectives that treat token
        kinds differently: ``context_mask`` (tokens with context offsets), ``cls_mask`` (the CLS position; position 0
        of the window when ``cls_index`` is unknown) and, when ``sequence_ids`` is known, ``question_mask``.
        """
        rows = [self.input_ids[i] for i in indices]
        width = max(max(len(r) for r in rows), pad_to or 0)
        n = len(rows)
        input_ids = np.full((n, width), self.pad_token_id, dtype=np.int64)
        attention = np.zeros((n, width), dtype=np.int64)
        types = np.full((n, width), self.pad_token_type_id, dtype=np.int64) if self.token_type_ids is not None else None
        context = np.zeros((n, width), dtype=bool)
        question = np.zeros((n, width), dtype=bool) if self.sequence_ids is not None else None
        cls = np.zeros((n, width), dtype=bool)
        shift = np.zeros(n, dtype=np.int64)
        for j, (i, row) in enumerate(zip(indices, rows, strict=True)):
            sl = slice(0, len(row)) if self.pad_on_right else slice(width - len(row), width)
            shift[j] = 0 if self.pad_on_right else width - len(row)
            input_ids[j, sl] = row
            attention[j, sl] = 1
            if types is not None:
                types[j, sl] = self.token_type_ids[i]
            context[j, sl] = self.context_offsets[i][:, 0] != -1
            if question is not None:
                question[j, sl] = self.sequence_ids[i] == self.question_sequence_id
            cls[j, shift[j] + (int(self.cls_index[i]) if self.cls_index is not None else 0)] = True
        batch = {"input_ids": torch.from_numpy(input_ids), "attention_mask": torch.from_numpy(attention)}
        if types is not None:
            batch["token_type_ids"] = torch.from_numpy(types)
        batch["context_mask"] = torch.from_numpy(context)
        batch["cls_mask"] = torch.from_numpy(cls)
        if question is not None:
            batch["question_mask"] = torch.from_numpy(question)
        if self.start_positions is not None and self.end_positions is not None:
            idx = np.asarray(indices)
            batch["start_positions"] = torch.from_numpy(self.start_positions[idx] + shift)
            batch["end_positions"] = torch.from_numpy(self.end_positions[idx] + shift)
        return batch


def _first_answer(answers: Mapping[str, Any]) -> tuple[int, str] | None:
    texts, starts = answers["text"], answers["answer_start"]
    if len(texts) == 0:
        return None
    return int(starts[0]), str(texts[0])


def featurize(
    frame: pd.DataFrame,
    tokenizer: Any,
    *,
    max_length: int = 384,
    stride: int = 128,
    labels: bool = True,
    chunk_size: int = 2000,
) -> QAFeatures:
    """Split every (question, context) pair into overlapping windows and, with ``labels``, label each window.

    Labels follow run_qa.py with one fix: the start/end search stays inside the context tokens (run_qa walks past the
    last context token into [SEP]/padding when the answer starts in the final token of a window).
    """
    pad_on_right = tokenizer.padding_side == "right"
    ctx_seq = 1 if pad_on_right else 0
    cls_id = tokenizer.cls_token_id
    questions = [str(q).lstrip() for q in frame["question"]]
    contexts = [str(c) for c in frame["context"]]
    answers = list(frame["answers"]) if labels else None
    want_types = "token_type_ids" in tokenizer.model_input_names
    out_ids: list[np.ndarray] = []
    out_types: list[np.ndarray] = []
    out_offsets: list[np.ndarray] = []
    out_example: list[int] = []
    out_seq: list[np.ndarray] = []
    out_cls: list[int] = []
    starts: list[int] = []
    ends: list[int] = []
    for lo in range(0, len(questions), chunk_size):
        qs, cs = questions[lo : lo + chunk_size], contexts[lo : lo + chunk_size]
        try:
            enc = tokenizer(
                qs if pad_on_right else cs,
                cs if pad_on_right else qs,
                truncation="only_second" if pad_on_right else "only_first",
                max_length=max_length,
                stride=stride,
                return_overflowing_tokens=True,
                return_offsets_mapping=True,
                return_token_type_ids=want_types,
                padding=False,
            )
        except Exception as exc:  # the fast tokenizers' message does not say which setting to change
            raise ValueError(
                f"tokenising questions {lo}..{lo + len(qs) - 1} with max_length={max_length}, stride={stride} failed "
                f"({exc}); a question may be too long for the window: raise max_length or lower stride"
            ) from exc
        for i, sample in enumerate(enc["overflow_to_sample_mapping"]):
            ex = lo + int(sample)
            ids = np.asarray(enc["input_ids"][i], dtype=np.int64)
            seq_ids = np.array([-1 if s is None else s for s in enc.sequence_ids(i)], dtype=np.int8)
            offsets = np.asarray(enc["offset_mapping"][i], dtype=np.int64).reshape(-1, 2)
            in_ctx = seq_ids == ctx_seq
            offsets[~in_ctx] = -1
            out_ids.append(ids)
            if want_types:
                out_types.append(np.asarray(enc["token_type_ids"][i], dtype=np.int64))
            out_offsets.append(offsets)
            out_example.append(ex)
            out_seq.append(seq_ids)
            cls_index = int(np.flatnonzero(ids == cls_id)[0]) if cls_id is not None and (ids == cls_id).any() else 0
            out_cls.append(cls_index)
            if answers is None:
                continue
            start_tok = end_tok = cls_index
            first = _first_answer(answers[ex])
            ctx_tokens = np.flatnonzero(in_ctx)
            if first is not None and len(ctx_tokens):
                start_char, text = first
                end_char = start_char + len(text)
                if offsets[ctx_tokens[0], 0] <= start_char and offsets[ctx_tokens[-1], 1] >= end_char:
                    # last context token starting at or before the answer, first one ending at or after it
                    start_tok = int(ctx_tokens[offsets[ctx_tokens, 0] <= start_char][-1])
                    end_tok = int(ctx_tokens[offsets[ctx_tokens, 1] >= end_char][0])
            starts.append(start_tok)
            ends.append(end_tok)
    pad_type = getattr(tokenizer, "pad_token_type_id", 0) or 0
    return QAFeatures(
        input_ids=out_ids,
        token_type_ids=out_types if want_types else None,
        context_offsets=out_offsets,
        example_index=np.asarray(out_example, dtype=np.int64),
        start_positions=np.asarray(starts, dtype=np.int64) if answers is not None else None,
        end_positions=np.asarray(ends, dtype=np.int64) if answers is not None else None,
        example_ids=[str(i) for i in frame["id"]],
        contexts=contexts,
        pad_token_id=int(tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0),
        pad_token_type_id=int(pad_type),
        pad_on_right=pad_on_right,
        sequence_ids=out_seq,
        cls_index=np.asarray(out_cls, dtype=np.int64),
        max_length=int(max_length),
        stride=int(stride),
        tokenizer_name=str(getattr(tokenizer, "name_or_path", "") or type(tokenizer).__name__),
        vocab_size=len(tokenizer),
    )


def training_features(
    frame: pd.DataFrame,
    tokenizer: Any,
    settings: Mapping[str, Any] | None = None,
    *,
    tokenizer_name: str | None = None,
) -> QAFeatures:
    """The labelled windows ``train_qa`` trains on; the one place that decides them.

    Per-feature logits of bias and teacher models (``infer_feature_logits``) are addressed by the index of these
    windows, so producer and consumer must call this same function with the same ``max_length``/``stride`` (the only
    settings that matter here) and the same tokenizer. ``tokenizer_name`` is recorded on the features for their
    fingerprint: the model name *as configured* (``train_qa`` records ``model_name_or_path``), not the tokenizer's
    resolved path, which differs between machines for embedded and local models.
    """
    s = resolve_settings(settings)
    features = featurize(frame, tokenizer, max_length=int(s["max_length"]), stride=int(s["stride"]), labels=True)
    if tokenizer_name is not None:
        features.tokenizer_name = str(tokenizer_name)
    return features


# ---------------------------------------------------------------------------------------------------------------------
# Post-processing
# ---------------------------------------------------------------------------------------------------------------------


def best_span(
    start_logits: np.ndarray,
    end_logits: np.ndarray,
    context_offsets: np.ndarray,
    *,
    n_best: int = 20,
    max_answer_length: int = 30,
) -> tuple[float, int, int] | None:
    """The best (score, start token, end token) of one window, or None if no candidate is valid.

    Candidates are the ``n_best`` highest start and end logits (run_qa order: descending, ties by later index);
    a pair is valid if both tokens lie in the context, end >= start and it spans at most ``max_answer_length`` tokens.
    Among equal scores the first pair in (start rank, end rank) order wins, as run_qa's stable sort does.
    """
    n = min(len(start_logits), len(end_logits), len(context_offsets))
    start_logits, end_logits = np.asarray(start_logits[:n], float), np.asarray(end_logits[:n], float)
    in_ctx = context_offsets[:n, 0] >= 0
    s_idx = np.argsort(start_logits, kind="stable")[::-1][:n_best]
    e_idx = np.argsort(end_logits, kind="stable")[::-1][:n_best]
    s, e = np.meshgrid(s_idx, e_idx, indexing="ij")
    valid = in_ctx[s] & in_ctx[e] & (e >= s) & (e - s + 1 <= max_answer_length)
    if not valid.any():
        return None
    scores = np.where(valid, start_logits[s] + end_logits[e], -np.inf)
    k = int(np.argmax(scores))
    return float(scores.flat[k]), int(s.flat[k]), int(e.flat[k])


def postprocess_predictions(
    features: QAFeatures,
    start_logits: Sequence[np.ndarray],
    end_logits: Sequence[np.ndarray],
    *,
    n_best: int = 20,
    max_answer_length: int = 30,
) -> dict[str, str]:
    """Map per-window logits (unpadded, aligned with ``features``) to one answer string per example."""
    best: dict[int, tuple[float, int, int, int]] = {}
    for f in range(len(features)):
        span = best_span(
            start_logits[f],
            end_logits[f],
            features.context_offsets[f],
            n_best=n_best,
            max_answer_length=max_answer_length,
        )
        if span is None:
            continue
        ex = int(features.example_index[f])
        if ex not in best or span[0] > best[ex][0]:
            best[ex] = (span[0], f, span[1], span[2])
    predictions: dict[str, str] = {}
    for ex, example_id in enumerate(features.example_ids):
        if ex not in best:
            predictions[example_id] = ""
            continue
        _, f, s, e = best[ex]
        offsets = features.context_offsets[f]
        predictions[example_id] = features.contexts[ex][offsets[s, 0] : offsets[e, 1]]
    return predictions


# ---------------------------------------------------------------------------------------------------------------------
# Model running helpers
# ---------------------------------------------------------------------------------------------------------------------


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


def _model_outputs(
    model: Any, batch: Mapping[str, torch.Tensor], device: torch.device, bf16: bool, *, hidden: bool = False
) -> tuple[Any, Any, Any]:
    """Start logits, end logits and, with ``hidden``, the last hidden state ``[B, W, H]`` (else None).

    Hidden states are requested only when needed: returning all layers costs memory on long windows.
    """
    inputs = {k: batch[k].to(device, non_blocking=True) for k in _MODEL_INPUT_KEYS if k in batch}
    with autocast(device, bf16):
        out = model(**inputs, output_hidden_states=True) if hidden else model(**inputs)
    return out.start_logits, out.end_logits, (out.hidden_states[-1] if hidden else None)


def _forward(model: Any, batch: Mapping[str, torch.Tensor], device: torch.device, bf16: bool) -> tuple[Any, Any]:
    start, end, _ = _model_outputs(model, batch, device, bf16)
    return start, end


def _plain_loss(model: Any, batch: Mapping[str, torch.Tensor], device: torch.device, bf16: bool) -> torch.Tensor:
    """``qa_loss`` of the model on a collated batch: the training loss without an objective, and every validation
    loss."""
    start, end = _forward(model, batch, device, bf16)
    return qa_loss(
        start,
        end,
        batch["start_positions"].to(device),
        batch["end_positions"].to(device),
        batch["attention_mask"].to(device),
    )


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
) -> float:
    """Mean QA loss over all labelled windows of ``features`` (windows sorted by length to pad little).

    ``should_stop`` is polled between batches so a preemption signal does not wait for a long evaluation; the
    evaluation is then abandoned (``StopRequested``) and redone after resumption.
    """
    if features.start_positions is None:
        raise ValueError("validation_loss needs labelled features (featurize(..., labels=True))")
    device = _model_device(model)
    was_training = model.training
    model.eval()
    order = np.argsort(features.lengths, kind="stable")
    total, count = 0.0, 0
    try:
        for lo in range(0, len(order), batch_size):
            if should_stop is not None and should_stop():
                raise StopRequested
            idx = order[lo : lo + batch_size]
            batch = features.collate(idx)
            loss = _plain_loss(model, batch, device, bf16)
            total += float(loss) * len(idx)
            count += len(idx)
    finally:
        model.train(was_training)
    return total / max(count, 1)


@torch.no_grad()
def predict_logits(
    model: Any, features: QAFeatures, *, batch_size: int = 64, bf16: bool = False, log: LogFn | None = None
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Start/end logits of every window (unpadded, float32), batched by length for speed."""
    device = _model_device(model)
    was_training = model.training
    model.eval()
    starts: list[np.ndarray] = [np.empty(0, np.float32)] * len(features)
    ends: list[np.ndarray] = [np.empty(0, np.float32)] * len(features)
    lengths = features.lengths
    order = np.argsort(lengths, kind="stable")
    n_batches = math.ceil(len(order) / batch_size)
    t0 = time.perf_counter()
    try:
        for b, lo in enumerate(range(0, len(order), batch_size)):
            idx = order[lo : lo + batch_size]
            batch = features.collate(idx)
            s, e = _forward(model, batch, device, bf16)
            s, e = s.float().cpu().numpy(), e.float().cpu().numpy()
            width = s.shape[1]
            for j, f in enumerate(idx):
                sl = slice(0, lengths[f]) if features.pad_on_right else slice(width - lengths[f], width)
                starts[f], ends[f] = s[j, sl].copy(), e[j, sl].copy()
            if log is not None and (b + 1) % 20 == 0:
                rate = (lo + len(idx)) / (time.perf_counter() - t0)
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
    bf16 = use_bf16(s["bf16"], _model_device(model))
    starts, ends = predict_logits(model, features, batch_size=s["eval_batch_size"], bf16=bf16, log=log)
    return postprocess_predictions(features, starts, ends, n_best=s["n_best"], max_answer_length=s["max_answer_length"])


def predict_qa(
    model_dir: str | os.PathLike,
    qa_frame: pd.DataFrame,
    *,
    settings: Mapping[str, Any] | None = None,
    log: LogFn | None = None,
) -> dict[str, str]:
    """Answer every question of ``qa_frame`` with the model in ``model_dir``: ``{id: prediction text}``.

    Uses the same featurisation settings as training (``max_length``, ``stride``), ``eval_batch_size``, ``device``
    and ``bf16`` from ``settings``; other keys are ignored, so the training settings can be passed as they are.
    """
    s = resolve_settings(settings)
    if s["threads"]:
        torch.set_num_threads(int(s["threads"]))
    device = pick_device(s["device"])
    tokenizer = load_tokenizer(model_dir)
    model = load_qa_model(model_dir).to(device)
    emit = log or logger.info
    t0 = time.perf_counter()
    predictions = predict_with_model(model, tokenizer, qa_frame, settings=s, log=emit)
    emit(f"predict: {len(qa_frame)} questions in {time.perf_counter() - t0:.1f}s on {device}")
    return predictions


def _load_trained_qa_model(model_dir: str | os.PathLike) -> Any:
    """Load a QA model that must already have a trained QA head: a freshly initialised one would give random logits."""
    from transformers import AutoModelForQuestionAnswering

    from spurious.thinktwice import overlap_qa  # noqa: F401  (registers the overlap bias model's type)

    with quiet_transformers():
        model, info = AutoModelForQuestionAnswering.from_pretrained(resolve_model(model_dir), output_loading_info=True)
    missing = sorted(info.get("missing_keys") or [])
    if missing:
        raise ValueError(
            f"{model_dir} is not a fine-tuned QA model ({len(missing)} weights missing, first: "
            f"{', '.join(missing[:3])}); per-feature logits must come from a trained bias or teacher model"
        )
    return model


def _check_shared_vocabulary(model: Any, model_dir: str | os.PathLike, tokenizer: Any, tokenizer_from: str) -> None:
    """The producer reads the consumer's token ids, so both must share one vocabulary (reference-notes §B.2, §J.3).

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
    ``frame`` and store them aligned to those windows (``spurious.core.logits``); returns the features' fingerprint.

    The windows are made exactly as ``train_qa`` makes them (``training_features`` with the tokenizer of
    ``tokenizer_from``, the main model, and the main run's ``max_length``/``stride``), so row ``i`` of the store is the
    ``feature_index`` ``i`` a training objective receives. ``tokenizer_from`` must be the main model's name exactly as
    the consuming ``train_qa`` gets it (``model_name_or_path``): it is the fingerprint's tokenizer name. ``eval_batch_size``, ``device``, ``bf16`` and ``threads``
    only affect speed (bf16 rounds the stored logits).
    """
    s = resolve_settings(settings)
    emit = log or logger.info
    if s["threads"]:
        torch.set_num_threads(int(s["threads"]))
    device = pick_device(s["device"])
    tokenizer = load_tokenizer(tokenizer_from)
    model = _load_trained_qa_model(model_dir)
    _check_shared_vocabulary(model, model_dir, tokenizer, str(tokenizer_from))
    model.to(device)
    features = training_features(frame, tokenizer, s, tokenizer_name=os.fspath(tokenizer_from))
    fingerprint = features_fingerprint(features)
    t0 = time.perf_counter()
    starts, ends = predict_logits(
        model, features, batch_size=int(s["eval_batch_size"]), bf16=use_bf16(s["bf16"], device), log=emit
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
    return json.loads(state_file.read_text()).get("saved_step")


# ---------------------------------------------------------------------------------------------------------------------
# Training
# ---------------------------------------------------------------------------------------------------------------------


@dataclass
class _TrainState:
    """Everything besides tensors that a resumed run needs to continue exactly (saved as ``state.json``)."""

    step: int = 0
    epoch: int = 0
    batch_in_epoch: int = 0  # micro-batches of the current epoch's permutation already consumed
    best_step: int | None = None
    best_loss: float | None = None
    bad_evals: int = 0
    last_eval_step: int = 0
    stopped_early: bool = False
    train_losses: list[dict[str, float]] = field(default_factory=list)
    validation_losses: list[dict[str, float]] = field(default_factory=list)
    wall_time_s: float = 0.0  # of earlier (interrupted) segments
    fingerprint: str = ""
    # with a custom checkpoint selection: its best score (higher is better) and every evaluation's score and info
    best_score: float | None = None
    selection_history: list[dict[str, Any]] = field(default_factory=list)
    # validation losses on the extra validation frames, by name
    validation_curves: dict[str, list[dict[str, float]]] = field(default_factory=dict)


def select_eval_subset(frame: pd.DataFrame, max_examples: int | None) -> pd.DataFrame:
    """A fixed, seeded subset of ``max_examples`` questions (original order kept), or the whole frame."""
    if not max_examples or max_examples >= len(frame):
        return frame
    return sample_questions(frame, max_examples=int(max_examples), seed=EVAL_SUBSET_SEED)


def _fingerprint(
    model_name: str,
    settings: Mapping[str, Any],
    train: QAFeatures,
    valid: QAFeatures,
    extra: Mapping[str, Any] | None = None,
) -> str:
    """Identify a run, so a checkpoint of another run (changed data or settings) is never resumed silently.

    ``extra`` entries that are None are left out, so a plain run keeps the fingerprint it had before the objective,
    selection and extra-validation options existed (its checkpoints stay resumable).
    """
    payload = {
        "model": model_name,
        "settings": {k: v for k, v in sorted(settings.items()) if k not in _RUNTIME_KEYS},
        "train": ids_sha256(train.example_ids),
        "n_train_features": len(train),
        "valid": ids_sha256(valid.example_ids),
        **{k: v for k, v in (extra or {}).items() if v is not None},
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()[:16]


INIT_MODES = ("pretrained", "scratch", "overlap")


def _initial_model(model_name_or_path: str, init: str | None) -> Any:
    """The model training starts from: the checkpoint's weights, or (``scratch``) fresh weights of its architecture.

    Scratch weights are drawn from torch's global RNG, which ``train_qa`` seeds first, so they are reproducible.
    """
    if init in (None, "pretrained"):
        return load_qa_model(model_name_or_path)
    if init == "overlap":  # the lexical-overlap bias model on the checkpoint's frozen embeddings (spurious.thinktwice.overlap_qa)
        from spurious.thinktwice.overlap_qa import from_checkpoint

        return from_checkpoint(model_name_or_path)
    if init != "scratch":
        raise ValueError(f"train_qa: unknown init {init!r}; known: {', '.join(INIT_MODES)}")
    return load_qa_model(model_name_or_path, from_scratch=True)


TRAINABLE = ("all", "head")


def _restrict_training(model: torch.nn.Module, trainable: str) -> None:
    """``"head"``: freeze every parameter but the span-prediction head's (``qa_outputs``); ``"all"``: nothing."""
    if trainable not in TRAINABLE:
        raise ValueError(f"train_qa: unknown trainable {trainable!r}; known: {', '.join(TRAINABLE)}")
    if trainable == "all":
        return
    head = [name for name, _ in model.named_parameters() if name.startswith("qa_outputs.")]
    if not head:
        raise ValueError(f"train_qa: trainable='head' needs a 'qa_outputs' head; {type(model).__name__} has none")
    for name, param in model.named_parameters():
        param.requires_grad_(name.startswith("qa_outputs."))


ObjectiveFactory = Callable[[QAFeatures], torch.nn.Module]
SelectionFn = Callable[[Any, Any], tuple[float, Mapping[str, Any]]]
# Keys of a train_losses row; an objective's logged values may not shadow them.
_TRAIN_ROW_KEYS = frozenset({"step", "loss", "lr"})


def _objective_description(objective_factory: ObjectiveFactory | None, objective_id: str | None) -> str | None:
    """The factory's ``.fingerprint``; a factory without one needs an ``objective_id`` (a loud error otherwise).

    A closure cannot be hashed stably, and a run whose objective is not identified could resume a checkpoint of a
    different objective (a plain run's into an LMix run), which must never happen silently.
    """
    if objective_factory is None:
        return None
    described = getattr(objective_factory, "fingerprint", None)
    if described is None and objective_id is None:
        raise ValueError(
            "train_qa: objective_factory has no .fingerprint attribute; pass objective_id (a string that changes "
            "whenever the objective or its inputs change) so that checkpoints of other runs are never resumed"
        )
    return None if described is None else str(described)


def _build_objective(
    objective_factory: ObjectiveFactory | None, features: QAFeatures, device: torch.device
) -> torch.nn.Module | None:
    """Call the factory once with the training features; the objective lives on the model's device."""
    if objective_factory is None:
        return None
    objective = objective_factory(features)
    if not isinstance(objective, torch.nn.Module) or not hasattr(objective, "needs_hidden_states"):
        raise TypeError(
            "train_qa: objective_factory must return a torch.nn.Module with a needs_hidden_states attribute and "
            f"forward(start_logits, end_logits, hidden_states, batch, feature_index); got {type(objective).__name__}"
        )
    objective.to(device)
    objective.train()
    return objective


def _optimizer_groups(model: torch.nn.Module, objective: torch.nn.Module | None, weight_decay: float) -> list[dict]:
    """The model's parameter groups with the objective's parameters (same decay rules) appended to them.

    Appending keeps a plain run's optimizer exactly as before, and a resumed run rebuilds the same parameter order.
    """
    groups = param_groups(model, weight_decay)
    if objective is not None:
        for group, extra in zip(groups, param_groups(objective, weight_decay), strict=True):
            group["params"] = group["params"] + extra["params"]
    return groups


def _objective_loss(
    objective: torch.nn.Module,
    model: Any,
    batch: Mapping[str, torch.Tensor],
    feature_index: np.ndarray,
    device: torch.device,
    bf16: bool,
) -> tuple[torch.Tensor, dict[str, float]]:
    """The objective's training loss on one micro-batch (all batch tensors moved to the device first).

    The objective runs under the model's autocast, so its own layers see the dtype the model's head sees; it should
    compute log-softmaxes and cross-entropies in float32 (autocast does that for the torch functions).
    """
    on_device = {k: v.to(device, non_blocking=True) for k, v in batch.items()}
    start, end, hidden = _model_outputs(model, on_device, device, bf16, hidden=bool(objective.needs_hidden_states))
    with autocast(device, bf16):
        loss, info = objective(start, end, hidden, on_device, feature_index)
    clash = sorted(_TRAIN_ROW_KEYS & set(info))
    if clash:
        raise ValueError(f"the training objective logs {clash}, which are reserved for the training-loss rows")
    return loss, {k: float(v.detach()) if isinstance(v, torch.Tensor) else float(v) for k, v in info.items()}


def _plain_value(v: Any) -> Any:
    """numpy/torch scalars as Python numbers, so the value can go into state.json."""
    return v.item() if hasattr(v, "item") else v


def _run_selection(selection: SelectionFn, model: Any, tokenizer: Any) -> tuple[float, dict[str, Any]]:
    """Score the current model (eval mode, no gradients), leaving the training RNG streams untouched.

    Restoring the RNG states makes the training trajectory independent of whatever the selection does, so a run with
    a selection follows the same steps as one without until early stopping separates them.
    """
    rng = rng_states()
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            score, info = selection(model, tokenizer)
    finally:
        model.train(was_training)
        set_rng_states(rng)
    info = {k: _plain_value(v) for k, v in dict(info).items()}
    clash = sorted({"step", "score"} & set(info))
    if clash:
        raise ValueError(f"the checkpoint selection returns info keys {clash}, which are reserved")
    return float(score), info


def _improves(score: float, best: float | None) -> bool:
    """Higher is better; a NaN score never improves, the first other one always does."""
    return not math.isnan(score) and (best is None or score > best)


def _eval_frames(
    valid_frame: pd.DataFrame,
    extra_validation: Mapping[str, pd.DataFrame] | None,
    tokenizer: Any,
    s: Mapping[str, Any],
) -> dict[str, tuple[pd.DataFrame, QAFeatures]]:
    """The (seeded) ``eval_max_examples`` subset and its labelled windows of every validation frame, by name."""
    frames = {"validation": valid_frame, **dict(extra_validation or {})}
    if extra_validation and "validation" in extra_validation:
        raise ValueError("extra_validation may not use the name 'validation' (it is the main validation frame)")
    out = {}
    for name, frame in frames.items():
        subset = select_eval_subset(frame, s["eval_max_examples"])
        out[name] = (subset, featurize(subset, tokenizer, max_length=s["max_length"], stride=s["stride"]))
    return out


def segment_gap_selection(
    biased_frame: pd.DataFrame,
    unbiased_frame: pd.DataFrame,
    *,
    settings: Mapping[str, Any] | None = None,
    max_examples: int | None = None,
    max_unbiased_f1: float | None = None,
) -> SelectionFn:
    """A checkpoint selection for bias models: F1 on the biased minus F1 on the unbiased validation segment.

    The reference keeps the bias-model checkpoint whose F1 differs most between the biased and the unbiased segment
    (App. B.2.1; reference-notes §A.4): the most *biased* model, not the most accurate one. ``max_examples`` takes the
    same seeded subset of each frame as ``eval_max_examples`` does (the reference evaluates 200 rows of each).
    ``max_unbiased_f1`` restricts the choice to checkpoints whose F1 on the unbiased segment stays below it (their
    score is NaN otherwise, which never improves): a bias model that answers unbiased questions well is a general QA
    model, and LMix/CReg would then remove the task instead of the shortcut. The gap is recorded as ``f1_gap`` either
    way. The returned function carries a ``fingerprint`` for the run fingerprint.
    """
    from spurious.core.metrics import evaluate

    s = resolve_settings(settings)
    biased = select_eval_subset(biased_frame, max_examples)
    unbiased = select_eval_subset(unbiased_frame, max_examples)

    def select(model: Any, tokenizer: Any) -> tuple[float, dict[str, float]]:
        scores = {}
        for name, frame in (("biased", biased), ("unbiased", unbiased)):
            result = evaluate(frame, predict_with_model(model, tokenizer, frame, settings=s))
            scores[f"f1_{name}"], scores[f"em_{name}"] = result["f1"], result["exact_match"]
        scores["f1_gap"] = scores["f1_biased"] - scores["f1_unbiased"]
        if max_unbiased_f1 is not None and not scores["f1_unbiased"] < max_unbiased_f1:
            return math.nan, scores
        return scores["f1_gap"], scores

    described = {
        "kind": "segment_gap",
        **({"max_unbiased_f1": float(max_unbiased_f1)} if max_unbiased_f1 is not None else {}),
        "biased": ids_sha256([str(i) for i in biased["id"]]),
        "unbiased": ids_sha256([str(i) for i in unbiased["id"]]),
        "settings": {k: s[k] for k in ("max_length", "stride", "n_best", "max_answer_length")},
    }
    select.fingerprint = hashlib.sha256(json.dumps(described, sort_keys=True).encode()).hexdigest()[:16]
    return select


def train_qa(
    train_frame: pd.DataFrame,
    valid_frame: pd.DataFrame,
    *,
    model_name_or_path: str,
    output_dir: str | os.PathLike,
    checkpoint_dir: str | os.PathLike,
    settings: Mapping[str, Any] | None = None,
    log: LogFn | None = None,
    objective_factory: ObjectiveFactory | None = None,
    objective_id: str | None = None,
    selection: SelectionFn | None = None,
    extra_validation: Mapping[str, pd.DataFrame] | None = None,
    init: str | None = None,
    trainable: str = "all",
) -> dict[str, Any]:
    """Fine-tune an extractive QA model; save the best (lowest validation loss) model to ``output_dir``.

    Resumes exactly from the newest checkpoint in ``checkpoint_dir`` if one exists (same data order, optimizer,
    schedule, RNG and early-stopping state), so a preempted job simply reruns. The caller deletes ``checkpoint_dir``
    after success. Returns the training summary (also written to ``output_dir/training_state.json``).

    Options for debiasing and bias models (none of them changes a run that does not use them):

    * ``objective_factory(train_features) -> module`` replaces ``qa_loss`` in *training* steps by the module's
      ``forward(start_logits, end_logits, hidden_states, batch, feature_index) -> (loss, {name: float})``. It is
      called once; the module's ``needs_hidden_states`` asks for the last hidden state ``[B, W, H]``;
      ``feature_index`` holds the rows of ``train_features`` in the micro-batch (the index of per-feature logits,
      ``spurious.core.logits``); ``batch`` holds the model inputs, labels and the ``context_mask``/``question_mask``/
      ``cls_mask`` of ``QAFeatures.collate``, on the device. Its parameters are trained with the model (same weight
      decay rules, same gradient clipping), its state is checkpointed, and its logged values go to the progress line
      and the ``train_losses`` rows. The validation loss stays the plain ``qa_loss``: the reference validates
      without bias or teacher terms (reference-notes §C.2), and the losses stay comparable across methods.
      The objective must be identified for the run fingerprint: by the factory's ``fingerprint`` attribute or by
      ``objective_id`` (both go into the fingerprint and the summary).
    * ``selection(model, tokenizer) -> (score, info)`` (higher is better), evaluated at every evaluation point; the
      kept checkpoint and early stopping then follow it instead of the validation loss (``segment_gap_selection``
      for bias models). The summary records ``selection_history``, ``best_step`` and ``best_score``.
    * ``extra_validation``: frames whose plain validation loss is recorded at every evaluation, e.g. OOD sets
      (``validation_curves`` in the summary, the main one under ``"validation"``); ``eval_max_examples`` applies.
    * ``init``: ``"pretrained"`` (or None, the default) starts from the checkpoint's weights; ``"scratch"`` from
      randomly initialised weights of its architecture (the paper's bias models; App. B.2.1); ``"overlap"`` trains
      the lexical-overlap bias model of :mod:`spurious.thinktwice.overlap_qa` on the checkpoint's frozen word embeddings.
    * ``trainable``: ``"all"`` (default) or ``"head"``: only the span-prediction head (``qa_outputs``) is trained, the
      encoder stays as initialised (a restricted bias model that a CPU can afford).
    """
    s = resolve_settings(settings)
    emit = log or logger.info
    t_start = time.perf_counter()
    if s["threads"]:
        torch.set_num_threads(int(s["threads"]))
    device = pick_device(s["device"])
    bf16 = use_bf16(s["bf16"], device)
    output_dir, checkpoint_dir = Path(output_dir), Path(checkpoint_dir)
    objective_fingerprint = _objective_description(objective_factory, objective_id)

    seed_everything(int(s["seed"]))
    tokenizer = load_tokenizer(model_name_or_path)
    model = _initial_model(model_name_or_path, init)
    _restrict_training(model, trainable)
    train_features = training_features(train_frame, tokenizer, s, tokenizer_name=str(model_name_or_path))
    if len(train_features) == 0:
        raise ValueError("the training frame is empty")
    evals = _eval_frames(valid_frame, extra_validation, tokenizer, s)
    valid_subset, valid_features = evals["validation"]
    extra_features = {name: feats for name, (_, feats) in evals.items() if name != "validation"}
    model.to(device)
    model.train()
    objective = _build_objective(objective_factory, train_features, device)

    batch_size, accum = int(s["batch_size"]), int(s["gradient_accumulation_steps"])
    micro_per_epoch = math.ceil(len(train_features) / batch_size)
    steps_per_epoch = math.ceil(micro_per_epoch / accum)
    total_steps = int(s["max_steps"]) if s["max_steps"] else math.ceil(float(s["epochs"]) * steps_per_epoch)
    warmup_steps = math.ceil(float(s["warmup_ratio"]) * total_steps)
    optimizer = torch.optim.AdamW(
        _optimizer_groups(model, objective, float(s["weight_decay"])),
        lr=float(s["learning_rate"]),
        betas=(0.9, 0.999),
        eps=1e-8,
    )
    clipped = list(model.parameters()) + (list(objective.parameters()) if objective is not None else [])
    from transformers import get_linear_schedule_with_warmup

    scheduler = get_linear_schedule_with_warmup(optimizer, warmup_steps, total_steps)
    pad_to = int(s["max_length"]) if s["pad_to_max_length"] else None
    eval_every = int(s["eval_every"] or 0)
    patience = s["early_stopping_patience"]
    selection_description = None if selection is None else str(getattr(selection, "fingerprint", "custom"))

    run_options = {
        "init": None if init in (None, "pretrained") else init,
        **({"trainable": trainable} if trainable != "all" else {}),
        "objective": objective_id,
        "objective_factory": objective_fingerprint,
        "selection": selection_description,
        "extra_validation": {n: ids_sha256(f.example_ids) for n, f in extra_features.items()} or None,
    }
    state = _TrainState(
        fingerprint=_fingerprint(str(model_name_or_path), s, train_features, valid_features, run_options)
    )
    best_weights: dict[str, torch.Tensor] | None = None
    resumed_from: int | None = None
    ckpt = latest_checkpoint(checkpoint_dir)
    if ckpt is not None:
        saved = _TrainState(**json.loads((ckpt / "state.json").read_text()))
        if saved.fingerprint != state.fingerprint:
            raise RuntimeError(
                f"checkpoint {ckpt} belongs to a different run (other data, model, settings or training objective); "
                f"delete {checkpoint_dir} to start afresh"
            )
        load = restore_checkpoint(ckpt, model, optimizer, scheduler)
        if objective is not None:
            objective.load_state_dict(load(OBJECTIVE_STATE_FILE))
        if s["keep_best"] and saved.best_step is not None:
            best_weights = (
                load("best_model.pt") if (ckpt / "best_model.pt").is_file() else cpu_copy(model.state_dict())
            )
        state = saved
        resumed_from = state.step
        emit(f"resuming from {ckpt} (step {state.step}/{total_steps})")

    def checkpoint() -> Path:
        state.wall_time_s += time.perf_counter() - segment_start[0]
        segment_start[0] = time.perf_counter()
        return save_checkpoint(checkpoint_dir, model, optimizer, scheduler, state, best_weights, objective)

    def evaluate() -> None:
        nonlocal best_weights
        t0 = time.perf_counter()

        def loss_on(features: QAFeatures) -> float:
            return validation_loss(
                model, features, batch_size=int(s["eval_batch_size"]), bf16=bf16, should_stop=lambda: guard.triggered
            )

        # everything is computed before the state changes: an evaluation abandoned on preemption leaves no trace
        loss = loss_on(valid_features)
        extra_losses = {name: loss_on(feats) for name, feats in extra_features.items()}
        score, info = _run_selection(selection, model, tokenizer) if selection is not None else (None, {})
        state.validation_losses.append({"step": state.step, "loss": loss})
        for name, value in extra_losses.items():
            state.validation_curves.setdefault(name, []).append({"step": state.step, "loss": value})
        if score is not None:
            state.selection_history.append({"step": state.step, "score": score, **info})
        state.last_eval_step = state.step
        # the selection score (higher is better) decides when there is one, else the validation loss (lower is better)
        if score is not None:
            improved = _improves(score, state.best_score)
        else:
            improved = state.best_loss is None or loss < state.best_loss
        if improved:
            state.best_loss, state.best_step, state.bad_evals = loss, state.step, 0
            state.best_score = score
            if s["keep_best"]:
                best_weights = cpu_copy(model.state_dict())
        else:
            state.bad_evals += 1
        extras = "".join(f", {name} {value:.4f}" for name, value in extra_losses.items())
        if score is None:
            best = f"best {state.best_loss:.4f}"
        else:
            details = ", ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in info.items())
            extras += f"; selection score {score:.4f} ({details})"
            best = f"best score {state.best_score}"
        emit(
            f"eval step {state.step}: validation loss {loss:.4f}{extras} ({best} at step {state.best_step}; "
            f"{state.bad_evals} without improvement) [{len(valid_features)} windows, {time.perf_counter() - t0:.1f}s]"
        )
        if patience and state.bad_evals >= int(patience):
            state.stopped_early = True
            emit(f"early stopping at step {state.step}: no improvement in {patience} evaluations")

    def eval_due() -> bool:
        if state.last_eval_step == state.step or state.step == 0:
            return False
        return state.step >= total_steps or (eval_every > 0 and state.step % eval_every == 0)

    emit(
        f"training {model_name_or_path} on {device}{' (bf16)' if bf16 else ''}: {len(train_frame)} questions -> "
        f"{len(train_features)} windows, {steps_per_epoch} steps/epoch, {total_steps} steps; validation "
        f"{len(valid_subset)} questions -> {len(valid_features)} windows"
        + (f"; objective {objective_id or objective_fingerprint}" if objective is not None else "")
    )
    segment_start = [time.perf_counter()]
    t_rate, step_rate0 = time.perf_counter(), state.step
    window_losses: list[float] = []
    window_info: dict[str, list[float]] = {}
    perm = np.empty(0, dtype=np.int64)
    perm_epoch = -1
    with PreemptionGuard() as guard:
        try:
            if eval_due():  # an evaluation was abandoned when the previous segment was preempted
                evaluate()
            while state.step < total_steps and not state.stopped_early:
                if guard.triggered:
                    raise StopRequested
                if perm_epoch != state.epoch:
                    perm = epoch_order(
                        train_features.lengths,
                        batch_size=batch_size,
                        seed=int(s["seed"]),
                        epoch=state.epoch,
                        group_by_length=bool(s["group_by_length"]),
                    )
                    perm_epoch = state.epoch
                group = min(accum, micro_per_epoch - state.batch_in_epoch)
                step_loss = 0.0
                step_info: dict[str, float] = {}
                for m in range(group):
                    lo = (state.batch_in_epoch + m) * batch_size
                    rows = perm[lo : lo + batch_size]
                    batch = train_features.collate(rows, pad_to=pad_to)
                    if objective is None:
                        loss = _plain_loss(model, batch, device, bf16)
                    else:
                        loss, info = _objective_loss(objective, model, batch, rows, device, bf16)
                        for k, v in info.items():
                            step_info[k] = step_info.get(k, 0.0) + v / group
                    (loss / group).backward()
                    step_loss += float(loss.detach()) / group
                lr = scheduler.get_last_lr()[0]
                if s["max_grad_norm"]:
                    torch.nn.utils.clip_grad_norm_(clipped, float(s["max_grad_norm"]))
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad(set_to_none=True)
                state.step += 1
                state.batch_in_epoch += group
                if state.batch_in_epoch >= micro_per_epoch:
                    state.epoch, state.batch_in_epoch = state.epoch + 1, 0
                state.train_losses.append({"step": state.step, "loss": step_loss, "lr": lr, **step_info})
                window_losses.append(step_loss)
                for k, v in step_info.items():
                    window_info.setdefault(k, []).append(v)
                if state.step % max(1, int(s["log_every"])) == 0 or state.step == total_steps:
                    now = time.perf_counter()
                    rate = (state.step - step_rate0) / max(now - t_rate, 1e-9)
                    logged = "".join(f" {k} {np.mean(v):.4g}" for k, v in window_info.items())
                    emit(
                        f"step {state.step}/{total_steps} (epoch {state.step / steps_per_epoch:.2f}) loss "
                        f"{np.mean(window_losses):.4f}{logged} lr {lr:.2e} | {rate:.2f} steps/s, "
                        f"{rate * batch_size * accum:.1f} windows/s | ETA {format_eta((total_steps - state.step) / rate)}"
                    )
                    window_losses, window_info = [], {}
                if eval_due():
                    evaluate()
                if guard.triggered:
                    raise StopRequested
                every = int(s["checkpoint_every"] or 0)
                if every and state.step % every == 0 and state.step < total_steps and not state.stopped_early:
                    checkpoint()  # not after the last step: the model is saved to output_dir next
            if eval_due():
                evaluate()
        except StopRequested:
            path = checkpoint()
            assert guard.signum is not None
            emit(f"received {signal.Signals(guard.signum).name}: checkpoint saved at step {state.step} in {path}")
            raise TrainingPreempted(guard.signum, state.step, path) from None

    if s["keep_best"] and best_weights is not None:
        model.load_state_dict(best_weights)
    saved_step = state.best_step if s["keep_best"] and state.best_step is not None else state.step
    segment = time.perf_counter() - segment_start[0]
    import transformers

    summary: dict[str, Any] = {
        "model_name_or_path": str(model_name_or_path),
        "resolved_model": resolve_model(model_name_or_path),
        "steps": state.step,
        "total_steps": total_steps,
        "steps_per_epoch": steps_per_epoch,
        "epochs_done": state.step / steps_per_epoch,
        "saved_step": saved_step,
        "best_step": state.best_step,
        "best_validation_loss": state.best_loss,
        "validation_losses": state.validation_losses,
        "validation_curves": {"validation": state.validation_losses, **state.validation_curves},
        "validation_sets": {
            name: {"n_examples": len(subset), "n_features": len(feats)} for name, (subset, feats) in evals.items()
        },
        "init": init or "pretrained",
        "trainable": trainable,
        "objective_id": objective_id,
        "objective_fingerprint": objective_fingerprint,
        "selection": selection_description,
        "best_score": state.best_score,
        "selection_history": state.selection_history,
        "train_losses": state.train_losses,
        "stopped_early": state.stopped_early,
        "resumed_from_step": resumed_from,
        "device": str(device),
        "bf16": bf16,
        "threads": torch.get_num_threads(),
        "wall_time_s": time.perf_counter() - t_start,
        "train_wall_time_s": state.wall_time_s + segment,
        "n_train_examples": len(train_frame),
        "n_train_features": len(train_features),
        "n_valid_examples": len(valid_subset),
        "n_valid_features": len(valid_features),
        "settings": s,
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__},
    }
    save_model_dir(output_dir, model, tokenizer, summary)
    score_note = f", selection score {state.best_score}" if selection is not None else ""
    emit(
        f"saved the model of step {saved_step} (validation loss {state.best_loss}{score_note}) to {output_dir}; "
        f"{state.step} steps in {summary['train_wall_time_s']:.0f}s"
    )
    return summary


