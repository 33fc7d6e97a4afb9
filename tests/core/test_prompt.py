"""Prompt-based fine-tuning (``spurious.core.train.prompt``) and the classifier's best-checkpoint selection by dev
accuracy (``eval_every``), on a randomly initialised tiny BERT masked LM with the MiniLM vocabulary (no network,
seconds)."""

from __future__ import annotations

import functools
import json
import shutil
import signal
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from safetensors.torch import load_file

from spurious.core.models import load_tokenizer
from spurious.core.train import classifier, prompt
from spurious.core.train.checkpoints import MODEL_STATE_FILE
from spurious.core.train.prompt import PAPER_PROMPTS, PromptClassifier, PromptSpec
from spurious.spuriousbench import construction as spuriousbench

MINILM = "embedded:all-MiniLM-L6-v2"
WORDS = ["the", "movie", "plot", "was", "a", "very", "story", "actor", "and", "it", "film", "scene", "long"]


@pytest.fixture(scope="module", autouse=True)
def _restore_torch_threads():
    """The runs below use one thread (a tiny model on a busy machine trains several times faster so); the setting is
    process-wide, so it is put back for the other test modules."""
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def tok():
    return load_tokenizer(MINILM)


@pytest.fixture(scope="module")
def tiny_mlm(tok, tmp_path_factory) -> Path:
    """A random tiny BertForMaskedLM over the MiniLM (uncased WordPiece) vocabulary, saved with its tokenizer."""
    from transformers import BertConfig, BertForMaskedLM

    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=tok.vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
    )
    path = tmp_path_factory.mktemp("tiny_mlm") / "model"
    BertForMaskedLM(config).save_pretrained(path)
    tok.save_pretrained(path)
    return path


def toy_frame(n: int, seed: int, *, flip: bool = False) -> pd.DataFrame:
    """Sentiment-like toy rows: label 1 iff the text holds "good" (label 0 rows hold "bad"); ``flip`` inverts labels."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        words = list(rng.choice(WORDS, int(rng.integers(1, 3))))
        label = i % 2
        words.insert(int(rng.integers(0, len(words) + 1)), "good" if label else "bad")
        rows.append((str(i), " ".join(words), None, 1 - label if flip else label))
    frame = pd.DataFrame(rows, columns=["id", "text_a", "text_b", "label"])
    frame.attrs.update(label_names=["negative", "positive"], is_pair=False)
    return frame


def pair_frame(premises: list[str], hypotheses: list[str]) -> pd.DataFrame:
    frame = pd.DataFrame(
        {
            "id": [str(i) for i in range(len(premises))],
            "text_a": premises,
            "text_b": hypotheses,
            "label": [i % 2 for i in range(len(premises))],
        }
    )
    frame.attrs.update(label_names=["non_entailment", "entailment"], is_pair=True)
    return frame


def quiet(message: str) -> None:
    pass


# --- templates ------------------------------------------------------------------------------------------------------


def test_paper_templates_render_as_lm_bff():
    sst = toy_frame(1, 0).assign(text_a=["A gripping, funny film."])
    assert prompt.apply_template(sst, PAPER_PROMPTS["sst2"], "[MASK]") == ["A gripping, funny film. It was [MASK]."]
    mnli = pair_frame(
        ["The cat sat on the mat.", "No punctuation here", "Really?!", "Done.  "],
        ["A cat is sitting.", "Here it is", "It was real", "Finished"],
    )
    assert prompt.apply_template(mnli, PAPER_PROMPTS["mnli"], "<mask>") == [
        "The cat sat on the mat? <mask>, a cat is sitting.",  # premise loses its ".", hypothesis lower-cased
        "No punctuation here? <mask>, here it is",  # no final punctuation: the last letter stays
        "Really?!? <mask>, it was real",  # only a full stop goes: "!" may be the planted feature
        "Done? <mask>, finished",  # trailing whitespace first
    ]
    assert PAPER_PROMPTS["sst2"].label_words == ("terrible", "great")  # label 0 negative, 1 positive
    assert PAPER_PROMPTS["mnli"].label_words == ("No", "Yes")  # label 0 non-entailment, 1 entailment
    with pytest.raises(ValueError, match="sentence pairs"):
        prompt.apply_template(mnli, PAPER_PROMPTS["sst2"], "[MASK]")
    with pytest.raises(ValueError, match="single texts"):
        prompt.apply_template(sst, PAPER_PROMPTS["mnli"], "[MASK]")


PREMISES = [
    "The committee approved a remarkably simple plan for the old harbour.",
    "She thinks the new library is beautiful; the old one was dark!",
    "A tall man waits at the busy station*",
]
HYPOTHESES = ["The plan was approved.", "She likes the library.", "Someone is waiting."]


@functools.cache
def _nlp():
    return spuriousbench.load_nlp()


def _contains(ids: list[int], needle: list[int]) -> bool:
    return any(ids[i : i + len(needle)] == needle for i in range(len(ids) - len(needle) + 1))


@pytest.mark.parametrize(
    "feature", [name for name, spec in spuriousbench.FEATURES.items() if spec.kind == "insertion"]
)
def test_every_inserted_feature_survives_every_paper_template(feature, tok):
    """Issue 13: LM-BFF's MNLI template dropped the premise's last character, which is where SpuriousBench puts its
    punctuation features; every insertion feature must reach the model's input under every paper template of its
    subsets (and under standard fine-tuning's encoding), as the token ids of the feature itself."""
    spec = spuriousbench.FEATURES[feature]
    nlp = _nlp() if spec.category == "adverb" else None
    premises = [spuriousbench.insert(t, spec, nlp(t) if nlp else None) for t in PREMISES]
    needle = tok(spec.value.strip(), add_special_tokens=False)["input_ids"]
    for dataset in spec.datasets:
        frame = pair_frame(premises, HYPOTHESES) if dataset == "mnli" else toy_frame(3, 0).assign(text_a=premises)
        encodings = {
            "prompt": prompt.encode_prompts(frame, tok, PAPER_PROMPTS[dataset], max_length=128).input_ids,
            "standard": classifier.encode(frame, tok, max_length=128).input_ids,
        }
        for how, rows in encodings.items():
            for text, ids in zip(premises, rows, strict=True):
                assert _contains(ids, needle), f"{feature} lost from {text!r} ({dataset}, {how}): {tok.decode(ids)}"


@pytest.mark.parametrize(
    ("template", "match"),
    [
        ("{text_a} It was {msk}.", "unknown placeholders"),
        ("{text_a} {mask} {mask}", "exactly once"),
        ("{text_b} It was {mask}.", "must use text_a"),
        ("{text_a} {text_a_lower} {mask}", "only once"),
        ("{text_a} {{mask}}", "stray brace"),
    ],
)
def test_malformed_templates_are_refused(template, match):
    with pytest.raises(ValueError, match=match):
        PromptSpec(template, ("terrible", "great"))


# --- label words ----------------------------------------------------------------------------------------------------


def test_label_word_ids_are_single_vocabulary_tokens(tok):
    # the uncased vocabulary: "Yes"/"No" become "yes"/"no"
    assert prompt.label_word_ids(tok, ["terrible", "great"]) == tok.convert_tokens_to_ids(["terrible", "great"])
    assert prompt.label_word_ids(tok, ["No", "Yes"]) == tok.convert_tokens_to_ids(["no", "yes"])
    with pytest.raises(ValueError, match=r"'unbelievableness'.*BertTokenizer.*'unbelievable', '##ness'"):
        prompt.label_word_ids(tok, ["great", "unbelievableness"])
    with pytest.raises(ValueError, match="share a token"):
        prompt.label_word_ids(tok, ["yes", "Yes"])


def test_bpe_label_words_take_the_form_after_a_space():
    from tokenizers import ByteLevelBPETokenizer
    from transformers import PreTrainedTokenizerFast

    bpe = ByteLevelBPETokenizer()
    corpus = ["Yes , it was great", "No , it was terrible", "it was Yes or No"] * 5
    bpe.train_from_iterator(corpus, vocab_size=300, min_frequency=1, special_tokens=["<pad>", "<unk>", "<mask>"])
    fast = PreTrainedTokenizerFast(
        tokenizer_object=bpe._tokenizer, pad_token="<pad>", unk_token="<unk>", mask_token="<mask>"
    )
    # "Yes" is one token bare and after a space; the spaced one is taken (LM-BFF: " Yes" for RoBERTa)
    assert fast.convert_tokens_to_ids("Yes") != fast.convert_tokens_to_ids("ĠYes")
    assert prompt.label_word_ids(fast, ["Yes", "great"]) == fast.convert_tokens_to_ids(["ĠYes", "Ġgreat"])


# --- encoding and truncation ----------------------------------------------------------------------------------------


def test_truncation_cuts_the_texts_never_the_template_or_the_mask(tok):
    def ids(text: str) -> list[int]:
        return tok(text, add_special_tokens=False)["input_ids"]

    cls, sep, mask = tok.cls_token_id, tok.sep_token_id, tok.mask_token_id
    long_a = " ".join(["the film drags on"] * 15)
    sst = toy_frame(2, 0).assign(text_a=[long_a, "a fine film"])
    enc = prompt.encode_prompts(sst, tok, PAPER_PROMPTS["sst2"], max_length=16)
    tail = ids("it was") + [mask] + ids(".") + [sep]
    assert enc.input_ids[0] == [cls] + ids(long_a)[: 16 - 1 - len(tail)] + tail
    # a short row is the plain encoding of its templated string
    assert enc.input_ids[1] == tok("a fine film It was [MASK].")["input_ids"]
    assert enc.n_truncated == 1

    premise, hypothesis = " ".join(["a man plays the guitar"] * 8) + ".", " ".join(["people sing"] * 10)
    mnli = pair_frame([premise, premise, "A man plays."], ["Nobody sings.", hypothesis, "He plays."])
    enc = prompt.encode_prompts(mnli, tok, PAPER_PROMPTS["mnli"], max_length=25)
    prem, hyp_short, hyp_long = ids(premise[:-1]), ids("nobody sings."), ids(hypothesis)
    middle = ids("?") + [mask] + ids(",")  # template tokens: [CLS], ?, [MASK], ",", [SEP]
    budget = 25 - 2 - len(middle)
    # longest_first: the premise alone is cut while it is the longer text, then both lose tokens in turn
    assert enc.input_ids[0] == [cls] + prem[: budget - len(hyp_short)] + middle + hyp_short + [sep]
    assert enc.input_ids[1] == [cls] + prem[: budget // 2] + middle + hyp_long[: budget - budget // 2] + [sep]
    assert enc.input_ids[2] == tok("A man plays? [MASK], he plays.")["input_ids"]
    for row, pos in zip(enc.input_ids, enc.mask_positions, strict=True):
        assert len(row) <= 25 and row.count(mask) == 1 and row[pos] == mask
    with pytest.raises(ValueError, match="too short for the prompt template"):
        prompt.encode_prompts(sst, tok, PAPER_PROMPTS["sst2"], max_length=5)


# --- the classifier -------------------------------------------------------------------------------------------------


def test_prompt_classifier_logits_are_the_mlm_logits_at_the_mask(tok, tiny_mlm):
    from transformers import BertForMaskedLM

    mlm = BertForMaskedLM.from_pretrained(tiny_mlm).eval()
    texts = ["a fine film", "the plot was long and the actor was bad", "good"]
    word_ids = tok.convert_tokens_to_ids(["terrible", "great"])
    rows = [tok(f"{t} It was [MASK].")["input_ids"] for t in texts]
    positions = [r.index(tok.mask_token_id) for r in rows]
    width = max(map(len, rows))
    input_ids = torch.tensor([r + [tok.pad_token_id] * (width - len(r)) for r in rows])
    attention = torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in rows])
    with torch.no_grad():
        full = mlm(input_ids=input_ids, attention_mask=attention).logits  # (3, width, vocab)
        expected = torch.stack([full[i, p, word_ids] for i, p in enumerate(positions)])
        wrapped = PromptClassifier(mlm, word_ids)
        got = wrapped(input_ids, attention, mask_positions=torch.tensor(positions)).logits
    assert got.shape == (3, 2)
    assert wrapped._gathered  # the vocabulary projection ran on the mask rows only
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)


def test_a_checkpoint_without_a_masked_lm_head_is_refused(tmp_path):
    train = toy_frame(8, 0)
    with pytest.raises(ValueError, match="needs a checkpoint with a masked-LM head.*cls.predictions"):
        classifier.train_classifier(
            train,
            model_name_or_path=MINILM,
            output_dir=tmp_path / "m",
            checkpoint_dir=tmp_path / "ck",
            settings={"max_steps": 1, "device": "cpu"},
            prompt=PAPER_PROMPTS["sst2"],
            log=quiet,
        )
    # from scratch only the architecture is used: allowed
    assert type(prompt.load_masked_lm(MINILM, from_scratch=True)).__name__ == "BertForMaskedLM"


PROMPT_SETTINGS = {
    "batch_size": 16,
    "max_steps": 32,
    "learning_rate": 3e-3,
    "max_length": 16,
    "device": "cpu",
    "threads": 1,
}


@pytest.fixture(scope="module")
def prompt_run(tiny_mlm, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("prompt_run")
    train = toy_frame(64, 0)
    summary = classifier.train_classifier(
        train,
        model_name_or_path=str(tiny_mlm),
        output_dir=tmp / "model",
        checkpoint_dir=tmp / "ck",
        settings=PROMPT_SETTINGS,
        prompt=PAPER_PROMPTS["sst2"],
        log=quiet,
    )
    return tmp / "model", summary, train


def test_prompt_fine_tuning_learns_a_trivial_task(prompt_run):
    model_dir, summary, train = prompt_run
    losses = [r["loss"] for r in summary["train_losses"]]
    assert len(losses) == 32 and summary["saved_step"] == 32 and summary["eval_history"] == []
    assert np.mean(losses[:4]) > 0.65  # two labels, random model: about log 2
    assert np.mean(losses[-4:]) < 0.6 * np.mean(losses[:4])
    preds = classifier.predict_classifier(model_dir, train, device="cpu", log=quiet)
    assert np.mean(preds["prediction"].to_numpy() == train["label"].to_numpy()) >= 0.9


def test_saved_prompt_model_predicts_like_the_masked_lm_read_by_hand(prompt_run, tok):
    from transformers import BertForMaskedLM

    model_dir, summary, train = prompt_run
    meta = json.loads((model_dir / "prompt.json").read_text())
    word_ids = tok.convert_tokens_to_ids(["terrible", "great"])
    assert meta == {
        "template": "{text_a} It was {mask}.",
        "label_words": ["terrible", "great"],
        "label_word_ids": word_ids,
        "label_names": ["negative", "positive"],
    }
    assert summary["prompt"] == meta
    frame = toy_frame(8, 5)
    preds = classifier.predict_classifier(model_dir, frame, device="cpu", log=quiet)
    assert list(preds.columns) == list(classifier.PREDICTION_COLUMNS)
    mlm = BertForMaskedLM.from_pretrained(model_dir).eval()
    expected = []
    with torch.no_grad():
        for text in frame["text_a"]:  # one unpadded row at a time
            ids = tok(f"{text} It was [MASK].")["input_ids"]
            logits = mlm(input_ids=torch.tensor([ids])).logits[0, ids.index(tok.mask_token_id), word_ids]
            expected.append(torch.softmax(logits, dim=-1).numpy())
    np.testing.assert_allclose(np.stack(preds["probabilities"]), np.stack(expected), rtol=1e-5, atol=1e-6)
    assert (preds["prediction"] == np.stack(expected).argmax(axis=1)).all()
    wrong = frame.copy()
    wrong.attrs.update(label_names=["non_entailment", "entailment"])
    with pytest.raises(ValueError, match="differ from the data"):
        classifier.predict_classifier(model_dir, wrong, device="cpu", log=quiet)


def _sigterm_at(step: int):
    """A log callback that calls the installed SIGTERM handler when `step` is logged (as SLURM's warning would)."""

    def log(message: str) -> None:
        if message.startswith(f"step {step}/"):
            handler = signal.getsignal(signal.SIGTERM)
            assert callable(handler), "train_classifier did not install a SIGTERM handler"
            handler(signal.SIGTERM, None)

    return log


def test_the_prompt_is_part_of_the_run_fingerprint(tiny_mlm, tmp_path):
    def run(spec: PromptSpec, log):
        return classifier.train_classifier(
            toy_frame(16, 0),
            model_name_or_path=str(tiny_mlm),
            output_dir=tmp_path / "m",
            checkpoint_dir=tmp_path / "ck",
            settings=dict(PROMPT_SETTINGS, max_steps=3, log_every=1),
            prompt=spec,
            log=log,
        )

    with pytest.raises(classifier.TrainingPreempted):
        run(PAPER_PROMPTS["sst2"], _sigterm_at(1))
    with pytest.raises(RuntimeError, match="different run"):
        run(PromptSpec("{text_a} It was {mask}.", ("bad", "good")), quiet)


# --- best checkpoint by dev accuracy --------------------------------------------------------------------------------

# the dev labels are the training labels flipped: the better the model learns, the worse its dev accuracy, so the
# best evaluation is an early one and saving the last model instead would show
EVAL_SETTINGS = {
    "batch_size": 16,
    "max_steps": 14,
    "learning_rate": 3e-3,
    "max_length": 16,
    "device": "cpu",
    "threads": 1,
    "eval_every": 4,
    "checkpoint_every": 100,
    "log_every": 1,
}


def _train_eval(tiny_mlm: Path, tmp: Path, name: str, log=quiet, **overrides):
    return classifier.train_classifier(
        toy_frame(64, 0),
        model_name_or_path=str(tiny_mlm),
        output_dir=tmp / name / "model",
        checkpoint_dir=tmp / name / "ck",
        settings={**EVAL_SETTINGS, **overrides},
        eval_frame=toy_frame(32, 1, flip=True),
        log=log,
    )


@pytest.fixture(scope="module")
def eval_run(tiny_mlm, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("eval_run")
    return tmp, _train_eval(tiny_mlm, tmp, "ref")


def test_the_model_of_the_best_dev_accuracy_is_saved(eval_run):
    tmp, ref = eval_run
    history = ref["eval_history"]
    assert [r["step"] for r in history] == [4, 8, 12, 14]  # every 4 steps, and the last
    accuracies = np.array([r["accuracy"] for r in history])
    best = int(np.argmax(accuracies))  # the first maximum: ties go to the earliest
    assert ref["best_step"] == ref["saved_step"] == history[best]["step"]
    assert ref["best_eval_accuracy"] == accuracies[best]
    assert accuracies[-1] < accuracies[best]  # the last model is worse on dev: it must not be the saved one
    dev = toy_frame(32, 1, flip=True)
    preds = classifier.predict_classifier(tmp / "ref" / "model", dev, device="cpu", log=quiet)
    assert np.mean(preds["prediction"].to_numpy() == dev["label"].to_numpy()) == ref["best_eval_accuracy"]
    state = json.loads((tmp / "ref" / "model" / "training_state.json").read_text())
    assert state["saved_step"] == ref["best_step"] and state["settings"]["eval_every"] == 4


def test_preempted_and_resumed_run_saves_the_same_best_model(eval_run, tiny_mlm):
    tmp, ref = eval_run
    ckpt = tmp / "c" / "ck"
    # 1st segment: SIGTERM at step 4, where an evaluation is due: it is abandoned, the checkpoint holds step 4
    with pytest.raises(classifier.TrainingPreempted) as exc:
        _train_eval(tiny_mlm, tmp, "c", log=_sigterm_at(4))
    assert exc.value.step == 4
    saved = json.loads((ckpt / "step-00000004" / "state.json").read_text())
    assert saved["evaluation"] == {} and saved["last_eval_step"] == 0
    # the engine's checkpoint holds the training module, whose "model" is the PromptClassifier (the masked LM's keys)
    saved4 = torch.load(ckpt / "step-00000004" / MODEL_STATE_FILE, weights_only=True)
    step4 = {k.removeprefix("model."): v for k, v in saved4.items()}
    # 2nd segment: redoes the evaluation at 4, evaluates at 8, SIGTERM at 9 -> the best model travels in the checkpoint
    with pytest.raises(classifier.TrainingPreempted) as exc:
        _train_eval(tiny_mlm, tmp, "c", log=_sigterm_at(9))
    assert exc.value.step == 9
    saved = json.loads((ckpt / "step-00000009" / "state.json").read_text())
    assert [r["step"] for r in saved["evaluation"]["history"]] == [4, 8]
    assert (ckpt / "step-00000009" / "best_model.pt").is_file() == (saved["best_step"] != 9)
    # 3rd segment: finishes like the uninterrupted run
    c = _train_eval(tiny_mlm, tmp, "c")
    assert c["resumed_from_step"] == 9
    for key in ("eval_history", "best_step", "best_eval_accuracy", "saved_step", "train_losses", "fingerprint"):
        assert c[key] == ref[key], key
    wa = load_file(tmp / "ref" / "model" / "model.safetensors")
    wc = load_file(tmp / "c" / "model" / "model.safetensors")
    assert wa.keys() == wc.keys() and all(torch.equal(wa[k], wc[k]) for k in wa)
    # steps 4 and 8 are at chance on the balanced dev set (0.5, one class predicted): the tie goes to step 4, and the
    # saved model is the model of step 4 itself (the first segment's checkpoint)
    assert ref["best_step"] == 4
    assert all(torch.equal(wc[k], step4[k]) for k in wc)
    shutil.rmtree(tmp / "c")


def test_eval_every_epoch_evaluates_at_epoch_ends_and_the_last_step(tiny_mlm, tmp_path):
    # 64 rows, batches of 16: 4 steps per epoch; 10 steps end mid-epoch
    summary = _train_eval(tiny_mlm, tmp_path, "e", eval_every="epoch", max_steps=10)
    assert [r["step"] for r in summary["eval_history"]] == [4, 8, 10]
    assert summary["steps_per_epoch"] == 4


def test_eval_every_and_the_eval_frame_go_together(tiny_mlm, tmp_path):
    train, dev = toy_frame(8, 0), toy_frame(8, 1)
    common = {"model_name_or_path": str(tiny_mlm), "output_dir": tmp_path / "m", "checkpoint_dir": tmp_path / "ck"}
    with pytest.raises(ValueError, match="eval_every.*needs an eval_frame"):
        classifier.train_classifier(train, settings={"eval_every": 2}, **common)
    with pytest.raises(ValueError, match="eval_every is null"):
        classifier.train_classifier(train, eval_frame=dev, **common)
    for bad in (0, "epochs", True, 2.5):
        with pytest.raises(ValueError, match="eval_every must be"):
            classifier.resolve_settings({"eval_every": bad})
    assert classifier.resolve_settings({"eval_every": "epoch"})["eval_every"] == "epoch"
    assert classifier.resolve_settings(None)["eval_every"] is None
