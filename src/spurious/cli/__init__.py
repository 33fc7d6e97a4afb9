"""The ``spurious`` command line: annotate heuristics, evaluate predictions, measure prediction bias, report.

Subcommands::

    spurious annotate DATA.json OUT.parquet [--heuristics h1,h2] [--compat isbiased] [--threads N]
    spurious evaluate DATA.json PREDICTIONS.json [--per-example OUT.parquet]
    spurious bias DATA.json PREDICTIONS.json [--heuristics ...] [--sample-size 800] [--iterations 100] [--seed 0]
                  [--with-replacement] [--compat isbiased] [--json OUT.json]
    spurious report RESULT.json [...] --out-dir DIR [--paper-run BERT-Base]
    spurious lexical-test TRAIN TEST PREDICTIONS [--top-k 50] [--counting types|tokens] [--stop-words nltk|none]
                  [--text-columns A[,B]] [--label-column C] [--label-names n0,n1,...] [--on-invalid error|drop]
                  [--json OUT.json]
    spurious audit MODEL --task qa|classification --out DIR [...]      (spurious.audit.command)

``--version``; ``-v`` / ``-q`` (more or no progress output) go before or after the subcommand. ``spurious -h`` names
the four papers and the commands that run their diagnostics; ``spurious COMMAND -h`` ends with examples.

``DATA.json`` is the official SQuAD v1.1 JSON (an object with a ``data`` list of articles) or a JSON list of flat
records (``id, context, question, answers{text, answer_start}``), plain or ``.gz``. ``PREDICTIONS.json`` is the
official prediction format, an object ``{question id: answer text}``.

``lexical-test`` runs the model-bias test of "Stubborn Lexical Bias" (Serrano et al. 2023) on any classifier's
predictions: TRAIN and TEST are classification data (the workflow's normalised parquet, a Hugging Face parquet export
or a GLUE TSV with a header, plain or .gz), PREDICTIONS a parquet/CSV/TSV/JSON-lines file with ``id`` and
``prediction`` (a label id or name) columns covering every TEST record.

User errors (a missing, malformed or damaged file, an unknown heuristic, predictions missing ids, invalid records, a
bad argument) print one message naming the file or argument and the fix on stderr and exit with status 2, without a
traceback, before any model is loaded where the input allows (docs/errors.md lists them).
"""

from spurious.cli.commands import (
    BIAS_TABLE_COLUMNS,
    _annotate_frame,
    _format_threshold,
    _load_heuristics_parquet,
    _warn_version,
    bias_summary,
    cmd_annotate,
    cmd_bias,
    cmd_evaluate,
    cmd_lexical_test,
    cmd_report,
)
from spurious.cli.entry import (
    _add_data_options,
    _add_heuristic_options,
    build_parser,
    main,
)
from spurious.cli.inputs import (
    COMPAT_CHOICES,
    EXIT_USAGE,
    HEURISTIC_NAMES,
    PREDICTION_FORMATS,
    CLIError,
    _check_predictions,
    _is_official_squad,
    _read_json_file,
    load_classification_file,
    load_classification_predictions,
    load_data,
    load_predictions,
    parse_heuristics,
    parse_variants,
)

__all__ = [
    "EXIT_USAGE",
    "HEURISTIC_NAMES",
    "COMPAT_CHOICES",
    "CLIError",
    "_read_json_file",
    "_is_official_squad",
    "load_data",
    "load_predictions",
    "_check_predictions",
    "parse_heuristics",
    "parse_variants",
    "load_classification_file",
    "PREDICTION_FORMATS",
    "load_classification_predictions",
    "_annotate_frame",
    "_load_heuristics_parquet",
    "cmd_annotate",
    "_warn_version",
    "cmd_evaluate",
    "BIAS_TABLE_COLUMNS",
    "bias_summary",
    "_format_threshold",
    "cmd_bias",
    "cmd_report",
    "cmd_lexical_test",
    "_add_data_options",
    "_add_heuristic_options",
    "build_parser",
    "main",
]
