"""Training settings: one table of the defaults QA and classification share, resolved once into read-only settings."""

from __future__ import annotations

import copy
import json
import pickle

import pytest

from spurious.core.train import classifier
from spurious.core.train.qa import settings as qa_settings
from spurious.core.train.settings import SHARED_DEFAULTS, ResolvedSettings, task_defaults


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
