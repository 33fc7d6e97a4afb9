"""The argument parser and the entry point `spurious` (exit 2 with a one-line message on bad input)."""

from __future__ import annotations

import argparse
import difflib
import logging
import re
import sys
from collections.abc import Sequence
from typing import NoReturn

from spurious.audit.command import add_parser as add_audit_parser
from spurious.audit.command import add_sample_size_option
from spurious.cli.commands import cmd_annotate, cmd_bias, cmd_evaluate, cmd_lexical_test, cmd_report
from spurious.cli.data import add_parser as add_data_parser
from spurious.cli.inputs import COMPAT_CHOICES, EXIT_USAGE, HEURISTIC_NAMES, CLIError
from spurious.cli.plan import add_parser as add_plan_parser
from spurious.core.data.inputs import label_names, non_negative_int, positive_int
from spurious.thinktwice import paper_values

log = logging.getLogger("spurious.cli")

DESCRIPTION = """\
Measure the prediction shortcuts (spurious correlations) an NLP model takes, with the diagnostics of four papers:

  Think Twice (Mikula et al., EACL 2024): a QA model's prediction bias along seven heuristics
      annotate, evaluate, bias, report; audit --task qa
  Stubborn Lexical Bias (Serrano et al. 2023): the exact permutation test of a classifier's lexical bias
      lexical-test; audit --task classification
  SpuriousBench (ICLR 2023 submission): whether inserting a spurious feature moves a classifier's predictions
      audit --task classification (--features, --insert-token)
  AFLite (Le Bras et al. 2020): how predictable the training data is from the model's own representations
      audit --task classification --train

`spurious audit` runs every diagnostic that fits a model's task and writes one report. Training, debiasing and the
papers' full reproductions run as the Snakemake workflow (see README.md). `spurious COMMAND -h` shows a command's
options and examples."""

#: The help of -v / -q (they go before or after the subcommand).
VERBOSE_HELP = "also log progress details (INFO) on stderr"
QUIET_HELP = "print no progress (bars, progress lines, log messages below errors); results and errors still print"


class Parser(argparse.ArgumentParser):
    """argparse's parser with its errors in one line, as every other error of the command: what is wrong, the
    nearest subcommand for a mistyped one, and where the help is (instead of the usage block)."""

    def error(self, message: str) -> NoReturn:
        choice = re.match(r"argument (\S+): invalid choice: '(.*)' \(choose from (.*)\)$", message)
        if choice:
            option, given, offered = choice.groups()
            names = [name.strip(" '") for name in offered.split(",")]
            near = difflib.get_close_matches(given, names, n=1)
            hint = f"; did you mean {near[0]!r}?" if near else ""
            message = f"argument {option}: invalid choice {given!r}{hint} (choose from {', '.join(names)})"
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}; see `{self.prog} -h`\n")


def examples(*lines: str) -> str:
    """A subcommand's epilog: its example command lines."""
    return "examples:\n" + "\n".join(f"  {line}" for line in lines)


def _subcommand(
    sub: argparse._SubParsersAction, name: str, summary: str, *example_lines: str
) -> argparse.ArgumentParser:
    return sub.add_parser(name, help=summary, description=summary, epilog=examples(*example_lines),
                          formatter_class=argparse.RawDescriptionHelpFormatter)


def _add_qa_files(p: argparse.ArgumentParser) -> None:
    p.add_argument("data", metavar="DATA.json", help="official SQuAD JSON or flat records (plain or .gz)")
    p.add_argument("predictions", metavar="PREDICTIONS.json", help="official format: {question id: answer text}")


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
        type=positive_int,
        default=None,
        metavar="N",
        help="processes for the spaCy work (default: the cores this process may use, within a SLURM allocation)",
    )


def _add_output_options(p: argparse.ArgumentParser, *, top_level: bool) -> None:
    """-v / -q, on the top-level parser and on every subcommand's: a subcommand's leave the attribute unset unless
    given there (``SUPPRESS``), so that ``spurious -v bias …`` and ``spurious bias … -v`` are the same."""
    default = False if top_level else argparse.SUPPRESS
    group = p.add_mutually_exclusive_group()
    group.add_argument("-v", "--verbose", action="store_true", default=default, help=VERBOSE_HELP)
    group.add_argument("-q", "--quiet", action="store_true", default=default, help=QUIET_HELP)


def _add_annotate(sub: argparse._SubParsersAction) -> None:
    p = _subcommand(
        sub, "annotate", "compute heuristics for a QA data file → parquet (id + one column each)",
        "spurious annotate dev-v1.1.json.gz dev_heuristics.parquet",
        "spurious annotate dev-v1.1.json dev_heuristics.parquet --heuristics word-dist,ans-len --compat isbiased",
    )
    p.add_argument("data", metavar="DATA.json", help="official SQuAD JSON or flat records (plain or .gz)")
    p.add_argument("out", metavar="OUT.parquet", help="where the heuristics go: id and one column per heuristic")
    _add_heuristic_options(p)
    _add_data_options(p)
    p.set_defaults(func=cmd_annotate)


def _add_evaluate(sub: argparse._SubParsersAction) -> None:
    p = _subcommand(
        sub, "evaluate", "official SQuAD v1.1 EM/F1 of predictions (prints a JSON line)",
        "spurious evaluate dev-v1.1.json predictions.json",
        "spurious evaluate dev-v1.1.json predictions.json --per-example scores.parquet",
    )
    _add_qa_files(p)
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


def _add_bias(sub: argparse._SubParsersAction) -> None:
    p = _subcommand(
        sub, "bias", "prediction bias of predictions per heuristic (threshold search, Alg. 1)",
        "spurious bias dev-v1.1.json predictions.json --json bias.json",
        "spurious bias dev-v1.1.json predictions.json --heuristics-file dev_heuristics.parquet --heuristics ans-len",
        "spurious bias my_dev.json predictions.json --sample-size 400   # data of 800 to 1,599 questions",
    )
    _add_qa_files(p)
    _add_heuristic_options(p)
    p.add_argument(
        "--heuristics-file",
        default=None,
        metavar="FILE.parquet",
        help="use heuristics precomputed by `spurious annotate` instead of computing them",
    )
    add_sample_size_option(p)
    p.add_argument("--iterations", type=positive_int, default=paper_values.ITERATIONS,
                   help="bootstrap draws per segment (default %(default)s, the paper's)")
    p.add_argument("--seed", type=non_negative_int, default=0, help="sampling seed (default 0)")
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


def _add_report(sub: argparse._SubParsersAction) -> None:
    p = _subcommand(
        sub, "report", "tables (CSV + Markdown) and the Figure 2 plot from `bias --json` results",
        "spurious report bias.json --out-dir report",
        "spurious report bert.json roberta.json --out-dir report --paper-run BERT-Base",
    )
    p.add_argument("results", nargs="+", metavar="RESULT.json", help="results of `spurious bias --json`, one per model")
    p.add_argument("--out-dir", required=True, metavar="DIR",
                   help="where the tables (prediction_bias, thresholds: .csv and .md) and figure2.png/.svg go")
    p.add_argument(
        "--paper-run",
        default=None,
        metavar="NAME",
        help="compare with the paper's published values of this run (e.g. BERT-Base, RoBERTa-Large)",
    )
    p.set_defaults(func=cmd_report)


def _add_lexical_test(sub: argparse._SubParsersAction) -> None:
    p = _subcommand(
        sub, "lexical-test",
        "exact permutation test for lexical bias of a classifier's predictions (Serrano et al. 2023, §3)",
        "spurious lexical-test train.tsv.gz dev.tsv predictions.csv --json lexical.json",
        "spurious lexical-test train.parquet test.parquet predictions.jsonl --top-k 20 --counting tokens",
    )
    p.add_argument("train", metavar="TRAIN", help="training data: z-scores pick the features (.parquet or GLUE .tsv)")
    p.add_argument("test", metavar="TEST", help="the data the predictions are for")
    p.add_argument("predictions", metavar="PREDICTIONS", help="id + prediction columns (parquet, CSV, TSV, JSONL)")
    p.add_argument("--top-k", type=positive_int, default=50, help="features per label, highest z first (default 50)")
    p.add_argument("--counting", choices=("types", "tokens"), default="types", help="z-score counts (default types)")
    p.add_argument("--stop-words", choices=("nltk", "none"), default="nltk", help="stop words excluded (default nltk)")
    p.add_argument("--text-columns", default=None, metavar="A[,B]",
                   help="input column(s) of TRAIN/TEST (a hub parquet export or a TSV; default: known names)")
    p.add_argument("--label-column", default=None, help="label column of TRAIN/TEST (default: label or gold_label)")
    p.add_argument("--label-names", type=label_names, default=None, metavar="N0,N1,...",
                   help="label names in index order")
    p.add_argument(
        "--on-invalid", choices=("error", "drop"), default="error",
        help="invalid records (empty text, duplicate id, label out of range): stop with an error (default) or "
        "drop them",
    )
    p.add_argument("--json", default=None, metavar="OUT.json", help="also write the result and the features")
    p.set_defaults(func=cmd_lexical_test)


def build_parser() -> argparse.ArgumentParser:
    import spurious

    parser = Parser(
        prog="spurious", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--version", action="version", version=f"spurious {spurious.__version__}",
                        help="print the version and exit")
    _add_output_options(parser, top_level=True)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    # the subcommands; a new one registers here (its own module's add_parser(sub), as audit's)
    subcommands = (_add_annotate, _add_evaluate, _add_bias, _add_report, _add_lexical_test, add_audit_parser,
                   add_plan_parser, add_data_parser)
    for add in subcommands:
        add(sub)
    for subparser in sub.choices.values():  # -v / -q after the subcommand too
        _add_output_options(subparser, top_level=False)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.verbose and args.quiet:
        parser.error("-v/--verbose and -q/--quiet exclude each other")
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.ERROR if args.quiet else logging.WARNING,
        stream=sys.stderr,
        format="%(levelname)s %(name)s: %(message)s",
    )
    try:
        return int(args.func(args) or 0)
    except CLIError as exc:
        print(f"spurious {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
