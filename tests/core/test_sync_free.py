"""A training step never waits for the device: every loop the engine runs (QA, LearnedMixin+H, Confidence
Regularization, classification with weights, prompt-based fine-tuning) is watched by a ``TorchDispatchMode`` during
its optimizer steps, and no operation that reads a tensor's value on the host may occur.

On CPU the mode sees the value reads that go through the dispatcher: ``.item()``, ``float(t)``, ``bool(t)``,
``int(t)`` (all ``aten._local_scalar_dense``), ``torch.equal``, and the operations whose output shape depends on the
data (``nonzero``, boolean-mask indexing, ``masked_select``, ``unique``...). A CPU tensor's ``.cpu()``, ``.numpy()``
and ``.tolist()`` do not go through it: on a GPU ``torch.cuda.set_sync_debug_mode("error")`` catches those too (the
CUDA test at the end, skipped without a GPU).

The ReSam and bias-model runs are the plain QA loop on other data or other initial weights (no other code runs in
their steps). The lexical-overlap bias model (Think Twice's CPU demo) is a BiLSTM over packed sequences, whose
lengths ``pack_padded_sequence`` takes on the host: it waits by design and is not part of this check.
"""

from __future__ import annotations

import traceback
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from spurious.core import classifier, engine, qa
from spurious.core.models import load_tokenizer
from spurious.core.prompt import PromptSpec
from spurious.thinktwice.debias import ConfidenceRegularizationObjective, LearnedMixinObjective

MINILM = "embedded:all-MiniLM-L6-v2"
aten = torch.ops.aten
# value reads on the host, and operations whose output shape depends on the data (which read a count on the host)
HOST_READS = {
    aten._local_scalar_dense,
    aten.equal,
    aten.is_nonzero,
    aten.allclose,
    aten.nonzero,
    aten.masked_select,
    aten._unique2,
    aten.unique_dim,
    aten.unique_consecutive,
    aten.bincount,
    aten.histc,
    aten.repeat_interleave,
}


class HostReads(TorchDispatchMode):
    """Records the operations of ``HOST_READS``, and copies from a GPU to the host, with where they were called."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[tuple[str, str]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        to_host = func in (aten._to_copy.default, aten.copy_.default) and _devices(args) != _devices([out])
        if func.overloadpacket in HOST_READS or (to_host and "cpu" in _devices([out])) or _mask_index(func, args):
            self.found.append((str(func), "".join(traceback.format_stack(limit=14)[:-2])))
        return out


def _mask_index(func, args) -> bool:
    """Indexing with a boolean mask (``x[mask]``, ``x[mask] = v``): the result's size is the mask's count."""
    if func.overloadpacket not in (aten.index, aten.index_put, aten.index_put_, aten._index_put_impl_):
        return False
    return any(isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in args[1])


def _devices(values) -> set[str]:
    return {v.device.type for v in values if isinstance(v, torch.Tensor)}


class OnDevice(torch.Tensor):
    """A CPU tensor standing for one on the GPU: the batch as ``to_device`` returns it, and (torch's default for
    subclasses) everything computed from it. Reading its values on the host (``.cpu()``, ``.numpy()``,
    ``.tolist()``, ``.item()``, ``float``, ``bool``...) is recorded in ``reads`` while that is a list."""

    reads: list[tuple[str, str]] | None = None

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if OnDevice.reads is not None and func in _VALUE_READS:
            OnDevice.reads.append((func.__name__, "".join(traceback.format_stack(limit=14)[:-1])))
        return super().__torch_function__(func, types, args, kwargs or {})


T = torch.Tensor
_VALUE_READS = {T.cpu, T.numpy, T.tolist, T.item, T.__bool__, T.__float__, T.__int__, T.__index__, T.__array__}


def _watch_steps(monkeypatch, first: int = 1) -> list[list[tuple[str, str]]]:
    """Run every optimizer step from the ``first``-th on (1-based) under ``HostReads``, the batches moved to the
    "device" as ``OnDevice`` tensors; one list of findings per watched step. The engine's, the loops' and torch's
    own functions run; they are only observed."""
    from spurious.core.qa import finetune

    found: list[list[tuple[str, str]]] = []
    real_step, real_to_device = engine._optimizer_step, finetune.to_device
    calls = [0]

    def observed(*args, **kwargs):
        calls[0] += 1
        if calls[0] < first:
            return real_step(*args, **kwargs)
        OnDevice.reads = []
        try:
            with HostReads() as reads:
                result = real_step(*args, **kwargs)
        finally:
            found.append(reads.found + OnDevice.reads)
            OnDevice.reads = None
        return result

    def to_device(batch, device):
        return {k: v.as_subclass(OnDevice) for k, v in real_to_device(batch, device).items()}

    monkeypatch.setattr(engine, "_optimizer_step", observed)
    for module in (finetune, classifier):
        monkeypatch.setattr(module, "to_device", to_device)
    return found


def test_the_watch_sees_host_reads_including_transformers_own_padding_check():
    """The control: the mode records a scalar read, a boolean-mask index and, in a BERT forward given the 2D padding
    mask, transformers' ``padding_mask.all()`` (masking_utils), which the prepared mask of
    ``model_attention_mask`` avoids."""
    from transformers import BertConfig, BertModel

    from spurious.core.models import model_attention_mask

    x = torch.randn(4)
    with HostReads() as reads:
        float(x.sum())
        _ = x[x > 0]
    assert [name for name, _ in reads.found] == ["aten._local_scalar_dense.default", "aten.index.Tensor"]
    model = BertModel(BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                 intermediate_size=32)).eval()  # fmt: skip
    ids, mask = torch.randint(1, 50, (2, 6)), torch.tensor([[1] * 6, [1] * 4 + [0] * 2])
    with HostReads() as reads:
        plain = model(input_ids=ids, attention_mask=mask).last_hidden_state
    assert reads.found and "masking_utils" in reads.found[0][1]
    with HostReads() as reads:
        prepared = model(input_ids=ids, attention_mask=model_attention_mask(model, mask)).last_hidden_state
    assert reads.found == []
    assert torch.equal(prepared[mask.bool()], plain[mask.bool()])
    # what the dispatcher does not see on CPU, the "device" tensors record
    OnDevice.reads = []
    try:
        y = x.as_subclass(OnDevice) * 2
        y.cpu().numpy(), y.tolist(), np.asarray(y), x.tolist()  # the last: a host tensor, not recorded
    finally:
        reads, OnDevice.reads = OnDevice.reads, None
    assert [name for name, _ in reads] == ["cpu", "numpy", "tolist", "__array__"]


def _tiny_bert(kind: str, folder: Path) -> Path:
    """A random 2-layer BERT (hidden 32) with the given head over the MiniLM vocabulary, saved with its tokenizer."""
    import transformers

    tokenizer = load_tokenizer(MINILM)
    config = transformers.BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2,
                                     num_attention_heads=2, intermediate_size=64, max_position_embeddings=64)  # fmt: skip
    torch.manual_seed(0)
    getattr(transformers, f"BertFor{kind}")(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def tiny_models(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("tiny")
    return {kind: _tiny_bert(kind, root / kind) for kind in ("QuestionAnswering", "SequenceClassification", "MaskedLM")}


@pytest.fixture(scope="module")
def qa_frames(squad_dev):
    short = squad_dev[squad_dev["context"].str.len() < 400]
    return short.iloc[:10].reset_index(drop=True), short.iloc[200:203].reset_index(drop=True)


STEPS = 3
QA_SETTINGS = {"max_length": 64, "stride": 16, "batch_size": 4, "max_steps": STEPS, "eval_every": None,
               "checkpoint_every": 0, "log_every": 1, "threads": 1, "device": "cpu"}  # fmt: skip


def _stored_logits(features) -> np.ndarray:
    return np.random.default_rng(0).normal(size=(len(features), 2, features.max_length)).astype(np.float32)


OBJECTIVES = {
    "plain": None,
    "lmix": lambda f: LearnedMixinObjective(_stored_logits(f), hidden_size=32, gate_dim=8),
    "lmix-isbiased": lambda f: LearnedMixinObjective(_stored_logits(f), hidden_size=32, compat="isbiased", scale=0.1),
    "creg": lambda f: ConfidenceRegularizationObjective(_stored_logits(f), _stored_logits(f) + 1.0),
    "creg-isbiased": lambda f: ConfidenceRegularizationObjective(_stored_logits(f), _stored_logits(f), compat="isbiased"),
}


def _train_qa(frames, model: Path, out: Path, objective: str, settings: dict) -> dict:
    factory = OBJECTIVES[objective]
    return qa.train_qa(
        *frames, model_name_or_path=str(model), output_dir=out / "model", checkpoint_dir=out / "ck", settings=settings,
        log=lambda m: None, objective_factory=factory, objective_id=None if factory is None else objective,
    )  # fmt: skip


@pytest.mark.parametrize("objective", list(OBJECTIVES))
def test_qa_steps_read_nothing_on_the_host(objective, qa_frames, tiny_models, tmp_path, monkeypatch):
    found = _watch_steps(monkeypatch)
    summary = _train_qa(qa_frames, tiny_models["QuestionAnswering"], tmp_path, objective, QA_SETTINGS)
    assert len(found) == STEPS and summary["steps"] == STEPS
    assert all(np.isfinite(r["loss"]) for r in summary["train_losses"])  # the values did arrive, at log time
    assert found == [[]] * STEPS, found[0][:1]


def _toy_frame(n: int) -> pd.DataFrame:
    words = ["the", "movie", "plot", "was", "a", "very", "story", "actor", "and", "it", "film", "scene", "long"]
    rng = np.random.default_rng(0)
    rows = [(str(i), " ".join([*rng.choice(words, 1 + i % 4), "good" if i % 2 else "bad"]), None, i % 2)
            for i in range(n)]  # fmt: skip
    frame = pd.DataFrame(rows, columns=["id", "text_a", "text_b", "label"])
    frame.attrs.update(label_names=["negative", "positive"], is_pair=False)
    return frame


CLASSIFIER_SETTINGS = {"batch_size": 4, "max_steps": STEPS, "max_length": 32, "checkpoint_every": 0, "log_every": 1,
                       "threads": 1, "device": "cpu"}  # fmt: skip


@pytest.mark.parametrize("kind", ["weighted", "prompt"])
def test_classifier_and_prompt_steps_read_nothing_on_the_host(kind, tiny_models, tmp_path, monkeypatch):
    found = _watch_steps(monkeypatch)
    frame = _toy_frame(12)
    summary = classifier.train_classifier(
        frame, model_name_or_path=str(tiny_models["MaskedLM" if kind == "prompt" else "SequenceClassification"]),
        output_dir=tmp_path / "model", checkpoint_dir=tmp_path / "ck", settings=CLASSIFIER_SETTINGS,
        weights=np.linspace(0.5, 1.5, len(frame)) if kind == "weighted" else None,
        prompt=PromptSpec("{text_a} It was {mask}.", ("terrible", "great")) if kind == "prompt" else None,
    )  # fmt: skip
    assert len(found) == STEPS and summary["steps"] == STEPS
    assert found == [[]] * STEPS, found[0][:1]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("compile_setting", ["off", "on"])
@pytest.mark.parametrize("objective", list(OBJECTIVES))
def test_steady_state_cuda_steps_never_synchronise(objective, compile_setting, qa_frames, tiny_models, tmp_path,
                                                   monkeypatch):  # fmt: skip
    """On a GPU: the steady-state steps (one batch width, so from the fifth step on every shape has been compiled,
    recorded as a CUDA graph and replayed, and the optimizer step captured) run under
    ``torch.cuda.set_sync_debug_mode("error")``, which raises at any host-device synchronisation."""
    real = engine._optimizer_step
    calls = [0]

    def strict(*args, **kwargs):
        calls[0] += 1
        if calls[0] < 5:
            return real(*args, **kwargs)
        torch.cuda.set_sync_debug_mode("error")
        try:
            return real(*args, **kwargs)
        finally:
            torch.cuda.set_sync_debug_mode("default")

    monkeypatch.setattr(engine, "_optimizer_step", strict)
    settings = dict(QA_SETTINGS, device="cuda", max_steps=8, log_every=8, pad_to_multiple_of=64,
                    compile=compile_setting)  # fmt: skip
    summary = _train_qa(qa_frames, tiny_models["QuestionAnswering"], tmp_path, objective, settings)
    assert calls[0] == 8 and summary["compile"]["enabled"] == (compile_setting == "on")
