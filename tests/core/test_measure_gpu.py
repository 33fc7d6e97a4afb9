"""benchmarks/device/measure_gpu.sh, the GPU machine's script, checked here where it costs nothing: its plan of calls
within the budget, and that every module its parts import imports under the GPU image (the modules the image lacks
blocked, its TORCH_LOGS parsed by torch). The whole device half runs at tiny sizes on the CPU in `make gpu-rehearse`
(minutes: it prepares the wheels with pip and trains every benchmark variant)."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.conftest import REPO

SCRIPT = REPO / "benchmarks" / "device" / "measure_gpu.sh"
IMAGE = REPO / "benchmarks" / "device" / "simulated_image"


def _plan(budget: int) -> list[str]:
    env = dict(os.environ, BUDGET=str(budget))
    return subprocess.run(["bash", str(SCRIPT), "plan"],
                          capture_output=True, text=True, check=True, env=env).stdout.splitlines()


def test_the_plan_fits_the_parts_into_calls_of_the_budget():
    """Estimates (s): setup 30, tests 100, bertbase 350, gpu_check 300, minilm 220, in that order of priority, each
    call filled as far as the budget allows: 30 + 100 + 350 = 480 <= 570 (gpu_check would make 780), then
    30 + 300 + 220 = 550."""
    assert _plan(570) == [
        "call 1: tests bertbase (about 480 s of 570): OUT=$OUT CALL=1 bash benchmarks/device/measure_gpu.sh",
        "call 2: gpu_check minilm (about 550 s of 570): OUT=$OUT CALL=2 bash benchmarks/device/measure_gpu.sh",
        "in all about 1030 s of device time in 2 calls, the machine's start-up apart",
    ]
    assert _plan(900)[:2] == [
        "call 1: tests bertbase gpu_check (about 780 s of 900): OUT=$OUT CALL=1 bash benchmarks/device/measure_gpu.sh",
        "call 2: minilm (about 250 s of 900): OUT=$OUT CALL=2 bash benchmarks/device/measure_gpu.sh",
    ]


def test_every_part_imports_under_the_gpu_image():
    """The modules of every part (the package, the benchmark, gpu_check, the CUDA tests) import with snakemake, spaCy,
    NLTK, gensim and datasets missing, and torch accepts the script's TORCH_LOGS; the simulated image does hide those
    modules, from ``import`` and from ``find_spec`` alike (the control)."""
    env = dict(os.environ, PYTHONPATH=str(IMAGE), PYTHON=sys.executable)
    env.pop("TORCH_LOGS", None)
    proc = subprocess.run(["bash", str(SCRIPT), "imports"], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0 and proc.stdout.startswith("imports ok"), proc.stdout + proc.stderr[-3000:]
    control = subprocess.run([sys.executable, "-c",
                              "import importlib.util as u; print(u.find_spec('datasets')); import nltk"],
                             capture_output=True, text=True, env=env)  # fmt: skip
    assert control.stdout == "None\n" and "No module named 'nltk'" in control.stderr  # absent, as on the image
    env["TORCH_LOGS"] = "recompiles,no_such_log"  # a TORCH_LOGS torch does not know stops the check
    assert subprocess.run(["bash", str(SCRIPT), "imports"], capture_output=True, env=env, timeout=300).returncode != 0


def test_only_the_wheels_the_image_lacks_are_installed(tmp_path):
    """The prepared wheels (names as pip writes them) against the simulated image, which has pytest and its
    dependencies (with its own plugins) but not jsonschema's: only jsonschema and its dependencies are installed, so
    no pytest of ours goes in front of the image's; on this machine's Python, which has them all, none is."""
    names = ["jsonschema-4.25.1-py3-none-any.whl", "jsonschema_specifications-2025.9.1-py3-none-any.whl",
             "referencing-0.36.2-py3-none-any.whl", "rpds_py-0.27.1-cp312-cp312-manylinux_2_17_x86_64.whl",
             "attrs-25.3.0-py3-none-any.whl", "pytest-9.2.0-py3-none-any.whl", "pluggy-1.6.0-py3-none-any.whl",
             "iniconfig-2.1.0-py3-none-any.whl", "pygments-2.19.2-py3-none-any.whl"]  # fmt: skip
    for name in names:
        (tmp_path / name).touch()

    def missing(**image: str) -> list[str]:
        env = dict(os.environ, PYTHON=sys.executable, **image)
        out = subprocess.run(["bash", str(SCRIPT), "wheels", str(tmp_path)], capture_output=True, text=True,
                             check=True, env=env).stdout  # fmt: skip
        return [line.rsplit("/", 1)[1] for line in out.splitlines()]

    assert missing(PYTHONPATH=str(IMAGE), SPURIOUS_IMAGE_CARRIED="1") == names[:4]
    assert missing() == []
