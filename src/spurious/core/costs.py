"""What every paper's cost estimates share (``spurious plan``; the formula is in ``spurious.workflow.plan``): the rows
of a configured split before anything is downloaded (:func:`split_rows`, from the published split sizes in
:data:`SPLIT_ROWS` and the files in :data:`FILE_ROWS`), QA windows (:func:`qa_windows`), a training job's steps
(:func:`steps_of`), the estimate of one job (:class:`JobCost`), and what an estimator may use of the planner
(:class:`Costing`).

Each paper package's ``costs`` module holds the estimators of its GPU rules (:data:`Estimator`: what a job of the rule
trains or runs, on how many rows, at which length), in a table by rule that the workflow's plan combines; the
measured step times, the cards and the planner that turns the work into seconds live in the workflow's plan.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

GPU_JOB_STARTUP_S = 60.0  # assumed: Python and imports, reading the data and the model onto the card
CPU_JOB_STARTUP_S = 10.0  # assumed: Python and imports
PREDICTION_ROW_BYTES = 100  # assumed
# QA windows of SQuAD v1.1 dev (10,570 questions, the MiniLM tokenizer, stride 128; 64 at max_length 128), measured
# with spurious.core.train.qa.training_features: windows per question and the mean window length (tokens) per
# max_length.
SQUAD_WINDOWS = {128: (2.5629, 118.0), 256: (1.1445, 172.6), 384: (1.0202, 176.0), 512: (1.0053, 176.4)}

# Rows of the hub splits the paper configs read (the datasets' cards, `dataset_info.splits.num_examples`; SNLI's
# counts without its unlabeled rows, which the loader drops), keyed by (name, config, split, subset).
SPLIT_ROWS: dict[tuple[str, str | None, str, str | None], int] = {
    ("rajpurkar/squad", None, "train", None): 87_599,
    ("rajpurkar/squad", None, "validation", None): 10_570,
    ("UCLNLP/adversarial_qa", "adversarialQA", "train", None): 30_000,
    ("UCLNLP/adversarial_qa", "adversarialQA", "validation", None): 3_000,
    ("mrqa-workshop/mrqa", None, "train", "NaturalQuestionsShort"): 104_071,
    ("mrqa-workshop/mrqa", None, "validation", "NaturalQuestionsShort"): 12_836,
    ("mrqa-workshop/mrqa", None, "train", "TriviaQA-web"): 61_688,
    ("mrqa-workshop/mrqa", None, "validation", "TriviaQA-web"): 7_785,
    ("stanfordnlp/snli", None, "train", None): 549_367,
    ("stanfordnlp/snli", None, "validation", None): 9_842,
    ("stanfordnlp/snli", None, "test", None): 9_824,
    ("nyu-mll/glue", "mnli", "train", None): 392_702,
    ("nyu-mll/glue", "mnli", "validation_matched", None): 9_815,
    ("nyu-mll/glue", "qnli", "train", None): 104_743,
    ("nyu-mll/glue", "qnli", "validation", None): 5_463,
    ("nyu-mll/glue", "qqp", "train", None): 363_846,
    ("nyu-mll/glue", "qqp", "validation", None): 40_430,
    ("nyu-mll/glue", "sst2", "train", None): 67_349,
    ("nyu-mll/glue", "sst2", "validation", None): 872,
    ("facebook/anli", None, "train_r1", None): 16_946,
    ("facebook/anli", None, "test_r1", None): 1_000,
    ("facebook/anli", None, "train_r2", None): 45_460,
    ("facebook/anli", None, "test_r2", None): 1_000,
    ("facebook/anli", None, "train_r3", None): 100_459,
    ("facebook/anli", None, "test_r3", None): 1_200,
    # the stress tests' dataset_infos.json
    ("pietrolesci/stress_tests_nli", None, "antonym", None): 1_561,
    ("pietrolesci/stress_tests_nli", None, "numerical_reasoning", None): 7_596,
    ("pietrolesci/stress_tests_nli", None, "word_overlap", None): 9_832,
    ("pietrolesci/stress_tests_nli", None, "negation", None): 9_832,
    ("pietrolesci/stress_tests_nli", None, "length_mismatch", None): 9_815,
    ("pietrolesci/stress_tests_nli", None, "spelling_error", None): 9_137,
}
# The files the paper configs read from the data mirror (counted from the files) or from a path (HANS's evaluation
# set and the GLUE diagnostics as their authors publish them; docs/hub-datasets.md)
FILE_ROWS = {
    "squad_v1.1/dev-v1.1.json.gz": 10_570,
    "qnli/validation/0000.parquet": 5_463,
    "sst2/train.tsv.gz": 67_349,
    "sst2/dev.tsv": 872,
    "data/hans/heuristics_evaluation_set.txt": 30_000,
    "data/glue_diagnostics/diagnostic-full.tsv": 1_104,
}
# QA windows per question: SQUAD_WINDOWS (measured on SQuAD v1.1 dev, by max_length); MRQA's contexts run to 800
# tokens, up to 3 windows (a bound, not measured).
MRQA_WINDOWS_PER_QUESTION = 3.0


@dataclass(frozen=True)
class Rows:
    """A row count and how it is known: 'known' (published or configured), 'estimate' or 'bound' (at most)."""

    n: float
    kind: str
    basis: str

    def scaled(self, factor: float, basis: str) -> Rows:
        return Rows(self.n * factor, self.kind, f"{self.basis}; {basis}")


def worst_kind(kinds: Iterable[str]) -> str:
    order = ("known", "estimate", "bound", "unknown")
    return max(kinds, key=order.index, default="known")


def split_rows(config: Mapping[str, Any], dataset: str, split: str) -> Rows:
    """The rows of a configured (dataset, split) before anything is downloaded."""
    ds = config["datasets"][dataset]
    subset = ds.get("subsets", {}).get(split)
    if subset:
        source = split_rows(config, dataset, subset["from"])
        n = min(subset["max_examples"], source.n)
        return Rows(n, source.kind if n == source.n else "known", f"{dataset}/{split}: a subset of {n:,.0f}")
    derive = ds.get("derive")
    if derive and split in ("train", "validation"):
        source = split_rows(config, dataset, derive["from"])
        share = derive.get("validation_fraction", 0.5)
        share = share if split == "validation" else 1 - share
        return Rows(source.n * share, worst_kind([source.kind, "estimate"]),
                    f"{dataset}/{split}: {share:.0%} of {derive['from']} ({source.n:,.0f})")
    spec = ds["splits"][split]
    for key in ("mirror_path", "path"):
        if spec.get(key) in FILE_ROWS:
            rows = FILE_ROWS[spec[key]]
            return Rows(rows, "known", f"{dataset}/{split}: {rows:,} rows ({spec[key]})")
    hub = spec.get("hub") or {}
    key = (hub.get("name"), hub.get("config"), hub.get("split"), hub.get("subset"))
    if key in SPLIT_ROWS:
        return Rows(SPLIT_ROWS[key], "known", f"{dataset}/{split}: {SPLIT_ROWS[key]:,} rows ({hub['name']} card)")
    return Rows(10_000, "unknown", f"{dataset}/{split}: size not known before download (counted as 10,000)")


def squad_windows(max_length: int) -> tuple[float, float]:
    """(windows per question, mean window length) of SQuAD at ``max_length``: the measurement at the nearest measured
    max_length at or below it for the windows (more windows), at or above it for the length (longer), each capped."""
    lengths = sorted(SQUAD_WINDOWS)
    below = max([m for m in lengths if m <= max_length], default=lengths[0])
    above = min([m for m in lengths if m >= max_length], default=lengths[-1])
    return SQUAD_WINDOWS[below][0], min(float(max_length), SQUAD_WINDOWS[above][1])


def is_mrqa(config: Mapping[str, Any], dataset: str, split: str) -> bool:
    hub = (config["datasets"][dataset]["splits"].get(split) or {}).get("hub") or {}
    return bool(hub.get("subset"))


def qa_windows(config: Mapping[str, Any], dataset: str, split: str, max_length: int = 384) -> Rows:
    rows = split_rows(config, dataset, split)
    if is_mrqa(config, dataset, split):
        return Rows(rows.n * MRQA_WINDOWS_PER_QUESTION, worst_kind([rows.kind, "bound"]),
                    f"{rows.basis} × {MRQA_WINDOWS_PER_QUESTION:g} windows (MRQA, a bound)")
    per_question = squad_windows(max_length)[0]
    return rows.scaled(per_question, f"× {per_question:g} windows at max_length {max_length} (measured on SQuAD dev)")


@dataclass
class JobCost:
    """The estimate of one planned job."""

    rule: str
    gpus: int = 0
    threads: int = 1
    mem_mb: int = 0
    gpu_s: float = 0.0  # seconds of the job's GPUs together (GPU-seconds)
    cpu_s: float = 0.0  # CPU-seconds of a CPU job
    disk_bytes: float = 0.0  # kept outputs
    scratch_bytes: float = 0.0  # checkpoints while it runs
    gpu_state_bytes: float = 0.0
    model: tuple[Mapping[str, Any], str] | None = None  # the model's config entry and where it is
    kinds: set[str] = field(default_factory=set)
    basis: list[str] = field(default_factory=list)
    # wall seconds of the job's parts ("start-up", "steps", "evaluations", "checkpoints", "first-seen shapes",
    # "forward"), each once however many GPUs the job has
    parts: dict[str, float] = field(default_factory=dict)

    def add(self, part: str, wall_s: float) -> None:
        """Wall seconds of a part: GPU-seconds = wall × the job's GPUs (each waits for the others); on a CPU job
        CPU-seconds (its parts are counted in CPU-seconds already, the start-up × its threads)."""
        self.parts[part] = self.parts.get(part, 0.0) + wall_s
        if self.gpus:
            self.gpu_s += wall_s * self.gpus
        else:
            self.cpu_s += wall_s

    def loop_s(self) -> float:
        """The training loop's wall seconds (what the engine reports as ``train_wall_time_s``)."""
        return sum(self.parts.get(p, 0.0) for p in ("steps", "evaluations", "checkpoints", "first-seen shapes"))


def steps_of(settings: Mapping[str, Any], rows: Rows) -> tuple[float, str, str]:
    """(steps, kind, basis) of a training job."""
    per_step = settings.get("batch_size", 16) * settings.get("gradient_accumulation_steps", 1)
    if settings.get("max_steps"):
        capped = settings.get("early_stopping_patience") is not None and settings.get("eval_every") is not None
        kind = "bound" if capped else "known"
        return settings["max_steps"], kind, f"max_steps {settings['max_steps']:,}" + (
            " (a cap: early stopping may end it sooner)" if capped else "")
    epochs = settings.get("epochs", 1)
    steps = epochs * math.ceil(rows.n / per_step)
    kind = worst_kind([rows.kind, "bound" if settings.get("early_stopping_patience") else "known"])
    return steps, kind, f"{epochs:g} epochs × ceil({rows.n:,.0f} / {per_step}) ({rows.basis})"


def padding_multiple(settings: Mapping[str, Any], cpu: bool) -> int:
    """``pad_to_multiple_of``: auto = 64 on a GPU, exact widths (1) on a CPU (spurious.core.train.training)."""
    setting = settings.get("pad_to_multiple_of", "auto")
    return (1 if cpu else 64) if setting in (None, "auto") else int(setting)


def settings_of(params: Mapping[str, Any]) -> dict[str, Any]:
    """A job's training or prediction settings (its rule's ``settings`` param)."""
    return dict(params.get("settings") or {})


def evaluations(settings: Mapping[str, Any], steps: float) -> float:
    """Evaluations of a run: at every multiple of eval_every and after the last step (once for both)."""
    every = settings.get("eval_every")
    return math.ceil(steps / every) if isinstance(every, int) and every else 1


class Costing(Protocol):
    """What an estimator uses of the plan's planner: the config, the card's factor (its seconds per second on the
    H200, for work timed here rather than by :meth:`train` or :meth:`forward`), the measurements the output names, and
    the costing of a model's training and forward passes."""

    config: Mapping[str, Any]
    factor: float
    model_bases: dict[str, str]

    def model(self, cost: JobCost) -> Any:
        """The size of the job's model (the workflow's ``ModelSize``: ``parameters``, ...), its measurement noted."""

    def train(self, cost: JobCost, size: Any, settings: Mapping[str, Any], rows: Rows, eval_rows: float = 0.0,
              evals: float = 0.0, max_length: int | None = None, mean_length: float | None = None,
              questions: float = 0.0) -> None:
        """A training job: start-up, steps, evaluations, checkpoints and first-seen batch shapes."""

    def forward(self, cost: JobCost, size: Any, rows: Rows, length: int, what: str, questions: float = 0.0) -> None:
        """``rows`` of ``length`` tokens through the model, and the start-up."""

    def hidden_width(self, checkpoint: str) -> int | None:
        """The width of a checkpoint's representations, where its architecture is known offline."""


#: ``estimate(planner, cost, wildcards, params)``: adds a GPU rule's job's seconds, rows' kinds and basis to ``cost``.
Estimator = Callable[[Costing, JobCost, Mapping[str, str], Mapping[str, Any]], None]
