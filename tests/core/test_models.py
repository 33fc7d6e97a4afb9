"""Model loading: the embedded MiniLM, a fresh QA head, and from-scratch initialisation (bias models, App. B.2.1)."""

from __future__ import annotations

import pytest
import torch

from spurious.core import models
from spurious.core.models import load_config, load_qa_model, load_tokenizer

EMBEDDED = "embedded:all-MiniLM-L6-v2"


def test_from_scratch_keeps_the_architecture_and_vocabulary_but_not_the_weights():
    config = load_config(EMBEDDED)
    assert config.hidden_size == 384 and config.num_hidden_layers == 6
    torch.manual_seed(0)
    scratch = load_qa_model(EMBEDDED, from_scratch=True)
    pretrained = load_qa_model(EMBEDDED)
    emb_s = scratch.base_model.embeddings.word_embeddings.weight.detach()
    emb_p = pretrained.base_model.embeddings.word_embeddings.weight.detach()
    assert emb_s.shape == emb_p.shape == (len(load_tokenizer(EMBEDDED)), 384)  # the tokenizer is shared
    assert not torch.allclose(emb_s, emb_p)
    # BERT-style random init: N(0, initializer_range) embeddings
    assert abs(float(emb_s.std()) - config.initializer_range) < 0.005
    assert sum(p.numel() for p in scratch.parameters()) == sum(p.numel() for p in pretrained.parameters())


@pytest.mark.parametrize("implementation", ["sdpa", "eager"])
@pytest.mark.parametrize("model_type", sorted(models.FOUR_D_MASK_MODEL_TYPES))
def test_the_prepared_attention_mask_gives_the_logits_of_the_padding_mask(model_type, implementation):
    """``model_attention_mask`` hands these encoders a prepared 4D mask (which transformers uses as it is, so that it
    never asks on the host whether a batch has padding): the logits at every token are those of the 2D mask, bit for
    bit, for a batch with and without padding; a model of another type keeps the 2D mask."""
    from transformers import AutoConfig, AutoModelForQuestionAnswering

    sizes = {"vocab_size": 100, "max_position_embeddings": 64}
    if model_type == "distilbert":
        sizes |= {"dim": 32, "n_layers": 2, "n_heads": 2, "hidden_dim": 64}
    else:
        sizes |= {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 64}
    torch.manual_seed(0)
    config = AutoConfig.for_model(model_type, **sizes)
    model = AutoModelForQuestionAnswering.from_config(config, attn_implementation=implementation).eval()
    ids = torch.randint(5, 100, (3, 10))
    for mask in (torch.tensor([[1] * 10, [1] * 6 + [0] * 4, [1] * 3 + [0] * 7]), torch.ones(3, 10, dtype=torch.long)):
        prepared = models.model_attention_mask(model, mask)
        assert prepared.shape == (3, 1, 1, 10)
        assert prepared.dtype == (torch.bool if implementation == "sdpa" else torch.float32)
        with torch.no_grad():
            plain = model(input_ids=ids, attention_mask=mask).start_logits
            given = model(input_ids=ids, attention_mask=prepared).start_logits
        assert torch.equal(given[mask.bool()], plain[mask.bool()])
    mpnet = AutoConfig.for_model("mpnet", vocab_size=100, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                 intermediate_size=64)  # fmt: skip
    assert models.model_attention_mask(AutoModelForQuestionAnswering.from_config(mpnet), mask) is mask
