"""Think Twice's names are declared once (``spurious.thinktwice.track``): the config schema lists the same heuristics
and methods, the Snakefile's wildcards and the rules use the declared ones, and the wildcard patterns match exactly
the run names the rules build."""

from __future__ import annotations

import re

import pytest
import yaml

from spurious.core.config import ConfigError
from spurious.thinktwice import track
from spurious.thinktwice.heuristics import HEURISTICS
from spurious.workflow.config import DECLARED_NAMES, load_schema, validate_config
from tests.conftest import REPO
from tests.track_checks import loaded_by_import, schema_enums


def test_the_schema_lists_the_declared_heuristics_and_methods() -> None:
    raw = (REPO / "schemas" / "config.schema.yaml").read_text()
    assert "enum: [word-dist" not in raw and "enum: [plain" not in raw and "enum: [lmix" not in raw
    enums = schema_enums(load_schema())
    heuristic_enums = [e for e in enums if "word-dist" in e]
    method_enums = [e for e in enums if "lmix" in e]
    assert len(heuristic_enums) == 5 and all(e == list(HEURISTICS) for e in heuristic_enums), heuristic_enums
    assert method_enums == [[track.CONTROL, *track.DEBIAS_METHODS], list(track.SCALED_METHODS)]
    assert set(track.STAGE_OF_METHOD) == {track.CONTROL, *track.DEBIAS_METHODS, track.BIAS_MODEL}


def test_a_name_the_papers_declare_reaches_the_schema(monkeypatch) -> None:
    monkeypatch.setitem(DECLARED_NAMES, "heuristics", (*HEURISTICS, "toy-heuristic"))
    config = yaml.safe_load((REPO / "config.yaml").read_text())
    config["heuristics"]["names"] = [*HEURISTICS, "toy-heuristics"]
    with pytest.raises(ConfigError, match="toy-heuristics"):
        validate_config(config)
    config["heuristics"]["names"] = [*HEURISTICS, "toy-heuristic"]
    assert validate_config(config)["heuristics"]["names"][-1] == "toy-heuristic"


def test_the_snakefile_and_rules_spell_no_method_or_heuristic_list_of_their_own() -> None:
    texts = {p.name: p.read_text() for p in [REPO / "Snakefile", *sorted((REPO / "rules").glob("*.smk"))]}
    for name, text in texts.items():
        assert "resam|lmix" not in text and "lmix|creg" not in text and '"resam", "lmix"' not in text, name
        assert "word-dist|sim-word" not in text and "annotator[0-2]" not in text, name
    assert "run=RUN_WILDCARD" in texts["Snakefile"] and "heuristic=HEURISTIC_WILDCARD" in texts["Snakefile"]


def test_the_run_wildcard_matches_every_run_name_and_nothing_else() -> None:
    run = re.compile(rf"(?:{track.RUN_WILDCARD})\Z")
    good = ["minilm/seed0", "bert_base_cased/plain/seed2", "minilm/lmix/word-dist/seed0",
            "roberta_large/biasmodel/ans-len/seed1", "human/annotator2"]  # fmt: skip
    bad = ["minilm/seed", "minilm/other/word-dist/seed0", "minilm/plain/word-dist/seed0", "human/annotator3",
           "MiniLM/seed0", "minilm/lmix/seed0"]  # fmt: skip
    assert [bool(run.match(r)) for r in good] == [True] * len(good)
    assert [bool(run.match(r)) for r in bad] == [False] * len(bad)
    assert re.fullmatch(track.METHOD_WILDCARD, "creg") and not re.fullmatch(track.METHOD_WILDCARD, "plain")
    assert all(re.fullmatch(track.HEURISTIC_WILDCARD, h) for h in HEURISTICS)


def test_importing_the_track_loads_no_model_library() -> None:
    """The Snakefile imports it at every start; the methods' builders import torch and the losses when they run."""
    assert loaded_by_import('spurious.thinktwice.track', ('torch', 'transformers', 'spacy', 'sklearn', 'nltk')) == []
