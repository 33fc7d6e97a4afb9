"""What a Think Twice job costs (``spurious plan``): the estimators of the QA rules that train or run a model (the
QA models, the bias models and the debiased runs, their predictions and logits), by rule (:data:`ESTIMATORS`), on the
shared cost model of :mod:`spurious.core.costs`."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from spurious.core.costs import (
    PREDICTION_ROW_BYTES,
    Costing,
    Estimator,
    JobCost,
    Rows,
    evaluations,
    is_mrqa,
    padding_multiple,
    qa_windows,
    settings_of,
    split_rows,
    squad_windows,
    steps_of,
    worst_kind,
)


def _qa_model_splits(p: Costing, name: str) -> tuple[dict[str, str], dict[str, str]]:
    model = p.config["models"][name]
    return model["train"], model["validation"]


def _est_qa_train(p: Costing, cost: JobCost, w: Mapping[str, str], params: Mapping[str, Any]) -> None:
    """train, train_plain, train_debiased, scale_search_train, train_bias_model: QA fine-tuning with validation-loss
    evaluations (a debiased run's rows are its training split's, which bounds any segment or resampled set)."""
    size = p.model(cost)
    settings = settings_of(params)
    train, validation = _qa_model_splits(p, w["model"])
    debias = p.config.get("debias") or {}
    if cost.rule != "train" and debias.get("train"):
        train = debias["train"]
    length = settings.get("max_length", 384)
    rows = qa_windows(p.config, train["dataset"], train["split"], length)
    if cost.rule != "train":
        rows = Rows(rows.n, worst_kind([rows.kind, "bound"]), f"at most {rows.basis}")
    steps, _, _ = steps_of(settings, rows)
    val = qa_windows(p.config, validation["dataset"], validation["split"], length)
    val_questions = split_rows(p.config, validation["dataset"], validation["split"]).n
    eval_questions = min(val_questions, settings.get("eval_max_examples") or math.inf)
    eval_rows = val.n * eval_questions / val_questions  # the validation windows of the questions evaluated
    if cost.rule == "train_bias_model":
        selection = (debias.get("bias_model") or {}).get("selection_max_examples")
        eval_rows += 2 * min(val.n, selection or val.n)
    mrqa = is_mrqa(p.config, train["dataset"], train["split"])
    questions = split_rows(p.config, train["dataset"], train["split"]).n + eval_questions
    p.train(cost, size, settings, rows, eval_rows=eval_rows, evals=evaluations(settings, steps), max_length=length,
            mean_length=None if mrqa else squad_windows(length)[1], questions=questions)


def _est_qa_forward(p: Costing, cost: JobCost, w: Mapping[str, str], params: Mapping[str, Any]) -> None:
    """predict, feature_logits, scale_search_score: every window of a split through the model."""
    size = p.model(cost)
    settings = settings_of(params)
    length = settings.get("max_length", 384)
    dataset, split = (w.get("dataset"), w.get("split"))
    if cost.rule == "scale_search_score":
        _, validation = _qa_model_splits(p, w["model"])
        dataset, split = validation["dataset"], validation["split"]
    rows = qa_windows(p.config, dataset, split, length)
    questions = split_rows(p.config, dataset, split).n
    limit = params.get("max_examples") if cost.rule == "scale_search_score" else None
    if limit:
        per_question = squad_windows(length)[0]
        rows = Rows(min(rows.n, limit * per_question), rows.kind, f"{rows.basis}, at most {limit:,}")
        questions = min(questions, limit)
    # prediction batches are sorted by length: as wide as their windows (SQuAD's mean; MRQA's unknown: max_length)
    width = length if is_mrqa(p.config, dataset, split) else squad_windows(length)[1]
    if cost.gpus:
        width = min(length, width + (padding_multiple(settings, False) - 1) / 2)
    p.forward(cost, size, rows, round(width), cost.rule, questions=questions)
    if cost.rule == "feature_logits":
        cost.disk_bytes += rows.n * length * 2 * 4  # start and end logits, float32
    else:
        cost.disk_bytes += rows.n * PREDICTION_ROW_BYTES


ESTIMATORS: dict[str, Estimator] = {
    **dict.fromkeys(("train", "train_plain", "train_debiased", "scale_search_train", "train_bias_model"),
                    _est_qa_train),
    **dict.fromkeys(("predict", "feature_logits", "scale_search_score"), _est_qa_forward),
}
