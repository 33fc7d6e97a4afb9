"""Shared fixtures: the real data from the data mirror (``$SPURIOUS_SHARED``, else ../shared; ``make data`` builds one
in mirror/ and the Makefile points ``SPURIOUS_SHARED`` at it) and the repository root."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("SPURIOUS_SHARED", REPO.parent / "shared"))
SQUAD_DEV = SHARED / "data" / "squad_v1.1" / "dev-v1.1.json.gz"
NQ_DEV = SHARED / "data" / "naturalquestions_isbiased" / "nq_dev_formatted.json.gz"

os.environ.setdefault("NLTK_DATA", str(SHARED / "nltk_data"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# Every figure a test writes, in this process or in a tiny workflow run it starts, must pass the readability check
# (spurious.core.report.figures.check_figure): the figure functions raise instead of writing an unreadable one.
os.environ.setdefault("SPURIOUS_CHECK_FIGURES", "1")

# `make test` runs the suite over pytest-xdist workers, one per core (files stay whole on one worker, so a module's
# tiny workflow run is built once). Each worker then keeps to one core: its tiny workflows run with `--cores 1` (which
# scales every rule's threads down to 1) and its own torch, OpenMP and BLAS with one thread. Two workers with two
# threads each on two cores made every workflow test about twice as slow and the suite no faster.
XDIST_WORKER = os.environ.get("PYTEST_XDIST_WORKER")
WORKFLOW_CORES = "1" if XDIST_WORKER else "2"
if XDIST_WORKER:
    # TORCHINDUCTOR_COMPILE_THREADS: inductor compiles its kernels in the process itself, not in a pool of one
    # subprocess per core that each import torch (about 6 s of CPU more for a cold compilation on 2 cores)
    for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "TORCHINDUCTOR_COMPILE_THREADS"):
        os.environ[_var] = "1"


def pytest_configure(config: pytest.Config) -> None:
    if XDIST_WORKER:
        import torch

        torch.set_num_threads(1)
    if not SQUAD_DEV.exists():
        raise pytest.UsageError(f"the real test data is missing: {SQUAD_DEV} (run `make data`, which builds the data "
                                "mirror in mirror/, or set SPURIOUS_SHARED to a mirror)")


# The files with a tiny workflow run, slowest first (measured on 2 cores): under xdist they start first, so that no
# long file is left running alone at the end (`--no-loadscope-reorder` keeps this order; by default xdist would order
# the files by their number of tests).
SLOW_FILES_FIRST = (
    "test_debias_workflow.py",
    "test_spuriousbench_workflow.py",
    "test_aflite_workflow.py",
    "test_workflow.py",
    "test_lexical_workflow.py",
    "test_classification.py",
    "test_qa.py",
    "test_gpu_check.py",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if XDIST_WORKER:
        rank = {name: i for i, name in enumerate(SLOW_FILES_FIRST)}
        items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: the rest keep their order


@pytest.fixture(scope="session")
def squad_dev():
    from spurious.core.data.squad import load_squad_json

    return load_squad_json(SQUAD_DEV)


def tiny_encoder(tmp: Path) -> Path:
    """A randomly initialised 2-layer BERT (hidden size 32) with MiniLM's tokenizer, saved as a checkpoint folder.

    The workflows that test plumbing (which jobs run, what they read and write, what a report shows) train it instead
    of MiniLM: a few steps teach neither model anything, and its forward and backward passes cost next to nothing,
    where MiniLM's were most of each training job. ``make demo``, the minimal configs' lexical model
    (tests/core/test_minimal_configs.py) and the kill-and-resume test keep MiniLM, the package-shipped model."""
    import torch
    from transformers import BertConfig, BertModel

    from spurious.core.models import load_tokenizer

    folder = tmp / "tiny_encoder"
    if not folder.is_dir():
        tokenizer = load_tokenizer("embedded:all-MiniLM-L6-v2")
        torch.manual_seed(0)
        BertModel(BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2,
                             num_attention_heads=2, intermediate_size=64, max_position_embeddings=512,
                             architectures=["BertModel"])).save_pretrained(folder)  # fmt: skip
        tokenizer.save_pretrained(folder)
    return folder
