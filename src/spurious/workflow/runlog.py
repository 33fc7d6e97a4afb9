"""Logging for workflow scripts: everything goes to the rule's ``log:`` file (Snakemake does not redirect it); and
the job's watch over the Snakemake process that started it."""

from __future__ import annotations

import logging
import os
import select
import signal
import sys
import threading
import time
import warnings
from pathlib import Path
from typing import Any


def setup(smk: Any, name: str = "spurious") -> logging.Logger:
    """Send logging, warnings and stderr of a ``script:`` job to its first log file; load models only through the
    fetch records among its inputs (:func:`spurious.core.data.hub.use_job_records`); return a logger."""
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
    from spurious.core.errors import mark_workflow_job

    mark_workflow_job()  # a damaged input's advice names the Snakemake command that rebuilds it
    _report_input_errors(logger)
    # every model the job loads goes through the fetch records among its inputs, and none without one
    from spurious.core.data import hub

    hub.use_job_records(getattr(smk, "input", ()))
    watch_snakemake(logger)
    return logger


def snakemake_ancestor() -> int | None:
    """The PID of the nearest ancestor process that runs Snakemake (the one that started this job: the main process
    of a local run, the job step's on a SLURM node), or None (no such process, or no ``/proc`` to ask)."""
    pid = os.getppid()
    while pid > 1:
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            stat = Path(f"/proc/{pid}/stat").read_bytes()
        except OSError:
            return None
        if any(os.path.basename(arg) == b"snakemake" for arg in argv[:3]):  # snakemake, python -m snakemake
            return pid
        pid = int(stat.rsplit(b")", 1)[1].split()[1])  # the parent's PID, after the command name and state
    return None


def watch_snakemake(logger: logging.Logger) -> threading.Thread | None:
    """Stop this job when the Snakemake process that started it dies without stopping it (``kill -9``, an
    out-of-memory kill): a job left running would write outputs that no Snakemake records, while the next run starts
    the job again beside it. A daemon thread waits for that process to end, then sends this process SIGTERM, which a
    training job answers with a checkpoint (the next run resumes from it) and any other job by ending."""
    pid = snakemake_ancestor()
    if pid is None:
        return None
    thread = threading.Thread(target=_stop_when_gone, args=(pid, logger), name="snakemake-watch", daemon=True)
    thread.start()
    return thread


def _stop_when_gone(pid: int, logger: logging.Logger) -> None:
    try:
        fd = os.pidfd_open(pid)  # readable once the process has ended (Linux 5.3+)
    except (AttributeError, OSError):
        while _alive(pid):
            time.sleep(2)
    else:
        select.select([fd], [], [])
        os.close(fd)
    _say(logger, f"Snakemake (PID {pid}) is gone: stopping this job (SIGTERM) rather than letting it finish "
                 "unrecorded; rerun with --rerun-incomplete (training resumes from its checkpoint)")
    os.kill(os.getpid(), signal.SIGTERM)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


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
