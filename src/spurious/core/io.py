"""Atomic file output: a partial output never looks complete."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike, suffix: str | None = None) -> Iterator[Path]:
    """Yield a temporary sibling of ``path``; rename it onto ``path`` only if the block succeeds.

    The temporary name keeps the final suffix (libraries such as matplotlib pick the format from it).
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(
        dir=target.parent, prefix=f".{target.name}.", suffix=suffix if suffix is not None else target.suffix
    )
    os.close(fd)
    tmp_path = Path(tmp)
    # mkstemp creates the file private (0600); give it the mode a plain open() would (umask applied).
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp_path, 0o666 & ~umask)
    try:
        yield tmp_path
        os.replace(tmp_path, target)
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


def _json_default(obj: Any) -> Any:
    import numpy as np

    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        return float(obj)
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    if isinstance(obj, Mapping):  # e.g. spurious.core.config.RuleSettings
        return dict(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def json_text(obj: Any) -> str:
    """``obj`` as the JSON text :func:`write_json` writes (numpy numbers and arrays, paths and mappings converted)."""
    return json.dumps(obj, indent=2, sort_keys=False, default=_json_default) + "\n"


def write_json(obj: Any, path: str | os.PathLike) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(json_text(obj))


def read_json(path: str | os.PathLike) -> Any:
    return json.loads(Path(path).read_text())


def write_text(text: str, path: str | os.PathLike) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text)


@contextlib.contextmanager
def atomic_paths(*paths: str | os.PathLike) -> Iterator[list[Path]]:
    """Yield one temporary sibling per path (as :func:`atomic_path`); rename them onto their paths only when the
    block succeeds and every one of them was written (is not empty), one rename after another.

    For files that belong together (a page and the data it shows, a table's CSV and Markdown): a failure while
    writing any of them leaves every previous file whole and no temporary file behind."""
    with contextlib.ExitStack() as stack:
        temps = [stack.enter_context(atomic_path(p)) for p in paths]
        yield temps
        empty = [str(p) for p, tmp in zip(paths, temps, strict=True) if tmp.stat().st_size == 0]
        if empty:
            raise ValueError(f"nothing was written for {', '.join(empty)}; no file of the set was replaced")


def write_parquet(
    df: pd.DataFrame, path: str | os.PathLike, metadata: Mapping[str, Any] | None = None
) -> None:
    """Write ``df`` to parquet atomically; ``metadata`` goes JSON-encoded under the key ``spurious``."""
    table = pa.Table.from_pandas(df, preserve_index=False)
    if metadata is not None:
        existing = dict(table.schema.metadata or {})
        existing[b"spurious"] = json.dumps(dict(metadata), default=_json_default).encode()
        table = table.replace_schema_metadata(existing)
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp)


def read_parquet_metadata(path: str | os.PathLike) -> dict[str, Any]:
    raw = (pq.read_schema(path).metadata or {}).get(b"spurious")
    return json.loads(raw) if raw else {}


def file_sha256(path: str | os.PathLike, chunk_size: int = 1 << 22) -> str:
    """The sha256 of a file's bytes, read in chunks (logits stores can be hundreds of MB)."""
    import hashlib

    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk_size):
            digest.update(block)
    return digest.hexdigest()


def align_to_ids(values: pd.Series, ids: Any, *, source: str, what: str, fix: str) -> np.ndarray:
    """``values`` (indexed by id) in the order of ``ids``; fails naming ``source`` and the first missing ids, with
    ``fix`` telling the user what to do (e.g. "the predictions and the heuristics must come from the same split")."""
    wanted = pd.Index([str(i) for i in ids])
    missing = wanted.difference(values.index)
    if len(missing):
        raise ValueError(f"{source}: {len(missing)} of {len(wanted)} ids have no {what} (first: {list(missing[:5])}); {fix}")
    return values.reindex(wanted).to_numpy()
