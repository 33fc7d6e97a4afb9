"""SpuriousBench's names are declared once (``spurious.spuriousbench.track``): the config schema lists the same
methods and feature names, the feature inventory and the report take theirs from it, the Snakefile's wildcards use
the declared ones, and the wildcard patterns match exactly the run names the rules build."""

from __future__ import annotations

import re
from typing import Any

import yaml

from spurious.spuriousbench import construction, report, track
from tests.conftest import REPO
from tests.track_checks import loaded_by_import


def _schema_nodes(node: Any, key: str) -> list[Any]:
    """Every value of ``key`` anywhere in the schema."""
    if isinstance(node, dict):
        found = [node[key]] if key in node else []
        return found + [e for value in node.values() for e in _schema_nodes(value, key)]
    if isinstance(node, list):
        return [e for value in node for e in _schema_nodes(value, key)]
    return []


def _matches(pattern: str, names: list[str]) -> list[bool]:
    return [bool(re.fullmatch(f"(?:{pattern})", name)) for name in names]


def test_the_schema_lists_the_declared_methods_and_feature_names() -> None:
    schema = yaml.safe_load((REPO / "schemas" / "config.schema.yaml").read_text())
    enums = [e for e in _schema_nodes(schema, "enum") if isinstance(e, list)]
    assert [e for e in enums if "bitfit" in e] == [list(track.METHODS)]
    # the datasets' features and train_features: the only patterns of the spuriousbench section
    patterns = _schema_nodes(schema["properties"]["spuriousbench"], "pattern")
    assert patterns == [f"^{track.FEATURE_NAME_PATTERN}$"] * 2


def test_the_inventory_and_the_report_use_the_declared_names() -> None:
    assert construction.CATEGORIES is track.CATEGORIES and report.METHODS is track.METHODS
    assert {spec.category for spec in construction.FEATURES.values()} == set(track.CATEGORIES)


def test_the_snakefile_and_rules_spell_no_category_or_method_list_of_their_own() -> None:
    texts = {p.name: p.read_text() for p in [REPO / "Snakefile", *sorted((REPO / "rules").glob("*.smk"))]}
    for name, text in texts.items():
        assert "punctuation|adverb" not in text and "finetune|balanced" not in text, name
        assert '"finetune", "balanced"' not in text, name
    snakefile = texts["Snakefile"]
    assert "category=CATEGORY_WILDCARD" in snakefile and "sb_method=SB_METHOD_WILDCARD" in snakefile
    assert "fvalue=FEATURE_VALUE_WILDCARD" in snakefile


def test_the_wildcards_match_every_feature_and_method_and_nothing_else() -> None:
    # the rules' paths: results/spurious/<dataset>/.../<category>/<fvalue>/<model>/<sb_method>/seed<s>
    parts = [construction.feature_path(name).split("/") for name in construction.FEATURES]
    assert all(re.fullmatch(track.FEATURE_NAME_PATTERN, name) for name in construction.FEATURES)
    assert _matches(track.CATEGORY_WILDCARD, [c for c, _ in parts]) == [True] * len(parts)
    assert _matches(track.FEATURE_VALUE_WILDCARD, [v for _, v in parts]) == [True] * len(parts)
    assert _matches(track.CATEGORY_WILDCARD, ["Punctuation", "verb", "punctuation/exclamation", ""]) == [False] * 4
    assert _matches(track.FEATURE_VALUE_WILDCARD, ["a/b", "A", "", "x-y"]) == [False] * 4
    # in-context learning's runs (.../<model>/icl/seed<s>) belong to the spurious_icl rule alone
    methods = [*track.FINETUNING_METHODS, track.ICL, "Finetune", "finetune_x"]
    assert _matches(track.SB_METHOD_WILDCARD, methods) == [True] * 4 + [False] * 3


def test_importing_the_track_imports_nothing_heavy() -> None:
    assert loaded_by_import('spurious.spuriousbench.track', ('torch', 'pandas', 'numpy', 'spacy')) == []
