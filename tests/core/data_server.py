"""A local HTTP server for the data-mirror tests: serves a folder on 127.0.0.1 with HTTP Range requests (as GitHub's
raw host does), and can drop the connection part way through a file, once, to test resumed downloads.

``python -m tests.core.data_server ROOT [--port N] [--from-mirror SHARED]`` serves ROOT until interrupted; with
``--from-mirror`` it first lays ROOT out from a data mirror and writes ``ROOT/source-checksums.json``, for a fresh
clone's ``make data DATA_BASE_URL=http://127.0.0.1:N DATA_SOURCE_CHECKSUMS=ROOT/source-checksums.json``.
:func:`source_tree` lays out the mirror's source files as ``<owner>/<repo>/<commit>/<path>`` from a data mirror
(../shared).
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import http.server
import json
import shutil
import threading
import zipfile
from collections.abc import Iterator
from pathlib import Path

from spurious.core.data import mirror


class Handler(http.server.SimpleHTTPRequestHandler):
    """GET with ``Range: bytes=N-`` (206) and, for the paths in ``server.drop_after``, a first response that stops
    after that many bytes and closes the connection."""

    def log_message(self, format: str, *args) -> None:  # noqa: A002 - the base class's name
        pass  # quiet: the server records its requests itself

    def do_GET(self) -> None:  # noqa: N802 - the base class's name
        self.server.requests.append((self.command, self.path, self.headers.get("Range")))
        path = Path(self.translate_path(self.path))
        if not path.is_file():
            self.send_error(404)
            return
        data = path.read_bytes()
        start = 0
        ranged = self.headers.get("Range")
        if ranged and ranged.startswith("bytes=") and self.server.ranges:
            start = int(ranged[len("bytes="):].split("-")[0])
            if start >= len(data):
                self.send_error(416)
                return
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        else:
            self.send_response(200)
        body = data[start:]
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        cut = self.server.drop_after.pop(self.path, None)
        if cut is not None:
            self.wfile.write(body[:cut])
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(2)
            return
        self.wfile.write(body)
        self.server.served.setdefault(self.path, []).append(start)


class Server(http.server.ThreadingHTTPServer):
    def __init__(self, root: Path, *, ranges: bool = True, port: int = 0):
        self.root = root
        self.ranges = ranges  # False: a server that ignores Range (answers 200 with the whole file)
        self.drop_after: dict[str, int] = {}  # url path -> bytes sent before the connection drops (once)
        self.requests: list[tuple[str, str, str | None]] = []
        self.served: dict[str, list[int]] = {}  # url path -> the start offset of every whole response
        super().__init__(("127.0.0.1", port), lambda *a: Handler(*a, directory=str(root)))

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


@contextlib.contextmanager
def serving(root: Path, **kwargs) -> Iterator[Server]:
    server = Server(root, **kwargs)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def source_tree(shared: Path, root: Path) -> dict[str, str]:
    """The mirror's source files under ``root`` as GitHub serves them (``<owner>/<repo>/<commit>/<path>``), made from
    the data mirror ``shared``: the stored file itself, or its gzip payload, which is the source file byte for byte
    (SOURCES.md). The one source in another container, SQuAD's dev-v1.1.json.zip, is a new zip of the payload: its
    bytes differ from the real zip's, so the returned {target: sha256} gives that source's new checksum for the
    manifest; the extracted payload and the stored file are checked against the real checksums all the same."""
    replaced = {}
    for entry in mirror.FILES:
        stored = shared / entry.target
        source = root / entry.repo / entry.commit / entry.path
        source.parent.mkdir(parents=True, exist_ok=True)
        if entry.member is not None:
            with zipfile.ZipFile(source, "w", zipfile.ZIP_DEFLATED) as archive:
                archive.writestr(entry.member, gzip.decompress(stored.read_bytes()))
            replaced[entry.target] = mirror.urlfetch.sha256_of(source)
        elif entry.gzip:
            source.write_bytes(gzip.decompress(stored.read_bytes()))
        else:
            shutil.copyfile(stored, source)
    return replaced


def lay_out(shared: Path, root: Path) -> Path:
    """:func:`source_tree` into ``root``, and the checksums of the sources it packed anew in
    ``root/source-checksums.json`` (for ``spurious data fetch --source-checksums``); returns that file."""
    replaced = source_tree(shared, root)
    sizes = {f.target: (root / f.repo / f.commit / f.path).stat().st_size for f in mirror.FILES}
    checksums = root / "source-checksums.json"
    checksums.write_text(json.dumps({t: {"sha256": sha, "size": sizes[t]} for t, sha in replaced.items()}, indent=1))
    return checksums


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("root", type=Path, help="the folder to serve")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--from-mirror", type=Path, metavar="SHARED",
                        help="first lay out ROOT from the data mirror SHARED (source_tree) and write the checksums of "
                             "the sources packed anew to ROOT/source-checksums.json (for --source-checksums)")
    args = parser.parse_args()
    if args.from_mirror is not None:
        print(f"laid out; source checksums in {lay_out(args.from_mirror, args.root)}", flush=True)
    server = Server(args.root.resolve(), port=args.port)
    print(f"serving {args.root} at {server.url}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
