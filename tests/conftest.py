"""Shared fixtures: the real data from ../shared (the offline mirror) and the repository root."""

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


def pytest_configure(config: pytest.Config) -> None:
    if not SQUAD_DEV.exists():
        raise pytest.UsageError(f"the real test data is missing: {SQUAD_DEV} (clone ../shared beside the repository)")


@pytest.fixture(scope="session")
def squad_dev():
    from spurious.core.data import load_squad_json

    return load_squad_json(SQUAD_DEV)
