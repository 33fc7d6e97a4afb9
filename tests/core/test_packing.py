"""Packed windows (``attention: packed``, spurious.core.train.packing) against padded batches, on CPU.

The packed path runs here through the block-diagonal reference (scaled-dot-product attention masked by
``cu_seq_lens``), the same inputs ``varlen_attn`` gets on CUDA (tests/core/test_packing_cuda.py compares the two on a
GPU). The reference refuses what FlashAttention refuses (float32 among them); the comparisons with padding here use
its any-precision version, to compare in float32. Tiny random BERT, RoBERTa and ELECTRA models (two layers, width 32,
dropout 0) on real SQuAD and QNLI text tokenised with MiniLM's vocabulary: each family's position ids and token types
must come out as in a padded batch, so logits, hidden states, losses and gradients agree in float32.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from transformers import (
    AutoModelForMaskedLM,
    AutoModelForQuestionAnswering,
    AutoModelForSequenceClassification,
    BertConfig,
    DistilBertConfig,
    ElectraConfig,
    RobertaConfig,
)

from spurious.core.config import result_settings
from spurious.core.data import classification
from spurious.core.models import load_tokenizer
from spurious.core.train import classifier, packing, qa
from spurious.core.train.prompt import PAPER_PROMPTS, PromptClassifier, encode_prompts, label_word_ids
from spurious.core.train.qa import finetune
from spurious.core.train.qa.inference import _model_outputs, qa_loss
from tests.conftest import SHARED
from tests.core.packing_reference import use_reference

QNLI_DEV = SHARED / "data" / "qnli" / "validation" / "0000.parquet"
MINILM = "embedded:all-MiniLM-L6-v2"
FAMILIES = ("bert", "roberta", "electra")
CPU = torch.device("cpu")


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer(MINILM)


def tiny_config(family: str, tokenizer, **extra):
    sizes = dict(
        vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=37,
        max_position_embeddings=512, type_vocab_size=2, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
    )
    sizes.update(extra)
    if family == "bert":
        return BertConfig(**sizes)
    if family == "roberta":  # pad_token_id 1, as roberta-base: positions start at 2
        return RobertaConfig(**sizes)
    return ElectraConfig(embedding_size=16, **sizes)


def tiny_model(auto, family: str, tokenizer, seed: int = 0, **extra):
    torch.manual_seed(seed)
    return auto.from_config(tiny_config(family, tokenizer, **extra))


@pytest.fixture(scope="module")
def windows(squad_dev, tokenizer):
    """Seven windows of different lengths (a full one among them) with labels, question and context masks."""
    features = qa.featurize(squad_dev.iloc[:40], tokenizer, max_length=64, stride=24)
    _, first = np.unique(features.lengths, return_index=True)  # one window of each length, shortest first
    picks = first[np.linspace(0, len(first) - 1, 7).astype(int)]
    assert len(set(features.lengths[picks])) == 7 and features.lengths[picks].max() == 64
    return features, picks


# ---------------------------------------------------------------------------------------------------------------------
# Packing by hand


def _hand_batch(pad_on_right: bool) -> dict[str, torch.Tensor]:
    rows = [[5, 6, 7], [8, 9, 10, 11, 12], [13, 14]]
    types = [[0, 0, 1], [0, 1, 1, 1, 1], [0, 1]]
    ids, mask, tt = (torch.zeros(3, 5, dtype=torch.long) for _ in range(3))
    for i, (r, t) in enumerate(zip(rows, types, strict=True)):
        sl = slice(0, len(r)) if pad_on_right else slice(5 - len(r), 5)
        ids[i, sl], mask[i, sl], tt[i, sl] = torch.tensor(r), 1, torch.tensor(t)
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": tt, "start_positions": torch.tensor([1, 2, 0])}


@pytest.mark.parametrize("pad_on_right", [True, False])
def test_pack_lays_windows_end_to_end_by_hand(pad_on_right):
    packed = packing.pack(_hand_batch(pad_on_right), position_offset=2, pad_token_id=0)
    # 3 windows of at most 5 tokens: bucket 64, so 64 tokens; the 54 after the windows in ceil(64/5)+1 = 14 segments
    assert packed["packed_input_ids"].shape == (1, 64)
    assert packed["packed_input_ids"][0, :10].tolist() == [5, 6, 7, 8, 9, 10, 11, 12, 13, 14]
    assert (packed["packed_input_ids"][0, 10:] == 0).all()
    assert packed["packed_token_type_ids"][0, :10].tolist() == [0, 0, 1, 0, 1, 1, 1, 1, 0, 1]
    assert packed["packed_position_ids"][0, :10].tolist() == [2, 3, 4, 2, 3, 4, 5, 6, 2, 3]
    cu = packed["cu_seq_lens"]
    assert cu.dtype == torch.int32 and len(cu) == 3 + 14 + 1
    assert cu[:4].tolist() == [0, 3, 8, 10] and int(cu[-1]) == 64
    tail = torch.diff(cu[3:])
    assert sorted(tail.tolist()) == [3, 3] + [4] * 12  # 54 tokens: every segment non-empty, none beyond 5
    # each tail segment's positions restart too (position ids stay within the embeddings)
    assert packed["packed_position_ids"][0, 10:14].tolist() == [2, 3, 4, 5]
    expected_index = [[0, 1, 2, 0, 0], [3, 4, 5, 6, 7], [8, 9, 0, 0, 0]]
    if not pad_on_right:
        expected_index = [[0, 0, 0, 1, 2], [3, 4, 5, 6, 7], [0, 0, 0, 8, 9]]
    assert packed["packed_index"].tolist() == expected_index
    assert "input_ids" not in packed and "token_type_ids" not in packed
    assert packed["start_positions"].tolist() == [1, 2, 0]  # everything else stays as collated
    back = packing.unpack(torch.arange(64.0)[None], packed, float("-inf"))
    inside = packed["attention_mask"].bool()
    assert back[inside].tolist() == list(range(10)) and torch.isinf(back[~inside]).all()


def test_block_diagonal_mask_by_hand():
    mask = packing.block_diagonal_mask(torch.tensor([0, 2, 5, 6], dtype=torch.int32), 6)
    segment = [0, 0, 1, 1, 1, 2]
    assert mask.tolist() == [[a == b for b in segment] for a in segment]


# ---------------------------------------------------------------------------------------------------------------------
# The reference is as strict as FlashAttention


def _qkv(head_size: int, dtype=torch.bfloat16, heads: int = 2, tokens: int = 10) -> list[torch.Tensor]:
    """query, key, value ``[1, H, T, D]`` as a BERT attention module hands them over: views of ``[1, T, H * D]``."""
    torch.manual_seed(0)
    return [torch.randn(1, tokens, heads * head_size, dtype=dtype).view(1, tokens, heads, head_size).transpose(1, 2)
            for _ in range(3)]  # fmt: skip


def test_the_reference_refuses_what_flash_attention_refuses():
    """FlashAttention-2's varlen kernel (flash_api.cpp, mha_varlen_fwd) accepts fp16/bf16 inputs of one dtype, head
    sizes that are multiples of 8 up to 256, a contiguous head dimension and int32 ``cu_seqlens``: the reference
    refuses the rest with the rule broken; its any-precision version lifts the dtype rule only."""
    cu = torch.tensor([0, 4, 10], dtype=torch.int32)
    kwargs = {"cu_seq_lens_q": cu, "max_length_q": 6, "scaling": 0.25}
    q, k, v = _qkv(16)
    out, _ = packing.reference_attention(None, q, k, v, None, **kwargs)
    assert out.shape == (1, 10, 2, 16) and out.dtype == torch.bfloat16
    refused = {
        "float32": (_qkv(16, torch.float32), cu, "FlashAttention only supports fp16 and bf16"),
        "mixed": ([q, k.float(), v], cu, "only supports fp16 and bf16"),
        "head size 12": (_qkv(12), cu, "head size is 12: FlashAttention needs a multiple of 8"),
        "head size 264": (_qkv(264, heads=1), cu, "head size is 264"),
        "strided head dimension": ([x[..., ::2] for x in _qkv(32)], cu, "not contiguous"),
        "int64 cu_seq_lens": ((q, k, v), cu.long(), "contiguous int32 vector"),
        "strided cu_seq_lens": ((q, k, v), torch.tensor([0, 0, 4, 0, 10], dtype=torch.int32)[::2], "int32 vector"),
    }
    for name, (qkv, cu_seq_lens, message) in refused.items():
        with pytest.raises(RuntimeError, match=message):
            packing.reference_attention(None, *qkv, None, **{**kwargs, "cu_seq_lens_q": cu_seq_lens})
        assert packing.flash_attention_problem(*qkv, cu_seq_lens) is not None, name
    # any precision: float32 passes (and equals the bf16 result up to bf16 rounding), the other rules still hold
    exact, _ = packing.reference_attention_any_precision(None, *[x.float() for x in (q, k, v)], None, **kwargs)
    assert torch.allclose(exact, out.float(), atol=3e-2), float((exact - out.float()).abs().max())
    with pytest.raises(RuntimeError, match="head size is 12"):
        packing.reference_attention_any_precision(None, *_qkv(12, torch.float32), None, **kwargs)


def test_enable_probes_the_attention_as_training_calls_it(tokenizer, monkeypatch):
    """At start, with the reference: bf16 must be on, and a forward and backward pass goes through the attention
    function with the model's own scaling and training's layout, so a head size FlashAttention refuses stops the run
    before anything is computed (on a GPU the same probe runs varlen_attn)."""
    monkeypatch.setenv(packing.REFERENCE_ENV, "1")
    model = tiny_model(AutoModelForQuestionAnswering, "bert", tokenizer)
    with pytest.raises(packing.PackedAttentionUnavailable, match="bf16 is off .*set attention: padded"):
        packing.enable(model, "packed", device=CPU, bf16=False)
    odd = tiny_model(AutoModelForQuestionAnswering, "roberta", tokenizer, hidden_size=40)
    with pytest.raises(packing.PackedAttentionUnavailable, match=r"2 heads of 20 .*head size is 20.*attention: padded"):
        packing.enable(odd, "packed", device=CPU, bf16=True)
    assert packing.position_offset(odd) is None  # left padded
    calls = []

    def recording(module, query, key, value, attention_mask, **kwargs):
        calls.append((query, kwargs))
        return packing.reference_attention(module, query, key, value, attention_mask, **kwargs)

    packing.startup_probe(recording, CPU, model)
    (query, kwargs), = calls
    attention = model.bert.encoder.layer[0].attention.self
    assert kwargs["scaling"] == attention.scaling == 16**-0.5  # what the model's attention modules pass
    assert query.dtype == torch.bfloat16 and query.shape == (1, 2, 8, 16) and query.stride() == (256, 16, 32, 1)
    assert kwargs["cu_seq_lens_q"].dtype == torch.int32 and kwargs["max_length_q"] == 5
    assert packing.enable(model, "packed", device=CPU, bf16=True)
    assert model.config._attn_implementation == packing.REFERENCE_ATTENTION
    monkeypatch.setenv(packing.REFERENCE_ENV, "float32")  # the formula checks: float32 allowed, bf16 need not be on
    assert packing.enable(model, "packed", device=CPU, bf16=False)
    assert model.config._attn_implementation == packing.REFERENCE_ANY_PRECISION


# ---------------------------------------------------------------------------------------------------------------------
# Buckets


def test_bucket_rule_gives_at_most_eight_lengths_and_short_tail_segments():
    # 32 windows of up to 384 tokens: 12,288 / 8 = 1536, but 1536 x 8 leaves no room for the 5 tail tokens of a row
    # of 32 full windows, so the next multiple of 64: lengths 1600, 3200, ..., 12800
    assert packing.bucket_size(32, 384) == 1600 and packing.packed_length(32 * 384, 1600, 384) == 12800
    assert packing.bucket_size(16, 256) == 576
    for windows in range(1, 65):
        for width in (16, 64, 128, 256, 384, 512):
            bucket = packing.bucket_size(windows, width)
            assert bucket % packing.BUCKET_MULTIPLE == 0
            k = packing.tail_segments(bucket, width)
            lengths = {packing.packed_length(n, bucket, width) for n in (windows, windows * width)}
            first, last = min(lengths) // bucket, max(lengths) // bucket
            assert last - first + 1 <= packing.PACKED_LENGTHS, (windows, width)
            for n in range(windows, windows * width + 1, max(1, windows * width // 97)):
                tail = packing.packed_length(n, bucket, width) - n
                # np.array_split into k: every segment non-empty and no longer than a window
                assert k <= tail and math.ceil(tail / k) <= width, (windows, width, n)


# ---------------------------------------------------------------------------------------------------------------------
# The reference against padding: QA


def _qa_pair(family, tokenizer, windows, *, offset_shift=0, drop_types=False):
    """A tiny QA model's padded and packed outputs (start, end, hidden) on the same windows, in train mode (dropout
    0) with gradients of the QA loss; ``offset_shift``/``drop_types`` break the packing on purpose (controls)."""
    features, picks = windows
    results = []
    for packed in (False, True):
        model = tiny_model(AutoModelForQuestionAnswering, family, tokenizer)
        model.train()
        offset = None
        if packed:
            use_reference(model, any_precision=True)
            offset = packing.position_offset(model) + offset_shift
        batch = features.collate(picks, packed_offset=offset)
        if packed and drop_types:
            batch["packed_token_type_ids"] = torch.zeros_like(batch["packed_token_type_ids"])
        start, end, hidden = _model_outputs(model, batch, hidden=True)
        loss = qa_loss(start, end, batch["start_positions"], batch["end_positions"], batch["attention_mask"])
        loss.backward()
        grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
        results.append((batch, start.detach(), end.detach(), hidden.detach(), loss.detach(), grads))
    return results


def _windows_of(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return values[mask.bool()]


@pytest.mark.parametrize("family", FAMILIES)
def test_packed_reference_equals_padding_for_qa(family, tokenizer, windows):
    padded, packed = _qa_pair(family, tokenizer, windows)
    mask_padded, mask_packed = padded[0]["attention_mask"], packed[0]["attention_mask"]
    assert packed[1].shape == (len(windows[1]), 64)  # the [B, max_length] layout the losses read
    if family == "roberta":
        assert packed[0]["packed_position_ids"][0, 0] == 2
    for k in (1, 2, 3):  # start, end logits, last hidden states: window by window, token by token
        a, b = _windows_of(padded[k], mask_padded), _windows_of(packed[k], mask_packed)
        assert torch.allclose(a, b, atol=1e-5, rtol=0), (k, float((a - b).abs().max()))
    assert torch.isinf(packed[1][~mask_packed.bool()]).all()
    assert abs(float(padded[4]) - float(packed[4])) < 1e-5 * abs(float(padded[4]))
    assert padded[5].keys() == packed[5].keys()
    for name, grad in padded[5].items():
        assert torch.allclose(grad, packed[5][name], atol=1e-6, rtol=1e-4), name


def test_wrong_positions_or_dropped_token_types_break_the_equality(tokenizer, windows):
    # controls: the equality above depends on each window's own positions and on its token types
    for family, broken in (("roberta", {"offset_shift": -2}), ("bert", {"drop_types": True})):
        padded, packed = _qa_pair(family, tokenizer, windows, **broken)
        a, b = _windows_of(padded[1], padded[0]["attention_mask"]), _windows_of(packed[1], packed[0]["attention_mask"])
        assert not torch.allclose(a, b, atol=1e-3), family


def test_a_packed_model_refuses_a_padded_batch(tokenizer, windows):
    features, picks = windows
    model = tiny_model(AutoModelForQuestionAnswering, "bert", tokenizer)
    use_reference(model)
    with pytest.raises(RuntimeError, match="without cu_seq_lens"):
        _model_outputs(model, features.collate(picks))


# ---------------------------------------------------------------------------------------------------------------------
# The reference against padding: classification and prompts


@pytest.fixture(scope="module")
def qnli_rows(tokenizer):
    frame = classification.load_hf_parquet(QNLI_DEV).head(9)
    return frame, classifier.encode(frame, tokenizer, max_length=48)


@pytest.mark.parametrize("family", FAMILIES)
def test_packed_reference_equals_padding_for_classification(family, tokenizer, qnli_rows):
    frame, data = qnli_rows
    rows = np.arange(len(data))
    assert len(set(data.lengths)) > 3 and data.token_type_ids is not None
    labels = torch.tensor(data.labels)
    weights = torch.linspace(0.5, 1.5, len(data))
    out = []
    for packed in (False, True):
        model = tiny_model(AutoModelForSequenceClassification, family, tokenizer, num_labels=2)
        model.train()  # dropout 0: the heads' dropout calls run, as in training
        if packed:
            use_reference(model, any_precision=True)
        logits = classifier._batch_logits(model, data.collate(rows, 1, packing.position_offset(model)))
        loss = classifier.weighted_loss(logits, labels, weights)
        loss.backward()
        out.append((logits.detach(), loss.detach(), model.classifier))
    assert torch.allclose(out[0][0], out[1][0], atol=1e-5, rtol=0), float((out[0][0] - out[1][0]).abs().max())
    assert abs(float(out[0][1]) - float(out[1][1])) < 1e-6
    head = [p.grad for p in out[0][2].parameters()], [p.grad for p in out[1][2].parameters()]
    assert all(torch.allclose(a, b, atol=1e-6, rtol=1e-4) for a, b in zip(*head, strict=True))


def test_packed_reference_equals_padding_for_prompts(tokenizer, qnli_rows):
    pairs, _ = qnli_rows
    spec = PAPER_PROMPTS["mnli"]
    enc = encode_prompts(pairs, tokenizer, spec, max_length=48)
    data = classifier.Encoded(enc.input_ids, enc.token_type_ids, np.zeros(len(pairs), dtype=np.int64),
                              int(tokenizer.pad_token_id), enc.mask_positions, 48)
    ids = label_word_ids(tokenizer, spec.label_words)
    out = []
    for packed in (False, True):
        model = PromptClassifier(tiny_model(AutoModelForMaskedLM, "bert", tokenizer), ids).eval()
        if packed:
            use_reference(model.mlm, any_precision=True)
        batch = data.collate(np.arange(len(data)), 1, packing.position_offset(model))
        out.append(classifier._batch_logits(model, batch).detach())
        assert model._gathered  # the head ran at the mask positions only, packed or not
    assert out[0].shape == (len(pairs), 2)
    assert torch.allclose(out[0], out[1], atol=1e-5, rtol=0), float((out[0] - out[1]).abs().max())


# ---------------------------------------------------------------------------------------------------------------------
# The setting: at start, in training and prediction, in the fingerprints


def test_attention_setting_is_validated_and_defaults_to_padded():
    assert qa.resolve_settings({})["attention"] == "padded"
    assert classifier.resolve_settings({})["attention"] == "padded"
    with pytest.raises(ValueError, match="attention must be one of"):
        qa.resolve_settings({"attention": "flat"})
    with pytest.raises(ValueError, match="attention must be one of"):
        classifier.resolve_settings({"attention": "varlen"})


def test_packed_is_a_result_setting_and_padded_changes_no_fingerprint(tokenizer, windows):
    features, _ = windows
    s = qa.resolve_settings({})
    before = {k: v for k, v in s.items() if k != "attention"}  # the settings as they were before the key existed
    assert result_settings(s) == result_settings(before) and "attention" not in result_settings(s)
    assert result_settings({**s, "attention": "packed"})["attention"] == "packed"
    assert finetune._fingerprint("m", s, features, features) == finetune._fingerprint("m", before, features, features)
    assert finetune._fingerprint("m", {**s, "attention": "packed"}, features, features) != finetune._fingerprint(
        "m", s, features, features
    )


def test_packed_without_varlen_attn_stops_at_start_naming_the_setting(tmp_path, squad_dev, monkeypatch):
    monkeypatch.delenv(packing.REFERENCE_ENV, raising=False)
    message = r"needs a CUDA GPU; this run is on cpu: set attention: padded"
    with pytest.raises(packing.PackedAttentionUnavailable, match=message):
        qa.train_qa(
            squad_dev.iloc[:4], squad_dev.iloc[4:6], model_name_or_path=MINILM, output_dir=tmp_path / "model",
            checkpoint_dir=tmp_path / "ckpt", settings={"attention": "packed", "device": "cpu"}, log=lambda m: None,
        )
    assert not (tmp_path / "ckpt").exists() and not (tmp_path / "model").exists()
    with pytest.raises(packing.PackedAttentionUnavailable, match="needs a CUDA GPU"):
        classifier.load_trained_classifier(MINILM, device="cpu", attention="packed")


def test_packed_refuses_other_model_families(tokenizer, monkeypatch):
    monkeypatch.setenv(packing.REFERENCE_ENV, "1")  # past the device check: the family alone decides
    model = AutoModelForQuestionAnswering.from_config(
        DistilBertConfig(vocab_size=len(tokenizer), dim=32, n_layers=1, n_heads=2, hidden_dim=37)
    )
    with pytest.raises(packing.PackedAttentionUnavailable, match="'distilbert' model .*set attention: padded"):
        packing.enable(model, "packed", device=CPU, bf16=False)
    assert packing.position_offset(model) is None  # left padded
    assert not packing.enable(model, "padded", device=CPU, bf16=False)


def _save_tiny(auto, family, tokenizer, path, **extra):
    tiny_model(auto, family, tokenizer, **extra).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return str(path)


TINY_QA = {
    "max_length": 64, "stride": 16, "batch_size": 4, "learning_rate": 1e-3, "max_steps": 4, "eval_every": 2,
    "checkpoint_every": 100, "log_every": 1, "threads": 1, "seed": 3, "device": "cpu", "eval_max_examples": 4,
}


def test_train_and_predict_qa_packed_follow_padding(tmp_path, squad_dev, tokenizer, monkeypatch):
    """The packed hooks of train_qa (training steps, validation loss, checkpoint selection) and predict_qa, with the
    reference switched on explicitly (in float32, to compare to float32 precision): at dropout 0 the losses and
    answers of packed and padded runs agree."""
    monkeypatch.setenv(packing.REFERENCE_ENV, "float32")
    short = squad_dev[squad_dev["context"].str.len() < 500]
    train, valid = short.iloc[:12].reset_index(drop=True), short.iloc[100:106].reset_index(drop=True)
    model_dir = _save_tiny(AutoModelForQuestionAnswering, "roberta", tokenizer, tmp_path / "tiny")
    runs, lines = {}, []
    for mode in ("padded", "packed"):
        selection = finetune.segment_gap_selection(valid.iloc[:3], valid.iloc[3:], settings=TINY_QA)
        # the selection predicts with the training model: a packed model given a padded batch would raise
        runs[mode] = qa.train_qa(
            train, valid, model_name_or_path=model_dir, output_dir=tmp_path / mode,
            checkpoint_dir=tmp_path / f"c-{mode}", settings={**TINY_QA, "attention": mode}, log=lines.append,
            selection=selection,
        )
    assert any("attention: packed windows through the block-diagonal reference (SPURIOUS_PACKED_REFERENCE=float32"
               in line for line in lines)
    a, b = runs["padded"], runs["packed"]
    for curve in ("train_losses", "validation_losses"):
        assert np.allclose([r["loss"] for r in a[curve]], [r["loss"] for r in b[curve]], rtol=1e-5), curve
    assert len(a["train_losses"]) == 4 and len(a["validation_losses"]) == 2
    assert [r["f1_gap"] for r in a["selection_history"]] == [r["f1_gap"] for r in b["selection_history"]]
    assert a["saved_step"] == b["saved_step"]
    settings = {**TINY_QA, "eval_batch_size": 5}
    padded = qa.predict_qa(tmp_path / "packed", valid, settings=settings)
    assert qa.predict_qa(tmp_path / "packed", valid, settings={**settings, "attention": "packed"}) == padded
    assert sum(bool(v) for v in padded.values()) >= 3  # answers, not empty strings


def test_train_classifier_packed_follows_padding(tmp_path, tokenizer, monkeypatch):
    monkeypatch.setenv(packing.REFERENCE_ENV, "float32")
    frame = classification.load_hf_parquet(QNLI_DEV).head(24)
    model_dir = _save_tiny(AutoModelForSequenceClassification, "electra", tokenizer, tmp_path / "tiny", num_labels=2)
    settings = {"batch_size": 6, "max_steps": 4, "max_length": 48, "learning_rate": 1e-3, "device": "cpu",
                "checkpoint_every": 100, "log_every": 1, "threads": 1}
    weights = np.linspace(0.2, 2.0, len(frame))
    losses, probs = {}, {}
    for mode in ("padded", "packed"):
        summary = classifier.train_classifier(
            frame, model_name_or_path=model_dir, output_dir=tmp_path / mode, checkpoint_dir=tmp_path / f"c-{mode}",
            settings={**settings, "attention": mode}, weights=weights, log=lambda m: None,
        )
        losses[mode] = [r["loss"] for r in summary["train_losses"]]
        probs[mode] = np.stack(
            classifier.predict_classifier(tmp_path / mode, frame, device="cpu", attention=mode, log=lambda m: None)[
                "probabilities"
            ]
        )
    assert len(losses["padded"]) == 4 and np.allclose(losses["padded"], losses["packed"], rtol=1e-5)
    assert np.allclose(probs["padded"], probs["packed"], atol=1e-5)


def test_batch_width_is_the_length_of_the_packed_row(tokenizer, qnli_rows, windows):
    """What a compiled run lists as a packed batch's shape is the row ``collate`` packs (QA windows, classification
    rows), and the padded width otherwise."""
    _, data = qnli_rows
    features, picks = windows
    for rows in (np.arange(len(data)), np.arange(3), np.array([8])):
        packed = data.collate(rows, 1, 0)["packed_input_ids"].shape[1]
        assert data.batch_width(data.lengths[rows], 1, packed=True) == packed
        assert data.batch_width(data.lengths[rows], 8) == data.collate(rows, 8)["input_ids"].shape[1]
    for rows in (picks, picks[:2], picks[-1:]):
        packed = features.collate(rows, packed_offset=0)["packed_input_ids"].shape[1]
        assert features.batch_width(features.lengths[rows], packed=True) == packed
        assert features.batch_width(features.lengths[rows], multiple=8) == features.collate(rows, multiple=8)[
            "input_ids"
        ].shape[1]


def test_pack_keeps_a_frame_of_pairs_intact(tokenizer, qnli_rows):
    # the pair texts' token types survive packing unchanged: [SEP]-separated segments 0 then 1
    _, data = qnli_rows
    batch = data.collate(np.arange(3), 1, 0)
    cu = batch["cu_seq_lens"].tolist()
    for i in range(3):
        assert batch["packed_token_type_ids"][0, cu[i] : cu[i + 1]].tolist() == data.token_type_ids[i]
        assert batch["packed_input_ids"][0, cu[i] : cu[i + 1]].tolist() == data.input_ids[i]
