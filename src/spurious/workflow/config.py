"""Loading and validating a config: the JSON schema (with defaults filled in), then the cross-references between
its sections and the papers' own checks (registered with :mod:`spurious.core.registry`)."""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from spurious.core import registry
from spurious.core.config import DERIVED_SPLITS, ConfigError, available_splits, classification_dataset_problems
from spurious.thinktwice import track
from spurious.thinktwice.config import method_training as method_training  # its home; imported from here too

SCHEMA_PATH = Path(__file__).resolve().parents[3] / "schemas" / "config.schema.yaml"
#: The name lists the papers declare, by the schema's ``x-names`` key: a node ``{x-names: <list>}`` becomes
#: ``{enum: [...]}`` when the schema is loaded, so adding a heuristic or a method needs no schema edit.
DECLARED_NAMES: dict[str, tuple[str, ...]] = {
    "heuristics": track.HEURISTICS,
    "debias_methods": (track.CONTROL, *track.DEBIAS_METHODS),
    "scaled_methods": track.SCALED_METHODS,
}


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
    if error.validator == "oneOf" and error.context:
        # "null or an object": report why the object failed, not that no alternative matched
        real = [e for e in error.context if e.validator != "type" or e.validator_value != "null"]
        if real:
            return _describe(jsonschema.exceptions.best_match(real))
    key = _key_path(error)
    if error.validator == "enum":
        return f"config key '{key}': {error.instance!r} is not allowed; allowed: {error.validator_value}"
    if error.validator == "additionalProperties":
        return f"config key '{key}': {error.message}; allowed keys: {sorted(error.schema.get('properties', {}))}"
    return f"config key '{key}': {error.message}"


def load_config_file(path: str | os.PathLike) -> dict[str, Any]:
    """A config file (YAML, or JSON), as Snakemake reads it; a file YAML cannot parse is an InputError naming the
    file, the line and the column where the parser stopped, and what it expected (Snakemake's own message names
    none of them)."""
    from spurious.core.errors import InputError

    try:
        with open(path, encoding="utf-8") as fh:
            config = yaml.safe_load(fh)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "an unknown place"
        what = " ".join(str(part) for part in (exc.problem, exc.context) if part)
        started = exc.context_mark if exc.context_mark is not None and exc.problem_mark is not None else None
        since = f" that starts at line {started.line + 1}, column {started.column + 1}" if started else ""
        raise InputError(
            f"{path}: not valid YAML at {where} ({what}{since}); check the indentation there (the keys of one mapping "
            "in one column, spaces, not tabs) and that every key is followed by a colon"
        ) from None
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: not valid YAML ({' '.join(str(exc).split())}); write the config as YAML") from None
    if not isinstance(config, dict):
        raise InputError(
            f"{path}: a config is a mapping of keys (run_name, datasets, ...), got {type(config).__name__}"
        )
    return config


def load_schema(path: str | os.PathLike | None = None) -> dict[str, Any]:
    """The config schema, its ``x-names`` nodes filled in from :data:`DECLARED_NAMES`."""
    # libyaml's parser where PyYAML has it (the same safe constructor): the schema is parsed by every Snakemake
    # invocation and by `spurious plan`: the pure-Python parser takes about 0.16 s over it, libyaml 0.02 s
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    with open(path or SCHEMA_PATH) as fh:
        return _fill_declared_names(yaml.load(fh, Loader=loader))


def _fill_declared_names(node: Any) -> Any:
    if isinstance(node, dict):
        filled = {key: _fill_declared_names(value) for key, value in node.items()}
        if "x-names" in filled:
            filled["enum"] = list(DECLARED_NAMES[filled.pop("x-names")])
        return filled
    if isinstance(node, list):
        return [_fill_declared_names(value) for value in node]
    return node


def validate_config(config: Mapping[str, Any], schema_path: str | os.PathLike | None = None) -> dict[str, Any]:
    """Return a validated copy of ``config`` with schema defaults filled in.

    Raises ConfigError naming the offending key (all errors, most specific first). The papers' own sections are
    checked by the functions they registered (:mod:`spurious.core.registry`; SpuriousBench's fills in defaults too):
    after the schema and the cross-references, the ``before_tasks`` checks, each reported on its own (Think Twice's
    ``debias``), then the datasets' task checks with the ``with_tasks`` checks (AFLite's, SpuriousBench's) in one
    report.
    """
    cfg = copy.deepcopy(dict(config))
    schema = load_schema(schema_path)
    validator = _DefaultFillingValidator(schema)
    errors = sorted(validator.iter_errors(cfg), key=lambda e: (-len(e.absolute_path), _key_path(e)))
    if errors:
        raise ConfigError("invalid configuration:\n  " + "\n  ".join(_describe(e) for e in errors))
    _check_references(cfg)
    task = {name: ds["task"] for name, ds in cfg["datasets"].items()}
    for check in registry.config_checks("before_tasks").values():
        _raise(check(cfg, task, schema))
    _check_tasks(cfg, task, schema)
    return cfg


def _raise(problems: list[str]) -> None:
    if problems:
        raise ConfigError("invalid configuration:\n  " + "\n  ".join(problems))


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
            clash += sorted(set(DERIVED_SPLITS) & set(ds.get("subsets", {})))
            if clash:
                problems.append(
                    f"config key 'datasets.{name}.splits': {clash} would clash with the derived splits; rename them "
                    "or remove 'derive'"
                )

    for name, ds in cfg["datasets"].items():
        for sub, spec in ds.get("subsets", {}).items():
            if sub in ds["splits"]:
                problems.append(f"config key 'datasets.{name}.subsets.{sub}': a split of that name is declared too")
            if spec["from"] in ds.get("subsets", {}) or spec["from"] not in available_splits(cfg, name):
                problems.append(
                    f"config key 'datasets.{name}.subsets.{sub}.from': {spec['from']!r} is not a split of {name!r} "
                    "(subsets are drawn from declared or derived splits)"
                )

    def check_ref(ref: Mapping[str, Any] | None, key: str) -> None:
        if not ref:
            return
        if ref["dataset"] not in cfg["datasets"]:
            problems.append(
                f"config key '{key}.dataset': unknown dataset {ref['dataset']!r}; declared: {sorted(cfg['datasets'])}"
            )
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
    figure4 = cfg.get("figure4")
    if figure4:
        check_ref({"dataset": figure4["dataset"], "split": figure4["split"]}, "figure4")
        reference = figure4["reference"]
        for key, name in [("figure4.reference.model", reference["model"])] + [
            (f"figure4.models.{i}", name) for i, name in enumerate(figure4["models"])
        ]:
            if name not in cfg["models"]:
                problems.append(f"config key '{key}': unknown model {name!r}; declared: {sorted(cfg['models'])}")
        if reference["model"] in cfg["models"] and reference["seed"] not in cfg["models"][reference["model"]]["seeds"]:
            problems.append(
                f"config key 'figure4.reference.seed': model {reference['model']!r} is not trained with that seed"
            )
        if reference["model"] in figure4["models"]:
            problems.append("config key 'figure4.models': the reference model is the figure's first row, not listed")
        source = figure4["thresholds_from"]
        searched = reference if source == "reference" else source if isinstance(source, Mapping) else None
        if searched is not None:
            # a run's own threshold search on figure4's split: the run must be searched there (an evaluated split)
            if source is not reference and searched["model"] not in cfg["models"]:
                problems.append(f"config key 'figure4.thresholds_from.model': unknown model {searched['model']!r}")
            elif source is not reference and searched["seed"] not in cfg["models"][searched["model"]]["seeds"]:
                problems.append(
                    f"config key 'figure4.thresholds_from.seed': model {searched['model']!r} is not trained with "
                    "that seed"
                )
            if searched["model"] in figure4["models"]:
                problems.append(
                    "config key 'figure4.thresholds_from': figure4.models are only measured at fixed thresholds, they "
                    "have no threshold search"
                )
            where = (figure4["dataset"], figure4["split"])
            if where not in {(e["dataset"], e["split"]) for e in cfg["evaluate"]}:
                problems.append(
                    f"config key 'figure4.thresholds_from': the thresholds come from a threshold search on "
                    f"{where[0]}/{where[1]}, which is not an evaluated split (evaluate)"
                )
    if cfg.get("debias"):
        check_ref(cfg["debias"].get("train"), "debias.train")
        check_ref(cfg["debias"].get("threshold_from"), "debias.threshold_from")
    for i, seg in enumerate(cfg["segments"]):
        check_ref(seg, f"segments.{i}")
        if seg["model"] not in cfg["models"]:
            problems.append(f"config key 'segments.{i}.model': unknown model {seg['model']!r}")
        elif seg.get("seed", 0) not in cfg["models"][seg["model"]]["seeds"]:
            problems.append(f"config key 'segments.{i}.seed': model {seg['model']!r} is not trained with that seed")
        if seg["heuristic"] not in cfg["heuristics"]["names"]:
            problems.append(f"config key 'segments.{i}.heuristic': {seg['heuristic']!r} is not in heuristics.names")
        tsplit = seg.get("threshold_split") or seg["split"]
        if seg["dataset"] in cfg["datasets"] and tsplit not in available_splits(cfg, seg["dataset"]):
            problems.append(
                f"config key 'segments.{i}.threshold_split': dataset {seg['dataset']!r} has no split {tsplit!r}"
            )
        if {"dataset": seg["dataset"], "split": tsplit} not in cfg["evaluate"]:
            problems.append(f"config key 'segments.{i}': {seg['dataset']}/{seg['split']} is not an evaluated split")
    _raise(problems)


def _check_tasks(cfg: dict[str, Any], task: Mapping[str, str], schema: Mapping[str, Any]) -> None:
    """QA parts name QA datasets, the lexical track names classification datasets, derivations fit the task; then the
    papers' ``with_tasks`` checks, whose problems are reported with these."""
    problems = []
    if not (cfg["models"] or cfg.get("lexical") or cfg.get("aflite") or cfg.get("spuriousbench") or cfg.get("audit")):
        problems.append(
            "config: nothing to run; declare QA models (models, evaluate), the lexical track (lexical), aflite, "
            "spuriousbench or audit"
        )
    for name, spec in (cfg.get("audit") or {}).items():
        for key in ("data", "train", "tfidf_reference"):
            ref = spec.get(key)
            if not ref:
                continue
            wanted = "qa" if spec["task"] == "qa" else "classification"
            if key == "train" and spec["task"] == "qa" or key == "tfidf_reference" and spec["task"] != "qa":
                problems.append(f"config key 'audit.{name}.{key}': not used by a {spec['task']} audit; remove it")
            elif task.get(ref["dataset"]) != wanted:
                problems.append(
                    f"config key 'audit.{name}.{key}': {ref['dataset']!r} is not a declared {wanted} dataset"
                )
            elif ref["split"] not in available_splits(cfg, ref["dataset"]):
                problems.append(
                    f"config key 'audit.{name}.{key}': dataset {ref['dataset']!r} has no split {ref['split']!r}"
                )
    for name, ds in cfg["datasets"].items():
        derive = ds.get("derive")
        allowed = ("title",) if ds["task"] == "qa" else ("random", "text_a", "squad_article")
        if derive and derive["by"] not in allowed:
            problems.append(
                f"config key 'datasets.{name}.derive.by': {ds['task']} datasets derive splits by "
                + " or ".join(repr(a) for a in allowed)
            )
        if derive and (derive["by"] == "squad_article") != ("squad" in derive):
            problems.append(
                f"config key 'datasets.{name}.derive.squad': give it with by: squad_article (the SQuAD split the "
                "QNLI questions come from), and only then"
            )
        if derive and derive.get("squad_pairs") and derive["by"] != "squad_article":
            problems.append(f"config key 'datasets.{name}.derive.squad_pairs': needs by: squad_article")
        ref = (derive or {}).get("squad")
        if ref and task.get(ref["dataset"]) != "qa":
            problems.append(
                f"config key 'datasets.{name}.derive.squad.dataset': {ref['dataset']!r} is not a declared QA dataset"
            )
        elif ref and ref["split"] not in available_splits(cfg, ref["dataset"]):
            problems.append(
                f"config key 'datasets.{name}.derive.squad.split': {ref['dataset']!r} has no split {ref['split']!r}"
            )
    qa_refs = [(f"models.{m}.{k}", spec[k]) for m, spec in cfg["models"].items() for k in ("train", "validation")]
    qa_refs += [(f"evaluate.{i}", ref) for i, ref in enumerate(cfg["evaluate"])]
    qa_refs += [("human", cfg.get("human")), ("heuristics.tfidf_reference", cfg["heuristics"].get("tfidf_reference"))]
    for key, ref in qa_refs:
        if ref and task.get(ref["dataset"]) not in (None, "qa"):
            problems.append(
                f"config key '{key}': dataset {ref['dataset']!r} is a {task[ref['dataset']]} dataset, not QA"
            )
    lexical = cfg.get("lexical")
    for name, spec in (lexical or {}).get("datasets", {}).items():
        problems += classification_dataset_problems(
            cfg, task, f"lexical.datasets.{name}", name, spec, ("train", "test"), "the lexical track"
        )
    for check in registry.config_checks("with_tasks").values():  # the papers' sections (AFLite's, SpuriousBench's)
        problems += check(cfg, task, schema)
    text = (cfg.get("aflite") or {}).get("text")
    # only SpuriousBench's training passes a dev set to select the best checkpoint on
    trainings = [(f"lexical.models.{m}", spec) for m, spec in ((lexical or {}).get("models") or {}).items()]
    trainings += [(f"aflite.text.models.{m}", spec) for m, spec in ((text or {}).get("models") or {}).items()]
    if text:
        trainings.append(("aflite.text.representation.warmup", text["representation"]["warmup"]))
    for key, spec in trainings:
        if spec["training"].get("eval_every") is not None:
            problems.append(f"config key '{key}.training.eval_every': this stage has no dev set to select on; use null")
    _raise(problems)
