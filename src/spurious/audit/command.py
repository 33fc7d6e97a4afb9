"""`spurious audit MODEL --task qa|classification [--data FILE] [--train FILE] --out DIR`: the command line, and
:func:`run_audit`, which the workflow's audit rule calls too."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from spurious.audit.checks import AuditInputError

log = logging.getLogger(__name__)

SQUAD_DEV = "squad_v1.1/dev-v1.1.json.gz"
SST2_DEV = "sst2/dev.tsv"
QNLI_DEV = "qnli/validation/0000.parquet"


def default_data(task: str, label_names: list[str] | None) -> tuple[str, str]:
    """(path in the offline mirror, why): SQuAD v1.1 dev for QA; for classification QNLI dev when the model's labels
    name entailment (a pair task), else SST-2 dev (two labels, one input)."""
    if task == "qa":
        return SQUAD_DEV, "default for QA: SQuAD v1.1 dev"
    names = [n.lower() for n in label_names or []]
    if any("entail" in n for n in names):
        if len(names) != 2:
            raise AuditInputError(
                f"the model predicts {len(names)} labels {label_names}; the mirror's pair task QNLI has two: "
                "pass --data"
            )
        return QNLI_DEV, "default for a two-label model whose labels name entailment: QNLI dev (question, sentence)"
    if len(names) != 2:
        raise AuditInputError(
            f"the model predicts {len(names)} labels {label_names}; no default data fits: pass --data"
        )
    return SST2_DEV, "default for a two-label single-input model: SST-2 dev"


def _mirror_file(relative: str) -> Path:
    from spurious.core.data.squad import MIRROR_ENV, resolve_mirror_path

    path = resolve_mirror_path(relative)
    if path is None:
        raise AuditInputError(
            f"the default data {relative} is not in the offline mirror ({MIRROR_ENV}={os.environ.get(MIRROR_ENV)!r}); "
            "set SPURIOUS_DATA_MIRROR to the shared data folder or pass --data"
        )
    return path


def read_qa(path: str | os.PathLike, on_invalid: str = "error") -> pd.DataFrame:
    """A QA file: the workflow's normalised parquet, or SQuAD JSON / flat records (validated as the CLI does)."""
    from spurious.core.data.inputs import InputError, load_data

    if str(path).endswith(".parquet"):
        from spurious.core.data.squad import DataValidationError, read_qa_parquet

        try:
            return read_qa_parquet(path)
        except DataValidationError as exc:
            raise AuditInputError(str(exc)) from None
    try:
        return load_data(path, on_invalid=on_invalid)[0]
    except InputError as exc:
        raise AuditInputError(str(exc)) from None


def load_classification(path: str | os.PathLike, label_names: list[str] | None, on_invalid: str = "error"
                        ) -> pd.DataFrame:
    """A classification file (the workflow's normalised parquet, a hub parquet export or a GLUE TSV), validated as
    the CLI does; ``label_names`` names the labels in index order."""
    from spurious.core.data.inputs import InputError, load_classification_file

    args = argparse.Namespace(text_columns=None, label_column=None, on_invalid=on_invalid,
                              label_names=",".join(label_names) if label_names else None)
    try:
        frame = load_classification_file(path, args)
    except InputError as exc:
        raise AuditInputError(str(exc)) from None
    if len(frame) == 0:
        raise AuditInputError(
            f"{path}: has no labelled examples (unlabelled rows, label -1, are dropped); the audit needs gold labels"
        )
    frame.attrs.setdefault("source", str(path))
    return frame


def adopt_model_names(frame: pd.DataFrame, model_names: list[str]) -> bool:
    """Name a frame's labels after the model's when the data has label ids only (GLUE's SST-2 TSV: 0, 1) and as
    many labels as the model; returns whether it did."""
    names = list(frame.attrs["label_names"])
    if names == [str(i) for i in range(len(names))] and len(names) == len(model_names):
        frame.attrs["label_names"] = list(model_names)
        return True
    return False


def check_out_dir(out: str | os.PathLike) -> None:
    """AuditInputError unless ``out`` is a folder this process can write into, or one it can create (the check every
    command makes of its outputs, :func:`spurious.core.data.inputs.check_output`)."""
    from spurious.core.data.inputs import InputError, check_output

    try:
        check_output(out, "--out", folder=True, holds=" for audit.json and report.html")
    except InputError as exc:
        raise AuditInputError(str(exc)) from None


def check_arguments(task: str, out: str | os.PathLike, *, tokens: tuple[str, ...], features: list[str] | None,
                    heuristic_names: list[str] | None) -> None:
    """The checks that need neither the model nor the data, made before either is read: the task, the output folder,
    the insertion features and tokens, and NLTK's stop words where the audit will need them."""
    from spurious.audit import insertion
    from spurious.core.resources import english_stopwords

    if task not in ("qa", "classification"):
        raise AuditInputError(f"unknown task {task!r}; use qa or classification")
    check_out_dir(out)
    if task == "qa" and (tokens or features):
        raise AuditInputError("--insert-token and --features apply to --task classification; drop them for a QA audit")
    try:
        insertion.insertions(features, tokens)
    except ValueError as exc:
        raise AuditInputError(str(exc)) from None
    if task == "classification" or "word-dist" in (heuristic_names or ["word-dist"]):
        english_stopwords()  # the permutation test's features, QA's word-dist: a MissingResourceError names NLTK_DATA


def run_audit(
    model: str,
    task: str,
    out: str | os.PathLike,
    *,
    data: str | None = None,
    train: str | None = None,
    label_names: list[str] | None = None,
    tokens: tuple[str, ...] = (),
    features: list[str] | None = None,
    tfidf_reference: str | None = None,
    bias_settings: Mapping[str, Any] | None = None,
    heuristic_settings: Mapping[str, Any] | None = None,
    on_invalid: str = "error",
    device: str = "auto",
    threads: int = 1,
    log_fn: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Run the audit and write ``audit.json`` and ``report.html`` into ``out``; returns the result.

    QA: ``bias_settings`` are the threshold search's (``sample_size``, ``iterations``, ``with_replacement``, ``seed``,
    ``allow_too_few_rows``) and ``heuristic_settings`` the heuristics' definitions (``names``, ``compat``,
    ``variants``): the workflow's audit rule passes the dicts its bias and heuristics rules take their params from,
    so that the audit repeats the workflow's numbers. ``on_invalid`` (``error`` or ``drop``) is what to do with
    invalid records of the data files. Every argument, and the data, is checked before the model is loaded."""
    import spurious
    from spurious.audit import report

    emit = log_fn or log.info
    definitions = dict(heuristic_settings or {})
    check_arguments(task, out, tokens=tokens, features=features, heuristic_names=definitions.get("names"))
    if task == "qa":
        from spurious.audit.qa import audit_qa, check_qa_model

        check_qa_model(model)
        path, why = (data, "given with --data") if data else (str(_mirror_file(SQUAD_DEV)), default_data("qa", None)[1])
        frame = read_qa(path, on_invalid=on_invalid)
        frame.attrs["source"] = str(path)
        # one context per question, as the workflow's heuristics rule fits cos-sim's TF-IDF
        contexts = read_qa(tfidf_reference, on_invalid="drop")["context"].tolist() if tfidf_reference else None
        emit(f"QA audit of {model} on {path} ({len(frame)} questions; {why})")
        result = audit_qa(model, frame, heuristics=definitions.get("names"), compat=definitions.get("compat"),
                          variants=definitions.get("variants"), tfidf_contexts=contexts,
                          tfidf_source=str(tfidf_reference) if tfidf_reference else None, threads=threads,
                          predict_settings={"device": device}, log=emit, **(bias_settings or {}))
    elif task == "classification":
        from spurious.audit.classification import audit_classification, match_labels, model_label_names

        names = model_label_names(model)
        if data:
            path, why = data, "given with --data"
        else:
            relative, why = default_data("classification", names)
            path = str(_mirror_file(relative))
        frame = load_classification(path, label_names, on_invalid)
        ids_only = label_names is None and adopt_model_names(frame, names)
        match_labels(names, list(frame.attrs["label_names"]), model=model, data=path)  # before any long step
        train_frame = load_classification(train, label_names, on_invalid) if train else None
        if train_frame is not None and label_names is None:
            adopt_model_names(train_frame, names)
        nlp = None
        if any(f.startswith("adverb:") for f in features or []):
            from spurious.spuriousbench.construction import load_nlp

            nlp = load_nlp()
        emit(f"classification audit of {model} on {path} ({len(frame)} examples; {why})")
        result = audit_classification(model, frame, train=train_frame, features=features, tokens=tokens,
                                      device=device, nlp=nlp, log=emit)
        if ids_only:
            result["label_mapping"] = "by index (the data has label ids only; the model's names are used)"
    result.update(
        model=report.fingerprint(model) | {"id": str(model)},
        data=report.fingerprint(path) | {"id": str(path), "why": why},
        train=report.fingerprint(train) | {"id": str(train)} if train else None,
        version=spurious.__version__,
    )
    json_path, html_path = report.write_audit(result, out)
    emit(f"wrote {json_path} and {html_path}")
    return result


def parse_variants(items: list[str] | None) -> dict[str, str]:
    """``--variant HEURISTIC=NAME`` arguments as a dict (the names are checked by compute_heuristics)."""
    variants: dict[str, str] = {}
    for item in items or ():
        heuristic, sep, name = item.partition("=")
        if not sep or not heuristic.strip() or not name.strip():
            raise AuditInputError(f"--variant {item!r}: expected HEURISTIC=NAME, e.g. word-dist=between")
        variants[heuristic.strip()] = name.strip()
    return variants


def add_sample_size_option(p: argparse.ArgumentParser, prefix: str = "") -> None:
    """``--sample-size``, with one default for `spurious bias` and `spurious audit`: the paper's, on the paper's data
    (SQuAD v1.1 dev, the audit's default QA data), so that both give numbers comparable with its Figure 2 and the
    audit's effect-size classes, which are cut from it. Smaller data needs a smaller sample size, which the error
    for too few questions names before any prediction."""
    from spurious.core.data.inputs import positive_int
    from spurious.thinktwice import paper_values

    p.add_argument(
        "--sample-size", type=positive_int, default=paper_values.SAMPLE_SIZE, metavar="N",
        help=f"{prefix}questions per bootstrap draw (default %(default)s, Think Twice's on SQuAD v1.1 dev, so that "
        "the numbers compare with the paper's; the data needs at least 2 x N questions: lower it for smaller data, "
        "as the demo config's 400 for its validation split of about 3,600)",
    )


EXAMPLES = """\
examples:
  spurious audit path/to/sst2-classifier --task classification --out audit_sst2
  spurious audit path/to/nli-classifier --task classification --data dev.tsv --train train.tsv --insert-token not \
--out audit_nli
  spurious audit path/to/squad-model --task qa --out audit_qa
  spurious audit path/to/squad-model --task qa --data my_dev.json --sample-size 400 --out audit_qa"""


def add_parser(sub: Any) -> None:
    from spurious.core.data.inputs import label_names, non_negative_int, positive_int
    from spurious.thinktwice import paper_values

    summary = "which shortcuts a model takes: every diagnostic of the four papers that fits its task, in one report"
    p = sub.add_parser("audit", help=summary, description=summary, epilog=EXAMPLES,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", metavar="MODEL", help="a model folder or hub id (or a BiLSTM folder of the lexical track)")
    p.add_argument("--task", choices=("qa", "classification"), required=True,
                   help="qa: an extractive QA model (Think Twice); classification: a sequence classifier (Stubborn "
                   "Lexical Bias, SpuriousBench, AFLite)")
    p.add_argument("--data", default=None, metavar="FILE",
                   help="evaluation data (default: from the offline mirror, SQuAD v1.1 dev / SST-2 dev / QNLI dev)")
    p.add_argument("--train", default=None, metavar="FILE",
                   help="classification: the model's training data (the lexical features and AFLite's predictability)")
    p.add_argument("--out", required=True, metavar="DIR", help="the folder audit.json and report.html go into")
    p.add_argument("--label-names", type=label_names, default=None, metavar="N0,N1,...",
                   help="classification: the data's label names in index order (renames a parquet's label ids)")
    p.add_argument("--on-invalid", choices=("error", "drop"), default="error",
                   help="invalid records in --data / --train: stop with an error (default) or drop them")
    p.add_argument("--insert-token", action="append", default=[], metavar="WORD",
                   help="classification: also test inserting this word (repeatable)")
    p.add_argument("--features", default=None, metavar="F1,F2",
                   help="classification: SpuriousBench insertion features (default: punctuation and prefixes)")
    p.add_argument("--tfidf-reference", default=None, metavar="FILE",
                   help="QA: fit cos-sim's TF-IDF on this file's contexts (the workflow uses the training split)")
    p.add_argument("--compat", choices=("isbiased",), default=None,
                   help="QA: the authors' (isbiased) heuristic code, bugs included (heuristics.compat in a config); "
                   "default: the fixed definitions")
    p.add_argument("--variant", action="append", metavar="HEURISTIC=NAME",
                   help="QA: a heuristic's paper-text definition, e.g. word-dist=between (heuristics.variants); "
                   "repeatable")
    add_sample_size_option(p, prefix="QA: ")
    p.add_argument("--iterations", type=positive_int, default=paper_values.ITERATIONS,
                   help="QA: bootstrap draws (default %(default)s, the paper's)")
    p.add_argument("--seed", type=non_negative_int, default=0, help="QA: the bootstrap's sampling seed (default 0)")
    p.add_argument("--with-replacement", action="store_true", help="QA: draw the bootstrap samples with replacement")
    p.add_argument("--allow-too-few-rows", action="store_true",
                   help="QA: report 'no threshold' instead of failing when the data has fewer than 2 x --sample-size "
                   "questions (bias.allow_too_few_rows)")
    p.add_argument("--device", default="auto", help="cpu, cuda or auto (default)")
    p.add_argument("--threads", type=positive_int, default=1, metavar="N",
                   help="QA: processes for the heuristics' spaCy work")
    p.set_defaults(func=cmd_audit)


def cmd_audit(args: argparse.Namespace) -> int:
    """`spurious audit`: an AuditInputError is an InputError, which the CLI prints as one line (exit status 2)."""

    def progress(message: str) -> None:
        if not args.quiet:
            print(f"spurious audit: {message}", file=sys.stderr, flush=True)

    run_audit(
        args.model, args.task, args.out, data=args.data, train=args.train,
        label_names=args.label_names.split(",") if args.label_names else None,
        tokens=tuple(args.insert_token), features=args.features.split(",") if args.features is not None else None,
        tfidf_reference=args.tfidf_reference, on_invalid=args.on_invalid, device=args.device, threads=args.threads,
        log_fn=progress,
        bias_settings={"sample_size": args.sample_size, "iterations": args.iterations, "seed": args.seed,
                       "with_replacement": args.with_replacement, "allow_too_few_rows": args.allow_too_few_rows},
        heuristic_settings={"compat": args.compat, "variants": parse_variants(args.variant)},
    )
    return 0
