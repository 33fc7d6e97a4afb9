"""What an AFLite job costs (``spurious plan``): the estimators of its rules that train or run a model (the warm-up,
the representations, the filter's iterations, the classifiers on the filtered sets, the out-of-distribution runs), by
rule (:data:`ESTIMATORS`), on the shared cost model of :mod:`spurious.core.costs`."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from spurious.core.costs import (
    GPU_JOB_STARTUP_S,
    Costing,
    Estimator,
    JobCost,
    Rows,
    settings_of,
    split_rows,
    worst_kind,
)

# One iteration of Algorithm 1 at n 100k, d 384, m 64, t 10k on the H200 (h200-2026-11-26/bench_aflite.json)
AFLITE_ITERATION_S = 0.11049867599999175


def _aflite_dataset(p: Costing, dataset: str) -> Mapping[str, Any]:
    return p.config["aflite"]["text"]["datasets"][dataset]


def _aflite_pool(p: Costing, dataset: str) -> Rows:
    spec = _aflite_dataset(p, dataset)
    train = split_rows(p.config, dataset, spec["train"])
    rep = p.config["aflite"]["text"]["representation"]
    if rep["source"] != "warmup":
        return train
    share = 1 - rep["warmup"]["fraction"]
    return train.scaled(share, f"less the {rep['warmup']['fraction']:.0%} warm-up")


def _aflite_train_set(p: Costing, dataset: str, train_set: str) -> Rows:
    """D (the pool), or a filtered set's size: n where the filter sets it, else at most the pool."""
    pool = _aflite_pool(p, dataset)
    if train_set == "full":
        return pool
    variant = train_set.split("_", 1)[1] if "_" in train_set else ""
    spec = _aflite_dataset(p, dataset)
    settings = dict(spec["filter"], **(spec.get("filters", {}).get(variant) or {}))
    if settings.get("n"):
        return Rows(min(settings["n"], pool.n), "known", f"{dataset} filtered to n = {settings['n']:,}")
    return Rows(pool.n, "bound", f"{dataset} filtered by tau: at most the pool ({pool.basis})")


def _est_aflite(p: Costing, cost: JobCost, w: Mapping[str, str], params: Mapping[str, Any]) -> None:
    size = p.model(cost)
    settings = settings_of(params)
    rule = cost.rule
    if rule == "aflite_warmup":
        spec = _aflite_dataset(p, w["dataset"])
        fraction = p.config["aflite"]["text"]["representation"]["warmup"]["fraction"]
        rows = split_rows(p.config, w["dataset"], spec["train"]).scaled(fraction, f"the {fraction:.0%} warm-up")
        p.train(cost, size, settings, rows)
    elif rule == "aflite_embed":
        rep = params.get("representation") or {}
        spec = _aflite_dataset(p, w["dataset"])
        pool, dev = _aflite_pool(p, w["dataset"]), split_rows(p.config, w["dataset"], spec["dev"])
        rows = Rows(pool.n + dev.n, worst_kind([pool.kind, dev.kind]), f"{pool.basis}, and {dev.basis}")
        p.forward(cost, size, rows, rep.get("max_length", 128), "pool and dev set")
        cost.disk_bytes += rows.n * _hidden(p, rep.get("checkpoint", "")) * 4
    elif rule == "aflite_train_classifier":
        p.train(cost, size, settings, _aflite_train_set(p, w["dataset"], w["train_set"]))
    elif rule == "aflite_predict":
        rows = split_rows(p.config, w["dataset"], _aflite_dataset(p, w["dataset"])["dev"])
        p.forward(cost, size, rows, settings.get("max_length", 128), "dev set")
    elif rule == "aflite_ood_finetune":
        ood = p.config["aflite"]["text"]["ood"][w["ood"]]
        rows = split_rows(p.config, ood["dataset"], ood["finetune"]["split"])
        p.train(cost, size, settings, rows)
    elif rule == "aflite_ood_predict":
        ood = p.config["aflite"]["text"]["ood"][w["ood"]]
        rows = split_rows(p.config, ood["dataset"], w["split"])
        p.forward(cost, size, rows, settings.get("max_length", 128), f"{w['ood']}/{w['split']}")


def _est_aflite_filter(p: Costing, cost: JobCost, w: Mapping[str, str], params: Mapping[str, Any]) -> None:
    """Algorithm 1: per iteration m logistic regressions; scaled from bench_aflite on the H200."""
    spec = _aflite_dataset(p, w["dataset"])
    settings = dict(spec["filter"], **(spec.get("filters", {}).get(w["variant"].removeprefix("_")) or {}))
    pool = _aflite_pool(p, w["dataset"])
    target = settings.get("n") or 0
    iterations = math.ceil(max(pool.n - target, 0) / settings["k"])
    hidden = _hidden(p, p.config["aflite"]["text"]["representation"].get("checkpoint", ""))
    per_iteration = (AFLITE_ITERATION_S * pool.n / 100_000 * hidden / 384 * settings.get("m", 64) / 64
                     * settings["t"] / 10_000)
    cost.add("start-up", GPU_JOB_STARTUP_S)
    cost.add("forward", iterations * per_iteration * p.factor)
    cost.kinds.add("bound")
    cost.basis.append(f"at most {iterations} iterations × {per_iteration:.1f} s (bench_aflite on the H200: 0.11 s an "
                      f"iteration at n 100k, d 384, m 64, t 10k; scaled by n × d × m × t)")
    p.model_bases["bench_aflite"] = "AFLite iteration: 0.11 s at n 100k, d 384, m 64, t 10k, NVIDIA H200 " \
                                    "(h200-2026-11-26/bench_aflite.json)"


def _hidden(p: Costing, checkpoint: str) -> int:
    """The width of an encoder's representations (1024, RoBERTa-large's, where the checkpoint is not known)."""
    width = p.hidden_width(checkpoint)
    return width if width is not None else 1024


ESTIMATORS: dict[str, Estimator] = {
    **dict.fromkeys(("aflite_warmup", "aflite_embed", "aflite_train_classifier", "aflite_predict",
                     "aflite_ood_finetune", "aflite_ood_predict"), _est_aflite),
    "aflite_filter": _est_aflite_filter,
}
