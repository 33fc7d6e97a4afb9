"""What a SpuriousBench job costs (``spurious plan``): the estimators of its rules that train or run a model
(fine-tuning on a planted dataset, its predictions, in-context learning), by rule (:data:`ESTIMATORS`), on the shared
cost model of :mod:`spurious.core.costs`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from spurious.core.costs import (
    PREDICTION_ROW_BYTES,
    Costing,
    Estimator,
    JobCost,
    Rows,
    evaluations,
    settings_of,
    split_rows,
    steps_of,
)

ICL_TOKENS_PER_EXAMPLE = {"sst2": 32, "mnli": 64}  # assumed prompt tokens per demonstration or query


def _spurious_dataset(p: Costing, dataset: str) -> Mapping[str, Any]:
    return p.config["spuriousbench"]["datasets"][dataset]


def _spurious_test_rows(p: Costing, dataset: str) -> Rows:
    spec = _spurious_dataset(p, dataset)
    if spec.get("test_size"):
        return Rows(spec["test_size"], "known", f"test_size {spec['test_size']:,}")
    source = spec.get("source") or dataset
    return Rows(split_rows(p.config, source, spec["test"]).n, "bound", f"at most the {spec['test']} split")


def _est_spurious(p: Costing, cost: JobCost, w: Mapping[str, str], params: Mapping[str, Any]) -> None:
    size = p.model(cost)
    spec = _spurious_dataset(p, w["dataset"])
    settings = settings_of(params)
    dev = Rows(spec["dev_size"], "known", f"dev_size {spec['dev_size']:,}")
    if cost.rule == "spurious_train":
        rows = Rows(spec["train_size"], "known", f"train_size {spec['train_size']:,}")
        steps, _, _ = steps_of(settings, rows)
        evals = settings.get("epochs", 1) if settings.get("eval_every") == "epoch" else evaluations(settings, steps)
        p.train(cost, size, settings, rows, eval_rows=dev.n, evals=evals)
    elif cost.rule == "spurious_predict":
        test = _spurious_test_rows(p, w["dataset"])
        rows = Rows(test.n + dev.n, test.kind, f"{test.basis} and {dev.basis}")
        p.forward(cost, size, rows, settings.get("max_length", 128), "test and dev sets")
        cost.disk_bytes += rows.n * PREDICTION_ROW_BYTES
    else:  # spurious_icl: every test and dev row after its demonstrations
        icl = p.config["spuriousbench"]["models"][w["model"]]["icl"]
        test = _spurious_test_rows(p, w["dataset"])
        per_example = ICL_TOKENS_PER_EXAMPLE[spec["builder"]]
        length = (icl["shots"] + 1) * per_example
        rows = Rows(test.n + dev.n, test.kind, f"{test.basis} and {dev.basis}")
        p.forward(cost, size, rows, length, f"{icl['shots']} shots + the query, {per_example} tokens each (assumed)")
        cost.gpu_state_bytes = 2 * (size.parameters or 0)  # bf16 weights
        cost.disk_bytes += rows.n * PREDICTION_ROW_BYTES


ESTIMATORS: dict[str, Estimator] = dict.fromkeys(("spurious_train", "spurious_predict", "spurious_icl"), _est_spurious)
