"""The training engine of every fine-tuning run (QA and classification), built on Hugging Face Accelerate.

What comes from Accelerate: device placement, bf16 mixed precision, distributed data parallelism (DDP over N
processes: NCCL on GPUs, gloo on CPUs), the suppression of gradient synchronisation between the micro-batches of an
accumulated step (``Accelerator.no_sync``), gradient clipping, and the checkpoint state (``save_state`` /
``load_state``: model and training objective, optimizer, and the RNG states of every process, each loaded with torch's
weights-only unpickler, which rebuilds tensors, plain values and numpy arrays and calls nothing else).

What stays ours, because results and resumption depend on it:

* the loss, given by the caller in two parts (QA span loss, a debiasing objective, weighted cross-entropy, a prompt's
  label-word loss): ``batch_fn(rows, device) -> batch`` on the host (collate the training rows, move them to the
  device) and ``loss_fn(model, objective, batch) -> (mean loss over the rows, {name: 0-d tensor})`` on the device,
  which never reads a value on the host, so that the host queues steps ahead of the GPU; with the ``compile``
  setting, ``loss_fn`` is compiled once per batch shape and warmed before the first step
  (``spurious.core.train.compiled``);
* the optimizer: AdamW (fused kernel on CPU and CUDA, as the ``transformers`` Trainer's default) over the model's
  and the objective's parameters, weight decay except biases and norms, linear schedule with warmup; compiled runs
  on CUDA replay the optimizer step (clipping, AdamW, zeroing the gradients) as one captured CUDA graph;
* the data order: a pure function of (seed, epoch) (``training.epoch_order``), so a resumed run rebuilds it;
* the global batch: an optimizer step consumes ``gradient_accumulation_steps`` micro-batches of ``batch_size`` rows
  whatever the number of processes N; each process takes a contiguous 1/N of every micro-batch and scales its mean
  loss by its share, so the averaged gradient equals the one-process gradient of the whole micro-batch;
* evaluation and checkpoint selection (an ``Evaluation`` given by the caller; every process evaluates the same model,
  so every process takes the same decisions without communicating);
* SIGTERM/SIGUSR1 (SLURM's warning before a kill): a flag polled at consistent points; with N processes the flag is
  all-reduced after every step so that all of them stop at the same step; then a checkpoint, then
  ``TrainingPreempted`` (a non-zero exit). Checkpoints are written under a temporary name and renamed when complete.
* the learning-rate schedule in a checkpoint: its step and rates as JSON (``schedule.json``), rebuilt on resume, so
  that resuming never unpickles code (Accelerate would pickle a registered scheduler and load it with
  ``weights_only=False``).

One optimizer step (its micro-batches, this process's share of each, accumulation, the update, the compiled steps,
the optimizer and schedule) is in :mod:`spurious.core.train.steps`. What a checkpoint holds, how it is written and the
checks on resume are in :mod:`spurious.core.train.checkpoints`;
:func:`spurious.core.train.launch.launch` runs a training function over N processes on one node (``processes`` setting;
the rules take N from the job's GPU count, see docs/running.md "Several GPUs per training job").
"""

from __future__ import annotations

import functools
import math
import os
import signal
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch

from spurious.core.train import compiled, steps, tracking
from spurious.core.train.checkpoints import (
    TrainState,
    resume,
    save_checkpoint,
)
from spurious.core.train.steps import (
    CompiledUpdate,
    CompileRecord,
    LogFn,
    StepTerms,
    compile_outcome,
    compile_step,
    data_order,
    optimizer_and_schedule,
    optimizer_impl,
    step_micro_batches,
    sum_over_processes,
)
from spurious.core.train.training import (
    PreemptionGuard,
    StopRequested,
    TrainingPreempted,
    cpu_copy,
    format_eta,
    pick_device,
    use_bf16,
)

__all__ = [
    "BatchFn",
    "CompileRecord",
    "Evaluation",
    "LogFn",
    "LossFn",
    "TrainResult",
    "WidthFn",
    "device_for",
    "run_summary",
    "step_counts",
    "train",
    "world",
]

BatchFn = Callable[[np.ndarray, torch.device], Mapping[str, torch.Tensor]]
LossFn = Callable[
    [torch.nn.Module, "torch.nn.Module | None", Mapping[str, torch.Tensor]],
    tuple[torch.Tensor, Mapping[str, torch.Tensor]],
]
WidthFn = Callable[[np.ndarray], int]


class Evaluation(Protocol):
    """A caller's evaluation: when it is due, and running it (which records into ``state.evaluation``, may set
    ``state.stopped_early``, and answers whether the model is the best so far). ``should_stop`` (None with several
    processes) is polled by a long evaluation, which then raises ``StopRequested`` having changed nothing."""

    def due(self, state: TrainState, total_steps: int) -> bool: ...

    def __call__(self, state: TrainState, should_stop: Callable[[], bool] | None) -> bool: ...


@dataclass
class TrainResult:
    state: TrainState
    total_steps: int
    steps_per_epoch: int
    resumed_from: int | None
    device: torch.device
    bf16: bool
    processes: int
    is_main: bool
    train_wall_time_s: float
    # the compile setting's outcome in this segment (CompileRecord as a dict)
    compile: dict[str, Any] = field(default_factory=dict)


class _LossModule(torch.nn.Module):
    """The model and the training objective as one module, so DDP synchronises the gradients of both and Accelerate
    saves both; ``forward(rows)`` is the caller's loss on those training rows: ``batch_fn`` on the host, then
    ``loss_fn``, compiled for the shapes in ``compiled_shapes`` once ``compile`` sets them."""

    def __init__(
        self,
        model: torch.nn.Module,
        objective: torch.nn.Module | None,
        loss_fn: LossFn,
        batch_fn: BatchFn,
        shape_of: Callable[[np.ndarray], compiled.Shape],
    ) -> None:
        super().__init__()
        self.model, self.objective = model, objective
        self.loss_fn, self.batch_fn, self.shape_of = loss_fn, batch_fn, shape_of
        self.compiled_loss: Callable[..., Any] | None = None
        self.compiled_shapes: frozenset[compiled.Shape] = frozenset()

    def use_compiled(self, shapes: Any, device: torch.device) -> None:
        self.compiled_loss = compiled.compile_function(self.loss_fn, device, len(shapes))
        self.compiled_shapes = frozenset(shapes)

    def forward(self, rows: np.ndarray) -> tuple[torch.Tensor, Mapping[str, torch.Tensor]]:
        batch = self.batch_fn(rows, next(self.model.parameters()).device)
        if self.compiled_loss is not None and self.shape_of(rows) in self.compiled_shapes:
            return compiled.run_compiled(self.compiled_loss, self.model, self.objective, batch)
        return self.loss_fn(self.model, self.objective, batch)


def world() -> tuple[int, int]:
    """(rank, number of processes) of this process: (0, 1) outside ``launch``."""
    return int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))


def device_for(settings: Mapping[str, Any]) -> torch.device:
    """The device this process trains on: ``pick_device(settings["device"])``, with several processes on CUDA the
    process's own GPU (``cuda:LOCAL_RANK``), as Accelerate places it."""
    device = pick_device(str(settings["device"]))
    if device.type == "cuda" and world()[1] > 1:
        return torch.device(f"cuda:{int(os.environ.get('LOCAL_RANK', 0))}")
    return device


def _accelerator(device: torch.device, bf16: bool, processes: int, find_unused: bool, tracker: str = "none",
                 tracker_dir: Path | None = None) -> Any:
    from accelerate import Accelerator
    from accelerate.state import AcceleratorState
    from accelerate.utils import DistributedDataParallelKwargs

    if processes == 1:
        # Accelerate keeps its state in process-wide singletons; a process that trains several models (tests, the
        # scale search) may change device or precision between them
        AcceleratorState._reset_state(reset_partial_state=True)
    # an objective may leave some of its or the model's parameters out of a step's graph (DDP must then look)
    handlers = [DistributedDataParallelKwargs(find_unused_parameters=find_unused)] if processes > 1 else []
    track = tracker != "none" and tracker_dir is not None
    accelerator = Accelerator(
        cpu=device.type == "cpu", mixed_precision="bf16" if bf16 else "no", kwargs_handlers=handlers,
        log_with=tracker if track else None, project_dir=str(tracker_dir) if track else None,
    )
    if accelerator.num_processes != processes:
        raise RuntimeError(
            f"Accelerate sees {accelerator.num_processes} processes, the run was launched with {processes}"
        )
    return accelerator


def _announce(emit: LogFn, message: str, rank: int) -> None:
    """``emit`` a stop or a resume, and say it on the process's own stderr too where a workflow job sent its logging
    to the rule's log (``runlog.setup``): Snakemake empties that log before each attempt, so a retried job's earlier
    attempts would leave no word of where they stopped; their stderr (the SLURM log of each attempt, kept for a
    failed one; the console of a local run) keeps it."""
    emit(message)
    if rank == 0 and sys.__stderr__ is not None and sys.stderr is not sys.__stderr__:
        print(f"spurious: {message}", file=sys.__stderr__, flush=True)


def train(
    model: torch.nn.Module,
    loss_fn: LossFn,
    lengths: np.ndarray,
    settings: Mapping[str, Any],
    *,
    batch_fn: BatchFn,
    batch_width: WidthFn,
    checkpoint_dir: str | os.PathLike,
    fingerprint: str,
    emit: LogFn,
    objective: torch.nn.Module | None = None,
    evaluation: Evaluation | None = None,
    keep_best: bool = True,
    unit: str = "examples",
    tracker_dir: str | os.PathLike | None = None,
) -> TrainResult:
    """Train ``model`` (and ``objective``'s parameters) on the rows ``0..len(lengths)-1`` (of ``lengths`` tokens).

    A micro-batch of rows is ``batch_fn(rows, device)`` (host: collate, move to the device) and its loss
    ``loss_fn(model, objective, batch)`` (device only: no value read on the host; logged values as 0-d tensors).
    ``batch_width(row_lengths)`` is the sequence length of the batch of rows of those lengths (``batch_fn``'s rule: the
    padded width, or a packed row's length, ``spurious.core.train.packing.row_length``), from which the ``compile``
    setting learns the batch shapes ``(rows, sequence length)`` of the run (``spurious.core.train.compiled``).

    ``settings``: learning_rate, batch_size, gradient_accumulation_steps, epochs, max_steps, warmup_ratio,
    weight_decay, max_grad_norm, group_by_length, checkpoint_every, seed, log_every, device, bf16, compile, tracker (see
    the QA and classification defaults). With ``tracker`` other than none the run is logged into ``tracker_dir``
    (``spurious.core.train.tracking``). Resumes from the newest checkpoint in ``checkpoint_dir`` whose fingerprint
    matches (another run's is refused). With ``evaluation`` and ``keep_best``, the weights of the best evaluation are
    loaded into ``model`` at the end (kept in the checkpoints, so a resumed run ends with the same model).
    """
    # set up: the processes, Accelerate, the optimizer and schedule, the training module
    rank, processes = world()
    accelerator, track, bf16 = _accelerator_for(settings, processes, objective, tracker_dir)
    device = accelerator.device
    checkpoint_dir = Path(checkpoint_dir)
    model.train()
    if objective is not None:
        objective.train()
    micro_per_epoch, steps_per_epoch, total_steps = step_counts(len(lengths), settings)
    optimizer, scheduler = optimizer_and_schedule(model, objective, settings, total_steps, device)
    shape_of = functools.partial(_batch_shape, lengths, batch_width)
    module, optimizer = accelerator.prepare(_LossModule(model, objective, loss_fn, batch_fn, shape_of), optimizer)
    # the scheduler is not prepared (Accelerate's wrapper steps N times per step with N processes) nor registered for
    # checkpointing (Accelerate would pickle it): the checkpoints record its step (save_checkpoint)

    # resume from this run's newest checkpoint, if any; compile the steps left; start the tracker
    state = TrainState(fingerprint=fingerprint, processes=processes, optimizer_impl=optimizer_impl(optimizer))
    state, best_weights, ckpt = resume(accelerator, checkpoint_dir, state, model, scheduler, keep_best=keep_best)
    resumed_from = None if ckpt is None else state.step
    if ckpt is not None:
        _announce(emit, f"resuming from {ckpt} (step {state.step}/{total_steps})", rank)
    record, update = compile_step(accelerator, module, optimizer, settings, lengths, shape_of, state, total_steps,
                                  device, emit, rank=rank, processes=processes)
    if track != "none":
        _start_tracker(accelerator, track, settings, tracker_dir, emit)

    # the steps: each followed by its log line, evaluation and checkpoint when due; a signal stops them at a checkpoint
    step = _Stepper(accelerator, module, optimizer, scheduler, update, lengths, settings, micro_per_epoch,
                    rank=rank, processes=processes, device=device, grad_norm=track != "none")
    per_step = int(settings["batch_size"]) * int(settings["gradient_accumulation_steps"])
    progress = _ProgressLog(emit, total_steps, steps_per_epoch, per_step, unit, int(settings["log_every"]))
    segment = _Segment(accelerator, scheduler, checkpoint_dir, state, best_weights, model, evaluation,
                       keep_best=keep_best, total_steps=total_steps, processes=processes, device=device, track=track,
                       unit=unit, progress=progress, checkpoint_every=int(settings["checkpoint_every"] or 0))
    progress.start(state.step)
    with segment.guard:
        try:
            _run_segment(segment, step)
        except StopRequested:
            raise _preempted(segment, emit, rank) from None
        finally:
            if track != "none":
                accelerator.end_training()  # the tracker's files flushed and closed, also on preemption

    # finish: the best weights into the model, the run's record
    if keep_best and segment.best_weights is not None:
        model.load_state_dict(segment.best_weights)
    return TrainResult(
        state=state, total_steps=total_steps, steps_per_epoch=steps_per_epoch, resumed_from=resumed_from,
        device=device, bf16=bf16, processes=processes, is_main=rank == 0,
        train_wall_time_s=segment.train_wall_time_s(), compile=compile_outcome(record, update, loss_fn),
    )  # fmt: skip


def _accelerator_for(
    settings: Mapping[str, Any],
    processes: int,
    objective: torch.nn.Module | None,
    tracker_dir: str | os.PathLike | None,
) -> tuple[Any, str, bool]:
    """The run's Accelerator, its tracker (``none`` without ``tracker_dir``) and whether it trains in bf16."""
    device = device_for(settings)
    bf16 = use_bf16(settings["bf16"], device)
    track = tracking.check_setting(settings.get("tracker", "none")) if tracker_dir is not None else "none"
    if track != "none":
        tracking.offline_environment(track, Path(tracker_dir))
    accelerator = _accelerator(device, bf16, processes, find_unused=objective is not None, tracker=track,
                               tracker_dir=Path(tracker_dir) if track != "none" else None)
    return accelerator, track, bf16


def _start_tracker(
    accelerator: Any, track: str, settings: Mapping[str, Any], tracker_dir: str | os.PathLike, emit: LogFn
) -> None:
    """Start the ``track`` tracker logging into ``tracker_dir``, with the settings and environment as its config."""
    from spurious.core.provenance import environment

    accelerator.init_trackers(tracking.PROJECT, config=tracking.run_config(settings, environment()),
                              init_kwargs=tracking.init_kwargs(track, Path(tracker_dir)))  # fmt: skip
    emit(f"tracker {track}: logging into {tracker_dir}")


def _batch_shape(lengths: np.ndarray, batch_width: WidthFn, rows: np.ndarray) -> compiled.Shape:
    """The shape ``(rows, sequence length)`` of the micro-batch of the training rows ``rows``."""
    return len(rows), batch_width(lengths[rows])


@dataclass
class _Stepper:
    """The run's optimizer steps, one per call, in the data order of each epoch (``data_order``, rebuilt when the
    epoch changes), on the objects Accelerate prepared (``update``: a compiled run's optimizer step)."""

    accelerator: Any
    module: torch.nn.Module
    optimizer: Any
    scheduler: Any
    update: CompiledUpdate | None
    lengths: np.ndarray
    settings: Mapping[str, Any]
    micro_per_epoch: int
    rank: int
    processes: int
    device: torch.device
    grad_norm: bool  # keep each step's gradient norm (for a tracker)
    order: np.ndarray | None = None  # the data order of epoch ``order_epoch``
    order_epoch: int = -1

    def __call__(self, state: TrainState) -> tuple[StepTerms, float]:
        """Take the optimizer step at ``state``'s place in the data and move ``state`` past it; return the step's
        loss and logged values (unread, ``StepTerms``) and its learning rate."""
        if self.order is None or self.order_epoch != state.epoch:
            self.order, self.order_epoch = data_order(self.lengths, self.settings, state.epoch), state.epoch
        batch_size, accum = int(self.settings["batch_size"]), int(self.settings["gradient_accumulation_steps"])
        micro_batches = step_micro_batches(self.order, state.batch_in_epoch, batch_size, accum)
        terms, lr = steps.optimizer_step(  # looked up at each call: tests patch it
            self.accelerator,
            self.module,
            self.optimizer,
            self.scheduler,
            micro_batches,
            max_grad_norm=float(self.settings["max_grad_norm"] or 0),
            rank=self.rank,
            processes=self.processes,
            device=self.device,
            update=self.update,
            grad_norm=self.grad_norm,
        )
        state.step += 1
        state.batch_in_epoch += len(micro_batches)
        if state.batch_in_epoch >= self.micro_per_epoch:
            state.epoch, state.batch_in_epoch = state.epoch + 1, 0
        return terms, lr


@dataclass
class _Segment:
    """One training segment (from the start or a resume to the end, an early stop or a preemption): the run's state
    and best weights, and what the loop does between the optimizer steps: read and log the losses, evaluate,
    checkpoint, and agree with the other processes whether to stop."""

    accelerator: Any
    scheduler: Any
    checkpoint_dir: Path
    state: TrainState
    best_weights: dict[str, torch.Tensor] | None
    model: torch.nn.Module
    evaluation: Evaluation | None
    keep_best: bool
    total_steps: int
    checkpoint_every: int  # steps between checkpoints (0: none before a preemption)
    processes: int
    device: torch.device
    track: str
    unit: str
    progress: _ProgressLog
    guard: PreemptionGuard = field(default_factory=PreemptionGuard)  # entered around the loop (``train``)
    # when this segment's clock started; each checkpoint adds the time since to ``state.wall_time_s`` and restarts it
    segment_start: float = field(default_factory=time.perf_counter)
    # The steps whose losses are still on the device: read together at a log line, an evaluation, a checkpoint or
    # the end, so that the host queues the next steps while the GPU works (the numbers are the same).
    unread: list[tuple[int, StepTerms, float]] = field(default_factory=list)

    def checkpoint(self) -> Path:
        """Save a checkpoint at the current step (its wall time brought up to date) and return its path."""
        self.state.wall_time_s += time.perf_counter() - self.segment_start
        self.segment_start = time.perf_counter()
        return save_checkpoint(self.accelerator, self.checkpoint_dir, self.state, self.best_weights, self.scheduler)

    def should_stop(self) -> bool:
        """Whether this process was signalled to stop (polled by a long evaluation)."""
        return self.guard.triggered

    def evaluate(self) -> None:
        """Run the evaluation at the current step; keep the model's weights when they are the best so far."""
        assert self.evaluation is not None
        state = self.state
        # with several processes an abandoned evaluation would leave the processes at different points
        improved = self.evaluation(state, self.should_stop if self.processes == 1 else None)
        state.last_eval_step = state.step
        if self.track != "none":
            self.accelerator.log(tracking.evaluation_values(state.evaluation, state.step), step=state.step)
        if improved:
            state.best_step = state.step
            if self.keep_best:
                self.best_weights = cpu_copy(self.model.state_dict())

    def evaluation_due(self) -> bool:
        """Whether an evaluation is due at the current step (never at step 0, never twice at one step)."""
        state = self.state
        if self.evaluation is None or state.step == 0 or state.last_eval_step == state.step:
            return False
        return self.evaluation.due(state, self.total_steps)

    def stop_agreed(self) -> bool:
        """Whether any process was signalled: with several processes all stop at the same step."""
        return sum_over_processes([float(self.guard.triggered)], self.processes, self.device)[0] > 0

    def read_losses(self) -> None:
        """Read the unread steps' losses into ``state.train_losses``, the progress log and the tracker."""
        for step, terms, lr in self.unread:
            loss, info = terms.value()
            self.state.train_losses.append({"step": step, "loss": loss, "lr": lr, **info})
            rates = self.progress.add(step, loss, info, lr)
            if self.track != "none":  # read here, where the log reads the step's loss anyway
                values = {"train/loss": loss, "train/learning_rate": lr, **{f"train/{k}": v for k, v in info.items()}}
                if terms.grad_norm is not None:
                    values["train/grad_norm"] = float(terms.grad_norm)
                if rates is not None:
                    values.update({"train/steps_per_s": rates[0], f"train/{self.unit}_per_s": rates[1]})
                self.accelerator.log(values, step=step)
        self.unread.clear()

    def train_wall_time_s(self) -> float:
        """The run's training time so far: the earlier segments' and this one's."""
        return self.state.wall_time_s + time.perf_counter() - self.segment_start


def _run_segment(segment: _Segment, step: _Stepper) -> None:
    """The optimizer steps from ``segment.state`` to the last step or an early stop, each followed by its log line,
    evaluation and checkpoint where due; ``StopRequested`` when a process was signalled (checked before and after each
    step)."""
    state = segment.state
    if segment.evaluation_due():  # an evaluation was abandoned when the previous segment was preempted
        segment.evaluate()
    while state.step < segment.total_steps and not state.stopped_early:
        if segment.stop_agreed():
            raise StopRequested
        terms, lr = step(state)
        segment.unread.append((state.step, terms, lr))
        if segment.progress.due(state.step):
            segment.read_losses()
        if segment.evaluation_due():
            segment.read_losses()
            segment.evaluate()
        if segment.stop_agreed():
            raise StopRequested
        every = segment.checkpoint_every
        if every and state.step % every == 0 and state.step < segment.total_steps and not state.stopped_early:
            segment.read_losses()
            segment.checkpoint()  # not after the last step: the caller saves the model next
    segment.read_losses()
    if segment.evaluation_due():
        segment.evaluate()


def _preempted(segment: _Segment, emit: LogFn, rank: int) -> TrainingPreempted:
    """After a stop was agreed: the losses read, a checkpoint saved and announced; the error that ends the run."""
    segment.read_losses()
    path = segment.checkpoint()
    signum = segment.guard.signum if segment.guard.signum is not None else signal.SIGTERM  # another process's signal
    step = segment.state.step
    _announce(emit, f"received {signal.Signals(signum).name}: checkpoint saved at step {step} in {path}", rank)
    return TrainingPreempted(signum, step, path)


def step_counts(n_rows: int, settings: Mapping[str, Any]) -> tuple[int, int, int]:
    """(micro-batches per epoch, optimizer steps per epoch, total optimizer steps) of a run over ``n_rows`` rows:
    ``max_steps`` when set, else ``epochs`` (fractions allowed) times the steps per epoch."""
    batch_size, accum = int(settings["batch_size"]), int(settings["gradient_accumulation_steps"])
    if batch_size < 1 or accum < 1:
        raise ValueError(f"batch_size ({batch_size}) and gradient_accumulation_steps ({accum}) must be at least 1")
    micro_per_epoch = math.ceil(n_rows / batch_size)
    steps_per_epoch = math.ceil(micro_per_epoch / accum)
    if settings["max_steps"]:
        return micro_per_epoch, steps_per_epoch, int(settings["max_steps"])
    return micro_per_epoch, steps_per_epoch, math.ceil(float(settings["epochs"]) * steps_per_epoch)


def run_summary(
    run: TrainResult, model_name_or_path: str | os.PathLike, settings: Mapping[str, Any], started: float
) -> dict[str, Any]:
    """The part of a training summary (``training_state.json``) that every user of the engine records: model, steps,
    losses, resumption, device, precision, processes, threads, what ``compile`` did, times (``started``:
    ``time.perf_counter()`` at the start of the training function), settings and library versions."""
    import transformers

    from spurious.core.models import resolve_model

    state = run.state
    return {
        "model_name_or_path": str(model_name_or_path),
        "resolved_model": resolve_model(model_name_or_path),
        "steps": state.step,
        "total_steps": run.total_steps,
        "steps_per_epoch": run.steps_per_epoch,
        "train_losses": state.train_losses,
        "best_step": state.best_step,
        "resumed_from_step": run.resumed_from,
        "device": str(run.device),
        "bf16": run.bf16,
        "processes": run.processes,
        "threads": torch.get_num_threads(),
        "wall_time_s": time.perf_counter() - started,
        "train_wall_time_s": run.train_wall_time_s,
        "compile": run.compile,
        "settings": dict(settings),
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__},
    }


class _ProgressLog:
    """The progress line every ``log_every`` steps and at the last: mean loss and logged values since the previous
    line, learning rate, speed, ETA."""

    def __init__(
        self, emit: LogFn, total_steps: int, steps_per_epoch: int, per_step: int, unit: str, log_every: int
    ) -> None:
        self.emit, self.total_steps, self.steps_per_epoch = emit, total_steps, steps_per_epoch
        self.per_step, self.unit, self.log_every = per_step, unit, max(1, log_every)
        self.losses: list[float] = []
        self.info: dict[str, list[float]] = {}

    def start(self, step: int) -> None:
        self.t0, self.step0 = time.perf_counter(), step

    def due(self, step: int) -> bool:
        return step % self.log_every == 0 or step == self.total_steps

    def add(self, step: int, loss: float, info: Mapping[str, float], lr: float) -> tuple[float, float] | None:
        """Record a step; at a progress line, print it and return (steps/s, units/s) since the start."""
        self.losses.append(loss)
        for k, v in info.items():
            self.info.setdefault(k, []).append(v)
        if not self.due(step):
            return None
        rate = (step - self.step0) / max(time.perf_counter() - self.t0, 1e-9)
        logged = "".join(f" {k} {np.mean(v):.4g}" for k, v in self.info.items())
        self.emit(
            f"step {step}/{self.total_steps} (epoch {step / self.steps_per_epoch:.2f}) loss "
            f"{np.mean(self.losses):.4f}{logged} lr {lr:.2e} | {rate:.2f} steps/s, "
            f"{rate * self.per_step:.1f} {self.unit}/s | ETA {format_eta((self.total_steps - step) / max(rate, 1e-9))}"
        )
        self.losses, self.info = [], {}
        return rate, rate * self.per_step
