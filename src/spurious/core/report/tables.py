"""Tables as CSV (full precision) and GitHub-flavoured Markdown: the formatting every paper's report shares.

Missing values are shown as "–", floats at two decimals by default (or at fixed decimals, never "-0.0"), booleans
as yes/no. Both files are written through temporary names and replaced together, so a failed write leaves no
partial table and no CSV without its Markdown.
"""

from __future__ import annotations

import math
import os
from typing import Any

import numpy as np
import pandas as pd

from spurious.core.io import atomic_paths

NA_TEXT = "–"

__all__ = ["NA_TEXT", "fixed_decimals", "format_markdown", "write_table"]


def _column_is_integral(values: pd.Series) -> bool:
    return pd.api.types.is_integer_dtype(values) and not pd.api.types.is_bool_dtype(values)


def _format_cell(value: Any, integral: bool) -> str:
    if value is None or value is pd.NA:
        return NA_TEXT
    if isinstance(value, bool | np.bool_):
        return "yes" if value else "no"
    if isinstance(value, int | np.integer):
        return str(int(value))
    if isinstance(value, float | np.floating):
        v = float(value)
        if math.isnan(v):
            return NA_TEXT
        if integral:
            return str(int(v))
        return f"{v:.4g}" if 0 < abs(v) < 0.005 else f"{v:.2f}"
    return str(value).replace("|", "\\|").replace("\n", " ")


def format_markdown(df: pd.DataFrame, caption: str | None = None, right_aligned: set[str] | None = None) -> str:
    """A GitHub-flavoured Markdown table of ``df`` (a non-default index becomes the first column), then the caption.

    Floats are shown with two decimals (tiny non-zero values with 4 significant digits), integers as such, missing
    values as "–", booleans as yes/no. Numeric columns are right-aligned, and so are ``right_aligned`` ones (numbers
    already formatted as text).
    """
    frame = df if isinstance(df.index, pd.RangeIndex) else df.reset_index()
    headers = [str(c).replace("|", "\\|") for c in frame.columns]
    integral = {c: _column_is_integral(frame[c]) for c in frame.columns}
    numeric = {
        c: (pd.api.types.is_numeric_dtype(frame[c]) and not pd.api.types.is_bool_dtype(frame[c]))
        or c in (right_aligned or set())
        for c in frame.columns
    }
    lines = [
        "| " + " | ".join(headers) + " |",
        "|" + "|".join("---:" if numeric[c] else ":---" for c in frame.columns) + "|",
    ]
    for record in frame.itertuples(index=False, name=None):
        cells = [_format_cell(v, integral[c]) for c, v in zip(frame.columns, record, strict=True)]
        lines.append("| " + " | ".join(cells) + " |")
    text = "\n".join(lines) + "\n"
    if caption:
        text += f"\n{caption}\n"
    return text


def fixed_decimals(value: Any, digits: int) -> str:
    """``value`` at ``digits`` decimals, "–" when missing, never "-0.0" for a tiny negative value."""
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return NA_TEXT
    text = f"{value:.{digits}f}"
    return f"{0.0:.{digits}f}" if float(text) == 0 else text


def write_table(
    df: pd.DataFrame,
    csv_path: str | os.PathLike,
    md_path: str | os.PathLike,
    caption: str | None = None,
    *,
    digits: int | None = None,
    whole_rows: np.ndarray | None = None,
) -> None:
    """Write ``df`` as CSV (full precision) and as Markdown (caption under the table; default
    ``df.attrs["caption"]``), the two together (:func:`~spurious.core.io.atomic_paths`: a failure leaves both
    previous files). ``digits``: float columns at that many decimals in the Markdown (the rows
    marked in the boolean ``whole_rows`` at none, e.g. a row of sizes); default ``format_markdown``'s two."""
    if caption is None:
        caption = df.attrs.get("caption")
    keep_index = not isinstance(df.index, pd.RangeIndex)
    shown, rounded = df, set()
    if digits is not None:
        shown = df.copy()
        whole = np.zeros(len(df), dtype=bool) if whole_rows is None else np.asarray(whole_rows, dtype=bool)
        for column in shown.columns:
            if pd.api.types.is_float_dtype(shown[column]):
                shown[column] = [
                    fixed_decimals(v, 0 if w else digits) for v, w in zip(shown[column], whole, strict=True)
                ]
                rounded.add(column)
    text = format_markdown(shown, caption, right_aligned=rounded)
    with atomic_paths(csv_path, md_path) as (csv_tmp, md_tmp):
        df.to_csv(csv_tmp, index=keep_index)
        md_tmp.write_text(text, encoding="utf-8")
