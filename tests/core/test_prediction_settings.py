"""A classifier's prediction settings are declared once (``spurious.core.train.prediction_settings``): the rules take
those keys as params and the three classification papers' predict adapters pass exactly them to
``predict_classifier``."""

from __future__ import annotations

import inspect

from spurious.core.train.prediction_settings import CLASSIFIER_PREDICTION_KEYS, classifier_prediction_arguments
from tests.conftest import REPO
from tests.track_checks import loaded_by_import

ADAPTERS = ("lexical/predict.py", "spuriousbench/predict.py", "aflite/predict.py", "aflite/ood_predict.py")


def test_every_declared_key_becomes_a_keyword_argument_of_predict_classifier() -> None:
    from spurious.core.train.classifier import predict_classifier

    settings = {key: f"value of {key}" for key in (*CLASSIFIER_PREDICTION_KEYS, "learning_rate", "seed")}
    arguments = classifier_prediction_arguments(settings)
    assert arguments == {
        "batch_size": "value of eval_batch_size",
        "max_length": "value of max_length",
        "device": "value of device",
        "bf16": "value of bf16",
        "pad_to_multiple_of": "value of pad_to_multiple_of",
        "attention": "value of attention",
        "compile": "value of compile",
    }
    assert len(arguments) == len(CLASSIFIER_PREDICTION_KEYS)
    parameters = inspect.signature(predict_classifier).parameters
    assert all(parameters[name].kind is inspect.Parameter.KEYWORD_ONLY for name in arguments)


def test_the_adapters_pass_the_declared_keys_and_unpack_none_by_hand() -> None:
    for adapter in ADAPTERS:
        text = (REPO / "workflow_scripts" / adapter).read_text()
        assert "**classifier_prediction_arguments(s)" in text, adapter
        assert not any(f's["{key}"]' in text for key in CLASSIFIER_PREDICTION_KEYS), adapter
        assert "batch_size=" not in text, adapter


def test_the_rules_read_the_declared_keys() -> None:
    rules = {p.name: p.read_text() for p in sorted((REPO / "rules").glob("*.smk"))}
    assert "from spurious.core.train.prediction_settings import CLASSIFIER_PREDICTION_KEYS" in rules["common.smk"]
    assert not any("CLASSIFIER_PREDICTION_KEYS = " in text for text in rules.values())
    for name in ("aflite_functions.smk", "spurious_functions.smk", "lexical_functions.smk"):
        assert "CLASSIFIER_PREDICTION_KEYS" in rules[name], name


def test_importing_the_declaration_imports_nothing_heavy() -> None:
    heavy = ("torch", "transformers", "pandas", "numpy")
    assert loaded_by_import("spurious.core.train.prediction_settings", heavy) == []
