"""docs/errors.md: every case of its bad-input table, run for real. Each case feeds one bad input (a damaged file, a
wrong argument, a missing resource) to the ``spurious`` command or a workflow job, made from the mirror's SQuAD and
SST-2 files and a tiny BiLSTM trained here, and checks what the table says: one line, exit status 2 (a workflow job:
the job fails with the line), the message the table shows, word for word, and that nothing was predicted or
computed and no audit was written. The table cannot go stale: a changed message fails here. To add a row, add a
:class:`Case` and regenerate the page:

    PYTHONPATH=src python -m tests.core.test_errors_doc      # rewrites docs/errors.md from the cases' messages
"""

from __future__ import annotations

import contextlib
import gzip
import html
import io
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import pytest

from tests.conftest import REPO, SHARED, SQUAD_DEV

DOC = REPO / "docs" / "errors.md"
SST2_DEV = SHARED / "data" / "sst2" / "dev.tsv"
SST2_TRAIN = SHARED / "data" / "sst2" / "train.tsv.gz"
NAMES = ["negative", "positive"]


@dataclass(frozen=True)
class Case:
    """One row of the table: ``argv`` for ``spurious`` run in the workspace (or ``job``, Python run as a workflow
    job's script), what the input is and what is checked. ``before_model``: the audit's model must not even be loaded
    (the input is checked before it)."""

    id: str
    input: str
    check: str
    argv: tuple[str, ...] = ()
    job: str = ""
    env: dict[str, str] = field(default_factory=dict)
    before_model: bool = True
    computes: bool = False  # the problem shows only after the command's first computation


# The files behind the argv below are made by :func:`make_workspace`. The model of every audit is a BiLSTM trained on
# SST-2 (labels negative, positive); test.parquet holds 40 SST-2 dev sentences with ids x1000 … x1039.
AUDIT = ("audit", "bilstm", "--task", "classification", "--out", "audit")
LEXICAL = ("lexical-test", "train.parquet", "test.parquet")
QA_DATA = "QA data (`DATA.json` of `evaluate`, `bias`, `annotate`; `audit --task qa --data`): SQuAD JSON, plain or .gz"
QA_PREDICTIONS = "QA predictions (`PREDICTIONS.json` of `evaluate`, `bias`): `{question id: answer}`"
CLASSIFICATION_DATA = ("classification data (`TRAIN`, `TEST` of `lexical-test`; `audit --data`, `--train`): a "
                       "normalised or hub parquet, or a GLUE-style TSV")
CLASSIFIER_PREDICTIONS = "classifier predictions (`PREDICTIONS` of `lexical-test`): CSV, TSV, JSON lines, parquet, JSON"
BILSTM = "a BiLSTM model folder (`audit MODEL`; the lexical track's predict rule)"
OUTPUT_CHECK = ("a path the command can write (not a folder for a file or a file for a folder, not under a file, "
                "writable)")
CASES: tuple[Case, ...] = (
    Case("file-missing", "every file argument", "it exists", ("evaluate", "nope.json", "predictions.json")),
    Case("json-gz-truncated", QA_DATA, "the gzip stream is whole",
         ("evaluate", "truncated.json.gz", "predictions.json")),
    Case("json-gz-corrupt", QA_DATA, "the gzip stream decompresses",
         ("evaluate", "corrupt.json.gz", "predictions.json")),
    Case("qa-bad-record", QA_DATA, "each question has an id of its own and answers at their answer_start (else "
         "`--on-invalid drop`)", ("evaluate", "bad.json", "predictions.json")),
    Case("qa-too-few", f"{QA_DATA}, for `bias` and `audit`", "at least 2 x `--sample-size` questions (else "
         "`--allow-too-few-rows`)", ("bias", "dev.json", "predictions.json", "--heuristics", "ans-len"),
         computes=True),  # the rows a search has are those with a heuristic value: counted after the heuristics
    Case("json-invalid", QA_PREDICTIONS, "the file is JSON", ("evaluate", "dev.json", "broken.json")),
    Case("qa-predictions-other-split", QA_PREDICTIONS, "their ids are the data's questions",
         ("evaluate", "dev.json", "other.json")),
    Case("qa-predictions-missing", QA_PREDICTIONS, "every question has one (else `--allow-missing`)",
         ("evaluate", "dev.json", "partial.json")),
    Case("heuristics-unknown", "`--heuristics` of `annotate`, `bias`", "known names",
         ("bias", "dev.json", "predictions.json", "--heuristics", "word-dist,bogus")),
    Case("heuristics-truncated", "`bias --heuristics-file` (a parquet from `spurious annotate`)",
         "the file is a readable parquet", ("bias", "dev.json", "predictions.json", "--heuristics", "ans-len",
                                            "--heuristics-file", "truncated.parquet", "--sample-size", "2")),
    Case("heuristics-nan", "`bias --heuristics-file` (a parquet from `spurious annotate`)",
         "every value is a finite number", ("bias", "dev.json", "predictions.json", "--heuristics", "ans-len",
                                            "--heuristics-file", "nan.parquet", "--sample-size", "2")),
    Case("sample-size-zero", "`--sample-size`, `--iterations`, `--threads`, `--top-k` of `bias`, `audit`, "
         "`lexical-test`", "a whole number of at least 1", ("bias", "dev.json", "predictions.json",
                                                           "--sample-size", "0")),
    Case("report-json-invalid", "results of `spurious bias --json` (`RESULT.json` of `report`)", "the file is JSON",
         ("report", "broken.json", "--out-dir", "report")),
    Case("classification-parquet-truncated", CLASSIFICATION_DATA, "the file is a readable parquet",
         ("lexical-test", "truncated.parquet", "test.parquet", "predictions.csv")),
    Case("classification-parquet-corrupt", CLASSIFICATION_DATA, "the parquet footer is intact",
         ("lexical-test", "corrupt.parquet", "test.parquet", "predictions.csv")),
    Case("classification-tsv-corrupt", CLASSIFICATION_DATA, "the gzip stream decompresses",
         ("lexical-test", "corrupt.tsv.gz", "test.parquet", "predictions.csv")),
    Case("classification-bad-record", CLASSIFICATION_DATA, "no empty text, duplicate id or label out of range "
         "(else `--on-invalid drop`)", ("lexical-test", "bad.tsv", "test.parquet", "predictions.csv")),
    Case("normalised-text-columns", "`--text-columns`, `--label-column` of `lexical-test` on a normalised parquet",
         "they name its own columns (they pick a hub export's or a TSV's)",
         (*LEXICAL, "predictions.csv", "--text-columns", "sentence")),
    Case("normalised-label-names-swapped", "`--label-names` of `lexical-test`, `audit` on a normalised parquet",
         "they rename its label ids, in order; its own names in another order would swap them",
         (*LEXICAL, "predictions.csv", "--label-names", "positive,negative")),
    Case("classifier-predictions-columns", CLASSIFIER_PREDICTIONS, "the columns id and prediction",
         (*LEXICAL, "no-columns.csv")),
    Case("classifier-predictions-empty", CLASSIFIER_PREDICTIONS, "every prediction is a label id (`1` or `1.0`) or "
         "name; the first bad one is named by id and line", (*LEXICAL, "predictions-empty.csv")),
    Case("audit-feature", "`audit --features`", "each is one of SpuriousBench's insertion features",
         (*AUDIT, "--data", "test.parquet", "--features", "punctuation:exclamation,typo")),
    Case("audit-insert-token", "`audit --insert-token`", "one word",
         (*AUDIT, "--data", "test.parquet", "--insert-token", "two words")),
    Case("audit-insert-token-qa", "`audit --insert-token`, `--features`", "only with `--task classification`",
         ("audit", "bilstm", "--task", "qa", "--out", "audit", "--insert-token", "zxq")),
    Case("audit-out-file", "`audit --out`", "a folder, or one that can be made", (*AUDIT[:-1], "out.txt")),
    Case("audit-nltk", "NLTK's stop words (`NLTK_DATA`) for `audit`, `lexical-test` and the word-dist heuristic",
         "they are where `NLTK_DATA` says", (*AUDIT, "--data", "test.parquet"), env={"NLTK_DATA": "no_nltk_data"}),
    Case("audit-task", "`audit MODEL`", "the model fits `--task`", ("audit", "bilstm", "--task", "qa", "--out",
                                                                    "audit")),
    Case("audit-format", "`audit --data`, `--train`", "a parquet or a GLUE-style TSV", (*AUDIT, "--data", "data.xml")),
    Case("audit-bad-record", "`audit --data`, `--train`", "no empty text, duplicate id or label out of range (else "
         "`--on-invalid drop`)", (*AUDIT, "--data", "bad.tsv")),
    Case("audit-data-truncated", "`audit --data`, `--train`", "the file is readable",
         (*AUDIT, "--data", "truncated.parquet")),
    Case("audit-labels-count", "`audit --data`, `--train`", "as many labels as the model predicts",
         (*AUDIT, "--data", "three.parquet")),
    Case("audit-label-names-count", "`audit --label-names`", "one name per label id of the data",
         (*AUDIT, "--data", "test.parquet", "--label-names", "neg,neutral,pos")),
    Case("audit-label-names-applied", "`audit --label-names`", "after renaming, the data's labels are the model's",
         (*AUDIT, "--data", "neg-pos.parquet", "--label-names", "negative,good")),
    Case("bilstm-description-corrupt", f"{BILSTM}: `bilstm.json`", "JSON with the labels, settings and vocabulary",
         ("audit", "bilstm-json", *AUDIT[2:], "--data", "test.parquet")),
    Case("bilstm-weights-truncated", f"{BILSTM}: `model.pt`", "torch can load the weights",
         ("audit", "bilstm-truncated", *AUDIT[2:], "--data", "test.parquet"), before_model=False),
    Case("bilstm-weights-corrupt", f"{BILSTM}: `model.pt`", "torch can load the weights",
         ("audit", "bilstm-corrupt", *AUDIT[2:], "--data", "test.parquet"), before_model=False),
    Case("workflow-parquet-truncated", "a parquet a workflow job reads (e.g. `results/data/…/*.parquet`)",
         "the file is a readable parquet (the job fails with this line, no traceback; following the advice rebuilds "
         "it: tests/lexical/test_lexical_workflow.py)",
         job="from spurious.core.data import classification\nclassification.read_parquet('truncated.parquet')"),
    # every output path, before any work: a folder where a file goes, a path under a file, a file where a folder goes
    Case("annotate-out-folder", "`annotate OUT.parquet`", OUTPUT_CHECK, ("annotate", "dev.json", "bilstm")),
    Case("evaluate-per-example-under-file", "`evaluate --per-example`", OUTPUT_CHECK,
         ("evaluate", "dev.json", "predictions.json", "--per-example", "out.txt/scores.parquet")),
    Case("bias-json-folder", "`bias --json`", OUTPUT_CHECK,
         ("bias", "dev.json", "predictions.json", "--heuristics", "ans-len", "--sample-size", "2", "--json", "bilstm")),
    Case("report-out-dir-file", "`report --out-dir`", OUTPUT_CHECK, ("report", "results.json", "--out-dir", "out.txt")),
    Case("lexical-test-json-under-file", "`lexical-test --json`", OUTPUT_CHECK,
         (*LEXICAL, "predictions.csv", "--json", "out.txt/lexical.json")),
    Case("plan-json-folder", "`plan --json`", OUTPUT_CHECK, ("plan", "--configfile", "bad-indent.yaml", "--json",
                                                             "bilstm")),
    Case("audit-out-under-file", "`audit --out`", OUTPUT_CHECK, (*AUDIT[:-1], "out.txt/audit")),
    Case("bilstm-weights-missing", f"{BILSTM}: `model.pt`", "the folder holds the weights (checked before anything "
         "is predicted)", ("audit", "bilstm-noweights", *AUDIT[2:], "--data", "test.parquet")),
    Case("audit-model-missing", "`audit MODEL`", "an existing folder, a hub id or embedded:<name>",
         ("audit", "./my-model", *AUDIT[2:], "--data", "test.parquet")),
    Case("qa-predictions-duplicate", QA_PREDICTIONS, "each question id once (JSON would keep the last answer)",
         ("evaluate", "dev.json", "twice.json")),
    Case("classifier-predictions-duplicate", CLASSIFIER_PREDICTIONS, "each id once",
         (*LEXICAL, "twice.csv")),
    Case("label-names-twice", "`--label-names` of `lexical-test`, `audit`", "one name per label, none twice or empty",
         (*LEXICAL, "predictions.csv", "--label-names", "x,x")),
    Case("label-names-empty", "`--label-names` of `lexical-test`, `audit`", "one name per label, none twice or empty",
         (*LEXICAL, "predictions.csv", "--label-names", "a,")),
    Case("audit-features-empty", "`audit --features`", "at least one name, none empty",
         (*AUDIT, "--data", "test.parquet", "--features", "")),
    Case("audit-insert-token-twice", "`audit --insert-token`", "each token once",
         (*AUDIT, "--data", "test.parquet", "--insert-token", "zxq", "--insert-token", "zxq")),
    Case("config-yaml", "a config file (`plan --configfile`)", "YAML that parses; the file, line and column where "
         "it does not", ("plan", "--configfile", "bad-indent.yaml")),
    Case("subcommand-unknown", "the subcommand", "one of the commands; the nearest is suggested", ("plna",)),
    Case("audit-nltk-junk", "NLTK's stop words (`NLTK_DATA`) for `audit`, `lexical-test` and the word-dist heuristic",
         "they are NLTK's English list (179 words with the, and, of, is, not, you)",
         (*AUDIT, "--data", "test.parquet"), env={"NLTK_DATA": "junk_nltk_data"}),
)


# ----------------------------------------------------------------------------------------------------------------------
# the workspace: small real files, and damaged copies


def _damaged(source: Path, folder: Path, start: int, stop: int) -> None:
    """``truncated<ext>`` (the first half of ``source``'s bytes) and ``corrupt<ext>`` (its bytes ``start:stop``
    overwritten with 0xff: a parquet's footer, a gzip stream's compressed blocks) in ``folder``."""
    data = source.read_bytes()
    ext = "".join(source.suffixes)
    (folder / f"truncated{ext}").write_bytes(data[: len(data) // 2])
    corrupt = bytearray(data)
    corrupt[start:stop] = b"\xff" * len(corrupt[start:stop])
    (folder / f"corrupt{ext}").write_bytes(bytes(corrupt))


def _sst2(path: Path, n: int, prefix: str, start: int = 0) -> pd.DataFrame:
    from spurious.core.data import classification

    rows = classification.load_glue_tsv(path).iloc[start : start + n].reset_index(drop=True)
    frame = rows.assign(id=[f"{prefix}{1000 + i}" for i in range(len(rows))])
    frame.attrs["label_names"] = list(NAMES)
    return frame


def make_workspace(folder: Path) -> Path:
    """Every file the cases name, in ``folder``: QA data and predictions from SQuAD v1.1 dev, SST-2 parquets and
    predictions, a BiLSTM trained on 400 SST-2 sentences (1 epoch, small: a second), and damaged copies of each."""
    from spurious.core.data import classification
    from spurious.lexical.bilstm import WEIGHTS, train_bilstm
    from spurious.thinktwice.heuristics import compute_heuristics

    folder.mkdir(parents=True, exist_ok=True)
    with gzip.open(SQUAD_DEV, "rt", encoding="utf-8") as fh:
        squad = json.load(fh)
    article = squad["data"][0]
    paragraph = dict(article["paragraphs"][0], qas=article["paragraphs"][0]["qas"][:5])
    dev = {"version": "1.1", "data": [{"title": article["title"], "paragraphs": [paragraph]}]}
    (folder / "dev.json").write_text(json.dumps(dev))
    (folder / "dev.json.gz").write_bytes(SQUAD_DEV.read_bytes())  # all of dev: the damage lands in compressed blocks
    _damaged(folder / "dev.json.gz", folder, 1000, 1064)
    answers = {q["id"]: q["answers"][0]["text"] for q in paragraph["qas"]}
    (folder / "predictions.json").write_text(json.dumps(answers))
    (folder / "broken.json").write_text('{"56be4db0acb8001400a502ec": "Denver Broncos",')
    (folder / "other.json").write_text(json.dumps({f"train-{i}": "x" for i in range(7)}))
    (folder / "partial.json").write_text(json.dumps(dict(list(answers.items())[:4])))
    paragraph["qas"][1]["answers"][0]["answer_start"] += 1
    (folder / "bad.json").write_text(json.dumps(dev))

    from spurious.core.data.squad import load_squad_json
    from spurious.core.io import write_parquet

    heuristics = compute_heuristics(load_squad_json(folder / "dev.json"), ["ans-len"])
    write_parquet(heuristics, folder / "heuristics.parquet")
    heuristics.loc[[1, 3], "ans-len"] = float("nan")
    write_parquet(heuristics, folder / "nan.parquet")

    train, test = _sst2(SST2_TRAIN, 400, "t"), _sst2(SST2_DEV, 40, "x")
    classification.write_parquet(train, folder / "train.parquet")
    classification.write_parquet(test, folder / "test.parquet")
    size = (folder / "train.parquet").stat().st_size
    _damaged(folder / "train.parquet", folder, size - 200, size - 8)
    three = test.copy()
    three.attrs["label_names"] = ["a", "b", "c"]
    classification.write_parquet(three, folder / "three.parquet")
    (folder / "data.xml").write_text("<data/>")
    predictions = pd.DataFrame({"id": test["id"], "prediction": test["label"]})
    predictions.to_csv(folder / "predictions.csv", index=False)
    predictions.rename(columns={"prediction": "label"}).to_csv(folder / "no-columns.csv", index=False)
    predictions.assign(prediction=predictions["prediction"].astype(object).where(predictions["id"] != "x1003", "")
                       ).to_csv(folder / "predictions-empty.csv", index=False)
    renamed = test.copy()
    renamed.attrs["label_names"] = ["neg", "pos"]
    classification.write_parquet(renamed, folder / "neg-pos.parquet")
    tsv = "sentence\tlabel\n" + "".join(f"{t}\t{y}\n" for t, y in zip(test["text_a"], test["label"], strict=True))
    with gzip.open(folder / "dev.tsv.gz", "wt", encoding="utf-8") as fh:
        fh.write(tsv * 50)
    _damaged(folder / "dev.tsv.gz", folder, 1000, 1064)
    lines = tsv.splitlines(keepends=True)
    lines[3] = "\t" + lines[3].split("\t")[1]  # row 2 (id 2): an empty sentence
    (folder / "bad.tsv").write_text("".join(lines))

    model = folder / "bilstm"
    train_bilstm(train, output_dir=model, settings={"epochs": 1, "embedding_dim": 16, "hidden_sizes": [8, 8, 8],
                                                     "cbow_epochs": 1, "device": "cpu", "threads": 1, "seed": 0})
    for name in ("bilstm-truncated", "bilstm-corrupt", "bilstm-json"):
        copy = folder / name
        copy.mkdir()
        for item in model.iterdir():
            (copy / item.name).write_bytes(item.read_bytes())
    weights = (model / WEIGHTS).read_bytes()
    (folder / "bilstm-truncated" / WEIGHTS).write_bytes(weights[: len(weights) // 2])
    corrupt = bytearray(weights)
    corrupt[100:400] = b"\xff" * 300
    (folder / "bilstm-corrupt" / WEIGHTS).write_bytes(bytes(corrupt))
    description = folder / "bilstm-json" / "bilstm.json"
    description.write_text(description.read_text()[:200])
    (folder / "out.txt").write_text("an existing file\n")
    (folder / "no_nltk_data").mkdir()
    junk = folder / "junk_nltk_data" / "corpora" / "stopwords"
    junk.mkdir(parents=True)
    (junk / "english").write_text("lorem\nipsum\n")
    copy = folder / "bilstm-noweights"
    copy.mkdir()
    for item in model.iterdir():
        if item.name != WEIGHTS:
            (copy / item.name).write_bytes(item.read_bytes())
    first = paragraph["qas"][0]["id"]
    (folder / "twice.json").write_text(json.dumps(answers)[:-1] + f', "{first}": "Broncos"}}')
    pd.concat([predictions, predictions.iloc[[3]]]).to_csv(folder / "twice.csv", index=False)
    (folder / "results.json").write_text("[]")
    (folder / "bad-indent.yaml").write_text("run_name: x\ndatasets:\n  squad:\n    task: qa\n   splits: {}\n")
    return folder


# ----------------------------------------------------------------------------------------------------------------------
# running a case


ERROR_LINE = re.compile(r"^spurious[\w -]*: error: ")


@dataclass
class Outcome:
    status: int
    lines: list[str]  # stderr, the lines that say "error"
    predictions: int  # predict calls that returned
    model_loads: int  # the audit's load_predictor calls
    wrote_audit: bool
    computations: int = 0  # the commands' own work that returned: heuristics, searches, tests, scores, reports, plans


@contextlib.contextmanager
def counted(mp: pytest.MonkeyPatch) -> Iterator[dict[str, int]]:
    """Count the predictions that completed (BiLSTM, transformers classifier, QA), the audit's model loads and the
    other commands' work that completed."""
    import spurious.audit.classification as audit_classification
    import spurious.core.metrics as metrics
    import spurious.core.train.classifier as classifier
    import spurious.core.train.qa as qa
    import spurious.lexical.bilstm as bilstm
    import spurious.lexical.features as lexical
    import spurious.thinktwice.bias as bias
    import spurious.thinktwice.heuristics as heuristics
    import spurious.thinktwice.report as report
    import spurious.workflow.plan as plan

    calls = {"predictions": 0, "model_loads": 0, "computations": 0}

    def counting(fn: Callable, key: str) -> Callable:
        def wrapper(*args, **kwargs):
            result = fn(*args, **kwargs)
            calls[key] += 1
            return result

        return wrapper

    for module, name in ((bilstm, "predict_bilstm"), (classifier, "predict_classifier"), (qa, "predict_qa")):
        mp.setattr(module, name, counting(getattr(module, name), "predictions"))
    for module, name in ((heuristics, "compute_heuristics"), (bias, "search_threshold"), (lexical, "model_bias_test"),
                         (metrics, "evaluate"), (report, "figure2"), (plan, "planned_jobs")):
        mp.setattr(module, name, counting(getattr(module, name), "computations"))
    load = audit_classification.load_predictor

    def loading(*args, **kwargs):
        calls["model_loads"] += 1
        return load(*args, **kwargs)

    mp.setattr(audit_classification, "load_predictor", loading)
    yield calls


def run_case(case: Case, workspace: Path) -> Outcome:
    """The case in ``workspace`` (the current directory while it runs, so that messages name relative paths)."""
    if case.job:
        return _run_job(case, workspace)
    import nltk

    from spurious import cli
    from spurious.core.resources import english_stopwords

    err = io.StringIO()
    with pytest.MonkeyPatch.context() as mp, counted(mp) as calls:
        mp.chdir(workspace)
        for key, value in case.env.items():
            mp.setenv(key, value)
        if "NLTK_DATA" in case.env:
            mp.setattr(nltk.data, "path", [])
        english_stopwords.cache_clear()
        mp.setattr(sys, "stderr", err)
        try:
            status = cli.main(list(case.argv))
        except SystemExit as exc:  # argparse's errors
            status = exc.code
        finally:
            english_stopwords.cache_clear()
    lines = [line for line in err.getvalue().splitlines() if ERROR_LINE.match(line) or "Traceback" in line]
    return Outcome(status, lines, calls["predictions"], calls["model_loads"], (workspace / "audit").exists(),
                   calls["computations"])


def _run_job(case: Case, workspace: Path) -> Outcome:
    """``case.job`` as a workflow job's script runs it: after :func:`spurious.workflow.runlog.setup`, in a process of
    its own; what the terminal shows is the real stderr."""
    script = (
        "from types import SimpleNamespace\nfrom spurious.workflow import runlog\n"
        "runlog.setup(SimpleNamespace(log=['job.log'], rule='job', wildcards={}))\n" + case.job
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, "-c", script], cwd=workspace, env=env, capture_output=True, text=True,
                          check=False)
    log = (workspace / "job.log").read_text()
    lines = [line for line in proc.stderr.splitlines() if ERROR_LINE.match(line) or "Traceback" in line]
    lines += [line for line in log.splitlines() if "Traceback" in line]
    return Outcome(proc.returncode, lines, 0, 0, False)


# ----------------------------------------------------------------------------------------------------------------------
# the page


HEADER = """\
# Bad input: what is checked, and what you see

[← README](../README.md)

Every input the `spurious` command and the workflow read is checked before the work that needs it: the arguments,
every output path (a file or folder the command can write) and the language resources first, then the data, then the
model, and only then is anything computed or predicted. A problem is one line on stderr that names the file or
argument, what is wrong and what to do, and the command exits with status 2 (argparse's errors too, with where the
help is; a workflow job fails, with the same line on the terminal and in its log, and no traceback). A file that
exists but cannot be read, of any kind (parquet, JSON plain or gzip, CSV/TSV, numpy, a model file), reads `<path>:
not a readable <kind> (<the reader's reason>); <what to do>`; for a file the workflow wrote, what to do is
`snakemake --forcerun <path>` with the run's other options, which rebuilds it and what depends on it. The
configuration is validated against its schema before any job runs, naming the key and what is allowed; a config
file YAML cannot parse is named with its line and column by `spurious plan --configfile FILE` (Snakemake's own
message, "Config file is not valid JSON or YAML", names neither: run `spurious plan` on it, or `snakemake
--verbose`).
A damaged training checkpoint (a truncated or corrupt file in it) stops the rerun that would resume from
it with `<checkpoint>: not a readable training checkpoint (<the reader's reason>); delete <checkpoint folder> to start
the run afresh (only the newest checkpoint is kept)` (tested in `tests/core/test_engine.py`).

The table is generated from `tests/core/test_errors_doc.py`, which feeds each input to the command, made from real
small files and a tiny model, and checks that the line below is what it prints, word for word, and that nothing was
predicted, computed (heuristics, searches, tests, scores, reports, plans; the too-few-questions case needs the
heuristics first) or written. The paths are relative to the folder the command ran in.

| input | checked | what you see | case |
|---|---|---|---|
"""


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _message_cell(message: str) -> str:
    return "<code>" + html.escape(message, quote=False).replace("|", "&#124;") + "</code>"


def table_row(case: Case, message: str) -> str:
    return f"| {_cell(case.input)} | {_cell(case.check)} | {_message_cell(message)} | `{case.id}` |"


def doc_messages(text: str) -> dict[str, str]:
    """case id → the message the page shows."""
    rows = {}
    for match in re.finditer(r"^\|.*\| <code>(.*)</code> \| `([a-z0-9-]+)` \|$", text, re.MULTILINE):
        rows[match.group(2)] = html.unescape(match.group(1))
    return rows


def write_doc(messages: dict[str, str]) -> None:
    DOC.write_text(HEADER + "\n".join(table_row(case, messages[case.id]) for case in CASES) + "\n")


# ----------------------------------------------------------------------------------------------------------------------
# the tests


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import torch

    threads = torch.get_num_threads()
    yield make_workspace(tmp_path_factory.mktemp("errors"))
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def documented() -> dict[str, str]:
    return doc_messages(DOC.read_text())


def test_the_page_has_one_row_per_case(documented: dict[str, str]) -> None:
    assert len({case.id for case in CASES}) == len(CASES)
    assert list(documented) == [case.id for case in CASES], (
        "docs/errors.md is out of date: regenerate it with `PYTHONPATH=src python -m tests.core.test_errors_doc`"
    )


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_bad_input_gives_the_documented_line_before_any_prediction(
    case: Case, workspace: Path, documented: dict[str, str]
) -> None:
    outcome = run_case(case, workspace)
    if case.job:
        assert outcome.status == 1  # Snakemake marks the job failed
    else:
        assert outcome.status == 2, outcome
    assert len(outcome.lines) == 1, outcome.lines  # one line, no traceback
    assert outcome.lines[0] == documented.get(case.id), (
        "the message differs from docs/errors.md's; if the new one is right, regenerate the page with "
        "`PYTHONPATH=src python -m tests.core.test_errors_doc`"
    )
    assert outcome.predictions == 0 and (case.computes or outcome.computations == 0)
    if case.before_model:
        assert outcome.model_loads == 0
    assert not outcome.wrote_audit


# ----------------------------------------------------------------------------------------------------------------------
# the advice works: what the messages tell a user to do gets a result


def _spurious(workspace: Path, *argv: str) -> tuple[int, str, str]:
    from spurious import cli

    out, err = io.StringIO(), io.StringIO()
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(workspace)
        mp.setattr(sys, "stdout", out)
        mp.setattr(sys, "stderr", err)
        status = cli.main(list(argv))
    return status, out.getvalue(), err.getvalue()


def test_label_names_rename_a_normalised_parquets_label_ids(workspace: Path) -> None:
    """neg-pos.parquet names its ids neg, pos; the model predicts negative, positive: the audit refuses, and with
    --label-names negative,positive it runs, matching by name (-q after the subcommand: no progress lines)."""
    status, _, err = _spurious(workspace, *AUDIT[:-1], "renamed", "--data", "neg-pos.parquet")
    assert status == 2 and "but neg-pos.parquet has labels ['neg', 'pos']" in err
    status, _, err = _spurious(workspace, *AUDIT[:-1], "renamed", "--data", "neg-pos.parquet",
                               "--label-names", "negative,positive", "--insert-token", "zxq", "--features",
                               "punctuation:exclamation", "-q")
    assert status == 0 and err == ""
    result = json.loads((workspace / "renamed" / "audit.json").read_text())
    assert result["label_names"] == NAMES and result["label_mapping"] == "by name" and result["n_examples"] == 40


def test_on_invalid_drop_drops_the_bad_record(workspace: Path) -> None:
    """bad.tsv's row 2 has no sentence: --on-invalid drop leaves the other 39 (ids 0-39 but 2), in the audit and in
    lexical-test, as the message says."""
    status, _, err = _spurious(workspace, *AUDIT[:-1], "dropped", "--data", "bad.tsv", "--on-invalid", "drop",
                               "--features", "punctuation:exclamation")
    assert status == 0, err
    assert json.loads((workspace / "dropped" / "audit.json").read_text())["n_examples"] == 39
    predictions = pd.DataFrame({"id": [str(i) for i in range(40)], "prediction": 1})
    predictions.to_csv(workspace / "positive.csv", index=False)
    status, out, err = _spurious(workspace, "lexical-test", "train.parquet", "bad.tsv", "positive.csv",
                                 "--on-invalid", "drop", "--label-names", "negative,positive")
    assert status == 0, err
    assert json.loads(out)["n_evaluated"] == 39


def test_label_ids_written_as_floats_are_label_ids(workspace: Path) -> None:
    """A predictions column that pandas reads as floats (1.0, 0.0: how a column with an empty cell comes out of a
    CSV writer) is the same predictions as its integers."""
    predictions = pd.read_csv(workspace / "predictions.csv", dtype={"id": str})
    predictions.assign(prediction=predictions["prediction"].astype(float)).to_csv(workspace / "floats.csv",
                                                                                  index=False)
    assert "1.0" in (workspace / "floats.csv").read_text()
    as_ints = _spurious(workspace, *LEXICAL, "predictions.csv")
    as_floats = _spurious(workspace, *LEXICAL, "floats.csv")
    assert as_ints[0] == as_floats[0] == 0, as_floats[2]
    result = json.loads(as_floats[1])
    assert {k: v for k, v in result.items() if k != "predictions"} == {
        k: v for k, v in json.loads(as_ints[1]).items() if k != "predictions"}
    assert result["accuracy"] == 1.0  # the predictions are the gold labels


LOCKED_OUTPUTS = {
    "annotate": ("annotate", "dev.json", "locked/h.parquet"),
    "evaluate": ("evaluate", "dev.json", "predictions.json", "--per-example", "locked/s.parquet"),
    "bias": ("bias", "dev.json", "predictions.json", "--heuristics", "ans-len", "--sample-size", "2", "--json",
             "locked/b.json"),
    "report": ("report", "results.json", "--out-dir", "locked/report"),
    "lexical-test": (*LEXICAL, "predictions.csv", "--json", "locked/l.json"),
    "plan": ("plan", "--configfile", "bad-indent.yaml", "--json", "locked/plan.json"),
    "audit": (*AUDIT[:-1], "locked/audit"),
}


@pytest.mark.parametrize("command", list(LOCKED_OUTPUTS))
def test_an_output_in_a_folder_the_command_cannot_write_is_refused_before_any_work(
    command: str, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every command checks every output path first (the other two checks: the cases above). The folder is read-only
    (mode 555); root may write anywhere, so for root the check is shown the folder as a user sees it."""
    locked = workspace / "locked"
    locked.mkdir(exist_ok=True)
    locked.chmod(0o555)
    if os.geteuid() == 0:
        real_access = os.access
        monkeypatch.setattr(os, "access", lambda path, mode, **kw: (
            False if Path(path).resolve() == locked.resolve() and mode & os.W_OK else real_access(path, mode, **kw)))
    outcome = run_case(Case("locked", "", "", LOCKED_OUTPUTS[command]), workspace)
    where = LOCKED_OUTPUTS[command][-1]
    option = "" if command == "annotate" else f"{LOCKED_OUTPUTS[command][-2]} "
    assert outcome.lines == [f"spurious {command}: error: {option}{where}: locked is not writable; pass a path you can "
                             "write to"]
    assert (outcome.status, outcome.predictions, outcome.computations, outcome.model_loads) == (2, 0, 0, 0)


def test_a_job_keeps_the_traceback_of_an_error_that_is_not_about_its_input(workspace: Path) -> None:
    outcome = _run_job(Case("bug", "", "", job="raise RuntimeError('a bug')"), workspace)
    assert outcome.status == 1 and any("Traceback" in line for line in outcome.lines)


if __name__ == "__main__":  # regenerate docs/errors.md from the cases' messages
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        folder = make_workspace(Path(tmp) / "errors")
        found = {}
        for case in CASES:
            outcome = run_case(case, folder)
            if len(outcome.lines) != 1:
                raise SystemExit(f"{case.id}: expected one error line, got {outcome.lines}")
            found[case.id] = outcome.lines[0]
            print(f"{case.id}: {found[case.id]}")
    write_doc(found)
    print(f"wrote {DOC}")
