"""Progress reports of long loops and the default process count (issue 14)."""

from __future__ import annotations

import io
import logging

import pandas as pd

from spurious.core import progress
from spurious.thinktwice.heuristics import compute_heuristics


def test_progress_logs_plain_lines_when_not_on_a_terminal(caplog):
    logger = logging.getLogger("spurious.test")
    bar = progress.Progress(3, "parsing", logger, unit="chunks", every_seconds=0.0, stream=io.StringIO())
    with caplog.at_level(logging.INFO, logger="spurious.test"), bar:
        for _ in range(3):
            bar.update()
    lines = [r.getMessage() for r in caplog.records]
    # every_seconds 0: a line per update before the last, and the final line
    assert [line.split(",")[0] for line in lines] == [
        "parsing: 1/3 chunks (33 %)", "parsing: 2/3 chunks (67 %)", "parsing: 3/3 chunks (100 %)"
    ]


def test_available_cores_honours_the_affinity_and_slurm(monkeypatch):
    monkeypatch.setattr(progress.os, "sched_getaffinity", lambda _pid: {0, 1, 2, 3})
    monkeypatch.delenv("SLURM_CPUS_PER_TASK", raising=False)
    assert progress.available_cores() == 4
    monkeypatch.setenv("SLURM_CPUS_PER_TASK", "2")
    assert progress.available_cores() == 2
    monkeypatch.setenv("SLURM_CPUS_PER_TASK", "16")  # the affinity is the real limit
    assert progress.available_cores() == 4


def test_heuristics_report_their_progress(caplog):
    frame = pd.DataFrame(
        {
            "id": [f"q{i}" for i in range(12)],
            "title": ["t"] * 12,
            "context": [f"Paris is the capital of France. It has {i} museums." for i in range(12)],
            "question": [f"How many museums does Paris have, {i}?" for i in range(12)],
            "answers": [{"text": [str(i)], "answer_start": [39]} for i in range(12)],
        }
    )
    with caplog.at_level(logging.INFO, logger="spurious.thinktwice.heuristics"):
        values = compute_heuristics(frame, ["sim-word", "ans-len"], threads=1)
    assert len(values) == 12
    final = [r.getMessage() for r in caplog.records if r.getMessage().startswith("heuristics: text chunks parsed")]
    assert final and "(100 %)" in final[-1]
