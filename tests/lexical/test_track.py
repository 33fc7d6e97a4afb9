"""Stubborn Lexical Bias's names are declared once (``spurious.lexical.track``): the config schema lists the same
weightings, the Snakefile's wildcard uses the declared ones, and its pattern matches exactly the run names the rules
build."""

from __future__ import annotations

import re
import subprocess
import sys
from typing import Any

import yaml

from spurious.lexical import track
from tests.conftest import REPO


def _enums(node: Any) -> list[list[Any]]:
    if isinstance(node, dict):
        found = [node["enum"]] if isinstance(node.get("enum"), list) else []
        return found + [e for value in node.values() for e in _enums(value)]
    if isinstance(node, list):
        return [e for value in node for e in _enums(value)]
    return []


def test_the_schema_lists_the_declared_weightings() -> None:
    enums = _enums(yaml.safe_load((REPO / "schemas" / "config.schema.yaml").read_text()))
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
    code = (
        "import sys\nimport spurious.lexical.track\n"
        "print(sorted(m for m in ('torch', 'pandas', 'numpy', 'sklearn') if m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
