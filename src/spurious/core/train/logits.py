"""Per-feature start/end logits of bias and teacher models, stored once and reused by every run that needs them.

LearnedMixin and Confidence Regularization need, for every *training window* of the main model, the logits of another
model (the bias model, the teacher) on that very window (as the authors' code infers them: MIR-MU/isbiased). Running
those models live in every training step would double its cost, so they are inferred once
(``spurious.core.train.qa.infer_feature_logits``) and stored aligned to the training features: row ``i`` of the store
belongs to feature ``i`` of ``featurize``'s output order (``spurious.core.train.qa.training_features``), which is also
the
``feature_index`` a training objective receives.

Layout: one float32 ``.npy`` of shape ``[N, 2, L]`` (``L`` = ``max_length``; ``[:, 0]`` start, ``[:, 1]`` end logits;
position ``j`` is token ``j`` of the *unpadded* window, zeros beyond its length), memory-mapped when loaded, plus a JSON
sidecar (same name, ``.json``) holding the fingerprint of the features and who produced the logits.

Alignment by index is only correct if producer and consumer made the same windows from the same data with the same
tokenizer. The fingerprint (counts, window settings, tokenizer, hashes of all token ids and example ids) is compared
key by key on load, and any difference is an error naming the keys: a silently misaligned bias would quietly ruin a
debiasing run.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from spurious.core import readers
from spurious.core.errors import rebuild_advice
from spurious.core.io import atomic_path, write_json

if TYPE_CHECKING:
    import torch

FORMAT_VERSION = 1


class FeatureWindows(Protocol):
    """What a fingerprint reads of a feature set: ``spurious.core.train.qa.QAFeatures`` is one. A protocol rather than
    that class, because ``core.train.qa`` stores and reads logits through this module and must not be imported back by
    it."""

    input_ids: list[np.ndarray]
    example_index: np.ndarray
    example_ids: list[str]
    pad_on_right: bool
    max_length: int | None
    stride: int | None
    tokenizer_name: str | None
    vocab_size: int | None

    def __len__(self) -> int: ...


def ids_sha256(ids: Sequence[str]) -> str:
    """SHA-256 of a sequence of ids (unit-separator joined): identifies which examples a feature set or run covers."""
    return hashlib.sha256("\x1f".join(ids).encode()).hexdigest()


def features_fingerprint(
    features: FeatureWindows,
    *,
    tokenizer_name: str | None = None,
    max_length: int | None = None,
    stride: int | None = None,
    vocab_size: int | None = None,
) -> dict[str, Any]:
    """Identify a feature set: what producer and consumer of a logits store must agree on.

    The keyword arguments default to what ``featurize`` recorded on ``features`` (so a training objective that only
    receives the features can compute the fingerprint itself); passing them overrides the recorded values.
    """
    values = {
        "tokenizer": tokenizer_name if tokenizer_name is not None else features.tokenizer_name,
        "vocab_size": vocab_size if vocab_size is not None else features.vocab_size,
        "max_length": max_length if max_length is not None else features.max_length,
        "stride": stride if stride is not None else features.stride,
    }
    unknown = [k for k, v in values.items() if v is None]
    if unknown:
        raise ValueError(
            f"features_fingerprint: {', '.join(unknown)} not recorded on these features (not made by featurize); "
            "pass them as keyword arguments"
        )
    ids_hash = hashlib.sha256()
    for row in features.input_ids:
        ids_hash.update(np.int64(len(row)).tobytes())
        ids_hash.update(np.ascontiguousarray(row, dtype="<i8").tobytes())
    ids_hash.update(np.ascontiguousarray(features.example_index, dtype="<i8").tobytes())
    return {
        "format": FORMAT_VERSION,
        "n_features": len(features),
        "n_examples": len(features.example_ids),
        "max_length": int(values["max_length"]),
        "stride": int(values["stride"]),
        "tokenizer": str(values["tokenizer"]),
        "vocab_size": int(values["vocab_size"]),
        "pad_on_right": bool(features.pad_on_right),
        "input_ids_sha256": ids_hash.hexdigest(),
        "example_ids_sha256": ids_sha256(features.example_ids),
    }


def sidecar_path(path: str | os.PathLike) -> Path:
    """The JSON file describing the store at ``path`` (same name, ``.json`` suffix)."""
    return Path(path).with_suffix(".json")


def write_feature_logits(
    path: str | os.PathLike,
    starts: Sequence[np.ndarray],
    ends: Sequence[np.ndarray],
    fingerprint: Mapping[str, Any],
    *,
    producer: Mapping[str, Any],
) -> Path:
    """Write the ``[N, 2, max_length]`` float32 store and its sidecar; returns the store's path.

    The old sidecar is removed first and the new one written last, each file atomically (temporary name, then rename),
    so a sidecar on disk always describes a complete store, and an interrupted write leaves no store that loads.
    """
    path = Path(path)
    n, width = int(fingerprint["n_features"]), int(fingerprint["max_length"])
    if len(starts) != n or len(ends) != n:
        raise ValueError(f"{path}: {len(starts)} start and {len(ends)} end rows for a fingerprint of {n} features")
    sidecar = sidecar_path(path)
    sidecar.unlink(missing_ok=True)
    with atomic_path(path, suffix=".npy") as tmp:
        store = np.lib.format.open_memmap(tmp, mode="w+", dtype=np.float32, shape=(n, 2, width))
        for i, (s, e) in enumerate(zip(starts, ends, strict=True)):
            if len(s) > width or len(e) > width:
                raise ValueError(f"{path}: feature {i} has {max(len(s), len(e))} logits, more than max_length={width}")
            store[i, 0, : len(s)] = s
            store[i, 1, : len(e)] = e
        store.flush()
        del store
    write_json({"fingerprint": dict(fingerprint), "shape": [n, 2, width], "producer": dict(producer)}, sidecar)
    return path


def read_sidecar(path: str | os.PathLike) -> dict[str, Any]:
    """The sidecar of the store at ``path`` (fingerprint, shape, producer)."""
    sidecar = sidecar_path(path)
    if not sidecar.is_file():
        raise ValueError(
            f"{path}: no sidecar {sidecar.name} (the store is incomplete or was not written by write_feature_logits); "
            "regenerate the logits with spurious.core.train.qa.infer_feature_logits"
        )
    return readers.read_json(sidecar, fix=rebuild_advice(path))


def fingerprint_differences(expected: Mapping[str, Any], found: Mapping[str, Any]) -> dict[str, tuple[Any, Any]]:
    """``{key: (expected, found)}`` for every key whose values differ (a key missing on one side counts)."""
    return {
        k: (expected.get(k), found.get(k))
        for k in sorted(set(expected) | set(found))
        if expected.get(k) != found.get(k)
    }


def load_feature_logits(path: str | os.PathLike, expected_fingerprint: Mapping[str, Any]) -> np.ndarray:
    """Memory-map the store at ``path`` after checking that it was made for the features ``expected_fingerprint``
    describes; a mismatch raises ValueError naming the file, every differing key and the fix."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{path}: no logits store; create it with spurious.core.train.qa.infer_feature_logits")
    meta = read_sidecar(path)
    diff = fingerprint_differences(expected_fingerprint, meta.get("fingerprint", {}))
    if diff:
        lines = "; ".join(f"{k}: expected {e!r}, found {f!r}" for k, (e, f) in diff.items())
        raise ValueError(
            f"{path} holds logits of other features than the consuming run's ({lines}); regenerate the logits with "
            "the consumer's tokenizer/max_length/stride and training data (spurious.core.train.qa.infer_feature_logits "
            "with tokenizer_from = the main model and the main run's settings)"
        )
    store = readers.read_npy(path, mmap_mode="r")
    expected_shape = (int(expected_fingerprint["n_features"]), 2, int(expected_fingerprint["max_length"]))
    if store.shape != expected_shape or store.dtype != np.float32:
        raise ValueError(
            f"{path}: array of shape {store.shape} and dtype {store.dtype}, expected {expected_shape} float32; "
            "the file was changed after it was written: regenerate it"
        )
    return store


def align_to_batch(
    store: np.ndarray,
    feature_index: Sequence[int] | np.ndarray,
    attention_mask: np.ndarray | torch.Tensor,
    *,
    pad_on_right: bool = True,
    fill: float = 0.0,
) -> np.ndarray:
    """The stored logits of the windows ``feature_index`` laid out like their collated batch: ``[B, 2, W]`` float32.

    ``W`` and the padding side follow ``attention_mask`` (the batch's), so dynamic padding and left padding both line
    up with the model's own logits; padding positions hold ``fill``.
    """
    mask = attention_mask.detach().cpu().numpy() if hasattr(attention_mask, "detach") else np.asarray(attention_mask)
    idx = np.asarray(feature_index, dtype=np.int64)
    n, width = mask.shape
    lengths = mask.astype(bool).sum(axis=1)
    if np.any(lengths > store.shape[2]):
        raise ValueError(
            f"batch windows of up to {lengths.max()} tokens, but the store holds {store.shape[2]} per window"
        )
    rows = np.asarray(store[idx])  # fancy indexing copies the rows out of the memory map
    out = np.full((n, 2, width), fill, dtype=np.float32)
    for j, length in enumerate(lengths):
        dst = slice(0, length) if pad_on_right else slice(width - length, width)
        out[j, :, dst] = rows[j, :, :length]
    return out
