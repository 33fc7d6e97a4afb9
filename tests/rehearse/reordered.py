"""A config written differently with the same content: every mapping in reverse key order, every string in double
quotes, every float in exponent notation with 17 significant digits. A workflow that compares its params by content
plans nothing new for it (tests/core/test_rerun.py; the rehearsal's last dry run, tests/rehearse/run.py)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml


def merged(configfiles: Iterable[str | Path]) -> dict[str, Any]:
    """The config Snakemake makes of ``--configfile A B ...``: each file deep-merged over the ones before it."""
    from snakemake.utils import update_config

    config: dict[str, Any] = {}
    for path in configfiles:
        update_config(config, yaml.safe_load(Path(path).read_text()) or {})
    return config


def reversed_mappings(value: Any) -> Any:
    """``value`` with the keys of every mapping in it in reverse order (lists keep theirs: their order means
    something)."""
    if isinstance(value, Mapping):
        return {k: reversed_mappings(value[k]) for k in reversed(list(value))}
    if isinstance(value, list):
        return [reversed_mappings(v) for v in value]
    return value


class _Dumper(yaml.SafeDumper):
    pass


def _string(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style='"')


def _float(dumper: yaml.SafeDumper, value: float) -> yaml.Node:
    if not math.isfinite(value):
        return yaml.SafeDumper.represent_float(dumper, value)
    return dumper.represent_scalar("tag:yaml.org,2002:float", f"{value:.16e}")  # e.g. 2.0000000000000002e-05


_Dumper.add_representer(str, _string)
_Dumper.add_representer(float, _float)


def reordered_text(config: Mapping[str, Any]) -> str:
    """``config`` as YAML with every mapping reversed, strings quoted and floats in exponent notation."""
    text = yaml.dump(reversed_mappings(config), Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=1000)
    if yaml.safe_load(text) != config:  # the same content, whatever the order and the spelling
        raise AssertionError("the reordered config does not load back to the same content")
    return text


def write_reordered(configfiles: Iterable[str | Path], path: str | Path) -> Path:
    """The merged config of ``configfiles``, reordered (:func:`reordered_text`), written to ``path``."""
    path = Path(path)
    path.write_text(reordered_text(merged(configfiles)))
    return path
