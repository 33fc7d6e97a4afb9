"""Reading a user's files for the CLI: QA data and predictions, classification data and predictions, heuristic names; every problem a CLIError that names the file and the fix."""

from __future__ import annotations

import argparse
import gzip
import json
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

log = logging.getLogger("spurious.cli")


EXIT_USAGE = 2


# The heuristic names (spurious.thinktwice.heuristics.HEURISTICS); repeated here so that parsing arguments and the error messages
# do not import the heavy module (spaCy, scikit-learn). A test checks that both agree.
HEURISTIC_NAMES: tuple[str, ...] = ("word-dist", "sim-word", "ans-pos", "cos-sim", "ans-len", "sim-ents", "subj-pos")


COMPAT_CHOICES: tuple[str, ...] = ("isbiased",)


class CLIError(Exception):
    """A user error: reported as one line on stderr, exit status 2."""


def _open_text(path: Path):
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8")
    return open(path, encoding="utf-8")


def _read_json_file(path: Path, what: str) -> Any:
    if not path.exists():
        raise CLIError(f"{what} file {path} does not exist; check the path")
    if path.is_dir():
        raise CLIError(f"{what} file {path} is a directory; pass the JSON file")
    try:
        with _open_text(path) as fh:
            return json.load(fh)
    except (json.JSONDecodeError, UnicodeDecodeError, gzip.BadGzipFile, EOFError) as exc:
        raise CLIError(f"{what} file {path} is not valid JSON ({exc}); pass a JSON file (plain or .gz)") from exc


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
            raise CLIError(
                f"data file {path}: neither the official SQuAD JSON (an object with a 'data' list of articles with "
                "'paragraphs') nor a JSON list of records with id, context, question, answers{text, answer_start}"
            )
        del payload
        if frame.empty:
            raise CLIError(f"data file {path} holds no questions")
        frame, summary = validate_records(frame, source=str(path), on_invalid=on_invalid)
    except DataValidationError as exc:
        message = str(exc)
        if "on_invalid" in message:
            message = message.replace("set on_invalid: drop for this dataset in the config", "pass --on-invalid drop")
        raise CLIError(message) from exc
    except (KeyError, TypeError, ValueError) as exc:
        raise CLIError(
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
        raise CLIError(
            f"predictions file {path}: expected a JSON object {{question id: answer text}} (the official SQuAD "
            f"prediction format), got a JSON {type(payload).__name__}"
        )
    bad = [k for k, v in payload.items() if not isinstance(v, str)]
    if bad:
        raise CLIError(
            f"predictions file {path}: {len(bad)} answer(s) are not strings (first ids: {', '.join(bad[:5])}); "
            "each value must be the predicted answer text"
        )
    return {str(k): v for k, v in payload.items()}


def _check_predictions(frame: pd.DataFrame, predictions: dict[str, str], path: str, allow_missing: bool) -> None:
    """Every question needs an answer (or --allow-missing); predictions for ids outside the data are counted and
    ignored, and a file none of whose ids is in the data (another split's predictions) is an error."""
    ids = frame["id"].astype(str).tolist()
    known = set(ids)
    extra = [i for i in predictions if i not in known]
    if predictions and len(extra) == len(predictions):
        raise CLIError(
            f"none of the {len(predictions)} ids in predictions file {path} is a question of the data file (first "
            f"ids: {', '.join(extra[:5])}); are these predictions for another split or dataset?"
        )
    if extra:
        print(
            f"spurious: warning: {len(extra)} of {len(predictions)} predictions in {path} have ids that are not in "
            f"the data file and are ignored (first ids: {', '.join(extra[:5])})",
            file=sys.stderr,
        )
    missing = [i for i in ids if i not in predictions]
    if not missing:
        return
    if not allow_missing:
        raise CLIError(
            f"predictions file {path} has no answer for {len(missing)} of {len(ids)} questions (first ids: "
            f"{', '.join(missing[:5])}); predict every question of the data file, or pass --allow-missing to score "
            "them 0 like the official script"
        )
    # one line, where the official script prints one per unanswered question
    print(
        f"spurious: {len(missing)} of {len(ids)} questions have no prediction and score 0 (first ids: "
        f"{', '.join(missing[:5])})",
        file=sys.stderr,
    )


def parse_heuristics(text: str | None) -> list[str]:
    """``"word-dist,ans-len"`` → a validated list (all heuristics when ``text`` is None, empty or ``all``)."""
    if text is None or text.strip() in ("", "all"):
        return list(HEURISTIC_NAMES)
    names = [h.strip() for h in text.split(",") if h.strip()]
    unknown = [h for h in names if h not in HEURISTIC_NAMES]
    if unknown:
        raise CLIError(
            f"unknown heuristic(s) {', '.join(unknown)} in --heuristics; choose from {', '.join(HEURISTIC_NAMES)} "
            "(comma-separated)"
        )
    return list(dict.fromkeys(names))


def parse_variants(items: Sequence[str] | None) -> dict[str, str]:
    variants: dict[str, str] = {}
    for item in items or ():
        heuristic, sep, name = item.partition("=")
        if not sep or not heuristic or not name:
            raise CLIError(f"--variant {item!r}: expected HEURISTIC=VARIANT, e.g. word-dist=between")
        variants[heuristic.strip()] = name.strip()
    return variants


def load_classification_file(path: str | os.PathLike, args: argparse.Namespace) -> pd.DataFrame:
    """A classification data file (normalised parquet, HF parquet export, GLUE TSV), validated strictly."""
    from spurious.core import classification
    from spurious.core.data import DataValidationError

    file = Path(path)
    if not file.is_file():
        raise CLIError(f"data file {file} does not exist; check the path")
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
            raise CLIError(f"{file}: unknown data format; pass a .parquet or a GLUE .tsv(.gz) file")
        frame, summary = classification.validate_records(frame, source=str(file), on_invalid="error")
    except (DataValidationError, pd.errors.ParserError, KeyError) as exc:
        raise CLIError(str(exc)) from exc
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
        raise CLIError(f"predictions file {file} does not exist; check the path")
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
        raise CLIError(f"predictions file {file} could not be read ({str(exc)[:200]}); pass {PREDICTION_FORMATS}") from exc
    missing = [c for c in ("id", "prediction") if c not in frame.columns]
    if missing:
        shown = ", ".join(repr(str(c)[:30]) for c in list(frame.columns)[:5])
        raise CLIError(
            f"predictions file {file} has no column(s) {missing} (it has {len(frame.columns)} columns: {shown}"
            f"{', ...' if len(frame.columns) > 5 else ''}); pass {PREDICTION_FORMATS}"
        )
    return frame

