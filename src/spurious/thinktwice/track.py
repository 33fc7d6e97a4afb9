"""Think Twice's names, declared once for the workflow: the heuristics, the debiasing methods and their training
stages, the run names the rules' wildcards match, and the training settings a QA model's predictions and logits read.

The Snakefile's wildcard constraints and the rules read these (``rules/thinktwice_functions.smk``); the config schema
lists the same names, and ``tests/thinktwice/test_track.py`` fails when the two differ. Importing this module
imports nothing heavy: the Snakefile does it on every start."""

from __future__ import annotations

from spurious.thinktwice.heuristics.catalog import HEURISTICS

#: The debiasing methods (paper §5): ReSam, LearnedMixin+H, Confidence Regularization.
DEBIAS_METHODS: tuple[str, ...] = ("resam", "lmix", "creg")
#: The methods with a bias scale (LMix's rescaled bias, CReg's teacher scaling): the scale search's candidates.
SCALED_METHODS: tuple[str, ...] = ("lmix", "creg")
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
