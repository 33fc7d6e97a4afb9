"""QA fine-tuning: the training loop with checkpoints, resumption, objectives, selection and early stopping."""

from __future__ import annotations

import hashlib
import json
import math
import os
import signal
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from spurious.core.data import sample_questions
from spurious.core.logits import ids_sha256
from spurious.core.models import load_qa_model, load_tokenizer, resolve_model
from spurious.core.qa.features import (
    QAFeatures,
    featurize,
    training_features,
)
from spurious.core.qa.inference import (
    _model_outputs,
    _plain_loss,
    predict_with_model,
    validation_loss,
)
from spurious.core.qa.settings import (
    _RUNTIME_KEYS,
    EVAL_SUBSET_SEED,
    LogFn,
    logger,
    resolve_settings,
)
from spurious.core.training import (
    OBJECTIVE_STATE_FILE,
    PreemptionGuard,
    StopRequested,
    TrainingPreempted,
    autocast,
    cpu_copy,
    epoch_order,
    format_eta,
    latest_checkpoint,
    param_groups,
    pick_device,
    restore_checkpoint,
    rng_states,
    save_checkpoint,
    save_model_dir,
    seed_everything,
    set_rng_states,
    use_bf16,
)


@dataclass
class _TrainState:
    """Everything besides tensors that a resumed run needs to continue exactly (saved as ``state.json``)."""

    step: int = 0
    epoch: int = 0
    batch_in_epoch: int = 0  # micro-batches of the current epoch's permutation already consumed
    best_step: int | None = None
    best_loss: float | None = None
    bad_evals: int = 0
    last_eval_step: int = 0
    stopped_early: bool = False
    train_losses: list[dict[str, float]] = field(default_factory=list)
    validation_losses: list[dict[str, float]] = field(default_factory=list)
    wall_time_s: float = 0.0  # of earlier (interrupted) segments
    fingerprint: str = ""
    # with a custom checkpoint selection: its best score (higher is better) and every evaluation's score and info
    best_score: float | None = None
    selection_history: list[dict[str, Any]] = field(default_factory=list)
    # validation losses on the extra validation frames, by name
    validation_curves: dict[str, list[dict[str, float]]] = field(default_factory=dict)


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
        "settings": {k: v for k, v in sorted(settings.items()) if k not in _RUNTIME_KEYS},
        "train": ids_sha256(train.example_ids),
        "n_train_features": len(train),
        "valid": ids_sha256(valid.example_ids),
        **{k: v for k, v in (extra or {}).items() if v is not None},
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()[:16]


INIT_MODES = ("pretrained", "scratch", "overlap")


def _initial_model(model_name_or_path: str, init: str | None) -> Any:
    """The model training starts from: the checkpoint's weights, or (``scratch``) fresh weights of its architecture.

    Scratch weights are drawn from torch's global RNG, which ``train_qa`` seeds first, so they are reproducible.
    """
    if init in (None, "pretrained"):
        return load_qa_model(model_name_or_path)
    if init == "overlap":  # the lexical-overlap bias model on the checkpoint's frozen embeddings (spurious.thinktwice.overlap_qa)
        from spurious.thinktwice.overlap_qa import from_checkpoint

        return from_checkpoint(model_name_or_path)
    if init != "scratch":
        raise ValueError(f"train_qa: unknown init {init!r}; known: {', '.join(INIT_MODES)}")
    return load_qa_model(model_name_or_path, from_scratch=True)


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
    if not isinstance(objective, torch.nn.Module) or not hasattr(objective, "needs_hidden_states"):
        raise TypeError(
            "train_qa: objective_factory must return a torch.nn.Module with a needs_hidden_states attribute and "
            f"forward(start_logits, end_logits, hidden_states, batch, feature_index); got {type(objective).__name__}"
        )
    objective.to(device)
    objective.train()
    return objective


def _optimizer_groups(model: torch.nn.Module, objective: torch.nn.Module | None, weight_decay: float) -> list[dict]:
    """The model's parameter groups with the objective's parameters (same decay rules) appended to them.

    Appending keeps a plain run's optimizer exactly as before, and a resumed run rebuilds the same parameter order.
    """
    groups = param_groups(model, weight_decay)
    if objective is not None:
        for group, extra in zip(groups, param_groups(objective, weight_decay), strict=True):
            group["params"] = group["params"] + extra["params"]
    return groups


def _objective_loss(
    objective: torch.nn.Module,
    model: Any,
    batch: Mapping[str, torch.Tensor],
    feature_index: np.ndarray,
    device: torch.device,
    bf16: bool,
) -> tuple[torch.Tensor, dict[str, float]]:
    """The objective's training loss on one micro-batch (all batch tensors moved to the device first).

    The objective runs under the model's autocast, so its own layers see the dtype the model's head sees; it should
    compute log-softmaxes and cross-entropies in float32 (autocast does that for the torch functions).
    """
    on_device = {k: v.to(device, non_blocking=True) for k, v in batch.items()}
    start, end, hidden = _model_outputs(model, on_device, device, bf16, hidden=bool(objective.needs_hidden_states))
    with autocast(device, bf16):
        loss, info = objective(start, end, hidden, on_device, feature_index)
    clash = sorted(_TRAIN_ROW_KEYS & set(info))
    if clash:
        raise ValueError(f"the training objective logs {clash}, which are reserved for the training-loss rows")
    return loss, {k: float(v.detach()) if isinstance(v, torch.Tensor) else float(v) for k, v in info.items()}


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
    (App. B.2.1; reference-notes §A.4): the most *biased* model, not the most accurate one. ``max_examples`` takes the
    same seeded subset of each frame as ``eval_max_examples`` does (the reference evaluates 200 rows of each).
    ``max_unbiased_f1`` restricts the choice to checkpoints whose F1 on the unbiased segment stays below it (their
    score is NaN otherwise, which never improves): a bias model that answers unbiased questions well is a general QA
    model, and LMix/CReg would then remove the task instead of the shortcut. The gap is recorded as ``f1_gap`` either
    way. The returned function carries a ``fingerprint`` for the run fingerprint.
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
      ``forward(start_logits, end_logits, hidden_states, batch, feature_index) -> (loss, {name: float})``. It is
      called once; the module's ``needs_hidden_states`` asks for the last hidden state ``[B, W, H]``;
      ``feature_index`` holds the rows of ``train_features`` in the micro-batch (the index of per-feature logits,
      ``spurious.core.logits``); ``batch`` holds the model inputs, labels and the ``context_mask``/``question_mask``/
      ``cls_mask`` of ``QAFeatures.collate``, on the device. Its parameters are trained with the model (same weight
      decay rules, same gradient clipping), its state is checkpointed, and its logged values go to the progress line
      and the ``train_losses`` rows. The validation loss stays the plain ``qa_loss``: the reference validates
      without bias or teacher terms (reference-notes §C.2), and the losses stay comparable across methods.
      The objective must be identified for the run fingerprint: by the factory's ``fingerprint`` attribute or by
      ``objective_id`` (both go into the fingerprint and the summary).
    * ``selection(model, tokenizer) -> (score, info)`` (higher is better), evaluated at every evaluation point; the
      kept checkpoint and early stopping then follow it instead of the validation loss (``segment_gap_selection``
      for bias models). The summary records ``selection_history``, ``best_step`` and ``best_score``.
    * ``extra_validation``: frames whose plain validation loss is recorded at every evaluation, e.g. OOD sets
      (``validation_curves`` in the summary, the main one under ``"validation"``); ``eval_max_examples`` applies.
    * ``init``: ``"pretrained"`` (or None, the default) starts from the checkpoint's weights; ``"scratch"`` from
      randomly initialised weights of its architecture (the paper's bias models; App. B.2.1); ``"overlap"`` trains
      the lexical-overlap bias model of :mod:`spurious.thinktwice.overlap_qa` on the checkpoint's frozen word embeddings.
    * ``trainable``: ``"all"`` (default) or ``"head"``: only the span-prediction head (``qa_outputs``) is trained, the
      encoder stays as initialised (a restricted bias model that a CPU can afford).
    """
    s = resolve_settings(settings)
    emit = log or logger.info
    t_start = time.perf_counter()
    if s["threads"]:
        torch.set_num_threads(int(s["threads"]))
    device = pick_device(s["device"])
    bf16 = use_bf16(s["bf16"], device)
    output_dir, checkpoint_dir = Path(output_dir), Path(checkpoint_dir)
    objective_fingerprint = _objective_description(objective_factory, objective_id)

    seed_everything(int(s["seed"]))
    tokenizer = load_tokenizer(model_name_or_path)
    model = _initial_model(model_name_or_path, init)
    _restrict_training(model, trainable)
    train_features = training_features(train_frame, tokenizer, s, tokenizer_name=str(model_name_or_path))
    if len(train_features) == 0:
        raise ValueError("the training frame is empty")
    evals = _eval_frames(valid_frame, extra_validation, tokenizer, s)
    valid_subset, valid_features = evals["validation"]
    extra_features = {name: feats for name, (_, feats) in evals.items() if name != "validation"}
    model.to(device)
    model.train()
    objective = _build_objective(objective_factory, train_features, device)

    batch_size, accum = int(s["batch_size"]), int(s["gradient_accumulation_steps"])
    micro_per_epoch = math.ceil(len(train_features) / batch_size)
    steps_per_epoch = math.ceil(micro_per_epoch / accum)
    total_steps = int(s["max_steps"]) if s["max_steps"] else math.ceil(float(s["epochs"]) * steps_per_epoch)
    warmup_steps = math.ceil(float(s["warmup_ratio"]) * total_steps)
    optimizer = torch.optim.AdamW(
        _optimizer_groups(model, objective, float(s["weight_decay"])),
        lr=float(s["learning_rate"]),
        betas=(0.9, 0.999),
        eps=1e-8,
    )
    clipped = list(model.parameters()) + (list(objective.parameters()) if objective is not None else [])
    from transformers import get_linear_schedule_with_warmup

    scheduler = get_linear_schedule_with_warmup(optimizer, warmup_steps, total_steps)
    pad_to = int(s["max_length"]) if s["pad_to_max_length"] else None
    eval_every = int(s["eval_every"] or 0)
    patience = s["early_stopping_patience"]
    selection_description = None if selection is None else str(getattr(selection, "fingerprint", "custom"))

    run_options = {
        "init": None if init in (None, "pretrained") else init,
        **({"trainable": trainable} if trainable != "all" else {}),
        "objective": objective_id,
        "objective_factory": objective_fingerprint,
        "selection": selection_description,
        "extra_validation": {n: ids_sha256(f.example_ids) for n, f in extra_features.items()} or None,
    }
    state = _TrainState(
        fingerprint=_fingerprint(str(model_name_or_path), s, train_features, valid_features, run_options)
    )
    best_weights: dict[str, torch.Tensor] | None = None
    resumed_from: int | None = None
    ckpt = latest_checkpoint(checkpoint_dir)
    if ckpt is not None:
        saved = _TrainState(**json.loads((ckpt / "state.json").read_text()))
        if saved.fingerprint != state.fingerprint:
            raise RuntimeError(
                f"checkpoint {ckpt} belongs to a different run (other data, model, settings or training objective); "
                f"delete {checkpoint_dir} to start afresh"
            )
        load = restore_checkpoint(ckpt, model, optimizer, scheduler)
        if objective is not None:
            objective.load_state_dict(load(OBJECTIVE_STATE_FILE))
        if s["keep_best"] and saved.best_step is not None:
            best_weights = (
                load("best_model.pt") if (ckpt / "best_model.pt").is_file() else cpu_copy(model.state_dict())
            )
        state = saved
        resumed_from = state.step
        emit(f"resuming from {ckpt} (step {state.step}/{total_steps})")

    def checkpoint() -> Path:
        state.wall_time_s += time.perf_counter() - segment_start[0]
        segment_start[0] = time.perf_counter()
        return save_checkpoint(checkpoint_dir, model, optimizer, scheduler, state, best_weights, objective)

    def evaluate() -> None:
        nonlocal best_weights
        t0 = time.perf_counter()

        def loss_on(features: QAFeatures) -> float:
            return validation_loss(
                model, features, batch_size=int(s["eval_batch_size"]), bf16=bf16, should_stop=lambda: guard.triggered
            )

        # everything is computed before the state changes: an evaluation abandoned on preemption leaves no trace
        loss = loss_on(valid_features)
        extra_losses = {name: loss_on(feats) for name, feats in extra_features.items()}
        score, info = _run_selection(selection, model, tokenizer) if selection is not None else (None, {})
        state.validation_losses.append({"step": state.step, "loss": loss})
        for name, value in extra_losses.items():
            state.validation_curves.setdefault(name, []).append({"step": state.step, "loss": value})
        if score is not None:
            state.selection_history.append({"step": state.step, "score": score, **info})
        state.last_eval_step = state.step
        # the selection score (higher is better) decides when there is one, else the validation loss (lower is better)
        if score is not None:
            improved = _improves(score, state.best_score)
        else:
            improved = state.best_loss is None or loss < state.best_loss
        if improved:
            state.best_loss, state.best_step, state.bad_evals = loss, state.step, 0
            state.best_score = score
            if s["keep_best"]:
                best_weights = cpu_copy(model.state_dict())
        else:
            state.bad_evals += 1
        extras = "".join(f", {name} {value:.4f}" for name, value in extra_losses.items())
        if score is None:
            best = f"best {state.best_loss:.4f}"
        else:
            details = ", ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in info.items())
            extras += f"; selection score {score:.4f} ({details})"
            best = f"best score {state.best_score}"
        emit(
            f"eval step {state.step}: validation loss {loss:.4f}{extras} ({best} at step {state.best_step}; "
            f"{state.bad_evals} without improvement) [{len(valid_features)} windows, {time.perf_counter() - t0:.1f}s]"
        )
        if patience and state.bad_evals >= int(patience):
            state.stopped_early = True
            emit(f"early stopping at step {state.step}: no improvement in {patience} evaluations")

    def eval_due() -> bool:
        if state.last_eval_step == state.step or state.step == 0:
            return False
        return state.step >= total_steps or (eval_every > 0 and state.step % eval_every == 0)

    emit(
        f"training {model_name_or_path} on {device}{' (bf16)' if bf16 else ''}: {len(train_frame)} questions -> "
        f"{len(train_features)} windows, {steps_per_epoch} steps/epoch, {total_steps} steps; validation "
        f"{len(valid_subset)} questions -> {len(valid_features)} windows"
        + (f"; objective {objective_id or objective_fingerprint}" if objective is not None else "")
    )
    segment_start = [time.perf_counter()]
    t_rate, step_rate0 = time.perf_counter(), state.step
    window_losses: list[float] = []
    window_info: dict[str, list[float]] = {}
    perm = np.empty(0, dtype=np.int64)
    perm_epoch = -1
    with PreemptionGuard() as guard:
        try:
            if eval_due():  # an evaluation was abandoned when the previous segment was preempted
                evaluate()
            while state.step < total_steps and not state.stopped_early:
                if guard.triggered:
                    raise StopRequested
                if perm_epoch != state.epoch:
                    perm = epoch_order(
                        train_features.lengths,
                        batch_size=batch_size,
                        seed=int(s["seed"]),
                        epoch=state.epoch,
                        group_by_length=bool(s["group_by_length"]),
                    )
                    perm_epoch = state.epoch
                group = min(accum, micro_per_epoch - state.batch_in_epoch)
                step_loss = 0.0
                step_info: dict[str, float] = {}
                for m in range(group):
                    lo = (state.batch_in_epoch + m) * batch_size
                    rows = perm[lo : lo + batch_size]
                    batch = train_features.collate(rows, pad_to=pad_to)
                    if objective is None:
                        loss = _plain_loss(model, batch, device, bf16)
                    else:
                        loss, info = _objective_loss(objective, model, batch, rows, device, bf16)
                        for k, v in info.items():
                            step_info[k] = step_info.get(k, 0.0) + v / group
                    (loss / group).backward()
                    step_loss += float(loss.detach()) / group
                lr = scheduler.get_last_lr()[0]
                if s["max_grad_norm"]:
                    torch.nn.utils.clip_grad_norm_(clipped, float(s["max_grad_norm"]))
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad(set_to_none=True)
                state.step += 1
                state.batch_in_epoch += group
                if state.batch_in_epoch >= micro_per_epoch:
                    state.epoch, state.batch_in_epoch = state.epoch + 1, 0
                state.train_losses.append({"step": state.step, "loss": step_loss, "lr": lr, **step_info})
                window_losses.append(step_loss)
                for k, v in step_info.items():
                    window_info.setdefault(k, []).append(v)
                if state.step % max(1, int(s["log_every"])) == 0 or state.step == total_steps:
                    now = time.perf_counter()
                    rate = (state.step - step_rate0) / max(now - t_rate, 1e-9)
                    logged = "".join(f" {k} {np.mean(v):.4g}" for k, v in window_info.items())
                    emit(
                        f"step {state.step}/{total_steps} (epoch {state.step / steps_per_epoch:.2f}) loss "
                        f"{np.mean(window_losses):.4f}{logged} lr {lr:.2e} | {rate:.2f} steps/s, "
                        f"{rate * batch_size * accum:.1f} windows/s | ETA {format_eta((total_steps - state.step) / rate)}"
                    )
                    window_losses, window_info = [], {}
                if eval_due():
                    evaluate()
                if guard.triggered:
                    raise StopRequested
                every = int(s["checkpoint_every"] or 0)
                if every and state.step % every == 0 and state.step < total_steps and not state.stopped_early:
                    checkpoint()  # not after the last step: the model is saved to output_dir next
            if eval_due():
                evaluate()
        except StopRequested:
            path = checkpoint()
            assert guard.signum is not None
            emit(f"received {signal.Signals(guard.signum).name}: checkpoint saved at step {state.step} in {path}")
            raise TrainingPreempted(guard.signum, state.step, path) from None

    if s["keep_best"] and best_weights is not None:
        model.load_state_dict(best_weights)
    saved_step = state.best_step if s["keep_best"] and state.best_step is not None else state.step
    segment = time.perf_counter() - segment_start[0]
    import transformers

    summary: dict[str, Any] = {
        "model_name_or_path": str(model_name_or_path),
        "resolved_model": resolve_model(model_name_or_path),
        "steps": state.step,
        "total_steps": total_steps,
        "steps_per_epoch": steps_per_epoch,
        "epochs_done": state.step / steps_per_epoch,
        "saved_step": saved_step,
        "best_step": state.best_step,
        "best_validation_loss": state.best_loss,
        "validation_losses": state.validation_losses,
        "validation_curves": {"validation": state.validation_losses, **state.validation_curves},
        "validation_sets": {
            name: {"n_examples": len(subset), "n_features": len(feats)} for name, (subset, feats) in evals.items()
        },
        "init": init or "pretrained",
        "trainable": trainable,
        "objective_id": objective_id,
        "objective_fingerprint": objective_fingerprint,
        "selection": selection_description,
        "best_score": state.best_score,
        "selection_history": state.selection_history,
        "train_losses": state.train_losses,
        "stopped_early": state.stopped_early,
        "resumed_from_step": resumed_from,
        "device": str(device),
        "bf16": bf16,
        "threads": torch.get_num_threads(),
        "wall_time_s": time.perf_counter() - t_start,
        "train_wall_time_s": state.wall_time_s + segment,
        "n_train_examples": len(train_frame),
        "n_train_features": len(train_features),
        "n_valid_examples": len(valid_subset),
        "n_valid_features": len(valid_features),
        "settings": s,
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__},
    }
    save_model_dir(output_dir, model, tokenizer, summary)
    score_note = f", selection score {state.best_score}" if selection is not None else ""
    emit(
        f"saved the model of step {saved_step} (validation loss {state.best_loss}{score_note}) to {output_dir}; "
        f"{state.step} steps in {summary['train_wall_time_s']:.0f}s"
    )
    return summary


