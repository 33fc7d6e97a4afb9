"""``attention: packed`` on a GPU: torch's ``varlen_attn`` against the block-diagonal reference and against padding.

Skipped without CUDA or without ``torch.nn.attention.varlen``; on a GPU node:
``pytest -q tests/core/test_packing_cuda.py`` (about a minute). The CPU tests (tests/core/test_packing.py) check the
packed inputs with the reference attention in float32; these check the kernel itself, in bf16, where only rounding may
differ.
"""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest
import torch
from transformers import AutoModelForQuestionAnswering, BertConfig

from spurious.core.models import load_tokenizer
from spurious.core.train import packing, qa
from spurious.core.train.qa.inference import _model_outputs, qa_loss
from spurious.core.train.training import autocast, to_device
from tests.core.test_packing import FAMILIES, MINILM, tiny_model

HAS_VARLEN = importlib.util.find_spec("torch.nn.attention.varlen") is not None
pytestmark = pytest.mark.skipif(
    not (torch.cuda.is_available() and HAS_VARLEN), reason="needs a CUDA GPU and torch.nn.attention.varlen"
)
CUDA = torch.device("cuda")


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer(MINILM)


@pytest.fixture(scope="module")
def windows(squad_dev, tokenizer):
    """32 windows (max_length 384, as the paper's settings) of 80 to 180 tokens."""
    features = qa.featurize(squad_dev.iloc[:60], tokenizer, max_length=384, stride=128)
    return features, np.random.default_rng(0).choice(len(features), 32, replace=False)


def test_varlen_attention_equals_the_block_diagonal_reference():
    torch.manual_seed(0)
    batch = {"attention_mask": torch.zeros(4, 100, dtype=torch.long),
             "input_ids": torch.zeros(4, 100, dtype=torch.long)}
    for row, length in enumerate((37, 100, 5, 64)):
        batch["attention_mask"][row, :length] = 1
    packed = packing.pack(batch, position_offset=0, pad_token_id=0)  # with its tail segments
    length, cu = packed["packed_input_ids"].shape[1], packed["cu_seq_lens"].to(CUDA)
    q, k, v = (torch.randn(1, 12, length, 64, device=CUDA, dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    kwargs = {"cu_seq_lens_q": cu, "max_length_q": 100, "scaling": 0.125}
    fast, _ = packing.varlen_attention(None, q, k, v, None, **kwargs)
    grads_fast = torch.autograd.grad(fast.float().square().sum(), (q, k, v))
    ref_inputs = [x.detach().float().requires_grad_() for x in (q, k, v)]
    slow, _ = packing.reference_attention_any_precision(None, *ref_inputs, None, **kwargs)
    grads_slow = torch.autograd.grad(slow.square().sum(), ref_inputs)
    assert fast.shape == slow.shape == (1, length, 12, 64)
    assert torch.allclose(fast.float(), slow, atol=2e-2, rtol=2e-2), float((fast.float() - slow).abs().max())
    for a, b in zip(grads_fast, grads_slow, strict=True):
        assert torch.allclose(a.float(), b, atol=5e-2, rtol=5e-2), float((a.float() - b).abs().max())


def test_enable_checks_precision_and_switches_to_varlen(tokenizer, monkeypatch):
    monkeypatch.delenv(packing.REFERENCE_ENV, raising=False)
    model = tiny_model(AutoModelForQuestionAnswering, "bert", tokenizer)
    with pytest.raises(packing.PackedAttentionUnavailable, match="bf16 is off"):
        packing.enable(model, "packed", device=CUDA, bf16=False)
    assert packing.enable(model, "packed", device=CUDA, bf16=True)
    assert model.config._attn_implementation == packing.PACKED_ATTENTION


@pytest.mark.parametrize("family", FAMILIES)
def test_packed_qa_on_varlen_equals_padding_in_bf16(family, tokenizer, windows, monkeypatch):
    monkeypatch.delenv(packing.REFERENCE_ENV, raising=False)
    features, rows = windows
    out = []
    for attention in ("padded", "packed"):
        model = tiny_model(AutoModelForQuestionAnswering, family, tokenizer).to(CUDA).eval()
        packing.enable(model, attention, device=CUDA, bf16=True)
        batch = to_device(features.collate(rows, packed_offset=packing.position_offset(model)), CUDA)
        with autocast(CUDA, True):
            start, end, _ = _model_outputs(model, batch)
        mask = batch["attention_mask"]
        loss = qa_loss(start, end, batch["start_positions"], batch["end_positions"], mask)
        out.append((start.float()[mask.bool()], float(loss)))
    (a, loss_a), (b, loss_b) = out
    # the tiny models' logits are below 0.3; on CPU in bf16 the reference differs from padding by at most 5e-4
    assert torch.allclose(a, b, atol=1e-2, rtol=0), float((a - b).abs().max())
    assert abs(loss_a - loss_b) <= 2e-3 * abs(loss_a)


def test_a_packed_training_step_does_not_wait_for_the_device(tokenizer, windows):
    features, rows = windows
    model = tiny_model(AutoModelForQuestionAnswering, "roberta", tokenizer).to(CUDA).train()
    packing.enable(model, "packed", device=CUDA, bf16=True)
    batch = features.collate(rows, packed_offset=packing.position_offset(model))
    batch = {k: v.to(CUDA) for k, v in batch.items()}
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        with autocast(CUDA, True):
            start, end, _ = _model_outputs(model, batch)
        qa_loss(start, end, batch["start_positions"], batch["end_positions"], batch["attention_mask"]).backward()
    finally:
        torch.cuda.set_sync_debug_mode("default")


def test_train_qa_packed_follows_padding_at_dropout_0(tmp_path, squad_dev, tokenizer, monkeypatch):
    """20 steps of a small BERT (dropout 0) in bf16: the packed loss curve within 1 % of the padded one."""
    monkeypatch.delenv(packing.REFERENCE_ENV, raising=False)
    torch.manual_seed(0)
    AutoModelForQuestionAnswering.from_config(BertConfig(
        vocab_size=len(tokenizer), hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
        intermediate_size=1024, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
    )).save_pretrained(tmp_path / "small")
    tokenizer.save_pretrained(tmp_path / "small")
    settings = {"max_length": 256, "stride": 64, "batch_size": 16, "learning_rate": 1e-4, "max_steps": 20,
                "eval_every": None, "checkpoint_every": 1000, "log_every": 5, "seed": 0, "device": "cuda",
                "bf16": True, "eval_max_examples": 16}
    losses = {}
    for attention in ("padded", "packed"):
        summary = qa.train_qa(
            squad_dev.iloc[:200], squad_dev.iloc[200:216], model_name_or_path=str(tmp_path / "small"),
            output_dir=tmp_path / attention, checkpoint_dir=tmp_path / f"c-{attention}",
            settings={**settings, "attention": attention}, log=lambda m: None,
        )
        losses[attention] = np.array([r["loss"] for r in summary["train_losses"]])
    assert len(losses["packed"]) == 20
    assert np.allclose(losses["packed"], losses["padded"], rtol=1e-2), (losses["padded"], losses["packed"])
