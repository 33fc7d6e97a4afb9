"""Think Twice's names, declared once for the workflow: the heuristics, the debiasing methods (what each reads, how it
trains) and their training stages, the run names the rules' wildcards match, and the training settings a QA model's
predictions and logits read.

The Snakefile's wildcard constraints and the rules read these (``rules/thinktwice_functions.smk``), the training adapter
builds each method's data and objective from its :class:`DebiasMethod` entry, and the config schema's lists of names
are filled from them (``spurious.workflow.config.DECLARED_NAMES``). The Snakefile imports this module on every
start: it imports numpy and pandas (through the heuristics catalog; Snakemake has them loaded already) but no model
library, so the methods' builders import what they use when they run.

Adding a debiasing method is one :data:`METHODS` entry (its name, the inputs it reads, whether it has a bias scale,
its objective or training data builder) plus the functions it names; its options are ``debias.<name>`` in the config.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from spurious.thinktwice.heuristics.catalog import HEURISTICS

#: What a method's training job can read besides the validation split: ``train`` (the training split),
#: ``segments`` (the heuristic's biased and unbiased segments of it, as ``train_biased`` and ``train_unbiased``),
#: ``bias_logits`` (the bias model's logits of every training window), ``teacher_logits`` (the original model's).
METHOD_INPUTS: tuple[str, ...] = ("train", "segments", "bias_logits", "teacher_logits")


@dataclass(frozen=True)
class MethodRun:
    """What a method's builders read: the training job's input files (named as in :data:`METHOD_INPUTS`), the
    method's options (its config section without ``training``; ``scale`` resolved), the run's seed, the model's
    checkpoint and ``debias.mask_non_context``."""

    inputs: Any
    options: Mapping[str, Any]
    seed: int
    checkpoint: str
    mask_non_context: bool


@dataclass(frozen=True)
class DebiasMethod:
    """One debiasing method: its name (the config's and the run folders'), its label in the tables, the inputs it
    reads (:data:`METHOD_INPUTS`), whether it has a bias scale (the scale search's candidates), and its builders:
    ``training_data(run) -> (frame, record)`` (default: the training split as it is; ``record`` goes into
    training.json), ``objective(run, features)`` (default: the standard QA loss) and ``summary(training summary)``
    (entries added to training.json)."""

    name: str
    label: str
    reads: tuple[str, ...] = ("train",)
    scaled: bool = False
    training_data: Callable[[MethodRun], tuple[Any, dict[str, Any]]] | None = None
    objective: Callable[[MethodRun, Any], Any] | None = None
    summary: Callable[[Mapping[str, Any]], dict[str, Any]] | None = None


def _resampled_segments(run: MethodRun) -> tuple[Any, dict[str, Any]]:
    """ReSam: the biased and unbiased segments resampled to the configured policy and ratio."""
    from spurious.core.data import squad
    from spurious.thinktwice import debias

    frame, resampling = debias.resample_segments(
        squad.read_qa_parquet(run.inputs["train_biased"]),
        squad.read_qa_parquet(run.inputs["train_unbiased"]),
        policy=run.options["policy"],
        ratio=run.options["ratio"],
        seed=run.seed,
    )
    return frame, {"resampling": resampling}


def window_logits(run: MethodRun, features: Any, name: str) -> Any:
    """The stored logits ``name`` of exactly these training windows; a mismatch fails loudly. train_qa records the
    configured checkpoint name, max_length and stride on the features, so they make the fingerprint."""
    from spurious.core.train import logits

    return logits.load_feature_logits(run.inputs[name], logits.features_fingerprint(features))


def _learned_mixin(run: MethodRun, features: Any) -> Any:
    from spurious.core.models import load_config
    from spurious.thinktwice import debias

    options = run.options
    return debias.LearnedMixinObjective(
        window_logits(run, features, "bias_logits"),
        hidden_size=load_config(run.checkpoint).hidden_size,
        entropy_weight=options["entropy_weight"],
        scale=options["scale"],
        compat=options["compat"],
        mask_non_context=run.mask_non_context,
        entropy_on=options["entropy_on"],
        gate_input=options["gate_input"],
    )


def _gate(summary: Mapping[str, Any]) -> dict[str, Any]:
    from spurious.thinktwice import debias

    return {"gate": debias.gate_summary(summary["train_losses"])}


def _confidence_regularization(run: MethodRun, features: Any) -> Any:
    from spurious.thinktwice import debias

    return debias.ConfidenceRegularizationObjective(
        window_logits(run, features, "bias_logits"),
        window_logits(run, features, "teacher_logits"),
        scale=run.options["scale"],
        compat=run.options["compat"],
        mask_non_context=run.mask_non_context,
    )


#: The debiasing methods (paper §5): ReSam, LearnedMixin+H, Confidence Regularization.
METHODS: tuple[DebiasMethod, ...] = (
    DebiasMethod("resam", "ReSam", reads=("segments",), training_data=_resampled_segments),
    DebiasMethod("lmix", "LMix", reads=("train", "bias_logits"), scaled=True, objective=_learned_mixin, summary=_gate),
    DebiasMethod("creg", "CReg", reads=("train", "bias_logits", "teacher_logits"), scaled=True,
                 objective=_confidence_regularization),
)
METHOD_OF: dict[str, DebiasMethod] = {method.name: method for method in METHODS}
DEBIAS_METHODS: tuple[str, ...] = tuple(METHOD_OF)
#: The methods with a bias scale (LMix's rescaled bias, CReg's teacher scaling): the scale search's candidates.
SCALED_METHODS: tuple[str, ...] = tuple(method.name for method in METHODS if method.scaled)
#: The matched control of the debiased runs: standard fine-tuning on their data, budget, initialisation and seeds.
CONTROL = "plain"
#: The run folder of a bias model (``<model>/biasmodel/<heuristic>/seed<s>``).
BIAS_MODEL = "biasmodel"
#: The training stage (``debias.<stage>.training``) of each run kind below the original model.
STAGE_OF_METHOD: dict[str, str] = {CONTROL: "plain", **{m: m for m in DEBIAS_METHODS}, BIAS_MODEL: "bias_model"}
#: The three human annotators of SQuAD's validation answers.
HUMAN_ANNOTATORS: tuple[int, ...] = (0, 1, 2)


def alternatives(names: tuple[str, ...] | list[str]) -> str:
    """A wildcard regex matching exactly one of ``names`` (names are lower case, digits, ``-`` and ``_``)."""
    return "|".join(names)


#: A wildcard ``heuristic``: one of the seven heuristics.
HEURISTIC_WILDCARD = alternatives(HEURISTICS)
#: A run of a trained model: original (``<model>/seed<s>``), the control (``<model>/plain/seed<s>``), debiased or
#: bias model (``<model>/<method>/<heuristic>/seed<s>``).
MODEL_RUN = rf"[a-z0-9_]+/(({alternatives((*DEBIAS_METHODS, BIAS_MODEL))})/[a-z-]+/|{CONTROL}/)?seed\d+"
#: A wildcard ``run``: a trained model's run or a human annotator.
RUN_WILDCARD = rf"{MODEL_RUN}|human/annotator[{HUMAN_ANNOTATORS[0]}-{HUMAN_ANNOTATORS[-1]}]"
#: A wildcard ``method``: one of the debiasing methods.
METHOD_WILDCARD = alternatives(DEBIAS_METHODS)
#: A wildcard ``method`` of the scale search's rules: a method with a bias scale.
SCALED_METHOD_WILDCARD = alternatives(SCALED_METHODS)

#: The training settings a QA model's predictions read (the predict rules' params, compared by content).
QA_PREDICTION_KEYS: tuple[str, ...] = (
    "max_length",
    "stride",
    "eval_batch_size",
    "device",
    "bf16",
    "n_best",
    "max_answer_length",
    "pad_to_multiple_of",
    "attention",
    "compile",
)
#: The training settings a QA model's stored logits read (teacher and bias logits).
QA_LOGIT_KEYS: tuple[str, ...] = (
    "max_length",
    "stride",
    "eval_batch_size",
    "device",
    "bf16",
    "pad_to_multiple_of",
    "attention",
    "compile",
)
