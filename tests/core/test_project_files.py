"""The files users look for: LICENSE, CITATION.cff and the lock files agree with pyproject.toml and the papers."""

from __future__ import annotations

import re
import tomllib

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.conftest import REPO, SHARED

PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
LOCKS = {"runtime": REPO / "requirements.lock", "dev": REPO / "requirements-dev.lock"}
# Installed from TORCH_SPEC before the lock, never from it: their files differ per machine (CPU or CUDA build).
NOT_LOCKED = re.compile(r"^(torch|triton|nvidia-.*|cuda-.*)$")


def test_license_is_the_mit_license_pyproject_names():
    text = (REPO / "LICENSE").read_text()
    assert text.startswith("MIT License\n")
    assert "Copyright (c) 2026 the spurious authors" in text
    assert PYPROJECT["license"] == "MIT"
    assert PYPROJECT["license-files"] == ["LICENSE"]


def test_citation_cff_has_the_required_keys_and_matches_pyproject():
    cff = yaml.safe_load((REPO / "CITATION.cff").read_text())
    assert cff["cff-version"] == "1.2.0"
    for key in ("message", "title", "authors"):  # required by CFF 1.2.0
        assert cff.get(key), f"CITATION.cff: {key} is required"
    assert all(a.get("name") or a.get("family-names") for a in cff["authors"])
    assert "cite the papers" in " ".join(cff["message"].split())
    assert cff["version"] == PYPROJECT["version"]
    assert cff["license"] == PYPROJECT["license"]
    for ref in cff["references"]:
        assert ref.get("type") and ref.get("title") and ref.get("authors"), ref


@pytest.mark.skipif(not (SHARED / "papers").is_dir(), reason="needs the papers in ../shared/papers")
def test_citation_cff_cites_the_four_papers_by_their_titles():
    references = yaml.safe_load((REPO / "CITATION.cff").read_text())["references"]
    titles = [" ".join(ref["title"].split()).lower() for ref in references]
    papers = [
        " ".join(path.read_text().replace("*", "").split()).lower()
        for path in sorted((SHARED / "papers").glob("00[0-3]_*.txt"))
    ]
    assert len(titles) == len(papers) == 4
    for title, paper in zip(titles, papers, strict=True):
        assert title in paper[:2000], f"{title!r} is not the title of the paper it is listed for"


def _lock_entries(path) -> dict[str, tuple[str, int]]:
    """name -> (version, number of sha256 hashes) of a pip requirements file with hashes."""
    entries, name = {}, None
    for line in path.read_text().splitlines():
        pinned = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+) \\$", line)
        if pinned:
            name = canonicalize_name(pinned.group(1))
            assert name not in entries, f"{path.name}: {name} twice"
            entries[name] = (pinned.group(2), 0)
        elif line.startswith("    --hash=sha256:"):
            assert re.fullmatch(r" {4}--hash=sha256:[0-9a-f]{64}( \\)?", line), line
            version, hashes = entries[name]
            entries[name] = (version, hashes + 1)
        else:
            assert not line or line.lstrip().startswith("#"), f"{path.name}: an entry that is not pinned: {line}"
    return entries


@pytest.mark.parametrize("kind", LOCKS)
def test_lock_pins_every_package_with_hashes_and_never_torch(kind):
    entries = _lock_entries(LOCKS[kind])
    assert entries
    assert all(hashes >= 1 for _, hashes in entries.values()), "every entry needs its hashes (pip --require-hashes)"
    assert not [n for n in entries if NOT_LOCKED.match(n)], "torch and the CUDA packages are installed by TORCH_SPEC"


def test_locks_satisfy_pyproject_and_agree_with_each_other():
    runtime, dev = _lock_entries(LOCKS["runtime"]), _lock_entries(LOCKS["dev"])
    assert {n: v for n, (v, _) in runtime.items()} == {n: dev[n][0] for n in runtime}, "one version per package"
    wanted = [(Requirement(r), runtime) for r in PYPROJECT["dependencies"]]
    wanted += [(Requirement(r), dev) for r in PYPROJECT["optional-dependencies"]["dev"]]
    for req, lock in wanted:
        name = canonicalize_name(req.name)
        if NOT_LOCKED.match(name):
            continue
        assert name in lock, f"{req} is not in the lock: run `make lock`"
        version = lock[name][0]
        assert req.specifier.contains(version, prereleases=True), f"the lock's {name}=={version} breaks {req}"
