"""The ``tracker`` setting (spurious.core.train.tracking): a real TensorBoard event file, read back with TensorBoard's
own reader, holds the scalars of every step, progress line and evaluation at their steps, with the numbers the run's
summary recorded; the run's configuration carries its provenance; a tracker whose package is missing is refused
before training, naming the extra."""

from __future__ import annotations

import importlib.util

import pytest
import yaml

from spurious.core.train import qa, tracking
from tests.core.test_step import _tiny_bert

STEPS, LOG_EVERY, EVAL_EVERY = 6, 2, 3


@pytest.fixture(scope="module")
def tracked_run(tmp_path_factory, squad_dev):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    tmp = tmp_path_factory.mktemp("tracked")
    short = squad_dev[squad_dev["context"].str.len() < 400]
    train, valid = short.iloc[:12].reset_index(drop=True), short.iloc[200:204].reset_index(drop=True)
    settings = {"max_length": 64, "stride": 16, "batch_size": 4, "max_steps": STEPS, "eval_every": EVAL_EVERY,
                "early_stopping_patience": None, "checkpoint_every": 0, "log_every": LOG_EVERY, "threads": 1,
                "device": "cpu", "tracker": "tensorboard", "warmup_ratio": 0.5}  # fmt: skip
    summary = qa.train_qa(train, valid, model_name_or_path=str(_tiny_bert("QuestionAnswering", tmp / "tiny")),
                          output_dir=tmp / "run" / "model", checkpoint_dir=tmp / "ck", settings=settings,
                          log=lambda m: None)  # fmt: skip
    folder = tmp / "run" / tracking.TRACKER_FOLDER / tracking.PROJECT
    events = EventAccumulator(str(folder))
    events.Reload()
    scalars = {tag: [(e.step, e.value) for e in events.Scalars(tag)] for tag in events.Tags()["scalars"]}
    return summary, scalars, folder


def test_every_step_logs_its_loss_learning_rate_and_gradient_norm(tracked_run):
    summary, scalars, _ = tracked_run
    steps = list(range(1, STEPS + 1))
    for tag in ("train/loss", "train/learning_rate", "train/grad_norm"):
        assert [s for s, _ in scalars[tag]] == steps, tag
    recorded = {r["step"]: r for r in summary["train_losses"]}
    for step, value in scalars["train/loss"]:
        assert value == pytest.approx(recorded[step]["loss"], rel=1e-6)
    # warmup over half of the 6 steps (3), then linear decay to 0: rates lr * (0, 1/3, 2/3, 1, 2/3, 1/3)
    lr = qa.DEFAULT_SETTINGS["learning_rate"]
    assert [v for _, v in scalars["train/learning_rate"]] == pytest.approx(
        [0.0, lr / 3, 2 * lr / 3, lr, 2 * lr / 3, lr / 3], rel=1e-6)
    assert all(v > 0 for _, v in scalars["train/grad_norm"])  # the norm before clipping: a real gradient


def test_progress_lines_log_the_throughput_and_evaluations_their_losses(tracked_run):
    summary, scalars, _ = tracked_run
    assert [s for s, _ in scalars["train/steps_per_s"]] == [2, 4, 6]
    assert [s for s, _ in scalars["train/windows_per_s"]] == [2, 4, 6]
    assert all(w == pytest.approx(4 * s, rel=1e-5) for (_, s), (_, w) in
               zip(scalars["train/steps_per_s"], scalars["train/windows_per_s"], strict=True))  # 4 windows a step
    evaluated = [(e["step"], e["loss"]) for e in summary["validation_losses"]]
    assert [s for s, _ in evaluated] == [3, 6]
    assert scalars["eval/validation_losses.loss"] == [(s, pytest.approx(v, rel=1e-6)) for s, v in evaluated]


def test_the_runs_configuration_holds_its_settings_and_provenance(tracked_run):
    _, _, folder = tracked_run
    (hparams,) = folder.glob("*/hparams.yml")
    config = yaml.safe_load(hparams.read_text())
    assert config["tracker"] == "tensorboard" and config["max_steps"] == STEPS
    assert {"provenance/git_commit", "provenance/torch", "provenance/gpu_count"} <= set(config)


@pytest.mark.skipif(importlib.util.find_spec("mlflow") is not None, reason="mlflow is installed here")
def test_a_tracker_without_its_package_is_refused_naming_the_extra():
    with pytest.raises(ValueError, match=r"pip install 'spurious\[mlflow\]'"):
        tracking.check_setting("mlflow")
    with pytest.raises(ValueError, match="must be one of"):
        tracking.check_setting("neptune")
    assert tracking.check_setting("none") == "none" and tracking.check_setting("tensorboard") == "tensorboard"
