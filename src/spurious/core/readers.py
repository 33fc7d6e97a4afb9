"""One checked reader per file kind: parquet, JSON (plain or gzip), CSV/TSV, JSON lines, numpy and torch files.

Every file the package and the workflow's scripts read goes through one of these (``tests/core/test_readers.py``
scans the source for a direct ``pd.read_parquet``, ``json.load``, ``np.load``, ``torch.load`` and friends). A file
that exists but cannot be read is then always the same one line, an :class:`~spurious.core.errors.UnreadableFileError`:
``<path>: not a readable <kind> (<the reader's reason>); <what to do>``. The advice, when the caller gives none, is
:func:`spurious.core.errors.rebuild_advice`: inside a workflow job, the Snakemake command that writes the file (and
what depends on it) anew; elsewhere, write or download it again. A missing file passes unchanged
(``FileNotFoundError``): the callers say what it should have been.
"""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from spurious.core.errors import READ_ERRORS, InputError, rebuild_advice, unreadable


def _fix(path: str | os.PathLike, fix: str | None) -> str:
    return fix if fix is not None else rebuild_advice(path)


def read_parquet(path: str | os.PathLike, *, columns: list[str] | None = None, fix: str | None = None):
    """A parquet file as a pandas DataFrame (``columns``: only these)."""
    return read_parquet_table(path, columns=columns, fix=fix).to_pandas()


def read_parquet_table(path: str | os.PathLike, *, columns: list[str] | None = None, fix: str | None = None):
    """A parquet file as a pyarrow Table (its schema metadata included)."""
    import pyarrow.parquet as pq

    with unreadable(path, "parquet file", _fix(path, fix)):
        return pq.read_table(path, columns=columns)


def read_parquet_schema(path: str | os.PathLike, *, fix: str | None = None):
    """A parquet file's schema (column names, types and metadata) without reading its rows."""
    import pyarrow.parquet as pq

    with unreadable(path, "parquet file", _fix(path, fix)):
        return pq.read_schema(path)


class DuplicateKeyError(InputError):
    """A JSON object names a key twice (``json`` would keep the last value silently)."""

    def __init__(self, path: str | os.PathLike, keys: list[str], fix: str) -> None:
        self.path, self.keys = str(path), keys
        shown = ", ".join(repr(k) for k in keys[:5]) + (", ..." if len(keys) > 5 else "")
        super().__init__(f"{path}: {len(keys)} key(s) given more than once in one JSON object ({shown}); {fix}")


def _load_json(path: Path, hook: Callable[[list[tuple[str, Any]]], Any]) -> Any:
    with gzip.open(path, "rt", encoding="utf-8") if path.suffix == ".gz" else open(path, encoding="utf-8") as fh:
        return json.load(fh, object_pairs_hook=hook)


def json_kind(path: str | os.PathLike) -> str:
    """The kind of file a JSON reader names: gzip-compressed or plain."""
    return "gzip-compressed JSON file" if str(path).endswith(".gz") else "JSON file"


def read_json(path: str | os.PathLike, *, kind: str | None = None, fix: str | None = None,
              duplicates_fix: str = "keep one value per key") -> Any:
    """One JSON document, plain or gzip (``.gz``); a key given twice in one object is a :class:`DuplicateKeyError`
    (with ``duplicates_fix`` as its advice), not the silent last-value-wins of ``json``."""
    path = Path(path)
    repeated: list[str] = []

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        seen: dict[str, Any] = {}
        for key, value in items:
            if key in seen and key not in repeated:
                repeated.append(key)
            seen[key] = value
        return seen

    with unreadable(path, kind or json_kind(path), _fix(path, fix)):
        payload = _load_json(path, pairs)
    if repeated:
        raise DuplicateKeyError(path, repeated, duplicates_fix)
    return payload


def read_csv(path: str | os.PathLike, *, kind: str = "CSV file", fix: str | None = None, **options: Any):
    """A CSV or TSV file (``sep="\\t"``), plain or compressed (by its extension), as a pandas DataFrame; ``options``
    go to :func:`pandas.read_csv`."""
    import pandas as pd

    with unreadable(path, kind, _fix(path, fix)):
        return pd.read_csv(path, **options)


def read_json_lines(path: str | os.PathLike, *, kind: str = "JSON-lines file", fix: str | None = None,
                    **options: Any):
    """One JSON object per line (plain or compressed) as a pandas DataFrame; ``options`` go to
    :func:`pandas.read_json`."""
    import pandas as pd

    with unreadable(path, kind, _fix(path, fix)):
        return pd.read_json(path, lines=True, **options)


def read_npy(path: str | os.PathLike, *, mmap_mode: str | None = None, fix: str | None = None):
    """A ``.npy`` array (``mmap_mode="r"``: memory-mapped, read as it is used)."""
    import numpy as np

    with unreadable(path, "numpy array file", _fix(path, fix)):
        return np.load(path, mmap_mode=mmap_mode, allow_pickle=False)


def read_npz(path: str | os.PathLike, *, fix: str | None = None) -> dict[str, Any]:
    """Every array of a ``.npz`` archive, read now (a damaged member fails here, not at its first use)."""
    import numpy as np

    with unreadable(path, "numpy archive", _fix(path, fix)), np.load(path, allow_pickle=False) as archive:
        return {name: archive[name] for name in archive.files}


def load_torch(path: str | os.PathLike, *, kind: str, fix: str | None = None, map_location: Any = "cpu") -> Any:
    """A file ``torch.save`` wrote (a state dict, an optimizer state), loaded with ``weights_only=True``."""
    import torch

    with unreadable(path, kind, _fix(path, fix)):
        return torch.load(path, map_location=map_location, weights_only=True)


def read_with(path: str | os.PathLike, read: Callable[[], Any], *, kind: str, fix: str | None = None,
              errors: tuple[type[BaseException], ...] = READ_ERRORS) -> Any:
    """``read()`` (a library's own loader of ``path``: a model folder, a tokenizer) with its failure (one of
    ``errors``) reported as the readers report theirs."""
    with unreadable(path, kind, _fix(path, fix), errors):
        return read()


def metadata_json(metadata: Mapping[bytes, bytes] | None, key: bytes, path: str | os.PathLike,
                  fix: str | None = None) -> Any:
    """The JSON a parquet file's schema metadata holds under ``key`` ({} when there is none)."""
    raw = (metadata or {}).get(key)
    if not raw:
        return {}
    with unreadable(path, f"parquet file's {key.decode()} metadata", _fix(path, fix)):
        return json.loads(raw)
