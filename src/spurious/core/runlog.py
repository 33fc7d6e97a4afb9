"""Logging for workflow scripts: everything goes to the rule's ``log:`` file (Snakemake does not redirect it)."""

from __future__ import annotations

import logging
import sys
import warnings
from pathlib import Path
from typing import Any


def setup(smk: Any, name: str = "spurious") -> logging.Logger:
    """Send logging, warnings and stderr of a ``script:`` job to its first log file; load models only through the
    fetch records among its inputs (:func:`spurious.core.hub.use_job_records`); return a logger."""
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
    _report_input_errors(logger)
    # every model the job loads goes through the fetch records among its inputs, and none without one
    from spurious.core import hub

    hub.use_job_records(getattr(smk, "input", ()))
    return logger


def _say(logger: logging.Logger, message: str) -> None:
    logger.error(message)
    print(f"spurious: error: {message}", file=sys.__stderr__, flush=True)


def fail(logger: logging.Logger, message: str) -> None:
    """End a ``script:`` job on a user error: the message goes to the job's log and to the terminal (the real
    stderr, which :func:`setup` redirected), without a traceback; exit status 1, so Snakemake marks the job failed."""
    _say(logger, message)
    raise SystemExit(1)


def _report_input_errors(logger: logging.Logger) -> None:
    """An :class:`~spurious.core.errors.InputError` that ends a job (an unreadable file, a bad argument) is reported
    as :func:`fail` reports one, in the command line's words; any other exception keeps its traceback in the log.
    Python exits with status 1 after the hook, so Snakemake marks the job failed."""
    from spurious.core.errors import InputError

    previous = sys.excepthook

    def hook(kind: type[BaseException], exc: BaseException, tb: Any) -> None:
        if isinstance(exc, InputError):
            _say(logger, str(exc))
        else:
            previous(kind, exc, tb)

    sys.excepthook = hook
