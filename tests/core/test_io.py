"""Durable outputs (``spurious.core.io``): a write is flushed to disk before and after its rename, a model folder is
swapped in so that a crash at any point leaves the old or the new one, and a crashed writer's leftovers are removed
by the next writer (never a live writer's)."""

from __future__ import annotations

import multiprocessing
import os
import socket
import subprocess
import time
from pathlib import Path

import pytest

from spurious.core import io
from spurious.core.models import load_tokenizer
from spurious.core.train import training


def _fd_path(fd: int) -> str:
    return os.readlink(f"/proc/self/fd/{fd}")


@pytest.fixture
def events(monkeypatch) -> list[tuple[str, str]]:
    """The fsyncs (of the file or folder an fd names) and renames, in order, delegated to the real functions."""
    seen: list[tuple[str, str]] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        seen.append(("fsync", _fd_path(fd)))
        real_fsync(fd)

    def replace(src, dst) -> None:
        seen.append(("replace", f"{src} -> {dst}"))
        real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    return seen


def test_a_written_file_is_flushed_before_its_rename_and_its_folder_after(tmp_path, events):
    target = tmp_path / "out" / "scores.json"
    io.write_json({"a": 1}, target)
    assert io.read_json(target) == {"a": 1}
    (rename,) = [detail for kind, detail in events if kind == "replace"]
    tmp = rename.split(" -> ")[0]
    assert Path(tmp).name.startswith(f".scores.json.tmp-{os.getpid()}@")
    assert events == [("fsync", tmp), ("replace", f"{tmp} -> {target}"), ("fsync", str(target.parent))]


@pytest.fixture(scope="module")
def tiny_model():
    from transformers import BertConfig, BertModel

    tokenizer = load_tokenizer("embedded:all-MiniLM-L6-v2")
    config = BertConfig(
        vocab_size=tokenizer.vocab_size, hidden_size=8, num_hidden_layers=1, num_attention_heads=1,
        intermediate_size=8, max_position_embeddings=16,
    )  # fmt: skip
    return BertModel(config), tokenizer


def test_a_saved_model_folder_is_flushed_file_by_file_then_swapped_in(tmp_path, tiny_model, events):
    target = tmp_path / "model"
    training.save_model_dir(target, *tiny_model, {"steps": 1})
    synced = {path for kind, path in events if kind == "fsync"}
    files = {str(target / name) for name in os.listdir(target)}
    assert {"model.safetensors", "config.json", "tokenizer.json", training.TRAINING_STATE_FILE} <= {
        Path(f).name for f in files
    }
    tmp = next(detail.split(" -> ")[0] for kind, detail in events if kind == "replace")
    # every file and the folder itself under the temporary name (before the rename), the parent after it
    assert {str(Path(tmp) / Path(f).name) for f in files} | {tmp} <= synced
    assert events[-1] == ("fsync", str(tmp_path))
    assert [p.name for p in tmp_path.iterdir()] == ["model"]


def _save_and_crash(target: Path, tiny_model, crash_at: str) -> None:
    """In a forked process: save the new model folder and die (``os._exit``, no clean-up) at ``crash_at``."""
    calls = {"replace": 0}
    real_replace = os.replace

    def replace(src, dst) -> None:
        if (crash_at, calls["replace"]) in {("old set aside", 0), ("between the renames", 1)}:
            os._exit(3)
        calls["replace"] += 1
        real_replace(src, dst)

    os.replace = replace
    if crash_at == "old not yet deleted":  # the backup's deletion is the only rmtree of a clean swap
        io.shutil.rmtree = lambda *args, **kwargs: os._exit(3)
    if crash_at == "writing":
        model, tokenizer = tiny_model

        class Crashing:
            def save_pretrained(self, folder):
                tokenizer.save_pretrained(folder)
                os._exit(3)

        training.save_model_dir(target, model, Crashing(), {"steps": 2})
    training.save_model_dir(target, *tiny_model, {"steps": 2})
    os._exit(0)


@pytest.mark.parametrize(
    ("crash_at", "expected"),
    [
        ("writing", 1),  # the new folder half written
        ("old set aside", 1),  # before the old folder is renamed to its backup name
        ("between the renames", 1),  # the old one under its backup name, the new one under its temporary name
        ("old not yet deleted", 2),  # the new one in place, the old one still under its backup name
    ],
)
def test_a_crash_during_a_model_swap_leaves_the_old_or_the_new_folder(tmp_path, tiny_model, crash_at, expected):
    """A real crash (the writing process dies) at each point of the swap, then the start-up pass of the next writer:
    the folder is whole, the old one (training_state steps 1) or the new one (2), never neither, and nothing else is
    left beside it."""
    target = tmp_path / "model"
    training.save_model_dir(target, *tiny_model, {"steps": 1})
    before = sorted(os.listdir(target))
    process = multiprocessing.get_context("fork").Process(target=_save_and_crash, args=(target, tiny_model, crash_at))
    process.start()
    process.join(60)
    assert process.exitcode == 3
    io.recover_interrupted_writes(target)
    assert [p.name for p in tmp_path.iterdir()] == ["model"]
    assert sorted(os.listdir(target)) == before
    assert io.read_json(target / training.TRAINING_STATE_FILE) == {"steps": expected}


def _dead_pid() -> int:
    process = subprocess.Popen(["true"])
    process.wait()
    return process.pid


def test_leftovers_of_writers_that_are_gone_are_removed_and_a_live_writers_kept(tmp_path):
    """What crashed writers left beside an output (temporary files, temporary and backup folders) goes when the
    output is written next; a writer still running on this machine, or one on another machine that was active within
    a day, keeps its files."""
    host, dead, alive = socket.gethostname(), _dead_pid(), os.getppid()
    day_old = time.time() - 2 * 24 * 3600  # older than FOREIGN_STALE_AFTER_S, a day

    def plant(name: str, folder: bool = False, mtime: float | None = None) -> Path:
        path = tmp_path / name
        path.mkdir() if folder else path.write_text("partial")
        if mtime is not None:
            os.utime(path, (mtime, mtime))
        return path

    gone = [
        plant(f".scores.json.tmp-{dead}@{host}~x1y2.json"),
        plant(".scores.json.tmp-7@elsewhere~x1y2.json", mtime=day_old),
        plant(f".model.tmp-{dead}@{host}", folder=True),
        plant(f".model.old-{dead}@{host}", folder=True),
        plant(f".model.tmp-{dead}", folder=True, mtime=day_old),  # an earlier version's name, without the host
    ]
    kept = [
        plant(f".scores.json.tmp-{alive}@{host}~a1b2.json"),
        plant(".scores.json.tmp-7@elsewhere~a1b2.json"),
        plant(f".model.tmp-{alive}@{host}", folder=True),
        plant(".model.tmp-8", folder=True),
        plant(f".other.json.tmp-{dead}@{host}~c3d4.json"),  # another output's: its own writer's business
    ]
    io.write_json({"a": 1}, tmp_path / "scores.json")
    with io.atomic_dir(tmp_path / "model") as folder:
        (folder / "weights").write_text("new")
    assert not any(p.exists() for p in gone)
    assert all(p.exists() for p in kept)
    assert (tmp_path / "model" / "weights").read_text() == "new"
