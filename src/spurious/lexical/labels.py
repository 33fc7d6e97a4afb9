"""The one check of the gold labels and label counts that the lexical functions take (z-scores and usual/unusual sets
in :mod:`spurious.lexical.features`, the reweighting in :mod:`spurious.lexical.reweight`).

Labels are label ids ``0 .. n_labels - 1``, one per instance. Accepted: integer and boolean arrays, and float arrays
whose values are all whole numbers (``0.0``, ``1.0``: a label column that went through a join or a ``NaN`` fill comes
back from parquet or pandas as float64), converted to int64. Refused with a ValueError that names the first bad value,
its instance and the fix: fractions (``0.5``), NaN and infinities (instances without a gold label), other dtypes
(label names: map them to ids first) and ids outside ``[0, n_labels)``.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

# the largest whole number a float64 holds exactly: beyond it a "whole" float is not a label id read back
_EXACT_FLOAT_INTEGER = 2**53
_NO_GOLD_LABEL = "drop the instances without a gold label (e.g. SNLI's '-') before calling"


def check_n_labels(n_labels: int, minimum: int = 2) -> int:
    """``n_labels`` as an int, refused (ValueError) when it is not an integer (a bool is not) or below ``minimum``."""
    if isinstance(n_labels, bool | np.bool_):
        raise ValueError(f"n_labels must be an integer, got {n_labels!r}")
    try:
        value = operator.index(n_labels)
    except TypeError as exc:
        raise ValueError(f"n_labels must be an integer, got {n_labels!r}") from exc
    if value < minimum:
        raise ValueError(f"n_labels must be at least {minimum}, got {value}")
    return value


def check_labels(labels: Any, n_rows: int, n_labels: int | None) -> np.ndarray:
    """``labels`` as an int64 array of shape ``(n_rows,)`` with ids in ``[0, n_labels)`` (``n_labels`` None: any
    non-negative id), accepting whole-number floats (module docstring); otherwise a ValueError naming the problem."""
    arr = np.asarray(labels)
    if arr.ndim != 1:
        raise ValueError(f"labels must be 1-D, one entry per instance ({n_rows}); got shape {arr.shape}")
    if arr.shape[0] != n_rows:
        raise ValueError(
            f"labels has {arr.shape[0]} entries but features has {n_rows} rows (instances); give one entry per instance"
        )
    if arr.size == 0:
        return arr.astype(np.int64)
    if np.issubdtype(arr.dtype, np.floating):
        whole = np.isfinite(arr) & (arr == np.round(arr)) & (np.abs(arr) <= _EXACT_FLOAT_INTEGER)
        if not whole.all():
            _refuse(arr, ~whole, "labels must be integers (label ids)",
                    f"{_NO_GOLD_LABEL} (NaN), or map the labels to ids 0, 1, ... (a fraction is not a label)")
    elif not (np.issubdtype(arr.dtype, np.integer) or arr.dtype == bool):
        raise ValueError(
            f"labels must be integers (label ids), got dtype {arr.dtype}: map label names to ids 0, 1, ... first"
        )
    ids = arr.astype(np.int64)
    bad = ids < 0 if n_labels is None else (ids < 0) | (ids >= n_labels)
    if bad.any():
        problem = f"labels out of range [0, {n_labels})" if n_labels is not None else "labels must be non-negative"
        if ids[bad][0] < 0:
            fix = _NO_GOLD_LABEL if n_labels is None else f"labels must be non-negative label ids: {_NO_GOLD_LABEL}"
        else:
            fix = f"the ids of {n_labels} labels are 0 to {n_labels - 1}"
        _refuse(ids, bad, problem, fix)
    return ids


def _refuse(values: np.ndarray, bad: np.ndarray, problem: str, fix: str) -> None:
    """Raise the ValueError for the ``bad`` entries of ``values``: the first one, its instance and how many."""
    where = np.flatnonzero(bad)
    first = values[where[0]].item()
    raise ValueError(f"{problem}: found {first!r} at instance {where[0]} ({where.size} instance(s)); {fix}")
