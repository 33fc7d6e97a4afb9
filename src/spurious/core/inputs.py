"""Reading a user's files: QA data (official SQuAD JSON or flat records) and predictions, classification data and
predictions. Every problem is an :class:`InputError` whose message names the file and the fix; the ``spurious``
command (``cli``, where it is ``CLIError``) prints it in one line, and the audit reads its data with the same readers.
"""

from __future__ import annotations

import argparse
import gzip
import json
import logging
import os
from pathlib import Path
from typing import Any

import pandas as pd

log = logging.getLogger(__name__)


class InputError(Exception):
    """A user's file cannot be used: the message names the file and the fix (the CLI: one line, exit status 2)."""


def _open_text(path: Path):
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8")
    return open(path, encoding="utf-8")


def _read_json_file(path: Path, what: str) -> Any:
    if not path.exists():
        raise InputError(f"{what} file {path} does not exist; check the path")
    if path.is_dir():
        raise InputError(f"{what} file {path} is a directory; pass the JSON file")
    try:
        with _open_text(path) as fh:
            return json.load(fh)
    except (json.JSONDecodeError, UnicodeDecodeError, gzip.BadGzipFile, EOFError) as exc:
        raise InputError(f"{what} file {path} is not valid JSON ({exc}); pass a JSON file (plain or .gz)") from exc


def _is_official_squad(payload: Any) -> bool:
    if not isinstance(payload, dict) or not isinstance(payload.get("data"), list):
        return False
    first = payload["data"][0] if payload["data"] else {}
    return isinstance(first, dict) and "paragraphs" in first


def load_data(path: str | os.PathLike, *, on_invalid: str = "error") -> tuple[pd.DataFrame, dict[str, Any]]:
    """Load a dataset file (official SQuAD JSON or flat records, detected), validate it, return (frame, info).

    ``info``: ``format`` ("squad_json" / "squad_flat_json"), ``version`` (official files), and the validation summary.
    """
    from spurious.core.data import DataValidationError, load_flat_json, load_squad_json, validate_records

    path = Path(path)
    payload = _read_json_file(path, "data")
    info: dict[str, Any] = {"path": str(path)}
    try:
        if _is_official_squad(payload):
            info["format"] = "squad_json"
            info["version"] = payload.get("version")
            frame = load_squad_json(path)
        elif isinstance(payload, list) or (isinstance(payload, dict) and isinstance(payload.get("data"), list)):
            info["format"] = "squad_flat_json"
            frame = load_flat_json(path)
        else:
            raise InputError(
                f"data file {path}: neither the official SQuAD JSON (an object with a 'data' list of articles with "
                "'paragraphs') nor a JSON list of records with id, context, question, answers{text, answer_start}"
            )
        del payload
        if frame.empty:
            raise InputError(f"data file {path} holds no questions")
        frame, summary = validate_records(frame, source=str(path), on_invalid=on_invalid)
    except DataValidationError as exc:
        message = str(exc)
        if "on_invalid" in message:
            message = message.replace("set on_invalid: drop for this dataset in the config", "pass --on-invalid drop")
        raise InputError(message) from exc
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(
            f"data file {path}: malformed record ({type(exc).__name__}: {exc}); each question needs id, "
            "question, context and answers with text and answer_start"
        ) from exc
    info.update(summary)
    return frame, info


def load_predictions(path: str | os.PathLike) -> dict[str, str]:
    """Read official-format predictions ``{id: answer text}``."""
    path = Path(path)
    payload = _read_json_file(path, "predictions")
    if not isinstance(payload, dict):
        raise InputError(
            f"predictions file {path}: expected a JSON object {{question id: answer text}} (the official SQuAD "
            f"prediction format), got a JSON {type(payload).__name__}"
        )
    bad = [k for k, v in payload.items() if not isinstance(v, str)]
    if bad:
        raise InputError(
            f"predictions file {path}: {len(bad)} answer(s) are not strings (first ids: {', '.join(bad[:5])}); "
            "each value must be the predicted answer text"
        )
    return {str(k): v for k, v in payload.items()}


def load_classification_file(path: str | os.PathLike, args: argparse.Namespace) -> pd.DataFrame:
    """A classification data file (normalised parquet, HF parquet export, GLUE TSV), validated strictly."""
    from spurious.core import classification
    from spurious.core.data import DataValidationError

    file = Path(path)
    if not file.is_file():
        raise InputError(f"data file {file} does not exist; check the path")
    columns = {
        "text_columns": args.text_columns.split(",") if args.text_columns else None,
        "label_column": args.label_column,
        "label_names": args.label_names.split(",") if args.label_names else None,
    }
    name = file.name.lower()
    try:
        if name.endswith(".parquet"):
            try:
                frame = classification.read_parquet(file)
                frame.attrs["source"] = str(file)
            except DataValidationError:
                frame = classification.load_hf_parquet(file, **columns)
        elif name.endswith((".tsv", ".tsv.gz")):
            frame = classification.load_glue_tsv(file, **columns)
        else:
            raise InputError(f"{file}: unknown data format; pass a .parquet or a GLUE .tsv(.gz) file")
        frame, summary = classification.validate_records(frame, source=str(file), on_invalid="error")
    except (DataValidationError, pd.errors.ParserError, KeyError) as exc:
        raise InputError(str(exc)) from exc
    if summary["n_unlabeled"]:
        log.info("%s: dropped %d unlabeled records", file, summary["n_unlabeled"])
    return frame


PREDICTION_FORMATS = (
    "parquet, CSV, TSV or JSON lines with the columns id and prediction (a label name or id), or a JSON object "
    "{id: prediction}"
)


def load_classification_predictions(path: str | os.PathLike) -> pd.DataFrame:
    """A classifier's predictions in one of :data:`PREDICTION_FORMATS`, chosen by the file name's extension."""
    file = Path(path)
    if not file.is_file():
        raise InputError(f"predictions file {file} does not exist; check the path")
    name = file.name.lower()
    try:
        if name.endswith(".parquet"):
            frame = pd.read_parquet(file)
        elif name.endswith((".jsonl", ".jsonl.gz")):
            frame = pd.read_json(file, lines=True, dtype={"id": str})
        elif name.endswith((".json", ".json.gz")):
            payload = _read_json_file(file, "predictions")
            if not isinstance(payload, dict):
                raise ValueError(f"a JSON {type(payload).__name__}, not an object {{id: prediction}}")
            frame = pd.DataFrame({"id": list(map(str, payload)), "prediction": list(payload.values())})
        elif name.endswith((".tsv", ".tsv.gz")):
            frame = pd.read_csv(file, sep="\t", dtype={"id": str})
        else:
            frame = pd.read_csv(file, dtype={"id": str})
    except (ValueError, pd.errors.ParserError, OSError) as exc:
        raise InputError(f"predictions file {file} could not be read ({str(exc)[:200]}); pass {PREDICTION_FORMATS}") from exc
    missing = [c for c in ("id", "prediction") if c not in frame.columns]
    if missing:
        shown = ", ".join(repr(str(c)[:30]) for c in list(frame.columns)[:5])
        raise InputError(
            f"predictions file {file} has no column(s) {missing} (it has {len(frame.columns)} columns: {shown}"
            f"{', ...' if len(frame.columns) > 5 else ''}); pass {PREDICTION_FORMATS}"
        )
    return frame
