"""The ``compile`` execution setting: training steps and prediction batches through ``torch.compile``.

``off`` runs every batch eagerly, as before. ``on`` compiles the model's forward pass and loss (and their backward)
once per batch shape, ``(rows, width)``: with ``pad_to_multiple_of`` a run meets a handful of widths (at most
``max_length / 64`` on CUDA), and each one is compiled and warmed before the first step. On CUDA each shape becomes a
CUDA graph (``mode="reduce-overhead"``), replayed at every step of that shape, and the optimizer step (gradient
clipping, fused AdamW with a learning rate held in a device tensor, zeroing the gradients) is captured as one more
graph (``spurious.core.train.engine``). Batches of a shape met once (the short last batch of an epoch, a rare width) run
eagerly: a compilation cannot pay for itself in one pass. Dropout stays as configured (compiled dropout draws from
the same generators, in its own way: a compiled run follows other random masks than an eager one, reproducibly).

``auto`` compiles the shapes that repay their compilation, on CUDA: a shape met at least

    AUTO_MIN_PASSES = COMPILE_SECONDS_PER_SHAPE / SAVED_SECONDS_PER_PASS = 20 s / 5 ms = 4,000 times

in the run (forward-backward passes in training, batches in prediction); the others run eagerly. The two constants
are provisional: they come from compiling the forward and backward of BERT-base alone on an H200 (5 widths in
70-104 s; 5-6 ms saved per step of 28 ms) and are to be re-measured for the whole compiled step. Never on CPU: there
each new width costs a compilation of tens of seconds and a step saves little.

The default is ``off`` on every device: no GPU run has yet measured compiled training (its losses against eager ones
over 20 steps in bf16, its speed), so ``auto`` and ``on`` are unmeasured there. ``auto`` becomes the default with the
change that records that measurement, its threshold derived from the measured compile time and step saving.

Changing the setting reruns nothing (it is one of ``spurious.core.config.RUNTIME_SETTINGS``): the same updates,
computed by other kernels, agree up to floating-point rounding, and a checkpoint written with either value resumes
with the other.
"""

from __future__ import annotations

import math
import os
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

COMPILE_SETTINGS = ("off", "auto", "on")
# auto's rule (module docstring); provisional, from the H200 probe of BERT-base's forward and backward
COMPILE_SECONDS_PER_SHAPE = 20.0
SAVED_SECONDS_PER_PASS = 0.005
AUTO_MIN_PASSES = round(COMPILE_SECONDS_PER_SHAPE / SAVED_SECONDS_PER_PASS)
# compile: on refuses runs that would compile more shapes than this (exact widths: set pad_to_multiple_of); auto
# compiles the most frequent ones
MAX_COMPILED_SHAPES = 32
# The torch.compile backend: inductor (the default; generated kernels), or aot_eager to check graph capture alone
BACKEND_VARIABLE = "SPURIOUS_COMPILE_BACKEND"
# Calls of each compiled shape before the first step. With CUDA graphs (mode="reduce-overhead") a function's first call
# runs its generated code and its second records the graph, which later calls replay: two calls record every shape's
# graph (forward and backward) before the training steps, so that no recording (0.1-0.5 s each for BERT-base) lands in
# them. One call is enough elsewhere; the second costs one more step per shape.
WARMUP_CALLS = 2

Shape = tuple[int, int]  # (rows, width) of a batch


@dataclass(frozen=True)
class Decision:
    """Which batch shapes to compile (none: the setting is off here), and why (for the log and
    ``training_state.json``)."""

    shapes: tuple[Shape, ...]
    reason: str

    @property
    def enabled(self) -> bool:
        return bool(self.shapes)


def check_setting(setting: str | bool) -> str:
    """The setting's value, validated: ``off``, ``auto`` or ``on`` (YAML reads unquoted ``on``/``off`` as booleans:
    ``True`` is ``on``, ``False`` ``off``)."""
    if isinstance(setting, bool):
        return "on" if setting else "off"
    if setting not in COMPILE_SETTINGS:
        raise ValueError(f"the setting compile must be one of {', '.join(COMPILE_SETTINGS)}, got {setting!r}")
    return setting


def decide(setting: str | bool, device: torch.device, passes: Mapping[Shape, int]) -> Decision:
    """The ``compile`` setting applied to a run that meets each batch shape ``passes[shape]`` times."""
    setting = check_setting(setting)
    if setting == "off":
        return Decision((), "compile: off")
    if setting == "auto" and device.type != "cuda":
        return Decision((), f"compile: auto is off on {device.type}")
    least = 2 if setting == "on" else AUTO_MIN_PASSES
    shapes = sorted((s for s, n in passes.items() if n >= least), key=lambda s: (-passes[s], s))
    if setting == "on" and len(shapes) > MAX_COMPILED_SHAPES:
        raise ValueError(
            f"compile: on would compile {len(shapes)} batch shapes (more than {MAX_COMPILED_SHAPES}), one per batch "
            "width: set pad_to_multiple_of (e.g. 64) so that batches fall into a few widths, or compile: auto"
        )
    chosen = tuple(sorted(shapes[:MAX_COMPILED_SHAPES]))
    if not chosen:
        return Decision((), f"compile: {setting}: no batch shape is met {least} times")
    covered, total = sum(passes[s] for s in chosen), sum(passes.values())
    return Decision(chosen, f"compile: {setting}: {len(chosen)} batch shapes for {covered} of {total} passes")


def evaluations(total_steps: int, every: int | None) -> int:
    """How many evaluations a run of ``total_steps`` optimizer steps makes, evaluating every ``every`` steps (None or
    0: never before the end) and after the last step (once, when it is one of them): how often its validation
    batches repeat, for ``batched``. A run that evaluates only at its end meets each validation batch once, so a
    shape met once there is not compiled (it would not repay its compilation)."""
    if not every:
        return 1
    return max(1, math.ceil(total_steps / int(every)))


def backend() -> str:
    return os.environ.get(BACKEND_VARIABLE, "inductor")


def compile_function(fn: Callable[..., Any], device: torch.device, shapes: int) -> Callable[..., Any]:
    """``fn`` compiled with static shapes (one graph per shape: dynamo's recompile limit is raised to allow
    ``shapes`` of them), as CUDA graphs on CUDA with inductor."""
    import torch._dynamo

    config = torch._dynamo.config
    config.recompile_limit = max(config.recompile_limit, shapes + 8)
    mode = "reduce-overhead" if device.type == "cuda" and backend() == "inductor" else None
    return torch.compile(fn, dynamic=False, mode=mode, backend=backend())


def graph_breaks() -> int:
    """Graph breaks dynamo met so far in this process (a compiled step should have none)."""
    from torch._dynamo.utils import counters

    return sum(counters["graph_break"].values())


def cudagraph_skips() -> int:
    """Graphs inductor compiled without a CUDA graph so far in this process (``mode="reduce-overhead"`` falls back
    silently, logging only under ``TORCH_LOGS=cudagraphs``): on CUDA each is a shape whose steps are not replayed."""
    from torch._dynamo.utils import counters

    return int(counters["inductor"]["cudagraph_skips"])


def compiled_graphs(fn: Callable[..., Any]) -> int | None:
    """Graphs dynamo holds for ``fn``'s code: one per compiled shape, more after a recompilation (a guard failed);
    None where this torch does not tell."""
    try:
        from torch._dynamo.eval_frame import _debug_get_cache_entry_list
    except ImportError:
        return None
    return len(_debug_get_cache_entry_list(fn.__code__))


def run_compiled(compiled: Callable[..., Any], *args: Any) -> Any:
    """Call a compiled function whose earlier outputs the caller no longer reads (or has copied): a CUDA graph's
    outputs live in its memory pool and are overwritten at its next replay."""
    torch.compiler.cudagraph_mark_step_begin()
    return compiled(*args)


def batched(
    fn: Callable[..., Any], setting: str | bool, device: torch.device, shapes: Sequence[Shape], *, repeats: int = 1
) -> Callable[..., Any]:
    """``fn`` for a sequence of batches of ``shapes`` (run ``repeats`` times, e.g. once per evaluation): a function
    ``call(shape, *args)`` that runs the batches of the shapes ``decide`` chooses compiled, the others eagerly.
    ``fn``'s outputs must be read or copied before the next call (``run_compiled``)."""
    passes = Counter(shapes)
    decision = decide(setting, device, {shape: n * repeats for shape, n in passes.items()})
    if not decision.enabled:
        return lambda shape, *args: fn(*args)
    compiled = compile_function(fn, device, len(decision.shapes))
    chosen = frozenset(decision.shapes)

    def call(shape: Shape, *args: Any) -> Any:
        return run_compiled(compiled, *args) if shape in chosen else fn(*args)

    return call
