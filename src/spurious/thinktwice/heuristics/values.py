"""A heuristics parquet read back (what the heuristics rule writes from :func:`compute_heuristics`: ``id`` and one
column per heuristic): one heuristic's values aligned to the questions a bias search, a fixed-threshold measurement
or a segmentation reads."""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np
import pandas as pd

from spurious.core import readers
from spurious.core.data.squad import DataValidationError
from spurious.core.io import align_to_ids


def read_heuristic_values(path: str | os.PathLike, heuristic: str, ids: Sequence[str]) -> np.ndarray:
    """The values of one heuristic column of a heuristics parquet, aligned to ``ids``.

    Fails naming the file when the column or some ids are missing (e.g. predictions made on another split)."""
    table = readers.read_parquet_table(path)
    if heuristic not in table.column_names:
        raise DataValidationError(
            f"{path}: no column {heuristic!r} (has {table.column_names[1:]}); add it to heuristics.names"
        )
    series = pd.Series(table.column(heuristic).to_numpy(), index=table.column("id").to_pylist())
    try:
        values = align_to_ids(
            series, ids, source=str(path), what=f"{heuristic} value",
            fix="the predictions and the heuristics must come from the same split",
        )
    except ValueError as exc:
        raise DataValidationError(str(exc)) from None
    return values.astype(float)
