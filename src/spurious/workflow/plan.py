"""What a config will cost before it is submitted: ``spurious plan`` (docs/paper-configs.md).

Snakemake plans the job graph of the config exactly as a run would (the same Snakefile, the workflow profile's
resources, nothing executed, no cluster and no network needed); every planned job then gets an estimate:

- **GPU jobs** (those whose resources ask for a GPU): steps × seconds per step, plus the forward passes of their
  evaluations or predictions, plus a start-up. A step's seconds come from the nearest model measured on a GPU
  (:data:`GPU_STEPS`: MiniLM and BERT-base training steps on an H200) by the larger of two scalings:
  ``s/step = s_ref × max(L / L_ref, (N / N_ref) × (T / T_ref))``, with L the layers, N the non-embedding parameters
  and T = batch × gradient accumulation × max_length the padded tokens of a step (every batch counted padded to
  max_length: an upper bound). The first is a step that leaves the card partly idle, whose time its kernels set, one
  set per layer: the two measurements show it (MiniLM, 6 layers, 19 ms; BERT-base, 12 layers, 35 ms; BERT-base took
  the same 35 ms for 5.7k and for 11.1k tokens a step); the second a step that fills the card. A forward-only token
  costs a third of a training token (``s_ref / T_ref × N / N_ref / 3``). GPU-hours = seconds × GPUs of the job (N
  GPUs are assumed to scale perfectly: the same GPU-hours, 1/N of the time).
- **CPU jobs**: seconds per job from a measurement where one exists (:data:`CPU_MEASURED`: the heuristics and the
  threshold search from ``make bench``), else a stated per-rule estimate (:data:`CPU_ASSUMED`), times the job's
  threads. A job that trains or runs a model without a GPU (a profile without GPU requests, e.g. profiles/local) is
  counted like a GPU job from the measured CPU step (:data:`CPU_STEP`), in proportion to parameters × tokens.
- **Steps** come from each training job's settings: ``max_steps`` where set (a cap where early stopping may end a run
  sooner), else ``epochs × ceil(rows / (batch × accumulation))``. Rows are known before anything is downloaded only
  for the hub datasets' published split sizes (:data:`spurious.core.costs.SPLIT_ROWS`), the mirror's files and the
  configured sizes (subsets, SpuriousBench's train/dev sizes, AFLite's n); everything else (a debiasing segment, a
  tau-stopped AFLite set) is bounded by the split it comes from, and the table says so.
- **Memory** per job is what its resources ask for (mem_mb, the workflow profile's request) and the GPU memory of the
  model's state (training: weights, gradients and two AdamW moments in fp32, 16 bytes a parameter; inference: the
  weights, 4 bytes; activations come on top). **Disk**: models (4 bytes a parameter), the resumable checkpoints while
  a job runs (12 bytes a parameter: weights and optimizer state), logits, embeddings and parquet files.

What a GPU job trains or runs (its rows, steps, lengths) is each paper's to say: the estimators of its rules live in
its package's ``costs`` module (``spurious.thinktwice.costs``, ``spurious.lexical.costs``, ``spurious.aflite.costs``,
``spurious.spuriousbench.costs``), on what they share in :mod:`spurious.core.costs` (rows, QA windows, steps, the
job's cost); this module turns that work into seconds (:class:`Planner`) and composes their tables
(:data:`GPU_ESTIMATORS`).

Every number carries its basis (which measurement, on which card, or which assumption) into the output.
"""

from __future__ import annotations

import logging
import math
import os
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spurious.aflite import costs as aflite_costs
from spurious.core.costs import (
    CPU_JOB_STARTUP_S,
    GPU_JOB_STARTUP_S,
    Estimator,
    JobCost,
    Rows,
    padding_multiple,
    split_rows,
    steps_of,
    worst_kind,
)
from spurious.lexical import costs as lexical_costs
from spurious.spuriousbench import costs as spuriousbench_costs
from spurious.thinktwice import costs as thinktwice_costs
from spurious.workflow.sizes import ModelSize, architecture, model_size

# ---------------------------------------------------------------------------------------------------- measurements


@dataclass(frozen=True)
class StepMeasurement:
    """One measured training step on a GPU (the second of two timed passes, bf16, the project's training loop)."""

    model: str
    non_embedding: int
    layers: int
    tokens_per_step: float  # padded tokens: batch × mean padded width
    seconds_per_step: float
    card: str
    source: str

    def label(self) -> str:
        return (f"{self.model}: {self.seconds_per_step * 1000:.1f} ms/step at {self.tokens_per_step:,.0f} tokens/step, "
                f"{self.card} ({self.source})")


# ../shared/gpu/h200-2026-11-26/ (commit c644597; torch 2.11.0+cu130, transformers 5.17.0): `ours_random`, the
# schema's default order (group_by_length false), of benchmarks/bench_train_loop.py. tests/core/test_plan.py checks
# these numbers against the files where ../shared is present.
GPU_STEPS = {
    "small": StepMeasurement("MiniLM-L6 QA, batch 16, max_length 256", 10_646_784, 6, 16 * 254.72, 0.019151170360000833,
                             "NVIDIA H200", "h200-2026-11-26/bench_minilm.json"),
    "base": StepMeasurement("BERT-base QA, batch 32, max_length 384", 85_054_464, 12, 32 * 348.0, 0.03464525790624862,
                            "NVIDIA H200", "h200-2026-11-26/bench_bertbase.json"),
}
# A training step on the CPU (docs/measured-results.md, "Width buckets on CPU": MiniLM QA, batch 16, max_length 256,
# exact widths, mean width 155, fused AdamW, 2 cores: 1.8 s a step, the mean of two rounds), in CPU-seconds (× 2
# cores). A CPU has no idle capacity to hide a step in: every size scales by parameters × tokens.
CPU_STEP = StepMeasurement("MiniLM-L6 QA, batch 16, max_length 256, exact widths", 10_646_784, 6, 16 * 155.0,
                           2 * 1.8, "2 CPU cores", "docs/measured-results.md, width buckets on CPU; CPU-seconds")
# the model a size class is counted as when a config names only the class of a checkpoint unknown offline
CLASS_MODELS = {"small": "embedded:all-MiniLM-L6-v2", "base": "bert-base-uncased", "large": "roberta-large",
                "xl": "EleutherAI/pythia-12b"}
# A model at or below this many non-embedding parameters is nearer MiniLM than BERT-base (their geometric mean).
NEAREST_SPLIT = math.sqrt(GPU_STEPS["small"].non_embedding * GPU_STEPS["base"].non_embedding)
FORWARD_SHARE = 1 / 3  # a forward pass is about a third of a forward and backward pass
DISK_BYTES_PER_S = 1e9  # assumed: reading model weights at the start
# Measured: the engine's checkpoint of MiniLM QA (22.6M parameters: model, AdamW state and RNG states, 271 MB, 12
# bytes a parameter), written and flushed to disk by checkpoints.save_checkpoint in 0.77-1.36 s (4 saves, 2-core machine
# with other jobs running): 0.2-0.35 GB/s, counted at 0.3 GB/s. A checkpoint after the first evaluation also holds the
# best weights (4 bytes a parameter).
CHECKPOINT_BYTES_PER_S = 0.3e9
# Measured on the H200 (training.py, PAD_MULTIPLE_BY_DEVICE): a batch shape first met in a process costs ~0.14 s once
# (kernel selection); the MiniLM and BERT-base benchmarks' first-seen widths took 0.08-0.24 s. A CPU has no such cost.
GPU_FIRST_SHAPE_S = 0.14
# Measured on 2 cores (the featurisation of SQuAD dev behind spurious.core.costs.SQUAD_WINDOWS, one tokenizer thread,
# other jobs running): 10,570 questions in 16-26 s per max_length, counted at 2.1 ms a question, on the job's start-up.
FEATURIZE_S_PER_QUESTION = 0.0021


@dataclass(frozen=True)
class Card:
    """A GPU the plan can cost for: its published dense bf16 peak and memory bandwidth (the datasheet's)."""

    name: str
    bf16_tflops: float  # dense, without sparsity; V100 has no bf16: its FP32 peak, which `bf16: auto` trains in
    bandwidth_tbs: float
    source: str

    def factor(self) -> float:
        """Seconds on this card per second on the H200: the geometric mean of the H200's bf16 peak over this card's
        and its bandwidth over this card's (a training step of these encoders is partly bound by each)."""
        h200 = CARDS["h200"]
        return math.sqrt(h200.bf16_tflops / self.bf16_tflops * h200.bandwidth_tbs / self.bandwidth_tbs)


CARDS = {
    "h200": Card("NVIDIA H200 SXM", 989.0, 4.8, "NVIDIA H200 datasheet: 989 TFLOPS dense BF16, 4.8 TB/s HBM3e"),
    "h100": Card("NVIDIA H100 SXM5", 989.0, 3.35,
                 "NVIDIA H100 datasheet (SXM5): 989 TFLOPS dense BF16, 3.35 TB/s HBM3"),
    "a100": Card("NVIDIA A100 SXM 80GB", 312.0, 2.039,
                 "NVIDIA A100 datasheet (80GB SXM): 312 TFLOPS dense BF16, 2,039 GB/s HBM2e"),
    "v100": Card("NVIDIA V100 SXM2", 15.7, 0.9, "NVIDIA V100 datasheet (SXM2): no BF16, so `bf16: auto` trains in "
                 "FP32 there: 15.7 TFLOPS FP32, 900 GB/s HBM2"),
    "l40s": Card("NVIDIA L40S", 362.0, 0.864, "NVIDIA L40S datasheet: 362 TFLOPS dense BF16, 864 GB/s GDDR6"),
}  # fmt: skip
DEFAULT_CARD = "h200"

# CPU measurements on 2 cores (docs/measured-results.md, `make bench`): CPU-seconds per row (wall time × 2 cores).
CPU_MEASURED = {
    "heuristics": (2 * 27.5 / 10_570, "the seven heuristics on SQuAD dev: 27.5 s for 10,570 questions on 2 cores "
                                      "(make bench, docs/measured-results.md)"),
    "bias": (0.32 / 7, "one threshold search on SQuAD dev: 0.32 s for seven (make bench, docs/measured-results.md)"),
}
CPU_MEASURED["human_bias"] = CPU_MEASURED["bias_fixed_threshold"] = CPU_MEASURED["bias"]
# CPU seconds per job where nothing was measured (assumptions, stated in the output)
CPU_ASSUMED = {
    "download": 300.0,
    "derive_splits": 60.0,
    "subset": 30.0,
    "segments": 30.0,
    "human_predictions": 30.0,
    "report_tables": 60.0,
    "debias_report": 120.0,
    "figure4_report": 60.0,
    "scale_search_choice": 5.0,
    "lexical_features": 600.0,
    "lexical_bigrams": 300.0,
    "lexical_balance": 120.0,
    "lexical_permutation": 30.0,
    "lexical_report": 120.0,
    "aflite_synthetic": 120.0,
    "aflite_synthetic_report": 60.0,
    "aflite_warmup_split": 60.0,
    "aflite_training_sets": 60.0,
    "aflite_variant_training_sets": 60.0,
    "aflite_text_report": 120.0,
    "aflite_ood_report": 60.0,
    "spurious_pools": 300.0,
    "spurious_build": 120.0,
    "spurious_report": 300.0,
}

# GPU seconds per job (after the start-up) of GPU rules without a model of their work (assumptions)
GPU_ASSUMED = {"lexical_reweight": 120.0, "audit": 600.0}

ROW_BYTES = {"qa": 1_000, "classification": 200}  # assumed parquet bytes per row

# The estimators of the papers' GPU rules, by rule (each paper's ``costs`` module)
GPU_ESTIMATORS: dict[str, Estimator] = {**thinktwice_costs.ESTIMATORS, **lexical_costs.ESTIMATORS,
                                        **aflite_costs.ESTIMATORS, **spuriousbench_costs.ESTIMATORS}


# ---------------------------------------------------------------------------------------------------- one job


def step_measurement(non_embedding: int) -> StepMeasurement:
    """The nearest measured model: MiniLM up to :data:`NEAREST_SPLIT` non-embedding parameters, else BERT-base."""
    return GPU_STEPS["small"] if non_embedding <= NEAREST_SPLIT else GPU_STEPS["base"]


def seconds_per_step(non_embedding: int, layers: int, tokens_per_step: float, cpu: bool = False) -> float:
    """On a GPU the larger of the reference step scaled by layers (a step the card runs below capacity takes a time
    set by its kernels, one set per layer) and scaled by parameters × tokens (a step that fills the card); on the CPU
    (CPU-seconds) the CPU step scaled by parameters × tokens. On k GPUs each computes its share of a step
    (``tokens_per_step / k``): the launch-bound floor stays, so k GPUs never cost fewer GPU-seconds than one."""
    ref = CPU_STEP if cpu else step_measurement(non_embedding)
    by_layers = 0.0 if cpu else layers / ref.layers
    by_work = non_embedding / ref.non_embedding * tokens_per_step / ref.tokens_per_step
    return ref.seconds_per_step * max(by_layers, by_work)


def seconds_per_forward_token(non_embedding: int, cpu: bool = False) -> float:
    ref = CPU_STEP if cpu else step_measurement(non_embedding)
    return ref.seconds_per_step / ref.tokens_per_step * non_embedding / ref.non_embedding * FORWARD_SHARE


class Planner:
    """Turns the planned jobs of one config into estimates (a job: rule, wildcards, params, resources)."""

    def __init__(self, config: Mapping[str, Any], card: str = DEFAULT_CARD):
        if card not in CARDS:
            raise PlanError(f"unknown card {card!r}: one of {sorted(CARDS)}")
        self.config = config
        self.card = CARDS[card]
        self.factor = self.card.factor()  # on the GPU's compute only: start-up and disk do not change with the card
        self.model_bases: dict[str, str] = {}

    # -- models

    def size(self, spec: Mapping[str, Any], where: str) -> ModelSize:
        """The model's size; a checkpoint whose size is not known offline, but whose size_class the config names,
        is counted as that class's model of the paper configs (:data:`CLASS_MODELS`)."""
        size = model_size(spec, where)
        if size.non_embedding_parameters is None and size.size_class != "bilstm":
            stand_in = CLASS_MODELS[size.size_class]
            self.model_bases[f"class {size.size_class}"] = (
                f"{where} ({spec.get('checkpoint')}): not known offline, counted as {stand_in}, its size_class's model")
            return model_size({"checkpoint": stand_in, "size_class": size.size_class}, where)
        return size

    # -- the estimate of one job

    def job(self, job: PlannedJob) -> JobCost:
        rule, wildcards, params, resources = job.rule, job.wildcards, job.params, job.resources
        gpus = int(resources.get("gpu") or 0)
        cost = JobCost(rule, gpus=gpus, threads=job.threads, mem_mb=int(resources.get("mem_mb") or 0), model=job.model)
        estimator = GPU_ESTIMATORS.get(rule)
        if estimator is not None and (gpus or rule != "aflite_filter"):
            estimator(self, cost, wildcards, params)  # without GPUs: the same work at the CPU's rate, in CPU-seconds
        elif gpus:
            seconds = GPU_ASSUMED.get(rule, 60.0)
            cost.add("start-up", GPU_JOB_STARTUP_S)
            cost.add("forward", seconds)
            cost.kinds.add("estimate")
            cost.basis.append(f"the start-up and {seconds:g} s a job (assumed)")
        else:
            self.cpu_job(cost, wildcards, params)
        if rule == "download":
            rows = split_rows(self.config, wildcards["dataset"], wildcards["split"])
            task = self.config["datasets"][wildcards["dataset"]]["task"]
            cost.disk_bytes += rows.n * ROW_BYTES[task]
        return cost

    def cpu_job(self, cost: JobCost, wildcards: Mapping[str, str], params: Mapping[str, Any]) -> None:
        rule = cost.rule
        if rule == "heuristics":
            rows = split_rows(self.config, wildcards["dataset"], wildcards["split"])
            per_row, basis = CPU_MEASURED[rule]
            cost.cpu_s = CPU_JOB_STARTUP_S * cost.threads + rows.n * per_row
            cost.kinds.add(rows.kind)
            cost.basis.append(f"{basis}; {rows.basis}")
        elif rule in CPU_MEASURED:
            per_search, basis = CPU_MEASURED[rule]
            cost.cpu_s = CPU_JOB_STARTUP_S + per_search
            cost.basis.append(f"{basis}, and the start-up")
        elif rule in CPU_ASSUMED:
            cost.cpu_s = CPU_ASSUMED[rule] * max(cost.threads, 1)
            cost.kinds.add("estimate")
            cost.basis.append(f"{CPU_ASSUMED[rule]:g} s a job (assumed)")
        else:
            cost.cpu_s = 60.0
            cost.kinds.add("estimate")
            cost.basis.append("60 s a job (assumed)")

    # -- pieces shared by the GPU estimators

    def model(self, cost: JobCost) -> ModelSize:
        if cost.model is None:
            raise PlanError(f"rule {cost.rule} has no model in the workflow's MODEL_OF_RULE")
        size = self.size(*cost.model)
        if not cost.gpus:
            self.model_bases["cpu"] = CPU_STEP.label()
        elif size.size_class == "bilstm":
            self.model_bases["bilstm"] = ("BiLSTM control: not measured on a GPU; counted as MiniLM's step scaled to "
                                          "its 3 layers")
        else:
            ref = step_measurement(size.non_embedding_parameters)
            self.model_bases[ref.source] = ref.label()
        return size

    def hidden_width(self, checkpoint: str) -> int | None:
        arch = architecture(checkpoint)
        return arch.hidden if arch else None

    def train(self, cost: JobCost, size: ModelSize, settings: Mapping[str, Any], rows: Rows,
              eval_rows: float = 0.0, evals: float = 0.0, max_length: int | None = None,
              mean_length: float | None = None, questions: float = 0.0) -> None:
        """A training job: start-up, steps, evaluations, checkpoints and (on a GPU) first-seen batch shapes.

        A step's padded tokens are batch × accumulation × its width: with ``group_by_length`` and a known
        ``mean_length`` (SQuAD's windows) the mean window length rounded up to the padding multiple, else max_length
        (an upper bound). On k GPUs each computes tokens / k a step, never below the launch-bound floor."""
        steps, kind, basis = steps_of(settings, rows)
        length = max_length or settings.get("max_length", 128)
        cpu = not cost.gpus
        k = max(cost.gpus, 1)
        multiple = padding_multiple(settings, cpu)
        width, width_basis = _expected_width(settings, length, mean_length, multiple)
        tokens = settings.get("batch_size", 16) * settings.get("gradient_accumulation_steps", 1) * width
        n = size.non_embedding_parameters or 0
        factor = 1.0 if cpu else self.factor
        step_s = seconds_per_step(n, size.layers or 1, tokens / k, cpu) * factor
        cost.add("steps", steps * step_s)
        if evals and eval_rows and n:
            eval_width = (mean_length or length) if cpu or multiple == 1 else min(length, (mean_length or length)
                                                                                  + (multiple - 1) / 2)
            cost.add("evaluations", evals * eval_rows * eval_width * seconds_per_forward_token(n, cpu) * factor)
            basis += f"; {evals:,.0f} evaluation{'s' if evals != 1 else ''} × {eval_rows:,.0f} rows"
        params = size.parameters or 5_000_000  # the BiLSTM: a few million weights
        every = settings.get("checkpoint_every") or 0
        saves = math.floor((steps - 1) / every) if steps and every else 0  # none after the last step
        save_bytes = (12 + (4 if evals else 0)) * params  # weights, AdamW moments; the best weights once evaluated
        cost.add("checkpoints", saves * save_bytes / CHECKPOINT_BYTES_PER_S * (1 if cost.gpus else cost.threads))
        if not cpu:
            shapes = _shapes(settings, length, multiple) + (_shapes(settings, length, multiple, evaluation=True)
                                                            if evals else 0)  # fmt: skip
            cost.add("first-seen shapes", shapes * GPU_FIRST_SHAPE_S)
        cost.kinds.add(kind)
        gpus = f" on {k} GPUs ({tokens / k:,.0f} tokens each)" if k > 1 else ""
        floor = ""
        if k > 1 and seconds_per_step(n, size.layers or 1, tokens / k) == seconds_per_step(n, size.layers or 1,
                                                                                           tokens):
            floor = f"; its step is launch-bound even on one GPU: {k} GPUs take as long as one, {k} × the GPU-hours"
        cost.basis.append(f"{steps:,.0f} steps ({basis}) × {step_s * 1000:.1f} ms{gpus} (width {width_basis}), "
                          f"{saves:,} checkpoints{floor}")
        self.startup(cost, size, questions)
        cost.disk_bytes += 4 * params
        cost.scratch_bytes += 12 * params
        cost.gpu_state_bytes = 16 * params

    def forward(self, cost: JobCost, size: ModelSize, rows: Rows, length: int, what: str,
                questions: float = 0.0) -> None:
        n = size.non_embedding_parameters or 0
        cpu = not cost.gpus
        if n:
            cost.add("forward", rows.n * length * seconds_per_forward_token(n, cpu) * (1.0 if cpu else self.factor))
        cost.kinds.add(rows.kind)
        cost.basis.append(f"{what}: {rows.n:,.0f} rows × {length} tokens forward ({rows.basis})")
        self.startup(cost, size, questions)
        cost.gpu_state_bytes = 4 * (size.parameters or 5_000_000)

    def startup(self, cost: JobCost, size: ModelSize, questions: float = 0.0) -> None:
        """Python and imports, the model's weights read, and a QA job's questions cut into windows."""
        seconds = ((GPU_JOB_STARTUP_S if cost.gpus else CPU_JOB_STARTUP_S)
                   + 4 * (size.parameters or 0) / DISK_BYTES_PER_S)
        seconds += questions * FEATURIZE_S_PER_QUESTION
        cost.add("start-up", seconds * (1 if cost.gpus else max(cost.threads, 1)))


def _expected_width(settings: Mapping[str, Any], length: int, mean_length: float | None,
                    multiple: int) -> tuple[float, str]:
    """A step's expected padded width: with length-grouped batches the mean row length rounded up to the padding
    multiple (on average half a multiple more), else max_length (a batch of random rows is about as wide as its
    longest, near max_length)."""
    if settings.get("pad_to_max_length") or not settings.get("group_by_length") or mean_length is None:
        return float(length), f"max_length {length}"
    width = min(float(length), mean_length + (multiple - 1) / 2)
    return width, f"{width:.0f}: length-grouped, mean window {mean_length:g} tokens (SQuAD dev), padded to x{multiple}"


def _shapes(settings: Mapping[str, Any], length: int, multiple: int, evaluation: bool = False) -> int:
    """The batch shapes a GPU run meets (each costs GPU_FIRST_SHAPE_S once): widths in multiples up to max_length
    for length-grouped training batches and for evaluation batches (sorted by length), about two for random ones."""
    widths = math.ceil(length / max(multiple, 1)) if multiple > 1 else 1
    if evaluation or settings.get("group_by_length"):
        return widths
    return min(widths, 2)


# ---------------------------------------------------------------------------------------------------- the job graph


class PlanError(RuntimeError):
    """The plan cannot be made (no workflow checkout, a bad config, a profile Snakemake refuses)."""


@dataclass(frozen=True)
class PlannedJob:
    """One job as Snakemake planned it, with the model it trains or runs (the workflow's MODEL_OF_RULE)."""

    rule: str
    wildcards: dict[str, str]
    params: dict[str, Any]
    resources: dict[str, Any]
    threads: int
    model: tuple[Mapping[str, Any], str] | None = None


def workflow_root() -> Path:
    """The checkout this package runs from (the Snakefile beside src/), or a PlanError saying how to get one."""
    root = Path(__file__).resolve().parents[3]
    if not (root / "Snakefile").is_file() or not (root / "rules").is_dir():
        raise PlanError(
            f"no workflow next to the installed package ({root} has no Snakefile and rules/): `spurious plan` plans "
            "the workflow of a checkout; run it from a clone of the repository installed with `pip install -e .` "
            "(`make install`)"
        )
    return root


def _profile_settings(profile: Path | None) -> dict[str, Any]:
    """ResourceSettings' arguments from a workflow profile's config.yaml, parsed as Snakemake parses it."""
    from snakemake.cli import parse_set_resources, parse_set_threads
    from snakemake.profiles import ProfileConfigFileParser
    from snakemake.resources import Resources

    if profile is None:
        return {}
    path = profile / "config.yaml" if profile.is_dir() else profile
    with open(path) as fh:
        parsed = ProfileConfigFileParser().parse(fh)
    settings: dict[str, Any] = {}
    if parsed.get("set-resources"):
        settings["overwrite_resources"] = parse_set_resources(parsed["set-resources"])
    if parsed.get("set-threads"):
        settings["overwrite_threads"] = parse_set_threads(parsed["set-threads"])
    if parsed.get("default-resources"):
        settings["default_resources"] = Resources.parse(parsed["default-resources"], defaults="full",
                                                        allow_expressions=True)
    if parsed.get("cores"):
        settings["max_threads"] = int(parsed["cores"])
    return settings


def planned_jobs(configfiles: list[Path], profile: Path | None, workdir: Path, root: Path | None = None,
                 targets: Iterable[str] = (), forcerun: Iterable[str] = ()) -> tuple[dict[str, Any], list[PlannedJob]]:
    """The validated config and every job Snakemake plans to run for it in ``workdir`` (a dry run: nothing runs,
    nothing is submitted; jobs whose outputs are already there are not planned), for ``targets`` (files or rules;
    none: the default target); ``forcerun``: files or rules forced, as ``snakemake --forcerun``."""
    root = root or workflow_root()
    workdir.mkdir(parents=True, exist_ok=True)
    snakemake_log = logging.getLogger("snakemake.logging")  # its progress lines, not for the plan's reader
    propagate, snakemake_log.propagate = snakemake_log.propagate, False
    try:
        return _planned_jobs(configfiles, profile, workdir, root, frozenset(targets), frozenset(forcerun))
    finally:
        snakemake_log.propagate = propagate


def _planned_jobs(configfiles: list[Path], profile: Path | None, workdir: Path, root: Path, targets: frozenset[str],
                  forcerun: frozenset[str] = frozenset()) -> tuple[dict[str, Any], list[PlannedJob]]:
    from snakemake.api import SnakemakeApi
    from snakemake.settings.types import (
        ConfigSettings,
        DAGSettings,
        OutputSettings,
        Quietness,
        ResourceSettings,
        StorageSettings,
    )

    settings = _profile_settings(profile)
    # the threads a job asks for, capped by the profile's `cores` as a run caps them
    resource_settings = ResourceSettings(cores=settings.pop("max_threads", os.cpu_count() or 1), nodes=1, **settings)
    with SnakemakeApi(OutputSettings(quiet={Quietness.ALL})) as api:
        wf_api = api.workflow(
            resource_settings=resource_settings,
            config_settings=ConfigSettings(configfiles=[Path(c).resolve() for c in configfiles]),
            storage_settings=StorageSettings(),
            snakefile=root / "Snakefile",
            workdir=workdir,
        )
        wf_api.dag(DAGSettings(targets=targets, forcerun=forcerun))
        workflow = wf_api._workflow  # the job graph as printdag builds it
        workflow._prepare_dag(forceall=False, ignore_incomplete=True, lock_warn_only=True, nolock=True)
        workflow._build_dag()
        config, model_of_rule = workflow.globals["config"], workflow.globals["MODEL_OF_RULE"]
        jobs = [
            PlannedJob(
                rule=job.rule.name,
                wildcards=dict(job.wildcards_dict),
                params={k: v for k, v in job.params.items()},
                resources={k: v for k, v in job.resources.items()},
                threads=int(job.threads),
                model=model_of_rule[job.rule.name](job.wildcards) if job.rule.name in model_of_rule else None,
            )
            for job in workflow.dag.needrun_jobs()
            if job.rule.name != "all" and not job.rule.norun
        ]
    return config, jobs


# ---------------------------------------------------------------------------------------------------- the summary


@dataclass
class RuleTotal:
    rule: str
    jobs: int = 0
    gpu_jobs: int = 0
    gpu_hours: float = 0.0
    cpu_hours: float = 0.0
    mem_mb: int = 0  # the largest request of one job
    gpu_state_gb: float = 0.0  # the largest model state of one job on its GPUs
    disk_gb: float = 0.0
    scratch_gb: float = 0.0  # the largest checkpoint of one job while it runs
    kind: str = "known"
    basis: str = ""
    longest_job_h: float = 0.0  # wall hours of its longest job (GPU-seconds / GPUs)


def estimate(config: Mapping[str, Any], jobs: Iterable[PlannedJob],
             card: str = DEFAULT_CARD) -> tuple[list[RuleTotal], dict[str, str]]:
    """Per rule (in the order Snakemake planned them, most expensive job's basis kept) and the measurements used,
    for ``card`` (:data:`CARDS`)."""
    planner = Planner(config, card)
    totals: dict[str, RuleTotal] = {}
    costliest: dict[str, float] = defaultdict(lambda: -1.0)
    # in a fixed order (Snakemake's is a set's), so that among equal jobs the same one gives its rule's basis
    for job in sorted(jobs, key=lambda j: (j.rule, list(j.wildcards.items()))):
        cost = planner.job(job)
        total = totals.setdefault(job.rule, RuleTotal(job.rule))
        total.jobs += 1
        total.gpu_jobs += bool(cost.gpus)
        total.gpu_hours += cost.gpu_s / 3600
        total.cpu_hours += cost.cpu_s / 3600
        total.mem_mb = max(total.mem_mb, cost.mem_mb)
        total.gpu_state_gb = max(total.gpu_state_gb, cost.gpu_state_bytes / 1e9)
        total.disk_gb += cost.disk_bytes / 1e9
        total.scratch_gb = max(total.scratch_gb, cost.scratch_bytes / 1e9)
        total.kind = worst_kind([total.kind, *cost.kinds])
        wall_h = (cost.gpu_s / max(cost.gpus, 1) if cost.gpus else cost.cpu_s / max(cost.threads, 1)) / 3600
        total.longest_job_h = max(total.longest_job_h, wall_h)
        if cost.gpu_s + cost.cpu_s > costliest[job.rule]:
            costliest[job.rule] = cost.gpu_s + cost.cpu_s
            where = ", ".join(f"{k}={v}" for k, v in job.wildcards.items())
            total.basis = f"({where}) " + "; ".join(cost.basis) if where else "; ".join(cost.basis)
    ordered = sorted(totals.values(), key=lambda r: (-r.gpu_hours, -r.cpu_hours, r.rule))
    bases = dict(planner.model_bases)
    if any(r.gpu_jobs for r in ordered):
        bases["card"] = card_basis(card)
    return ordered, bases


def card_basis(card: str) -> str:
    c, h200 = CARDS[card], CARDS["h200"]
    if card == "h200":
        return f"Card: {c.name} ({c.source}), the card the measurements come from (factor 1)"
    return (f"Card: {c.name}, the H200's GPU times × {c.factor():.2f} = sqrt(({h200.bf16_tflops:g} / {c.bf16_tflops:g} "
            f"TFLOPS) × ({h200.bandwidth_tbs:g} / {c.bandwidth_tbs:g} TB/s)) ({c.source}; {h200.source}); start-up and "
            "disk unchanged")


def _total(rules: list[RuleTotal]) -> RuleTotal:
    total = RuleTotal("total")
    for r in rules:
        total.jobs += r.jobs
        total.gpu_jobs += r.gpu_jobs
        total.gpu_hours += r.gpu_hours
        total.cpu_hours += r.cpu_hours
        total.mem_mb = max(total.mem_mb, r.mem_mb)
        total.gpu_state_gb = max(total.gpu_state_gb, r.gpu_state_gb)
        total.disk_gb += r.disk_gb
        total.scratch_gb = max(total.scratch_gb, r.scratch_gb)
        total.kind = worst_kind([total.kind, r.kind])
        total.longest_job_h = max(total.longest_job_h, r.longest_job_h)
    return total


FORMULA = (
    "GPU-hours = GPUs × (start-up + steps × s/step + evaluation and prediction tokens × s/token + checkpoints + "
    "first-seen batch shapes), per job, summed; s/step = s_ref × max(L / L_ref, (N / N_ref) × (T / k / T_ref)) × c "
    "and s/token = s_ref / T_ref × N / N_ref / 3 × c, with L the layers, N the non-embedding parameters, T the padded "
    "tokens per step (batch × accumulation × width: length-grouped SQuAD batches the mean window length rounded up "
    "to the padding multiple, else max_length, an upper bound), k the job's GPUs (each computes T / k; the first "
    "term, a launch-bound step, does not shrink, so k GPUs never cost fewer GPU-hours than one), c the card's factor "
    "(1 on the H200; --gpu) and the reference the nearest measured model below (MiniLM up to 30M non-embedding "
    "parameters, else BERT-base). Without a GPU the reference is the CPU step (MiniLM, 3.6 CPU-seconds for 16 × 155 "
    "tokens on 2 cores) and s/step = s_ref × (N / N_ref) × (T / T_ref), in CPU-seconds. Start-up: "
    f"{GPU_JOB_STARTUP_S:.0f} s a GPU job, {CPU_JOB_STARTUP_S:.0f} s a CPU job (× its threads) (assumed), the fp32 "
    f"weights read at {DISK_BYTES_PER_S / 1e9:g} GB/s (assumed) and {FEATURIZE_S_PER_QUESTION * 1000:g} ms a QA "
    f"question cut into windows (measured); checkpoints (12 bytes a parameter, 16 once evaluated) written at "
    f"{CHECKPOINT_BYTES_PER_S / 1e9:g} GB/s (measured); {GPU_FIRST_SHAPE_S:g} s per batch shape a GPU run meets "
    "(measured on the H200). CPU-hours: the CPU jobs only (a GPU job's CPUs come with its GPUs)."
)
UNCERTAINTY = (
    "Nothing larger than BERT-base was measured: BERT-large and RoBERTa-large (24 layers, 3.6 × BERT-base's "
    "non-embedding parameters), Pythia-1b (9.5 ×) and Pythia-12b (133 ×) are extrapolated from BERT-base, by layers "
    "or by parameters × tokens, whichever gives more; a large model uses a card better than the BERT-base step did, "
    "so their figures are more likely high than low, possibly by a factor of 2 to 3. Classification steps are counted "
    "padded to max_length, at their widest. Other cards (--gpu) are scaled by a factor from their published peak and "
    "bandwidth, not measured here. 'bound' rows are upper bounds (a max_steps cap with early stopping, a set of "
    "unknown size bounded by its source); 'estimate' rows rest on a stated assumption; 'unknown' ones on a size "
    "guessed at 10,000 rows."
)


def _fmt(value: float, digits: int = 1) -> str:
    if value == 0:
        return "0"
    return f"{value:,.{digits}f}" if value >= 10 ** -digits else f"< {10 ** -digits:g}"


def markdown(name: str, rules: list[RuleTotal], bases: Mapping[str, str]) -> str:
    """The plan as a Markdown table (per rule, then the total), the measurements it rests on and each rule's basis."""
    head = ("| rule | jobs | GPU jobs | GPU-hours | CPU-hours | longest job (h) | memory per job (GB, requested) "
            "| GPU memory per job (GB, model state) | disk (GB) | checkpoint while running (GB) | how known |")
    lines = [f"### {name}", "", head, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in [*rules, _total(rules)]:
        bold = (lambda s: f"**{s}**") if r.rule == "total" else (lambda s: s)
        lines.append(
            f"| {bold(r.rule)} | {bold(f'{r.jobs:,}')} | {bold(f'{r.gpu_jobs:,}')} | {bold(_fmt(r.gpu_hours))} "
            f"| {bold(_fmt(r.cpu_hours))} | {_fmt(r.longest_job_h)} | {_fmt(r.mem_mb / 1000, 0)} "
            f"| {_fmt(r.gpu_state_gb)} | {bold(_fmt(r.disk_gb))} | {_fmt(r.scratch_gb)} | {r.kind} |"
        )
    lines += ["", "Measurements used:", ""]
    lines += [f"- {text}" for text in sorted(bases.values())]
    lines += ["", "Basis per rule (its most expensive job):", ""]
    lines += [f"- `{r.rule}`: {r.basis}" for r in rules if r.basis]
    return "\n".join(lines) + "\n"


def as_json(name: str, rules: list[RuleTotal], bases: Mapping[str, str]) -> dict[str, Any]:
    from dataclasses import asdict

    return {"config": name, "rules": [asdict(r) for r in rules], "total": asdict(_total(rules)),
            "measurements": dict(bases), "formula": FORMULA, "uncertainty": UNCERTAINTY}
