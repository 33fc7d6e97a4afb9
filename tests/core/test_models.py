"""Model loading: the embedded MiniLM, a fresh QA head, and from-scratch initialisation (bias models, App. B.2.1)."""

from __future__ import annotations

import torch

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
