"""The ``compile`` execution setting: training steps and prediction batches through ``torch.compile``.

``off`` runs every batch eagerly, as before. ``on`` compiles the model's forward pass and loss (and their backward)
once per batch shape, ``(rows, width)``: with ``pad_to_multiple_of`` a run meets a handful of widths (at most
``max_length / 64`` on CUDA), and each one is compiled and warmed before the first step. On CUDA each shape becomes a
CUDA graph (``mode="reduce-overhead"``), replayed at every step of that shape, and the optimizer step (gradient
clipping, fused AdamW with a learning rate held in a device tensor, zeroing the gradients) is captured as one more
graph (``spurious.core.engine``). Batches of a shape met rarely (the short last batch of an epoch) run eagerly. Dropout
stays as configured (compiled dropout draws from the same generators, in its own way: a compiled run follows other
random masks than an eager one, reproducibly).

``auto`` compiles where it pays: on CUDA when the passes it speeds up save more than their compilation costs,

    passes x SAVED_SECONDS_PER_PASS >= shapes x COMPILE_SECONDS_PER_SHAPE,

i.e. about 4,000 forward-backward passes per batch shape. The two constants are provisional: they come from compiling
the forward and backward of BERT-base alone on an H200 (5 widths in 70-104 s; 5-6 ms saved per step of 28 ms) and
are to be re-measured for the whole compiled step. Never on CPU: there each new width costs a compilation of tens of
seconds and a step saves little.

Changing the setting reruns nothing (it is one of ``spurious.core.config.RUNTIME_SETTINGS``): the same updates,
computed by other kernels, agree up to floating-point rounding, and a checkpoint written with either value resumes
with the other.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

COMPILE_SETTINGS = ("off", "auto", "on")
# auto's rule (module docstring); provisional, from the H200 probe of BERT-base's forward and backward
COMPILE_SECONDS_PER_SHAPE = 20.0
SAVED_SECONDS_PER_PASS = 0.005
# compile: on refuses runs that would compile more shapes than this (exact widths: set pad_to_multiple_of)
MAX_COMPILED_SHAPES = 32
# The torch.compile backend: inductor (the default; generated kernels), or aot_eager to check graph capture alone
BACKEND_VARIABLE = "SPURIOUS_COMPILE_BACKEND"

Shape = tuple[int, int]  # (rows, width) of a batch


@dataclass(frozen=True)
class Decision:
    """Whether to compile, and why (for the log and ``training_state.json``)."""

    enabled: bool
    reason: str


def check_setting(setting: str) -> str:
    if setting not in COMPILE_SETTINGS:
        raise ValueError(f"the setting compile must be one of {', '.join(COMPILE_SETTINGS)}, got {setting!r}")
    return setting


def decide(setting: str, device: torch.device, passes: int, shapes: int) -> Decision:
    """The ``compile`` setting applied to a run of ``passes`` batches over ``shapes`` distinct compiled shapes."""
    check_setting(setting)
    if setting == "off" or passes == 0:
        return Decision(False, "compile: off" if setting == "off" else "no batch of a repeated shape")
    if setting == "on":
        if shapes > MAX_COMPILED_SHAPES:
            raise ValueError(
                f"compile: on would compile {shapes} batch shapes (more than {MAX_COMPILED_SHAPES}), one per batch "
                "width: set pad_to_multiple_of (e.g. 64) so that batches fall into a few widths, or compile: auto"
            )
        return Decision(True, "compile: on")
    if device.type != "cuda":
        return Decision(False, f"compile: auto is off on {device.type}")
    saved, cost = passes * SAVED_SECONDS_PER_PASS, shapes * COMPILE_SECONDS_PER_SHAPE
    if shapes > MAX_COMPILED_SHAPES or saved < cost:
        return Decision(False, f"compile: auto: {passes} passes save ~{saved:.0f} s < ~{cost:.0f} s for {shapes} shapes")
    return Decision(True, f"compile: auto: {passes} passes save ~{saved:.0f} s >= ~{cost:.0f} s for {shapes} shapes")


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


def run_compiled(compiled: Callable[..., Any], *args: Any) -> Any:
    """Call a compiled function whose earlier outputs the caller no longer reads (or has copied): a CUDA graph's
    outputs live in its memory pool and are overwritten at its next replay."""
    torch.compiler.cudagraph_mark_step_begin()
    return compiled(*args)


def batched(
    fn: Callable[..., Any], setting: str, device: torch.device, shapes: Sequence[Shape], *, repeats: int = 1
) -> Callable[..., Any]:
    """``fn`` for a sequence of batches of ``shapes`` (run ``repeats`` times, e.g. once per evaluation): a function
    ``call(shape, *args)`` that runs the batches of the most common row count compiled where ``decide`` says so
    (the last, short batch eagerly), and every batch eagerly otherwise. ``fn``'s outputs must be read or copied
    before the next call (``run_compiled``)."""
    if not shapes:
        return lambda shape, *args: fn(*args)
    rows = Counter(n for n, _ in shapes).most_common(1)[0][0]
    counts = Counter(s for s in shapes if s[0] == rows)
    decision = decide(setting, device, sum(counts.values()) * repeats, len(counts))
    if not decision.enabled:
        return lambda shape, *args: fn(*args)
    compiled = compile_function(fn, device, len(counts))

    def call(shape: Shape, *args: Any) -> Any:
        return run_compiled(compiled, *args) if shape in counts else fn(*args)

    return call
