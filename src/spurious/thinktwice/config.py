"""The check of the config's ``debias`` section and its stages' training settings: registered with
:mod:`spurious.core.registry` by the package's ``__init__`` (stage ``before_tasks``: its problems are reported on
their own, before the datasets' task checks) and run by ``spurious.workflow.config.validate_config`` after the schema
and the cross-references; :func:`method_training` is what the rules read too (``rules/thinktwice_functions.smk``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jsonschema

from spurious.core.config import available_splits
from spurious.thinktwice import track


def method_training(cfg: Mapping[str, Any], stage: str) -> dict[str, Any]:
    """The training settings of a debiasing stage (plain, resam, lmix, creg, bias_model): the original model's
    settings, then ``debias.training``, then ``debias.<stage>.training`` (plain, the matched control, has none)."""
    debias = cfg["debias"]
    base = dict(cfg["models"][debias["model"]]["training"])
    return {**base, **debias.get("training", {}), **debias.get(stage, {}).get("training", {})}


def config_problems(cfg: dict[str, Any], task: Mapping[str, str], schema: Mapping[str, Any]) -> list[str]:
    """The debiased model, its seed, heuristics, training data and threshold source are the original model's and
    exist; no dataset declares the reserved split ``fixed``; the plain control trains as the methods do; the scale
    search names a searched heuristic and configured methods; each stage's merged training settings keep the original
    model's featurisation and pass the schema's ``training`` definition. An unknown ``debias.model`` is the only
    problem reported (the rest reads that model)."""
    debias = cfg.get("debias")
    if not debias:
        return []
    model = debias["model"]
    if model not in cfg["models"]:
        return [f"config key 'debias.model': unknown model {model!r}; declared: {sorted(cfg['models'])}"]
    problems = []
    if debias["original_seed"] not in cfg["models"][model]["seeds"]:
        problems.append(
            f"config key 'debias.original_seed': model {model!r} is not trained with seed {debias['original_seed']}"
        )
    unknown = sorted(set(debias["heuristics"]) - set(cfg["heuristics"]["names"]))
    if unknown:
        problems.append(f"config key 'debias.heuristics': {unknown} are not in heuristics.names")
    train = debias["train"] or cfg["models"][model]["train"]
    source = debias["threshold_from"] or cfg["models"][model]["validation"]
    if train["dataset"] != source["dataset"]:
        problems.append(
            f"config key 'debias.threshold_from': thresholds are per dataset, so they must come from the training "
            f"dataset {train['dataset']!r}, not {source['dataset']!r}"
        )
    for key, ref in (("train", train), ("threshold_from", source)):
        if ref["split"] not in available_splits(cfg, ref["dataset"]):
            problems.append(f"config key 'debias.{key}': dataset {ref['dataset']!r} has no split {ref['split']!r}")
    for name in cfg["datasets"]:
        if "fixed" in available_splits(cfg, name):
            problems.append(
                f"config key 'datasets.{name}': the split name 'fixed' is reserved (debias.fixed_thresholds)"
            )
    training_schema = {"$defs": schema["$defs"], **schema["$defs"]["training"]}
    base = cfg["models"][model]["training"]
    if "plain" in debias["methods"]:
        # the control matches the methods only if they train with the same settings (debias.training is shared)
        for stage in track.DEBIAS_METHODS:
            own = debias.get(stage, {}).get("training") or {}
            if stage in debias["methods"] and own:
                problems.append(
                    f"config key 'debias.{stage}.training': {sorted(own)} would make the plain control differ from "
                    f"{stage} in more than the method; put shared settings under debias.training, or drop plain from "
                    "debias.methods"
                )
    search = debias.get("scale_search")
    if search:
        if search["heuristic"] not in cfg["heuristics"]["names"]:
            problems.append(
                f"config key 'debias.scale_search.heuristic': {search['heuristic']!r} is not in heuristics.names "
                "(its threshold comes from the original model's bias search)"
            )
        absent = [m for m in search["methods"] if m not in debias["methods"]]
        if absent:
            problems.append(f"config key 'debias.scale_search.methods': {absent} are not in debias.methods")
    for stage in track.STAGE_OF_METHOD.values():
        merged = method_training(cfg, stage)
        for key in ("max_length", "stride"):
            if merged[key] != base[key]:
                problems.append(
                    f"config key 'debias.{stage}.training.{key}' (or debias.training.{key}): the debiased models share "
                    f"the original model's featurisation ({key}={base[key]}); bias and teacher logits are stored per "
                    "window"
                )
        for error in jsonschema.Draft202012Validator(training_schema).iter_errors(merged):
            where = ".".join(str(p) for p in error.absolute_path) or "(top level)"
            problems.append(f"config key 'debias.{stage}.training.{where}': {error.message}")
    return problems
