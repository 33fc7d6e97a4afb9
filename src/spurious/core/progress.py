"""Progress of long loops and the cores a process may use.

:class:`Progress` draws a tqdm bar when stderr is a terminal (unless logging is set above warnings, as
``spurious --quiet`` does) and otherwise logs a plain line at most every
``every_seconds`` (and at the end), so that a workflow log or a batch job's output shows that a long step is alive.
:func:`available_cores` is what a process may really use: its CPU affinity (the scheduler's cgroup/cpuset), capped
by SLURM's allocation when it runs in a SLURM job.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from typing import Any


def available_cores() -> int:
    """The CPUs this process may run on (``os.sched_getaffinity``), at most ``SLURM_CPUS_PER_TASK`` in a SLURM job."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    slurm = os.environ.get("SLURM_CPUS_PER_TASK")
    if slurm and slurm.isdigit() and int(slurm) > 0:
        cores = min(cores, int(slurm))
    return max(1, cores)


class Progress:
    """``with Progress(total, "parsing", log) as bar: ... bar.update(n)``."""

    def __init__(
        self, total: int, description: str, logger: logging.Logger, *, unit: str = "it", every_seconds: float = 30.0,
        stream: Any = None,
    ) -> None:
        self.total, self.description, self.logger, self.unit = int(total), description, logger, unit
        self.every_seconds = every_seconds
        self.done = 0
        self._start = self._last = time.perf_counter()
        stream = sys.stderr if stream is None else stream
        self._bar = None
        if getattr(stream, "isatty", lambda: False)() and logger.isEnabledFor(logging.WARNING):  # not `spurious -q`
            from tqdm import tqdm

            self._bar = tqdm(total=self.total, desc=description, unit=unit, file=stream, leave=False)

    def __enter__(self) -> Progress:
        return self

    def update(self, n: int = 1) -> None:
        self.done += n
        if self._bar is not None:
            self._bar.update(n)
            return
        now = time.perf_counter()
        if now - self._last >= self.every_seconds and self.done < self.total:
            self._last = now
            self._log(now)

    def _log(self, now: float) -> None:
        share = 100.0 * self.done / self.total if self.total else 100.0
        self.logger.info(
            "%s: %d/%d %s (%.0f %%), %.0f s",
            self.description, self.done, self.total, self.unit, share, now - self._start,
        )

    def __exit__(self, *exc: Any) -> None:
        if self._bar is not None:
            self._bar.close()
        if exc[0] is None:
            self._log(time.perf_counter())
