"""Stubborn Lexical Bias's names are declared once (``spurious.lexical.track``): the config schema lists the same
weightings, the Snakefile's wildcard uses the declared ones, and its pattern matches exactly the run names the rules
build."""

from __future__ import annotations

import re

import yaml

from spurious.lexical import track
from tests.conftest import REPO
from tests.track_checks import loaded_by_import, schema_enums


def test_the_schema_lists_the_declared_weightings() -> None:
    enums = schema_enums(yaml.safe_load((REPO / "schemas" / "config.schema.yaml").read_text()))
    assert [e for e in enums if "q" in e] == [list(track.WEIGHTINGS)]


def test_the_snakefile_and_rules_spell_no_weighting_list_of_their_own() -> None:
    texts = {p.name: p.read_text() for p in [REPO / "Snakefile", *sorted((REPO / "rules").glob("*.smk"))]}
    for name, text in texts.items():
        assert "uniform|q" not in text and '"uniform", "q"' not in text, name
    assert "weighting=WEIGHTING_WILDCARD" in texts["Snakefile"]


def test_the_weighting_wildcard_matches_every_weighting_and_nothing_else() -> None:
    # lexical_runs: '<dataset>/<model>/<weighting>/seed<seed>'
    names = [*track.WEIGHTINGS, "Q", "uniformq", "uniform|q", "", "label_distribution"]
    assert [bool(re.fullmatch(f"(?:{track.WEIGHTING_WILDCARD})", n)) for n in names] == [True] * 2 + [False] * 5


def test_importing_the_track_imports_nothing_heavy() -> None:
    assert loaded_by_import('spurious.lexical.track', ('torch', 'pandas', 'numpy', 'sklearn')) == []
