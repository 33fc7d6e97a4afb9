"""Training throughput (real tokens/s and model FLOP/s; features/s beside them) and model FLOPs utilisation of our QA
loop ``train_qa`` against the ``transformers.Trainer``, eager and compiled, in one run, in the steady state.

Every variant trains the same model on the same SQuAD dev windows (the first ``--questions`` questions, featurised
once with our ``featurize``: question + context, ``max_length``/``stride`` sliding windows), with the same batch size,
gradient accumulation, learning rate, linear schedule, gradient clipping (1.0) and seed, on the same device; with CUDA
all use bf16 autocast (ours: ``bf16: auto``; Trainer: ``bf16=True``), on CPU fp32.

**Variants** (``--variants``; each in a fresh Python process):

* ``ours_defaults``: **ours with the CUDA defaults**: ``train_qa`` with ``compile: on`` and ``attention: packed``
  where the model allows it (BERT, RoBERTa, ELECTRA on a CUDA GPU in bf16 with ``varlen_attn``; elsewhere padded, and
  the report says why), length-grouped. ``compile: on`` is set explicitly: the setting's default ``auto`` compiles
  only shapes met 4,000 times, so a benchmark-length run would stay eager.
* ``ours_compiled``: ours with ``compile: on`` and padded batches (widths to x64 on CUDA): compiling without packing,
  so that the two gains can be told apart.
* ``ours_grouped``, ``ours_random``: ours eager (``compile: off``), padded, length-grouped (config.yaml and the demos)
  and in random order (the schema's default).
* ``trainer_fair`` (the baseline of the ratios): the Trainer as a careful user configures it: unpadded windows,
  ``DataCollatorWithPadding`` padding each batch to its longest window rounded up to a multiple of 8 on CUDA (as the
  transformers docs recommend for tensor cores; on CPU to the longest window: ``--trainer-pad-multiple``), length
  grouping (its ``LengthGroupedSampler``), the model's own QA loss, the Trainer's default optimizer (fused AdamW), bf16
  on CUDA, no evaluation, saving or logging.
* ``trainer_tuned``: the fair Trainer without the two waits of transformers' defaults: ``logging_nan_inf_filter=False``
  (otherwise every step's loss is checked for NaN/inf on the host, which waits for the GPU) and
  ``dataloader_num_workers=2`` (otherwise batches are collated in the main process, between the steps).
* ``trainer_compiled``: the fair Trainer with ``torch_compile=True`` (its ``torch.compile`` of the model, default mode,
  the backend ``SPURIOUS_COMPILE_BACKEND`` names, inductor by default): the first baseline a reviewer asks for.
* ``trainer_our_batches``: the Trainer fed our engine's length-grouped order and padded to our widths (checked: every
  micro-batch as wide as ours): with ``ours_grouped``, the one-difference comparison of the two loops (run twice, in
  the order A B B A, its rows the means of the two runs).
* ``trainer_padded``: run_qa.py's default, every window padded to ``max_length``, random order (for reference).

``--variants auto`` (the default) runs all of them on CUDA, and on a CPU the eager ones (inductor compiles C++ for every
shape there: minutes; name the compiled variants to run them, e.g. with ``SPURIOUS_COMPILE_BACKEND=aot_eager``).

**Steady state.** On a GPU every batch width met for the first time in a process costs about 0.14 s once (kernel
selection; measured on an H200), so the eager variants and the Trainers train twice in their process, the same
``--steps`` from the same seed and weights: a cold pass, which meets every width the timed steps use (both passes'
widths are recorded per micro-batch; a timed width the cold pass did not meet is reported), then the timed pass. Our
compiled variants train once: the engine compiles and warms every batch shape met twice or more before the first step,
calling each twice so that on CUDA its graph is recorded then (a shape met once runs eagerly: counted in the row), and
captures the optimizer step as a CUDA graph at step 2, so every step after ``--warmup`` is steady. Every row counts
what was not: the batch shapes the timed steps met for the first time in the process and the timed micro-batches that
ran without a compiled graph. The Trainer with ``torch_compile=True`` compiles lazily inside its first
steps, in both of its passes (a new model each pass); the graphs dynamo compiles inside the timed window are counted
(0 in a steady pass). One clock times every loop: a wrapper around torch's ``LRScheduler.step``, which both loops call
once after every optimizer step (torch's optimizer hooks do not fire when our compiled runs replay the optimizer step
as a CUDA graph); it synchronises the device and stamps ``time.perf_counter()`` after step ``--warmup`` and after the
last, so loading, featurisation, compilation, the first steps and our one validation pass at the end are outside the
window.

**Compile and capture** get their own lines: our compiled variants' seconds spent compiling and warming every shape,
and capturing the optimizer step, as the engine records them (``training_state.json``'s ``compile``); the Trainer's
first pass minus its second (its compilation happens inside its first steps). By default every variant's process gets
a fresh inductor cache (``--compile-cache fresh``: cold compilations, as on a new machine); ``shared`` keeps the
caller's ``TORCHINDUCTOR_CACHE_DIR`` (``gpu_check`` shares one cache between its checks: then the seconds may include
cache hits, and the report says so).

**MFU** (model FLOPs utilisation) counts the useful work only: padding and the packed rows' tail tokens are not work.

    training FLOPs = 6 * N * tokens + 12 * layers * hidden * sum(window_length^2)

with N the parameters outside the embedding layer (the word, position and token type lookups and their
normalisation: no matrix products), tokens the real (unpadded) tokens of the timed steps' windows, and the second
term attention's score and value products (forward 4 * hidden * length^2 per layer and window, three times that
with the backward).
MFU = FLOPs / timed seconds / the card's dense bf16 peak (``PEAK_BF16_TFLOPS``: H100 SXM and H200 989, A100 312
TFLOP/s). On another card, or a CPU, MFU is not printed (the report says why).

The headline is real tokens/s = the real (unpadded) tokens of the timed steps' windows / timed seconds, with the model
FLOP/s they stand for; the ratios and the targets compare real tokens/s, because the loops' timed windows need not
have the same mean length (our order and the Trainer's sampler draw other windows: a loop that trains on longer
windows does more work per feature). Beside them features/s = windows trained on in the timed steps / timed seconds
and its ratio; ``pad %`` the share of the tokens computed on that are not real (padding, packed tails). Ratios are
against the fair Trainer in the same run.

**Isolation.** Each variant runs in its own process; one that fails gets a row with its error (the end of its stderr)
and the others run on. The JSON and Markdown reports are rewritten after every variant (a report cut short names the
variants still to run), and the run exits non-zero when a variant failed. Each compiled row records what dynamo and
inductor did: graphs compiled per pass and inside the timed window, recompilations, and the graphs inductor left
without CUDA graphs (``cudagraph_skips``, a silent fallback otherwise logged only under ``TORCH_LOGS=cudagraphs``).

**Targets (a GPU, the steady state):** ours with the CUDA defaults at least 2.0x the fair Trainer in
real tokens/s (the floor: 1.5x), on BERT-base (b32, L384) and on MiniLM (b16, L256), and (reported beside) the same
against the tuned Trainer; at least 1.3x the Trainer with ``torch_compile=True``; MFU at least 30 % on BERT-base;
compile and capture of all shapes at most 90 s. The report prints each target with the device and by how much it is
met or missed (on a CPU for reference only), and ours against the Trainer fed the same batches (at least 1.0x).
``--profile DIR`` runs ``--profile-steps`` more steps after the timed ones in every pass of every variant (so the passes
stay alike), the last pass's under ``torch.profiler``: the operators by device time in ``DIR/<variant>.profile.txt``,
with the GPU idle share per step (1 - the union of the GPU's kernel and copy intervals / the wall time; the profiler's
own overhead counts as idle), so a missed target comes with where the time went. The profiled steps' batch shapes count
among those a compiled variant compiles. The profiler starts after the timed steps, so for our compiled variants on CUDA
(their CUDA graphs captured before it started: it may not see the kernels replayed from them) the GPU idle share is
marked unreliable.

Both loops need ``accelerate`` (a project dependency). Examples (on a GPU machine ``--device auto`` picks CUDA, bf16):

    HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false .venv/bin/python benchmarks/bench_train_loop.py \\
        --steps 40 --warmup 8 --json results/bench_minilm.json --markdown results/bench_minilm.md
    # BERT-base's architecture with random weights (no download)
    .venv/bin/python benchmarks/bench_train_loop.py --model random:bert-base --questions 3000 --batch-size 32 \\
        --max-length 384 --steps 40 --warmup 8 --json results/bench_bertbase.json --profile results/profile
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import gc
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import torch
from torch.optim.lr_scheduler import LRScheduler

from spurious.core.data.squad import MIRROR_ENV, load_squad_json
from spurious.core.models import load_qa_model, load_tokenizer, quiet_transformers
from spurious.core.train import compiled, packing
from spurious.core.train.qa import DEFAULT_SETTINGS, QAFeatures, epoch_order, featurize, pick_device, train_qa, use_bf16
from spurious.core.train.training import pad_multiple, padded_width

DEFAULT_MIRROR = str(Path(__file__).resolve().parents[2] / "shared" / "data")  # else $SPURIOUS_DATA_MIRROR
SQUAD_DEV = "squad_v1.1/dev-v1.1.json.gz"
VALID_QUESTIONS = 16  # train_qa needs a validation frame; it is evaluated once, after the last (timed) step
# The fair Trainer's DataCollatorWithPadding(pad_to_multiple_of=...): 8 on CUDA, as the transformers docs recommend
# for tensor cores; on CPU there are none, and every padded token is work, so it pads to the longest window.
TRAINER_PAD_MULTIPLE_BY_DEVICE = {"cuda": 8, "cpu": 1}
# The targets (a GPU, the steady state): ours with the CUDA defaults against the fair Trainer (real tokens/s; the floor
# is the target the eager loop missed before), against the Trainer with torch_compile=True, its MFU on BERT-base, and
# the seconds spent compiling and capturing; and (kept from before) ours against the Trainer fed the same batches.
TARGET_VS_FAIR, FLOOR_VS_FAIR = 2.0, 1.5
TARGET_VS_TRAINER_COMPILED = 1.3
TARGET_MFU = 0.30
TARGET_COMPILE_S = 90.0
TARGET_SAME_BATCHES = 1.0
# Dense bf16 peaks (TFLOP/s, without sparsity) of the cards MFU is computed for, by a name fragment of
# torch.cuda.get_device_name: the H100 SXM ("H100 80GB HBM3") and the H200 989, the A100 312. The PCIe and NVL versions
# of the H100 and H200 have lower peaks: not listed, so MFU is not printed for them rather than printed wrong.
PEAK_BF16_TFLOPS = {"H200": ("H200", 989.0), "H100 80GB HBM3": ("H100 SXM", 989.0), "A100": ("A100", 312.0)}
OTHER_VERSIONS = ("NVL", "PCIe")

ERROR_TAIL_LINES = 40  # of a failed variant's stderr, kept in its row
Plan = list[list[tuple[int, int, int]]]  # per optimizer step, its micro-batches as (epoch, first position, size)
T = TypeVar("T")

# --model random:bert-base: BERT-base's architecture (12 layers, hidden 768, 12 heads, intermediate 3072) with random
# weights (seed 0) and MiniLM's tokenizer (the 30,522-token uncased WordPiece vocabulary of bert-base-uncased): the
# paper configs' model size without a download
RANDOM_BERT_BASE = "random:bert-base"
MINILM = "embedded:all-MiniLM-L6-v2"
TRAINER_VARIANTS = {  # variant: (row name, loop id)
    "trainer_fair": ("HF Trainer, fair (group_by_length, {padding})", "trainer_fair"),
    "trainer_tuned": ("HF Trainer, fair, no NaN/inf filter, 2 loader workers (group_by_length, {padding})",
                      "trainer_tuned"),
    "trainer_compiled": ("HF Trainer, fair, torch_compile=True (group_by_length, {padding})", "trainer_compiled"),
    "trainer_our_batches": ("HF Trainer, our batches ({padding})", "trainer_our_batches"),
    "trainer_padded": ("HF Trainer (padded to max_length)", "trainer"),
}
# trainer_tuned: the fair Trainer without its two waits found in transformers 5's defaults: the NaN/inf check of every
# step's loss (logging_nan_inf_filter, a host read that waits for the GPU) and collation in the main process
# (dataloader_num_workers=0)
TUNED_TRAINER_OPTIONS = {"logging_nan_inf_filter": False, "dataloader_num_workers": 2}
VARIANTS = ("trainer_fair", "trainer_compiled", "trainer_tuned", "ours_defaults", "ours_compiled", "ours_grouped",
            "trainer_our_batches", "ours_random", "trainer_padded")  # fmt: skip
COMPILED_VARIANTS = frozenset({"ours_defaults", "ours_compiled", "trainer_compiled"})


def random_bert_base(folder: Path) -> str:
    """Save ``RANDOM_BERT_BASE`` (a QA model) with its tokenizer into ``folder``; the folder's path."""
    from transformers import BertConfig, BertForQuestionAnswering

    torch.manual_seed(0)
    config = BertConfig(vocab_size=30522, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                        intermediate_size=3072, max_position_embeddings=512)  # fmt: skip
    BertForQuestionAnswering(config).save_pretrained(folder)
    load_tokenizer(MINILM).save_pretrained(folder)
    return str(folder)


def default_data() -> str:
    return str(Path(os.environ.get(MIRROR_ENV) or DEFAULT_MIRROR) / SQUAD_DEV)


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return f"{torch.cuda.get_device_name(device)} (cuda)"
    return f"cpu ({torch.get_num_threads()} threads; {platform.processor() or platform.machine()})"


def peak_flops(device: torch.device) -> tuple[str, float | None]:
    """The card's dense bf16 peak in FLOP/s and its label, or (why MFU is not computed, None)."""
    if device.type != "cuda":
        return "n/a on CPU (no tensor-core peak to compare with)", None
    name = torch.cuda.get_device_name(device)
    for fragment, (label, tflops) in PEAK_BF16_TFLOPS.items():
        if fragment in name and not any(other in name for other in OTHER_VERSIONS):
            return f"{label}, {tflops:.0f} TFLOP/s dense bf16", tflops * 1e12
    return f"n/a: {name} is not in the peak table ({', '.join(v[0] for v in PEAK_BF16_TFLOPS.values())})", None


@dataclasses.dataclass(frozen=True)
class ModelShape:
    """What the MFU formula needs of the model: parameters outside the embeddings, layers, hidden size."""

    non_embedding_parameters: int
    layers: int
    hidden: int
    model_type: str

    def training_flops(self, tokens: int, sum_sq_lengths: int) -> float:
        """6 N tokens (the matrix products of every layer and the head, forward and backward) plus attention's score
        and value products, 12 layers hidden sum(length^2)."""
        return 6.0 * self.non_embedding_parameters * tokens + 12.0 * self.layers * self.hidden * sum_sq_lengths


def model_shape(model: torch.nn.Module) -> ModelShape:
    """The parameters outside the embedding layer (its lookups and their normalisation), layers and hidden size."""
    config = model.config
    n = sum(p.numel() for name, p in model.named_parameters() if ".embeddings." not in f".{name}")
    return ModelShape(int(n), int(config.num_hidden_layers), int(config.hidden_size), str(config.model_type))


def defaults_attention(model: torch.nn.Module, device: torch.device, bf16: bool) -> tuple[str, str]:
    """``attention`` for the CUDA-defaults variant: ``packed`` where ``spurious.core.train.packing.enable`` accepts this
    model on this device (the check a training run makes at start), else ``padded``; and why."""
    try:
        if packing.enable(model, "packed", device=device, bf16=bf16):
            reference = os.environ.get(packing.REFERENCE_ENV, "")
            if reference not in ("", "0"):
                return "packed", f"through the block-diagonal reference ({packing.REFERENCE_ENV}={reference})"
            return "packed", "varlen_attn"
    except packing.PackedAttentionUnavailable as exc:
        return "padded", f"not packed: {exc}"
    return "padded", "not packed"


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def trainer_pad_multiple(setting: str, device: torch.device) -> int:
    """The fair Trainer's padding multiple: ``auto`` (``TRAINER_PAD_MULTIPLE_BY_DEVICE``) or an integer."""
    return TRAINER_PAD_MULTIPLE_BY_DEVICE.get(device.type, 1) if setting == "auto" else int(setting)


def padding_words(multiple: int) -> str:
    return "exact widths" if multiple == 1 else f"widths to x{multiple}"


def step_micro_batches(n_features: int, batch_size: int, accum: int, steps: int) -> Plan:
    """Per optimizer step, its micro-batches as (epoch, first position in the epoch order, size).

    Mirrors ``train_qa`` (and the Trainer, which groups an epoch's batches the same way): ``ceil(n / batch_size)``
    micro-batches per epoch, the last one partial, ``accum`` micro-batches per step and fewer for an epoch's last step.
    """
    micro_per_epoch = math.ceil(n_features / batch_size)
    out: Plan = []
    epoch = in_epoch = 0
    for _ in range(steps):
        group = min(accum, micro_per_epoch - in_epoch)
        micro = []
        for m in range(group):
            lo = (in_epoch + m) * batch_size
            micro.append((epoch, lo, min(batch_size, n_features - lo)))
        out.append(micro)
        in_epoch += group
        if in_epoch >= micro_per_epoch:
            epoch, in_epoch = epoch + 1, 0
    return out


def timed_features(plan: Plan, warmup: int) -> int:
    """Windows trained on in steps ``warmup+1 .. steps`` (the timed ones)."""
    return sum(size for step in plan[warmup:] for _, _, size in step)


def micro_batches_before(plan: Plan, warmup: int) -> int:
    """Micro-batches of steps ``1 .. warmup``: the index of the first timed micro-batch."""
    return sum(len(step) for step in plan[:warmup])


def our_batch_rows(
    feats: QAFeatures, plan: Plan, *, batch_size: int, seed: int, group_by_length: bool
) -> list[np.ndarray]:
    """The window lengths of every micro-batch of our loop, in training order (its epochs' ``epoch_order``)."""
    orders: dict[int, np.ndarray] = {}
    batches = []
    for step in plan:
        for epoch, lo, size in step:
            if epoch not in orders:
                orders[epoch] = epoch_order(
                    feats.lengths, batch_size=batch_size, seed=seed, epoch=epoch, group_by_length=group_by_length
                )
            batches.append(feats.lengths[orders[epoch][lo : lo + size]])
    return batches


def our_widths(rows: list[np.ndarray], multiple: int, max_length: int) -> list[int]:
    """The width ``QAFeatures.collate`` gives each micro-batch: its longest window rounded up to ``multiple``."""
    return [padded_width(int(r.max()), multiple, max_length) for r in rows]


def new_widths(widths: Sequence[int], start: int, seen: Iterable[int] = ()) -> set[int]:
    """The widths of the timed micro-batches (``start ..``) that no earlier micro-batch of the pass, nor ``seen`` (an
    earlier pass's), had: on a GPU each costs its first-seen warm-up inside the timed window."""
    return set(widths[start:]) - set(widths[:start]) - set(seen)


def width_census(cold: Sequence[int], steady: Sequence[int], start: int) -> dict[str, Any]:
    """How many distinct widths the timed steps use, how many of them the cold pass met first in its timed window,
    how many the steady pass still met for the first time (0 when it is warm), and whether the two passes' micro-batch
    widths were the same sequence (as with the same batches)."""
    return {
        "widths_timed": len(set(steady[start:])),
        "new_widths_cold": len(new_widths(cold, start)),
        "new_widths_steady": len(new_widths(steady, start, seen=cold)),
        "passes_same_widths": list(cold) == list(steady),
    }


Shape = tuple[int, int]  # a micro-batch's (rows, sequence length): what a compiled step is compiled for


def shape_census(passes: Sequence[Sequence[Shape]], start: int, *, ready: Iterable[Shape] = (),
                 compiled_model: bool = False) -> dict[str, Any]:  # fmt: skip
    """What of the timed window (micro-batches ``start ..`` of the last pass) was not steady: the shapes met there for
    the first time in the process (no earlier micro-batch of any pass had them, nor were they compiled and warmed
    before the first step, ``ready``: each costs a first-seen warm-up, or a compilation, inside the window), and the
    micro-batches that ran without a compiled graph (all of an eager loop's; those of our compiled loop whose shape is
    not ``ready``; none of a ``compiled_model``, the Trainer's ``torch.compile``, whose recompilations inside the
    window are counted apart)."""
    *earlier, last = passes
    ready = set(ready)
    timed = list(last[start:])
    seen = ready | set(last[:start]) | {shape for shapes in earlier for shape in shapes}
    return {
        "shapes_timed": len(set(timed)),
        "shapes_first_met_in_window": len(set(timed) - seen),
        "eager_steps_in_window": 0 if compiled_model else sum(shape not in ready for shape in timed),
        "timed_micro_batches": len(timed),
    }


def work_fields(lengths: Sequence[np.ndarray], computed: Sequence[int], start: int) -> dict[str, Any]:
    """The timed micro-batches' work (from ``start``): real tokens and the sum of squared window lengths (the MFU
    formula's), tokens computed on (padding and packed tails included), the padding share and the mean computed width
    per window."""
    real = sum(int(r.sum()) for r in lengths[start:])
    done = sum(computed[start:])
    return {
        "timed_real_tokens": real,
        "timed_sum_sq_lengths": sum(int((r.astype(np.int64) ** 2).sum()) for r in lengths[start:]),
        "timed_computed_tokens": done,
        "pad_fraction": 1 - real / done,
        "mean_batch_width": done / sum(len(r) for r in lengths[start:]),
    }


def _graphs_compiled() -> int:
    """Graphs dynamo has compiled in this process (0 without torch.compile)."""
    from torch._dynamo.utils import counters

    return int(counters["stats"]["unique_graphs"])


class StepClock:
    """Stamps the end of the optimizer steps ``at`` (counted from 1) in this process, and runs ``torch.profiler``
    between two of them when asked.

    It wraps torch's ``LRScheduler.step``, which our engine and the Trainer call once after every optimizer step
    (the schedule's ``last_epoch`` is then the step's number), so one clock times both loops at the same point of a
    step, whatever wraps their optimizers and also where our compiled runs replay the optimizer step as a CUDA graph
    (torch's optimizer hooks run only when ``optimizer.step`` is called). It synchronises the device only at those
    steps, so the steps between run as in training, queued without waiting for the GPU."""

    def __init__(self, device: torch.device, at: Iterable[int], profile: tuple[int, int] | None = None) -> None:
        self.device, self.at, self.profile = device, set(at), profile
        self.count = 0
        self.stamps: dict[int, float] = {}
        self.graphs: dict[int, int] = {}  # dynamo's graph count at each stamp
        self.profiler: Any = None
        self.profiled_s: float | None = None

    def __enter__(self) -> StepClock:
        real, clock = LRScheduler.step, self

        def step(scheduler: LRScheduler, *args: Any, **kwargs: Any) -> None:
            real(scheduler, *args, **kwargs)
            if scheduler.last_epoch >= 1:  # not the schedule's own first step at its construction (step 0)
                clock._on_step(scheduler.last_epoch)

        self._real = real
        LRScheduler.step = step  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        LRScheduler.step = self._real  # type: ignore[method-assign]
        if self.profiler is not None and self.profiled_s is None:  # a run that ended inside the profiled steps
            self.profiler.stop()

    def _on_step(self, step: int) -> None:
        self.count = step
        if step in self.at:
            _sync(self.device)
            self.stamps[step] = time.perf_counter()
            self.graphs[step] = _graphs_compiled()
        if self.profile is not None and step in self.profile:
            _sync(self.device)
            if step == self.profile[0]:
                self.profiler = _profiler(self.device)
                self.profiler.start()
                self._profile_t0 = time.perf_counter()
            elif self.profiler is not None:
                self.profiler.stop()
                self.profiled_s = time.perf_counter() - self._profile_t0

    def window(self, start: int, end: int) -> float:
        """Seconds from the end of step ``start`` to the end of step ``end`` (the last step, or the last before the
        profiled ones)."""
        if self.count < end or start not in self.stamps or end not in self.stamps:
            raise RuntimeError(f"expected {end} optimizer steps stamped at {start} and {end}, counted {self.count}")
        return self.stamps[end] - self.stamps[start]

    def graphs_in_window(self, start: int, end: int) -> int:
        return self.graphs[end] - self.graphs[start]


def _profiler(device: torch.device) -> Any:
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    return profile(activities=activities)


def gpu_busy_seconds(events: Iterable[Any]) -> float:
    """The union of the intervals of the GPU's activities (kernels, copies, sets) in a profiler's events, in seconds:
    the time the GPU had work (overlapping kernels counted once)."""
    intervals = sorted(
        (e.time_range.start, e.time_range.end)
        for e in events
        if e.device_type == torch.autograd.DeviceType.CUDA and e.time_range.end > e.time_range.start
    )
    busy, end = 0.0, -math.inf
    for lo, hi in intervals:
        if lo > end:
            busy += hi - lo
            end = hi
        elif hi > end:
            busy += hi - end
            end = hi
    return busy / 1e6


def profile_summary(clock: StepClock, steps: int, variant: str, out_dir: Path) -> dict[str, Any]:
    """Write the profiled steps' operator table to ``out_dir/<variant>.profile.txt``; the GPU idle share per step."""
    prof = clock.profiler
    if prof is None or clock.profiled_s is None:
        raise RuntimeError(f"{variant}: the profiled steps did not run")
    cuda = clock.device.type == "cuda"
    summary: dict[str, Any] = {"profiled_steps": steps, "wall_s_per_step": clock.profiled_s / steps}
    if cuda:
        busy = gpu_busy_seconds(prof.events())
        summary.update(gpu_busy_s_per_step=busy / steps, gpu_idle_share=max(0.0, 1 - busy / clock.profiled_s))
    table = prof.key_averages().table(sort_by="cuda_time_total" if cuda else "self_cpu_time_total", row_limit=30)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{variant}.profile.txt"
    head = (
        f"{variant}: {steps} steady steps under torch.profiler, {summary['wall_s_per_step']:.4f} s/step (profiled, so "
        "slower than timed)"
        + (
            f"; GPU busy {summary['gpu_busy_s_per_step']:.4f} s/step, idle {100 * summary['gpu_idle_share']:.1f} % "
            "(1 - union of kernel/copy intervals / wall time)"
            if cuda
            else "; CPU only: no GPU idle share"
        )
    )
    path.write_text(head + "\n\n" + table + "\n")
    summary["file"] = str(path)
    return summary


def profiled_steps(args: argparse.Namespace) -> int:
    """The steps each pass runs after the timed ones for ``--profile`` (0 without it)."""
    return args.profile_steps if args.profile else 0


def timed_passes(
    run_pass: Callable[[], T], device: torch.device, args: argparse.Namespace, variant: str, passes: int
) -> tuple[list[T], list[float], list[float], int, dict | None, list[int]]:
    """A variant's pass ``passes`` times in this process (two: cold, then steady; one: a compiled run of ours, warm
    before its first step). Each pass's result, timed window (seconds, steps ``warmup+1 .. steps``) and whole wall
    time, the graphs dynamo compiled inside the last pass's window, with ``--profile`` the last pass's profile of
    the steps after the timed ones, and the graphs dynamo compiled in each pass."""
    warmup, steps, extra = args.warmup, args.steps, profiled_steps(args)
    results, seconds, walls, graphs_per_pass = [], [], [], []
    graphs, profile = 0, None
    for n in range(passes):
        t0, graphs_before = time.perf_counter(), _graphs_compiled()
        window = (steps, steps + extra) if extra and n == passes - 1 else None
        with StepClock(device, (warmup, steps), profile=window) as clock:
            results.append(run_pass())
        walls.append(time.perf_counter() - t0)
        graphs_per_pass.append(_graphs_compiled() - graphs_before)
        seconds.append(clock.window(warmup, steps))
        graphs = clock.graphs_in_window(warmup, steps)
        if window:
            profile = profile_summary(clock, extra, variant, Path(args.profile))
        # the cold pass's model and optimizer go back to the allocator's cache; not emptied, so its memory stays warm
        gc.collect()
    return results, seconds, walls, graphs, profile, graphs_per_pass


def timing_fields(cold_s: float | None, steady_s: float, *, timed_steps: int, n_timed: int,
                  new_widths_cold: int | None) -> dict:  # fmt: skip
    """The row's rates: the steady pass's (the benchmark's numbers), the cold pass's, and the first-seen width cost
    (their difference over the same steps, per width first met in the cold pass's timed window)."""
    cold = cold_s is not None
    return {
        "timed_steps": timed_steps,
        "timed_seconds": steady_s,
        "s_per_step": steady_s / timed_steps,
        "features_per_s": n_timed / steady_s,
        "cold_timed_seconds": cold_s,
        "cold_s_per_step": cold_s / timed_steps if cold else None,
        "cold_features_per_s": n_timed / cold_s if cold else None,
        "first_seen_width_s": (cold_s - steady_s) / new_widths_cold if cold and new_widths_cold else None,
    }


def pass_fields(seconds: list[float], walls: list[float], graphs: int, census: dict, plan: Plan,
                args: argparse.Namespace, graphs_per_pass: list[int]) -> dict:  # fmt: skip
    """A variant's timing fields, its width and shape census, the features of its timed steps and what dynamo and
    inductor did in its process (every row has them): the graphs compiled in each pass and inside the timed window,
    and the graphs inductor left without CUDA graphs (``cudagraph_skips``: their steps run unreplayed)."""
    n_timed = timed_features(plan, args.warmup)
    return {
        **timing_fields(seconds[0] if len(seconds) == 2 else None, seconds[-1], timed_steps=args.steps - args.warmup,
                        n_timed=n_timed, new_widths_cold=census["new_widths_cold"]),  # fmt: skip
        **census,
        "timed_features": n_timed,
        "passes": len(seconds),
        "pass_wall_seconds": walls,
        "graphs_compiled_in_timed_window": graphs,
        "graphs_compiled_per_pass": graphs_per_pass,
        "cudagraph_skips": compiled.cudagraph_skips(),
    }


def bench_ours(
    model_name: str,
    train_frame,
    valid_frame,
    feats: QAFeatures,
    *,
    variant: str,
    args: argparse.Namespace,
    device: torch.device,
    bf16: bool,
) -> dict:
    """Our loop (``train_qa`` itself): ``ours_defaults`` (compile on, packed where the model allows it),
    ``ours_compiled`` (compile on, padded), ``ours_grouped`` / ``ours_random`` (eager, padded)."""
    compile_on = variant in ("ours_defaults", "ours_compiled")
    attention = args.defaults_attention if variant == "ours_defaults" else "padded"
    group_by_length = variant != "ours_random"
    settings = {  # log_every stays the project's default (50): a log line reads the losses, a host-device sync
        "max_steps": args.steps + profiled_steps(args),
        "eval_every": None,
        "early_stopping_patience": None,
        "checkpoint_every": args.steps + profiled_steps(args) + 1,
        "group_by_length": group_by_length,
        "batch_size": args.batch_size,
        "gradient_accumulation_steps": args.grad_accum,
        "max_length": args.max_length,
        "stride": args.stride,
        "learning_rate": args.learning_rate,
        "pad_to_multiple_of": args.pad_to_multiple_of,
        "compile": "on" if compile_on else "off",
        "attention": attention,
        "device": str(device),
        "bf16": bf16,
        "threads": args.threads,
        "seed": 0,
    }
    lines: list[str] = []

    def one_pass() -> dict:
        with tempfile.TemporaryDirectory(prefix="bench_train_loop_") as tmp:
            summary = train_qa(
                train_frame,
                valid_frame,
                model_name_or_path=model_name,
                output_dir=Path(tmp) / "model",
                checkpoint_dir=Path(tmp) / "checkpoints",
                settings=settings,
                log=lines.append,
            )
        if summary["n_train_features"] != len(feats):
            raise RuntimeError(f"train_qa made {summary['n_train_features']} windows, featurize {len(feats)}")
        return summary

    t0 = time.perf_counter()
    summaries, seconds, walls, graphs, profile, per_pass = timed_passes(one_pass, device, args, variant,
                                                                        1 if compile_on else 2)  # fmt: skip
    call_seconds = time.perf_counter() - t0
    summary = summaries[-1]
    plan = step_micro_batches(len(feats), args.batch_size, args.grad_accum, args.steps)
    start = micro_batches_before(plan, args.warmup)
    multiple = pad_multiple(args.pad_to_multiple_of, device)
    rows = our_batch_rows(feats, plan, batch_size=args.batch_size, seed=0, group_by_length=group_by_length)
    packed = attention == "packed"
    # the sequence length of every micro-batch, as the engine lists it for compilation: padded width or packed row
    widths = [feats.batch_width(r, None, multiple, packed) for r in rows]
    shapes = [(len(r), w) for r, w in zip(rows, widths, strict=True)]
    record = summary.get("compile") or {}
    if compile_on:  # one pass: every shape met twice or more was compiled and warmed before step 1
        census = {"widths_timed": len(set(widths[start:])), "new_widths_cold": None, "new_widths_steady": None,
                  "passes_same_widths": None}  # fmt: skip
        census |= shape_census([shapes], start, ready=map(tuple, record.get("shapes") or []))
    else:
        census = width_census(widths, widths, start) | shape_census([shapes, shapes], start)
    computed = [w if packed else w * len(r) for w, r in zip(widths, rows, strict=True)]
    order = "length-grouped" if group_by_length else "random order"
    if compile_on:
        how = "packed" if packed else padding_words(multiple)
        name = f"ours, {'CUDA defaults' if variant == 'ours_defaults' else 'compiled'} (compile on, {how}, {order})"
    else:
        name = f"ours (train_qa, {order}, {padding_words(multiple)}, eager)"
    row = {
        "name": name,
        "loop": "ours",
        "group_by_length": group_by_length,
        "pad_multiple": None if packed else multiple,
        "attention": attention,
        "compile_setting": settings["compile"],
        **pass_fields(seconds, walls, graphs, census, plan, args, per_pass),
        **work_fields(rows, computed, start),
        "compile": summary.get("compile"),
        "recompiles": record.get("recompiles"),
        "final_loss": summary["train_losses"][-1]["loss"] if summary["train_losses"] else None,
        "bf16": summary["bf16"],
        "device": summary["device"],
        "variant_wall_s": call_seconds,
        "timing_method": "LRScheduler.step wrapper (CUDA-synchronised at the window's ends)"
        + (", one pass compiled and warmed before its first step" if compile_on else ", the second of two passes"),
    }
    if profile:
        row["profile"] = profile | profile_caveat(row)
    return row


def profile_caveat(row: dict) -> dict[str, str]:
    """Why a row's GPU idle share is not to be trusted, if it is not: the profiler starts after the timed steps, and
    CUDA graphs captured before it started (our compiled steps and optimizer step, recorded before the first step)
    may replay kernels it does not see, which then count as idle time."""
    record = row.get("compile") or {}
    if record.get("enabled") and str(row.get("device", "")).startswith("cuda"):
        return {"unreliable": "its CUDA graphs were captured before the profiler started: kernels replayed from them "
                              "may be missing from the trace, so the GPU idle share may be overstated"}  # fmt: skip
    return {}


class _PaddedWindows(torch.utils.data.Dataset):
    """run_qa.py-style training rows: every window padded to ``max_length``, with start/end positions."""

    def __init__(self, feats: QAFeatures, max_length: int) -> None:
        batch = feats.collate(np.arange(len(feats)), pad_to=max_length)
        keys = ["input_ids", "attention_mask", "token_type_ids", "start_positions", "end_positions"]
        self.columns = {k: batch[k] for k in keys if k in batch}

    def __len__(self) -> int:
        return len(self.columns["input_ids"])

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {k: v[i] for k, v in self.columns.items()}


class _Windows(torch.utils.data.Dataset):
    """Unpadded training rows (one window each, its own length), for a collator that pads per batch."""

    def __init__(self, feats: QAFeatures) -> None:
        keys = ["input_ids", "attention_mask", "token_type_ids", "start_positions", "end_positions"]
        self.rows = []
        for i in range(len(feats)):
            batch = feats.collate(np.array([i]))
            self.rows.append({k: batch[k][0] for k in keys if k in batch})

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return self.rows[i]


class _PaddingCollator:
    """Pads each batch with ``DataCollatorWithPadding``: to its longest window rounded up to ``pad_to_multiple_of``
    (the fair Trainer), or with ``buckets`` (multiple, max_length) to our engine's widths (``padded_width``: the Trainer
    fed our batches)."""

    def __init__(self, tokenizer, *, pad_to_multiple_of: int = 1, buckets: tuple[int, int] | None = None) -> None:
        from transformers import DataCollatorWithPadding

        multiple = pad_to_multiple_of if pad_to_multiple_of > 1 else None
        self.pad = DataCollatorWithPadding(tokenizer, pad_to_multiple_of=multiple, return_tensors="pt")
        self.buckets = buckets

    def __call__(self, rows: list[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
        features = [{k: (v.tolist() if v.dim() else int(v)) for k, v in row.items()} for row in rows]
        pad = self.pad
        if self.buckets is not None:
            multiple, cap = self.buckets
            width = padded_width(max(len(f["input_ids"]) for f in features), multiple, cap)
            pad = dataclasses.replace(self.pad, padding="max_length", max_length=width)
        return pad(features)


LENGTHS_KEY = "_window_lengths"  # a batch's window lengths, from the collator to the training step (not a model input)


class _LengthTagging:
    """A collator that adds each batch's window lengths (the attention mask's row sums, a host array) under
    ``LENGTHS_KEY``, so that the training step records them (``_recording_trainer``), in the main process even when
    the loader's workers collate."""

    def __init__(self, collate: Callable[[list], dict[str, torch.Tensor]]) -> None:
        self.collate = collate

    def __call__(self, rows: list) -> dict[str, Any]:
        batch = dict(self.collate(rows))
        batch[LENGTHS_KEY] = batch["attention_mask"].sum(dim=1).numpy().astype(np.int64)
        return batch


def _recording_trainer(base: type, batches: list[tuple[np.ndarray, int]]) -> type:
    """``base`` (a Trainer class) whose training step records every micro-batch it trains on, in order: the window
    lengths the collator tagged and the width (the attention mask's, a shape: nothing is read on the device)."""

    class Recording(base):
        def training_step(self, model, inputs, *args, **kwargs):
            lengths = inputs.pop(LENGTHS_KEY)
            batches.append((np.asarray(lengths), int(inputs["attention_mask"].shape[1])))
            return super().training_step(model, inputs, *args, **kwargs)

    return Recording


class _OurOrderSampler(torch.utils.data.Sampler):
    """Our engine's window order (``epoch_order``, length-grouped, seed 0), epoch after epoch: hands the Trainer
    exactly the batches our loop trains on, so the two loops can be timed on identical work."""

    def __init__(self, lengths: np.ndarray, batch_size: int, seed: int) -> None:
        self.lengths, self.batch_size, self.seed, self.epoch = lengths, batch_size, seed, 0

    def __len__(self) -> int:
        return len(self.lengths)

    def __iter__(self):
        order = epoch_order(
            self.lengths, batch_size=self.batch_size, seed=self.seed, epoch=self.epoch, group_by_length=True
        )
        self.epoch += 1
        return iter(order.tolist())


def _length_grouping(arguments_class: type, on: bool) -> dict[str, Any]:
    """The Trainer's length-grouped sampler: ``train_sampling_strategy`` in transformers 5, ``group_by_length``
    before."""
    if "train_sampling_strategy" in getattr(arguments_class, "__dataclass_fields__", {}):
        return {"train_sampling_strategy": "group_by_length" if on else "random"}
    return {"group_by_length": on}


FAIR_TRAINERS = ("trainer_fair", "trainer_tuned", "trainer_compiled")


def _trainer_collator(variant: str, model_name: str, args: argparse.Namespace, device: torch.device) -> _LengthTagging:
    """The collator of one pass, tagging the window lengths: the fair Trainer's (tuned, compiled or not), ours-like
    for ``trainer_our_batches``, the default collator of pre-padded rows for ``trainer_padded``."""
    from transformers import default_data_collator

    if variant == "trainer_padded":
        return _LengthTagging(default_data_collator)
    tokenizer = load_tokenizer(model_name)
    if variant in FAIR_TRAINERS:
        multiple = trainer_pad_multiple(args.trainer_pad_multiple, device)
        return _LengthTagging(_PaddingCollator(tokenizer, pad_to_multiple_of=multiple))
    buckets = (pad_multiple(args.pad_to_multiple_of, device), args.max_length)
    return _LengthTagging(_PaddingCollator(tokenizer, buckets=buckets))


def bench_trainer(
    model_name: str,
    feats: QAFeatures,
    *,
    args: argparse.Namespace,
    device: torch.device,
    bf16: bool,
    variant: str,
) -> dict:
    """The Trainer: ``trainer_fair`` (``DataCollatorWithPadding``, to a multiple of 8 on CUDA; length grouping),
    ``trainer_tuned`` (the same without the NaN/inf check of every step's loss and with 2 loader workers),
    ``trainer_compiled`` (the fair one with ``torch_compile=True``), ``trainer_our_batches`` (windows in our engine's
    length-grouped order, padded to our widths: the same batches as ours) or ``trainer_padded`` (run_qa.py's default:
    padded to ``max_length``, random order)."""
    from transformers import PrinterCallback, ProgressCallback, Trainer, TrainingArguments

    if variant not in TRAINER_VARIANTS:
        raise ValueError(f"unknown Trainer variant {variant!r}")
    padded = variant == "trainer_padded"
    dataset = _PaddedWindows(feats, args.max_length) if padded else _Windows(feats)
    if args.threads:
        torch.set_num_threads(args.threads)
    compile_options = {"torch_compile": True, "torch_compile_backend": compiled.backend()}
    passes_info: list[dict[str, Any]] = []

    def one_pass():
        collator = _trainer_collator(variant, model_name, args, device)
        batches: list[tuple[np.ndarray, int]] = []
        with quiet_transformers():
            model = load_qa_model(model_name)
        with tempfile.TemporaryDirectory(prefix="bench_train_loop_trainer_") as tmp:
            options = {
                "dataloader_num_workers": 0,
                **_length_grouping(TrainingArguments, variant in FAIR_TRAINERS),
                **(compile_options if variant == "trainer_compiled" else {}),
                **(TUNED_TRAINER_OPTIONS if variant == "trainer_tuned" else {}),
            }
            targs = TrainingArguments(
                output_dir=tmp,
                per_device_train_batch_size=args.batch_size,
                gradient_accumulation_steps=args.grad_accum,
                max_steps=args.steps + profiled_steps(args),
                learning_rate=args.learning_rate,
                bf16=bf16,
                use_cpu=device.type == "cpu",
                eval_strategy="no",
                save_strategy="no",
                logging_strategy="no",
                report_to=[],
                seed=0,
                disable_tqdm=True,
                log_level="error",
                **options,
            )
            trainer_class = Trainer
            if variant == "trainer_our_batches":
                sampler = _OurOrderSampler(feats.lengths, args.batch_size, seed=0)

                class trainer_class(Trainer):  # noqa: N801 - a Trainer that draws our engine's batches
                    def _get_train_sampler(self, train_dataset=None):
                        return sampler

            trainer_class = _recording_trainer(trainer_class, batches)
            trainer = trainer_class(model=model, args=targs, train_dataset=dataset, data_collator=collator)
            for cb in (PrinterCallback, ProgressCallback):
                trainer.remove_callback(cb)
            result = trainer.train()
        passes_info.append({"device": str(targs.device), "optimizer": str(getattr(targs.optim, "value", targs.optim)),
                            "logging_nan_inf_filter": targs.logging_nan_inf_filter,
                            "dataloader_num_workers": targs.dataloader_num_workers})  # fmt: skip
        return result, batches

    t0 = time.perf_counter()
    results, seconds, walls, graphs, profile, per_pass = timed_passes(one_pass, device, args, variant, 2)
    call_seconds = time.perf_counter() - t0
    plan = step_micro_batches(len(feats), args.batch_size, args.grad_accum, args.steps)
    start, n_micro = micro_batches_before(plan, args.warmup), micro_batches_before(plan, args.steps)
    # the micro-batches trained on, as the training step saw them (the profiled steps after them too)
    records = [batches[:n_micro] for _, batches in results]
    if any(len(r) != n_micro for r in records):
        raise RuntimeError(f"the Trainer trained on {[len(r) for r in records]} micro-batches, expected {n_micro}")
    widths = [[width for _, width in r] for r in records]
    if variant == "trainer_our_batches":  # the sampler and collator must have handed the Trainer exactly our batches
        rows = our_batch_rows(feats, plan, batch_size=args.batch_size, seed=0, group_by_length=True)
        if any(w != our_widths(rows, pad_multiple(args.pad_to_multiple_of, device), args.max_length) for w in widths):
            raise RuntimeError("the Trainer's batches are not ours: their widths differ")
    if padded:
        multiple = args.max_length
    elif variant == "trainer_our_batches":
        multiple = pad_multiple(args.pad_to_multiple_of, device)
    else:
        multiple = trainer_pad_multiple(args.trainer_pad_multiple, device)
    census = width_census(widths[0], widths[1], start) | shape_census(
        [[(len(lengths), width) for lengths, width in r] for r in records], start,
        compiled_model=variant == "trainer_compiled")
    steady = records[1]
    name, loop = TRAINER_VARIANTS[variant]
    row = {
        "name": name.format(padding=padding_words(multiple)),
        "loop": loop,
        "group_by_length": variant != "trainer_padded",  # our_batches: our length-grouped order
        "pad_multiple": multiple,
        "attention": "padded",
        "compile_setting": "torch_compile=True" if variant == "trainer_compiled" else "off",
        **pass_fields(seconds, walls, graphs, census, plan, args, per_pass),
        **work_fields([lengths for lengths, _ in steady], [len(lengths) * w for lengths, w in steady], start),
        "compile": None,
        # the Trainer builds a new model each pass: the graphs its second pass compiled are recompilations
        "recompiles": per_pass[-1] if variant == "trainer_compiled" else None,
        "final_loss": float(results[1][0].training_loss),  # the Trainer reports the mean over all steps
        "bf16": bf16,
        **passes_info[-1],
        "variant_wall_s": call_seconds,
        "timing_method": "LRScheduler.step wrapper (CUDA-synchronised at the window's ends), the second of two passes",
    }
    if profile:
        row["profile"] = profile
    return row


def _run_in_subprocess(variant: str, args: argparse.Namespace, env: dict[str, str]) -> dict:
    """Run one variant in a fresh Python process with the same options; its result dict, or, when the process fails,
    a row holding the error (its exit status and the end of its stderr, which is also passed on as it comes)."""
    options = {
        "--model": args.model,
        "--data": args.data,
        "--questions": args.questions,
        "--max-length": args.max_length,
        "--stride": args.stride,
        "--batch-size": args.batch_size,
        "--grad-accum": args.grad_accum,
        "--learning-rate": args.learning_rate,
        "--steps": args.steps,
        "--warmup": args.warmup,
        "--pad-to-multiple-of": args.pad_to_multiple_of,
        "--trainer-pad-multiple": args.trainer_pad_multiple,
        "--device": args.device,
        "--threads": args.threads,
        "--defaults-attention": args.defaults_attention,
        "--profile": args.profile,
        "--profile-steps": args.profile_steps,
    }
    with tempfile.TemporaryDirectory(prefix="bench_train_loop_variant_") as tmp:
        out = Path(tmp) / "result.json"
        command = [sys.executable, __file__, "--variant", variant, "--result-json", str(out)]
        for flag, value in options.items():
            if value is not None:
                command += [flag, str(value)]
        if args.compile_cache == "fresh":  # a cold compilation, as on a new machine
            env = dict(env, TORCHINDUCTOR_CACHE_DIR=str(Path(tmp) / "inductor"))
        tail: collections.deque[str] = collections.deque(maxlen=ERROR_TAIL_LINES)
        with subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env) as proc:
            for line in proc.stderr:  # the variant's log (and TORCH_LOGS) as it comes; its end kept for the report
                sys.stderr.write(line)
                tail.append(line.rstrip("\n"))
            status = proc.wait()
        if status == 0 and out.is_file():
            return json.loads(out.read_text())
    last = next((line for line in reversed(tail) if line.strip()), "no output")
    return {"variant": variant, "name": variant, "error": f"exit status {status}: {last.strip()}",
            "error_tail": list(tail), "command": " ".join(command)}  # fmt: skip


def _mean_of_runs(runs: list[dict]) -> dict:
    """One row from repeated runs of a variant: their mean timed seconds (cold and steady; the rates from them), the
    runs' own values kept; a failed run's error row if one failed."""
    failed = [r for r in runs if "error" in r]
    if failed:
        return failed[0]
    if len(runs) == 1:
        return runs[0]
    row = dict(runs[0])
    cold = [r["cold_timed_seconds"] for r in runs]
    row.update(
        timing_fields(
            None if None in cold else float(np.mean(cold)),
            float(np.mean([r["timed_seconds"] for r in runs])),
            timed_steps=row["timed_steps"],
            n_timed=row["timed_features"],
            new_widths_cold=row["new_widths_cold"],  # the same batches in every run
        )
    )
    row["run_position"] = [r["run_position"] for r in runs]
    row["runs_s_per_step"] = [r["s_per_step"] for r in runs]
    return row


def verdict(ratio: float, goal: float, floor: float | None = None) -> str:
    """``met``, or by how much the ratio misses the goal (and whether it still meets the floor)."""
    if ratio >= goal:
        return f"met (by {ratio - goal:+.2f})"
    short = f"MISSED by {goal - ratio:.2f} ({100 * (1 - ratio / goal):.0f} % short: needs {goal / ratio:.2f}x)"
    if floor is not None:
        short += f"; floor {floor:g}: " + ("met" if ratio >= floor else f"MISSED by {floor - ratio:.2f}")
    return short


def measured(rows: dict[str, dict]) -> dict[str, dict]:
    """The rows of the variants that ran (not those that failed)."""
    return {key: r for key, r in rows.items() if "error" not in r}


def add_rates(rows: dict[str, dict], shape: ModelShape, peak: float | None) -> None:
    """The headline rates of every measured row: real (unpadded) tokens trained on per second and the model FLOPs per
    second they stand for (MFU against the card's peak), the ratios against the fair Trainer's real tokens/s; beside
    them features/s and its ratio, and the tokens computed per second (padding and packed tails included).

    Real tokens, not features: two loops' timed windows need not hold windows of the same mean length (our
    length-grouped order and the Trainer's sampler pick other windows), and a loop whose windows are longer does more
    work per feature."""
    ok = measured(rows)
    base = ok.get("trainer_fair")
    for r in ok.values():
        r["real_tokens_per_s"] = r["timed_real_tokens"] / r["timed_seconds"]
        r["computed_tokens_per_s"] = r["timed_computed_tokens"] / r["timed_seconds"]
        r["model_flops_per_s"] = shape.training_flops(r["timed_real_tokens"], r["timed_sum_sq_lengths"]) / r[
            "timed_seconds"
        ]
        r["mfu"] = r["model_flops_per_s"] / peak if peak else None
        r["ratio_vs_trainer"] = r["real_tokens_per_s"] / base["real_tokens_per_s"] if base else None
        r["feature_ratio_vs_trainer"] = r["features_per_s"] / base["features_per_s"] if base else None


def compile_seconds(row: dict) -> float | None:
    """Compile and capture seconds of one of our compiled rows (the engine's record), None for others."""
    record = row.get("compile") or {}
    if not record.get("enabled"):
        return None
    return float(record.get("compile_s") or 0) + float(record.get("capture_s") or 0)


def target_checks(rows: dict[str, dict], mfu_note: str) -> list[dict[str, Any]]:
    """The targets against this run's steady-state numbers (speed: real tokens/s); a target whose rows did not run,
    or failed, says so."""
    checks: list[dict[str, Any]] = []
    failed = {key: r["error"] for key, r in rows.items() if "error" in r}

    def missing(*keys: str) -> str:
        broken = [f"{key} failed ({failed[key]})" for key in keys if key in failed]
        return "; ".join(broken) if broken else f"needs the variants {' and '.join(keys)}"

    def add(target: str, ours: str, value: float | None, goal: float, floor: float | None = None,
            why_missing: str = "", unit: str = "x") -> None:  # fmt: skip
        if value is None:
            checks.append({"target": target, "ours": ours, "value": None, "goal": goal, "met": None,
                           "verdict": f"not measured: {why_missing}"})  # fmt: skip
            return
        if unit == "s":  # at most
            met, text = value <= goal, (f"met (by {goal - value:.1f} s)" if value <= goal
                                         else f"MISSED by {value - goal:.1f} s ({value / goal:.2f}x the budget)")
        elif unit == "share":
            met, text = value >= goal, (f"met (by {100 * (value - goal):.1f} points)" if value >= goal else
                                        f"MISSED by {100 * (goal - value):.1f} points "
                                        f"({100 * (1 - value / goal):.0f} % short: needs {goal / value:.2f}x)")
        else:
            met, text = value >= goal, verdict(value, goal, floor)
        checks.append({"target": target, "ours": ours, "value": value, "goal": goal, "floor": floor, "met": met,
                       "verdict": text, "unit": unit})  # fmt: skip

    ok = measured(rows)
    defaults = ok.get("ours_defaults")
    name = defaults["name"] if defaults else "ours_defaults"

    def speedup(baseline: str) -> float | None:
        other = ok.get(baseline)
        return defaults["real_tokens_per_s"] / other["real_tokens_per_s"] if defaults and other else None

    add(f"ours, CUDA defaults >= {TARGET_VS_FAIR:.1f}x the fair Trainer (real tokens/s; floor {FLOOR_VS_FAIR:.1f}x)",
        name, speedup("trainer_fair"), TARGET_VS_FAIR, FLOOR_VS_FAIR, missing("ours_defaults", "trainer_fair"))
    add(f"ours, CUDA defaults >= {TARGET_VS_TRAINER_COMPILED:.1f}x the Trainer with torch_compile=True (real tokens/s)",
        name, speedup("trainer_compiled"), TARGET_VS_TRAINER_COMPILED, None,
        missing("ours_defaults", "trainer_compiled"))  # fmt: skip
    add(f"ours, CUDA defaults >= {TARGET_VS_FAIR:.1f}x the fair Trainer without its waits (trainer_tuned: no NaN/inf "
        "filter, 2 loader workers; real tokens/s)", name, speedup("trainer_tuned"), TARGET_VS_FAIR, FLOOR_VS_FAIR,
        missing("ours_defaults", "trainer_tuned"))  # fmt: skip
    mfu = defaults.get("mfu") if defaults else None
    add(f"MFU of ours, CUDA defaults >= {100 * TARGET_MFU:.0f} % (stated for BERT-base)", name,
        mfu, TARGET_MFU, None, mfu_note if defaults else missing("ours_defaults"), unit="share")  # fmt: skip
    add(f"compile and capture of all shapes <= {TARGET_COMPILE_S:.0f} s", name,
        compile_seconds(defaults) if defaults else None, TARGET_COMPILE_S, None,
        "needs the variant ours_defaults, compiled" if "ours_defaults" not in failed else missing("ours_defaults"),
        unit="s")  # fmt: skip
    grouped, same = ok.get("ours_grouped"), ok.get("trainer_our_batches")
    add(f"ours eager >= {TARGET_SAME_BATCHES:.1f}x the Trainer fed the same batches (s/step)",
        grouped["name"] if grouped else "ours_grouped",
        same["s_per_step"] / grouped["s_per_step"] if grouped and same else None, TARGET_SAME_BATCHES, None,
        missing("ours_grouped", "trainer_our_batches"))  # fmt: skip
    return checks


def _fmt(value: float | None, spec: str, missing: str = "n/a") -> str:
    return missing if value is None else format(value, spec)


def _ratio(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}x"


def report_lines(payload: dict[str, Any]) -> list[str]:
    """The whole report as text lines (printed, and written as Markdown with ``--markdown``); a partial report (some
    variants still to run) says so in its first line."""
    rows, name = payload["rows"], payload["device"]
    ok = measured(rows)
    pending = payload.get("variants_pending") or []
    lines = [
        (f"PARTIAL (written after every variant; still to run: {', '.join(pending)}). " if pending else "")
        + f"Training throughput on {name} (bf16 autocast: {payload['bf16']}), model {payload['model']} "
        f"({payload['model_type']}), batch {payload['batch_size']} x accum {payload['gradient_accumulation_steps']}, "
        f"max_length {payload['max_length']}; steady state, steps {payload['warmup_steps'] + 1}-{payload['steps']} "
        "timed; baseline = the fair HF Trainer in the same run",
        "",
        "| variant | s/step | real tokens/s | model TFLOP/s | MFU | vs fair Trainer | features/s | (features/s) | "
        "width | pad % |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for key, r in rows.items():
        if key not in ok:
            lines.append(f"| {key} | FAILED: {r['error']} |  |  |  |  |  |  |  |  |")
            continue
        mfu = "n/a" if r["mfu"] is None else f"{100 * r['mfu']:.1f} %"
        lines.append(
            f"| {r['name']} | {r['s_per_step']:.4f} | {r['real_tokens_per_s']:.0f} | "
            f"{r['model_flops_per_s'] / 1e12:.2f} | {mfu} | {_ratio(r['ratio_vs_trainer'])} | "
            f"{r['features_per_s']:.1f} | {_ratio(r['feature_ratio_vs_trainer'])} | {r['mean_batch_width']:.0f} | "
            f"{100 * r['pad_fraction']:.1f} |"
        )
    lines += [
        "",
        "real tokens/s: the unpadded tokens of the timed windows per second (the headline, and what the ratios "
        "compare: the loops' windows differ in length); model TFLOP/s: the useful training FLOPs per second; "
        "features/s: windows per second, with its ratio beside; width: tokens computed per window (padding and packed "
        "tails included); pad %: their share that is not a real token.",
        f"MFU = (6 x N x tokens + 12 x layers x hidden x sum(window length^2)) / timed seconds / peak; N = "
        f"{payload['non_embedding_parameters']:,} parameters outside the embedding layer, layers {payload['layers']}, "
        f"hidden {payload['hidden']}, tokens = the real (unpadded) tokens of the timed steps; peak: {payload['peak']}.",
        f"Attention of the CUDA defaults here: {payload['defaults_attention']} ({payload['defaults_attention_why']}).",
    ]
    failed = {key: r for key, r in rows.items() if key not in ok}
    if failed:
        lines += ["", "Failed variants (each ran in its own process; the others' rows stand):"]
        for key, r in failed.items():
            lines.append(f"- {key}: {r['error']}")
            lines += [f"    {line}" for line in r.get("error_tail", [])[-12:]]
    lines += [
        "",
        "Compile and capture (outside the timed steps; inductor cache: "
        + ("fresh for each variant, cold compilations)" if payload["compile_cache"] == "fresh"
           else "shared with the caller, so these may include cache hits)"),  # fmt: skip
    ]
    any_compiled = False
    for key, r in ok.items():
        record = r.get("compile") or {}
        if record.get("enabled"):
            any_compiled = True
            capture = record.get("capture_s")
            lines.append(
                f"- compile + capture, {r['name']}: {compile_seconds(r):.1f} s = {record.get('compile_s') or 0:.1f} s "
                f"compiling and warming {len(record['shapes'])} batch shape(s) ({record.get('backend')}; "
                f"{sum(record['passes'])} passes compiled, {record['eager_passes']} eager; "
                f"{record.get('graph_breaks')} graph breaks)"
                + (" + no optimizer-step capture (CUDA only)" if capture is None
                   else f" + {capture:.2f} s capturing the optimizer step as a CUDA graph")  # fmt: skip
            )
        elif key == "trainer_compiled" and r["passes"] == 2:
            any_compiled = True
            cold, steady = r["pass_wall_seconds"]
            lines.append(
                f"- compile, {r['name']}: inside its first steps, not separable: its first pass took {cold:.1f} s, its "
                f"second {steady:.1f} s ({cold - steady:.1f} s more: compilation and first-seen widths; each pass "
                "builds a new model, the second with dynamo's and inductor's caches warm)"
            )
        if record.get("enabled") or key == "trainer_compiled":
            skips, recompiles = r.get("cudagraph_skips"), r.get("recompiles")
            graphs = r.get("graphs_compiled_in_timed_window")
            alarm = [f"{skips} graphs without CUDA graphs"] if skips and payload["device_type"] == "cuda" else []
            alarm += [f"{recompiles} recompilations"] if recompiles else []
            alarm += [f"{graphs} graphs compiled in the timed steps"] if graphs else []
            lines.append(
                f"- dynamo and CUDA graphs, {r['name']}: cudagraph_skips {skips}, recompiles {recompiles}, graphs "
                f"compiled per pass {r.get('graphs_compiled_per_pass')}, in the timed steps {graphs}"
                + (f"; NOT steady: {', '.join(alarm)}" if alarm else "")
            )
    if not any_compiled:
        lines.append("- no compiled variant ran")
    lines += ["", "Inside the timed steps (every variant): batch shapes (rows x length) met there for the first time "
              "in the process, and micro-batches run without a compiled graph:"]  # fmt: skip
    for r in ok.values():
        first, eager = r["shapes_first_met_in_window"], r["eager_steps_in_window"]
        lines.append(
            f"- {r['name']}: {first} of the {r['shapes_timed']} timed shapes first met there, {eager} of the "
            f"{r['timed_micro_batches']} timed micro-batches eager" + ("; NOT steady" if first else "")
        )
    lines += ["", "First-seen batch widths (eager loops: the cold first pass minus the steady second, per width the "
              "cold pass met first in the timed steps):"]  # fmt: skip
    for r in ok.values():
        if r["passes"] != 2:
            record = r.get("compile") or {}
            lines.append(f"- {r['name']}: one pass, every shape compiled and warmed before step 1"
                         + (f" ({record['eager_passes']} passes of shapes met once ran eagerly)"
                            if record.get("eager_passes") else ""))  # fmt: skip
            continue
        cost = r["first_seen_width_s"]
        per_width = f"{cost:.3f} s per new width" if cost is not None else "no new width in the timed steps"
        warm = "" if r["new_widths_steady"] == 0 else f"; NOT steady: {r['new_widths_steady']} widths new in pass 2"
        lines.append(
            f"- {r['name']}: {per_width} (cold {r['cold_s_per_step']:.4f} s/step, steady {r['s_per_step']:.4f}; "
            f"{r['new_widths_cold']} of the {r['widths_timed']} timed widths new{warm})"
        )
    same = payload.get("same_batches")
    if same:
        lines += ["", same]
    scope = "" if payload["device_type"] == "cuda" else " (not a GPU: for reference only, not a check of the targets)"
    lines += [
        "",
        f"Targets (a GPU, the steady state; stated for BERT-base b32 L384 and MiniLM b16 L256), measured on {name} "
        f"with {payload['model']}, b{payload['batch_size']} L{payload['max_length']}{scope}:",
    ]
    for c in payload["targets"]:
        value = c["value"]
        shown = ("" if value is None else f"{value:.1f} s, " if c.get("unit") == "s"
                 else f"{100 * value:.1f} %, " if c.get("unit") == "share" else f"{value:.2f}x, ")  # fmt: skip
        lines.append(f"- {c['target']}: {shown}{c['verdict']} [{c['ours']}]")
    missed = [c for c in payload["targets"] if c["met"] is False]
    if missed and not payload.get("profile"):
        lines.append(f"{len(missed)} target(s) missed: --profile DIR writes where the steps' time goes (GPU idle "
                     "share).")
    for r in ok.values():
        if r.get("profile"):
            p = r["profile"]
            idle = f", GPU idle {100 * p['gpu_idle_share']:.1f} % of each step" if "gpu_idle_share" in p else ""
            caveat = f" (UNRELIABLE: {p['unreliable']})" if p.get("unreliable") else ""
            lines.append(f"- profile of {r['name']}: {p['wall_s_per_step']:.4f} s/step profiled{idle}{caveat}: "
                         f"{p['file']}")  # fmt: skip
    lines += ["", "timing:"] + [f"- {key}: {r['timing_method']}" for key, r in ok.items()]
    return lines


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=MINILM, help=f"a checkpoint, or {RANDOM_BERT_BASE} (BERT-base's architecture, "
                    "random weights, a BERT vocabulary)")
    ap.add_argument("--data", default=None, help=f"SQuAD v1.1 dev JSON (default $SPURIOUS_DATA_MIRROR/{SQUAD_DEV})")
    ap.add_argument("--questions", type=int, default=2000, help="train on the first N questions")
    ap.add_argument("--max-length", type=int, default=256)
    ap.add_argument("--stride", type=int, default=128)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--grad-accum", type=int, default=1, help="gradient_accumulation_steps (both loops)")
    ap.add_argument("--learning-rate", type=float, default=1e-4)
    ap.add_argument("--steps", type=int, default=30, help="optimizer steps per pass")
    ap.add_argument("--warmup", type=int, default=3, help="first steps of each pass left out of the timing (>= 2)")
    ap.add_argument(
        "--pad-to-multiple-of",
        default=DEFAULT_SETTINGS["pad_to_multiple_of"],
        help="ours and the Trainer on our batches: the training setting (auto: 64 on CUDA, exact widths on CPU)",
    )
    ap.add_argument(
        "--trainer-pad-multiple",
        default="auto",
        help="the fair Trainer's DataCollatorWithPadding(pad_to_multiple_of) (auto: 8 on CUDA, none on CPU)",
    )
    ap.add_argument("--variants", default="auto",
                    help=f"comma-separated, of {', '.join(VARIANTS)}; auto: all on CUDA, the eager ones on a CPU")
    ap.add_argument("--compile-cache", choices=("fresh", "shared"), default="fresh",
                    help="fresh: a new inductor cache per variant (cold compilations); shared: TORCHINDUCTOR_CACHE_DIR")
    ap.add_argument("--device", default="auto", help="auto (CUDA if available), cpu or cuda")
    ap.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    ap.add_argument("--ours-first", action="store_true", help="run our loops before the Trainers")
    ap.add_argument("--profile", default=None, metavar="DIR",
                    help="profile steps after the timed ones: DIR/<variant>.profile.txt, with the GPU idle share")
    ap.add_argument("--profile-steps", type=int, default=5, help="the steps profiled, after the timed ones")
    ap.add_argument("--variant", default=None, help=argparse.SUPPRESS)  # internal: run one variant, in this process
    ap.add_argument("--defaults-attention", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--result-json", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--json", default=None, help="also write the results here")
    ap.add_argument("--markdown", default=None, help="also write the report here as Markdown")
    args = ap.parse_args()
    if not 2 <= args.warmup < args.steps:
        ap.error("need 2 <= --warmup < --steps (a compiled run captures its optimizer step at step 2)")
    if args.profile and args.profile_steps < 1:
        ap.error("--profile needs --profile-steps of at least 1")
    return args


def chosen_variants(setting: str, device: torch.device) -> list[str]:
    if setting == "auto":
        return [v for v in VARIANTS if device.type == "cuda" or v not in COMPILED_VARIANTS]
    chosen = [v.strip() for v in setting.split(",") if v.strip()]
    unknown = sorted(set(chosen) - set(VARIANTS))
    if unknown or not chosen:
        raise SystemExit(f"--variants: unknown {unknown}; known: {', '.join(VARIANTS)}")
    return [v for v in VARIANTS if v in chosen]


def run_variants(variants: list[str], args: argparse.Namespace,
                 after_each: Callable[[dict[str, dict], list[str]], None] = lambda rows, pending: None,
                 ) -> dict[str, dict]:  # fmt: skip
    """Each variant in a fresh process (in one process the later of two equal loops measured 1-4 % slower), isolated:
    a variant that fails gets a row with its error and the others run on. The same-batches pair twice, in the order
    A B B A (ours first with --ours-first), so that a drift of the machine's speed over the run weighs on both alike
    (their rows are the means of the two runs). ``after_each(rows, pending)`` gets the rows so far and the variants
    still to run after every run (the report is rewritten then)."""
    pair = ["trainer_our_batches", "ours_grouped"]
    if not set(pair) <= set(variants):
        pair = []
    if args.ours_first:
        pair = pair[::-1]
    others = [v for v in variants if v not in pair]
    if args.ours_first:
        others = [v for v in others if v.startswith("ours")] + [v for v in others if not v.startswith("ours")]
    order = (pair + pair[::-1] if pair else []) + others
    env = dict(os.environ)
    runs: dict[str, list[dict]] = {}
    for n, variant in enumerate(order, start=1):
        r = _run_in_subprocess(variant, args, env)
        r["run_position"] = n
        runs.setdefault(variant, []).append(r)
        pending = list(dict.fromkeys(order[n:]))
        after_each({key: _mean_of_runs(runs[key]) for key in variants if key in runs and key not in pending}, pending)
        done = f"FAILED, {r['error']}" if "error" in r else f"{r['features_per_s']:.1f} features/s"
        print(f"  {variant}: {done}", flush=True)  # after the report was rewritten
    return {key: _mean_of_runs(runs[key]) for key in variants}


def main() -> None:
    args = parse_args()
    if args.model == RANDOM_BERT_BASE and not args.variant:
        with tempfile.TemporaryDirectory(prefix="bench_train_loop_bert_base_") as tmp:
            model_name, args.model = args.model, random_bert_base(Path(tmp))
            run(args, model_name)
        return
    run(args, args.model)


def run(args: argparse.Namespace, model_name: str) -> None:
    """The benchmark (or, with ``--variant``, one of its variants); ``model_name`` as the report names the model."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if args.threads:
        torch.set_num_threads(args.threads)
    device = pick_device(args.device)
    bf16 = use_bf16("auto", device)

    data = args.data or default_data()
    frame = load_squad_json(data)
    train_frame = frame.iloc[: args.questions].reset_index(drop=True)
    valid_frame = frame.iloc[args.questions : args.questions + VALID_QUESTIONS].reset_index(drop=True)
    t0 = time.perf_counter()
    feats = featurize(train_frame, load_tokenizer(args.model), max_length=args.max_length, stride=args.stride)
    featurize_s = time.perf_counter() - t0

    if args.variant:  # one variant, in this process (how the default mode runs each)
        if args.variant == "ours_defaults" and args.defaults_attention is None:
            with quiet_transformers():
                args.defaults_attention, _ = defaults_attention(load_qa_model(args.model), device, bf16)
        if args.variant in TRAINER_VARIANTS:
            result = bench_trainer(args.model, feats, args=args, device=device, bf16=bf16, variant=args.variant)
        else:
            result = bench_ours(args.model, train_frame, valid_frame, feats, variant=args.variant, args=args,
                                device=device, bf16=bf16)  # fmt: skip
        Path(args.result_json).write_text(json.dumps(result) + "\n")
        return

    variants = chosen_variants(args.variants, device)
    with quiet_transformers():
        model = load_qa_model(args.model)
    shape = model_shape(model)
    args.defaults_attention, attention_why = defaults_attention(model, device, bf16)
    del model
    peak_text, peak = peak_flops(device)
    name = device_name(device)
    epochs = args.steps * args.batch_size * args.grad_accum / len(feats)
    print(
        f"device: {name}; bf16 autocast: {bf16}; model {model_name} ({shape.model_type}, "
        f"{shape.non_embedding_parameters:,} non-embedding parameters); {len(train_frame)} questions -> {len(feats)} "
        f"windows (max_length {args.max_length}, stride {args.stride}, featurised in {featurize_s:.1f}s); batch "
        f"{args.batch_size} x accum {args.grad_accum}; {args.steps} steps ({epochs:.2f} epochs) per pass, steps "
        f"{args.warmup + 1}-{args.steps} timed; variants: {', '.join(variants)}; CUDA defaults' attention: "
        f"{args.defaults_attention} ({attention_why}); compile backend {compiled.backend()}",
        flush=True,
    )
    header: dict[str, Any] = {
        "benchmark": "bench_train_loop",
        "device": name,
        "device_type": device.type,
        "bf16": bf16,
        "threads": torch.get_num_threads(),
        "model": model_name,
        "model_type": shape.model_type,
        "non_embedding_parameters": shape.non_embedding_parameters,
        "layers": shape.layers,
        "hidden": shape.hidden,
        "peak": peak_text,
        "peak_flops": peak,
        "mfu_formula": "(6 * N * real tokens + 12 * layers * hidden * sum(window length^2)) / timed seconds / peak",
        "headline": "real (unpadded) tokens per second and model FLOP/s; features/s beside them",
        "data": data,
        "questions": len(train_frame),
        "features": len(feats),
        "max_length": args.max_length,
        "stride": args.stride,
        "batch_size": args.batch_size,
        "gradient_accumulation_steps": args.grad_accum,
        "learning_rate": args.learning_rate,
        "steps": args.steps,
        "warmup_steps": args.warmup,
        "pad_to_multiple_of": args.pad_to_multiple_of,
        "trainer_pad_multiple": trainer_pad_multiple(args.trainer_pad_multiple, device),
        "defaults_attention": args.defaults_attention,
        "defaults_attention_why": attention_why,
        "compile_backend": compiled.backend(),
        "compile_cache": args.compile_cache,
        "featurize_s": featurize_s,
        "run_order": "ours first" if args.ours_first else "Trainer first",
        "profile": args.profile,
        "versions": {"torch": torch.__version__, "transformers": __import__("transformers").__version__},
    }

    def report(rows: dict[str, dict], pending: list[str]) -> list[str]:
        """The report of the rows so far, written to --json and --markdown (``pending``: the variants still to run,
        named in both, so that a report cut short never looks complete)."""
        add_rates(rows, shape, peak)
        payload = dict(header, variants_pending=pending, same_batches=same_batches_line(rows),
                       targets=target_checks(rows, peak_text), rows=rows)  # fmt: skip
        lines = report_lines(payload)
        if args.markdown:
            write_atomically(Path(args.markdown), f"# bench_train_loop on {name}\n\n" + "\n".join(lines) + "\n")
        if args.json:
            payload["results"] = [{"variant": key, **r} for key, r in payload.pop("rows").items()]
            write_atomically(Path(args.json), json.dumps(payload, indent=2) + "\n")
        return lines

    rows = run_variants(variants, args, after_each=report)
    lines = report(rows, [])
    print()
    print("\n".join(lines))
    for path in (args.markdown, args.json):
        if path:
            print(f"wrote {path}")
    failed = [key for key, r in rows.items() if "error" in r]
    if failed:
        print(f"bench_train_loop: {len(failed)} variant(s) failed: {', '.join(failed)} (their errors are in the "
              "report; the other rows stand)", file=sys.stderr)  # fmt: skip
        sys.exit(1)


def same_batches_line(rows: dict[str, dict]) -> str | None:
    """Ours eager against the Trainer fed the same batches, when both ran."""
    ok = measured(rows)
    if "trainer_our_batches" not in ok or "ours_grouped" not in ok:
        return None
    ours, theirs = ok["ours_grouped"], ok["trainer_our_batches"]
    same = theirs["s_per_step"] / ours["s_per_step"]
    runs = {r: ", ".join(f"{t:.4f}" for t in row.get("runs_s_per_step", [row["s_per_step"]]))
            for r, row in (("ours", ours), ("theirs", theirs))}  # fmt: skip
    return (
        f"Same batches (the Trainer fed our engine's length-grouped order and widths, checked equal): ours eager "
        f"{ours['s_per_step']:.4f} s/step, the Trainer {theirs['s_per_step']:.4f} s/step: ours {same:.2f}x the "
        f"Trainer's speed; means of two runs each, ours {runs['ours']}, the Trainer {runs['theirs']} s/step."
    )


def write_atomically(path: Path, text: str) -> None:
    """``text`` into ``path`` through a temporary file and a rename: a reader never sees half a report."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    tmp.replace(path)


if __name__ == "__main__":
    main()
