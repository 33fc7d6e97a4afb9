"""The CLI's subcommands: annotate, evaluate, bias, report, lexical-test (audit lives in spurious.audit.command)."""

from __future__ import annotations

import argparse
import json
import logging
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from spurious.cli.inputs import (
    CLIError,
    _check_predictions,
    load_classification_file,
    load_classification_predictions,
    load_data,
    load_predictions,
    parse_heuristics,
    parse_variants,
)
from spurious.core.data.inputs import check_output
from spurious.core.progress import available_cores

log = logging.getLogger("spurious.cli")


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
    """The ``spurious annotate`` values of ``heuristics`` for the questions of ``frame``, in its order; a damaged file,
    missing columns or rows, and non-numeric or NaN values are CLIErrors naming the file and the fix."""
    import numpy as np

    from spurious.core import readers

    p = Path(path)
    if not p.exists():
        raise CLIError(f"heuristics file {p} does not exist; create it with `spurious annotate`")
    fix = "create it again with `spurious annotate` on this data file"
    table = readers.read_parquet(p, fix=fix)
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
    values = table.loc[ids.tolist(), heuristics].copy()
    for h in heuristics:
        numbers = pd.to_numeric(values[h], errors="coerce").to_numpy(dtype=float)
        bad = values.index[~np.isfinite(numbers)]
        if len(bad):
            raise CLIError(
                f"{p}: column {h} holds {len(bad)} missing, NaN, infinite or non-numeric value(s) (first ids: "
                f"{', '.join(bad[:5])}); heuristics mark 'not computable' with -1: {fix}"
            )
        values[h] = numbers
    return values.reset_index()


def cmd_annotate(args: argparse.Namespace) -> int:
    from spurious.core.io import write_parquet

    check_output(args.out, None, holds=" for the heuristics (a parquet)")
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
    if not args.quiet:
        print(f"wrote {len(values)} rows x {len(heuristics)} heuristics to {args.out}", file=sys.stderr)
    return 0


def _warn_version(info: dict[str, Any]) -> None:
    version = info.get("version")
    if info.get("format") == "squad_json" and version is not None and version != "1.1":
        print(f"Evaluation expects v-1.1, but got dataset with v-{version}", file=sys.stderr)


def cmd_evaluate(args: argparse.Namespace) -> int:
    from spurious.core.metrics import evaluate, score_predictions

    if args.per_example:
        check_output(args.per_example, "--per-example")
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

    if args.json:
        check_output(args.json, "--json")
    heuristics = parse_heuristics(args.heuristics)
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
        print(
            f"spurious bias: warning: {r['heuristic']}: no threshold ({NOT_FOUND_REASONS[r['reason']]})",
            file=sys.stderr,
        )

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
    from spurious.core.io import atomic_paths
    from spurious.thinktwice import report

    check_output(args.out_dir, "--out-dir", folder=True, holds=" for the tables and figure2")
    results = []
    for p in args.results:
        if not Path(p).exists():
            raise CLIError(f"results file {p} does not exist; produce it with `spurious bias --json`")
        results += report.load_results([p], fix="produce it with `spurious bias --json`")
    out = Path(args.out_dir)
    try:
        bias = report.bias_table(results, paper_run=args.paper_run)
        thresholds = report.thresholds_table(results, paper_run=args.paper_run)
    except ValueError as exc:
        raise CLIError(f"{exc} (in {', '.join(map(str, args.results))})") from exc
    # the six files are one report: written to temporary names, renamed only when all exist
    names = ("prediction_bias.csv", "prediction_bias.md", "thresholds.csv", "thresholds.md", "figure2.png",
             "figure2.svg")
    with atomic_paths(*(out / name for name in names)) as tmp:
        report.write_table(bias, tmp[0], tmp[1])
        report.write_table(thresholds, tmp[2], tmp[3])
        report.figure2(results, tmp[4], tmp[5])
    print(report.format_markdown(bias, bias.attrs.get("caption")))
    return 0


def cmd_lexical_test(args: argparse.Namespace) -> int:
    from spurious.lexical import features as lexical

    if args.json:
        check_output(args.json, "--json")
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
    result = lexical.model_bias_test(table, top, test["text_a"], test["text_b"], labels, correct,
                                     counting=args.counting)
    result.update(train=str(args.train), test=str(args.test), predictions=str(args.predictions),
                  counting=args.counting, top_k=args.top_k, stop_words=args.stop_words)
    if args.json:
        from spurious.core.io import write_json

        write_json(dict(result, features=top.to_dict(orient="records")), args.json)
    print(json.dumps({k: v for k, v in result.items() if k != "p"}, default=float))
    return 0

