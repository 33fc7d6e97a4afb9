"""Stubborn Lexical Bias's no-pretraining control (Serrano, Dodge & Smith 2023, §5.2 and footnote 8): a 3-layer
BiLSTM classifier whose word embeddings are initialised with CBOW embeddings trained on the (q-weighted) training
set itself, so that no signal from outside the training data leaks in.

What the paper fixes, and what we pin where it is silent:

* **Tokens**: the lexical track's tokenizer (:func:`spurious.lexical.features.tokenize`: lower-cased, punctuation
  deleted, whitespace split), the two segments of a pair joined by a ``<sep>`` token; at most ``max_tokens`` per
  instance (the end is cut). Types seen fewer than ``min_count`` times in the training corpus map to ``<unk>``.
* **CBOW** (gensim's ``Word2Vec(sg=0)``, one worker, a CRC32 hash so that the vectors do not depend on Python's
  per-process string hashing): dimension 128 (footnote 8), window ``cbow_window``, ``cbow_epochs`` passes. gensim
  has no per-sentence weights, so the *q-weighted* training set is a seeded resample of ``|D|`` instances drawn
  with probabilities ``q``; uniform weights use every instance once.
* **BiLSTM** (footnote 8): embedding 128 → BiLSTM with 256 outputs (128 per direction) → BiLSTM with 512 outputs →
  BiLSTM with 128 outputs; the 128-dimensional instance vector is the last forward and the first backward state of
  the third layer, concatenated, followed by a linear projection to the labels. The embeddings are fine-tuned.
* **Training**: Adam, ``epochs`` passes in a seeded order, batch ``batch_size``, each example's cross-entropy
  multiplied by its weight ``q_i · |D|`` (as the transformers, :func:`spurious.core.train.classifier.weighted_loss`). A
  run of a few minutes on a CPU: no intermediate checkpoints.

The saved folder holds ``bilstm.json`` (the settings, vocabulary and label names) and ``model.pt`` (the weights);
:func:`predict_bilstm` gives the columns of :func:`spurious.core.train.classifier.predict_classifier`.
"""

from __future__ import annotations

import json
import logging
import math
import os
import time
import zlib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from spurious.core import readers
from spurious.core.errors import READ_ERRORS, InputError, rebuild_advice, unreadable
from spurious.core.io import atomic_dir
from spurious.core.train.training import pick_device
from spurious.lexical.features import tokenize

logger = logging.getLogger(__name__)
LogFn = Callable[[str], None]

MARKER = "bilstm.json"
WEIGHTS = "model.pt"
PAD, UNK, SEP = "<pad>", "<unk>", "<sep>"
SPECIALS = (PAD, UNK, SEP)

DEFAULT_SETTINGS: dict[str, Any] = {
    "embedding_dim": 128,  # footnote 8
    "hidden_sizes": [256, 512, 128],  # footnote 8: the outputs of the three BiLSTM layers (both directions)
    "cbow_window": 5,
    "cbow_min_count": 2,
    "cbow_epochs": 10,
    "min_count": 2,
    "max_tokens": 128,
    "epochs": 10,
    "batch_size": 32,
    "learning_rate": 1.0e-3,
    "dropout": 0.1,
    "seed": 0,
    "device": "auto",
    "threads": None,
}


def resolve_settings(settings: Mapping[str, Any] | None) -> dict[str, Any]:
    """The defaults overridden by ``settings``; unknown keys and bad values raise ValueError naming them."""
    s = dict(DEFAULT_SETTINGS)
    unknown = sorted(set(settings or {}) - set(s))
    if unknown:
        raise ValueError(f"unknown BiLSTM settings {unknown}; known: {sorted(s)}")
    s.update(settings or {})
    sizes = s["hidden_sizes"]
    if len(sizes) != 3 or any(int(h) < 2 or int(h) % 2 for h in sizes):
        raise ValueError(f"BiLSTM hidden_sizes must be three even numbers (both directions' outputs), got {sizes}")
    for key in ("embedding_dim", "max_tokens", "epochs", "batch_size", "cbow_epochs", "cbow_window"):
        if int(s[key]) < 1:
            raise ValueError(f"BiLSTM setting {key} must be a positive integer, got {s[key]!r}")
    return s


def instance_tokens(text_a: str, text_b: str | None, max_tokens: int) -> list[str]:
    """The instance's tokens: text_a's, ``<sep>``, text_b's (pairs), at most ``max_tokens``."""
    tokens = tokenize(text_a)
    if text_b is not None and not (isinstance(text_b, float) and math.isnan(text_b)):
        tokens = [*tokens, SEP, *tokenize(text_b)]
    return tokens[:max_tokens] or [UNK]


def frame_tokens(frame: pd.DataFrame, max_tokens: int) -> list[list[str]]:
    b = frame["text_b"] if "text_b" in frame else pd.Series([None] * len(frame))
    return [instance_tokens(a, y, max_tokens) for a, y in zip(frame["text_a"], b, strict=True)]


def _crc32(text: str) -> int:
    return zlib.crc32(text.encode("utf-8"))


def cbow_corpus(tokens: Sequence[list[str]], weights: np.ndarray | None, seed: int) -> list[list[str]]:
    """The corpus CBOW is trained on: every instance once (uniform weights), or a seeded resample of ``len(tokens)``
    instances drawn with probabilities proportional to ``weights`` (the q-weighted training set)."""
    if weights is None:
        return list(tokens)
    p = np.asarray(weights, dtype=np.float64)
    p = p / p.sum()
    rows = np.random.default_rng(seed).choice(len(tokens), size=len(tokens), replace=True, p=p)
    return [tokens[i] for i in rows]


def train_cbow(corpus: Sequence[list[str]], s: Mapping[str, Any]) -> tuple[list[str], np.ndarray]:
    """CBOW word vectors (gensim, deterministic: one worker, CRC32 hashing); returns the types and their vectors."""
    from gensim.models import Word2Vec

    model = Word2Vec(
        sentences=[list(t) for t in corpus],
        vector_size=int(s["embedding_dim"]),
        window=int(s["cbow_window"]),
        min_count=int(s["cbow_min_count"]),
        sg=0,
        workers=1,
        seed=int(s["seed"]),
        epochs=int(s["cbow_epochs"]),
        hashfxn=_crc32,
    )
    return list(model.wv.index_to_key), np.asarray(model.wv.vectors, dtype=np.float32)


class BiLSTMClassifier(torch.nn.Module):
    """Embedding → three BiLSTM layers (outputs ``hidden_sizes``) → last forward + first backward state of the third
    → linear to the labels."""

    def __init__(self, vocab_size: int, n_labels: int, embedding_dim: int, hidden_sizes: Sequence[int], dropout: float):
        super().__init__()
        self.embedding = torch.nn.Embedding(vocab_size, embedding_dim, padding_idx=0)
        layers, width = [], embedding_dim
        for out in hidden_sizes:
            layers.append(torch.nn.LSTM(width, int(out) // 2, batch_first=True, bidirectional=True))
            width = int(out)
        self.lstms = torch.nn.ModuleList(layers)
        self.dropout = torch.nn.Dropout(dropout)
        self.output = torch.nn.Linear(width, n_labels)

    def forward(self, ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

        x = self.dropout(self.embedding(ids))
        h_n = None
        for k, lstm in enumerate(self.lstms):
            packed = pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
            out, (h_n, _) = lstm(packed)
            if k < len(self.lstms) - 1:
                x, _ = pad_packed_sequence(out, batch_first=True, total_length=ids.shape[1])
                x = self.dropout(x)
        # h_n: (2, batch, hidden): the forward direction's last state and the backward direction's state at t = 0
        vector = torch.cat([h_n[0], h_n[1]], dim=1)
        return self.output(self.dropout(vector))


def _encode(tokens: Sequence[list[str]], index: Mapping[str, int]) -> list[list[int]]:
    unk = index[UNK]
    return [[index.get(t, unk) for t in row] for row in tokens]


def _batch(rows: Sequence[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    lengths = torch.tensor([len(r) for r in rows], dtype=torch.long)
    ids = torch.zeros((len(rows), int(lengths.max())), dtype=torch.long)
    for k, r in enumerate(rows):
        ids[k, : len(r)] = torch.tensor(r, dtype=torch.long)
    return ids, lengths


def train_bilstm(
    train_frame: pd.DataFrame,
    *,
    output_dir: str | os.PathLike,
    settings: Mapping[str, Any] | None = None,
    weights: np.ndarray | None = None,
    log: LogFn | None = None,
) -> dict[str, Any]:
    """Train the control on a classification frame (``weights``: one nonnegative multiplier per row, ``q_i · |D|``
    in the paper); CBOW first, on the same (q-weighted) data. Saves to ``output_dir`` (written to a temporary
    folder, then renamed) and returns the summary (settings, vocabulary size, CBOW coverage, losses per epoch)."""
    from spurious.core.train.classifier import weighted_loss

    s = resolve_settings(settings)
    emit = log or logger.info
    if len(train_frame) == 0:
        raise ValueError("the training frame is empty")
    if weights is not None:
        weights = np.asarray(weights, dtype=np.float64)
        if weights.shape != (len(train_frame),) or not np.all(np.isfinite(weights)) or (weights < 0).any():
            raise ValueError(
                f"weights must be {len(train_frame)} finite nonnegative numbers, got shape {weights.shape}"
            )
        if weights.sum() <= 0:
            raise ValueError("weights sum to zero")
    if s["threads"]:
        torch.set_num_threads(int(s["threads"]))
    seed = int(s["seed"])
    torch.manual_seed(seed)
    label_names = list(train_frame.attrs["label_names"])
    t0 = time.perf_counter()
    tokens = frame_tokens(train_frame, int(s["max_tokens"]))
    cbow_types, cbow_vectors = train_cbow(cbow_corpus(tokens, weights, seed), s)
    counts: dict[str, int] = {}
    for row in tokens:
        for t in row:
            counts[t] = counts.get(t, 0) + 1
    vocab = [*SPECIALS, *sorted(t for t, c in counts.items() if c >= int(s["min_count"]) and t not in SPECIALS)]
    index = {t: i for i, t in enumerate(vocab)}
    model = BiLSTMClassifier(
        len(vocab), len(label_names), int(s["embedding_dim"]), s["hidden_sizes"], float(s["dropout"])
    )
    device = pick_device(str(s["device"]))
    cbow_index = {t: i for i, t in enumerate(cbow_types)}
    covered = [t for t in vocab if t in cbow_index]
    with torch.no_grad():  # before the move to the device: one copy per type on the CPU
        for t in covered:
            model.embedding.weight[index[t]] = torch.from_numpy(cbow_vectors[cbow_index[t]])
        model.embedding.weight[0].zero_()
    emit(
        f"BiLSTM: {len(train_frame)} instances, vocabulary {len(vocab)} types (min count {s['min_count']}), "
        f"{len(covered)} initialised from CBOW ({len(cbow_types)} CBOW types, {time.perf_counter() - t0:.1f}s)"
    )
    encoded = _encode(tokens, index)
    model.to(device)
    labels = torch.tensor(train_frame["label"].to_numpy(dtype=np.int64), device=device)
    weight_tensor = torch.tensor(weights, dtype=torch.float32, device=device) if weights is not None else None
    optimizer = torch.optim.Adam(model.parameters(), lr=float(s["learning_rate"]))
    batch_size = int(s["batch_size"])
    history = []
    model.train()
    for epoch in range(int(s["epochs"])):
        order = np.random.default_rng([seed, epoch]).permutation(len(encoded))
        total, seen = 0.0, 0
        for start in range(0, len(order), batch_size):
            rows = order[start : start + batch_size]
            ids, lengths = _batch([encoded[i] for i in rows])
            logits = model(ids.to(device), lengths)
            w = weight_tensor[rows] if weight_tensor is not None else None
            loss = weighted_loss(logits, labels[rows], w)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
            optimizer.step()
            total += float(loss.detach()) * len(rows)
            seen += len(rows)
        history.append({"epoch": epoch + 1, "loss": total / seen})
        emit(f"BiLSTM epoch {epoch + 1}/{s['epochs']}: mean training loss {total / seen:.4f}")
    summary = {
        "architecture": "bilstm_cbow",
        "label_names": label_names,
        "settings": s,
        "vocabulary_size": len(vocab),
        "cbow_types": len(cbow_types),
        "cbow_initialised": len(covered),
        "cbow_corpus": "q-weighted resample" if weights is not None else "the training set",
        "train_losses": history,
        "n_train_examples": len(train_frame),
        "train_wall_time_s": time.perf_counter() - t0,
    }
    # written to a temporary sibling folder, then swapped in: a partial model folder never looks complete
    with atomic_dir(output_dir) as tmp:
        torch.save({k: v.cpu() for k, v in model.state_dict().items()}, tmp / WEIGHTS)
        (tmp / MARKER).write_text(json.dumps({**summary, "vocabulary": vocab}, indent=1) + "\n")
    return summary


def is_bilstm(model_dir: str | os.PathLike) -> bool:
    """Whether a saved model folder holds a BiLSTM of this module."""
    return (Path(model_dir) / MARKER).is_file()


def _retrain(model_dir: str | os.PathLike) -> str:
    return rebuild_advice(model_dir, again="train the model again")


def read_description(model_dir: str | os.PathLike) -> dict[str, Any]:
    """The saved ``bilstm.json``: settings, vocabulary and label names; a damaged file is an UnreadableFileError, and
    a folder without its weights (``model.pt``) an InputError, before anything is predicted."""
    path = Path(model_dir) / MARKER
    fix = _retrain(model_dir)
    with unreadable(path, "BiLSTM model description", fix, READ_ERRORS + (KeyError, TypeError)):
        meta = readers.read_json(path, kind="BiLSTM model description", fix=fix)
        description = {"label_names": list(meta["label_names"]), "settings": meta["settings"],
                       "vocabulary": list(meta["vocabulary"])}
    if not (Path(model_dir) / WEIGHTS).is_file():
        raise InputError(f"{model_dir}: a BiLSTM model folder without its weights {WEIGHTS}; {fix}")
    return description


@torch.no_grad()
def predict_bilstm(
    model_dir: str | os.PathLike,
    frame: pd.DataFrame,
    *,
    batch_size: int = 256,
    device: str = "auto",
    log: LogFn | None = None,
) -> pd.DataFrame:
    """Predictions of a saved BiLSTM: ``id, label, prediction, correct, probabilities`` (as
    :func:`spurious.core.train.classifier.predict_classifier`). The model's label names must match the frame's."""
    emit = log or logger.info
    meta = read_description(model_dir)
    names = meta["label_names"]
    if names != list(frame.attrs["label_names"]):
        raise ValueError(
            f"{model_dir}: the model's labels {names} differ from the data's {frame.attrs['label_names']}; predict "
            "on data of the task the model was trained on"
        )
    s = meta["settings"]
    vocab = meta["vocabulary"]
    model = BiLSTMClassifier(len(vocab), len(names), int(s["embedding_dim"]), s["hidden_sizes"], float(s["dropout"]))
    weights, fix = Path(model_dir) / WEIGHTS, _retrain(model_dir)
    state = readers.load_torch(weights, kind="BiLSTM model file", fix=fix)
    with unreadable(weights, "BiLSTM model file", fix):  # weights of another shape
        model.load_state_dict(state)
    dev = pick_device(device)
    model.to(dev).eval()
    encoded = _encode(frame_tokens(frame, int(s["max_tokens"])), {t: i for i, t in enumerate(vocab)})
    probs = []
    for start in range(0, len(encoded), batch_size):
        ids, lengths = _batch(encoded[start : start + batch_size])
        probs.append(torch.softmax(model(ids.to(dev), lengths).float(), dim=-1).cpu().numpy())
    p = np.concatenate(probs) if probs else np.zeros((0, len(names)))
    labels = frame["label"].to_numpy(dtype=np.int64)
    prediction = p.argmax(axis=1)
    emit(f"BiLSTM: predicted {len(frame)} examples; accuracy {np.mean(prediction == labels):.4f}")
    out = pd.DataFrame(
        {
            "id": frame["id"].astype(str).to_numpy(),
            "label": labels,
            "prediction": prediction,
            "correct": prediction == labels,
            "probabilities": list(p),
        }
    )
    out.attrs["label_names"] = names
    return out
