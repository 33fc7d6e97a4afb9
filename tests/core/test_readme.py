"""The README (and the docs pages it sends users to first) name only commands, files and links that exist.

Read from the tree as it is: the `make` targets from the Makefile, the `spurious` subcommands from the CLI's parser,
the files from the repository, the anchors from the linked pages' headings.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from spurious.cli.entry import build_parser
from tests.conftest import REPO

README = REPO / "README.md"
PAGES = [README] + [REPO / "docs" / name for name in ("running.md", "testing.md", "cli.md", "config.md")]
MAX_LINES = 120
MAX_WIDTH = 120
# top-level folders whose paths are outputs or local environments, not files of the repository
NOT_IN_REPO = {"results", ".venv", ".venv-lock", ".snakemake"}
CHECKED_SUFFIXES = {".md", ".yaml", ".yml", ".toml", ".lock", ".cff", ".py", ".smk", ".sh"}
# placeholders: <name>, {a,b}, *, ..., and the user's own files, named my... (my.yaml, my_audit/)
PLACEHOLDER = re.compile(r"[<>{}*…]|\.\.\.|(?:^|/)my[\w.-]")


def _code(text: str) -> list[str]:
    """The code of a Markdown page: every line of its fenced blocks (shell comments removed) and every inline span."""
    code, fenced = [], False
    for line in text.splitlines():
        if line.strip().startswith("```"):
            fenced = not fenced
        elif fenced:
            code.append(re.sub(r"\s+#.*$", "", line))
        else:
            code += re.findall(r"`([^`]+)`", line)
    return code


def _make_targets() -> set[str]:
    targets = set()
    for line in (REPO / "Makefile").read_text().splitlines():
        rule = re.match(r"^([^\t#=\s][^:=]*?)\s*:(?!=)", line)
        if rule:
            targets |= {t for t in rule.group(1).split() if "%" not in t and "$" not in t}
    return targets


def _subcommands() -> set[str]:
    parser = build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return set(sub.choices)


def _anchors(page: Path) -> set[str]:
    """GitHub's anchors of a page's headings (outside code blocks)."""
    anchors, fenced = set(), False
    for line in page.read_text().splitlines():
        if line.strip().startswith("```"):
            fenced = not fenced
        elif not fenced and re.match(r"#{1,6} ", line):
            title = line.lstrip("#").strip().lower()
            anchors.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return anchors


def test_readme_fits_its_size():
    lines = README.read_text().splitlines()
    assert len(lines) <= MAX_LINES, f"README.md has {len(lines)} lines; at most {MAX_LINES}: move details to docs/"
    wide = [i + 1 for i, line in enumerate(lines) if len(line) > MAX_WIDTH]
    assert not wide, f"README.md lines over {MAX_WIDTH} characters: {wide}"


def test_readme_speaks_to_users():
    text = README.read_text()
    builders = re.findall(r"\bissue \d+|\bour (?:CPU )?machines?\b|\bCI\b|\b\d+ tests\b", text)
    assert not builders, f"README.md talks about how the project was built: {builders}"
    for line in text.splitlines():  # a table cell must not hold a |, not even inside backticks (GitHub splits it)
        assert not (line.startswith("|") and "\\|" in line), line


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_make_target_and_subcommand_exists(page):
    targets, subcommands = _make_targets(), _subcommands()
    for code in _code(page.read_text()):
        for call in re.findall(r"(?:^|[\s;&(])make\s+([^;&|)]*)", code):
            for word in call.split():
                if "=" in word or word.startswith("-") or PLACEHOLDER.search(word):
                    continue
                assert word in targets, f"{page.name}: `make {word}` (in `{code}`): no such target in the Makefile"
        for name in re.findall(r"(?:^|[\s;&(])spurious\s+([a-z][a-z-]*)", code):
            assert name in subcommands, f"{page.name}: `spurious {name}` (in `{code}`): no such subcommand"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_repository_path_exists(page):
    top = {p.name for p in REPO.iterdir()} - NOT_IN_REPO
    for code in _code(page.read_text()):
        for word in code.split():
            path = word.strip(",;:.()'\"")
            if PLACEHOLDER.search(path) or path.startswith(("-", "/", "~", "$", "http")) or "=" in path:
                continue
            in_repo = "/" in path and path.split("/")[0] in top
            named_file = "/" not in path and Path(path).suffix in CHECKED_SUFFIXES
            if in_repo or named_file:
                assert (REPO / path).exists(), f"{page.name}: `{path}` (in `{code}`) does not exist"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_relative_link_and_anchor_exists(page):
    for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text()):
        if re.match(r"[a-z]+:", target):
            continue
        file, _, anchor = target.partition("#")
        linked = (page.parent / file).resolve() if file else page
        assert linked.exists(), f"{page.name}: link to {target}: {file} does not exist"
        if anchor and linked.suffix == ".md":
            assert anchor in _anchors(linked), f"{page.name}: link to {target}: no heading #{anchor} in {file}"
