"""The ``tracker`` execution setting: a training run watched in TensorBoard, MLflow or Weights & Biases, offline.

``tracker: none`` (the default) logs nothing beyond the job's log. Otherwise the engine hands the name to Hugging Face
Accelerate (``Accelerator(log_with=...)``, ``init_trackers``, ``log``) and logs, into ``tracker/`` beside the run's
model folder (``results/models/minilm/seed0/tracker/``):

- at every optimizer step: ``train/loss``, ``train/learning_rate``, ``train/grad_norm`` (the gradient norm before
  clipping, where the run clips) and each value the loss function logs (``train/<name>``, e.g. LearnedMixin+H's gate);
- at every progress line (``log_every``): ``train/steps_per_s`` and ``train/<unit>_per_s``;
- at every evaluation: its numbers, ``eval/<record>.<field>`` (QA ``eval/validation_losses.loss``, a classifier's
  ``eval/history.accuracy``);
- once, as the run's configuration: its settings and its provenance (``provenance/<field>``,
  ``spurious.core.provenance``).

The values of a step are read from the device only where the log reads them anyway (a progress line, an
evaluation, a checkpoint, the end), so tracking adds no wait to a training step. Offline only: TensorBoard writes event
files; MLflow a file store (``MLFLOW_TRACKING_URI=file:<tracker>/mlruns``); W&B runs with ``WANDB_MODE=offline`` in
``<tracker>/wandb``. Sync them from a machine with network (``wandb sync``, ``mlflow`` server on the folder, or
``tensorboard --logdir``). The packages are optional extras: ``pip install 'spurious[tensorboard]'`` (or
``[mlflow]``, ``[wandb]``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

TRACKERS = ("none", "tensorboard", "mlflow", "wandb")
# what each tracker imports, and the extra that installs it
PACKAGES = {"tensorboard": ("tensorboard", "tensorboard"), "mlflow": ("mlflow", "mlflow"), "wandb": ("wandb", "wandb")}
PROJECT = "run"
TRACKER_FOLDER = "tracker"  # beside the run's model folder


def check_setting(value: Any) -> str:
    """The ``tracker`` setting, validated; its package importable (else a ValueError naming the extra)."""
    kind = "none" if value in (None, False) else str(value)
    if kind not in TRACKERS:
        raise ValueError(f"the setting tracker must be one of {list(TRACKERS)}, got {value!r}")
    if kind != "none":
        module, extra = PACKAGES[kind]
        try:
            __import__(module)
        except ImportError:
            raise ValueError(
                f"tracker: {kind} needs the {module} package, which is not installed: pip install "
                f"'spurious[{extra}]' (or set tracker: none)"
            ) from None
    return kind


def offline_environment(kind: str, folder: Path) -> None:
    """Keep a tracker off the network and its files in ``folder``."""
    if kind == "mlflow":
        os.environ["MLFLOW_TRACKING_URI"] = (folder / "mlruns").resolve().as_uri()
    elif kind == "wandb":
        os.environ["WANDB_MODE"] = "offline"
        os.environ["WANDB_DIR"] = str(folder.resolve())
        os.environ.setdefault("WANDB_SILENT", "true")


def init_kwargs(kind: str, folder: Path) -> dict[str, Any]:
    if kind == "mlflow":
        return {"mlflow": {"logging_dir": str((folder / "mlruns").resolve())}}
    if kind == "wandb":
        return {"wandb": {"dir": str(folder.resolve()), "mode": "offline"}}
    return {}


def _value(value: Any) -> str | int | float | bool:
    if isinstance(value, str):
        return str(value)  # a str subclass (torch's version) as plain text
    if isinstance(value, bool | int | float):
        return value
    return json.dumps(value, default=str) if isinstance(value, list | tuple | dict) else str(value)


def run_config(settings: Mapping[str, Any], record: Mapping[str, Any]) -> dict[str, Any]:
    """The run's configuration as a tracker stores it: flat, plain values (the settings and ``provenance/...``)."""
    config = {k: _value(v) for k, v in settings.items()}
    config.update(
        {f"provenance/{k}": _value(v) for k, v in record.items() if k not in ("rule", "wildcards", "outputs")}
    )
    return config


def evaluation_values(record: Mapping[str, Any], step: int) -> dict[str, float]:
    """The numbers an evaluation at ``step`` added to its record (``state.evaluation``): every list of
    ``{"step": ..., ...}`` entries whose last entry is at ``step`` (and such lists one level down, e.g. the extra
    validation curves) gives ``eval/<key>.<field>`` per number."""
    values: dict[str, float] = {}

    def take(prefix: str, entries: Any) -> None:
        if isinstance(entries, list) and entries and isinstance(entries[-1], dict) and entries[-1].get("step") == step:
            for field, value in entries[-1].items():
                if field != "step" and isinstance(value, int | float) and not isinstance(value, bool):
                    values[f"eval/{prefix}.{field}"] = float(value)

    for key, entries in record.items():
        if isinstance(entries, dict):
            for name, inner in entries.items():
                take(f"{key}.{name}", inner)
        else:
            take(key, entries)
    return values
