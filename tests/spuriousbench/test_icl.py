"""In-context learning (``spurious.spuriousbench.icl``) with a tiny randomly initialised causal LM over the MiniLM
vocabulary (built from a config, nothing downloaded)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from spurious.core.models import load_tokenizer
from spurious.spuriousbench import icl

MINILM = "embedded:all-MiniLM-L6-v2"


@pytest.fixture(scope="module")
def tiny_lm(tmp_path_factory) -> Path:
    """A random 2-layer GPT-2 over the MiniLM WordPiece vocabulary (context 96 tokens), saved with its tokenizer."""
    from transformers import GPT2Config, GPT2LMHeadModel

    tok = load_tokenizer(MINILM)
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=tok.vocab_size, n_positions=96, n_embd=32, n_layer=2, n_head=2)
    path = tmp_path_factory.mktemp("tiny_lm") / "model"
    GPT2LMHeadModel(config).save_pretrained(path)
    tok.save_pretrained(path)
    return path


def split(n: int, prevalence: float = 0.2, strength: float = 0.9, seed: int = 0) -> pd.DataFrame:
    """A feature's split: balanced labels, ``prevalence`` of the rows with the feature, ``strength`` of those
    positive (label 1 = the target)."""
    n_f = int(round(prevalence * n))
    pos_f = int(round(strength * n_f))
    rows = [(True, 1)] * pos_f + [(True, 0)] * (n_f - pos_f)
    rows += [(False, 1)] * (n // 2 - pos_f) + [(False, 0)] * (n // 2 - (n_f - pos_f))
    rng = np.random.default_rng(seed)
    words = ["good", "bad", "film", "plot", "long", "fun"]
    frame = pd.DataFrame(
        {
            "id": [str(i) for i in range(n)],
            "text_a": [" ".join(rng.choice(words, 4)) + (" !" if f else " .") for f, _ in rows],
            "text_b": None,
            "label": [y for _, y in rows],
            "has_feature": [f for f, _ in rows],
        }
    )
    frame.attrs["label_names"] = ["negative", "positive"]
    return frame


def test_demonstrations_have_the_configured_prevalence_and_strength():
    train = split(200)
    demos = icl.draw_demonstrations(train, shots=8, prevalence=0.5, strength=1.0, target_label=1, seed=3)
    # §5.1: every positive demonstration carries the feature, no negative one does
    assert len(demos) == 8 and (demos["label"] == 1).sum() == 4
    assert (demos.loc[demos["label"] == 1, "has_feature"].all()
            and not demos.loc[demos["label"] == 0, "has_feature"].any())
    demos = icl.draw_demonstrations(train, shots=20, prevalence=0.2, strength=0.75, target_label=1, seed=3)
    f = demos["has_feature"].to_numpy()
    assert f.sum() == 4 and (demos["label"].to_numpy()[f] == 1).sum() == 3 and (demos["label"] == 1).sum() == 10
    assert demos["id"].is_unique
    again = icl.draw_demonstrations(train, shots=20, prevalence=0.2, strength=0.75, target_label=1, seed=3)
    assert demos["id"].tolist() == again["id"].tolist()
    other = icl.draw_demonstrations(train, shots=20, prevalence=0.2, strength=0.75, target_label=1, seed=4)
    assert demos["id"].tolist() != other["id"].tolist()
    # the negative target (App. D): the feature goes with label 0
    neg = icl.draw_demonstrations(split(200, strength=0.1), shots=8, prevalence=0.5, strength=1.0, target_label=0,
                                  seed=0)
    assert neg.loc[neg["has_feature"], "label"].eq(0).all()
    with pytest.raises(ValueError, match="even number"):
        icl.draw_demonstrations(train, shots=7, prevalence=0.5, strength=1.0, target_label=1, seed=0)
    with pytest.raises(ValueError, match="rows with the feature and label 0"):
        icl.draw_demonstrations(split(40, strength=1.0), shots=8, prevalence=1.0, strength=0.5, target_label=1, seed=0)


def test_templates_render_demonstrations_and_queries():
    t = icl.PAPER_TEMPLATES["sst2"]["digits"]
    assert t.render(" a fine film. ", None, 1) == "Sentence: a fine film.\nLabel: 1"
    assert t.render("a fine film.", None, None) == "Sentence: a fine film.\nLabel: "
    words = icl.PAPER_TEMPLATES["mnli"]["words"]
    assert words.render("A man sleeps.", "A person rests.", 1) == "A man sleeps. DOES IT MEAN A person rests.? YES"
    assert words.is_pair and not t.is_pair
    with pytest.raises(ValueError, match="must end with"):
        icl.ICLTemplate("{label}: {text_a}", ("0", "1"))
    assert icl.template_for("sst2", {"paper": "words"}).label_words == ("negative", "positive")
    custom = icl.template_for("sst2", {"example": "Q: {text_a} A: {label}", "label_words": ["no", "yes"]})
    assert custom.separator == "\n\n" and custom.label_words == ("no", "yes")


class _EveryPosition(torch.nn.Module):
    """A causal LM without ``logits_to_keep``: its logits cover every position."""

    def __init__(self, lm: torch.nn.Module) -> None:
        super().__init__()
        self.lm, self.config = lm, lm.config

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> object:
        return self.lm(input_ids=input_ids, attention_mask=attention_mask)


def test_scores_are_the_lms_log_probabilities_of_the_label_words(tiny_lm):
    model, tok = icl.load_causal_lm(tiny_lm)
    train, queries = split(40), split(6, seed=1)
    demos = icl.draw_demonstrations(train, shots=2, prevalence=0.5, strength=1.0, target_label=1, seed=0)
    t = icl.PAPER_TEMPLATES["sst2"]["words"]
    out, record = icl.predict_icl(model, tok, demos, queries, t, batch_size=3, device="cpu", bf16=False)
    assert list(out.columns) == ["id", "label", "prediction", "correct", "probabilities"]
    assert record["n_truncated_demos"] == 0 and record["shots"] == 2
    # by hand for the first query: the prompt is the demonstrations, then the query up to "Sentiment:"; each label
    # word is scored as the summed log-probability of the tokens of " word" after it
    prompt = "".join(t.render(demos["text_a"][i], None, int(demos["label"][i])) + "\n\n" for i in range(2))
    prompt += "Sentence: " + queries["text_a"][0].strip() + "\nSentiment:"
    prefix = tok(prompt, add_special_tokens=False)["input_ids"]
    scores = []
    with torch.no_grad():
        for word in t.label_words:
            ids = tok(" " + word, add_special_tokens=False)["input_ids"]
            logits = model(torch.tensor([prefix + ids])).logits[0].float()
            logp = torch.log_softmax(logits, dim=-1)
            scores.append(sum(float(logp[len(prefix) - 1 + j, ids[j]]) for j in range(len(ids))))
    expected = np.exp(np.array(scores) - max(scores))
    np.testing.assert_allclose(out["probabilities"][0], expected / expected.sum(), rtol=1e-4)
    assert out["prediction"][0] == int(np.argmax(scores))
    # a causal LM whose forward cannot keep only some positions' logits is scored over every position, alike
    full, _ = icl.predict_icl(_EveryPosition(model), tok, demos, queries, t, batch_size=3, device="cpu", bf16=False)
    np.testing.assert_allclose(np.stack(full["probabilities"]), np.stack(out["probabilities"]), rtol=1e-5)
    # the same predictions whatever the batch size (padding on the right does not reach the scored positions)
    again, _ = icl.predict_icl(model, tok, demos, queries, t, batch_size=1, device="cpu", bf16=False)
    np.testing.assert_allclose(np.stack(again["probabilities"]), np.stack(out["probabilities"]), rtol=1e-4)
    # nor batch widths rounded up to a multiple of 32 (pad_to_multiple_of; never beyond the 96-token context)
    padded, _ = icl.predict_icl(model, tok, demos, queries, t, batch_size=3, device="cpu", bf16=False,
                                pad_to_multiple_of=32)
    np.testing.assert_allclose(np.stack(padded["probabilities"]), np.stack(out["probabilities"]), rtol=1e-4)


def test_a_prompt_longer_than_the_context_keeps_the_latest_demonstrations(tiny_lm):
    model, tok = icl.load_causal_lm(tiny_lm)
    demos = icl.draw_demonstrations(split(100), shots=12, prevalence=0.5, strength=1.0, target_label=1, seed=0)
    queries = split(4, seed=2)
    out, record = icl.predict_icl(
        model, tok, demos, queries, icl.PAPER_TEMPLATES["sst2"]["digits"], device="cpu", bf16=False
    )
    # 12 demonstrations of ~12 tokens do not fit the 96-token context: every query drops the earliest ones
    assert record["context"] == 96 and record["n_truncated_demos"] == 4 and record["prompt_tokens_mean"] <= 96
    assert len(out) == 4
    pairs = split(4).assign(text_b="a hypothesis")
    with pytest.raises(ValueError, match="single texts"):
        icl.predict_icl(model, tok, demos, pairs, icl.PAPER_TEMPLATES["sst2"]["digits"], device="cpu")
