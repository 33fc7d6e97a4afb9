"""Reading a user's files: QA data (official SQuAD JSON or flat records) and predictions, classification data and
predictions. Every problem is an :class:`InputError` whose message names the file and the fix; the ``spurious``
command (``cli``, where it is ``CLIError``) prints it in one line, and the audit reads its data with the same readers.
The record checks are the workflow's (:mod:`spurious.core.data.squad`, :mod:`spurious.core.data.classification`); their
advice names the config's keys, which :func:`cli_advice` rewrites into the command line's options.
"""

from __future__ import annotations

import argparse
import logging
import os
from pathlib import Path
from typing import Any

import pandas as pd

# InputError lives in core.errors (the readers of every layer raise it); importable from here as before
from spurious.core import readers
from spurious.core.errors import InputError, rebuild_advice

log = logging.getLogger(__name__)

#: The config's advice in the workflow's record checks → the command line's option for the same thing.
CLI_ADVICE: tuple[tuple[str, str], ...] = (
    ("set on_invalid: drop for this dataset in the config to drop them (counted in the output's metadata)",
     "pass --on-invalid drop to drop them"),
    ("set text_columns: [first, second] in the dataset's source config", "pass --text-columns FIRST[,SECOND]"),
    ("set text_columns / label_column in the dataset's source config", "pass --text-columns / --label-column"),
    ("need label_names (their order defines the indices) in the dataset's source config",
     "need --label-names (their order defines the indices)"),
    ("the label_names in the config", "--label-names"),
)


def cli_advice(message: str) -> str:
    """A record check's message with the config's advice (:data:`CLI_ADVICE`) replaced by the CLI's options."""
    for config_words, cli_words in CLI_ADVICE:
        message = message.replace(config_words, cli_words)
    return message


def check_output(path: str | os.PathLike, option: str | None, *, folder: bool = False, holds: str = "") -> None:
    """An InputError unless ``path`` can be written as the command will write it, checked before any work: a file
    (written under a temporary name in its folder, then renamed) or, with ``folder``, a folder the command writes its
    files into (``holds``: what goes there, for the message). Refused: a folder where a file goes or a file where a
    folder goes, a path under a file, and a folder this process cannot write into (or, when it does not exist yet,
    create). ``option``: the option that names the path in the message (None: a positional argument)."""
    path = Path(path)
    where = f"{option} {path}" if option else str(path)
    what = "a folder" if folder else "a file"
    if path.exists() and path.is_dir() != folder:
        other = "a file" if folder else "a folder"
        raise InputError(f"{where}: {other}, not {what}; pass {what}{holds}")
    parent = path if folder else path.parent
    existing = next(p for p in (parent, *parent.parents) if p.exists())  # at last "." or "/"
    if not existing.is_dir():
        raise InputError(f"{where}: {existing} is a file, so {path} cannot be made; pass another path")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise InputError(f"{where}: {existing} is not writable; pass a path you can write to")


def label_names(text: str) -> str:
    """An argparse type: label names in index order, comma-separated (``negative,positive``); at least two, none
    empty and none twice (a name given twice, or the empty name of ``a,``, would make the file's labels the wrong
    ones and the predictions be blamed for it)."""
    names = [name.strip() for name in text.split(",")]
    if any(not name for name in names):
        raise argparse.ArgumentTypeError(f"{text!r} has an empty name; give one name per label id, comma-separated, "
                                         "e.g. negative,positive")
    repeated = [name for i, name in enumerate(names) if name in names[:i]]
    if repeated:
        raise argparse.ArgumentTypeError(f"{text!r} names {', '.join(dict.fromkeys(repeated))} twice; give each label "
                                         "id its own name, in index order")
    if len(names) < 2:
        raise argparse.ArgumentTypeError(f"{text!r} names one label; give every label id a name, in index order, "
                                         "e.g. negative,positive")
    return ",".join(names)


def positive_int(text: str) -> int:
    """An argparse type: a whole number of at least 1 (sample sizes, draws, threads, top-k)."""
    return _whole_number(text, 1)


def non_negative_int(text: str) -> int:
    """An argparse type: a whole number of at least 0 (seeds)."""
    return _whole_number(text, 0)


def _whole_number(text: str, minimum: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < minimum:
        raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
    return value


def _read_json_file(path: Path, what: str, duplicates_fix: str = "give each key once") -> Any:
    """A user's JSON file (plain or gzip); every problem an InputError naming it and what to do."""
    from spurious.core import readers

    if not path.exists():
        raise InputError(f"{what} file {path} does not exist; check the path")
    if path.is_dir():
        raise InputError(f"{what} file {path} is a directory; pass the JSON file")
    fix = (f"{rebuild_advice(path)}, or pass it uncompressed" if path.suffix == ".gz"
           else f"pass the {what} as a JSON file (plain or .gz)")
    return readers.read_json(path, fix=fix, duplicates_fix=duplicates_fix)


def _is_official_squad(payload: Any) -> bool:
    if not isinstance(payload, dict) or not isinstance(payload.get("data"), list):
        return False
    first = payload["data"][0] if payload["data"] else {}
    return isinstance(first, dict) and "paragraphs" in first


def load_data(path: str | os.PathLike, *, on_invalid: str = "error") -> tuple[pd.DataFrame, dict[str, Any]]:
    """Load a dataset file (official SQuAD JSON or flat records, detected), validate it, return (frame, info).

    ``info``: ``format`` ("squad_json" / "squad_flat_json"), ``version`` (official files), and the validation summary.
    """
    from spurious.core.data.squad import DataValidationError, load_flat_json, load_squad_json, validate_records

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
        raise InputError(cli_advice(str(exc))) from exc
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
    payload = _read_json_file(path, "predictions", PREDICTION_DUPLICATES)
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
    """A classification data file (normalised parquet, HF parquet export, GLUE TSV), validated as ``args.on_invalid``
    says (default ``error``). ``args.text_columns``, ``label_column`` and ``label_names`` pick and name the columns of
    a hub export or a TSV; on a normalised parquet, whose columns are fixed, ``label_names`` renames its label ids and
    the column options are refused unless they name its own columns."""
    from spurious.core.data import classification
    from spurious.core.data.squad import DataValidationError

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
            except DataValidationError:  # not the workflow's normalised parquet: a hub export
                frame = classification.load_hf_parquet(file, **columns)
            else:
                frame = _normalised_with_options(frame, file, **columns)
        elif name.endswith((".tsv", ".tsv.gz")):
            frame = classification.load_glue_tsv(file, **columns)
        else:
            raise InputError(f"{file}: unknown data format; pass a .parquet or a GLUE .tsv(.gz) file")
        on_invalid = getattr(args, "on_invalid", "error")
        frame, summary = classification.validate_records(frame, source=str(file), on_invalid=on_invalid)
    except (DataValidationError, KeyError) as exc:
        raise InputError(cli_advice(str(exc))) from exc
    if summary["n_unlabeled"]:
        log.info("%s: dropped %d unlabeled records", file, summary["n_unlabeled"])
    return frame


NORMALISED_COLUMNS = {"text_columns": (["text_a"], ["text_a", "text_b"]), "label_column": ("label",)}


def _normalised_with_options(
    frame: pd.DataFrame, file: Path, *, text_columns: list[str] | None, label_column: str | None,
    label_names: list[str] | None,
) -> pd.DataFrame:
    """A normalised parquet (columns ``id, text_a, text_b, label``, label ids named in its metadata) with the CLI's
    column options: ``label_names`` renames the ids, in order; column options other than its own are refused."""
    frame.attrs["source"] = str(file)
    for option, value in (("--text-columns", text_columns), ("--label-column", label_column)):
        key = option.removeprefix("--").replace("-", "_")
        if value is not None and value not in NORMALISED_COLUMNS[key]:
            raise InputError(
                f"{file}: a normalised parquet, whose columns are id, text_a, text_b and label, so {option} "
                f"{','.join(value) if isinstance(value, list) else value} does not apply; drop {option} (it picks the "
                "columns of a hub parquet export or a GLUE TSV)"
            )
    if label_names is None:
        return frame
    current = [str(n) for n in frame.attrs["label_names"]]
    if len(label_names) != len(current):
        raise InputError(
            f"{file}: --label-names names {len(label_names)} labels {label_names}, but the file's labels are the "
            f"{len(current)} ids of {current}; name each label id in order"
        )
    lowered, current_lowered = [n.lower() for n in label_names], [n.lower() for n in current]
    if lowered != current_lowered and sorted(lowered) == sorted(current_lowered):
        raise InputError(
            f"{file}: --label-names {','.join(label_names)} gives the file's labels {current} in another order, which "
            "would swap what its label ids mean; pass them in the file's order (a normalised parquet stores label "
            "ids, and --label-names renames them)"
        )
    frame.attrs["label_names"] = list(label_names)
    return frame


PREDICTION_FORMATS = (
    "parquet, CSV, TSV or JSON lines with the columns id and prediction (a label name or id), or a JSON object "
    "{id: prediction}"
)
#: What to do about an id given twice in a predictions file.
PREDICTION_DUPLICATES = "keep one prediction per id"


def load_classification_predictions(path: str | os.PathLike) -> pd.DataFrame:
    """A classifier's predictions in one of :data:`PREDICTION_FORMATS`, chosen by the file name's extension."""
    file = Path(path)
    if not file.is_file():
        raise InputError(f"predictions file {file} does not exist; check the path")
    name = file.name.lower()
    fix = f"pass {PREDICTION_FORMATS}; if the file is damaged, {rebuild_advice(file)}"
    try:
        if name.endswith(".parquet"):
            frame = readers.read_parquet(file, fix=fix)
        elif name.endswith((".jsonl", ".jsonl.gz")):
            frame = readers.read_json_lines(file, fix=fix, dtype={"id": str})
        elif name.endswith((".json", ".json.gz")):
            payload = _read_json_file(file, "predictions", PREDICTION_DUPLICATES)
            if not isinstance(payload, dict):
                raise ValueError(f"a JSON {type(payload).__name__}, not an object {{id: prediction}}")
            frame = pd.DataFrame({"id": list(map(str, payload)), "prediction": list(payload.values())})
        elif name.endswith((".tsv", ".tsv.gz")):
            frame = readers.read_csv(file, kind="TSV file", fix=fix, sep="\t", dtype={"id": str})
        else:
            frame = readers.read_csv(file, fix=fix, dtype={"id": str})
    except ValueError as exc:  # a JSON payload of another shape
        raise InputError(f"predictions file {file}: {exc}; pass {PREDICTION_FORMATS}") from exc
    if name.endswith((".jsonl", ".jsonl.gz")):
        frame.attrs["first_line"] = 1  # where a record's line is known, its errors name it
    elif not name.endswith((".parquet", ".json", ".json.gz")):
        frame.attrs["first_line"] = 2  # after the header row
    missing = [c for c in ("id", "prediction") if c not in frame.columns]
    if missing:
        shown = ", ".join(repr(str(c)[:30]) for c in list(frame.columns)[:5])
        raise InputError(
            f"predictions file {file} has no column(s) {missing} (it has {len(frame.columns)} columns: {shown}"
            f"{', ...' if len(frame.columns) > 5 else ''}); pass {PREDICTION_FORMATS}"
        )
    return frame
