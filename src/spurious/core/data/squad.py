"""QA dataset loading, validation, normalisation and split derivation.

Every loader returns a *QA frame* (see ``docs/CONTRACTS.md``): columns ``id, title, context, question, answers``
where each ``answers`` cell is ``{"text": [...], "answer_start": [...]}``.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from spurious.core import readers
from spurious.core.data import hub
from spurious.core.io import atomic_path

log = logging.getLogger(__name__)

QA_COLUMNS = ("id", "title", "context", "question", "answers")
QA_SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("title", pa.string()),
        ("context", pa.string()),
        ("question", pa.string()),
        (
            "answers",
            pa.struct([("text", pa.list_(pa.string())), ("answer_start", pa.list_(pa.int64()))]),
        ),
    ]
)
MIRROR_ENV = "SPURIOUS_DATA_MIRROR"


class DataValidationError(ValueError):
    """A dataset file holds records that break the QA schema."""


def read_json_file(path: str | os.PathLike) -> Any:
    """One JSON document (plain or gzip); a missing, empty, truncated or non-JSON file is a
    :class:`DataValidationError` naming the file and the fix."""
    path = Path(path)
    if not path.is_file():
        raise DataValidationError(f"{path}: no such file; check the path (or the mirror, ${MIRROR_ENV})")
    if path.stat().st_size == 0:
        raise DataValidationError(f"{path}: the file is empty; download it again")
    return readers.read_json(path, fix="download it again, or fix its format in the config")


def _answers(answers: Any, where: str) -> dict[str, list]:
    """``answers`` as ``{text: [...], answer_start: [...]}`` (flat records) or a list of ``{text, answer_start}``
    (SQuAD JSON); anything else is an error naming the record."""
    if isinstance(answers, Mapping) and "text" in answers and "answer_start" in answers:
        text, start = answers["text"], answers["answer_start"]
        if isinstance(text, str) or isinstance(start, (str, int)):
            raise DataValidationError(
                f"{where}: answers.text and answers.answer_start must be lists, got {text!r}, {start!r}"
            )
        return {"text": [str(t) for t in text], "answer_start": [int(a) for a in start]}
    if isinstance(answers, list) and all(
        isinstance(a, Mapping) and "text" in a and "answer_start" in a for a in answers
    ):
        return {"text": [str(a["text"]) for a in answers], "answer_start": [int(a["answer_start"]) for a in answers]}
    raise DataValidationError(
        f"{where}: answers is {type(answers).__name__} {str(answers)[:60]!r}; it must be "
        "{{text: [...], answer_start: [...]}} or a list of {{text, answer_start}}"
    )


def _field(record: Any, key: str, where: str) -> Any:
    if not isinstance(record, Mapping):
        raise DataValidationError(f"{where}: expected an object, got {type(record).__name__}")
    if key not in record:
        raise DataValidationError(f"{where}: no field {key!r} (has {sorted(record)[:8]}); fix the record")
    return record[key]


def load_squad_json(path: str | os.PathLike) -> pd.DataFrame:
    """Read the official SQuAD v1.1 JSON (``{"version", "data": [articles]}``), plain or gzip. A malformed file or
    record is a :class:`DataValidationError` naming the file, the record and the fix."""
    path = Path(path)
    payload = read_json_file(path)
    if not isinstance(payload, dict) or not isinstance(payload.get("data"), list):
        raise DataValidationError(
            f"{path}: not an official SQuAD JSON file (expected an object with a 'data' list of articles); "
            "for flat records use format 'squad_flat_json'"
        )
    rows = []
    for a, article in enumerate(payload["data"]):
        title = article.get("title", "") if isinstance(article, Mapping) else ""
        for p, paragraph in enumerate(_field(article, "paragraphs", f"{path}: article {a}")):
            where = f"{path}: article {a} ({title!r}), paragraph {p}"
            context = _field(paragraph, "context", where)
            for q, qa in enumerate(_field(paragraph, "qas", where)):
                qwhere = f"{where}, question {q}"
                qid = str(_field(qa, "id", qwhere))
                qwhere = f"{qwhere} (id {qid})"
                rows.append(
                    {
                        "id": qid,
                        "title": title,
                        "context": context,
                        "question": _field(qa, "question", qwhere),
                        "answers": _answers(qa.get("answers", []), qwhere),
                    }
                )
    return pd.DataFrame(rows, columns=list(QA_COLUMNS))


def load_flat_json(path: str | os.PathLike) -> pd.DataFrame:
    """Read a JSON list of flat SQuAD-like records (``id, context, question, answers{text, answer_start}``)."""
    path = Path(path)
    records = read_json_file(path)
    if isinstance(records, dict) and "data" in records:
        records = records["data"]
    if not isinstance(records, list):
        raise DataValidationError(f"{path}: expected a JSON list of records with id/context/question/answers")
    rows = []
    for i, rec in enumerate(records):
        where = f"{path}: record {i}"
        rec_id = str(_field(rec, "id", where))
        where = f"{where} (id {rec_id})"
        rows.append(
            {
                "id": rec_id,
                "title": str(rec.get("title") or ""),
                "context": _field(rec, "context", where),
                "question": _field(rec, "question", where),
                "answers": _answers(_field(rec, "answers", where), where),
            }
        )
    return pd.DataFrame(rows, columns=list(QA_COLUMNS))


def mrqa_to_squad(df: pd.DataFrame, subset: str | None = None) -> pd.DataFrame:
    """Convert MRQA records (HF ``mrqa-workshop/mrqa``: ``subset, qid, context, question, detected_answers{text,
    char_spans{start, end}}``) to the SQuAD layout, keeping one MRQA ``subset`` (e.g. ``NaturalQuestionsShort``,
    ``TriviaQA-web``). Each detected answer contributes its text and its first character span, as MRQA's own
    SQuAD-format conversions do."""
    if subset is not None:
        df = df[df["subset"] == subset]
        if df.empty:
            raise DataValidationError(f"MRQA data has no records of subset {subset!r}")
    rows = []
    for rec in df.itertuples(index=False):
        detected = rec.detected_answers
        spans = detected["char_spans"]
        # a list of {start: [...], end: [...]} per answer, or (columnar) {start: [[...], ...], end: [...]}
        if isinstance(spans, Mapping):
            starts = [int(list(s)[0]) for s in spans["start"]]
        else:
            starts = [int(list(span["start"])[0]) for span in spans]
        rows.append(
            {
                "id": str(rec.qid),
                "title": str(getattr(rec, "subset", "")),
                "context": rec.context,
                "question": rec.question,
                "answers": {
                    "text": [str(t) for t in detected["text"]],
                    "answer_start": starts,
                },
            }
        )
    return pd.DataFrame(rows, columns=list(QA_COLUMNS))


def load_hub(
    name: str, config_name: str | None, split: str, subset: str | None = None, revision: str | None = None
) -> pd.DataFrame:
    """Load a split of a Hugging Face hub QA dataset at ``revision`` (needs network unless cached). SQuAD-layout
    datasets load as they are; MRQA-layout ones (``detected_answers``) are converted, keeping the MRQA ``subset``
    given. What was loaded (the commit) is in ``attrs["hub"]`` (:func:`spurious.core.data.hub.load_hub_dataset`)."""
    ds, info = hub.load_hub_dataset(name, config_name, split, revision)
    df = _hub_frame(ds.to_pandas(), name, subset)
    df.attrs["hub"] = {**info, "subset": subset}
    return df


def _hub_frame(df: pd.DataFrame, name: str, subset: str | None) -> pd.DataFrame:
    if "detected_answers" in df:
        return mrqa_to_squad(df, subset)
    if subset is not None:
        raise ValueError(f"hub dataset {name}: 'subset' applies to MRQA-layout datasets only")
    if "title" not in df:
        df["title"] = ""
    df["answers"] = [
        {"text": list(a["text"]), "answer_start": [int(s) for s in a["answer_start"]]} for a in df["answers"]
    ]
    df["id"] = df["id"].astype(str)
    return df[list(QA_COLUMNS)]


@dataclass(frozen=True)
class ValidationReport:
    n_records: int
    invalid_ids: list[str]
    reasons: dict[str, str]

    @property
    def n_invalid(self) -> int:
        return len(self.invalid_ids)


def find_invalid_records(df: pd.DataFrame) -> ValidationReport:
    """Check every record: non-empty context and question, at least one answer, unique ids, and each
    ``answer_start`` pointing at its answer text."""
    reasons: dict[str, str] = {}
    seen: set[str] = set()
    for rec_id, context, question, answers in zip(
        df["id"], df["context"], df["question"], df["answers"], strict=True
    ):
        reason = None
        if rec_id in seen:
            reason = "duplicate id"
        elif not isinstance(context, str) or not context.strip():
            reason = "empty context"
        elif not isinstance(question, str) or not question.strip():
            reason = "empty question"
        else:
            texts, starts = list(answers["text"]), list(answers["answer_start"])
            if len(texts) == 0:
                reason = "no answers"
            elif len(texts) != len(starts):
                reason = "answers.text and answers.answer_start differ in length"
            else:
                for k, (text, start) in enumerate(zip(texts, starts, strict=True)):
                    if not text or context[int(start) : int(start) + len(text)] != text:
                        reason = f"answer {k} ({text!r}) not found at answer_start {start}"
                        break
        seen.add(rec_id)
        if reason is not None:
            reasons[rec_id] = reason
    return ValidationReport(len(df), list(reasons), reasons)


def validate_records(
    df: pd.DataFrame, *, source: str, on_invalid: str = "error"
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Apply the ``on_invalid`` policy (``error`` or ``drop``); return the kept frame and a validation summary."""
    if on_invalid not in ("error", "drop"):
        raise ValueError(f"on_invalid must be 'error' or 'drop', got {on_invalid!r}")
    if df.empty:
        raise DataValidationError(f"{source}: holds no questions; check that the file is the right split")
    report = find_invalid_records(df)
    summary = {"n_input": report.n_records, "n_dropped": 0, "dropped_ids": []}
    if report.n_invalid == 0:
        return df.reset_index(drop=True), summary
    first = ", ".join(f"{i} ({report.reasons[i]})" for i in report.invalid_ids[:5])
    if on_invalid == "error":
        raise DataValidationError(
            f"{source}: {report.n_invalid} of {report.n_records} records are invalid; first: {first}. "
            "Fix the records, or set on_invalid: drop for this dataset in the config to drop them (counted in "
            "the output's metadata)."
        )
    log.warning("%s: dropping %d of %d invalid records; first: %s", source, report.n_invalid, report.n_records, first)
    bad = set(report.invalid_ids)
    # Drop only the later duplicates, keep the first record of an id.
    keep = [not (i in bad and (report.reasons[i] != "duplicate id")) for i in df["id"]]
    kept = df[keep]
    kept = kept[~kept["id"].duplicated(keep="first")]
    summary.update(n_dropped=report.n_records - len(kept), dropped_ids=report.invalid_ids[:100])
    return kept.reset_index(drop=True), summary


def split_by_title(
    df: pd.DataFrame, *, validation_fraction: float, seed: int
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Derive (train, validation) from one split, by article title: no article lies on both sides.

    Titles are shuffled with ``seed`` and assigned to validation until it holds at least
    ``validation_fraction`` of the titles (rounded up)."""
    if not 0.0 < validation_fraction < 1.0:
        raise ValueError(f"validation_fraction must lie in (0, 1), got {validation_fraction}")
    titles = np.array(sorted(df["title"].unique()))
    if len(titles) < 2:
        raise ValueError("deriving splits by title needs at least two distinct titles")
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(titles))
    n_valid = max(1, int(np.ceil(validation_fraction * len(titles))))
    valid_titles = set(titles[order[:n_valid]])
    is_valid = df["title"].isin(valid_titles)
    return df[~is_valid].reset_index(drop=True), df[is_valid].reset_index(drop=True)


def sample_questions(df: pd.DataFrame, *, max_examples: int, seed: int) -> pd.DataFrame:
    """A seeded subset of at most ``max_examples`` questions, in the input order (the whole frame if smaller)."""
    if max_examples < 1:
        raise ValueError(f"max_examples must be positive, got {max_examples}")
    if len(df) <= max_examples:
        return df.reset_index(drop=True)
    keep = np.sort(np.random.default_rng(seed).choice(len(df), size=max_examples, replace=False))
    return df.iloc[keep].reset_index(drop=True)


def resolve_mirror_path(relative: str, mirror: str | os.PathLike | None = None) -> Path | None:
    """Return ``$SPURIOUS_DATA_MIRROR/relative`` if the mirror is set and holds the file."""
    root = mirror if mirror is not None else os.environ.get(MIRROR_ENV)
    if not root:
        return None
    candidate = Path(root) / relative
    return candidate if candidate.exists() else None


def load_source(source: Mapping[str, Any], *, mirror: str | os.PathLike | None = None) -> pd.DataFrame:
    """Load one dataset source as declared in the config.

    ``source`` keys: ``format`` (``squad_json``, ``squad_flat_json``, ``hub``), and either ``mirror_path``
    (relative to the mirror; preferred when present) / ``path`` (a local file), or ``hub`` (name, config, split).
    """
    fmt = source["format"]
    path: Path | None = None
    if source.get("mirror_path"):
        path = resolve_mirror_path(source["mirror_path"], mirror)
    if path is None and source.get("path"):
        path = Path(source["path"])
        if not path.exists():
            raise FileNotFoundError(f"dataset file {path} does not exist")
    if path is not None and fmt in ("squad_json", "squad_flat_json"):
        df = load_squad_json(path) if fmt == "squad_json" else load_flat_json(path)
        df.attrs["source"] = str(path)
        return df
    hub_source = source.get("hub")
    if hub_source:
        df = load_hub(hub_source["name"], hub_source.get("config"), hub_source["split"], hub_source.get("subset"),
                      hub_source.get("revision"))
        df.attrs["source"] = f"hub:{hub_source['name']}/{hub_source.get('config') or ''}:{hub_source['split']}"
        return df
    raise FileNotFoundError(
        f"cannot load dataset source {dict(source)}: no file in the mirror ({MIRROR_ENV}="
        f"{os.environ.get(MIRROR_ENV)!r}), no local path, and no hub fallback"
    )


def to_arrow(df: pd.DataFrame) -> pa.Table:
    answers = [
        {"text": [str(t) for t in a["text"]], "answer_start": [int(s) for s in a["answer_start"]]}
        for a in df["answers"]
    ]
    return pa.table(
        {
            "id": pa.array(df["id"].astype(str).tolist(), pa.string()),
            "title": pa.array(df["title"].fillna("").astype(str).tolist(), pa.string()),
            "context": pa.array(df["context"].tolist(), pa.string()),
            "question": pa.array(df["question"].tolist(), pa.string()),
            "answers": pa.array(answers, QA_SCHEMA.field("answers").type),
        },
        schema=QA_SCHEMA,
    )


def write_qa_parquet(df: pd.DataFrame, path: str | os.PathLike, metadata: Mapping[str, Any] | None = None) -> None:
    table = to_arrow(df)
    if metadata is not None:
        table = table.replace_schema_metadata({b"spurious": json.dumps(dict(metadata)).encode()})
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp)


def read_qa_parquet(path: str | os.PathLike) -> pd.DataFrame:
    """Read a normalised QA parquet; ``answers`` cells become ``{"text": list, "answer_start": list}``."""
    table = readers.read_parquet_table(path)
    missing = [c for c in QA_COLUMNS if c not in table.column_names]
    if missing:
        raise DataValidationError(f"{path}: not a normalised QA parquet, missing columns {missing}")
    df = table.to_pandas()
    df["answers"] = [
        {"text": list(a["text"]), "answer_start": [int(s) for s in a["answer_start"]]} for a in df["answers"]
    ]
    return df


def validation_curves(inputs: Mapping[str, Any]) -> dict[str, pd.DataFrame]:
    """The extra validation sets among a training job's inputs: ``curve__<dataset>__<split>`` → ``"<dataset>/<split>"``.

    Their validation loss is logged during training beside the main one (the paper's Figs. 8-9). ``inputs`` is a
    mapping or Snakemake's input Namedlist (whose ``in`` tests values, hence ``keys()``).
    """
    return {
        key.removeprefix("curve__").replace("__", "/"): read_qa_parquet(inputs[key])
        for key in inputs.keys()  # noqa: SIM118
        if key.startswith("curve__")
    }
