"""The argument parser and the entry point `spurious` (exit 2 with a one-line message on bad input)."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from spurious.cli.commands import cmd_annotate, cmd_bias, cmd_evaluate, cmd_lexical_test, cmd_report
from spurious.cli.inputs import COMPAT_CHOICES, EXIT_USAGE, HEURISTIC_NAMES, CLIError

log = logging.getLogger("spurious.cli")


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
    from spurious.cli.plan import add_parser as add_plan_parser

    add_plan_parser(sub)
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

