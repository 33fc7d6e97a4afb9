"""The check of the config's ``aflite`` section (the text track's datasets, filters and OOD sets), registered with
:mod:`spurious.core.registry` by the package's ``__init__`` and run by ``spurious.workflow.config.validate_config``
with the datasets' task checks."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from spurious.core.config import available_splits, classification_dataset_problems


def config_problems(cfg: dict[str, Any], task: Mapping[str, str], schema: Mapping[str, Any]) -> list[str]:
    """``aflite.text``'s datasets (:func:`dataset_problems`), then its OOD sets (:func:`ood_problems`)."""
    return dataset_problems(cfg, task) + ood_problems(cfg, task)


def dataset_problems(cfg: Mapping[str, Any], task: Mapping[str, str]) -> list[str]:
    """aflite.text.datasets: each is a declared classification dataset with distinct train and dev splits, has its
    features files when the representation is read from files, and each filter keeps Algorithm 1's t < n."""
    text = (cfg.get("aflite") or {}).get("text")
    problems = []
    for name, spec in (text or {}).get("datasets", {}).items():
        key = f"aflite.text.datasets.{name}"
        problems += classification_dataset_problems(
            cfg, task, key, name, spec, ("train", "dev"), "the AFLite text track"
        )
        if name not in task:
            continue
        if spec["train"] == spec["dev"]:
            problems.append(f"config key '{key}': train and dev are the same split {spec['train']!r}")
        if text["representation"]["source"] == "file" and not spec.get("features"):
            problems.append(f"config key '{key}.features': representation.source is file, so give the features files")
        n = spec["filter"].get("n")
        if n is not None and n <= spec["filter"]["t"]:
            problems.append(f"config key '{key}.filter.n': Algorithm 1 needs t < n, got t={spec['filter']['t']}, n={n}")
        for variant, overrides in (spec.get("filters") or {}).items():  # further filtered sets: keys over filter
            merged = {**spec["filter"], **overrides}
            if merged.get("n") is not None and merged["n"] <= merged["t"]:
                problems.append(
                    f"config key '{key}.filters.{variant}.n': Algorithm 1 needs t < n, got t={merged['t']}, "
                    f"n={merged['n']}"
                )
    return problems


def ood_problems(cfg: Mapping[str, Any], task: Mapping[str, str]) -> list[str]:
    """aflite.text.ood: each set names a declared classification dataset and its splits, and an AFLite dataset."""
    text = (cfg.get("aflite") or {}).get("text") or {}
    problems = []
    for name, spec in (text.get("ood") or {}).items():
        key = f"aflite.text.ood.{name}"
        source = text["datasets"].get(spec["models_from"])
        if source is None:
            problems.append(f"config key '{key}.models_from': {spec['models_from']!r} is not in aflite.text.datasets")
        elif spec.get("models_filter") and spec["models_filter"] not in (source.get("filters") or {}):
            problems.append(
                f"config key '{key}.models_filter': {spec['models_filter']!r} is not in "
                f"aflite.text.datasets.{spec['models_from']}.filters"
            )
        dataset = spec["dataset"]
        if dataset not in task:
            problems.append(f"config key '{key}.dataset': unknown dataset {dataset!r}; declared: {sorted(task)}")
            continue
        if task[dataset] != "classification":
            problems.append(f"config key '{key}.dataset': {dataset!r} is a {task[dataset]} dataset, not classification")
        have = available_splits(cfg, dataset)
        wanted = [("splits", s) for s in spec["splits"]] + [
            ("finetune.split", (spec.get("finetune") or {}).get("split"))
        ]
        for where, split in wanted:
            if split is not None and split not in have:
                problems.append(
                    f"config key '{key}.{where}': dataset {dataset!r} has no split {split!r}; it has {sorted(have)}"
                )
        if spec.get("finetune") and spec["finetune"]["split"] in spec["splits"]:
            problems.append(f"config key '{key}.finetune.split': the fine-tuning split is also evaluated")
    return problems
