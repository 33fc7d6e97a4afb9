"""Sequence classification: fine-tuning with per-example loss weights and resumable checkpoints, and prediction.

Any ``AutoModelForSequenceClassification``-compatible checkpoint works (``embedded:all-MiniLM-L6-v2`` offline). The
loop is ``spurious.training``'s: AdamW + linear schedule with warmup, gradient clipping, a data order that is a pure
function of (seed, epoch), exact resumption from the newest checkpoint after preemption, CUDA + bf16 autocast when
available. There is no early stopping: the paper trains a fixed number of epochs (Serrano et al. 2023, §4.2) and
the model of the last step is saved.

Loss weights (the paper's reweighting, §5.1): each example's cross-entropy is multiplied by its weight and the batch
loss is the mean over the batch, so weights ``q_i·|D|`` (mean 1) keep the loss on the scale of unweighted training.
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

from spurious.logits import ids_sha256
from spurious.models import load_config, load_tokenizer, quiet_transformers, resolve_model
from spurious.training import (
    PreemptionGuard,
    StopRequested,
    TrainingPreempted,
    autocast,
    epoch_order,
    fill_settings,
    format_eta,
    latest_checkpoint,
    param_groups,
    pick_device,
    restore_checkpoint,
    save_checkpoint,
    save_model_dir,
    seed_everything,
    use_bf16,
)

logger = logging.getLogger(__name__)
LogFn = Callable[[str], None]

DEFAULT_SETTINGS: dict[str, Any] = {
    "learning_rate": 2e-5,
    "batch_size": 32,
    "gradient_accumulation_steps": 1,
    "epochs": 3,
    "max_steps": None,
    "warmup_ratio": 0.0,
    "weight_decay": 0.0,
    "max_grad_norm": 1.0,
    "max_length": 128,
    "group_by_length": False,
    "checkpoint_every": 200,
    "seed": 0,
    "device": "auto",
    "bf16": "auto",
    "threads": None,
    "log_every": 50,
    "eval_batch_size": 128,
}
_RUNTIME_KEYS = frozenset({"device", "bf16", "threads", "log_every", "checkpoint_every", "eval_batch_size"})
_NULLABLE = frozenset({"max_steps", "threads", "max_grad_norm"})
INIT_MODES = ("pretrained", "scratch")
PREDICTION_COLUMNS = ("id", "label", "prediction", "correct", "probabilities")


def resolve_settings(settings: Mapping[str, Any] | None) -> dict[str, Any]:
    """Fill in defaults; reject unknown keys (a typo would otherwise silently fall back to a default)."""
    return fill_settings(settings, DEFAULT_SETTINGS, _NULLABLE, "classification")


@dataclass
class Encoded:
    """Tokenised examples (unpadded); batches are padded when collated."""

    input_ids: list[list[int]]
    token_type_ids: list[list[int]] | None
    labels: np.ndarray
    pad_token_id: int

    def __len__(self) -> int:
        return len(self.input_ids)

    @property
    def lengths(self) -> np.ndarray:
        return np.fromiter((len(x) for x in self.input_ids), dtype=np.int64, count=len(self.input_ids))

    def collate(self, rows: Sequence[int] | np.ndarray) -> dict[str, torch.Tensor]:
        width = max(len(self.input_ids[r]) for r in rows)
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
    )


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
    with quiet_transformers():
        model, info = AutoModelForSequenceClassification.from_pretrained(
            resolve_model(name_or_path), output_loading_info=True, **labels
        )
    missing = sorted(info.get("missing_keys") or [])
    if missing:
        logger.info("%s: newly initialised weights (%s); trained by fine-tuning", name_or_path, ", ".join(missing[:6]))
    return model


@dataclass
class _TrainState:
    step: int = 0
    epoch: int = 0
    batch_in_epoch: int = 0
    train_losses: list[dict[str, float]] = field(default_factory=list)
    wall_time_s: float = 0.0
    fingerprint: str = ""


def _weights_sha(weights: np.ndarray | None) -> str | None:
    if weights is None:
        return None
    return hashlib.sha256(np.ascontiguousarray(weights, dtype=np.float64).tobytes()).hexdigest()[:16]


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
) -> dict[str, Any]:
    """Fine-tune a classifier on a classification frame; save model + tokenizer + ``training_state.json``.

    ``weights`` (one per row of ``train_frame``, nonnegative) multiply each example's loss. Resumes exactly from the
    newest checkpoint in ``checkpoint_dir`` (same data order, optimizer, schedule and RNG); a checkpoint of another
    run (other data, weights or settings) is refused. The caller deletes ``checkpoint_dir`` after success."""
    s = resolve_settings(settings)
    emit = log or logger.info
    if init not in INIT_MODES:
        raise ValueError(f"train_classifier: unknown init {init!r}; known: {', '.join(INIT_MODES)}")
    if len(train_frame) == 0:
        raise ValueError("the training frame is empty")
    if weights is not None:
        weights = np.asarray(weights, dtype=np.float64)
        if weights.shape != (len(train_frame),) or not np.all(np.isfinite(weights)) or (weights < 0).any():
            raise ValueError(
                f"weights must be {len(train_frame)} finite nonnegative numbers (one per training example), got "
                f"shape {weights.shape}"
            )
    t_start = time.perf_counter()
    if s["threads"]:
        torch.set_num_threads(int(s["threads"]))
    device = pick_device(s["device"])
    bf16 = use_bf16(s["bf16"], device)
    output_dir, checkpoint_dir = Path(output_dir), Path(checkpoint_dir)
    label_names = list(train_frame.attrs["label_names"])

    seed_everything(int(s["seed"]))
    tokenizer = load_tokenizer(model_name_or_path)
    model = load_classifier(model_name_or_path, label_names=label_names, from_scratch=init == "scratch")
    data = encode(train_frame, tokenizer, int(s["max_length"]))
    weight_tensor = torch.tensor(weights, dtype=torch.float32) if weights is not None else None
    model.to(device)
    model.train()

    batch_size, accum = int(s["batch_size"]), int(s["gradient_accumulation_steps"])
    micro_per_epoch = math.ceil(len(data) / batch_size)
    steps_per_epoch = math.ceil(micro_per_epoch / accum)
    total_steps = int(s["max_steps"]) if s["max_steps"] else math.ceil(float(s["epochs"]) * steps_per_epoch)
    optimizer = torch.optim.AdamW(
        param_groups(model, float(s["weight_decay"])), lr=float(s["learning_rate"]), betas=(0.9, 0.999), eps=1e-8
    )
    from transformers import get_linear_schedule_with_warmup

    scheduler = get_linear_schedule_with_warmup(
        optimizer, math.ceil(float(s["warmup_ratio"]) * total_steps), total_steps
    )
    payload = {
        "model": str(model_name_or_path),
        "init": init,
        "settings": {k: v for k, v in sorted(s.items()) if k not in _RUNTIME_KEYS},
        "train": ids_sha256(train_frame["id"].astype(str).tolist()),
        "labels": hashlib.sha256(data.labels.tobytes()).hexdigest()[:16],
        "weights": _weights_sha(weights),
    }
    state = _TrainState(
        fingerprint=hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()[:16]
    )
    resumed_from = None
    ckpt = latest_checkpoint(checkpoint_dir)
    if ckpt is not None:
        saved = _TrainState(**json.loads((ckpt / "state.json").read_text()))
        if saved.fingerprint != state.fingerprint:
            raise RuntimeError(
                f"checkpoint {ckpt} belongs to a different run (other data, weights, model or settings); delete "
                f"{checkpoint_dir} to start afresh"
            )
        restore_checkpoint(ckpt, model, optimizer, scheduler)
        state, resumed_from = saved, saved.step
        emit(f"resuming from {ckpt} (step {state.step}/{total_steps})")

    segment_start = [time.perf_counter()]

    def checkpoint() -> Path:
        state.wall_time_s += time.perf_counter() - segment_start[0]
        segment_start[0] = time.perf_counter()
        return save_checkpoint(checkpoint_dir, model, optimizer, scheduler, state, None)

    weighting = "uniform" if weights is None else f"weighted (mean {weights.mean():.3f}, max {weights.max():.3f})"
    emit(
        f"training {model_name_or_path} ({init}) on {device}{' (bf16)' if bf16 else ''}: {len(data)} examples, "
        f"{len(label_names)} labels, {weighting}; {steps_per_epoch} steps/epoch, {total_steps} steps"
    )
    rate_t0, rate_step0 = time.perf_counter(), state.step
    window: list[float] = []
    perm, perm_epoch = np.empty(0, dtype=np.int64), -1
    with PreemptionGuard() as guard:
        try:
            while state.step < total_steps:
                if guard.triggered:
                    raise StopRequested
                if perm_epoch != state.epoch:
                    perm = epoch_order(
                        data.lengths,
                        batch_size=batch_size,
                        seed=int(s["seed"]),
                        epoch=state.epoch,
                        group_by_length=bool(s["group_by_length"]),
                    )
                    perm_epoch = state.epoch
                group = min(accum, micro_per_epoch - state.batch_in_epoch)
                step_loss = 0.0
                for m in range(group):
                    lo = (state.batch_in_epoch + m) * batch_size
                    rows = perm[lo : lo + batch_size]
                    batch = {k: v.to(device) for k, v in data.collate(rows).items()}
                    labels = torch.from_numpy(data.labels[rows]).to(device)
                    w = weight_tensor[torch.from_numpy(rows)].to(device) if weight_tensor is not None else None
                    with autocast(device, bf16):
                        logits = model(**batch).logits
                    loss = weighted_loss(logits, labels, w)
                    (loss / group).backward()
                    step_loss += float(loss.detach()) / group
                lr = scheduler.get_last_lr()[0]
                if s["max_grad_norm"]:
                    torch.nn.utils.clip_grad_norm_(model.parameters(), float(s["max_grad_norm"]))
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad(set_to_none=True)
                state.step += 1
                state.batch_in_epoch += group
                if state.batch_in_epoch >= micro_per_epoch:
                    state.epoch, state.batch_in_epoch = state.epoch + 1, 0
                state.train_losses.append({"step": state.step, "loss": step_loss, "lr": lr})
                window.append(step_loss)
                if state.step % max(1, int(s["log_every"])) == 0 or state.step == total_steps:
                    rate = (state.step - rate_step0) / max(time.perf_counter() - rate_t0, 1e-9)
                    emit(
                        f"step {state.step}/{total_steps} (epoch {state.step / steps_per_epoch:.2f}) loss "
                        f"{np.mean(window):.4f} lr {lr:.2e} | {rate * batch_size * accum:.1f} examples/s | "
                        f"ETA {format_eta((total_steps - state.step) / max(rate, 1e-9))}"
                    )
                    window = []
                every = int(s["checkpoint_every"] or 0)
                if every and state.step % every == 0 and state.step < total_steps:
                    checkpoint()
        except StopRequested:
            path = checkpoint()
            assert guard.signum is not None
            emit(f"received {signal.Signals(guard.signum).name}: checkpoint saved at step {state.step} in {path}")
            raise TrainingPreempted(guard.signum, state.step, path) from None

    import transformers

    summary: dict[str, Any] = {
        "model_name_or_path": str(model_name_or_path),
        "resolved_model": resolve_model(model_name_or_path),
        "init": init,
        "label_names": label_names,
        "steps": state.step,
        "total_steps": total_steps,
        "steps_per_epoch": steps_per_epoch,
        "saved_step": state.step,
        "train_losses": state.train_losses,
        "resumed_from_step": resumed_from,
        "n_train_examples": len(data),
        "weights_sha256": _weights_sha(weights),
        "fingerprint": state.fingerprint,
        "device": str(device),
        "bf16": bf16,
        "threads": torch.get_num_threads(),
        "wall_time_s": time.perf_counter() - t_start,
        "train_wall_time_s": state.wall_time_s + time.perf_counter() - segment_start[0],
        "settings": s,
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__},
    }
    save_model_dir(output_dir, model, tokenizer, summary)
    emit(f"saved the model of step {state.step} to {output_dir}; {summary['train_wall_time_s']:.0f}s of training")
    return summary


@torch.no_grad()
def predict_classifier(
    model_dir: str | os.PathLike,
    frame: pd.DataFrame,
    *,
    batch_size: int = 128,
    max_length: int | None = None,
    device: str = "auto",
    bf16: bool | str = "auto",
    log: LogFn | None = None,
) -> pd.DataFrame:
    """Predictions of a trained classifier on a classification frame: ``id, label, prediction, correct,
    probabilities`` (the softmax over the model's labels). The model's label names must match the frame's."""
    from transformers import AutoModelForSequenceClassification

    emit = log or logger.info
    resolved = resolve_model(model_dir)
    with quiet_transformers():
        model = AutoModelForSequenceClassification.from_pretrained(resolved)
    names = [model.config.id2label[i] for i in range(model.config.num_labels)]
    if names != list(frame.attrs["label_names"]):
        raise ValueError(
            f"{model_dir}: the model's labels {names} differ from the data's {frame.attrs['label_names']}; predict "
            "on data of the task the model was trained on"
        )
    if max_length is None:
        state_file = Path(resolved) / "training_state.json"
        trained = json.loads(state_file.read_text())["settings"] if state_file.is_file() else {}
        max_length = int(trained.get("max_length", DEFAULT_SETTINGS["max_length"]))
    tokenizer = load_tokenizer(model_dir)
    dev = pick_device(device)
    use = use_bf16(bf16, dev)
    model.to(dev).eval()
    data = encode(frame, tokenizer, max_length)
    order = np.argsort(data.lengths, kind="stable")  # similar lengths per batch: little padding
    probs = np.zeros((len(data), len(names)), dtype=np.float64)
    t0 = time.perf_counter()
    for lo in range(0, len(order), batch_size):
        rows = order[lo : lo + batch_size]
        batch = {k: v.to(dev) for k, v in data.collate(rows).items()}
        with autocast(dev, use):
            logits = model(**batch).logits
        probs[rows] = torch.softmax(logits.float(), dim=-1).cpu().numpy()
    prediction = probs.argmax(axis=1)
    emit(
        f"predicted {len(data)} examples in {time.perf_counter() - t0:.1f}s; accuracy {np.mean(prediction == data.labels):.4f}"
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
