"""QA fine-tuning on the engine (spurious.core.train.engine): the QA loss and objectives, validation, selection, early
stopping."""

from __future__ import annotations

import hashlib
import json
import math
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from spurious.core import registry
from spurious.core.config import result_settings
from spurious.core.data.squad import sample_questions
from spurious.core.models import load_qa_model, load_tokenizer
from spurious.core.train import compiled, packing
from spurious.core.train.checkpoints import TrainState
from spurious.core.train.engine import device_for, run_summary, step_counts, world
from spurious.core.train.engine import train as engine_train
from spurious.core.train.launch import launch, needs_launch, processes_setting
from spurious.core.train.logits import ids_sha256
from spurious.core.train.qa.features import (
    QAFeatures,
    featurize,
    training_features,
)
from spurious.core.train.qa.inference import (
    _model_outputs,
    _plain_loss,
    predict_with_model,
    validation_loss,
)
from spurious.core.train.qa.settings import (
    EVAL_SUBSET_SEED,
    LogFn,
    logger,
    resolve_settings,
)
from spurious.core.train.tracking import TRACKER_FOLDER
from spurious.core.train.training import (
    pad_multiple,
    rng_states,
    save_model_dir,
    seed_everything,
    set_rng_states,
    to_device,
    use_bf16,
)


def select_eval_subset(frame: pd.DataFrame, max_examples: int | None) -> pd.DataFrame:
    """A fixed, seeded subset of ``max_examples`` questions (original order kept), or the whole frame."""
    if not max_examples or max_examples >= len(frame):
        return frame
    return sample_questions(frame, max_examples=int(max_examples), seed=EVAL_SUBSET_SEED)


def _fingerprint(
    model_name: str,
    settings: Mapping[str, Any],
    train: QAFeatures,
    valid: QAFeatures,
    extra: Mapping[str, Any] | None = None,
) -> str:
    """Identify a run, so a checkpoint of another run (changed data or settings) is never resumed silently.

    ``extra`` entries that are None are left out, so a plain run keeps the fingerprint it had before the objective,
    selection and extra-validation options existed (its checkpoints stay resumable).
    """
    payload = {
        "model": model_name,
        "settings": result_settings(settings),
        "train": ids_sha256(train.example_ids),
        "n_train_features": len(train),
        "valid": ids_sha256(valid.example_ids),
        **{k: v for k, v in (extra or {}).items() if v is not None},
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()[:16]


#: The inits core knows; papers register more (Think Twice: ``overlap``) with :mod:`spurious.core.registry`.
INIT_MODES = ("pretrained", "scratch")


def _initial_model(model_name_or_path: str, init: str | None) -> Any:
    """The model training starts from: the checkpoint's weights, (``scratch``) fresh weights of its architecture, or
    a model a paper's registered init builds from the checkpoint.

    Scratch weights are drawn from torch's global RNG, which ``train_qa`` seeds first, so they are reproducible.
    """
    if init in (None, "pretrained"):
        return load_qa_model(model_name_or_path)
    if init == "scratch":
        return load_qa_model(model_name_or_path, from_scratch=True)
    build = registry.qa_init(init)
    if build is None:
        known = ", ".join((*INIT_MODES, *registry.qa_inits()))
        raise ValueError(f"train_qa: unknown init {init!r}; known: {known}")
    return build(model_name_or_path)


TRAINABLE = ("all", "head")


def _restrict_training(model: torch.nn.Module, trainable: str) -> None:
    """``"head"``: freeze every parameter but the span-prediction head's (``qa_outputs``); ``"all"``: nothing."""
    if trainable not in TRAINABLE:
        raise ValueError(f"train_qa: unknown trainable {trainable!r}; known: {', '.join(TRAINABLE)}")
    if trainable == "all":
        return
    head = [name for name, _ in model.named_parameters() if name.startswith("qa_outputs.")]
    if not head:
        raise ValueError(f"train_qa: trainable='head' needs a 'qa_outputs' head; {type(model).__name__} has none")
    for name, param in model.named_parameters():
        param.requires_grad_(name.startswith("qa_outputs."))


ObjectiveFactory = Callable[[QAFeatures], torch.nn.Module]
SelectionFn = Callable[[Any, Any], tuple[float, Mapping[str, Any]]]
# Keys of a train_losses row; an objective's logged values may not shadow them.
_TRAIN_ROW_KEYS = frozenset({"step", "loss", "lr"})


def _objective_description(objective_factory: ObjectiveFactory | None, objective_id: str | None) -> str | None:
    """The factory's ``.fingerprint``; a factory without one needs an ``objective_id`` (a loud error otherwise).

    A closure cannot be hashed stably, and a run whose objective is not identified could resume a checkpoint of a
    different objective (a plain run's into an LMix run), which must never happen silently.
    """
    if objective_factory is None:
        return None
    described = getattr(objective_factory, "fingerprint", None)
    if described is None and objective_id is None:
        raise ValueError(
            "train_qa: objective_factory has no .fingerprint attribute; pass objective_id (a string that changes "
            "whenever the objective or its inputs change) so that checkpoints of other runs are never resumed"
        )
    return None if described is None else str(described)


def _build_objective(
    objective_factory: ObjectiveFactory | None, features: QAFeatures, device: torch.device
) -> torch.nn.Module | None:
    """Call the factory once with the training features; the objective lives on the model's device."""
    if objective_factory is None:
        return None
    objective = objective_factory(features)
    if not isinstance(objective, torch.nn.Module) or not all(
        hasattr(objective, name) for name in ("needs_hidden_states", "batch_inputs")
    ):
        raise TypeError(
            "train_qa: objective_factory must return a torch.nn.Module with a needs_hidden_states attribute, "
            "batch_inputs(feature_index, batch) and forward(start_logits, end_logits, hidden_states, batch); got "
            f"{type(objective).__name__}"
        )
    objective.to(device)
    objective.train()
    return objective


def _objective_loss(
    objective: torch.nn.Module, model: Any, batch: Mapping[str, torch.Tensor]
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """The objective's training loss on one micro-batch on the device (its ``batch_inputs`` included).

    The objective runs under the model's autocast (the engine's), so its own layers see the dtype the model's head
    sees; it should compute log-softmaxes and cross-entropies in float32 (autocast does that for the torch functions).
    """
    start, end, hidden = _model_outputs(model, batch, hidden=bool(objective.needs_hidden_states))
    loss, info = objective(start, end, hidden, batch)
    clash = sorted(_TRAIN_ROW_KEYS & set(info))
    if clash:
        raise ValueError(f"the training objective logs {clash}, which are reserved for the training-loss rows")
    return loss, {k: v.detach() for k, v in info.items()}


def _plain_value(v: Any) -> Any:
    """numpy/torch scalars as Python numbers, so the value can go into state.json."""
    return v.item() if hasattr(v, "item") else v


def _run_selection(selection: SelectionFn, model: Any, tokenizer: Any) -> tuple[float, dict[str, Any]]:
    """Score the current model (eval mode, no gradients), leaving the training RNG streams untouched.

    Restoring the RNG states makes the training trajectory independent of whatever the selection does, so a run with
    a selection follows the same steps as one without until early stopping separates them.
    """
    rng = rng_states()
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            score, info = selection(model, tokenizer)
    finally:
        model.train(was_training)
        set_rng_states(rng)
    info = {k: _plain_value(v) for k, v in dict(info).items()}
    clash = sorted({"step", "score"} & set(info))
    if clash:
        raise ValueError(f"the checkpoint selection returns info keys {clash}, which are reserved")
    return float(score), info


def _improves(score: float, best: float | None) -> bool:
    """Higher is better; a NaN score never improves, the first other one always does."""
    return not math.isnan(score) and (best is None or score > best)


def _eval_frames(
    valid_frame: pd.DataFrame,
    extra_validation: Mapping[str, pd.DataFrame] | None,
    tokenizer: Any,
    s: Mapping[str, Any],
) -> dict[str, tuple[pd.DataFrame, QAFeatures]]:
    """The (seeded) ``eval_max_examples`` subset and its labelled windows of every validation frame, by name."""
    frames = {"validation": valid_frame, **dict(extra_validation or {})}
    if extra_validation and "validation" in extra_validation:
        raise ValueError("extra_validation may not use the name 'validation' (it is the main validation frame)")
    out = {}
    for name, frame in frames.items():
        subset = select_eval_subset(frame, s["eval_max_examples"])
        out[name] = (subset, featurize(subset, tokenizer, max_length=s["max_length"], stride=s["stride"]))
    return out


def segment_gap_selection(
    biased_frame: pd.DataFrame,
    unbiased_frame: pd.DataFrame,
    *,
    settings: Mapping[str, Any] | None = None,
    max_examples: int | None = None,
    max_unbiased_f1: float | None = None,
) -> SelectionFn:
    """A checkpoint selection for bias models: F1 on the biased minus F1 on the unbiased validation segment.

    The reference keeps the bias-model checkpoint whose F1 differs most between the biased and the unbiased segment
    (App. B.2.1; MIR-MU/isbiased, ``learnedMixinH/train_all_biased_models.py``): the most *biased* model, not the most
    accurate one. ``max_examples`` takes the same seeded subset of each frame as ``eval_max_examples`` does (the
    reference evaluates 200 rows of each). ``max_unbiased_f1`` restricts the choice to checkpoints whose F1 on the
    unbiased segment stays below it (their score is NaN otherwise, which never improves): a bias model that answers
    unbiased questions well is a general QA model, and LMix/CReg would then remove the task instead of the shortcut. The
    gap is recorded as ``f1_gap`` either way. The returned function carries a ``fingerprint`` for the run fingerprint.
    """
    from spurious.core.metrics import evaluate

    s = resolve_settings(settings)
    biased = select_eval_subset(biased_frame, max_examples)
    unbiased = select_eval_subset(unbiased_frame, max_examples)

    def select(model: Any, tokenizer: Any) -> tuple[float, dict[str, float]]:
        scores = {}
        for name, frame in (("biased", biased), ("unbiased", unbiased)):
            result = evaluate(frame, predict_with_model(model, tokenizer, frame, settings=s))
            scores[f"f1_{name}"], scores[f"em_{name}"] = result["f1"], result["exact_match"]
        scores["f1_gap"] = scores["f1_biased"] - scores["f1_unbiased"]
        if max_unbiased_f1 is not None and not scores["f1_unbiased"] < max_unbiased_f1:
            return math.nan, scores
        return scores["f1_gap"], scores

    described = {
        "kind": "segment_gap",
        **({"max_unbiased_f1": float(max_unbiased_f1)} if max_unbiased_f1 is not None else {}),
        "biased": ids_sha256([str(i) for i in biased["id"]]),
        "unbiased": ids_sha256([str(i) for i in unbiased["id"]]),
        "settings": {k: s[k] for k in ("max_length", "stride", "n_best", "max_answer_length")},
    }
    select.fingerprint = hashlib.sha256(json.dumps(described, sort_keys=True).encode()).hexdigest()[:16]
    return select


def train_qa(
    train_frame: pd.DataFrame,
    valid_frame: pd.DataFrame,
    *,
    model_name_or_path: str,
    output_dir: str | os.PathLike,
    checkpoint_dir: str | os.PathLike,
    settings: Mapping[str, Any] | None = None,
    log: LogFn | None = None,
    objective_factory: ObjectiveFactory | None = None,
    objective_id: str | None = None,
    selection: SelectionFn | None = None,
    extra_validation: Mapping[str, pd.DataFrame] | None = None,
    init: str | None = None,
    trainable: str = "all",
) -> dict[str, Any]:
    """Fine-tune an extractive QA model; save the best (lowest validation loss) model to ``output_dir``.

    Resumes exactly from the newest checkpoint in ``checkpoint_dir`` if one exists (same data order, optimizer,
    schedule, RNG and early-stopping state), so a preempted job simply reruns. The caller deletes ``checkpoint_dir``
    after success. Returns the training summary (also written to ``output_dir/training_state.json``).

    Options for debiasing and bias models (none of them changes a run that does not use them):

    * ``objective_factory(train_features) -> module`` replaces ``qa_loss`` in *training* steps by the module's
      ``forward(start_logits, end_logits, hidden_states, batch) -> (loss, {name: 0-d tensor})`` on the device. It
      is called once; the module's ``needs_hidden_states`` asks for the last hidden state ``[B, W, H]``; its
      ``batch_inputs(feature_index, batch) -> {name: tensor}`` runs on the host for each micro-batch before it moves
      to the device (``feature_index``: the rows of ``train_features`` in the micro-batch, the index of per-feature
      logits, ``spurious.core.train.logits``; ``batch``: the host tensors of ``QAFeatures.collate``, model inputs,
      labels and the ``context_mask``/``question_mask``/``cls_mask``), and what it returns joins ``batch``. ``forward``
      must not read values on the host (checks belong in ``batch_inputs``): a step then never waits for the GPU,
      and a compiled run (the ``compile`` setting) compiles it with the model. Its parameters are trained with the
      model (same weight decay rules, same gradient clipping), its state is checkpointed, and its logged values go to
      the progress line and the ``train_losses`` rows. The validation loss stays the plain ``qa_loss``: the reference
      validates without bias or teacher terms (as the authors' code does), and the losses stay comparable across
      methods. The objective must be identified for the run fingerprint: by the factory's ``fingerprint`` attribute or
      by ``objective_id`` (both go into the fingerprint and the summary).
    * ``selection(model, tokenizer) -> (score, info)`` (higher is better), evaluated at every evaluation point; the
      kept checkpoint and early stopping then follow it instead of the validation loss (``segment_gap_selection``
      for bias models). The summary records ``selection_history``, ``best_step`` and ``best_score``.
    * ``extra_validation``: frames whose plain validation loss is recorded at every evaluation, e.g. OOD sets
      (``validation_curves`` in the summary, the main one under ``"validation"``); ``eval_max_examples`` applies.
    * ``init``: ``"pretrained"`` (or None, the default) starts from the checkpoint's weights; ``"scratch"`` from
      randomly initialised weights of its architecture (the paper's bias models; App. B.2.1); any other name is an
      init a paper registered (:mod:`spurious.core.registry`): Think Twice's ``"overlap"`` trains its lexical-overlap
      bias model on the checkpoint's frozen word embeddings.
    * ``trainable``: ``"all"`` (default) or ``"head"``: only the span-prediction head (``qa_outputs``) is trained, the
      encoder stays as initialised (a restricted bias model that a CPU can afford).
    """
    arguments = dict(locals())  # this call's arguments, before anything else is defined: for the N-process relaunch
    s = resolve_settings(settings)
    if needs_launch(s):  # N processes (the job's GPUs): each runs this function with its share of every batch
        return launch(train_qa, processes_setting(s), **arguments)
    emit = log or logger.info
    t_start = time.perf_counter()
    if s["threads"]:
        torch.set_num_threads(int(s["threads"]))
    device = device_for(s)
    bf16 = use_bf16(s["bf16"], device)
    output_dir, checkpoint_dir = Path(output_dir), Path(checkpoint_dir)
    objective_fingerprint = _objective_description(objective_factory, objective_id)

    seed_everything(int(s["seed"]))
    tokenizer = load_tokenizer(model_name_or_path)
    model = _initial_model(model_name_or_path, init)
    _restrict_training(model, trainable)
    packed = packing.enable(model, s["attention"], device=device, bf16=bf16, log=emit)
    train_features = training_features(train_frame, tokenizer, s, tokenizer_name=str(model_name_or_path))
    if len(train_features) == 0:
        raise ValueError("the training frame is empty")
    evals = _eval_frames(valid_frame, extra_validation, tokenizer, s)
    valid_subset, valid_features = evals["validation"]
    extra_features = {name: feats for name, (_, feats) in evals.items() if name != "validation"}
    model.to(device)
    objective = _build_objective(objective_factory, train_features, device)
    if packed and getattr(objective, "reads_padding", False):
        raise ValueError(
            f"attention: packed computes nothing at padding positions, but the training objective "
            f"{objective_id or objective_fingerprint} reads them (its softmaxes run over every position of the padded "
            "batch: the authors' compat or mask_non_context: false); set attention: padded for this run"
        )
    selection_description = None if selection is None else str(getattr(selection, "fingerprint", "custom"))
    run_options = {
        "init": None if init in (None, "pretrained") else init,
        **({"trainable": trainable} if trainable != "all" else {}),
        "objective": objective_id,
        "objective_factory": objective_fingerprint,
        "selection": selection_description,
        "extra_validation": {n: ids_sha256(f.example_ids) for n, f in extra_features.items()} or None,
    }
    fingerprint = _fingerprint(str(model_name_or_path), s, train_features, valid_features, run_options)
    pad_to = int(s["max_length"]) if s["pad_to_max_length"] else None
    multiple = pad_multiple(s["pad_to_multiple_of"], device)

    offset = packing.position_offset(model)

    def batch_fn(rows: np.ndarray, device: torch.device) -> dict[str, torch.Tensor]:
        batch = train_features.collate(rows, pad_to=pad_to, multiple=multiple, packed_offset=offset)
        if objective is not None:
            batch.update(objective.batch_inputs(rows, batch))
        return to_device(batch, device)

    def loss_fn(
        model: Any, objective: torch.nn.Module | None, batch: Mapping[str, torch.Tensor]
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        # bf16 autocast comes from the engine (Accelerate wraps the whole loss computation)
        if objective is None:
            return _plain_loss(model, batch), {}
        return _objective_loss(objective, model, batch)

    _, steps_per_epoch, total_steps = step_counts(len(train_features), s)
    evaluation = _QAEvaluation(
        model=model,
        tokenizer=tokenizer,
        valid_features=valid_features,
        extra_features=extra_features,
        selection=selection,
        eval_every=int(s["eval_every"] or 0),
        patience=s["early_stopping_patience"],
        eval_batch_size=int(s["eval_batch_size"]),
        bf16=bf16,
        emit=emit,
        multiple=multiple,
        compile=s["compile"],
        evaluations=compiled.evaluations(total_steps, s["eval_every"]),
    )
    emit(
        f"training {model_name_or_path} on {device}{' (bf16)' if bf16 else ''}"
        f"{f' over {world()[1]} processes' if world()[1] > 1 else ''}: {len(train_frame)} questions -> "
        f"{len(train_features)} windows, {steps_per_epoch} steps/epoch, {total_steps} steps; validation "
        f"{len(valid_subset)} questions -> {len(valid_features)} windows"
        + (f"; objective {objective_id or objective_fingerprint}" if objective is not None else "")
    )
    run = engine_train(
        model,
        loss_fn,
        train_features.lengths,
        s,
        batch_fn=batch_fn,
        batch_width=lambda lengths: train_features.batch_width(lengths, pad_to, multiple, offset is not None),
        checkpoint_dir=checkpoint_dir,
        fingerprint=fingerprint,
        emit=emit,
        objective=objective,
        evaluation=evaluation,
        keep_best=bool(s["keep_best"]),
        unit="windows",
        tracker_dir=output_dir.parent / TRACKER_FOLDER,  # beside the model folder: kept when the job succeeds
    )
    state, record = run.state, run.state.evaluation
    saved_step = state.best_step if s["keep_best"] and state.best_step is not None else state.step
    validation_losses = record.get("validation_losses", [])
    summary: dict[str, Any] = {
        **run_summary(run, model_name_or_path, s, t_start),
        "epochs_done": state.step / run.steps_per_epoch,
        "saved_step": saved_step,
        "best_validation_loss": record.get("best_loss"),
        "validation_losses": validation_losses,
        "validation_curves": {"validation": validation_losses, **record.get("validation_curves", {})},
        "validation_sets": {
            name: {"n_examples": len(subset), "n_features": len(feats)} for name, (subset, feats) in evals.items()
        },
        "init": init or "pretrained",
        "trainable": trainable,
        "objective_id": objective_id,
        "objective_fingerprint": objective_fingerprint,
        "selection": selection_description,
        "best_score": record.get("best_score"),
        "selection_history": record.get("selection_history", []),
        "stopped_early": state.stopped_early,
        "n_train_examples": len(train_frame),
        "n_train_features": len(train_features),
        "n_valid_examples": len(valid_subset),
        "n_valid_features": len(valid_features),
    }
    if not run.is_main:  # rank 0 saves the model; every process returns the same summary
        return summary
    save_model_dir(output_dir, model, tokenizer, summary)
    score_note = f", selection score {record.get('best_score')}" if selection is not None else ""
    emit(
        f"saved the model of step {saved_step} (validation loss {record.get('best_loss')}{score_note}) to "
        f"{output_dir}; {state.step} steps in {summary['train_wall_time_s']:.0f}s"
    )
    return summary


@dataclass
class _QAEvaluation:
    """Validation loss (and the extra validation frames' losses), the optional checkpoint selection, early stopping.

    Recorded in ``state.evaluation``: ``validation_losses``, ``validation_curves``, ``selection_history``,
    ``best_loss``, ``best_score``, ``bad_evals``. The selection score (higher is better) decides what is best when
    there is one, else the validation loss (lower is better)."""

    model: Any
    tokenizer: Any
    valid_features: QAFeatures
    extra_features: Mapping[str, QAFeatures]
    selection: SelectionFn | None
    eval_every: int
    patience: int | None
    eval_batch_size: int
    bf16: bool
    emit: LogFn
    multiple: int = 1
    compile: str = "off"  # the setting, for the validation batches of ``evaluations`` evaluations
    evaluations: int = 1

    def due(self, state: TrainState, total_steps: int) -> bool:
        return state.step >= total_steps or (self.eval_every > 0 and state.step % self.eval_every == 0)

    def __call__(self, state: TrainState, should_stop: Callable[[], bool] | None) -> bool:
        t0 = time.perf_counter()

        def loss_on(features: QAFeatures) -> float:
            return validation_loss(
                self.model, features, batch_size=self.eval_batch_size, bf16=self.bf16, should_stop=should_stop,
                multiple=self.multiple, compile=self.compile, repeats=self.evaluations,
            )

        # everything is computed before the record changes: an evaluation abandoned on preemption leaves no trace
        loss = loss_on(self.valid_features)
        extra_losses = {name: loss_on(feats) for name, feats in self.extra_features.items()}
        score, info = (
            _run_selection(self.selection, self.model, self.tokenizer) if self.selection is not None else (None, {})
        )
        record = state.evaluation
        record.setdefault("validation_losses", []).append({"step": state.step, "loss": loss})
        for name, value in extra_losses.items():
            record.setdefault("validation_curves", {}).setdefault(name, []).append({"step": state.step, "loss": value})
        if score is not None:
            record.setdefault("selection_history", []).append({"step": state.step, "score": score, **info})
            improved = _improves(score, record.get("best_score"))
        else:
            improved = record.get("best_loss") is None or loss < record["best_loss"]
        if improved:
            record["best_loss"], record["best_score"], record["bad_evals"] = loss, score, 0
            best_step = state.step
        else:
            record["bad_evals"] = record.get("bad_evals", 0) + 1
            best_step = state.best_step
        extras = "".join(f", {name} {value:.4f}" for name, value in extra_losses.items())
        if score is None:
            best = f"best {record['best_loss']:.4f}"
        else:
            details = ", ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in info.items())
            extras += f"; selection score {score:.4f} ({details})"
            best = f"best score {record.get('best_score')}"
        self.emit(
            f"eval step {state.step}: validation loss {loss:.4f}{extras} ({best} at step {best_step}; "
            f"{record['bad_evals']} without improvement) [{len(self.valid_features)} windows, "
            f"{time.perf_counter() - t0:.1f}s]"
        )
        if self.patience and record["bad_evals"] >= int(self.patience):
            state.stopped_early = True
            self.emit(f"early stopping at step {state.step}: no improvement in {self.patience} evaluations")
        return improved
