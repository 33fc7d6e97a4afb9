"""The training step on the device: it never waits for the device, and the ``compile`` setting compiles it.

A training step never waits for the device: every loop the engine runs (QA, LearnedMixin+H, Confidence
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

``compile: on`` on CPU: the QA loop with inductor (the backend a GPU run uses) over two batch widths for 20 steps,
against the eager run and across a preemption; every other loop with ``aot_eager`` (dynamo's graph capture and
AOTAutograd's forward and backward graphs without inductor's code generation, which costs tens of seconds per shape
on a CPU), which must trace each into one graph per shape. What only a GPU shows (CUDA graphs, the captured optimizer
step, the sync-free steady state) is in the CUDA tests, skipped here.
"""

from __future__ import annotations

import copy
import signal
import traceback
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from safetensors.torch import load_file
from torch.utils._python_dispatch import TorchDispatchMode

from spurious.core.models import load_tokenizer
from spurious.core.train import checkpoints, classifier, compiled, engine, qa, steps
from spurious.core.train.prompt import PromptSpec
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
    from spurious.core.train.qa import finetune

    found: list[list[tuple[str, str]]] = []
    real_step, real_to_device = steps.optimizer_step, finetune.to_device
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

    monkeypatch.setattr(steps, "optimizer_step", observed)
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


def _tiny_bert(kind: str, folder: Path, dropout: float = 0.1) -> Path:
    """A random 2-layer BERT (hidden 32) with the given head over the MiniLM vocabulary, saved with its tokenizer."""
    import transformers

    tokenizer = load_tokenizer(MINILM)
    config = transformers.BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2,
                                     num_attention_heads=2, intermediate_size=64, max_position_embeddings=128,
                                     hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout)  # fmt: skip
    torch.manual_seed(0)
    getattr(transformers, f"BertFor{kind}")(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def tiny_models(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("tiny")
    kinds = ("QuestionAnswering", "SequenceClassification", "MaskedLM")
    models = {kind: _tiny_bert(kind, root / kind) for kind in kinds}
    models["QuestionAnswering, no dropout"] = _tiny_bert("QuestionAnswering", root / "qa0", dropout=0.0)
    return models


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
    "creg-isbiased": lambda f: ConfidenceRegularizationObjective(
        _stored_logits(f), _stored_logits(f), compat="isbiased"
    ),
}


def _qa_run(frames, model: Path, out: Path, settings: dict, objective: str = "plain", log=None) -> dict:
    factory = OBJECTIVES[objective]
    return qa.train_qa(
        *frames, model_name_or_path=str(model), output_dir=out / "model", checkpoint_dir=out / "ck", settings=settings,
        log=log or (lambda m: None), objective_factory=factory, objective_id=None if factory is None else objective,
    )  # fmt: skip


@pytest.mark.parametrize("objective", list(OBJECTIVES))
def test_qa_steps_read_nothing_on_the_host(objective, qa_frames, tiny_models, tmp_path, monkeypatch):
    found = _watch_steps(monkeypatch)
    summary = _qa_run(qa_frames, tiny_models["QuestionAnswering"], tmp_path, QA_SETTINGS, objective)
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


def _train_classifier(kind: str, tiny_models: dict[str, Path], out: Path, **settings) -> dict:
    frame = _toy_frame(12)
    return classifier.train_classifier(
        frame, model_name_or_path=str(tiny_models["MaskedLM" if kind == "prompt" else "SequenceClassification"]),
        output_dir=out / "model", checkpoint_dir=out / "ck", settings={**CLASSIFIER_SETTINGS, **settings},
        weights=np.linspace(0.5, 1.5, len(frame)) if kind == "weighted" else None,
        prompt=PromptSpec("{text_a} It was {mask}.", ("terrible", "great")) if kind == "prompt" else None,
    )  # fmt: skip


@pytest.mark.parametrize("kind", ["weighted", "prompt"])
def test_classifier_and_prompt_steps_read_nothing_on_the_host(kind, tiny_models, tmp_path, monkeypatch):
    found = _watch_steps(monkeypatch)
    summary = _train_classifier(kind, tiny_models, tmp_path)
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
    real = steps.optimizer_step
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

    monkeypatch.setattr(steps, "optimizer_step", strict)
    settings = dict(QA_SETTINGS, device="cuda", max_steps=8, log_every=8, pad_to_multiple_of=64,
                    compile=compile_setting)  # fmt: skip
    summary = _qa_run(qa_frames, tiny_models["QuestionAnswering"], tmp_path, settings, objective)
    assert calls[0] == 8 and summary["compile"]["enabled"] == (compile_setting == "on")
    assert (summary["compile"].get("capture_s") is not None) == (compile_setting == "on")  # the optimizer step too


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_the_captured_optimizer_step_makes_the_eager_updates(tmp_path):
    """On a GPU: ``CompiledUpdate`` runs clipping, fused AdamW (capturable, its learning rate in a device tensor) and
    the zeroing of the kept gradients eagerly at its first call and as one captured CUDA graph from the second on;
    under a changing learning rate its parameters follow the eager optimizer's (the same fused kernel), and its state
    saves and loads with ``weights_only=True``."""
    device = torch.device("cuda")
    torch.manual_seed(0)
    eager = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 4)).to(device)
    captured = copy.deepcopy(eager)
    eager_opt = torch.optim.AdamW(eager.parameters(), lr=1e-3, fused=True)
    captured_opt = torch.optim.AdamW(captured.parameters(), lr=1e-3, fused=True)
    params = list(captured.parameters())
    for p in params:
        p.grad = torch.zeros_like(p)
    update = steps.CompiledUpdate(captured_opt, params, max_grad_norm=0.5, device=device)
    for step in range(6):
        x = torch.randn(8, 16, device=device)
        lr = 1e-3 * (1 - step / 6)
        for model in (eager, captured):
            model(x).pow(2).sum().backward()
        torch.nn.utils.clip_grad_norm_(list(eager.parameters()), 0.5)
        for group in eager_opt.param_groups:
            group["lr"] = lr
        eager_opt.step()
        eager_opt.zero_grad(set_to_none=True)
        update(lr)
        assert all(float(p.grad.abs().sum()) == 0 for p in params)  # zeroed inside the step (graph)
        for a, b in zip(eager.parameters(), params, strict=True):
            torch.testing.assert_close(b, a, rtol=1e-6, atol=1e-7)
    assert update.graph is not None and update.capture_s > 0
    assert all(group["lr"] == 1e-3 for group in captured_opt.param_groups)  # the schedule's float, left as it was
    torch.save(captured_opt.state_dict(), tmp_path / "optimizer.pt")
    torch.optim.AdamW(captured.parameters(), lr=1e-3, fused=True).load_state_dict(
        torch.load(tmp_path / "optimizer.pt", weights_only=True)
    )


# ---------------------------------------------------------------------------------------------------------------------
# compile


def test_compile_chooses_the_shapes_met_often_enough():
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    passes = {(4, 96): 10, (4, 128): 10, (3, 96): 1}
    assert compiled.decide("off", cpu, passes).shapes == ()
    assert compiled.decide("on", cpu, passes).shapes == ((4, 96), (4, 128))  # the shape met once runs eagerly
    assert compiled.decide("auto", cpu, {(4, 96): 10**6}).shapes == ()  # never on CPU
    # on CUDA, the shapes met at least 20 s / 5 ms = 4,000 times (provisional constants)
    assert compiled.AUTO_MIN_PASSES == 4000
    assert compiled.decide("auto", cuda, {(32, 384): 4000, (32, 320): 3999, (7, 384): 3}).shapes == ((32, 384),)
    assert not compiled.decide("auto", cuda, {(32, 384): 3999}).enabled
    with pytest.raises(ValueError, match="pad_to_multiple_of"):  # exact widths: one compilation per width
        compiled.decide("on", cpu, {(4, w): 2 for w in range(40, 80)})
    with pytest.raises(ValueError, match="compile must be one of"):
        qa.resolve_settings({"compile": "yes"})
    # the evaluations of a run, the repeats of its validation batches: at 5, 10, 15, 20; at 6, 12, 18 and the end;
    # only at the end
    assert [compiled.evaluations(20, every) for every in (5, 6, 20, 30, None, 0)] == [4, 4, 1, 1, 1, 1]


class _MeanEmbedding(torch.nn.Module):
    """A model just big enough for the engine's bookkeeping: a token score averaged over the unpadded tokens."""

    def __init__(self) -> None:
        super().__init__()
        self.embedding = torch.nn.Embedding(50, 1)

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return (self.embedding(ids).squeeze(-1) * mask).sum(1) / mask.sum(1)


def test_the_shapes_listed_for_compilation_are_those_the_loop_meets(tmp_path):
    """``_run_shapes`` predicts from the data order (a pure function of seed and epoch) the shape of every
    micro-batch share a process meets; the loop itself, with accumulation, length grouping, a fractional last epoch
    and its short batches, meets exactly those, from the start or from a resumed state."""
    from collections import Counter

    from spurious.core.train.training import padded_width

    lengths = np.random.default_rng(0).integers(3, 30, size=23)
    seen: list[np.ndarray] = []

    def width_of(longest: int) -> int:
        return padded_width(longest, 8, 32)

    def batch_fn(rows, device):
        seen.append(np.array(rows))
        mask = torch.zeros(len(rows), width_of(int(lengths[rows].max())))
        for j, r in enumerate(rows):
            mask[j, : lengths[r]] = 1
        ids = (torch.arange(mask.shape[1]) % 50).expand(len(rows), -1) * mask.long()
        return {"ids": ids, "mask": mask, "y": torch.from_numpy(lengths[rows] / 30).float()}

    def loss_fn(model, objective, batch):
        return ((model(batch["ids"], batch["mask"]) - batch["y"]) ** 2).mean(), {}

    settings = {"learning_rate": 0.1, "batch_size": 3, "gradient_accumulation_steps": 2, "epochs": 2.5,
                "max_steps": None, "warmup_ratio": 0.0, "weight_decay": 0.0, "max_grad_norm": 1.0,
                "group_by_length": True, "checkpoint_every": 0, "seed": 3, "log_every": 100, "device": "cpu",
                "bf16": False, "compile": "off"}  # fmt: skip
    run = engine.train(_MeanEmbedding(), loss_fn, lengths, settings, batch_fn=batch_fn,
                       batch_width=lambda row_lengths: width_of(int(row_lengths.max())), checkpoint_dir=tmp_path,
                       fingerprint="x", emit=lambda m: None)  # fmt: skip
    assert run.total_steps == 10 and len(seen) == 20  # 8 micro-batches (4 steps) per epoch, then 2 steps

    def shape_of(rows):
        return len(rows), width_of(int(lengths[rows].max()))

    resumed = checkpoints.TrainState(step=5, epoch=1, batch_in_epoch=2)  # after 4 steps of epoch 0 and 1 of epoch 1
    for state, met in ((checkpoints.TrainState(), seen), (resumed, seen[10:])):
        for rank, processes in ((0, 1), (0, 2), (1, 2)):
            listed = steps._run_shapes(lengths, settings, shape_of, state, run.total_steps, rank, processes)
            shares = [steps._split(rows, rank, processes)[0] for rows in met]
            assert {shape: n for shape, (n, _) in listed.items()} == Counter(shape_of(rows) for rows in shares)
            assert all(shape_of(rows) == shape for shape, (_, rows) in listed.items())  # the warm-up's rows


def test_every_compiled_shape_is_warmed_twice_and_recompilations_are_counted(aot_eager, tmp_path):
    """Before the first step, one eager pass (to set the model up) and then every chosen shape twice: with CUDA graphs
    a shape's first call warms up and its second records the graph, so no recording lands in the training steps.
    The record counts the graphs inductor left without CUDA graphs (none: none are asked for on a CPU) and the
    recompilations of the loss: none in a plain run; after a guard of the compiled loss fails (here a Python number
    the loss reads changes after step 4), one for every shape met again."""
    lengths = np.array([5, 6, 7, 8, 20, 21, 22, 23, 5, 21, 6, 22])  # widths 8 and 24 (x8), batches of 4 or 3
    calls: list[tuple[int, int]] = []
    taken, factor = [0], {"value": 1.0}

    def batch_fn(rows, device):
        calls.append((taken[0], len(rows)))
        width = 8 * -(-int(lengths[rows].max()) // 8)
        mask = torch.zeros(len(rows), width)
        for j, r in enumerate(rows):
            mask[j, : lengths[r]] = 1
        ids = (torch.arange(width) % 50).expand(len(rows), -1) * mask.long()
        return {"ids": ids, "mask": mask, "y": torch.from_numpy(lengths[rows] / 30).float()}

    def loss_fn(model, objective, batch):
        return ((model(batch["ids"], batch["mask"]) - batch["y"]) ** 2).mean() * factor["value"], {}

    real_step, change = steps.optimizer_step, [False]

    def counted(*args, **kwargs):
        taken[0] += 1
        if change[0] and taken[0] == 5:
            factor["value"] = 2.0  # dynamo guards on it: every shape met from now on compiles again
        return real_step(*args, **kwargs)

    settings = {"learning_rate": 0.1, "batch_size": 4, "gradient_accumulation_steps": 1, "epochs": None,
                "max_steps": 8, "warmup_ratio": 0.0, "weight_decay": 0.0, "max_grad_norm": 1.0,
                "group_by_length": True, "checkpoint_every": 0, "seed": 0, "log_every": 100, "device": "cpu",
                "bf16": False, "compile": "on"}  # fmt: skip
    runs = {}
    for name in ("plain", "changed"):
        calls.clear()
        taken[0], factor["value"], change[0] = 0, 1.0, name == "changed"
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(steps, "optimizer_step", counted)
            runs[name] = engine.train(_MeanEmbedding(), loss_fn, lengths, settings, batch_fn=batch_fn,
                                      batch_width=lambda row: 8 * -(-int(row.max()) // 8),
                                      checkpoint_dir=tmp_path / name,
                                      fingerprint="x", emit=lambda m: None).compile  # fmt: skip
        before = [rows for step, rows in calls if step == 0]  # the batches built before the first step
        record = runs[name]
        assert record["enabled"] and len(record["shapes"]) == 2 and record["graph_breaks"] == 0
        assert len(before) == 1 + compiled.WARMUP_CALLS * len(record["shapes"]) == 5
        assert record["cudagraph_skips"] == 0
    assert runs["plain"]["recompiles"] == 0
    assert runs["changed"]["recompiles"] == 2  # both shapes were met again after step 4


@pytest.fixture(scope="module")
def two_width_frames(squad_dev):
    """16 questions whose windows (max_length 128), grouped by length, fall into two widths, 96 and 128 (multiples of
    32): 10 passes of each in 20 steps of 4."""
    length = squad_dev["context"].str.len()
    train = squad_dev[(length > 150) & (length < 500)].iloc[::40].iloc[:16].reset_index(drop=True)
    return train, squad_dev[length < 300].iloc[:2].reset_index(drop=True)


COMPILE_QA = {"max_length": 128, "stride": 32, "batch_size": 4, "max_steps": 20, "group_by_length": True,
              "pad_to_multiple_of": 32, "learning_rate": 1e-3, "eval_every": None, "checkpoint_every": 0,
              "log_every": 5, "threads": 1, "device": "cpu", "seed": 7}  # fmt: skip


def _sigterm_at(step: int):
    """A log callback that calls the installed SIGTERM handler when the progress line of ``step`` is logged."""

    def log(message: str) -> None:
        if message.startswith(f"step {step}/"):
            signal.getsignal(signal.SIGTERM)(signal.SIGTERM, None)

    return log


@pytest.fixture(scope="module")
def compiled_qa(two_width_frames, tiny_models, tmp_path_factory):
    """The QA loop at dropout 0, eager and compiled with inductor, and compiled again with a SIGTERM after step 10
    and a resumed second segment."""
    tmp, model = tmp_path_factory.mktemp("compiled_qa"), tiny_models["QuestionAnswering, no dropout"]
    eager = _qa_run(two_width_frames, model, tmp / "eager", dict(COMPILE_QA, compile="off"))
    on = _qa_run(two_width_frames, model, tmp / "on", dict(COMPILE_QA, compile="on"))
    with pytest.raises(qa.TrainingPreempted):
        _qa_run(two_width_frames, model, tmp / "cut", dict(COMPILE_QA, compile="on"), log=_sigterm_at(10))
    resumed = _qa_run(two_width_frames, model, tmp / "cut", dict(COMPILE_QA, compile="on"))
    return tmp, eager, on, resumed


def test_compiled_qa_losses_follow_the_eager_losses(compiled_qa):
    """20 steps over two batch widths, each compiled and warmed before the first step, the whole loss one graph per
    width: the losses stay within 1 % of the eager run's (measured: within 1e-6), and the weights close."""
    tmp, eager, on, _ = compiled_qa
    record = on["compile"]
    assert record["enabled"] and record["backend"] == "inductor" and record["graph_breaks"] == 0
    assert record["shapes"] == [[4, 96], [4, 128]] and record["passes"] == [10, 10] and record["eager_passes"] == 0
    assert record["compile_s"] > 0 and eager["compile"]["enabled"] is False
    losses = {name: np.array([r["loss"] for r in run["train_losses"]]) for name, run in (("eager", eager), ("on", on))}
    # it trained: the mean loss of the last 5 steps is 7 % below that of the first 5 (measured: 4.45 -> 4.15)
    assert len(losses["on"]) == 20 and losses["eager"][-5:].mean() < 0.95 * losses["eager"][:5].mean()
    np.testing.assert_allclose(losses["on"], losses["eager"], rtol=0.01)
    assert np.abs(losses["on"] / losses["eager"] - 1).max() < 1e-5  # measured: 1.1e-7
    a, b = (load_file(tmp / name / "model" / "model.safetensors") for name in ("eager", "on"))
    # Two parameters shift every position's start (end) logit alike, which the span cross-entropy ignores: their true
    # gradient is 0 and AdamW turns its rounding noise into lr-sized steps of random sign (measured: 5.5e-3, 7.5e-4
    # apart); every other weight agrees within 4.6e-6.
    shift_invariant = {"qa_outputs.bias", "bert.encoder.layer.1.output.LayerNorm.bias"}
    assert max(float((a[k] - b[k]).abs().max()) for k in a if k not in shift_invariant) < 1e-4


def test_a_compiled_run_resumes_exactly(compiled_qa):
    """A compiled run preempted after step 10 resumes (its shapes compiled and warmed again) and ends with the
    uninterrupted compiled run's losses and weights, bit for bit."""
    tmp, _, on, resumed = compiled_qa
    assert resumed["resumed_from_step"] == 10 and resumed["compile"]["passes"] == [5, 5]
    assert resumed["train_losses"] == on["train_losses"]
    a, b = (load_file(tmp / name / "model" / "model.safetensors") for name in ("on", "cut"))
    assert all(torch.equal(a[k], b[k]) for k in a)


@pytest.fixture
def aot_eager(monkeypatch):
    monkeypatch.setenv(compiled.BACKEND_VARIABLE, "aot_eager")


@pytest.mark.parametrize("loop", ["lmix", "lmix-isbiased", "creg", "creg-isbiased", "weighted", "prompt"])
def test_every_loop_compiles_into_one_graph_per_shape(loop, aot_eager, qa_frames, tiny_models, tmp_path):
    """LearnedMixin+H and Confidence Regularization (both position conventions), weighted classification and
    prompt-based fine-tuning, compiled (``aot_eager``): no graph break, every pass compiled, the eager losses."""
    runs = {}
    for setting in ("off", "on"):
        if loop in ("weighted", "prompt"):
            runs[setting] = _train_classifier(loop, tiny_models, tmp_path / setting, compile=setting,
                                              pad_to_multiple_of=32)  # fmt: skip
        else:
            settings = dict(QA_SETTINGS, compile=setting, pad_to_multiple_of=64)
            runs[setting] = _qa_run(qa_frames, tiny_models["QuestionAnswering"], tmp_path / setting, settings, loop)
    record = runs["on"]["compile"]
    assert record["enabled"] and record["graph_breaks"] == 0 and record["eager_passes"] == 0
    assert sum(record["passes"]) == STEPS
    for a, b in zip(runs["off"]["train_losses"], runs["on"]["train_losses"], strict=True):
        assert set(a) == set(b)
        for key in a:
            assert b[key] == pytest.approx(a[key], rel=1e-4, abs=1e-6), key


def test_compiled_runs_resume_exactly_with_dropout_and_across_the_setting(aot_eager, qa_frames, tiny_models, tmp_path):
    """With dropout 0.1: a compiled run preempted after step 2 resumes, compiling and warming its shape again (the
    warm-up draws dropout masks, and puts the random streams back), and ends with the uninterrupted compiled run's
    losses and weights, bit for bit. A checkpoint written with compile off resumes with compile on (an execution
    setting: the fingerprint and the optimizer state are the same)."""
    model = tiny_models["QuestionAnswering"]
    settings = {"on": dict(QA_SETTINGS, max_steps=4, pad_to_multiple_of=64, compile="on")}
    settings["off"] = dict(settings["on"], compile="off")
    whole = _qa_run(qa_frames, model, tmp_path / "whole", settings["on"])
    for first, name in (("on", "cut"), ("off", "switched")):
        with pytest.raises(qa.TrainingPreempted):
            _qa_run(qa_frames, model, tmp_path / name, settings[first], log=_sigterm_at(2))
    cut = _qa_run(qa_frames, model, tmp_path / "cut", settings["on"])
    switched = _qa_run(qa_frames, model, tmp_path / "switched", settings["on"])
    assert whole["compile"]["passes"] == [4] and cut["compile"]["passes"] == switched["compile"]["passes"] == [2]
    assert cut["resumed_from_step"] == switched["resumed_from_step"] == 2
    assert cut["train_losses"] == whole["train_losses"]
    a, b = (load_file(tmp_path / name / "model" / "model.safetensors") for name in ("whole", "cut"))
    assert all(torch.equal(a[k], b[k]) for k in a)
    np.testing.assert_allclose(
        [r["loss"] for r in switched["train_losses"]], [r["loss"] for r in whole["train_losses"]], rtol=1e-4
    )


def test_prediction_compiles_its_batches(aot_eager, qa_frames, tiny_models):
    """QA logits and class probabilities with compile: on (``aot_eager``): the batches of the shapes met twice or more
    run compiled (dynamo made graphs), the short last one eagerly, and the numbers are the eager ones."""
    from torch._dynamo.utils import counters

    from spurious.core.models import load_qa_model
    from spurious.core.train.qa.inference import predict_logits

    model = load_qa_model(tiny_models["QuestionAnswering"]).eval()
    features = qa.featurize(qa_frames[0].iloc[:9], load_tokenizer(MINILM), max_length=64, stride=16)
    assert len(features) % 4 != 0  # a short last batch
    graphs = counters["stats"]["unique_graphs"]
    starts = {c: predict_logits(model, features, batch_size=4, multiple=64, compile=c)[0] for c in ("off", "on")}
    assert counters["stats"]["unique_graphs"] > graphs
    for a, b in zip(starts["off"], starts["on"], strict=True):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)
    clf = classifier.load_trained_classifier(tiny_models["SequenceClassification"], device="cpu", compile="on",
                                             pad_to_multiple_of=32)  # fmt: skip
    graphs = counters["stats"]["unique_graphs"]
    on, _ = clf.probabilities(_toy_frame(10), batch_size=4)
    assert counters["stats"]["unique_graphs"] > graphs
    clf.compile = "off"
    np.testing.assert_allclose(on, clf.probabilities(_toy_frame(10), batch_size=4)[0], rtol=1e-5, atol=1e-7)


@pytest.fixture
def kernel_dtypes(monkeypatch):
    """The dtypes of the query, key and value every call of the packed reference receives (it runs the strict
    reference, SPURIOUS_PACKED_REFERENCE=1); the registered functions are restored afterwards."""
    from spurious.core.train import packing

    seen: list[tuple[torch.dtype, ...]] = []
    strict = packing.reference_attention

    def recording(module, query, key, value, attention_mask, **kwargs):
        seen.append((query.dtype, key.dtype, value.dtype))
        return strict(module, query, key, value, attention_mask, **kwargs)

    monkeypatch.setenv(packing.REFERENCE_ENV, "1")
    monkeypatch.setattr(packing, "reference_attention", recording)
    yield seen
    monkeypatch.undo()
    packing.register()


def test_packed_and_compiled_together_follow_padded_eager(aot_eager, kernel_dtypes, two_width_frames, tiny_models,
                                                          tmp_path, monkeypatch):  # fmt: skip
    """``attention: packed`` with ``compile: on`` (``aot_eager``) in bf16, as the CUDA defaults run. On a CPU the packed
    windows run through the block-diagonal reference (``varlen_attn`` needs CUDA), which refuses float32 as
    FlashAttention does: a pass outside the training's bf16 autocast (the compiled step's first, eager warm-up pass
    was one) fails here as on a GPU. The packed kernel sees bf16 only, eager and compiled; the shapes listed for
    compilation are those the loop meets (one row of T tokens on the bucket grid, B windows), each compiled into one
    graph, and the validation batch at the end, met once, is not compiled; at dropout 0 the compiled packed losses are
    the eager packed ones (packed against padded: tests/core/test_packing.py)."""
    from collections import Counter

    from spurious.core.train import packing
    from spurious.core.train.qa.inference import _plain_loss

    met: list[tuple[int, int]] = []  # (windows, packed length) of the batches packed inside the optimizer steps
    real_pack, real_step, stepping = packing.pack, steps.optimizer_step, [False]

    def recording_pack(batch, **kwargs):
        packed = real_pack(batch, **kwargs)
        if stepping[0]:  # not the warm-up's passes, nor the validation loss at the end
            met.append((packed["packed_index"].shape[0], packed["packed_input_ids"].shape[1]))
        return packed

    def step(*args, **kwargs):
        stepping[0] = True
        try:
            return real_step(*args, **kwargs)
        finally:
            stepping[0] = False

    monkeypatch.setattr(packing, "pack", recording_pack)
    monkeypatch.setattr(steps, "optimizer_step", step)
    model = tiny_models["QuestionAnswering, no dropout"]
    bf16 = dict(COMPILE_QA, bf16=True)
    runs, dtypes = {}, {}
    for name, setting in (("packed", "off"), ("both", "on")):
        met.clear()
        kernel_dtypes.clear()
        runs[name] = _qa_run(two_width_frames, model, tmp_path / name, dict(bf16, compile=setting, attention="packed"))
        dtypes[name] = set(kernel_dtypes)
        assert len(met) == 20
    assert dtypes == {"packed": {(torch.bfloat16,) * 3}, "both": {(torch.bfloat16,) * 3}}
    met_counts = Counter(met)
    assert all(length % packing.bucket_size(rows, COMPILE_QA["max_length"]) == 0 for rows, length in met_counts)
    record = runs["both"]["compile"]
    assert record["enabled"] and record["graph_breaks"] == 0
    assert dict(zip(map(tuple, record["shapes"]), record["passes"], strict=True)) == {
        shape: n for shape, n in met_counts.items() if n >= 2
    }
    assert record["eager_passes"] == sum(n for n in met_counts.values() if n < 2) and len(record["shapes"]) >= 2
    # the validation at the end (one batch, met once) ran eagerly: dynamo compiled nothing for its loss
    assert compiled.compiled_graphs(_plain_loss) == 0 and len(runs["both"]["validation_losses"]) == 1
    losses = {name: np.array([r["loss"] for r in run["train_losses"]]) for name, run in runs.items()}
    assert len(losses["both"]) == 20
    # the same bf16 computations in another order (measured: within 2.4e-6; 1.8e-5 at worst over 10 steps)
    np.testing.assert_allclose(losses["both"], losses["packed"], rtol=1e-4)


@pytest.mark.parametrize("max_grad_norm", [1.0, None])
def test_tracked_steps_read_nothing_on_the_host(max_grad_norm, qa_frames, tiny_models, tmp_path, monkeypatch):
    """With a tracker on, the gradient norm (from the clipping, or computed where the run does not clip) stays on the
    device with the loss until the log line reads both."""
    found = _watch_steps(monkeypatch)
    settings = dict(QA_SETTINGS, tracker="tensorboard", max_grad_norm=max_grad_norm, log_every=STEPS)
    summary = _qa_run(qa_frames, tiny_models["QuestionAnswering"], tmp_path, settings)
    assert summary["steps"] == STEPS and found == [[]] * STEPS, found[0][:1]
    assert (tmp_path / "tracker" / "run").is_dir()  # beside the model folder
