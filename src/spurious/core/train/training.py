"""Training pieces shared by the engine (``spurious.core.train.engine``) and by inference: devices and bf16, seeding and
RNG states, the weight-decay groups, the data order as a pure function of (seed, epoch), preemption signals, checkpoint
discovery and the atomic saving of a trained model folder.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import random
import signal
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

from spurious.core.io import atomic_dir
from spurious.core.models import quiet_transformers

logger = logging.getLogger(__name__)

CHECKPOINT_PREFIX = "step-"
TRAINING_STATE_FILE = "training_state.json"


class TrainingPreempted(RuntimeError):
    """Raised after a SIGTERM/SIGUSR1 once a checkpoint has been saved; rerunning the job resumes from it."""

    def __init__(self, signum: int, step: int, checkpoint: Path) -> None:
        self.signum, self.step, self.checkpoint = signum, step, checkpoint
        super().__init__(
            f"received {signal.Signals(signum).name}: saved a checkpoint at step {step} in {checkpoint}; "
            "rerun the same job to resume from it"
        )


def pick_device(device: str = "auto") -> torch.device:
    """``auto`` = CUDA if available, else CPU; asking for CUDA without one is an error, not a silent CPU run."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dev = torch.device(device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("device 'cuda' was requested but torch sees no CUDA device; use device: auto or cpu")
    return dev


def use_bf16(bf16: bool | str, device: torch.device) -> bool:
    """``auto`` = bf16 autocast on CUDA devices that support it; never on CPU (slower there, and less exact)."""
    if bf16 == "auto":
        return device.type == "cuda" and torch.cuda.is_bf16_supported()
    return bool(bf16)


def autocast(device: torch.device, enabled: bool) -> contextlib.AbstractContextManager:
    if not enabled:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=torch.bfloat16)


class StopRequested(Exception):
    pass


# Width buckets (issue 28): on a GPU every batch width met for the first time in a process costs ~0.14 s (kernel
# selection for the new shapes), so length-grouped batches of ever new widths ran 4-5x slower than plain padding;
# widths rounded up to a multiple of 64 cost 0.029 s a step once seen, against 0.042 s for padding to 256 (an H200,
# BERT-base size, batch 32). On CPU there is no such cost and every padded token is work: exact widths.
PAD_MULTIPLE_BY_DEVICE = {"cuda": 64, "cpu": 1}


def pad_multiple(setting: int | str | None, device: torch.device) -> int:
    """The multiple that batch widths are padded up to: the setting ``pad_to_multiple_of`` (an int, or ``auto`` for the
    device's default, ``PAD_MULTIPLE_BY_DEVICE``)."""
    if setting in (None, "auto"):
        return PAD_MULTIPLE_BY_DEVICE.get(device.type, 1)
    value = int(setting)
    if value < 1:
        raise ValueError(f"pad_to_multiple_of must be a positive integer or 'auto', got {setting!r}")
    return value


def padded_width(longest: int, multiple: int = 1, cap: int | None = None) -> int:
    """A batch's width: its longest row rounded up to ``multiple``, but never beyond ``cap`` (the featurisation's
    max_length) unless the longest row itself is longer."""
    width = -(-longest // multiple) * multiple
    if cap is not None:
        width = min(width, max(cap, longest))
    return width


def to_device(batch: Mapping[str, torch.Tensor], device: torch.device) -> dict[str, torch.Tensor]:
    """A host batch on ``device`` without making the host wait: on CUDA each tensor is copied into pinned memory and
    from there asynchronously (a copy from ordinary, pageable memory may wait for the GPU's queued work first)."""
    if device.type != "cuda":
        return {k: v.to(device) for k, v in batch.items()}
    return {k: v.pin_memory().to(device, non_blocking=True) for k, v in batch.items()}


def seed_everything(seed: int) -> None:
    """Seed python, numpy and torch (all devices): the fresh QA head and dropout draw from torch's RNG."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def rng_states() -> dict[str, Any]:
    """Python, numpy, torch and the current CUDA device's RNG states, to restore around work that must not move the
    training's random streams (a checkpoint selection); checkpoints hold Accelerate's RNG states of every process."""
    kind, keys, pos, has_gauss, gauss = np.random.get_state()
    states: dict[str, Any] = {
        "python": random.getstate(),
        "numpy": (kind, torch.from_numpy(keys.astype(np.int64)), int(pos), int(has_gauss), float(gauss)),
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        # the current device's only: touching every visible GPU would open a context on each from every process
        states["cuda"] = torch.cuda.get_rng_state()
    return states


def set_rng_states(states: Mapping[str, Any]) -> None:
    random.setstate(_as_tuple(states["python"]))
    kind, keys, pos, has_gauss, gauss = states["numpy"]
    np.random.set_state((kind, keys.numpy().astype(np.uint32), pos, has_gauss, gauss))
    torch.set_rng_state(states["torch"])
    if "cuda" in states and torch.cuda.is_available():
        torch.cuda.set_rng_state(states["cuda"])


def _as_tuple(x: Any) -> Any:
    return tuple(_as_tuple(v) for v in x) if isinstance(x, list | tuple) else x


def param_groups(model: torch.nn.Module, weight_decay: float) -> list[dict[str, Any]]:
    """Decay all weights except biases and normalisation parameters, as the HF Trainer does."""
    no_decay: set[str] = set()
    for module_name, module in model.named_modules():
        is_norm = (
            isinstance(module, torch.nn.LayerNorm | torch.nn.modules.normalization.RMSNorm)
            or "norm" in type(module).__name__.lower()
        )
        for pname, _ in module.named_parameters(recurse=False):
            full = f"{module_name}.{pname}" if module_name else pname
            if is_norm or pname.endswith("bias"):
                no_decay.add(full)
    decay = [p for n, p in model.named_parameters() if p.requires_grad and n not in no_decay]
    plain = [p for n, p in model.named_parameters() if p.requires_grad and n in no_decay]
    return [{"params": decay, "weight_decay": weight_decay}, {"params": plain, "weight_decay": 0.0}]


def epoch_order(
    lengths: np.ndarray, *, batch_size: int, seed: int, epoch: int, group_by_length: bool = False
) -> np.ndarray:
    """The training-window order of one epoch: a pure function of (seed, epoch), so a resumed run can rebuild it.

    ``group_by_length`` (like the HF Trainer option) sorts chunks of 50 batches by length and shuffles the full
    batches, so a batch holds windows of similar length and pads little: about 1.5x faster on CPU with dynamic
    padding. The last, partial batch stays last so that batches can be taken as consecutive slices.
    """
    gen = torch.Generator().manual_seed(seed * 1_000_003 + epoch)
    order = torch.randperm(len(lengths), generator=gen).numpy()
    if not group_by_length:
        return order
    mega = batch_size * 50
    chunks = [order[i : i + mega] for i in range(0, len(order), mega)]
    order = np.concatenate([c[np.argsort(-lengths[c], kind="stable")] for c in chunks])
    n_full = len(order) // batch_size
    shuffled = torch.randperm(n_full, generator=gen).numpy()
    full = order[: n_full * batch_size].reshape(n_full, batch_size)[shuffled].reshape(-1)
    return np.concatenate([full, order[n_full * batch_size :]])


def _checkpoints(checkpoint_dir: Path) -> list[Path]:
    if not checkpoint_dir.is_dir():
        return []
    found = [p for p in checkpoint_dir.iterdir() if p.is_dir() and p.name.startswith(CHECKPOINT_PREFIX)]
    return sorted(found, key=lambda p: int(p.name[len(CHECKPOINT_PREFIX) :]))


def latest_checkpoint(checkpoint_dir: str | os.PathLike) -> Path | None:
    """The newest complete checkpoint (written under a temporary name, renamed when complete), or None."""
    found = [p for p in _checkpoints(Path(checkpoint_dir)) if (p / "state.json").is_file()]
    return found[-1] if found else None


class PreemptionGuard:
    """Turns SIGTERM/SIGUSR1 (SLURM's warning before a kill) into a flag the training loop polls.

    Saving inside the handler could catch the model mid-update; the loop instead checkpoints at the next consistent
    point (after an optimizer step, or by abandoning a running evaluation) and raises ``TrainingPreempted``.
    """

    SIGNALS = (signal.SIGTERM, signal.SIGUSR1)

    def __init__(self) -> None:
        self.signum: int | None = None
        self._previous: dict[int, Any] = {}

    def handler(self, signum: int, frame: Any) -> None:
        self.signum = signum

    @property
    def triggered(self) -> bool:
        return self.signum is not None

    def __enter__(self) -> PreemptionGuard:
        for sig in self.SIGNALS:
            try:
                self._previous[sig] = signal.signal(sig, self.handler)
            except ValueError:  # not the main thread: signals cannot be handled here
                logger.warning("not in the main thread: SIGTERM/SIGUSR1 will not trigger a checkpoint")
                break
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, previous in self._previous.items():
            signal.signal(sig, previous)


def format_eta(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "?"
    seconds = int(seconds)
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    return f"{h}h{m:02d}m{s:02d}s" if h else f"{m}m{s:02d}s"


def save_model_dir(output_dir: Path, model: Any, tokenizer: Any, summary: Mapping[str, Any]) -> None:
    """Save model + tokenizer + training_state.json into a temporary sibling, then swap it in for ``output_dir``
    (``core.io.atomic_dir``: flushed to disk; a crash leaves the old or the new folder, never neither)."""
    with atomic_dir(output_dir) as tmp:
        with quiet_transformers():  # no "Writing model shards" progress bar in job logs
            model.save_pretrained(tmp)
            tokenizer.save_pretrained(tmp)
        (tmp / TRAINING_STATE_FILE).write_text(json.dumps(summary, indent=2, default=str) + "\n")


def cpu_copy(state_dict: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {k: v.detach().to("cpu", copy=True) for k, v in state_dict.items()}
