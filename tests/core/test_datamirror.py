"""The data mirror built from its sources (``spurious data fetch``; spurious.core.data.mirror,
spurious.core.data.urlfetch) against a local HTTP server on 127.0.0.1 that serves them as GitHub's raw host does
(tests/core/data_server.py).

The served files are the real source bytes, made from ../shared: a stored file as it is, or the payload of a .gz
file, which SOURCES.md states to be the source file byte for byte. SQuAD's source is a zip in its repository: the
server gets a new zip of the same payload (other zip bytes), so that one source checksum in the manifest is replaced
by the new zip's; its extracted payload and its stored file are checked against the real checksums all the same."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re

import pytest

from spurious.core.data import mirror, urlfetch
from tests.conftest import SHARED
from tests.core.data_server import lay_out, serving, source_tree

SST2_DEV = next(f for f in mirror.FILES if f.target == "data/sst2/dev.tsv")


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    """The served tree and the manifest whose SQuAD source checksum is the rebuilt zip's."""
    root = tmp_path_factory.mktemp("github")
    replaced = source_tree(SHARED, root)
    files = tuple(
        dataclasses.replace(f, sha256=replaced[f.target], size=(root / f.repo / f.commit / f.path).stat().st_size)
        if f.target in replaced else f
        for f in mirror.FILES
    )
    return root, files


def test_the_built_mirror_is_byte_identical_to_the_reference(sources, tmp_path):
    root, files = sources
    with serving(root) as server:
        mirror.build(tmp_path / "mirror", base_url=server.url, files=files, log=lambda _: None)
    for entry in mirror.FILES:
        assert (tmp_path / "mirror" / entry.target).read_bytes() == (SHARED / entry.target).read_bytes(), entry.target
    assert not list((tmp_path / "mirror").rglob("*.part")) and not list((tmp_path / "mirror").rglob(".*.tmp-*"))


def test_a_wrong_checksum_is_refused_in_one_line_naming_the_file(sources, tmp_path):
    root, _ = sources
    wrong = dataclasses.replace(SST2_DEV, sha256="0" * 64)
    with serving(root) as server, pytest.raises(urlfetch.ChecksumError) as err:
        mirror.build(tmp_path, base_url=server.url, files=[wrong], log=lambda _: None)
    message = str(err.value)
    source = tmp_path / ".sources" / wrong.repo.replace("/", "--") / wrong.commit / wrong.path
    assert "\n" not in message and message.startswith(f"{source}: the download from {server.url}/{wrong.repo}/")
    assert f"sha256 {SST2_DEV.sha256} and 94931 bytes, expected {'0' * 64} and 94931 bytes; refused" in message
    assert not (tmp_path / wrong.target).exists() and not source.exists() and not list(tmp_path.rglob("*.part"))


def test_the_command_line_builds_the_mirror_and_reports_a_bad_file_in_one_line(sources, tmp_path, capsys, monkeypatch):
    from spurious.cli import main

    root, files = sources
    monkeypatch.setattr(mirror, "FILES", tuple(f for f in files if f.target.endswith(("dev.tsv", "stopwords.zip"))))
    with serving(root) as server:
        assert main(["data", "fetch", "--out", str(tmp_path / "m"), "--base-url", server.url]) == 0
        assert (tmp_path / "m" / "data/sst2/dev.tsv").read_bytes() == (SHARED / "data/sst2/dev.tsv").read_bytes()
        assert "already there, sha256 checked" not in capsys.readouterr().out
        assert main(["data", "fetch", "--out", str(tmp_path / "m"), "--base-url", server.url]) == 0  # kept
        assert capsys.readouterr().out.count("already there, sha256 checked") == 2
        monkeypatch.setattr(mirror, "FILES", (dataclasses.replace(SST2_DEV, target="data/x.tsv", stored_size=1),))
        assert main(["data", "fetch", "--out", str(tmp_path / "m"), "--base-url", server.url]) == 2
    err = capsys.readouterr().err.strip()
    assert re.fullmatch(r"spurious data: error: data/x\.tsv: the file as stored has sha256 [0-9a-f]{64} and "
                        r"94,931 bytes, expected [0-9a-f]{64} and 1", err), err


@pytest.mark.parametrize("ranges", [True, False], ids=["resumed", "restarted"])
def test_an_interrupted_download_is_resumed_or_restarted_and_never_looks_complete(sources, tmp_path, ranges):
    root, files = sources
    entry = next(f for f in files if f.target == "data/sst2/train.tsv.gz")
    path = f"/{entry.repo}/{entry.commit}/{entry.path}"
    cut = 1_000_000
    with serving(root, ranges=ranges) as server:
        server.drop_after[path] = cut  # the first response stops after 1 MB and the connection closes
        mirror.build(tmp_path, base_url=server.url, files=[entry], log=lambda _: None)
    assert (tmp_path / entry.target).read_bytes() == (SHARED / entry.target).read_bytes()
    gets = [r for r in server.requests if r[1] == path]
    assert gets[0][2] is None and gets[1][2] == f"bytes={cut}-"  # the retry asked for the rest
    assert server.served[path] == ([cut] if ranges else [0])  # sent the rest, or (no Range support) the whole file


def test_a_part_left_by_a_broken_run_is_checked_not_trusted(sources, tmp_path):
    """A leftover .part resumed into a file with the wrong bytes is refused and deleted; the next run is whole."""
    root, _ = sources
    target = tmp_path / "dev.tsv"
    part = tmp_path / "dev.tsv.part"
    part.write_bytes(b"x" * 1000)  # not the first 1000 bytes of the file
    url = SST2_DEV.url()
    with serving(root) as server:
        url = SST2_DEV.url(server.url)
        with pytest.raises(urlfetch.ChecksumError, match=rf"^{re.escape(str(target))}: the download from"):
            urlfetch.fetch_url(url, target, sha256=SST2_DEV.sha256, size=SST2_DEV.size)
        assert not part.exists() and not target.exists()
        sha, size = urlfetch.fetch_url(url, target, sha256=SST2_DEV.sha256, size=SST2_DEV.size)
    assert (sha, size) == (SST2_DEV.sha256, SST2_DEV.size)
    assert hashlib.sha256(target.read_bytes()).hexdigest() == SST2_DEV.sha256


def test_a_missing_file_on_the_server_is_one_line_without_retries(sources, tmp_path):
    root, _ = sources
    with serving(root) as server:
        with pytest.raises(urlfetch.FetchFailed, match=r"answered HTTP 404 \(Not Found\); check the URL$"):
            urlfetch.fetch_url(f"{server.url}/nowhere.tsv", tmp_path / "x.tsv")
        assert len(server.requests) == 1


def test_the_docs_list_every_mirror_file_with_its_source_and_checksum():
    from tests.conftest import REPO

    text = (REPO / "docs" / "running.md").read_text()
    for entry in mirror.FILES:
        row = next((line for line in text.splitlines() if line.startswith(f"| `{entry.target}` |")), "")
        assert f"{entry.repo}@{entry.commit[:7]}" in row and entry.commit in row and entry.stored_sha256 in row, entry


def test_a_local_copy_that_packed_a_source_anew_gives_its_checksum_and_the_rest_stays_checked(tmp_path, capsys):
    """`make data DATA_BASE_URL=... DATA_SOURCE_CHECKSUMS=...` against `data_server --from-mirror`: the rebuilt SQuAD
    zip has other bytes than GitHub's, so the copy names its checksum; the extracted and stored files are still the
    reference's, and a replaced checksum for a file without one of its own is refused."""
    from spurious.cli import main

    squad = next(f for f in mirror.FILES if f.member is not None)
    root = tmp_path / "github"
    checksums = lay_out(SHARED, root)
    given = json.loads(checksums.read_text())
    assert list(given) == [squad.target] and given[squad.target]["sha256"] != squad.sha256
    with serving(root) as server:
        # without the copy's checksum the repacked zip is refused
        assert main(["data", "fetch", "--out", str(tmp_path / "m"), "--base-url", server.url]) == 2
        assert f"expected {squad.sha256}" in capsys.readouterr().err
        only_squad = [f for f in mirror.FILES if f.target == squad.target]
        files = mirror.with_source_checksums(checksums, only_squad)
        mirror.build(tmp_path / "m", base_url=server.url, files=files, log=lambda _: None)
    assert (tmp_path / "m" / squad.target).read_bytes() == (SHARED / squad.target).read_bytes()
    plain = next(f for f in mirror.FILES if f.member is None and f.payload_sha256 is None)
    checksums.write_text(json.dumps({plain.target: {"sha256": "0" * 64, "size": 1}}))
    with pytest.raises(mirror.MirrorError, match="has no checksum of its own"):
        mirror.with_source_checksums(checksums)
    checksums.write_text(json.dumps({"data/nope.json": {"sha256": "0" * 64, "size": 1}}))
    with pytest.raises(mirror.MirrorError, match="data/nope.json is not a file of the mirror"):
        mirror.with_source_checksums(checksums)
    assert main(["data", "fetch", "--out", str(tmp_path / "m"), "--source-checksums", str(checksums)]) == 2
    assert "--source-checksums is for a local copy" in capsys.readouterr().err
