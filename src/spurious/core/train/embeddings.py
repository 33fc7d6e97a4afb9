"""Representations Φ(X) for AFLite: pooled encoder embeddings of classification frames, or features a user supplies.

AFLite filters on *pre-computed* representations (Le Bras et al. 2020, §2): the paper embeds with RoBERTa
fine-tuned on a small random fraction of the data (the warm-up; that fraction is then discarded), or uses a frozen
encoder. ``embed`` works for either: pass the pretrained checkpoint (frozen) or the directory of a classifier
fine-tuned with ``spurious.core.train.classifier.train_classifier`` (warm-up; its classification head is dropped).
"""

from __future__ import annotations

import os
from collections.abc import Callable

import numpy as np
import pandas as pd
import torch

from spurious.core import readers
from spurious.core.io import align_to_ids
from spurious.core.models import from_pretrained, load_tokenizer
from spurious.core.train.classifier import encode
from spurious.core.train.training import autocast, pad_multiple, pick_device, use_bf16

POOLINGS = ("cls", "mean")


@torch.no_grad()
def embed(
    frame: pd.DataFrame,
    model_name_or_path: str | os.PathLike,
    *,
    pooling: str = "cls",
    max_length: int = 128,
    batch_size: int = 128,
    device: str = "auto",
    pad_to_multiple_of: int | str = "auto",
    bf16: bool | str = "auto",
    log: Callable[[str], None] | None = None,
) -> np.ndarray:
    """float32 ``[len(frame), hidden]``: the last hidden state at the first token (``cls``, the paper's [CLS]) or
    averaged over the non-padding tokens (``mean``). Batches are formed by length; padding never changes a row."""
    from transformers import AutoModel

    if pooling not in POOLINGS:
        raise ValueError(f"pooling must be one of {POOLINGS}, got {pooling!r}")
    dev = pick_device(device)
    model = from_pretrained(AutoModel, model_name_or_path)
    model.to(dev).eval()
    data = encode(frame, load_tokenizer(model_name_or_path), max_length)
    out = np.zeros((len(data), model.config.hidden_size), dtype=np.float32)
    order = np.argsort(data.lengths, kind="stable")
    use = use_bf16(bf16, dev)
    multiple = pad_multiple(pad_to_multiple_of, dev)  # batch widths (spurious.core.train.training.padded_width)
    for lo in range(0, len(order), batch_size):
        rows = order[lo : lo + batch_size]
        batch = {k: v.to(dev) for k, v in data.collate(rows, multiple).items()}
        with autocast(dev, use):
            hidden = model(**batch).last_hidden_state.float()
        if pooling == "cls":
            pooled = hidden[:, 0]
        else:
            mask = batch["attention_mask"].unsqueeze(-1).float()
            pooled = (hidden * mask).sum(1) / mask.sum(1)
        out[rows] = pooled.cpu().numpy()
        if log and (lo // batch_size) % 20 == 0:
            log(f"embedded {min(lo + batch_size, len(order))} of {len(order)} examples")
    return out


def read_features(path: str | os.PathLike, ids: pd.Series | list[str]) -> np.ndarray:
    """User-supplied features aligned to ``ids``: a parquet with an ``id`` column and one float column per dimension,
    or a ``.npy`` whose rows are in the data's order (a ``.npy`` must have exactly one row per id)."""
    path = os.fspath(path)
    if path.endswith(".npy"):
        values = readers.read_npy(path)
        if values.ndim != 2 or values.shape[0] != len(ids):
            raise ValueError(
                f"{path}: a .npy of features must be 2-d with one row per example ({len(ids)}), got shape "
                f"{values.shape}; or give a parquet with an id column"
            )
        return values.astype(np.float32)
    table = readers.read_parquet(path)
    if "id" not in table.columns:
        raise ValueError(f"{path}: a features parquet needs an id column and one numeric column per dimension")
    numeric = table.drop(columns="id").astype(np.float32)
    by_id = pd.Series(list(numeric.to_numpy()), index=table["id"].astype(str))
    rows = align_to_ids(by_id, ids, source=path, what="features", fix="give features for every example")
    return np.stack(rows).astype(np.float32)
