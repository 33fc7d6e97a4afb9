"""The data mirror that the tests and demos use, built from its public sources (``spurious data fetch``, ``make data``).

A mirror is a folder with ``data/`` (what ``SPURIOUS_DATA_MIRROR`` points at) and ``nltk_data/`` (what ``NLTK_DATA``
points at). Every file comes from a public GitHub repository at a pinned commit (:data:`FILES`): the source file is
downloaded (:mod:`spurious.core.data.urlfetch`: resumed when interrupted) and checked against its sha256 and size; a
file in a zip is extracted and checked; a file stored compressed is compressed as ``gzip -9 -n`` compresses it (GNU
gzip, which the mirror's files were made with; Python's zlib gives other bytes for one of them) and the result is
checked against the stored sha256. So a mirror built anywhere is byte for byte the reference mirror, or the build stops
naming the file that differs. ``--base-url`` fetches the same paths from another host (a local copy, a test server).
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import tempfile
import zipfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from spurious.core import readers
from spurious.core.data import urlfetch
from spurious.core.errors import InputError

GITHUB_RAW = "https://raw.githubusercontent.com"


class MirrorError(InputError):
    """A mirror file could not be built as the reference: one line naming it, what differs and what to do."""


@dataclass(frozen=True)
class MirrorFile:
    """One file of the mirror: ``target`` (relative to the mirror folder) made from the source at ``repo``/``commit``/
    ``path`` on GitHub (``sha256``, ``size``): stored as it is, or its zip ``member``, optionally gzip-compressed.
    ``payload_*``: the file before compression (the extracted member, or the source itself); ``stored_*``: the file in
    the mirror."""

    target: str
    repo: str
    commit: str
    path: str
    sha256: str
    size: int
    stored_sha256: str
    stored_size: int
    payload_sha256: str | None = None
    payload_size: int | None = None
    member: str | None = None
    gzip: bool = False
    about: str = ""

    def url(self, base_url: str = GITHUB_RAW) -> str:
        return f"{base_url.rstrip('/')}/{self.repo}/{self.commit}/{self.path}"


# The reference mirror (sizes in bytes; provenance as the mirror's SOURCES.md gives it, docs/running.md#data).
FILES: tuple[MirrorFile, ...] = (
    MirrorFile(
        target="data/squad_v1.1/dev-v1.1.json.gz",
        repo="pulakdas1999/QnA_using_BERT", commit="48925669ea5ebb270348b817d7463b809a381bb9", path="dev-v1.1.json.zip",
        sha256="6cf38c56fc7341bab8a5132f205dd7198148a6be9073ccd8ef07d55ca73b09b7", size=1_051_741,
        member="dev-v1.1.json",
        payload_sha256="95aa6a52d5d6a735563366753ca50492a658031da74f301ac5238b03966972c9", payload_size=4_854_279,
        gzip=True, stored_sha256="5ef5752d50566ab538501116de1508326eefb6bf70026def7915309f30822727",
        stored_size=1_033_885,
        about="SQuAD v1.1 dev, the official file (its md5 3e85deb5... is the one torchtext pins), zipped in that "
        "repository",
    ),
    MirrorFile(
        target="data/naturalquestions_isbiased/nq_dev_formatted.json.gz",
        repo="MIR-MU/isbiased", commit="8518d75d254bcd55a71317ff96cc2214156ba892",
        path="scripts/ood_datasets/nq_dev_formatted.json",
        sha256="a671417a2a0614ff00967ca0f8b391f63a74eda3597ad3dd81ef276ba01fcb59", size=1_951_497,
        gzip=True, stored_sha256="f0d19e6b3ff17db4fea603edc51a17969445021501c224aa35a876b8c20ab5a6",
        stored_size=698_654,
        about="the NaturalQuestions dev subset (2,356 questions) of the Think Twice authors' OOD evaluation",
    ),
    MirrorFile(
        target="data/sst2/train.tsv.gz",
        repo="eyalbd2/Reproducing-AutoPrompt", commit="6288fb5bec9c572f2492875ae0111df5b6daed11",
        path="glue_data/SST-2/train_full.tsv",
        sha256="48eac26399f8456935f81dd9e3a745c1430adb6c62e233ccfe22db4a0d15d1d1", size=3_806_081,
        gzip=True, stored_sha256="1c4843303462f8f93e006ff618a9e61d207468cafd030046d7d7fd6b78af342b",
        stored_size=1_443_733,
        about="GLUE SST-2 train (67,349 rows), GLUE's train.tsv under another name in that repository",
    ),
    MirrorFile(
        target="data/sst2/dev.tsv",
        repo="eyalbd2/Reproducing-AutoPrompt", commit="6288fb5bec9c572f2492875ae0111df5b6daed11",
        path="glue_data/SST-2/dev.tsv",
        sha256="54a9c12c77e402fc14d6a66a506f24d999f596b0176eb777c972cccc2f9cc4b0", size=94_931,
        stored_sha256="54a9c12c77e402fc14d6a66a506f24d999f596b0176eb777c972cccc2f9cc4b0", stored_size=94_931,
        about="GLUE SST-2 dev (872 rows)",
    ),
    MirrorFile(
        target="data/qnli/validation/0000.parquet",
        repo="ZGG01-byte/datasets", commit="57431bfbedbef21c196e196274219d09446cc347",
        path="qnli/validation/0000.parquet",
        sha256="60b4e80eb08d212cfdefb885f2aa20ef7240e0660d124e3265e738d21c909e23", size=872_062,
        stored_sha256="60b4e80eb08d212cfdefb885f2aa20ef7240e0660d124e3265e738d21c909e23", stored_size=872_062,
        about="GLUE QNLI dev (5,463 rows), the Hugging Face parquet export of nyu-mll/glue (a git mirror of it)",
    ),
    MirrorFile(
        target="nltk_data/corpora/stopwords.zip",
        repo="nltk/nltk_data", commit="5db857e6f7df11eabb5e5665836db9ec8df07e28",
        path="packages/corpora/stopwords.zip",
        sha256="15c94179887425ca1bedc265608cab9f27d650211f709bb929e320990a4b01d1", size=34_276,
        stored_sha256="15c94179887425ca1bedc265608cab9f27d650211f709bb929e320990a4b01d1", stored_size=34_276,
        about="NLTK's stop-word lists (English: 179 words), as `python -m nltk.downloader stopwords` fetches them",
    ),
)


def gnu_gzip() -> str:
    """The ``gzip`` program, which must be GNU gzip (whose ``-9 -n`` output the mirror's .gz files are)."""
    exe = shutil.which("gzip")
    version = ""
    if exe:
        version = subprocess.run([exe, "--version"], capture_output=True, text=True).stdout
    if not exe or not version.startswith("gzip "):
        raise MirrorError("the data mirror's .gz files are GNU gzip's `gzip -9 -n` output, and no GNU gzip is on "
                          f"PATH ({exe or 'no gzip'}); install it (e.g. apt-get install gzip) and run again")
    return exe


def gzip_n9(source: Path, target: Path) -> None:
    """``gzip -9 -n`` of ``source`` (no name, no time stamp in the header: the same bytes on every run)."""
    with open(target, "wb") as out:
        subprocess.run([gnu_gzip(), "-9", "-n", "-c", str(source)], stdout=out, check=True)


def _check(path: Path, sha256: str, size: int, what: str, where: str) -> None:
    got_size = path.stat().st_size
    got_sha = urlfetch.sha256_of(path)
    if got_size != size or got_sha != sha256:
        raise MirrorError(f"{where}: the {what} has sha256 {got_sha} and {got_size:,} bytes, expected {sha256} and "
                          f"{size:,}")


def build_file(entry: MirrorFile, out: Path, *, base_url: str = GITHUB_RAW, cache: Path,
               log: Callable[[str], None] = print, keep_other_gzip: bool = False) -> Path:
    """Make one mirror file under ``out`` (kept if it is already there with the stored sha256): download the source
    into ``cache`` (checked), extract and compress as the entry says, check the result, rename it into place."""
    target = out / entry.target
    if target.is_file() and target.stat().st_size == entry.stored_size \
            and urlfetch.sha256_of(target) == entry.stored_sha256:
        log(f"{entry.target}: already there, sha256 checked")
        return target
    source = cache / entry.repo.replace("/", "--") / entry.commit / entry.path
    url = entry.url(base_url)
    log(f"{entry.target}: fetching {url}")
    urlfetch.fetch_url(url, source, sha256=entry.sha256, size=entry.size, log=log)
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=f".{target.name}.tmp-") as tmp:
        payload = source
        if entry.member is not None:
            payload = Path(tmp) / Path(entry.member).name
            with zipfile.ZipFile(source) as archive, archive.open(entry.member) as member, open(payload, "wb") as fh:
                shutil.copyfileobj(member, fh)
        if entry.payload_sha256 is not None and entry.payload_size is not None:
            _check(
                payload, entry.payload_sha256, entry.payload_size, "extracted file", f"{entry.target} ({entry.member})"
            )
        stored = Path(tmp) / target.name
        if entry.gzip:
            gzip_n9(payload, stored)
        else:
            shutil.copyfile(payload, stored)
        try:
            _check(stored, entry.stored_sha256, entry.stored_size, "file as stored", entry.target)
        except MirrorError as exc:
            if not (entry.gzip and keep_other_gzip):
                if entry.gzip:
                    raise MirrorError(f"{exc}: its content is verified, but this machine's gzip compresses it to other "
                                      "bytes; --keep-other-gzip keeps it so (same data, other .gz bytes)") from None
                raise
            log(f"{entry.target}: kept with this machine's gzip bytes (content verified): {exc}")
        with open(stored, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(stored, target)
    log(f"{entry.target}: done, sha256 {urlfetch.sha256_of(target)}")
    return target


def with_source_checksums(path: str | os.PathLike, files: Iterable[MirrorFile] = FILES) -> list[MirrorFile]:
    """``files`` with the source checksums of a local copy of the sources whose containers were packed anew (a JSON
    file ``{target: {"sha256": ..., "size": ...}}``, as ``tests/core/data_server.py --from-mirror`` writes it). Only
    the downloaded container's checksum is replaced: the file extracted from it and the file stored are still checked
    against the reference's, so the mirror built is the reference byte for byte or nothing."""
    path = Path(path)
    given = readers.read_json(path, kind="JSON file of source checksums", fix="pass the file the local copy's server "
                              "wrote")
    files = list(files)
    known = {f.target for f in files}
    unknown = sorted(set(given) - known)
    if unknown:
        raise MirrorError(f"{path}: {unknown[0]} is not a file of the mirror (one of: {', '.join(sorted(known))})")
    out = []
    for f in files:
        entry = given.get(f.target)
        if entry is not None and f.payload_sha256 is None:
            raise MirrorError(f"{path}: {f.target} has no checksum of its own beyond its source's; its source checksum "
                              "cannot be replaced")
        out.append(f if entry is None else dataclasses.replace(f, sha256=entry["sha256"], size=int(entry["size"])))
    return out


def build(out: str | os.PathLike, *, base_url: str = GITHUB_RAW, files: Iterable[MirrorFile] | None = None,
          log: Callable[[str], None] = print, keep_other_gzip: bool = False) -> list[Path]:
    """Build the mirror in ``out`` (``out/data``, ``out/nltk_data``); the downloaded sources stay in
    ``out/.sources`` (a second run downloads nothing). Stops at the first file that cannot be made as the
    reference, naming it."""
    out = Path(out)
    made = [build_file(entry, out, base_url=base_url, cache=out / ".sources", log=log, keep_other_gzip=keep_other_gzip)
            for entry in (FILES if files is None else files)]
    log(f"data mirror ready in {out}: SPURIOUS_DATA_MIRROR={out / 'data'} NLTK_DATA={out / 'nltk_data'}")
    return made
