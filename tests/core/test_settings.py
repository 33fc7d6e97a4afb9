"""Training settings: one table of the defaults QA and classification share, resolved once into typed, read-only
settings."""

from __future__ import annotations

import copy
import json
import pickle

import pytest
import yaml

from spurious.core.train import classifier
from spurious.core.train.qa import settings as qa_settings
from spurious.core.train.settings import SHARED_DEFAULTS, SHARED_KINDS, ResolvedSettings, check_kinds, task_defaults


def test_both_tasks_take_every_shared_default_from_the_one_table() -> None:
    for defaults in (qa_settings.DEFAULT_SETTINGS, classifier.DEFAULT_SETTINGS):
        assert {k: defaults[k] for k in SHARED_DEFAULTS} == SHARED_DEFAULTS
    # what they do not share, by hand: the paper's QA batch and windows, the classification papers' shorter inputs
    assert (qa_settings.DEFAULT_SETTINGS["batch_size"], classifier.DEFAULT_SETTINGS["batch_size"]) == (16, 32)
    assert (qa_settings.DEFAULT_SETTINGS["max_length"], classifier.DEFAULT_SETTINGS["max_length"]) == (384, 128)
    assert (qa_settings.DEFAULT_SETTINGS["eval_every"], classifier.DEFAULT_SETTINGS["eval_every"]) == (200, None)
    # training.json records them in this order
    assert list(qa_settings.DEFAULT_SETTINGS)[:3] == ["learning_rate", "batch_size", "gradient_accumulation_steps"]
    assert list(classifier.DEFAULT_SETTINGS)[-3:] == ["tracker", "eval_every", "processes"]


def test_task_defaults_refuse_a_key_without_a_value_or_a_value_without_a_key() -> None:
    with pytest.raises(ValueError, match="without a value"):
        task_defaults(("learning_rate", "stride"), {})
    with pytest.raises(ValueError, match="without a key"):
        task_defaults(("learning_rate",), {"stride": 128})


@pytest.mark.parametrize("resolve, task", [(qa_settings.resolve_settings, "QA"),
                                           (classifier.resolve_settings, "classification")])
def test_resolved_settings_are_read_only_and_resolved_once(resolve, task) -> None:
    resolved = resolve({"batch_size": 4, "seed": 3})
    assert isinstance(resolved, ResolvedSettings) and resolved.task == task
    assert resolved["batch_size"] == 4 and resolved["learning_rate"] == 2e-5
    assert resolve(resolved) is resolved  # passed down unchanged
    for change in (lambda s: s.__setitem__("seed", 1), lambda s: s.update(seed=1), lambda s: s.pop("seed"),
                   lambda s: s.setdefault("x", 1), lambda s: s.clear()):
        with pytest.raises(TypeError, match="read-only"):
            change(resolved)
    assert resolved["seed"] == 3
    changed = resolve({**resolved, "seed": 5})
    assert changed["seed"] == 5 and resolved["seed"] == 3
    assert json.loads(json.dumps(resolved)) == dict(resolved)
    unpickled = pickle.loads(pickle.dumps(resolved))
    assert unpickled == resolved and unpickled.task == task and copy.deepcopy(resolved) is resolved


@pytest.mark.parametrize("task", [qa_settings, classifier])
def test_every_default_is_of_its_kind_and_a_value_of_another_kind_is_refused_by_name(task) -> None:
    assert list(task.KINDS) == list(task.DEFAULT_SETTINGS)
    check_kinds(task.DEFAULT_SETTINGS, task.KINDS, "defaults")  # raises if a default is not of its kind
    resolved = task.resolve_settings({"batch_size": 4, "bf16": False, "max_grad_norm": None})
    assert (resolved.batch_size, resolved.bf16, resolved.max_grad_norm) == (4, False, None)
    with pytest.raises(AttributeError, match="no 'batch'"):
        _ = resolved.batch
    # each is a value the config schema refuses too: a quoted number, a fraction of a step, a word for a flag
    for bad, message in [({"batch_size": "4"}, r"batch_size must be a whole number, got '4'"),
                         ({"seed": 1.5}, r"seed must be a whole number, got 1\.5"),
                         ({"bf16": "yes"}, r"bf16 must be 'auto' or true or false, got 'yes'"),
                         ({"group_by_length": 1}, r"group_by_length must be true or false, got 1"),
                         ({"learning_rate": True}, r"learning_rate must be a number, got True")]:
        with pytest.raises(ValueError, match=message):
            task.resolve_settings(bad)


# Values that probe a kind: whole and fractional numbers, flags, null, words. A kind and the schema's declaration of the
# same key (its range keywords left out: ranges are the schema's alone) must accept exactly the same ones.
_PROBES = (0, 3, 1.5, True, False, None, "auto", "epoch", "padded", "packed", "on", "off", "none", "tensorboard",
           "cpu", "cuda", "x", "4")


@pytest.mark.parametrize(("task", "definition"), [(qa_settings, "training"), (classifier, "classification_training")])
def test_the_kinds_are_the_types_the_config_schema_declares(task, definition) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    from spurious.workflow.config import SCHEMA_PATH

    declared = yaml.safe_load(SCHEMA_PATH.read_text())["$defs"][definition]["properties"]
    ranges = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}

    def without_ranges(node):
        if isinstance(node, dict):
            return {k: without_ranges(v) for k, v in node.items() if k not in ranges}
        return [without_ranges(v) for v in node] if isinstance(node, list) else node

    compared = [key for key in task.KINDS if key in declared]
    assert len(compared) >= len(SHARED_KINDS)  # every shared setting is in the schema
    for key in compared:
        schema = without_ranges(declared[key])
        by_schema = [v for v in _PROBES if jsonschema.Draft202012Validator(schema).is_valid(v)]
        by_kind = [v for v in _PROBES if any(kind.test(v) for kind in task.KINDS[key])]
        assert by_kind == by_schema, key
