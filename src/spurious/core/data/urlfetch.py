"""Download a file from a URL, checked against its sha256 and size, never leaving a partial file that looks complete.

The bytes go to ``<name>.part`` beside the target. A dropped connection is retried, resuming with an HTTP ``Range``
request where the server honours it (206) and starting over where it does not (200); a ``.part`` left by an earlier
run is resumed the same way. Only a file whose size and sha256 match (where given) is renamed to its name, flushed to
disk before and after; a mismatch deletes the ``.part`` and raises a :class:`ChecksumError` whose one line names the
file. Standard library only: the data mirror (``spurious data fetch``) uses it before anything else is installed.
"""

from __future__ import annotations

import hashlib
import http.client
import os
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

from spurious.core.errors import InputError

CHUNK = 1 << 20
ATTEMPTS = 5
TIMEOUT_S = 60
PROGRESS_EVERY_S = 10.0
# what a dropped or stalled connection raises while reading or connecting
TRANSIENT = (http.client.IncompleteRead, http.client.RemoteDisconnected, ConnectionError, socket.timeout, TimeoutError)


class FetchFailed(InputError):
    """A URL could not be downloaded (after the retries): one line naming the file, the URL and the reason."""


class ChecksumError(InputError):
    """A downloaded file is not the expected one: one line naming the file, what was expected and what came."""


def sha256_of(path: str | os.PathLike, chunk: int = CHUNK) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _download(url: str, part: Path, *, timeout: float, emit: Callable[[str], None], name: str) -> None:
    """One attempt: append to ``part`` from where it ends (a Range request), or start it over when the server sends
    the whole file."""
    have = part.stat().st_size if part.exists() else 0
    request = urllib.request.Request(url, headers={"User-Agent": "spurious-data-fetch"})
    if have and not url.startswith("file:"):
        request.add_header("Range", f"bytes={have}-")
    try:
        response = urllib.request.urlopen(request, timeout=timeout)  # noqa: S310 - the URL is the config's or ours
    except urllib.error.HTTPError as exc:
        if exc.code == 416 and have:  # nothing left to send: the part is whole (the checks below decide)
            return
        raise
    with response:
        status = getattr(response, "status", 200)
        mode = "ab" if status == 206 and have else "wb"
        if mode == "wb" and have:
            emit(f"{name}: the server does not resume (HTTP {status}); starting over")
        total = response.headers.get("Content-Length")
        expected_total = int(total) + (have if mode == "ab" else 0) if total else None
        done = have if mode == "ab" else 0
        last = time.monotonic()
        with open(part, mode) as out:
            while block := response.read(CHUNK):
                out.write(block)
                done += len(block)
                if time.monotonic() - last >= PROGRESS_EVERY_S:
                    last = time.monotonic()
                    of = f" of {expected_total / 1e6:.1f}" if expected_total else ""
                    emit(f"{name}: {done / 1e6:.1f}{of} MB")
            out.flush()
            os.fsync(out.fileno())
        if expected_total is not None and done < expected_total:
            raise http.client.IncompleteRead(b"", expected_total - done)


def fetch_url(
    url: str,
    dest: str | os.PathLike,
    *,
    sha256: str | None = None,
    size: int | None = None,
    attempts: int = ATTEMPTS,
    timeout: float = TIMEOUT_S,
    log: Callable[[str], None] | None = None,
) -> tuple[str, int]:
    """Download ``url`` to ``dest`` and return its (sha256, size); a ``dest`` that is already there with the expected
    sha256 is kept as it is. Raises :class:`ChecksumError` (the ``.part`` deleted) or :class:`FetchFailed`."""
    dest = Path(dest)
    emit = log or (lambda _message: None)
    if dest.exists() and sha256 and sha256_of(dest) == sha256:
        return sha256, dest.stat().st_size
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    error: BaseException | None = None
    for attempt in range(1, attempts + 1):
        try:
            _download(url, part, timeout=timeout, emit=emit, name=str(dest))
            error = None
            break
        except urllib.error.HTTPError as exc:
            if exc.code in (404, 403, 401, 410):  # no retry helps
                raise FetchFailed(f"{dest}: {url} answered HTTP {exc.code} ({exc.reason}); check the URL") from exc
            error = exc
        except (*TRANSIENT, urllib.error.URLError, OSError) as exc:
            error = exc
        have = part.stat().st_size if part.exists() else 0
        emit(f"{dest}: attempt {attempt} of {attempts} broke off after {have} bytes ({type(error).__name__}: "
             f"{error}); {'resuming' if attempt < attempts else 'giving up'}")
        time.sleep(min(0.2 * 2**attempt, 5.0))
    if error is not None:
        raise FetchFailed(f"{dest}: could not download {url} in {attempts} attempts ({type(error).__name__}: {error});"
                          f" the part fetched so far is kept as {part.name} and resumed next time") from error
    got_size = part.stat().st_size
    got_sha = sha256_of(part)
    if (size is not None and got_size != size) or (sha256 is not None and got_sha != sha256):
        part.unlink()
        raise ChecksumError(
            f"{dest}: the download from {url} has sha256 {got_sha} and {got_size} bytes, expected "
            f"{sha256 or 'any sha256'} and {size if size is not None else 'any number of'} bytes; refused (deleted): "
            "the source changed or the download is damaged"
        )
    _fsync(part)
    os.replace(part, dest)
    dir_fd = os.open(dest.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    return got_sha, got_size
