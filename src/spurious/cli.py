"""The ``spurious`` command line: annotate heuristics, evaluate predictions, measure prediction bias, report.

Subcommands::

    spurious annotate DATA.json OUT.parquet [--heuristics h1,h2] [--compat isbiased] [--threads N]
    spurious evaluate DATA.json PREDICTIONS.json [--per-example OUT.parquet]
    spurious bias DATA.json PREDICTIONS.json [--heuristics ...] [--sample-size 800] [--iterations 100] [--seed 0]
                  [--with-replacement] [--compat isbiased] [--json OUT.json]
    spurious report RESULT.json [...] --out-dir DIR [--paper-run BERT-Base]
    spurious lexical-test TRAIN TEST PREDICTIONS [--top-k 50] [--counting types|tokens] [--stop-words nltk|none]
                  [--text-columns A[,B]] [--label-column C] [--label-names n0,n1,...] [--json OUT.json]

``DATA.json`` is the official SQuAD v1.1 JSON (an object with a ``data`` list of articles) or a JSON list of flat
records (``id, context, question, answers{text, answer_start}``), plain or ``.gz``. ``PREDICTIONS.json`` is the
official prediction format, an object ``{question id: answer text}``.

``lexical-test`` runs the model-bias test of "Stubborn Lexical Bias" (Serrano et al. 2023) on any classifier's
predictions: TRAIN and TEST are classification data (the workflow's normalised parquet, a Hugging Face parquet export
or a GLUE TSV with a header, plain or .gz), PREDICTIONS a parquet/CSV/TSV/JSON-lines file with ``id`` and
``prediction`` (a label id or name) columns covering every TEST record.

User errors (a missing or malformed file, an unknown heuristic, predictions missing ids, invalid records) print one
message naming the file and the fix on stderr and exit with status 2, without a traceback.
"""

from __future__ import annotations

import argparse
import gzip
import json
import logging
import math
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from spurious.core.progress import available_cores

log = logging.getLogger("spurious.cli")

EXIT_USAGE = 2

# The heuristic names (spurious.thinktwice.heuristics.HEURISTICS); repeated here so that parsing arguments and the error messages
# do not import the heavy module (spaCy, scikit-learn). A test checks that both agree.
HEURISTIC_NAMES: tuple[str, ...] = ("word-dist", "sim-word", "ans-pos", "cos-sim", "ans-len", "sim-ents", "subj-pos")
COMPAT_CHOICES: tuple[str, ...] = ("isbiased",)


class CLIError(Exception):
    """A user error: reported as one line on stderr, exit status 2."""


# ----------------------------------------------------------------------------------------------------------------------
# input


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


def _annotate_frame(frame: pd.DataFrame, args: argparse.Namespace, heuristics: list[str]) -> pd.DataFrame:
    from spurious.thinktwice.heuristics import compute_heuristics

    tfidf_contexts = None
    if "cos-sim" in heuristics and args.tfidf_reference:
        reference, _ = load_data(args.tfidf_reference, on_invalid="drop")
        tfidf_contexts = reference["context"].tolist()  # one per question, as the authors fit on SQuAD-train rows
    try:
        return compute_heuristics(
            frame,
            heuristics,
            compat=args.compat,
            variants=parse_variants(args.variant) or None,
            tfidf_contexts=tfidf_contexts if tfidf_contexts is not None else frame["context"].tolist(),
            threads=args.threads or available_cores(),
        )
    except ValueError as exc:
        msg = str(exc)
        if msg.startswith(("unknown heuristic", "no heuristic", "unknown compat", "variants")):  # argument errors
            raise CLIError(msg) from exc
        raise


def _load_heuristics_parquet(path: str, frame: pd.DataFrame, heuristics: list[str]) -> pd.DataFrame:
    p = Path(path)
    if not p.exists():
        raise CLIError(f"heuristics file {p} does not exist; create it with `spurious annotate`")
    table = pd.read_parquet(p)
    missing_cols = [c for c in ["id", *heuristics] if c not in table.columns]
    if missing_cols:
        raise CLIError(
            f"heuristics file {p} lacks column(s) {', '.join(missing_cols)}; re-run `spurious annotate` "
            "with those heuristics or drop them from --heuristics"
        )
    table = table.assign(id=table["id"].astype(str)).drop_duplicates("id").set_index("id")
    ids = frame["id"].astype(str)
    absent = [i for i in ids if i not in table.index]
    if absent:
        raise CLIError(
            f"heuristics file {p} has no row for {len(absent)} question(s) of the data file (first ids: "
            f"{', '.join(absent[:5])}); annotate this data file"
        )
    return table.loc[ids.tolist(), heuristics].reset_index()


# ----------------------------------------------------------------------------------------------------------------------
# commands


def cmd_annotate(args: argparse.Namespace) -> int:
    from spurious.core.io import write_parquet

    heuristics = parse_heuristics(args.heuristics)
    frame, info = load_data(args.data, on_invalid=args.on_invalid)
    values = _annotate_frame(frame, args, heuristics)
    metadata = {
        "source": str(args.data),
        "heuristics": heuristics,
        "compat": args.compat,
        "variants": parse_variants(args.variant),
        "tfidf_reference": str(args.tfidf_reference) if args.tfidf_reference else "self",
        "validation": {k: info[k] for k in ("n_input", "n_dropped") if k in info},
    }
    write_parquet(values, args.out, metadata=metadata)
    print(f"wrote {len(values)} rows x {len(heuristics)} heuristics to {args.out}", file=sys.stderr)
    return 0


def _warn_version(info: dict[str, Any]) -> None:
    version = info.get("version")
    if info.get("format") == "squad_json" and version is not None and version != "1.1":
        print(f"Evaluation expects v-1.1, but got dataset with v-{version}", file=sys.stderr)


def cmd_evaluate(args: argparse.Namespace) -> int:
    from spurious.core.metrics import evaluate, score_predictions

    frame, info = load_data(args.data, on_invalid=args.on_invalid)
    _warn_version(info)
    predictions = load_predictions(args.predictions)
    _check_predictions(frame, predictions, str(args.predictions), args.allow_missing)
    scores = evaluate(frame, predictions, allow_missing=args.allow_missing)
    if args.per_example:
        from spurious.core.io import write_parquet

        per_example = score_predictions(frame, predictions, allow_missing=args.allow_missing)
        write_parquet(
            per_example,
            args.per_example,
            metadata={"data": str(args.data), "predictions": str(args.predictions), **scores},
        )
    print(json.dumps({"exact_match": scores["exact_match"], "f1": scores["f1"]}))
    return 0


BIAS_TABLE_COLUMNS = (
    "heuristic",
    "found",
    "threshold",
    "prediction_bias",
    "distance_f1",
    "size_low",
    "size_high",
    "biased_group",
    "n_dropped_negative",
    "reason",
)


def bias_summary(results: Sequence[dict[str, Any]]) -> pd.DataFrame:
    """One row per heuristic: threshold, prediction bias (EM), F1 distance, group sizes, biased group."""
    rows = []
    for r in results:
        groups = r.get("groups") or {}
        rows.append(
            {
                "heuristic": r["heuristic"],
                "found": bool(r.get("found")),
                "threshold": r.get("threshold"),
                "prediction_bias": round(float(r.get("prediction_bias") or 0.0), 2),
                "distance_f1": None if r.get("distance_f1") is None else round(float(r["distance_f1"]), 2),
                "size_low": (groups.get("low") or {}).get("size"),
                "size_high": (groups.get("high") or {}).get("size"),
                "biased_group": r.get("biased_group"),
                "n_dropped_negative": r.get("n_dropped_negative"),
                "reason": r.get("reason"),
            }
        )
    return pd.DataFrame(rows, columns=list(BIAS_TABLE_COLUMNS))


def _format_threshold(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{float(value):.6g}"


def cmd_bias(args: argparse.Namespace) -> int:
    from spurious.core.metrics import score_predictions
    from spurious.thinktwice.bias import NOT_FOUND_REASONS, InsufficientRowsError, search_threshold

    heuristics = parse_heuristics(args.heuristics)
    if args.sample_size < 1 or args.iterations < 1:
        raise CLIError("--sample-size and --iterations must be positive integers")
    if args.seed < 0:
        raise CLIError("--seed must be a non-negative integer")
    frame, info = load_data(args.data, on_invalid=args.on_invalid)
    _warn_version(info)
    predictions = load_predictions(args.predictions)
    _check_predictions(frame, predictions, str(args.predictions), args.allow_missing)
    if args.heuristics_file:
        values = _load_heuristics_parquet(args.heuristics_file, frame, heuristics)
    else:
        values = _annotate_frame(frame, args, heuristics)
    scores = score_predictions(frame, predictions, allow_missing=args.allow_missing)

    model = args.model or Path(args.predictions).name.split(".")[0]
    dataset = args.dataset or Path(args.data).name.split(".")[0]
    results = []
    for h in heuristics:
        try:
            result = search_threshold(
                values[h].to_numpy(),
                scores["em"].to_numpy(),
                scores["f1"].to_numpy(),
                heuristic=h,
                sample_size=args.sample_size,
                iterations=args.iterations,
                seed=args.seed,
                with_replacement=args.with_replacement,
                allow_too_few_rows=args.allow_too_few_rows,
            )
        except InsufficientRowsError as exc:
            raise CLIError(f"{args.data}: {exc}") from exc
        results.append({"model": model, "dataset": dataset, **result})
    not_found = [r for r in results if not r["found"]]
    for r in not_found:
        print(f"spurious bias: warning: {r['heuristic']}: no threshold ({NOT_FOUND_REASONS[r['reason']]})", file=sys.stderr)

    if args.json:
        from spurious.core.io import write_json

        write_json(results, args.json)
    table = bias_summary(results)
    em, f1 = float(scores["em"].mean()), float(scores["f1"].mean())
    print(f"# {dataset}: {len(frame)} questions; predictions {model}: EM {em:.2f}, F1 {f1:.2f}")
    print(
        f"# bootstrap per segment: {args.iterations} draws of {args.sample_size} examples "
        f"{'with' if args.with_replacement else 'without'} replacement, seed {args.seed}; "
        "prediction_bias = EM-interval distance at the best threshold (0 = no threshold found)"
    )
    shown = table.assign(
        threshold=[_format_threshold(t) for t in table["threshold"]],
        distance_f1=["-" if v is None or pd.isna(v) else f"{v:.2f}" for v in table["distance_f1"]],
        prediction_bias=[f"{v:.2f}" for v in table["prediction_bias"]],
        size_low=["-" if v is None or pd.isna(v) else str(int(v)) for v in table["size_low"]],
        size_high=["-" if v is None or pd.isna(v) else str(int(v)) for v in table["size_high"]],
        biased_group=["-" if v is None or pd.isna(v) else v for v in table["biased_group"]],
        reason=["-" if v is None or pd.isna(v) else v for v in table["reason"]],
    )
    print(shown.to_string(index=False))
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from spurious.thinktwice import report

    for p in args.results:
        if not Path(p).exists():
            raise CLIError(f"results file {p} does not exist; produce it with `spurious bias --json`")
    try:
        results = report.load_results(args.results)
    except json.JSONDecodeError as exc:
        raise CLIError(f"a results file is not valid JSON ({exc})") from exc
    out = Path(args.out_dir)
    try:
        bias = report.bias_table(results, paper_run=args.paper_run)
        thresholds = report.thresholds_table(results, paper_run=args.paper_run)
    except ValueError as exc:
        raise CLIError(f"{exc} (in {', '.join(map(str, args.results))})") from exc
    report.write_table(bias, out / "prediction_bias.csv", out / "prediction_bias.md")
    report.write_table(thresholds, out / "thresholds.csv", out / "thresholds.md")
    report.figure2(results, out / "figure2.png", out / "figure2.svg")
    print(report.format_markdown(bias, bias.attrs.get("caption")))
    return 0


# ----------------------------------------------------------------------------------------------------------------------
# parser


# ----------------------------------------------------------------------------------------------------------------------
# lexical-test


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


def cmd_lexical_test(args: argparse.Namespace) -> int:
    from spurious.lexical import features as lexical

    train = load_classification_file(args.train, args)
    test = load_classification_file(args.test, args)
    if list(train.attrs["label_names"]) != list(test.attrs["label_names"]):
        raise CLIError(
            f"{args.train} and {args.test} have different labels ({train.attrs['label_names']} vs "
            f"{test.attrs['label_names']}); pass --label-names to fix their order"
        )
    names = list(train.attrs["label_names"])
    table, top = lexical.select_features(train, counting=args.counting, top_k=args.top_k, stop_words=args.stop_words)
    labels = test["label"].to_numpy()
    try:
        correct = lexical.correct_predictions(
            load_classification_predictions(args.predictions), test["id"].astype(str).tolist(), labels, names,
            source=str(args.predictions),
        )
    except ValueError as exc:
        raise CLIError(str(exc)) from exc
    result = lexical.model_bias_test(table, top, test["text_a"], test["text_b"], labels, correct, counting=args.counting)
    result.update(train=str(args.train), test=str(args.test), predictions=str(args.predictions),
                  counting=args.counting, top_k=args.top_k, stop_words=args.stop_words)
    if args.json:
        from spurious.core.io import write_json

        write_json(dict(result, features=top.to_dict(orient="records")), args.json)
    print(json.dumps({k: v for k, v in result.items() if k != "p"}, default=float))
    return 0


def _add_data_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--on-invalid",
        choices=("error", "drop"),
        default="error",
        help="invalid records (no answer, answer_start not pointing at the answer, duplicate id): "
        "stop with an error (default) or drop them",
    )


def _add_heuristic_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--heuristics",
        default=None,
        metavar="H1,H2",
        help=f"comma-separated heuristics (default: all): {', '.join(HEURISTIC_NAMES)}",
    )
    p.add_argument(
        "--compat",
        choices=COMPAT_CHOICES,
        default=None,
        help="reproduce the authors' (isbiased) heuristic code, bugs included; default: the fixed definitions",
    )
    p.add_argument(
        "--variant",
        action="append",
        metavar="HEURISTIC=NAME",
        help="use the paper-text definition of a heuristic (e.g. word-dist=between); repeatable",
    )
    p.add_argument(
        "--tfidf-reference",
        default=None,
        metavar="FILE",
        help="fit cos-sim's TF-IDF on this data file's contexts (one per question; the paper uses "
        "SQuAD-train) instead of the annotated file's own",
    )
    p.add_argument(
        "--threads",
        type=int,
        default=None,
        metavar="N",
        help="processes for the spaCy work (default: the cores this process may use, within a SLURM allocation)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="spurious",
        description="Measure prediction shortcuts: QA heuristics and prediction bias (Think Twice); lexical bias of classifiers.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress (INFO) on stderr")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("annotate", help="compute heuristics for a QA data file → parquet (id + one column each)")
    p.add_argument("data", metavar="DATA.json", help="official SQuAD JSON or flat records (plain or .gz)")
    p.add_argument("out", metavar="OUT.parquet")
    _add_heuristic_options(p)
    _add_data_options(p)
    p.set_defaults(func=cmd_annotate)

    p = sub.add_parser("evaluate", help="official SQuAD v1.1 EM/F1 of predictions (prints a JSON line)")
    p.add_argument("data", metavar="DATA.json")
    p.add_argument("predictions", metavar="PREDICTIONS.json", help="official format: {question id: answer text}")
    p.add_argument(
        "--per-example",
        default=None,
        metavar="OUT.parquet",
        help="also write the per-question scores (id, prediction_text, em, f1)",
    )
    p.add_argument(
        "--allow-missing",
        action="store_true",
        help="score questions without a prediction 0 (the official script's behaviour) instead of failing",
    )
    _add_data_options(p)
    p.set_defaults(func=cmd_evaluate)

    p = sub.add_parser("bias", help="prediction bias of predictions per heuristic (threshold search, Alg. 1)")
    p.add_argument("data", metavar="DATA.json")
    p.add_argument("predictions", metavar="PREDICTIONS.json")
    _add_heuristic_options(p)
    p.add_argument(
        "--heuristics-file",
        default=None,
        metavar="FILE.parquet",
        help="use heuristics precomputed by `spurious annotate` instead of computing them",
    )
    p.add_argument("--sample-size", type=int, default=800, help="examples per bootstrap draw (default 800)")
    p.add_argument("--iterations", type=int, default=100, help="bootstrap draws per segment (default 100)")
    p.add_argument("--seed", type=int, default=0, help="sampling seed (default 0)")
    p.add_argument(
        "--with-replacement",
        action="store_true",
        help="draw with replacement (a true bootstrap; the paper's code draws without)",
    )
    p.add_argument("--allow-missing", action="store_true", help="score questions without a prediction 0")
    p.add_argument(
        "--allow-too-few-rows",
        action="store_true",
        help="report 'no threshold' instead of failing when the data has fewer than 2 x --sample-size questions",
    )
    p.add_argument("--model", default=None, help="model name stored in --json (default: the predictions file name)")
    p.add_argument("--dataset", default=None, help="dataset name stored in --json (default: the data file name)")
    p.add_argument(
        "--json",
        default=None,
        metavar="OUT.json",
        help="write the full search results (with the threshold grid) as a JSON list",
    )
    _add_data_options(p)
    p.set_defaults(func=cmd_bias)

    p = sub.add_parser("report", help="tables (CSV + Markdown) and the Figure 2 plot from `bias --json` results")
    p.add_argument("results", nargs="+", metavar="RESULT.json")
    p.add_argument("--out-dir", required=True, metavar="DIR")
    p.add_argument(
        "--paper-run",
        default=None,
        metavar="NAME",
        help="compare with the paper's published values of this run (e.g. BERT-Base, RoBERTa-Large)",
    )
    p.set_defaults(func=cmd_report)

    p = sub.add_parser(
        "lexical-test",
        help="exact permutation test for lexical bias of a classifier's predictions (Serrano et al. 2023, §3)",
    )
    p.add_argument("train", metavar="TRAIN", help="training data: z-scores pick the features (.parquet or GLUE .tsv)")
    p.add_argument("test", metavar="TEST", help="the data the predictions are for")
    p.add_argument("predictions", metavar="PREDICTIONS", help="id + prediction columns (parquet, CSV, TSV, JSONL)")
    p.add_argument("--top-k", type=int, default=50, help="features per label, highest z first (default 50)")
    p.add_argument("--counting", choices=("types", "tokens"), default="types", help="z-score counts (default types)")
    p.add_argument("--stop-words", choices=("nltk", "none"), default="nltk", help="stop words excluded (default nltk)")
    p.add_argument("--text-columns", default=None, metavar="A[,B]", help="input column(s) of TRAIN/TEST")
    p.add_argument("--label-column", default=None, help="label column of TRAIN/TEST")
    p.add_argument("--label-names", default=None, metavar="N0,N1,...", help="label names in index order")
    p.add_argument("--json", default=None, metavar="OUT.json", help="also write the result and the features")
    p.set_defaults(func=cmd_lexical_test)
    from spurious.audit.command import add_parser as add_audit_parser

    add_audit_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        stream=sys.stderr,
        format="%(levelname)s %(name)s: %(message)s",
    )
    if getattr(args, "threads", 1) is not None and getattr(args, "threads", 1) < 1:
        parser.exit(EXIT_USAGE, f"spurious {args.command}: error: --threads must be at least 1\n")
    try:
        return int(args.func(args) or 0)
    except CLIError as exc:
        print(f"spurious {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
