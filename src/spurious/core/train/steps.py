"""One optimizer step of the training engine (:mod:`spurious.core.train.engine`): the micro-batches of a step in the
data order, this process's share of each, the accumulated forward and backward passes and their unread losses, the
update (eager, or a compiled run's captured one), the ``compile`` setting applied to a run's batch shapes, and the
optimizer and learning-rate schedule.

``engine.train`` sets these up and calls :func:`optimizer_step` once per step (looked up here at each call, so a test
may patch it); the loop around the steps (logging, evaluation, checkpoints, signals) stays in the engine.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import torch

from spurious.core.train import compiled
from spurious.core.train.checkpoints import TrainState
from spurious.core.train.training import epoch_order, param_groups, rng_states, set_rng_states

LogFn = Callable[[str], None]


@dataclass
class CompileRecord:
    """What the ``compile`` setting did in a training segment (``training_state.json``'s ``compile``): whether the
    step was compiled and why, the batch shapes compiled (``[rows, width]``; a packed batch's width is its row's
    length) and how many passes each serves, the seconds spent compiling and warming them (each run
    ``compiled.WARMUP_CALLS`` times: on CUDA its graph is recorded then) and capturing the optimizer step (CUDA),
    dynamo's graph breaks (none when the whole loss is one graph per shape), the graphs inductor compiled without
    CUDA graphs (``cudagraph_skips``: on CUDA those shapes run unreplayed, slower; 0 when all went well, and on a CPU,
    where none are asked for) and the recompilations of the loss beyond one per shape (``recompiles``, counted at the
    end of the segment: 0 when no guard failed)."""

    enabled: bool
    reason: str
    backend: str | None = None
    shapes: list[list[int]] = field(default_factory=list)
    passes: list[int] = field(default_factory=list)
    eager_passes: int = 0
    compile_s: float | None = None
    capture_s: float | None = None
    graph_breaks: int | None = None
    cudagraph_skips: int | None = None
    recompiles: int | None = None


def _split(rows: np.ndarray, rank: int, processes: int) -> tuple[np.ndarray, float]:
    """This process's contiguous share of a micro-batch and the factor that makes the mean of the processes' scaled
    mean losses the mean loss of the whole micro-batch (a process without rows takes one with factor 0, because DDP
    needs every process in every backward pass)."""
    if processes == 1:
        return rows, 1.0
    mine = np.array_split(rows, processes)[rank]
    if len(mine) == 0:
        return rows[:1], 0.0
    return mine, len(mine) * processes / len(rows)


def sum_over_processes(values: list[float], processes: int, device: torch.device) -> list[float]:
    """``values`` summed over the processes (an all-reduce; the values themselves with one process)."""
    if processes == 1:
        return values
    summed = torch.tensor(values, dtype=torch.float64, device=device)
    torch.distributed.all_reduce(summed)
    return summed.tolist()


@dataclass
class StepTerms:
    """One optimizer step's loss and logged values, per micro-batch one tensor ``[loss, *values]`` (in the order of
    ``keys``) and its weight, still where the model put them (on the GPU): reading one waits for the device, so the
    training loop reads them only every ``log_every`` steps, before an evaluation or a checkpoint and at the end
    (``value``), not after each step. The tensor is a copy, so a compiled step's next replay cannot overwrite it."""

    keys: tuple[str, ...] = ()
    parts: list[tuple[Any, float]] = field(default_factory=list)
    grad_norm: Any = None  # the step's gradient norm (a 0-d device tensor) where a tracker logs it

    def add(self, loss: torch.Tensor, info: Mapping[str, Any], weight: float) -> None:
        not_tensors = sorted(k for k, v in info.items() if not isinstance(v, torch.Tensor))
        if not_tensors:
            raise TypeError(
                f"the loss function logs {not_tensors} as plain numbers: return 0-d tensors (reading a value on the "
                "host waits for the device; the training loop reads them when it logs)"
            )
        keys = tuple(info)
        if self.parts and keys != self.keys:
            raise ValueError(f"the loss function logs {list(keys)} in one micro-batch and {list(self.keys)} in another")
        self.keys = keys
        self.parts.append((torch.stack([v.detach().float() for v in (loss, *info.values())]), weight))

    def value(self) -> tuple[float, dict[str, float]]:
        totals = [0.0] * (len(self.keys) + 1)  # the same float arithmetic, in the same order, as summing each value
        for values, weight in self.parts:
            for i, value in enumerate(values.tolist() if isinstance(values, torch.Tensor) else values):
                totals[i] += value * weight
        return totals[0], dict(zip(self.keys, totals[1:], strict=True))


def _accumulate(
    accelerator: Any, module: torch.nn.Module, micro_batches: list[np.ndarray], rank: int, processes: int
) -> StepTerms:
    """Forward and backward over one optimizer step's micro-batches (this process's share of each); gradients are
    synchronised across processes once, at the last micro-batch. Returns this process's part of the step's mean loss
    and logged values (their sum over the processes is the step's value), unread (``StepTerms``)."""
    group = len(micro_batches)
    terms = StepTerms()
    for m, micro_batch in enumerate(micro_batches):
        rows, share = _split(micro_batch, rank, processes)
        sync = contextlib.nullcontext() if m == group - 1 else accelerator.no_sync(module)
        with sync:
            loss, info = module(rows)
            terms.add(loss, info, share / processes / group)
            accelerator.backward(loss * share / group if share != 1.0 else loss / group)
    return terms


def data_order(lengths: np.ndarray, settings: Mapping[str, Any], epoch: int) -> np.ndarray:
    """The row order of ``epoch``: a pure function of (seed, epoch), so a resumed run rebuilds it."""
    return epoch_order(
        lengths,
        batch_size=int(settings["batch_size"]),
        seed=int(settings["seed"]),
        epoch=epoch,
        group_by_length=bool(settings["group_by_length"]),
    )


def step_micro_batches(order: np.ndarray, batch_in_epoch: int, batch_size: int, accum: int) -> list[np.ndarray]:
    """The rows of the next optimizer step's micro-batches: up to ``accum`` micro-batches of ``batch_size`` rows of
    ``order`` from micro-batch ``batch_in_epoch`` on (fewer at the end of an epoch; the last may be short)."""
    micro_per_epoch = math.ceil(len(order) / batch_size)
    group = min(accum, micro_per_epoch - batch_in_epoch)
    return [order[(batch_in_epoch + m) * batch_size : (batch_in_epoch + m + 1) * batch_size] for m in range(group)]


def optimizer_step(
    accelerator: Any,
    module: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: Any,
    micro_batches: list[np.ndarray],
    *,
    max_grad_norm: float,
    rank: int,
    processes: int,
    device: torch.device,
    update: CompiledUpdate | None = None,
    grad_norm: bool = False,
) -> tuple[StepTerms, float]:
    """One optimizer step over its micro-batches: the accumulated gradients (clipped to ``max_grad_norm`` unless 0),
    the update (``update``'s in a compiled run), the schedule's step. Returns the step's mean loss and logged values
    and the learning rate the update used. With one process they stay unread on the device (``StepTerms``); with
    several they are summed over the processes now (an all-reduce, which waits for the device anyway). With
    ``grad_norm`` the step's gradient norm (before clipping) stays on the device beside them (``terms.grad_norm``)."""
    terms = _accumulate(accelerator, module, micro_batches, rank, processes)
    if processes > 1:
        step_loss, step_info = terms.value()
        totals = sum_over_processes([step_loss, *step_info.values()], processes, device)
        terms = StepTerms(tuple(step_info), [(totals, 1.0)])
    lr = scheduler.get_last_lr()[0]
    if update is not None:
        update(lr)
        norm = update.grad_norm.clone() if grad_norm and update.grad_norm is not None else None
    else:
        params = [p for p in module.parameters() if p.requires_grad]
        norm = None
        if max_grad_norm:
            norm = accelerator.clip_grad_norm_(params, max_grad_norm)
        elif grad_norm:
            norm = torch.nn.utils.get_total_norm([p.grad for p in params if p.grad is not None])
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    scheduler.step()
    terms.grad_norm = norm if grad_norm else None
    return terms, lr


class CompiledUpdate:
    """The optimizer step of a compiled run: gradient clipping, AdamW and zeroing the gradients, with the learning
    rate held in a device tensor (``lr``, filled before each step: a host write that waits for nothing).

    The gradients are kept allocated (zeroed, never freed), so that every step finds them at the same addresses. On
    CUDA the first call runs eagerly (it creates AdamW's state); the second captures the three as one CUDA graph
    (AdamW ``capturable``, its fused kernel reading the learning rate from ``lr``) and replays it; every later call
    replays it. The same updates as the eager step (the fused kernel ignores ``capturable``; the learning rate is the
    same float32 value the kernel computes with), so checkpoints of either resume with the other. Outside the calls
    the optimizer's learning rates stay the schedule's floats (its state and the checkpoints are unchanged)."""

    def __init__(
        self,
        optimizer: torch.optim.Optimizer,
        params: list[torch.Tensor],
        max_grad_norm: float,
        device: torch.device,
        emit: LogFn = lambda message: None,
    ) -> None:
        self.optimizer, self.params, self.max_grad_norm, self.emit = optimizer, params, max_grad_norm, emit
        self.lr = torch.zeros((), dtype=torch.float32, device=device)
        self.capture = device.type == "cuda"
        if self.capture:
            for group in optimizer.param_groups:
                group["capturable"] = True
        self.graph: Any = None
        self.calls = 0
        self.capture_s: float | None = None
        self.grad_norm: torch.Tensor | None = None  # the last step's norm before clipping (a graph output on CUDA)

    def _step(self) -> None:
        if self.max_grad_norm:
            self.grad_norm = torch.nn.utils.clip_grad_norm_(self.params, self.max_grad_norm)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=False)

    def __call__(self, lr: float) -> None:
        self.lr.fill_(lr)
        if self.graph is not None:
            self.graph.replay()
            return
        groups = self.optimizer.param_groups
        floats = [group["lr"] for group in groups]
        for group in groups:
            group["lr"] = self.lr
        try:
            if self.capture and self.calls > 0:
                t0 = time.perf_counter()
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph):
                    self._step()
                graph.replay()
                self.graph, self.capture_s = graph, time.perf_counter() - t0
                self.emit(f"captured the optimizer step as one CUDA graph in {self.capture_s:.2f}s")
            else:
                self._step()
        finally:
            for group, value in zip(groups, floats, strict=True):
                group["lr"] = value
        self.calls += 1


def _run_shapes(
    lengths: np.ndarray,
    settings: Mapping[str, Any],
    shape_of: Callable[[np.ndarray], compiled.Shape],
    state: TrainState,
    total_steps: int,
    rank: int,
    processes: int,
) -> dict[compiled.Shape, list[Any]]:
    """The shape of this process's share of every micro-batch the run meets from ``state`` on (the data order is a
    pure function of the seed and the epoch): ``{shape: [passes, rows of its first micro-batch]}``."""
    batch_size, accum = int(settings["batch_size"]), int(settings["gradient_accumulation_steps"])
    micro_per_epoch = math.ceil(len(lengths) / batch_size)
    shapes: dict[compiled.Shape, list[Any]] = {}
    step, epoch, first = state.step, state.epoch, state.batch_in_epoch
    while step < total_steps:
        order = data_order(lengths, settings, epoch)
        steps = min(math.ceil((micro_per_epoch - first) / accum), total_steps - step)
        for m in range(first, min(micro_per_epoch, first + steps * accum)):
            rows, _ = _split(order[m * batch_size : (m + 1) * batch_size], rank, processes)
            shapes.setdefault(shape_of(rows), [0, rows])[0] += 1
        step, epoch, first = step + steps, epoch + 1, 0
    return shapes


def compile_step(
    accelerator: Any,
    module: torch.nn.Module,
    optimizer: Any,
    settings: Mapping[str, Any],
    lengths: np.ndarray,
    shape_of: Callable[[np.ndarray], compiled.Shape],
    state: TrainState,
    total_steps: int,
    device: torch.device,
    emit: LogFn,
    *,
    rank: int,
    processes: int,
) -> tuple[CompileRecord, CompiledUpdate | None]:
    """The ``compile`` setting applied to the rest of this run (``spurious.core.train.compiled``): with it on, the loss
    is compiled for the batch shapes ``compiled.decide`` chooses among those of this process's micro-batches (the others
    run eagerly), every one warmed now (``compiled.WARMUP_CALLS`` forward and backward passes, so that on CUDA its
    graph is recorded before the first step), and the optimizer step handed to an ``CompiledUpdate``."""
    setting = compiled.check_setting(settings.get("compile", "off"))
    if setting == "off":
        return CompileRecord(False, "compile: off"), None
    shapes = _run_shapes(lengths, settings, shape_of, state, total_steps, rank, processes)
    decision = compiled.decide(setting, device, {shape: n for shape, (n, _) in shapes.items()})
    chosen = {shape: shapes[shape] for shape in decision.shapes}
    record = CompileRecord(
        decision.enabled,
        decision.reason,
        backend=compiled.backend() if decision.enabled else None,
        shapes=[list(shape) for shape in chosen],
        passes=[n for n, _ in chosen.values()],
        eager_passes=sum(n for shape, (n, _) in shapes.items() if shape not in chosen),
    )
    if not decision.enabled:
        emit(f"{decision.reason}: the training steps run eagerly")
        return record, None
    inner = accelerator.unwrap_model(module)
    params = [p for p in inner.parameters() if p.requires_grad]
    for p in params:  # kept allocated from now on (``CompiledUpdate``)
        p.grad = torch.zeros_like(p) if p.grad is None else p.grad.zero_()
    # dynamo keeps what it compiled per code object, guarded on the model: a process that trains several models
    # (tests, the scale search) would count the previous runs' graphs against the recompile limit
    torch._dynamo.reset()
    # the loss is compiled outside DDP (the warm-up below) and called inside it: no graph split at DDP's buckets
    # (dynamo's DDPOptimizer), so both see the same graph; the gradients are all-reduced after the backward graph
    torch._dynamo.config.optimize_ddp = False
    breaks, skips = compiled.graph_breaks(), compiled.cudagraph_skips()
    inner.use_compiled(chosen, device)
    t0 = time.perf_counter()
    rng = rng_states()  # the warm-up's dropout must not move the training's random streams (a resumed run warms too)
    try:
        # one eager pass first: models set themselves up at their first call (transformers installs its
        # output-capturing hooks under a lock, which dynamo cannot trace); under the training's autocast, as every
        # pass: packed attention's kernels have no float32 version
        with torch.no_grad(), accelerator.autocast():
            inner.loss_fn(inner.model, inner.objective, inner.batch_fn(next(iter(chosen.values()))[1], device))
        for _ in range(compiled.WARMUP_CALLS):  # on CUDA: the first call of a shape warms up, the second records
            for _, rows in chosen.values():
                loss, _ = inner(rows)  # outside DDP: no collective, whatever the shapes of the other processes
                loss.backward()
    finally:
        set_rng_states(rng)
    for p in params:
        p.grad.zero_()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    record.compile_s, record.graph_breaks = time.perf_counter() - t0, compiled.graph_breaks() - breaks
    record.cudagraph_skips = compiled.cudagraph_skips() - skips
    widths = ", ".join(f"{n}x{w}" for n, w in chosen)
    emit(
        f"{decision.reason} (rows x width: {widths}), compiled and warmed in {record.compile_s:.1f}s with "
        f"{compiled.backend()}; {record.graph_breaks} graph breaks"
        + (f"; {record.cudagraph_skips} graphs without CUDA graphs" if device.type == "cuda" and record.cudagraph_skips
           else "")  # fmt: skip
    )
    inner_optimizer = getattr(optimizer, "optimizer", optimizer)  # Accelerate's wrapper holds torch's
    return record, CompiledUpdate(inner_optimizer, params, float(settings["max_grad_norm"] or 0), device, emit)


def compile_outcome(
    record: CompileRecord, update: CompiledUpdate | None, loss_fn: Callable[..., Any]
) -> dict[str, Any]:
    """The segment's ``CompileRecord`` as ``training_state.json`` keeps it, completed at its end: the optimizer
    step's capture time and the loss's recompilations (graphs dynamo holds for it beyond one per compiled shape)."""
    if update is not None:
        record.capture_s = update.capture_s
        graphs = compiled.compiled_graphs(loss_fn)
        record.recompiles = None if graphs is None else graphs - len(record.shapes)
    return asdict(record)


# devices with torch's fused AdamW kernel (CPU since torch 2.4, CUDA since 2.0); elsewhere torch's default
FUSED_ADAMW_DEVICES = ("cpu", "cuda")


def optimizer_and_schedule(
    model: torch.nn.Module,
    objective: torch.nn.Module | None,
    settings: Mapping[str, Any],
    total_steps: int,
    device: torch.device,
) -> tuple[torch.optim.Optimizer, Any]:
    """AdamW over the model's and the objective's parameter groups (weight decay except biases and norms, as the HF
    Trainer) and the linear schedule with warmup.

    The fused kernel where the device has one, as the ``transformers`` Trainer's default ``adamw_torch_fused``: on
    CPU it takes 16 ms a step for MiniLM's 22.6M parameters against 107 ms for torch's default for-loop AdamW. The
    same update up to floating-point rounding, not bit for bit: 10 steps of a small model agree within 3e-8 (tested);
    after the main demo's 300 steps half of MiniLM's weights differ, by at most 5e-4, and none of its reported
    numbers does."""
    groups = param_groups(model, float(settings["weight_decay"]))
    if objective is not None:  # appended: a plain run's optimizer is unchanged, a resumed run rebuilds the order
        for group, extra in zip(groups, param_groups(objective, float(settings["weight_decay"])), strict=True):
            group["params"] = group["params"] + extra["params"]
    fused = True if device.type in FUSED_ADAMW_DEVICES else None
    optimizer = torch.optim.AdamW(
        groups, lr=float(settings["learning_rate"]), betas=(0.9, 0.999), eps=1e-8, fused=fused
    )
    from transformers import get_linear_schedule_with_warmup

    scheduler = get_linear_schedule_with_warmup(
        optimizer, math.ceil(float(settings["warmup_ratio"]) * total_steps), total_steps
    )
    return optimizer, scheduler


def optimizer_impl(optimizer: torch.optim.Optimizer) -> str:
    return "fused" if optimizer.param_groups[0].get("fused") else "default"
