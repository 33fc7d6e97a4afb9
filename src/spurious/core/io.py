"""Atomic, durable file output: a partial output never looks complete, and a complete one survives a power cut.

Outputs are written under a temporary sibling name, flushed to disk (``fsync``) and renamed into place; the folder's
entry is flushed after the rename. The temporary names carry their writer (``.<name>.tmp-<pid>@<host>...``), so that
the next writer of the same output removes what a crashed one left behind (``recover_interrupted_writes``).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import shutil
import socket
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

# A leftover of a writer on another machine (whose process cannot be asked) counts as stale once untouched this long:
# far longer than any one write of this project takes. (A results folder has one writer per output at a time, by
# Snakemake's lock, but a retried job usually runs on another node of the cluster.)
FOREIGN_STALE_AFTER_S = 24 * 3600
# the temporary paths this process is writing now: any other of its own name is an earlier attempt's leftover (or a
# crashed process's whose PID this one reuses, after a reboot)
_WRITING: set[Path] = set()


def _writer() -> str:
    """This process as named in its temporary files: ``<pid>@<host>``."""
    return f"{os.getpid()}@{socket.gethostname()}"


def _leftovers(target: Path) -> list[tuple[float, str, Path]]:
    """The temporary siblings of ``target`` whose writer is gone, as (mtime, "tmp" or "old", path), oldest first: a
    temporary output, or the previous version of a folder set aside during a swap (``atomic_dir``)."""
    pattern = re.compile(rf"\.{re.escape(target.name)}\.(tmp|old)-(\d+)(?:@([^~]+))?(?:~.*)?")
    found = []
    with contextlib.suppress(FileNotFoundError), os.scandir(target.parent) as entries:
        for entry in entries:
            match = pattern.fullmatch(entry.name)
            if match is None:
                continue
            path = Path(entry.path)
            try:
                mtime = entry.stat(follow_symlinks=False).st_mtime
            except FileNotFoundError:  # removed meanwhile (by another writer's cleanup)
                continue
            if _writer_gone(path, mtime, int(match[2]), match[3]):
                found.append((mtime, match[1], path))
    return sorted(found)


def _writer_gone(path: Path, mtime: float, pid: int, host: str | None) -> bool:
    if host != socket.gethostname():  # another machine's (no host: a folder of a version that did not record it)
        return time.time() - mtime > FOREIGN_STALE_AFTER_S
    if pid == os.getpid():
        return path not in _WRITING
    if os.name == "nt":  # os.kill(pid, 0) would send CTRL_C_EVENT there: another process's files are kept
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # alive, another user's
        return False
    return False


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def recover_interrupted_writes(path: str | os.PathLike) -> None:
    """Put right what a writer of ``path`` that is gone (killed, crashed, cut off by a power failure) left beside it;
    ``atomic_path`` and ``atomic_dir`` call it before they write ``path``.

    A swap interrupted between its two renames left ``path`` missing and its previous version under the backup name:
    that version is renamed back (the new one was never in place). Every other leftover of a gone writer, temporary
    outputs and backups alike, is removed. The files of a live writer (a process on this machine that still runs)
    are left alone.
    """
    target = Path(path)
    leftovers = _leftovers(target)
    backups = [p for _, kind, p in leftovers if kind == "old"]
    if backups and not os.path.lexists(target):
        os.replace(backups[-1], target)
        fsync_dir(target.parent)
    for _, _, leftover in leftovers:
        if os.path.lexists(leftover):
            _remove(leftover)


def fsync_file(path: str | os.PathLike) -> None:
    """Flush a written file's bytes to disk (else the rename may reach the disk before them: an empty file)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(path: str | os.PathLike) -> None:
    """Flush a folder's entries to disk, so that a rename into it survives a power cut.

    Some systems cannot: Windows does not open folders (a PermissionError), and some network and FUSE filesystems
    refuse to fsync one (EINVAL, ENOTSUP). There the rename is as durable as the filesystem makes it, and the write
    goes on; any other error (EIO: the disk failed) is raised."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except PermissionError:
        return
    try:
        os.fsync(fd)
    except OSError as exc:
        if exc.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP):
            raise
    finally:
        os.close(fd)


def fsync_tree(path: str | os.PathLike) -> None:
    """``fsync`` every file under a folder, then every folder, deepest first."""
    for folder, _, files in os.walk(path, topdown=False):
        for name in files:
            fsync_file(os.path.join(folder, name))
        fsync_dir(folder)


@contextlib.contextmanager
def _writing(path: Path) -> Iterator[None]:
    _WRITING.add(path)
    try:
        yield
    finally:
        _WRITING.discard(path)


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike, suffix: str | None = None) -> Iterator[Path]:
    """Yield a temporary sibling of ``path``; if the block succeeds, flush it to disk and rename it onto ``path``.

    The temporary name keeps the final suffix (libraries such as matplotlib pick the format from it).
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    recover_interrupted_writes(target)
    fd, tmp = tempfile.mkstemp(
        dir=target.parent,
        prefix=f".{target.name}.tmp-{_writer()}~",
        suffix=suffix if suffix is not None else target.suffix,
    )
    os.close(fd)
    tmp_path = Path(tmp)
    # mkstemp creates the file private (0600); give it the mode a plain open() would (umask applied).
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp_path, 0o666 & ~umask)
    with _writing(tmp_path):
        try:
            yield tmp_path
            fsync_file(tmp_path)
            os.replace(tmp_path, target)
            fsync_dir(target.parent)
        finally:
            if tmp_path.exists():
                tmp_path.unlink()


@contextlib.contextmanager
def atomic_dir(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a new, empty temporary sibling folder of ``path``; if the block succeeds, flush its files to disk and swap
    it in for ``path``: an existing ``path`` is renamed to a backup name, the new folder to ``path``, then the backup
    is deleted. A crash at any point leaves ``path`` whole, old or new, once ``recover_interrupted_writes`` has run
    (the next write of ``path`` runs it first). The folder gets the permissions of any other output (umask applied).
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    recover_interrupted_writes(target)
    tmp = target.parent / f".{target.name}.tmp-{_writer()}"
    backup = target.parent / f".{target.name}.old-{_writer()}"
    tmp.mkdir()
    with _writing(tmp), _writing(backup):
        try:
            yield tmp
            fsync_tree(tmp)
            set_aside = False
            try:
                if os.path.lexists(target):
                    os.replace(target, backup)
                    set_aside = True
                os.replace(tmp, target)
            except BaseException:
                if set_aside and not os.path.lexists(target):
                    os.replace(backup, target)  # the old one back
                raise
            fsync_dir(target.parent)
            _remove(backup)
        finally:
            _remove(tmp)


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
    """A JSON file (plain or gzip): :func:`spurious.core.readers.read_json`, its damage one line with the fix."""
    from spurious.core import readers

    return readers.read_json(path)


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
    """What :func:`write_parquet` stored under ``metadata`` ({} when nothing)."""
    from spurious.core import readers

    return readers.metadata_json(readers.read_parquet_schema(path).metadata, b"spurious", path)


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
        raise ValueError(
            f"{source}: {len(missing)} of {len(wanted)} ids have no {what} (first: {list(missing[:5])}); {fix}"
        )
    return values.reindex(wanted).to_numpy()
