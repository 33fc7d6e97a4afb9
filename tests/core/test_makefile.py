"""The Makefile's targets that check their arguments do so before installing anything."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

from tests.conftest import REPO


def test_make_plan_without_config_says_so_before_installing_anything(tmp_path: Path) -> None:
    """Issue: `make plan` without CONFIG installed the environment (possibly several GB) before its usage error."""
    venv = tmp_path / "venv"  # where `make install` would create the environment
    proc = subprocess.Popen(["make", "--no-print-directory", "-C", str(REPO), "plan", f"VENV={venv}"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        _, stderr = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # make and the installation it started
        proc.communicate()
        raise AssertionError(f"make plan without CONFIG ran on (installing into {venv}?)") from None
    assert proc.returncode == 2, stderr
    assert "make plan: name the config, e.g. make plan CONFIG=configs/paper-squad.yaml" in stderr
    assert not venv.exists(), "make plan installed the environment before checking CONFIG"
