"""Configuration validation: JSON schema (with defaults filled in) plus cross-references."""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jsonschema
import yaml

SCHEMA_PATH = Path(__file__).resolve().parents[2] / "schemas" / "config.schema.yaml"
DERIVED_SPLITS = ("train", "validation")


class ConfigError(ValueError):
    """The configuration is invalid; the message names the key and what is allowed."""


def _extend_with_default(validator_class):
    validate_properties = validator_class.VALIDATORS["properties"]

    def set_defaults(validator, properties, instance, schema):
        if isinstance(instance, dict):
            for prop, subschema in properties.items():
                if "default" in subschema and prop not in instance:
                    instance[prop] = copy.deepcopy(subschema["default"])
        yield from validate_properties(validator, properties, instance, schema)

    return jsonschema.validators.extend(validator_class, {"properties": set_defaults})


_DefaultFillingValidator = _extend_with_default(jsonschema.Draft202012Validator)


def _key_path(error: jsonschema.ValidationError) -> str:
    return ".".join(str(p) for p in error.absolute_path) or "(top level)"


def _describe(error: jsonschema.ValidationError) -> str:
    key = _key_path(error)
    if error.validator == "enum":
        return f"config key '{key}': {error.instance!r} is not allowed; allowed: {error.validator_value}"
    if error.validator == "additionalProperties":
        return f"config key '{key}': {error.message}; allowed keys: {sorted(error.schema.get('properties', {}))}"
    return f"config key '{key}': {error.message}"


def load_schema(path: str | os.PathLike | None = None) -> dict[str, Any]:
    with open(path or SCHEMA_PATH) as fh:
        return yaml.safe_load(fh)


def validate_config(config: Mapping[str, Any], schema_path: str | os.PathLike | None = None) -> dict[str, Any]:
    """Return a validated copy of ``config`` with schema defaults filled in.

    Raises ConfigError naming the offending key (all errors, most specific first)."""
    cfg = copy.deepcopy(dict(config))
    validator = _DefaultFillingValidator(load_schema(schema_path))
    errors = sorted(validator.iter_errors(cfg), key=lambda e: (-len(e.absolute_path), _key_path(e)))
    if errors:
        raise ConfigError("invalid configuration:\n  " + "\n  ".join(_describe(e) for e in errors))
    _check_references(cfg)
    return cfg


def available_splits(cfg: Mapping[str, Any], dataset: str) -> set[str]:
    ds = cfg["datasets"][dataset]
    names = set(ds["splits"])
    if ds.get("derive"):
        names |= set(DERIVED_SPLITS)
    return names


def _check_references(cfg: dict[str, Any]) -> None:
    problems = []
    for name, ds in cfg["datasets"].items():
        derive = ds.get("derive")
        if derive:
            if derive["from"] not in ds["splits"]:
                problems.append(
                    f"config key 'datasets.{name}.derive.from': split {derive['from']!r} is not one of "
                    f"datasets.{name}.splits {sorted(ds['splits'])}"
                )
            clash = sorted(set(DERIVED_SPLITS) & set(ds["splits"]))
            if clash:
                problems.append(
                    f"config key 'datasets.{name}.splits': {clash} would clash with the derived splits; rename them "
                    "or remove 'derive'"
                )

    def check_ref(ref: Mapping[str, Any] | None, key: str) -> None:
        if not ref:
            return
        if ref["dataset"] not in cfg["datasets"]:
            problems.append(f"config key '{key}.dataset': unknown dataset {ref['dataset']!r}; declared: {sorted(cfg['datasets'])}")
        elif ref["split"] not in available_splits(cfg, ref["dataset"]):
            problems.append(
                f"config key '{key}.split': dataset {ref['dataset']!r} has no split {ref['split']!r}; "
                f"available: {sorted(available_splits(cfg, ref['dataset']))}"
            )

    for name, model in cfg["models"].items():
        if name == "human":
            problems.append("config key 'models.human': the name 'human' is reserved for the annotators' Human row")
        check_ref(model["train"], f"models.{name}.train")
        check_ref(model["validation"], f"models.{name}.validation")
    for i, ref in enumerate(cfg["evaluate"]):
        check_ref(ref, f"evaluate.{i}")
    check_ref(cfg["heuristics"].get("tfidf_reference"), "heuristics.tfidf_reference")
    check_ref(cfg.get("human"), "human")
    for i, seg in enumerate(cfg["segments"]):
        check_ref(seg, f"segments.{i}")
        if seg["model"] not in cfg["models"]:
            problems.append(f"config key 'segments.{i}.model': unknown model {seg['model']!r}")
        elif seg.get("seed", 0) not in cfg["models"][seg["model"]]["seeds"]:
            problems.append(f"config key 'segments.{i}.seed': model {seg['model']!r} is not trained with that seed")
        if seg["heuristic"] not in cfg["heuristics"]["names"]:
            problems.append(f"config key 'segments.{i}.heuristic': {seg['heuristic']!r} is not in heuristics.names")
        if {"dataset": seg["dataset"], "split": seg["split"]} not in cfg["evaluate"]:
            problems.append(f"config key 'segments.{i}': {seg['dataset']}/{seg['split']} is not an evaluated split")
    if problems:
        raise ConfigError("invalid configuration:\n  " + "\n  ".join(problems))
