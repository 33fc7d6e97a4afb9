"""Classification datasets: loading, validation, normalisation and split derivation.

Every loader returns a *classification frame*: columns ``id, text_a, text_b, label`` (``text_b`` is None for
single-sentence tasks such as SST-2; ``label`` an integer index into the dataset's label names), with the label
names in ``frame.attrs["label_names"]``. The normalised parquet stores the label names in its metadata.

Sources: GLUE TSV files (SST-2, QNLI, MNLI, ...), Hugging Face parquet exports (the QNLI copy in the offline mirror;
label names from the file's ``huggingface`` metadata), JSON-lines files (MultiNLI's and Adversarial NLI's release
layout), and the hub (``snli``, ``glue/mnli``, ``glue/qnli``,
``glue/qqp``, ``glue/sst2``) for users with network. Unlabeled rows (label -1, as SNLI ships 785 of them in train, or
``-`` gold labels in its TSV) are dropped and counted, as everyone does; other bad records follow ``on_invalid``.

Evaluation sets with a breakdown (HANS's heuristics, the NLI Diagnostics' categories) keep it in an optional
``groups`` column: ``group_column`` names a column whose value is the record's group, ``group_columns`` names
membership columns (a record belongs to every group whose column is non-empty); a record's groups are joined by
:data:`GROUP_SEPARATOR`. ``label_aliases`` renames raw labels before they are indexed (Adversarial NLI's ``e/n/c``).
"""

from __future__ import annotations

import csv
import json
import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from spurious.core import readers
from spurious.core.data import hub
from spurious.core.data.squad import DataValidationError, resolve_mirror_path
from spurious.core.errors import rebuild_advice
from spurious.core.io import atomic_path

log = logging.getLogger(__name__)

CLASSIFICATION_COLUMNS = ("id", "text_a", "text_b", "label")
CLASSIFICATION_SCHEMA = pa.schema(
    [("id", pa.string()), ("text_a", pa.string()), ("text_b", pa.string()), ("label", pa.int64())]
)
# Input column layouts we recognise, most specific first: (text_a, text_b or None).
KNOWN_TEXT_COLUMNS: tuple[tuple[str, str | None], ...] = (
    ("premise", "hypothesis"),
    ("sentence1", "sentence2"),
    ("question1", "question2"),
    ("question", "sentence"),
    ("sentence", None),
    ("text", None),
)
KNOWN_LABEL_COLUMNS = ("label", "gold_label")
KNOWN_ID_COLUMNS = ("idx", "id", "pairID", "index")
UNLABELED = -1
GROUP_SEPARATOR = "|"


def _pick_columns(
    columns: Sequence[str], text_columns: Sequence[str] | None, label_column: str | None, source: str
) -> tuple[str, str | None, str]:
    if text_columns:
        if not 1 <= len(text_columns) <= 2:
            raise DataValidationError(f"{source}: text_columns must name one or two columns, got {list(text_columns)}")
        text_a, text_b = text_columns[0], (text_columns[1] if len(text_columns) == 2 else None)
    else:
        layout = next((c for c in KNOWN_TEXT_COLUMNS if c[0] in columns and (c[1] is None or c[1] in columns)), None)
        if layout is None:
            raise DataValidationError(
                f"{source}: no known text columns among {list(columns)}; set text_columns: [first, second] in the "
                "dataset's source config"
            )
        text_a, text_b = layout
    label = label_column or next((c for c in KNOWN_LABEL_COLUMNS if c in columns), None)
    missing = [c for c in (text_a, text_b, label) if c is not None and c not in columns]
    if label is None or missing:
        raise DataValidationError(
            f"{source}: columns {missing or ['label']} not found (has {list(columns)}); set text_columns / "
            "label_column in the dataset's source config"
        )
    return text_a, text_b, label


def _label_indices(values: pd.Series, label_names: Sequence[str] | None, source: str) -> tuple[np.ndarray, list[str]]:
    """Map raw labels (ints, numeric strings or label names) to indices; missing labels ('-', '', NaN, -1) -> -1."""
    raw = values.astype(object).where(values.notna(), None)
    as_text = [None if v is None else str(v).strip() for v in raw]
    unlabeled = {None, "", "-", str(UNLABELED)}
    present = sorted({v for v in as_text if v not in unlabeled})
    numeric = all(v.lstrip("-").isdigit() for v in present)
    if label_names is None:
        if not numeric:
            raise DataValidationError(
                f"{source}: string labels {present[:6]} need label_names (their order defines the indices) in the "
                "dataset's source config"
            )
        n = max((int(v) for v in present), default=-1) + 1
        label_names = [str(i) for i in range(n)]
    names = [str(n) for n in label_names]
    index = {name: i for i, name in enumerate(names)}
    out = np.empty(len(as_text), dtype=np.int64)
    for i, v in enumerate(as_text):
        if v in unlabeled:
            out[i] = UNLABELED
        elif v in index:
            out[i] = index[v]
        elif numeric and v.lstrip("-").isdigit():
            out[i] = int(v)  # range-checked by validation, naming the record
        else:
            raise DataValidationError(
                f"{source}: row {i} has label {v!r}, which is not one of the label names {names}; fix the record or "
                "the label_names in the config"
            )
    return out, names


def normalize(
    df: pd.DataFrame,
    *,
    source: str,
    text_columns: Sequence[str] | None = None,
    label_column: str | None = None,
    label_names: Sequence[str] | None = None,
    id_column: str | None = None,
    label_aliases: Mapping[str, str] | None = None,
    group_column: str | None = None,
    group_columns: Sequence[str] | None = None,
) -> pd.DataFrame:
    """Any tabular classification data -> a classification frame (ids as strings; row numbers when there is none).

    ``label_aliases``: raw label -> label name, applied first. ``group_column`` / ``group_columns``: the optional
    ``groups`` column (module docstring)."""
    text_a, text_b, label = _pick_columns(list(df.columns), text_columns, label_column, source)
    raw_labels = df[label]
    if label_aliases:
        aliases = {str(k): str(v) for k, v in label_aliases.items()}
        raw_labels = raw_labels.map(lambda v: aliases.get(str(v).strip(), v) if v is not None and v == v else v)
    labels, names = _label_indices(raw_labels, label_names, source)
    groups = _groups(df, group_column, group_columns, source)
    rare = {} if label_names is not None else _rare_labels(labels, names)
    id_col = id_column or next((c for c in KNOWN_ID_COLUMNS if c in df.columns), None)
    ids = df[id_col].astype(str).tolist() if id_col else [str(i) for i in range(len(df))]
    frame = pd.DataFrame(
        {
            "id": ids,
            "text_a": df[text_a].tolist(),
            "text_b": df[text_b].tolist() if text_b else [None] * len(df),
            "label": labels,
        }
    )
    if groups is not None:
        frame["groups"] = groups
    for name, rows in rare.items():
        # an inferred label set: a stray value (a binary TSV with one "2") would silently add a class
        log.warning(
            "%s: label %r appears in only %d of %d labeled rows (%s); if it is a mistake, fix those rows or declare "
            "label_names in the dataset's source config (then any other label is an error)",
            source, name, len(rows), int((labels != UNLABELED).sum()),
            ", ".join(f"row {i} (id {ids[i]})" for i in rows[:5]),
        )
    frame.attrs.update(label_names=names, source=source, is_pair=text_b is not None, rare_labels=sorted(rare))
    return frame


RARE_LABEL_SHARE = 0.01


def _rare_labels(labels: np.ndarray, names: Sequence[str]) -> dict[str, list[int]]:
    """Inferred labels seen in fewer than :data:`RARE_LABEL_SHARE` of the labeled rows -> their row numbers."""
    labeled = labels[labels != UNLABELED]
    rare = {}
    for index, name in enumerate(names):
        rows = np.flatnonzero(labels == index)
        if len(labeled) and 0 < len(rows) < RARE_LABEL_SHARE * len(labeled):
            rare[str(name)] = rows.tolist()
    return rare


def _groups(
    df: pd.DataFrame, group_column: str | None, group_columns: Sequence[str] | None, source: str
) -> list[str | None] | None:
    """The ``groups`` column: one column's value, or the names of the non-empty membership columns."""
    if group_column and group_columns:
        raise DataValidationError(f"{source}: set group_column or group_columns, not both")
    wanted = [group_column] if group_column else list(group_columns or [])
    missing = [c for c in wanted if c not in df.columns]
    if missing:
        raise DataValidationError(
            f"{source}: group column(s) {missing} not found (has {list(df.columns)}); fix group_column / "
            "group_columns in the dataset's source config"
        )
    if not wanted:
        return None

    def filled(value: Any) -> bool:
        return value is not None and value == value and str(value).strip() != ""

    if group_column:
        return [str(v).strip() if filled(v) else None for v in df[group_column]]
    rows = zip(*(df[c] for c in wanted), strict=True)
    return [GROUP_SEPARATOR.join(c for c, v in zip(wanted, row, strict=True) if filled(v)) or None for row in rows]


def load_glue_tsv(path: str | os.PathLike, **columns: Any) -> pd.DataFrame:
    """A GLUE-style TSV with a header row (plain or .gz). Quotes are literal text in GLUE files, never quoting."""
    path = Path(path)
    df = readers.read_csv(path, kind="GLUE-style TSV file", fix="pass tab-separated text with a header row (plain or "
                          ".gz); if the file is damaged, " + rebuild_advice(path), sep="\t", quoting=csv.QUOTE_NONE,
                          dtype=str, keep_default_na=False, on_bad_lines="error")
    return normalize(df, source=str(path), **columns)


def hf_label_names(schema_metadata: Mapping[bytes, bytes] | None, label_column: str) -> list[str] | None:
    """The ClassLabel names the HF parquet converter stores in a file's ``huggingface`` metadata, if any."""
    if not schema_metadata or b"huggingface" not in schema_metadata:
        return None
    features = json.loads(schema_metadata[b"huggingface"]).get("info", {}).get("features", {})
    feature = features.get(label_column) or {}
    names = feature.get("names")
    return list(names) if names else None


def load_jsonl(path: str | os.PathLike, **columns: Any) -> pd.DataFrame:
    """A JSON-lines file (plain or .gz), one record per line: MultiNLI's and Adversarial NLI's release layout."""
    path = Path(path)
    df = readers.read_json_lines(path, fix="pass one JSON object per line (plain or .gz); if the file is damaged, "
                                 + rebuild_advice(path), dtype=False)
    return normalize(df, source=str(path), **columns)


def load_hf_parquet(path: str | os.PathLike, **columns: Any) -> pd.DataFrame:
    """A Hugging Face parquet export (e.g. ``glue/qnli/validation/0000.parquet``); label names from its metadata."""
    path = Path(path)
    table = readers.read_parquet_table(path)
    df = table.to_pandas()
    if columns.get("label_names") is None:
        label = columns.get("label_column") or next((c for c in KNOWN_LABEL_COLUMNS if c in df.columns), "label")
        columns["label_names"] = hf_label_names(table.schema.metadata, label)
    return normalize(df, source=str(path), **columns)


def load_hub(
    name: str, config_name: str | None, split: str, revision: str | None = None, **columns: Any
) -> pd.DataFrame:
    """A split of a hub classification dataset at ``revision`` (network or cache needed), label names from its
    ClassLabel feature; what was loaded (the commit) in ``attrs["hub"]``
    (:func:`spurious.core.data.hub.load_hub_dataset`)."""
    ds, info = hub.load_hub_dataset(name, config_name, split, revision)
    if columns.get("label_names") is None:
        label = columns.get("label_column") or next((c for c in KNOWN_LABEL_COLUMNS if c in ds.features), "label")
        feature = ds.features.get(label)
        columns["label_names"] = list(feature.names) if hasattr(feature, "names") else None
    df = normalize(ds.to_pandas(), source=f"hub:{name}/{config_name or ''}:{split}", **columns)
    df.attrs["hub"] = {**info, "subset": None}
    return df


FILE_LOADERS = {"glue_tsv": load_glue_tsv, "hf_parquet": load_hf_parquet, "jsonl": load_jsonl}
SOURCE_COLUMN_KEYS = (
    "text_columns", "label_column", "label_names", "id_column", "label_aliases", "group_column", "group_columns",
)


def load_source(source: Mapping[str, Any], *, mirror: str | os.PathLike | None = None) -> pd.DataFrame:
    """Load one classification source as declared in the config (mirror file > local path > hub).

    ``format``: ``glue_tsv``, ``hf_parquet``, ``jsonl`` or ``hub``; optional ``text_columns``, ``label_column``,
    ``label_names``, ``id_column`` override the recognised layouts; ``label_aliases``, ``group_column`` and
    ``group_columns`` as in :func:`normalize`."""
    columns = {k: source.get(k) for k in SOURCE_COLUMN_KEYS}
    fmt = source["format"]
    path: Path | None = resolve_mirror_path(source["mirror_path"], mirror) if source.get("mirror_path") else None
    if path is None and source.get("path"):
        path = Path(source["path"])
        if not path.exists():
            raise FileNotFoundError(f"dataset file {path} does not exist")
    if path is not None and fmt in FILE_LOADERS:
        return FILE_LOADERS[fmt](path, **columns)
    hub_source = source.get("hub")
    if hub_source:
        return load_hub(hub_source["name"], hub_source.get("config"), hub_source["split"], hub_source.get("revision"),
                        **columns)
    raise FileNotFoundError(
        f"cannot load classification source {dict(source)}: no file in the mirror, no local path, and no hub fallback"
    )


def find_invalid_records(df: pd.DataFrame, n_labels: int, *, is_pair: bool) -> dict[str, str]:
    """id -> reason for every record breaking the schema: duplicate id, empty text (both segments for pair tasks),
    label outside ``[0, n_labels)``. Unlabeled rows must have been removed first."""
    reasons: dict[str, str] = {}
    seen: set[str] = set()
    for rec_id, a, b, label in zip(df["id"], df["text_a"], df["text_b"], df["label"], strict=True):
        if rec_id in seen:
            reason: str | None = "duplicate id"
        elif not isinstance(a, str) or not a.strip():
            reason = "empty text_a"
        elif is_pair and (not isinstance(b, str) or not b.strip()):
            reason = "empty text_b"
        elif not 0 <= int(label) < n_labels:
            reason = f"label {int(label)} outside [0, {n_labels})"
        else:
            reason = None
        seen.add(rec_id)
        if reason is not None:
            reasons.setdefault(rec_id, reason)
    return reasons


def validate_records(
    df: pd.DataFrame, *, source: str, on_invalid: str = "error"
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Drop (and count) unlabeled rows, then apply ``on_invalid`` (``error`` or ``drop``) to the rest."""
    if on_invalid not in ("error", "drop"):
        raise ValueError(f"on_invalid must be 'error' or 'drop', got {on_invalid!r}")
    if df.empty:
        raise DataValidationError(f"{source}: holds no records; check that the file is the right split")
    attrs = dict(df.attrs)
    unlabeled = df["label"].to_numpy() == UNLABELED
    if unlabeled.any():
        log.info("%s: dropping %d unlabeled rows (label -1)", source, int(unlabeled.sum()))
    kept = df[~unlabeled]
    reasons = find_invalid_records(kept, len(attrs["label_names"]), is_pair=bool(attrs.get("is_pair")))
    summary: dict[str, Any] = {
        "n_input": len(df),
        "n_unlabeled": int(unlabeled.sum()),
        "n_dropped": 0,
        "dropped_ids": [],
    }
    if reasons:
        first = ", ".join(f"{i} ({r})" for i, r in list(reasons.items())[:5])
        if on_invalid == "error":
            raise DataValidationError(
                f"{source}: {len(reasons)} of {len(kept)} labeled records are invalid; first: {first}. Fix the "
                "records, or set on_invalid: drop for this dataset in the config to drop them (counted in the "
                "output's metadata)."
            )
        log.warning("%s: dropping %d of %d invalid records; first: %s", source, len(reasons), len(kept), first)
        bad = [i in reasons and reasons[i] != "duplicate id" for i in kept["id"]]
        kept = kept[~np.array(bad, dtype=bool)]
        kept = kept[~kept["id"].duplicated(keep="first")]
        summary.update(n_dropped=len(df) - summary["n_unlabeled"] - len(kept), dropped_ids=list(reasons)[:100])
    kept = kept.reset_index(drop=True)
    kept.attrs.update(attrs)
    return kept, summary


def split_random(df: pd.DataFrame, *, validation_fraction: float, seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Derive (train, validation) with a seed, stratified by label so both keep the label distribution.

    Per label, ``ceil(validation_fraction * count)`` records go to validation; each part keeps the input order."""
    if not 0.0 < validation_fraction < 1.0:
        raise ValueError(f"validation_fraction must lie in (0, 1), got {validation_fraction}")
    rng = np.random.default_rng(seed)
    labels = df["label"].to_numpy()
    is_valid = np.zeros(len(df), dtype=bool)
    for label in np.unique(labels):
        rows = np.flatnonzero(labels == label)
        n_valid = int(np.ceil(validation_fraction * len(rows)))
        is_valid[rng.choice(rows, size=n_valid, replace=False)] = True
    train, valid = df[~is_valid].reset_index(drop=True), df[is_valid].reset_index(drop=True)
    train.attrs.update(df.attrs)
    valid.attrs.update(df.attrs)
    return train, valid


def split_grouped(
    df: pd.DataFrame, *, validation_fraction: float, seed: int, column: str = "text_a"
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Derive (train, validation) with a seed so that records sharing ``column`` never straddle the two parts.

    For pair tasks whose first segment repeats with different labels (a QNLI question with the sentence that answers
    it and one that does not; an MNLI premise with its three hypotheses), a random split puts one pair of a question
    in train and its twin in validation: a model that memorises the question then predicts the *other* label on the
    validation twin, which pulls accuracy below chance. Groups are taken in a seeded order until validation holds at
    least ``ceil(validation_fraction * len(df))`` records (not stratified by label); each part keeps the input order.
    """
    if not 0.0 < validation_fraction < 1.0:
        raise ValueError(f"validation_fraction must lie in (0, 1), got {validation_fraction}")
    if column not in df.columns:
        raise ValueError(
            f"split_grouped: no column {column!r} to group by (columns: {', '.join(map(str, df.columns))})"
        )
    codes, groups = pd.factorize(df[column].astype(str), sort=False)
    sizes = np.bincount(codes, minlength=len(groups))
    order = np.random.default_rng(seed).permutation(len(groups))
    wanted = int(np.ceil(validation_fraction * len(df)))
    taken = np.cumsum(sizes[order])
    n_groups = int(np.searchsorted(taken, wanted) + 1)  # the first prefix of groups that reaches `wanted` records
    is_valid = np.isin(codes, order[:n_groups])
    if is_valid.all() or not is_valid.any():
        raise ValueError(
            f"split_grouped: {len(groups)} groups of {column!r} cannot be split {1 - validation_fraction:.2f} / "
            f"{validation_fraction:.2f}; use by: random"
        )
    train, valid = df[~is_valid].reset_index(drop=True), df[is_valid].reset_index(drop=True)
    train.attrs.update(df.attrs)
    valid.attrs.update(df.attrs)
    return train, valid


def write_parquet(df: pd.DataFrame, path: str | os.PathLike, metadata: Mapping[str, Any] | None = None) -> None:
    """Write a classification frame; the label names always go into the metadata (``spurious`` key)."""
    meta = {"task": "classification", "label_names": list(df.attrs["label_names"]), **dict(metadata or {})}
    columns = {
        "id": pa.array(df["id"].astype(str).tolist(), pa.string()),
        "text_a": pa.array(df["text_a"].tolist(), pa.string()),
        "text_b": pa.array([None if b is None or b != b else str(b) for b in df["text_b"]], pa.string()),
        "label": pa.array(df["label"].astype("int64").tolist(), pa.int64()),
    }
    schema = CLASSIFICATION_SCHEMA
    if "groups" in df.columns:  # an evaluation set's breakdown (module docstring)
        columns["groups"] = pa.array([None if g is None or g != g else str(g) for g in df["groups"]], pa.string())
        schema = schema.append(pa.field("groups", pa.string()))
    table = pa.table(columns, schema=schema).replace_schema_metadata({b"spurious": json.dumps(meta).encode()})
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp)


def read_parquet(path: str | os.PathLike) -> pd.DataFrame:
    """Read a normalised classification parquet; ``attrs`` carries ``label_names``, ``is_pair`` and the metadata."""
    table = readers.read_parquet_table(path)
    missing = [c for c in CLASSIFICATION_COLUMNS if c not in table.column_names]
    meta = readers.metadata_json(table.schema.metadata, b"spurious", path)
    if missing or "label_names" not in meta:
        raise DataValidationError(
            f"{path}: not a normalised classification parquet (missing columns {missing} or label names); "
            "produce it with the workflow's download rule"
        )
    df = table.to_pandas()
    df.attrs.update(label_names=list(meta["label_names"]), is_pair=bool(df["text_b"].notna().any()), metadata=meta)
    return df
