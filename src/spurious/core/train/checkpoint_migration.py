"""Checkpoints of earlier versions, which held the learning-rate schedule as Accelerate's pickle
(``custom_checkpoint_0.pkl``): read without running code and converted to the ``schedule.json`` record that
:mod:`spurious.core.train.checkpoints` writes, so a run interrupted under such a version resumes; a checkpoint holding
any other pickle is refused. Only development versions before the first release wrote such checkpoints (before the
``schedule.json`` record came, commit a3a0981): this module goes with the first release, 0.1.0."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from spurious.core import readers
from spurious.core.io import write_json

# Accelerate's file of an object registered for checkpointing, which its load_state unpickles with weights_only=False
# (code may run). Earlier versions registered the schedule: such a file is read as plain data or refused.
PICKLED_OBJECT_FILES = "custom_checkpoint_*.pkl"
LEGACY_SCHEDULE_FILE = "custom_checkpoint_0.pkl"


def convert_pickled_schedule(accelerator: Any, ckpt: Path, checkpoint_dir: Path, schedule_file: str) -> None:
    """A checkpoint of an earlier version holds the schedule as Accelerate's pickle (``LEGACY_SCHEDULE_FILE``), which
    ``load_state`` would unpickle with ``weights_only=False``. It is read with torch's weights-only unpickler instead
    (it rebuilds plain values and tensors and calls no other function, so a file made to run code fails to load) and,
    if it holds a schedule's plain state, recorded as ``schedule_file``; the pickle is then deleted. Any other pickle
    is refused."""
    pickled = sorted(ckpt.glob(PICKLED_OBJECT_FILES))
    if not pickled:
        return
    refusal = (
        f"it is not loaded, because loading it could run code. Delete {checkpoint_dir} to start afresh (or, if you "
        "trust where the checkpoint came from, finish the run with the spurious version that wrote it)"
    )
    if [p.name for p in pickled] != [LEGACY_SCHEDULE_FILE]:
        raise RuntimeError(
            f"checkpoint {ckpt} holds pickled objects {[p.name for p in pickled]} this version never wrote: {refusal}"
        )
    record = _read_pickled_schedule(pickled[0], refusal)
    accelerator.wait_for_everyone()  # every process has read it before it goes
    if accelerator.is_main_process:
        if not (ckpt / schedule_file).is_file():
            write_json(record, ckpt / schedule_file)
        pickled[0].unlink()
    accelerator.wait_for_everyone()


def _read_pickled_schedule(path: Path, refusal: str) -> dict[str, Any]:
    """The ``_schedule_record`` of an earlier version's pickled ``LambdaLR`` state, or a RuntimeError ending with
    ``refusal``."""
    try:
        saved = readers.load_torch(path, kind="learning-rate schedule", fix=refusal)
    except Exception as exc:  # noqa: BLE001 - any reason (a forbidden global, a damaged file) ends in the refusal
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise RuntimeError(f"{path}: not the plain state of a learning-rate schedule ({reason}); {refusal}") from None
    step, rates = (saved.get("last_epoch"), saved.get("_last_lr")) if isinstance(saved, dict) else (None, None)
    plain = isinstance(step, int) and not isinstance(step, bool) and isinstance(rates, list)
    if not plain or not all(isinstance(r, float | int) and not isinstance(r, bool) for r in rates):
        raise RuntimeError(f"{path}: not the plain state of a learning-rate schedule; {refusal}")
    return {"step": step, "learning_rates": [float(r) for r in rates]}
