"""Logging for workflow scripts: everything goes to the rule's ``log:`` file (Snakemake does not redirect it)."""

from __future__ import annotations

import logging
import sys
import warnings
from pathlib import Path
from typing import Any


def setup(smk: Any, name: str = "spurious") -> logging.Logger:
    """Send logging, warnings and stderr of a ``script:`` job to its first log file; return a logger."""
    log_path = Path(smk.log[0])
    log_path.parent.mkdir(parents=True, exist_ok=True)
    handle = open(log_path, "a", buffering=1)  # noqa: SIM115 - lives as long as the job
    sys.stderr = handle
    logging.basicConfig(
        level=logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        handlers=[logging.StreamHandler(handle)],
        force=True,
    )
    logging.captureWarnings(True)
    warnings.simplefilter("default")
    logger = logging.getLogger(name)
    logger.info("rule %s, wildcards %s", getattr(smk, "rule", "?"), dict(smk.wildcards.items()))
    return logger


def fail(logger: logging.Logger, message: str) -> None:
    """End a ``script:`` job on a user error: the message goes to the job's log and to the terminal (the real
    stderr, which :func:`setup` redirected), without a traceback; exit status 1, so Snakemake marks the job failed."""
    logger.error(message)
    print(f"spurious: error: {message}", file=sys.__stderr__, flush=True)
    raise SystemExit(1)
