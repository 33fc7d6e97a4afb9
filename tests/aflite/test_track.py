"""AFLite's names are declared once (``spurious.aflite.track``): the config schema lists the same training sets, the
rules use the declared names and wildcards, and the wildcard patterns match exactly the run names the rules build."""

from __future__ import annotations

import re

import yaml

from spurious.aflite import report, text, track
from tests.conftest import REPO
from tests.track_checks import loaded_by_import, schema_enums


def _matches(pattern: str, names: list[str]) -> list[bool]:
    return [bool(re.fullmatch(f"(?:{pattern})", name)) for name in names]


def test_the_schema_and_the_report_use_the_declared_training_sets() -> None:
    enums = schema_enums(yaml.safe_load((REPO / "schemas" / "config.schema.yaml").read_text()))
    assert [e for e in enums if "aflite" in e] == [list(track.TRAIN_SETS)]
    assert track.TRAIN_SETS == ("full", "random", "aflite") and track.INPUTS == ("full", "partial")
    assert report.TRAIN_SETS is track.TRAIN_SETS and report.INPUTS is track.INPUTS
    assert text.TRAINING_SETS is track.TRAIN_SETS


def test_the_rules_spell_no_training_set_input_or_variant_pattern_of_their_own() -> None:
    texts = {p.name: p.read_text() for p in [REPO / "Snakefile", *sorted((REPO / "rules").glob("*.smk"))]}
    for name, text_ in texts.items():
        assert "full|random" not in text_ and "random|aflite" not in text_ and "full|partial" not in text_, name
        assert '["full"]' not in text_ and '"partial"]' not in text_, name
        assert r"0\.\d+" not in text_ and "_[a-z0-9_]+" not in text_, name
    rules = texts["aflite.smk"]
    for wildcard in ("TRAIN_SET_WILDCARD", "OWN_TRAIN_SET_WILDCARD", "INPUTS_WILDCARD", "SEPARATION_WILDCARD",
                     "VARIANT_WILDCARD", "FILTERS_VARIANT_WILDCARD"):  # fmt: skip
        assert f"={wildcard}," in rules, wildcard
    assert "from spurious.aflite.track import" in texts["aflite_functions.smk"]


def test_the_train_set_wildcards_match_every_train_set_name_and_nothing_else() -> None:
    # aflite_train_set_id: D is "full" for every filter; a filters.<name> set's D_rand and D(AFLite) are
    # random_<name> and aflite_<name>
    good = ["full", "random", "aflite", "random_n182k", "aflite_n182k", "aflite_small_2"]
    bad = ["full_n182k", "random_", "aflite-n182k", "Random", "other", "randomaflite", "full|random"]
    assert _matches(track.TRAIN_SET_WILDCARD, good) == [True] * len(good)
    assert _matches(track.TRAIN_SET_WILDCARD, bad) == [False] * len(bad)
    assert _matches(track.OWN_TRAIN_SET_WILDCARD, good) == [True, True, True, False, False, False]
    inputs = ["full", "partial", "hypothesis", "fullpartial"]
    assert _matches(track.INPUTS_WILDCARD, inputs) == [True, True, False, False]


def test_the_variant_and_separation_wildcards_match_the_folders_the_rules_build() -> None:
    # filter/ (the dataset's own filter, variant "") and filter_<name>/ (a filters.<name> set)
    assert _matches(track.VARIANT_WILDCARD, ["", "_n182k", "_a_b"]) == [True] * 3
    assert _matches(track.VARIANT_WILDCARD, ["n182k", "_", "_N182k", "-n182k"]) == [False] * 4
    assert _matches(track.FILTERS_VARIANT_WILDCARD, ["_n182k", ""]) == [True, False]
    # results/aflite/synthetic/sep<separation>/: the config's separations as Python writes them
    assert _matches(track.SEPARATION_WILDCARD, [str(s) for s in (0.8, 0.7, 0.6, 0.4, 0.25)]) == [True] * 5
    assert _matches(track.SEPARATION_WILDCARD, ["1.0", "0", "0.", ".5", "0.5x"]) == [False] * 5


def test_importing_the_track_imports_nothing_heavy() -> None:
    assert loaded_by_import('spurious.aflite.track', ('torch', 'pandas', 'numpy', 'sklearn')) == []
