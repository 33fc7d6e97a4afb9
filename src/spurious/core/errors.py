"""The errors a user's input raises: one line that names the file or argument, what is wrong and what to do.

The ``spurious`` command prints an :class:`InputError` as one line on stderr and exits with status 2; a workflow job
that raises one ends with the same line (:func:`spurious.workflow.runlog.setup`), without a traceback. A file that
exists but cannot be read (a truncated parquet, a corrupt gzip stream, a damaged model or checkpoint) is an
:class:`UnreadableFileError`: ``<path>: <what is wrong>; <what to do>``; the readers of every file kind
(:mod:`spurious.core.readers`) raise it. ``docs/errors.md`` lists the messages.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import zlib
from collections.abc import Iterator

#: What the readers raise on damaged bytes: pyarrow's ArrowInvalid is a ValueError, its IO errors OSErrors; gzip
#: raises EOFError, BadGzipFile (an OSError) or zlib.error; torch.load a RuntimeError or an UnpicklingError.
READ_ERRORS: tuple[type[BaseException], ...] = (OSError, EOFError, ValueError, RuntimeError, zlib.error,
                                                pickle.UnpicklingError)

#: Set by :func:`spurious.workflow.runlog.setup`: this process is a workflow job, whose inputs the workflow wrote.
_IN_WORKFLOW_JOB = False


def mark_workflow_job() -> None:
    """Note that this process runs a workflow job (:func:`rebuild_advice` then names the Snakemake command)."""
    global _IN_WORKFLOW_JOB
    _IN_WORKFLOW_JOB = True


def rebuild_advice(path: str | os.PathLike, again: str = "write or download it again") -> str:
    """What to do with a damaged file: inside a workflow job (whose inputs the workflow wrote), the command that writes
    it and what depends on it anew; elsewhere, ``again`` (write or download it again; a model: train it again), or,
    for a workflow's output, that command.
    Snakemake does not rebuild a deleted intermediate file while what depends on it is up to date (that is how
    finished runs free disk space), so the command forces it: ``--forcerun`` takes files as well as rules."""
    command = f"`snakemake --forcerun {path}` with the run's other options (the same --configfile)"
    if _IN_WORKFLOW_JOB:
        return f"rebuild it, and what depends on it, with {command}"
    return f"{again} (a workflow output: rebuild it with {command})"


class InputError(Exception):
    """A user's file or argument cannot be used: the message names it and the fix (the CLI: one line, exit 2)."""


class UnreadableFileError(InputError):
    """A file that exists but cannot be read: ``<path>: <problem>; <fix>``."""

    def __init__(self, path: str | os.PathLike, problem: str, fix: str) -> None:
        self.path = str(path)
        super().__init__(f"{path}: {problem}; {fix}")


def reason(exc: BaseException, limit: int = 200) -> str:
    """A library's exception as one short line: its type and the start of its message."""
    text = " ".join(str(exc).split())
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    name = type(exc).__name__
    if name.islower():  # zlib's "error": say whose
        name = f"{type(exc).__module__}.{name}"
    return f"{name}: {text}" if text else name


class MissingResourceError(InputError, LookupError):
    """A language resource the environment must provide (NLTK's stop words) is not where it says."""


@contextlib.contextmanager
def unreadable(
    path: str | os.PathLike, kind: str, fix: str, errors: tuple[type[BaseException], ...] = READ_ERRORS
) -> Iterator[None]:
    """Turn a failure to read ``path`` inside the block into ``<path>: not a readable <kind> (<reason>); <fix>``.

    Keep the block to the read itself: a ValueError raised by a check after the read would be reported as damaged
    bytes. An :class:`InputError` raised inside passes unchanged."""
    try:
        yield
    except (InputError, FileNotFoundError):  # a missing file is the caller's check, with its own advice
        raise
    except errors as exc:
        if type(exc).__name__ == "OutOfMemoryError":  # torch's (a RuntimeError): memory, not damage
            raise
        raise UnreadableFileError(path, f"not a readable {kind} ({reason(exc)})", fix) from exc
