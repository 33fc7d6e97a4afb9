"""Sequence classification: fine-tuning with per-example loss weights and resumable checkpoints, and prediction.

Any ``AutoModelForSequenceClassification``-compatible checkpoint works (``embedded:all-MiniLM-L6-v2`` offline). The
loop is the engine's (``spurious.core.train.engine``, on Accelerate): AdamW + linear schedule with warmup, gradient
clipping, a data order that is a pure function of (seed, epoch), exact resumption from the newest checkpoint after
preemption, CUDA + bf16 autocast when available, one process per GPU of the job (``processes``) with the same global
batch. There is no early stopping: the paper trains a fixed number of epochs (Serrano et al. 2023, §4.2) and the model
of the last step is saved, unless ``eval_every`` is set: then the accuracy on a dev frame is measured every
``eval_every`` optimizer steps (or at every epoch end) and after the last step, and the model of the best evaluation
is saved (SpuriousBench, App. A: "evaluate the best checkpoint based on the dev set accuracy").

Prompt-based fine-tuning (``prompt``, ``spurious.core.train.prompt``): the model is a masked LM, the texts are templated
around its mask token, and the logits are its word logits at the mask restricted to the label words; the saved model
directory holds the masked LM and ``prompt.json``, which ``predict_classifier`` detects.

Loss weights (the paper's reweighting, §5.1): each example's cross-entropy is multiplied by its weight and the batch
loss is the mean over the batch, so weights ``q_i·|D|`` (mean 1) keep the loss on the scale of unweighted training.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from spurious.core import readers
from spurious.core.config import result_settings
from spurious.core.errors import rebuild_advice
from spurious.core.models import (
    from_pretrained,
    load_config,
    load_tokenizer,
    model_attention_mask,
    quiet_transformers,
    resolve_model,
)
from spurious.core.train import compiled, packing
from spurious.core.train.checkpoints import TrainState
from spurious.core.train.engine import device_for, run_summary, step_counts, world
from spurious.core.train.engine import train as engine_train
from spurious.core.train.launch import launch, needs_launch, processes_setting
from spurious.core.train.logits import ids_sha256
from spurious.core.train.prompt import (
    PROMPT_FILE,
    PromptClassifier,
    PromptSpec,
    encode_prompts,
    label_word_ids,
    load_masked_lm,
    read_prompt_file,
)
from spurious.core.train.settings import (
    NULL,
    WHOLE,
    ResolvedSettings,
    fill_settings,
    one_of,
    task_defaults,
    task_kinds,
)
from spurious.core.train.tracking import TRACKER_FOLDER
from spurious.core.train.training import (  # TrainingPreempted: what callers of train_classifier catch
    StopRequested,
    autocast,
    pad_multiple,
    padded_width,
    pick_device,
    save_model_dir,
    seed_everything,
    to_device,
    use_bf16,
)
from spurious.core.train.training import (
    TrainingPreempted as TrainingPreempted,
)

logger = logging.getLogger(__name__)
LogFn = Callable[[str], None]

# the order training.json records them in
_ORDER = ("learning_rate", "batch_size", "gradient_accumulation_steps", "epochs", "max_steps", "warmup_ratio",
          "weight_decay", "max_grad_norm", "max_length", "group_by_length", "checkpoint_every", "seed", "device",
          "bf16", "threads", "log_every", "eval_batch_size", "pad_to_multiple_of", "attention", "compile", "tracker",
          "eval_every", "processes")
DEFAULT_SETTINGS: dict[str, Any] = task_defaults(
    _ORDER,
    {
        "batch_size": 32,
        "max_length": 128,
        "eval_batch_size": 128,
        # None, an optimizer-step interval, or "epoch": when to measure dev accuracy and keep the best model
        "eval_every": None,
    },
)
_NULLABLE = frozenset({"max_steps", "threads", "max_grad_norm", "eval_every"})
EVAL_EVERY_EPOCH = "epoch"
KINDS = task_kinds(
    _ORDER,
    {
        "batch_size": (WHOLE,),
        "max_length": (WHOLE,),
        "eval_batch_size": (WHOLE,),
        "eval_every": (WHOLE, NULL, one_of(EVAL_EVERY_EPOCH)),
    },
)
INIT_MODES = ("pretrained", "scratch")
# "bitfit" (Ben-Zaken et al. 2022; SpuriousBench App. A): only the bias terms and the new classification head train
TRAINABLE = ("all", "bitfit")
PREDICTION_COLUMNS = ("id", "label", "prediction", "correct", "probabilities")


def resolve_settings(settings: Mapping[str, Any] | None) -> ResolvedSettings:
    """Fill in defaults; reject unknown keys (a typo would otherwise silently fall back to a default) and an
    ``eval_every`` that is not None, a positive integer or ``"epoch"``. Resolved classification settings are returned
    as they are: resolved once, passed down unchanged."""
    if isinstance(settings, ResolvedSettings) and settings.task == "classification":
        return settings
    s = fill_settings(settings, DEFAULT_SETTINGS, _NULLABLE, "classification")
    packing.check_attention_setting(s["attention"], "classification")
    every = s["eval_every"]
    valid_int = isinstance(every, int | np.integer) and not isinstance(every, bool) and every >= 1
    if not (every is None or valid_int or every == EVAL_EVERY_EPOCH):
        raise ValueError(
            f"classification setting eval_every must be null, a positive number of optimizer steps or "
            f"{EVAL_EVERY_EPOCH!r}, got {every!r}"
        )
    s["compile"] = compiled.check_setting(s["compile"])
    return ResolvedSettings(s, "classification", KINDS)


@dataclass
class Encoded:
    """Tokenised examples (unpadded); batches are padded when collated."""

    input_ids: list[list[int]]
    token_type_ids: list[list[int]] | None
    labels: np.ndarray
    pad_token_id: int
    # prompt-based encodings: the index of each row's mask token (collated as ``mask_positions``)
    mask_positions: np.ndarray | None = None
    # the truncation length: a batch rounded up to a width multiple never grows beyond it
    max_length: int | None = None

    def __len__(self) -> int:
        return len(self.input_ids)

    @property
    def lengths(self) -> np.ndarray:
        return np.fromiter((len(x) for x in self.input_ids), dtype=np.int64, count=len(self.input_ids))

    def batch_width(self, lengths: np.ndarray, multiple: int = 1, packed: bool = False) -> int:
        """The sequence length of a collated batch of rows of ``lengths`` tokens (``collate``'s rule): its padded
        width, or with ``packed`` the length of its packed row (``spurious.core.train.packing.row_length``)."""
        longest = int(np.max(lengths))
        if packed:
            return packing.row_length(lengths, self._packed_width(longest))
        return padded_width(longest, multiple, self.max_length)

    def _packed_width(self, longest: int) -> int:
        """The width of a packed batch's ``[B, W]`` layout: ``max_length`` whatever the rows (one shape)."""
        return max(longest, self.max_length or 0)

    def collate(
        self, rows: Sequence[int] | np.ndarray, multiple: int = 1, packed_offset: int | None = None
    ) -> dict[str, torch.Tensor]:
        """Pad ``rows`` into a batch as wide as the longest, rounded up to ``multiple`` (``padded_width``).

        ``packed_offset`` (not None for a model that runs packed attention:
        ``spurious.core.train.packing.position_offset``) lays the rows end to end instead (``packing.pack``, positions
        counting from it)."""
        longest = max(len(self.input_ids[r]) for r in rows)
        if packed_offset is not None:
            batch = self._padded(rows, self._packed_width(longest))
            return packing.pack(batch, position_offset=packed_offset, pad_token_id=self.pad_token_id)
        return self._padded(rows, self.batch_width(np.array([longest]), multiple))

    def _padded(self, rows: Sequence[int] | np.ndarray, width: int) -> dict[str, torch.Tensor]:
        ids = torch.full((len(rows), width), self.pad_token_id, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        types = torch.zeros((len(rows), width), dtype=torch.long) if self.token_type_ids is not None else None
        for k, r in enumerate(rows):
            n = len(self.input_ids[r])
            ids[k, :n] = torch.tensor(self.input_ids[r])
            mask[k, :n] = 1
            if types is not None:
                types[k, :n] = torch.tensor(self.token_type_ids[r])
        batch = {"input_ids": ids, "attention_mask": mask}
        if types is not None:
            batch["token_type_ids"] = types
        if self.mask_positions is not None:
            batch["mask_positions"] = torch.from_numpy(self.mask_positions[np.asarray(rows)])
        return batch


def encode(frame: pd.DataFrame, tokenizer: Any, max_length: int) -> Encoded:
    """Tokenise ``text_a`` (and ``text_b`` for pair tasks) with truncation to ``max_length`` tokens."""
    a = frame["text_a"].astype(str).tolist()
    b = frame["text_b"].tolist() if frame["text_b"].notna().any() else None
    enc = tokenizer(a, [str(x) for x in b] if b is not None else None, truncation=True, max_length=max_length)
    return Encoded(
        input_ids=enc["input_ids"],
        token_type_ids=enc.get("token_type_ids"),
        labels=frame["label"].to_numpy(dtype=np.int64),
        pad_token_id=int(tokenizer.pad_token_id or 0),
        max_length=max_length,
    )


def encode_for(frame: pd.DataFrame, tokenizer: Any, max_length: int, prompt: PromptSpec | None) -> Encoded:
    """``encode`` without a prompt; with one, the templated rows (``spurious.core.train.prompt.encode_prompts``: the
    mask is kept in every row) and their mask positions."""
    if prompt is None:
        return encode(frame, tokenizer, max_length)
    enc = encode_prompts(frame, tokenizer, prompt, max_length)
    if enc.n_truncated:
        logger.info(
            "prompt encoding: %d of %d rows were truncated to %d tokens", enc.n_truncated, len(frame), max_length
        )
    return Encoded(
        input_ids=enc.input_ids,
        token_type_ids=enc.token_type_ids,
        labels=frame["label"].to_numpy(dtype=np.int64),
        pad_token_id=int(tokenizer.pad_token_id or 0),
        mask_positions=enc.mask_positions,
        max_length=max_length,
    )


def _batch_logits(model: torch.nn.Module, batch: Mapping[str, torch.Tensor]) -> torch.Tensor:
    """The model's logits ``[B, n_labels]`` on a collated batch on its device: padded rows, the attention mask made
    by ``model_attention_mask`` (a ``PromptClassifier`` makes its masked LM's itself), or rows packed end to end
    (``spurious.core.train.packing``), where a classification head reads each row's first token and a prompt classifier
    its mask position."""
    if packing.is_packed(batch):
        if isinstance(model, PromptClassifier):
            return model(**packing.model_inputs(batch), mask_positions=batch["mask_positions"]).logits
        return packing.sequence_classification_logits(model, batch)
    inputs = dict(batch, attention_mask=model_attention_mask(model, batch["attention_mask"]))
    return model(**inputs).logits


@torch.no_grad()
def class_probabilities(
    model: torch.nn.Module,
    data: Encoded,
    *,
    n_labels: int,
    batch_size: int,
    device: torch.device,
    bf16: bool,
    should_stop: Callable[[], bool] | None = None,
    multiple: int = 1,
    compile: str = "off",
    repeats: int = 1,
) -> np.ndarray:
    """The softmax over the labels for every row of ``data``, (rows, n_labels) float64, in batches of similar length.

    The caller puts the model in eval mode. ``should_stop`` is polled before every batch: when it answers True the
    computation is abandoned with ``StopRequested`` (a preempted training run redoes the evaluation on resuming).
    ``compile``: the setting (``spurious.core.train.compiled.batched``), for ``repeats`` passes over ``data``."""
    order = np.argsort(data.lengths, kind="stable")  # similar lengths per batch: little padding
    batches = [order[lo : lo + batch_size] for lo in range(0, len(order), batch_size)]
    offset = packing.position_offset(model)
    shapes = [(len(rows), data.batch_width(data.lengths[rows], multiple, offset is not None)) for rows in batches]
    logits_of = compiled.batched(_batch_logits, compile, device, shapes, repeats=repeats)
    probs = np.zeros((len(data), n_labels), dtype=np.float64)
    for rows, shape in zip(batches, shapes, strict=True):
        if should_stop is not None and should_stop():
            raise StopRequested
        batch = to_device(data.collate(rows, multiple, offset), device)
        with autocast(device, bf16):
            logits = logits_of(shape, model, batch)
        probs[rows] = torch.softmax(logits.float(), dim=-1).cpu().numpy()
    return probs


def bitfit(model: torch.nn.Module) -> int:
    """Freeze every parameter of ``model`` except the bias terms and the task head (the parameters outside the
    pretrained base model, ``model.base_model_prefix``: e.g. BERT's ``classifier``), as BitFit trains them; returns
    the number of trainable parameters. ValueError for a model without a base-model prefix or without biases."""
    prefix = getattr(model, "base_model_prefix", "")
    names = [n for n, _ in model.named_parameters()]
    if not prefix or not any(n.startswith(prefix + ".") for n in names):
        raise ValueError(f"BitFit: {type(model).__name__} has no base model ({prefix!r}) to tell its head apart")
    n_trainable = 0
    for name, param in model.named_parameters():
        train = name.endswith("bias") or not name.startswith(prefix + ".")
        param.requires_grad_(train)
        n_trainable += param.numel() if train else 0
    if not any(n.endswith("bias") and n.startswith(prefix + ".") for n in names):
        raise ValueError(f"BitFit: {type(model).__name__} has no bias terms in its base model")
    return n_trainable


def weighted_loss(logits: torch.Tensor, labels: torch.Tensor, weights: torch.Tensor | None) -> torch.Tensor:
    """Mean over the batch of ``weight_i · CE_i`` (plain mean cross-entropy without weights); in float32."""
    per_example = torch.nn.functional.cross_entropy(logits.float(), labels, reduction="none")
    if weights is not None:
        per_example = per_example * weights
    return per_example.mean()


def load_classifier(name_or_path: str | os.PathLike, *, label_names: Sequence[str], from_scratch: bool = False) -> Any:
    """An ``AutoModelForSequenceClassification`` with ``len(label_names)`` outputs; a fresh head is reported in one
    line. ``from_scratch``: the checkpoint's architecture with random weights (the no-pretraining control)."""
    from transformers import AutoModelForSequenceClassification

    labels = {"num_labels": len(label_names), "id2label": dict(enumerate(label_names))}
    labels["label2id"] = {n: i for i, n in enumerate(label_names)}
    if from_scratch:
        config = load_config(name_or_path)
        for key, value in labels.items():
            setattr(config, key, value)
        logger.info("%s: architecture only, randomly initialised (training from scratch)", name_or_path)
        with quiet_transformers():
            return AutoModelForSequenceClassification.from_config(config)
    model, info = from_pretrained(AutoModelForSequenceClassification, name_or_path, output_loading_info=True, **labels)
    missing = sorted(info.get("missing_keys") or [])
    if missing:
        logger.info("%s: newly initialised weights (%s); trained by fine-tuning", name_or_path, ", ".join(missing[:6]))
    return model


class _TokenizerWithPrompt:
    """The tokenizer, saving ``prompt.json`` beside its files: ``save_model_dir`` saves the tokenizer into the
    temporary folder it renames into place, so the model folder appears complete (model, tokenizer, prompt) or not at
    all."""

    def __init__(self, tokenizer: Any, prompt_meta: Mapping[str, Any]) -> None:
        self.tokenizer, self.prompt_meta = tokenizer, dict(prompt_meta)

    def save_pretrained(self, path: str | os.PathLike) -> Any:
        saved = self.tokenizer.save_pretrained(path)
        (Path(path) / PROMPT_FILE).write_text(json.dumps(self.prompt_meta, indent=2) + "\n")
        return saved


def _weights_sha(weights: np.ndarray | None) -> str | None:
    if weights is None:
        return None
    return hashlib.sha256(np.ascontiguousarray(weights, dtype=np.float64).tobytes()).hexdigest()[:16]


def _sha_labels(labels: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(labels, dtype=np.int64).tobytes()).hexdigest()[:16]


def _check_training_inputs(
    train_frame: pd.DataFrame,
    eval_frame: pd.DataFrame | None,
    s: Mapping[str, Any],
    init: str,
    trainable: str,
    prompt: PromptSpec | None,
    weights: np.ndarray | None,
) -> tuple[list[str], np.ndarray | None]:
    """``train_classifier``'s arguments checked before anything loads: the label names, and the weights as float64."""
    if init not in INIT_MODES:
        raise ValueError(f"train_classifier: unknown init {init!r}; known: {', '.join(INIT_MODES)}")
    if trainable not in TRAINABLE:
        raise ValueError(f"train_classifier: unknown trainable {trainable!r}; known: {', '.join(TRAINABLE)}")
    if trainable != "all" and prompt is not None:
        raise ValueError("train_classifier: BitFit (trainable='bitfit') is for a classification head, not a prompt")
    if len(train_frame) == 0:
        raise ValueError("the training frame is empty")
    if s["eval_every"] is not None and eval_frame is None:
        raise ValueError(
            f"the classification setting eval_every ({s['eval_every']!r}) needs an eval_frame (the dev set)"
        )
    if eval_frame is not None and s["eval_every"] is None:
        raise ValueError("an eval_frame was given but the classification setting eval_every is null: set it")
    label_names = list(train_frame.attrs["label_names"])
    if eval_frame is not None:
        if len(eval_frame) == 0:
            raise ValueError("the eval frame is empty")
        if list(eval_frame.attrs.get("label_names") or []) != label_names:
            raise ValueError(
                f"the eval frame's labels {eval_frame.attrs.get('label_names')} differ from the training frame's "
                f"{label_names}"
            )
    if prompt is not None and len(prompt.label_words) != len(label_names):
        raise ValueError(
            f"the prompt has {len(prompt.label_words)} label words {list(prompt.label_words)} but the data has "
            f"{len(label_names)} labels {label_names}"
        )
    if weights is not None:
        weights = np.asarray(weights, dtype=np.float64)
        if weights.shape != (len(train_frame),) or not np.all(np.isfinite(weights)) or (weights < 0).any():
            raise ValueError(
                f"weights must be {len(train_frame)} finite nonnegative numbers (one per training example), got "
                f"shape {weights.shape}"
            )
    return label_names, weights


def _run_fingerprint(
    model_name_or_path: str,
    init: str,
    s: Mapping[str, Any],
    train_frame: pd.DataFrame,
    data: Encoded,
    weights: np.ndarray | None,
    eval_frame: pd.DataFrame | None,
    eval_data: Encoded | None,
    prompt: PromptSpec | None,
    trainable: str,
) -> str:
    """Identify a run, so that a checkpoint of another run (other data, weights, settings, dev frame or prompt) is
    never resumed."""
    payload: dict[str, Any] = {
        "model": str(model_name_or_path),
        "init": init,
        # eval_every only when set: fingerprints of runs without it stay those of earlier versions
        "settings": {k: v for k, v in sorted(result_settings(s).items()) if k != "eval_every" or v is not None},
        "train": ids_sha256(train_frame["id"].astype(str).tolist()),
        "labels": _sha_labels(data.labels),
        "weights": _weights_sha(weights),
    }
    if eval_data is not None:
        payload["eval"] = {
            "ids": ids_sha256(eval_frame["id"].astype(str).tolist()),
            "labels": _sha_labels(eval_data.labels),
        }
    if prompt is not None:
        payload["prompt"] = prompt.to_dict()
    if trainable != "all":  # only when set: fingerprints of full fine-tuning stay those of earlier versions
        payload["trainable"] = trainable
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()[:16]


def train_classifier(
    train_frame: pd.DataFrame,
    *,
    model_name_or_path: str,
    output_dir: str | os.PathLike,
    checkpoint_dir: str | os.PathLike,
    settings: Mapping[str, Any] | None = None,
    weights: np.ndarray | None = None,
    init: str = "pretrained",
    log: LogFn | None = None,
    eval_frame: pd.DataFrame | None = None,
    prompt: PromptSpec | None = None,
    trainable: str = "all",
) -> dict[str, Any]:
    """Fine-tune a classifier on a classification frame; save model + tokenizer + ``training_state.json``.

    ``trainable``: ``"all"`` (default) or ``"bitfit"``: only the bias terms of the model and the newly initialised
    classification head train (BitFit), every other weight stays as loaded; not with ``prompt``.

    ``weights`` (one per row of ``train_frame``, nonnegative) multiply each example's loss. Resumes exactly from the
    newest checkpoint in ``checkpoint_dir`` (same data order, optimizer, schedule and RNG); a checkpoint of another
    run (other data, weights, settings, dev frame or prompt) is refused. The caller deletes ``checkpoint_dir`` after
    success.

    ``eval_frame`` (required by, and requiring, the setting ``eval_every``): its accuracy is measured every
    ``eval_every`` optimizer steps (or at every epoch end for ``"epoch"``) and after the last step, in eval mode; the
    saved model is the one of the highest accuracy (the earliest on ties), kept in the checkpoints so that a
    preempted and resumed run saves the same model. The summary records ``eval_history`` ([{step, accuracy}]),
    ``best_step``, ``best_eval_accuracy`` and ``saved_step`` (= ``best_step``).

    ``prompt``: prompt-based fine-tuning of a masked LM (``spurious.core.train.prompt``); the checkpoint must hold a
    masked-LM head unless ``init`` is ``"scratch"``, and the model directory gets ``prompt.json`` (template, label words
    and their ids, label names)."""
    arguments = dict(locals())  # this call's arguments, before anything else is defined: for the N-process relaunch
    s = resolve_settings(settings)
    if needs_launch(s):  # N processes (the job's GPUs): each runs this function with its share of every batch
        return launch(train_classifier, processes_setting(s), **arguments)
    emit = log or logger.info
    label_names, weights = _check_training_inputs(train_frame, eval_frame, s, init, trainable, prompt, weights)
    eval_every = s["eval_every"]
    t_start = time.perf_counter()
    if s["threads"]:
        torch.set_num_threads(int(s["threads"]))
    device = device_for(s)
    bf16 = use_bf16(s["bf16"], device)
    output_dir, checkpoint_dir = Path(output_dir), Path(checkpoint_dir)

    seed_everything(int(s["seed"]))
    tokenizer = load_tokenizer(model_name_or_path)
    prompt_meta: dict[str, Any] | None = None
    if prompt is None:
        model = load_classifier(model_name_or_path, label_names=label_names, from_scratch=init == "scratch")
    else:
        word_ids = label_word_ids(tokenizer, prompt.label_words)
        mlm = load_masked_lm(model_name_or_path, from_scratch=init == "scratch")
        model = PromptClassifier(mlm, word_ids)
        prompt_meta = {**prompt.to_dict(), "label_word_ids": word_ids, "label_names": label_names}
    n_trainable = bitfit(model) if trainable == "bitfit" else sum(p.numel() for p in model.parameters())
    packing.enable(model, s["attention"], device=device, bf16=bf16, log=emit)
    data = encode_for(train_frame, tokenizer, int(s["max_length"]), prompt)
    eval_data = encode_for(eval_frame, tokenizer, int(s["max_length"]), prompt) if eval_frame is not None else None
    model.to(device)
    fingerprint = _run_fingerprint(
        model_name_or_path, init, s, train_frame, data, weights, eval_frame, eval_data, prompt, trainable
    )
    multiple = pad_multiple(s["pad_to_multiple_of"], device)
    offset = packing.position_offset(model)

    def batch_fn(rows: np.ndarray, device: torch.device) -> dict[str, torch.Tensor]:
        batch = data.collate(rows, multiple, offset)
        batch["labels"] = torch.from_numpy(data.labels[rows])
        if weights is not None:
            batch["weights"] = torch.from_numpy(weights[rows].astype(np.float32))
        return to_device(batch, device)

    def loss_fn(
        model: torch.nn.Module, objective: None, batch: Mapping[str, torch.Tensor]
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        inputs = {k: v for k, v in batch.items() if k not in ("labels", "weights")}
        logits = _batch_logits(model, inputs)  # bf16 autocast comes from the engine
        return weighted_loss(logits, batch["labels"], batch.get("weights")), {}

    _, steps_per_epoch, total_steps = step_counts(len(data), s)
    evaluation = (
        None
        if eval_data is None
        else _AccuracyEvaluation(
            model, eval_data, len(label_names), eval_every, int(s["eval_batch_size"]), bf16, emit, multiple,
            compile=s["compile"], evaluations=_evaluations(eval_every, total_steps, steps_per_epoch),
        )
    )
    weighting = "uniform" if weights is None else f"weighted (mean {weights.mean():.3f}, max {weights.max():.3f})"
    emit(
        f"training {model_name_or_path} ({init}{', prompt-based' if prompt is not None else ''}) on {device}"
        f"{' (bf16)' if bf16 else ''}{f' over {world()[1]} processes' if world()[1] > 1 else ''}: {len(data)} "
        f"examples, {len(label_names)} labels, {weighting}; {steps_per_epoch} steps/epoch, {total_steps} steps"
        + (
            f"; dev accuracy on {len(eval_data)} examples "
            + ("at every epoch end" if eval_every == EVAL_EVERY_EPOCH else f"every {eval_every} steps")
            if eval_data is not None
            else ""
        )
    )
    run = engine_train(
        model,
        loss_fn,
        data.lengths,
        s,
        batch_fn=batch_fn,
        batch_width=lambda lengths: data.batch_width(lengths, multiple, offset is not None),
        checkpoint_dir=checkpoint_dir,
        fingerprint=fingerprint,
        emit=emit,
        evaluation=evaluation,
        keep_best=True,
        unit="examples",
        tracker_dir=output_dir.parent / TRACKER_FOLDER,  # beside the model folder: kept when the job succeeds
    )
    state = run.state
    saved_step = state.best_step if state.best_step is not None else state.step
    best_accuracy = state.evaluation.get("best_accuracy")
    summary: dict[str, Any] = {
        **run_summary(run, model_name_or_path, s, t_start),
        "init": init,
        "trainable": trainable,
        "n_trainable_parameters": int(n_trainable),
        "label_names": label_names,
        "saved_step": saved_step,
        "eval_history": state.evaluation.get("history", []),
        "best_eval_accuracy": best_accuracy,
        "n_eval_examples": len(eval_data) if eval_data is not None else None,
        "prompt": prompt_meta,
        "n_train_examples": len(data),
        "weights_sha256": _weights_sha(weights),
        "fingerprint": fingerprint,
    }
    if not run.is_main:  # rank 0 saves the model; every process returns the same summary
        return summary
    if isinstance(model, PromptClassifier):
        assert prompt_meta is not None
        save_model_dir(output_dir, model.mlm, _TokenizerWithPrompt(tokenizer, prompt_meta), summary)
    else:
        save_model_dir(output_dir, model, tokenizer, summary)
    best_note = f" (dev accuracy {best_accuracy:.4f})" if best_accuracy is not None else ""
    emit(
        f"saved the model of step {saved_step}{best_note} to {output_dir}; {summary['train_wall_time_s']:.0f}s of "
        "training"
    )
    return summary


def _evaluations(eval_every: int | str | None, total_steps: int, steps_per_epoch: int) -> int:
    """How many dev evaluations a run makes (at most): every ``eval_every`` steps or epoch, and after the last."""
    if eval_every is None:
        return 0
    return compiled.evaluations(total_steps, steps_per_epoch if eval_every == EVAL_EVERY_EPOCH else int(eval_every))


class _AccuracyEvaluation:
    """Dev accuracy every ``eval_every`` optimizer steps (or at every epoch end) and after the last step; the best
    is the highest accuracy, the earliest on ties. Recorded in ``state.evaluation``: ``history`` ([{step,
    accuracy}]) and ``best_accuracy``."""

    def __init__(
        self,
        model: torch.nn.Module,
        data: Encoded,
        n_labels: int,
        eval_every: int | str,
        batch_size: int,
        bf16: bool,
        emit: LogFn,
        multiple: int = 1,
        *,
        compile: str = "off",
        evaluations: int = 1,
    ) -> None:
        self.model, self.data, self.n_labels, self.eval_every = model, data, n_labels, eval_every
        self.batch_size, self.bf16, self.emit, self.multiple = batch_size, bf16, emit, multiple
        self.compile, self.evaluations = compile, evaluations

    def due(self, state: TrainState, total_steps: int) -> bool:
        if state.step >= total_steps:
            return True
        if self.eval_every == EVAL_EVERY_EPOCH:
            return state.batch_in_epoch == 0  # the step just finished an epoch
        return state.step % int(self.eval_every) == 0

    def __call__(self, state: TrainState, should_stop: Callable[[], bool] | None) -> bool:
        t0 = time.perf_counter()
        self.model.eval()
        try:
            # computed before the record changes: an evaluation abandoned on preemption leaves no trace
            probs = class_probabilities(
                self.model,
                self.data,
                n_labels=self.n_labels,
                batch_size=self.batch_size,
                device=next(self.model.parameters()).device,
                bf16=self.bf16,
                should_stop=should_stop,
                multiple=self.multiple,
                compile=self.compile,
                repeats=self.evaluations,
            )
        finally:
            self.model.train()
        accuracy = float(np.mean(probs.argmax(axis=1) == self.data.labels))
        record = state.evaluation
        record.setdefault("history", []).append({"step": state.step, "accuracy": accuracy})
        best = record.get("best_accuracy")
        improved = best is None or accuracy > best  # ties: the earliest stays
        if improved:
            record["best_accuracy"] = accuracy
        best_step = state.step if improved else state.best_step
        self.emit(
            f"eval step {state.step}: dev accuracy {accuracy:.4f} (best {record['best_accuracy']:.4f} at step "
            f"{best_step}) [{len(self.data)} examples, {time.perf_counter() - t0:.1f}s]"
        )
        return improved


@dataclass
class TrainedClassifier:
    """A trained classifier loaded once for many predictions (the audit predicts the same data with each feature
    inserted): the model in eval mode on its device, its tokenizer, label names, prompt and ``max_length``."""

    model: torch.nn.Module
    tokenizer: Any
    label_names: list[str]
    prompt: PromptSpec | None
    max_length: int
    device: torch.device
    bf16: bool
    pad_to_multiple_of: int | str = "auto"
    compile: str = "off"  # the setting (spurious.core.train.compiled), for each call of ``probabilities``

    def probabilities(self, frame: pd.DataFrame, batch_size: int = 128) -> tuple[np.ndarray, Encoded]:
        """The softmax over the labels for every row of ``frame`` and the encoded rows."""
        data = encode_for(frame, self.tokenizer, self.max_length, self.prompt)
        probs = class_probabilities(
            self.model, data, n_labels=len(self.label_names), batch_size=batch_size, device=self.device, bf16=self.bf16,
            multiple=pad_multiple(self.pad_to_multiple_of, self.device), compile=self.compile,
        )
        return probs, data


def load_trained_classifier(
    model_dir: str | os.PathLike,
    *,
    max_length: int | None = None,
    device: str = "auto",
    bf16: bool | str = "auto",
    pad_to_multiple_of: int | str = "auto",
    attention: str = "padded",
    compile: str = "off",
) -> TrainedClassifier:
    """Load a model folder written by ``train_classifier`` (or any sequence-classification checkpoint); a folder with
    ``prompt.json`` is a masked LM read through its prompt. ``max_length``: the training's unless given.
    ``attention: packed``: rows end to end (``spurious.core.train.packing``; the same probabilities up to float
    rounding)."""
    resolved = resolve_model(model_dir)
    prompt_meta = read_prompt_file(resolved)
    prompt: PromptSpec | None = None
    tokenizer = load_tokenizer(model_dir)
    if prompt_meta is None:
        from transformers import AutoModelForSequenceClassification

        model = from_pretrained(AutoModelForSequenceClassification, resolved)
        names = [model.config.id2label[i] for i in range(model.config.num_labels)]
    else:
        from transformers import AutoModelForMaskedLM

        prompt = PromptSpec.from_dict(prompt_meta)
        names = list(prompt_meta["label_names"])
        ids = label_word_ids(tokenizer, prompt.label_words)
        if ids != list(prompt_meta["label_word_ids"]):
            raise ValueError(
                f"{model_dir}: the tokenizer maps the label words {list(prompt.label_words)} to {ids}, but the model "
                f"was trained with {prompt_meta['label_word_ids']}"
            )
        model = PromptClassifier(from_pretrained(AutoModelForMaskedLM, resolved), ids)
    if max_length is None:
        state_file = Path(resolved) / "training_state.json"
        trained = (
            readers.read_json(state_file, fix=rebuild_advice(resolved))["settings"] if state_file.is_file() else {}
        )
        max_length = int(trained.get("max_length", DEFAULT_SETTINGS["max_length"]))
    dev = pick_device(device)
    packing.enable(model, attention, device=dev, bf16=use_bf16(bf16, dev), log=logger.info)
    model.to(dev).eval()
    return TrainedClassifier(
        model, tokenizer, names, prompt, int(max_length), dev, use_bf16(bf16, dev), pad_to_multiple_of,
        compiled.check_setting(compile),
    )


def predict_classifier(
    model_dir: str | os.PathLike,
    frame: pd.DataFrame,
    *,
    batch_size: int = 128,
    max_length: int | None = None,
    device: str = "auto",
    bf16: bool | str = "auto",
    log: LogFn | None = None,
    check_labels: bool = True,
    loaded: TrainedClassifier | None = None,
    pad_to_multiple_of: int | str = "auto",
    attention: str = "padded",
    compile: str = "off",
) -> pd.DataFrame:
    """Predictions of a trained classifier on a classification frame: ``id, label, prediction, correct,
    probabilities`` (the softmax over the model's labels). The model's label names must match the frame's, unless
    ``check_labels`` is False (out-of-distribution sets with other labels, mapped by the caller: then ``correct``
    compares indices of two label sets and means nothing; the model's names are in ``attrs["label_names"]``).

    A model directory with ``prompt.json`` (a prompt-based model) is read as a masked LM through its prompt: the
    probabilities are the softmax over the label words' logits at the mask. ``loaded``: the model already loaded by
    :func:`load_trained_classifier` (then ``max_length``, ``device``, ``bf16``, ``pad_to_multiple_of``,
    ``attention`` and ``compile`` are its own)."""
    emit = log or logger.info
    clf = loaded or load_trained_classifier(
        model_dir, max_length=max_length, device=device, bf16=bf16, pad_to_multiple_of=pad_to_multiple_of,
        attention=attention, compile=compile,
    )
    names = clf.label_names
    if check_labels and names != list(frame.attrs["label_names"]):
        raise ValueError(
            f"{model_dir}: the model's labels {names} differ from the data's {frame.attrs['label_names']}; predict "
            "on data of the task the model was trained on"
        )
    t0 = time.perf_counter()
    probs, data = clf.probabilities(frame, batch_size)
    prediction = probs.argmax(axis=1)
    emit(
        f"predicted {len(data)} examples in {time.perf_counter() - t0:.1f}s"
        + (f"; accuracy {np.mean(prediction == data.labels):.4f}" if check_labels else "")
    )
    out = pd.DataFrame(
        {
            "id": frame["id"].astype(str).to_numpy(),
            "label": data.labels,
            "prediction": prediction,
            "correct": prediction == data.labels,
            "probabilities": list(probs),
        }
    )
    out.attrs["label_names"] = names
    return out
