"""The check of the config's ``spuriousbench`` section, registered with :mod:`spurious.core.registry` by the
package's ``__init__`` and run by ``spurious.workflow.config.validate_config`` after the schema."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from spurious.core.config import classification_dataset_problems


def config_problems(cfg: dict[str, Any], task: Mapping[str, str]) -> list[str]:
    """Datasets and splits exist, features belong to the builder's Table 1 subset; fills in the paper's sizes and
    the builder's features where the config leaves them out."""
    bench = cfg.get("spuriousbench")
    if not bench:
        return []
    from spurious.spuriousbench import construction as sb  # pandas: imported only when a config has the section

    problems = []
    subsets = {"sst2": sb.SST2_FEATURES, "mnli": sb.MNLI_FEATURES}
    for name, spec in bench["datasets"].items():
        key = f"spuriousbench.datasets.{name}"
        builder = spec["builder"]
        spec.setdefault("train_size", sb.PAPER_SIZES[builder]["train"])
        spec.setdefault("dev_size", sb.PAPER_SIZES[builder]["dev"])
        spec.setdefault("features", list(subsets[builder]))
        source = spec.get("source") or name
        problems += classification_dataset_problems(cfg, task, key, source, spec, ("train", "test"), "SpuriousBench")
        unknown_models = [m for m in spec.get("models") or [] if m not in bench["models"]]
        if unknown_models:
            problems.append(
                f"config key '{key}.models': {unknown_models} are not spuriousbench.models; declared: "
                f"{sorted(bench['models'])}"
            )
        if source not in task:
            continue
        for size in ("train_size", "dev_size", "test_size"):
            if spec[size] is not None and spec[size] % 2:
                problems.append(f"config key '{key}.{size}': must be even (labels are balanced), got {spec[size]}")
        if spec["train_features"] is None:
            spec["train_features"] = list(spec["features"])
        not_built = [f for f in spec["train_features"] if f not in spec["features"]]
        if not_built:
            problems.append(f"config key '{key}.train_features': {not_built} are not in {key}.features (not built)")
        unknown = [f for f in spec["features"] if f not in subsets[builder]]
        if unknown:
            problems.append(
                f"config key '{key}.features': {unknown} are not in Table 1's {builder} subset; known: "
                f"{', '.join(subsets[builder])}"
            )
    return problems
