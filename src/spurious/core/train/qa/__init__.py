"""Extractive QA: featurisation, fine-tuning with resumable checkpoints, and span prediction.

Mirrors the Hugging Face ``run_qa.py`` recipe that the paper used (App. B.1; the authors'
``evaluate_model_on_dataset``, MIR-MU/isbiased):

* Featurisation: question (left-stripped) + context, ``only_second`` truncation with ``max_length``/``stride`` sliding
  windows, offset mappings; a window's start/end labels are the (inclusive) token indices of the first gold answer, or
  the CLS index when the answer is not wholly inside the window.
* Post-processing: the ``n_best`` highest start and end logits of every window, spans of at most
  ``max_answer_length`` tokens lying in the context, score = start + end logit, best over all windows of a question;
  an empty string when no valid span exists.
* Training: the engine ``spurious.core.train.engine`` (Accelerate; AdamW + linear schedule, gradient clipping at 1.0 as
  the HF
  ``Trainer`` defaults; exact resumption after preemption, a data order that is a function of the seed, N processes with
  the configured global batch). The validation loss is evaluated every ``eval_every`` steps, early stopping counts
  evaluations without improvement, and the checkpoint with the lowest validation loss is the one saved.
* Debiasing hooks of ``train_qa``: a training objective replacing the QA loss (LearnedMixin, confidence regularisation;
  it reads per-feature bias/teacher logits that ``infer_feature_logits`` stores, ``spurious.core.train.logits``), a
  custom checkpoint selection (the biased-minus-unbiased F1 gap for bias models, ``segment_gap_selection``), and
  validation-loss curves on extra (e.g. out-of-distribution) frames.

The QA loss is computed here, not by the model: cross-entropy of start and end positions averaged, with padding
positions masked out. HF heads use the same formula but leave padding in the softmax, which would make the loss depend
on how a batch happens to be padded; masking makes dynamic padding (much faster on CPU) exact.
"""

from spurious.core.train.qa.features import (
    QAFeatures,
    best_span,
    featurize,
    postprocess_predictions,
    training_features,
)
from spurious.core.train.qa.finetune import (
    INIT_MODES,
    TRAINABLE,
    ObjectiveFactory,
    SelectionFn,
    segment_gap_selection,
    select_eval_subset,
    train_qa,
)
from spurious.core.train.qa.inference import (
    infer_feature_logits,
    predict_logits,
    predict_qa,
    predict_with_model,
    qa_loss,
    validation_loss,
)
from spurious.core.train.qa.settings import (
    DEFAULT_SETTINGS,
    EVAL_SUBSET_SEED,
    KINDS,
    LogFn,
    resolve_settings,
)

# spurious.core.train.training names that callers reach through this module (the loop's state files, preemption, order)
from spurious.core.train.training import (
    TRAINING_STATE_FILE,
    TrainingPreempted,
    epoch_order,
    latest_checkpoint,
    pick_device,
    use_bf16,
)

__all__ = [
    "TRAINING_STATE_FILE",
    "TrainingPreempted",
    "epoch_order",
    "latest_checkpoint",
    "pick_device",
    "use_bf16",
    "DEFAULT_SETTINGS",
    "EVAL_SUBSET_SEED",
    "INIT_MODES",
    "KINDS",
    "LogFn",
    "ObjectiveFactory",
    "QAFeatures",
    "SelectionFn",
    "TRAINABLE",
    "best_span",
    "featurize",
    "infer_feature_logits",
    "postprocess_predictions",
    "predict_logits",
    "predict_qa",
    "predict_with_model",
    "qa_loss",
    "resolve_settings",
    "segment_gap_selection",
    "select_eval_subset",
    "train_qa",
    "training_features",
    "validation_loss",
]
