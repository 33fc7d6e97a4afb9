"""docs/config.md: generated from the config schema, current, complete and rendering as tables on GitHub."""

from __future__ import annotations

import re

import pytest

from spurious.workflow import config_docs
from spurious.workflow.config import load_schema

# An unescaped | splits a GitHub table cell, inside code spans too.
CELL_SPLIT = re.compile(r"(?<!\\)\|")


def _rows(page: str) -> dict[str, list[str]]:
    """key -> [type, default, description] of every table row (the key without its backticks)."""
    rows = {}
    for line in page.splitlines():
        if line.startswith("| `"):
            cells = [c.strip() for c in CELL_SPLIT.split(line)[1:-1]]
            assert len(cells) == 4, f"a row of docs/config.md splits into {len(cells)} cells, not 4: {line}"
            rows[cells[0].strip("`")] = cells[1:]
    return rows


def _property_names(node) -> set[str]:
    """Every key that appears under a `properties` anywhere in the schema (walked without the generator's code)."""
    names = set()
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "properties" and isinstance(value, dict):
                names |= set(value)
            names |= _property_names(value)
    elif isinstance(node, list):
        for value in node:
            names |= _property_names(value)
    return names


def test_config_md_is_current():
    assert config_docs.DOC_PATH.read_text() == config_docs.render(), (
        "docs/config.md is stale: regenerate it with `make config-docs` (python -m spurious.workflow.config_docs)"
    )


def test_every_schema_key_has_a_documented_row():
    rows = _rows(config_docs.render())
    documented = {path.rsplit(".", 1)[-1].removesuffix("[]") for path in rows}
    missing = _property_names(load_schema()) - documented
    assert not missing, f"schema keys without a row in docs/config.md: {sorted(missing)}"
    undescribed = [path for path, cells in rows.items() if not all(cells)]
    assert not undescribed, f"rows without a type, default or description (add one to the schema): {undescribed}"


def test_rows_as_read_off_the_schema():
    rows = _rows(config_docs.render())
    assert rows["bias.sample_size"][:2] == ["integer (≥ 1)", "`800`"]
    assert rows["datasets.<dataset>.splits.<split>.format"][1] == "required"
    assert rows["datasets.<dataset>.splits.<split>.hub.subset"][:2] == ["string or null", "`null`"]
    assert rows["aflite.text.datasets.<dataset>.filter.t"][1] == "required"
    assert rows["aflite.text.datasets.<dataset>.filter.tau"][1] == "`0.75`"
    assert rows["spuriousbench.models.<model>.icl.template.separator"][1] == '`"\\n\\n"`'
    # a oneOf's object variant adds its keys; a map with enumerated keys uses <key>
    assert rows["figure4.thresholds_from"][:2] == ["one of `appendix_c`, `reference` or object", "`appendix_c`"]
    assert rows["figure4.thresholds_from.seed"][1] == "`0`"
    assert rows["debias.fixed_thresholds.<key>.biased_group"][0] == "one of `low`, `high`"
    # a definition used once is written out in place; one used several times links to its own section
    assert rows["models.<model>.training.learning_rate"][1] == "`2e-05`"
    assert rows["lexical.models.<model>.training"][0] == "[classification_training](#classification_training)"
    assert "lexical.models.<model>.training.learning_rate" not in rows
    assert rows["learning_rate"][1] == "`2e-05`"  # the classification_training section
    assert rows["evaluate"][0] == "array of [split_ref](#split_ref)"
    # | and < inside cells: escaped, so that GitHub neither splits the cell nor drops a tag-like <name>
    assert "\\|Y\\|" in rows["lexical.err_target"][2]
    assert "&lt;unk>" in rows["lexical.models.<model>.bilstm.min_count"][2]


def test_a_small_schema_renders_as_worked_out_by_hand():
    schema = {
        "$defs": {
            "name": {"type": "string", "description": "a name"},
            "pair": {"type": "object", "properties": {"a": {"type": "integer", "minimum": 0, "description": "A"}}},
            "once": {"type": "object", "properties": {"b": {"type": "boolean", "default": False, "description": "B"}}},
        },
        "properties": {
            "items": {
                "type": "object",
                "description": "a map",
                "default": {},
                "additionalProperties": {
                    "type": "object",
                    "required": ["p"],
                    "properties": {
                        "p": {"$ref": "#/$defs/pair", "description": "first use"},
                        "q": {"type": "array", "items": {"$ref": "#/$defs/pair"}, "minItems": 1, "description": "2nd"},
                        "r": {"oneOf": [{"type": "null"}, {"$ref": "#/$defs/once"}], "default": None},
                    },
                },
            },
            "list": {
                "type": "array",
                "description": "objects",
                "items": {"type": "object", "properties": {"n": {"$ref": "#/$defs/name"}}},
            },
        },
    }
    rows = _rows(config_docs.render(schema))
    assert rows == {
        "items": ["map of object", "`{}`", "a map"],
        "items.<item>.p": ["[pair](#pair)", "required", "first use"],
        "items.<item>.q": ["array of [pair](#pair), at least 1 item", "–", "2nd"],
        "items.<item>.r": ["null or object", "`null`", ""],
        "items.<item>.r.b": ["boolean", "`false`", "B"],
        "list": ["array of object", "–", "objects"],
        "list[].n": ["[name](#name)", "–", ""],
        "a": ["integer (≥ 0)", "–", "A"],
    }


def test_check_reports_a_stale_page(tmp_path, capsys):
    page = tmp_path / "config.md"
    page.write_text("# old\n")
    assert config_docs.main(["--check", "--out", str(page)]) == 1
    assert "make config-docs" in capsys.readouterr().err
    assert config_docs.main(["--out", str(page)]) == 0
    assert config_docs.main(["--check", "--out", str(page)]) == 0
    assert page.read_text() == config_docs.render()


def test_a_ref_outside_defs_is_refused():
    with pytest.raises(ValueError, match="only #/\\$defs/"):
        config_docs.render({"properties": {"x": {"$ref": "other.yaml#/x"}}})
