"""A training run's checkpoints: what a resumed run needs besides tensors (:class:`TrainState`, ``state.json``),
Accelerate's state, the learning-rate schedule's record and the best weights, written under a temporary name and
renamed when complete (:func:`save_checkpoint`), and read back with every check that the checkpoint belongs to this
run (:func:`resume`). The engine (:mod:`spurious.core.train.engine`) calls both; checkpoints of earlier versions are
converted by :mod:`spurious.core.train.checkpoint_migration`."""

from __future__ import annotations

import json
import os
import shutil
import warnings
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from spurious.core import readers
from spurious.core.io import fsync_dir, fsync_tree
from spurious.core.train.checkpoint_migration import convert_pickled_schedule
from spurious.core.train.training import CHECKPOINT_PREFIX, cpu_copy, latest_checkpoint

BEST_WEIGHTS_FILE = "best_model.pt"
STATE_FILE = "state.json"
# Accelerate's model file in a checkpoint (save_state with safe_serialization=False: tied weights stay as they are)
MODEL_STATE_FILE = "pytorch_model.bin"
SCHEDULE_FILE = "schedule.json"


@dataclass
class TrainState:
    """Everything besides tensors that a resumed run needs to continue exactly (saved as ``state.json``).

    ``evaluation`` is the caller's ``Evaluation`` record (its losses, scores, patience counter): JSON only."""

    step: int = 0
    epoch: int = 0
    batch_in_epoch: int = 0  # micro-batches of the current epoch's order already consumed
    train_losses: list[dict[str, float]] = field(default_factory=list)
    wall_time_s: float = 0.0  # of earlier (interrupted) segments
    fingerprint: str = ""
    processes: int = 1
    # the AdamW implementation: "fused" or "default" (torch's choice: for-loop on CPU, foreach on CUDA), which is
    # what a checkpoint written before the engine chose fused kernels used
    optimizer_impl: str = "default"
    best_step: int | None = None
    last_eval_step: int = 0
    stopped_early: bool = False
    evaluation: dict[str, Any] = field(default_factory=dict)


def _load_state(accelerator: Any, ckpt: Path, checkpoint_dir: Path) -> None:
    """Accelerate's ``load_state``; a checkpoint it cannot read (truncated or corrupt files) is an
    UnreadableFileError naming it and what to do. Running out of memory is not damage: it passes unchanged."""
    from safetensors import SafetensorError

    from spurious.core.errors import READ_ERRORS, UnreadableFileError, reason

    try:
        accelerator.load_state(str(ckpt))
    except torch.OutOfMemoryError:
        raise
    except (*READ_ERRORS, KeyError, SafetensorError) as exc:
        raise UnreadableFileError(
            ckpt, f"not a readable training checkpoint ({reason(exc)})",
            _afresh(checkpoint_dir),
        ) from exc


def _afresh(checkpoint_dir: Path) -> str:
    """What to do with a damaged checkpoint."""
    return f"delete {checkpoint_dir} to start the run afresh (only the newest checkpoint is kept)"


def resume(
    accelerator: Any,
    checkpoint_dir: Path,
    state: TrainState,
    model: torch.nn.Module,
    scheduler: Any,
    *,
    keep_best: bool,
) -> tuple[TrainState, dict[str, torch.Tensor] | None, Path | None]:
    """The newest checkpoint's state (its tensors loaded by Accelerate into the prepared objects, ``scheduler`` moved to
    its step), best weights and path; ``(state, None, None)`` without a checkpoint. Another run's checkpoint, one of an
    earlier version or of another number of processes is refused with what to do; so is one holding a pickle that is
    not plain data. No file is unpickled with ``weights_only=False`` (which could run code from it)."""
    ckpt = latest_checkpoint(checkpoint_dir)
    if ckpt is None:
        return state, None, None
    afresh = _afresh(checkpoint_dir)
    saved = TrainState(**readers.read_json(ckpt / STATE_FILE, kind="training checkpoint's state", fix=afresh))
    if saved.fingerprint != state.fingerprint:
        raise RuntimeError(
            f"checkpoint {ckpt} belongs to a different run (other data, model, settings or training objective); "
            f"delete {checkpoint_dir} to start afresh"
        )
    if not (ckpt / MODEL_STATE_FILE).is_file():
        raise RuntimeError(
            f"checkpoint {ckpt} was written by a version of spurious before the Accelerate engine and cannot be "
            f"resumed; delete {checkpoint_dir} to start afresh"
        )
    if saved.optimizer_impl != state.optimizer_impl:
        raise RuntimeError(
            f"checkpoint {ckpt} was written with the {saved.optimizer_impl} AdamW kernel and this run uses the "
            f"{state.optimizer_impl} one (a resumed run must continue the same updates): rerun with the spurious "
            f"version that wrote it, or delete {checkpoint_dir} to start afresh"
        )
    if saved.processes != state.processes:
        raise RuntimeError(
            f"checkpoint {ckpt} was written by a run over {saved.processes} processes and this one has "
            f"{state.processes}: resume with {saved.processes} (the job's GPU count), or delete {checkpoint_dir}"
        )
    convert_pickled_schedule(accelerator, ckpt, checkpoint_dir, SCHEDULE_FILE)
    _load_state(accelerator, ckpt, checkpoint_dir)
    _restore_schedule(scheduler, ckpt, saved.step, checkpoint_dir)
    best_weights = None
    if keep_best and saved.best_step is not None:
        best_file = ckpt / BEST_WEIGHTS_FILE
        best_weights = (
            readers.load_torch(best_file, kind="training checkpoint's best weights", fix=afresh)
            if best_file.is_file()
            else cpu_copy(model.state_dict())  # the checkpoint's own weights are the best
        )
    return saved, best_weights, ckpt


def _schedule_record(scheduler: Any) -> dict[str, Any]:
    """What a checkpoint keeps of the learning-rate schedule (``SCHEDULE_FILE``): its step and the rates it gives
    there, as plain numbers whether the rates are floats or tensors. A resumed run rebuilds the schedule from its own
    settings (the fingerprint holds them) and checks that it gives the same rates."""
    return {"step": int(scheduler.last_epoch), "learning_rates": [float(lr) for lr in scheduler.get_last_lr()]}


def _restore_schedule(scheduler: Any, ckpt: Path, step: int, checkpoint_dir: Path) -> None:
    """Move this run's freshly built ``scheduler`` to the checkpoint's step (its rates computed as the uninterrupted
    run computed them) and check them against the checkpoint's record."""
    path = ckpt / SCHEDULE_FILE
    if not path.is_file():
        raise RuntimeError(
            f"checkpoint {ckpt} has no {SCHEDULE_FILE} (incomplete); delete {checkpoint_dir} to start afresh"
        )
    record = readers.read_json(path, kind="training checkpoint's schedule", fix=_afresh(checkpoint_dir))
    if record.get("step") != step:
        raise RuntimeError(
            f"{path}: the schedule is at step {record.get('step')} and the checkpoint at step {step}; delete "
            f"{checkpoint_dir} to start afresh"
        )
    scheduler.last_epoch = step - 1
    with warnings.catch_warnings():
        # step() warns when it comes before the optimizer's first step; here it only moves the schedule to the step
        warnings.filterwarnings(
            "ignore", message=r"Detected call of `lr_scheduler\.step\(\)` before", category=UserWarning
        )
        scheduler.step()
    rates = [float(lr) for lr in scheduler.get_last_lr()]
    if rates != record.get("learning_rates"):
        raise RuntimeError(
            f"{path}: the checkpoint's learning rates at step {step} are {record.get('learning_rates')} and this "
            f"run's schedule gives {rates} (another warmup or step count): rerun with the spurious version that wrote "
            f"it, or delete {checkpoint_dir} to start afresh"
        )


def save_checkpoint(
    accelerator: Any,
    checkpoint_dir: Path,
    state: TrainState,
    best_weights: Mapping[str, torch.Tensor] | None,
    scheduler: Any,
) -> Path:
    """Accelerate's state plus ``state.json``, the schedule's record (and the best weights where they differ from the
    current ones) under a temporary name, flushed to disk and renamed into place when complete; older checkpoints are
    dropped. Every process calls it."""
    final = checkpoint_dir / f"{CHECKPOINT_PREFIX}{state.step:08d}"
    if (final / STATE_FILE).is_file():
        return final
    tmp = checkpoint_dir / f".tmp-{final.name}"
    main = accelerator.is_main_process
    if main:
        checkpoint_dir.mkdir(parents=True, exist_ok=True)
        if tmp.exists():
            shutil.rmtree(tmp)
        tmp.mkdir()
    accelerator.wait_for_everyone()
    accelerator.save_state(str(tmp), safe_serialization=False)
    accelerator.wait_for_everyone()
    if main:
        if best_weights is not None and state.best_step != state.step:
            torch.save(dict(best_weights), tmp / BEST_WEIGHTS_FILE)
        (tmp / SCHEDULE_FILE).write_text(json.dumps(_schedule_record(scheduler)))
        (tmp / STATE_FILE).write_text(json.dumps(asdict(state)))
        fsync_tree(tmp)  # every process's files (the barrier above): the older checkpoints go next
        os.replace(tmp, final)
        fsync_dir(checkpoint_dir)
        for old in checkpoint_dir.iterdir():
            if old != final and old.is_dir() and (
                old.name.startswith(CHECKPOINT_PREFIX) or old.name.startswith(".tmp-")
            ):
                shutil.rmtree(old, ignore_errors=True)
    accelerator.wait_for_everyone()
    return final
