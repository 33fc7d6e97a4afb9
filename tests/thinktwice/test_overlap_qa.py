"""The lexical-overlap bias model (spurious.thinktwice.overlap_qa): its input features by hand, save/load, and that it
learns an overlap shortcut and nothing the overlap does not give away."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from spurious.core.metrics import evaluate
from spurious.core.models import load_qa_model, load_tokenizer
from spurious.core.train import qa
from spurious.thinktwice.overlap_qa import OverlapQAModel, from_checkpoint

MINILM = "embedded:all-MiniLM-L6-v2"


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer(MINILM)


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return from_checkpoint(MINILM).eval()


def test_features_by_hand(tokenizer, model):
    enc = tokenizer(["where was the cat born?"], ["the cat was born in paris."], return_tensors="pt",
                    padding="max_length", max_length=20)
    tokens = tokenizer.convert_ids_to_tokens(enc["input_ids"][0])
    assert tokens[:15] == ["[CLS]", "where", "was", "the", "cat", "born", "?", "[SEP]",
                           "the", "cat", "was", "born", "in", "paris", "."]
    _, features, context = model.token_features(enc["input_ids"], enc["attention_mask"])
    exact, soft, is_context, is_cls = features[0].unbind(-1)
    # context: positions 8..14 ("the cat was born in paris ."); the [SEP]s, the question and padding are not
    assert torch.nonzero(is_context).flatten().tolist() == list(range(8, 15))
    assert torch.nonzero(is_cls).flatten().tolist() == [0]
    # "the", "cat", "was", "born" occur in the question; "in", "paris", "." do not
    assert torch.nonzero(exact).flatten().tolist() == [8, 9, 10, 11]
    # soft match: 1 for the exact matches, the largest cosine with a question token otherwise, 0 outside the context
    emb = torch.nn.functional.normalize(model.embeddings.weight.detach(), dim=-1)
    question_ids = enc["input_ids"][0, 1:7]
    paris = enc["input_ids"][0, 13]
    expected = max(0.0, float((emb[question_ids] @ emb[paris]).max()))
    assert soft[13].item() == pytest.approx(expected, abs=1e-6)
    assert soft[8:12].tolist() == pytest.approx([1.0] * 4, abs=1e-6)
    assert soft[:8].abs().sum() == 0 and soft[15:].abs().sum() == 0


def test_question_words_reach_the_model_only_through_the_overlap_features(tokenizer, model):
    # the same question words in another order: the overlap features (a max over the question's tokens) are the same,
    # so the logits must be too; a model that read the question's word embeddings would see the order
    a = tokenizer(["who wrote the cat poem?"], ["the cat sat on the mat."], return_tensors="pt")
    b = tokenizer(["poem cat the wrote who?"], ["the cat sat on the mat."], return_tensors="pt")
    assert a["input_ids"].shape == b["input_ids"].shape
    with torch.no_grad():
        out_a, out_b = model(**a), model(**b)
    assert torch.allclose(out_a.start_logits, out_b.start_logits, atol=1e-6)


def test_save_and_load_round_trip(tokenizer, model, tmp_path):
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    loaded = load_qa_model(tmp_path).eval()
    assert isinstance(loaded, OverlapQAModel)
    enc = tokenizer(["where was the cat born?"], ["the cat was born in paris."], return_tensors="pt")
    with torch.no_grad():
        assert torch.equal(model(**enc).start_logits, loaded(**enc).start_logits)
    # the embeddings stay frozen: no gradient reaches them, whatever the loader set requires_grad to
    loaded.train()
    loaded(**enc).start_logits.sum().backward()
    assert loaded.embeddings.weight.grad is None and loaded.qa_outputs.weight.grad is not None


def test_left_padded_windows_are_refused(model):
    ids = torch.tensor([[0, 0, 101, 2073, 102, 2073, 102]])
    with pytest.raises(ValueError, match="right-padded"):
        model(input_ids=ids, attention_mask=(ids != 0).long())


def _shortcut_frame(n: int, seed: int) -> pd.DataFrame:
    """Contexts of 12 random words; the question names one of them, the answer is the word right after it."""
    words = ["apple", "river", "stone", "cloud", "green", "table", "music", "paper", "window", "garden", "silver",
             "horse", "bread", "candle", "forest", "mirror", "ocean", "pencil", "rocket", "summer", "tiger", "violin",
             "winter", "yellow"]
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        chosen = [words[k] for k in rng.choice(len(words), size=12, replace=False)]
        pos = int(rng.integers(0, 11))
        context = " ".join(chosen)
        start = len(" ".join(chosen[:pos + 1])) + 1
        rows.append({"id": f"s{seed}-{i}", "title": "t", "context": context,
                     "question": f"what follows {chosen[pos]} here?",
                     "answers": {"text": [chosen[pos + 1]], "answer_start": [start]}})
    return pd.DataFrame(rows)


def test_learns_the_overlap_shortcut(tmp_path: Path):
    train, valid = _shortcut_frame(400, seed=0), _shortcut_frame(100, seed=1)
    settings = {"max_length": 48, "stride": 16, "batch_size": 16, "learning_rate": 1e-2, "warmup_ratio": 0.0,
                "max_steps": 150, "eval_every": None, "seed": 0, "threads": 1}
    qa.train_qa(train, valid, model_name_or_path=MINILM, output_dir=tmp_path / "m", checkpoint_dir=tmp_path / "c",
                settings=settings, log=lambda m: None, init="overlap")
    predictions = qa.predict_qa(tmp_path / "m", valid, settings=settings)
    # "the word after the one the question names" is all the overlap gives, and all the task needs; a model that
    # ignored the overlap could not beat 1/12 on held-out contexts
    assert evaluate(valid, predictions)["exact_match"] > 90
