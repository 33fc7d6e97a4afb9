"""What a Stubborn Lexical Bias job costs (``spurious plan``): the estimators of its rules that train or run a model
(the BiLSTM and transformer classifiers and their test predictions), by rule (:data:`ESTIMATORS`), on the shared cost
model of :mod:`spurious.core.costs`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from spurious.core.costs import PREDICTION_ROW_BYTES, Costing, Estimator, JobCost, Rows, settings_of, split_rows


def _lexical_split(p: Costing, dataset: str, key: str) -> Rows:
    return split_rows(p.config, dataset, p.config["lexical"]["datasets"][dataset][key])


def _est_lexical_train(p: Costing, cost: JobCost, w: Mapping[str, str], params: Mapping[str, Any]) -> None:
    size = p.model(cost)
    settings = settings_of(params)
    rows = _lexical_split(p, w["dataset"], "train")
    p.train(cost, size, settings, rows, max_length=settings.get("max_length", settings.get("max_tokens", 128)))


def _est_lexical_predict(p: Costing, cost: JobCost, w: Mapping[str, str], params: Mapping[str, Any]) -> None:
    size = p.model(cost)
    rows = _lexical_split(p, w["dataset"], "test")
    p.forward(cost, size, rows, settings_of(params).get("max_length", 128), "test split")
    cost.disk_bytes += rows.n * PREDICTION_ROW_BYTES


ESTIMATORS: dict[str, Estimator] = {"lexical_train": _est_lexical_train, "lexical_predict": _est_lexical_predict}
