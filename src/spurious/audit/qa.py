"""The QA audit: a user's extractive QA model on SQuAD-format data (Think Twice, Mikula et al. 2024).

* predictions and the official SQuAD v1.1 EM/F1;
* the seven bias heuristics and the prediction bias of the model per heuristic, with the threshold search
  (:func:`spurious.thinktwice.bias.search_threshold`, Alg. 1);
* where every question has at least three gold answers' worth of annotators, the *Human* reference: the three
  annotators as models, each scored against the other two, the minimum bias over them per heuristic (§3);
* a heuristic is *flagged* when the model's prediction bias is positive (a threshold whose two segments' bootstrap
  EM intervals do not overlap) and larger than the Human model's on the same data and settings
  (:data:`spurious.audit.verdict.QA_RULE`).

The bootstrap defaults to the paper's (sample size 800, 100 draws without replacement; seed 0), on the paper's data
when the audit's default SQuAD v1.1 dev is used, so that the biases compare with its Figure 2 (which the effect-size
classes are cut from); the heuristics to the bug-fixed definitions (``compat=None``, no ``variants``; cos-sim's TF-IDF
fitted on the evaluated contexts unless ``tfidf_contexts`` is given; ``allow_too_few_rows=False``). The workflow's
audit rule passes the dicts its heuristics and bias rules take their params from (``heuristic_definitions()``,
``bias_search_settings()``), so under any config (the demo's: sample size 400) the audit's heuristic values and
threshold searches are the workflow's.

The small-sample rule is the workflow's bias rule's: data of fewer than twice the sample size can never give a
threshold, and is an :class:`AuditInputError` (raised before any prediction) unless ``allow_too_few_rows``, which
reports every heuristic without a threshold (reason ``too_few_rows``, prediction bias 0). A heuristic with enough
rows of which too few have a value (word-dist's and subj-pos's ``-1`` sentinels dropped) gets that result in both
cases. The Human reference is computed only where it can give a threshold (at least twice the sample size of
questions with three gold answers) and is otherwise left out, stated; the workflow with ``allow_too_few_rows``
would record its prediction bias as 0 there, which gives the same verdicts.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from spurious.audit import verdict
from spurious.audit.checks import AuditInputError, check_tokenizer_files, read_model_config
from spurious.thinktwice import paper_values

LogFn = Callable[[str], None]


def check_qa_model(model: str | os.PathLike) -> None:
    """AuditInputError unless ``model`` is an extractive QA model with a tokenizer."""
    from spurious.core.models import ModelResolutionError
    from spurious.lexical.bilstm import is_bilstm

    if os.path.isdir(model) and is_bilstm(model):
        raise AuditInputError(
            f"{model}: a BiLSTM classifier of the lexical track, not an extractive QA model; use --task classification"
        )
    config = read_model_config(model)
    if not any("QuestionAnswering" in a for a in config.architectures or []):
        raise AuditInputError(
            f"{model}: a {'/'.join(config.architectures or ['base'])} model, not an extractive QA model; a QA audit "
            "needs a model fine-tuned for span extraction (for classifiers use --task classification)"
        )
    check_tokenizer_files(model)
    try:
        from spurious.core.models import load_tokenizer

        load_tokenizer(model)
    except (OSError, ValueError, ModelResolutionError) as exc:
        raise AuditInputError(
            f"{model}: has no usable tokenizer ({exc}); save the tokenizer beside the model"
        ) from None


FEATURISATION_KEYS = ("max_length", "stride", "n_best", "max_answer_length")


def featurisation_settings(model: str | os.PathLike) -> tuple[dict[str, Any], str]:
    """The windowing and answer-search settings a model was trained with, from the ``training.json`` the workflow
    writes beside the model folder (or inside it), so that its predictions are the workflow's; the package defaults
    (max_length 384, stride 128) when there is none. Returns (settings, where they came from)."""
    from spurious.core import readers
    from spurious.core.errors import rebuild_advice

    folder = Path(os.fspath(model))
    for candidate in (folder / "training.json", folder.parent / "training.json"):
        if folder.is_dir() and candidate.is_file():
            saved = readers.read_json(candidate, fix=rebuild_advice(folder)).get("settings") or {}
            found = {k: saved[k] for k in FEATURISATION_KEYS if k in saved}
            if found:
                return found, str(candidate)
    return {}, "the package defaults"


def audit_qa(
    model: str | os.PathLike,
    data: pd.DataFrame,
    *,
    heuristics: Sequence[str] | None = None,
    compat: str | None = None,
    variants: Mapping[str, str] | None = None,
    predictions: dict[str, str] | None = None,
    heuristic_values: pd.DataFrame | None = None,
    tfidf_contexts: Sequence[str] | None = None,
    tfidf_source: str | None = None,
    sample_size: int = paper_values.SAMPLE_SIZE,
    iterations: int = paper_values.ITERATIONS,
    with_replacement: bool = False,
    seed: int = 0,
    allow_too_few_rows: bool = False,
    predict_settings: dict[str, Any] | None = None,
    threads: int = 1,
    log: LogFn | None = None,
) -> dict[str, Any]:
    """Every QA diagnostic of the module docstring; a JSON-ready dict. ``predictions`` / ``heuristic_values`` skip
    the prediction / annotation step (e.g. to reuse a workflow's files). ``heuristics``, ``compat``, ``variants`` and
    ``tfidf_contexts`` are :func:`~spurious.thinktwice.heuristics.compute_heuristics`'s (``tfidf_source`` names
    where the contexts came from, for the report); ``sample_size`` … ``allow_too_few_rows`` are
    :func:`~spurious.thinktwice.bias.search_threshold`'s. Data too small for the sample size, or heuristic settings
    that compute_heuristics rejects, raise :class:`AuditInputError` before any prediction."""
    from spurious.core.metrics import score_predictions
    from spurious.core.train.qa import predict_qa
    from spurious.thinktwice.bias import InsufficientRowsError, human_bias, human_scores, search_threshold
    from spurious.thinktwice.heuristics import HEURISTICS, compute_heuristics

    emit = log or (lambda message: None)
    names = list(heuristics or HEURISTICS)
    variants = dict(variants or {})
    search = dict(sample_size=int(sample_size), iterations=int(iterations), seed=int(seed),
                  with_replacement=bool(with_replacement), allow_too_few_rows=bool(allow_too_few_rows))
    if len(data) < 2 * search["sample_size"] and not search["allow_too_few_rows"]:
        # the workflow's bias rule (search_threshold's InsufficientRowsError), checked before the long steps
        raise AuditInputError(
            f"{data.attrs.get('source', 'the data')}: {len(data)} questions cannot give two segments of sample_size "
            f"{search['sample_size']} each (needs at least {2 * search['sample_size']}); lower the sample size "
            "(--sample-size; bias.sample_size in the config) or accept results without a threshold "
            "(--allow-too-few-rows; bias.allow_too_few_rows), as the workflow's bias rule requires"
        )
    if heuristic_values is None:
        emit(
            f"computing {len(names)} heuristics on {len(data)} questions "
            f"(compat {compat}, variants {variants or 'none'})"
        )
        contexts = list(tfidf_contexts) if tfidf_contexts is not None else data["context"].tolist()
        try:
            heuristic_values = compute_heuristics(data, names, compat=compat, variants=variants or None,
                                                  tfidf_contexts=contexts, threads=threads)
        except ValueError as exc:
            if str(exc).startswith(("unknown heuristic", "no heuristic", "unknown compat", "variants")):
                raise AuditInputError(f"heuristic settings: {exc}") from None
            raise
    featurisation, featurisation_from = featurisation_settings(model)
    if predictions is None:
        check_qa_model(model)
        settings = {**featurisation, **(predict_settings or {})}
        emit(f"predicting answers to {len(data)} questions (windows {settings.get('max_length', 384)} tokens, "
             f"stride {settings.get('stride', 128)}: {featurisation_from})")
        predictions = predict_qa(model, data, settings=settings, log=emit)
    scores = score_predictions(data, predictions)
    values = heuristic_values.set_index("id").loc[data["id"].astype(str)]

    def bias_of(em: np.ndarray, f1: np.ndarray, value_rows: pd.DataFrame, h: str) -> dict[str, Any]:
        try:
            result = search_threshold(value_rows[h].to_numpy(), em, f1, heuristic=h, **search)
        except InsufficientRowsError as exc:
            raise AuditInputError(str(exc)) from None
        result.pop("grid", None)
        return result

    emit("threshold search per heuristic")
    model_bias = {h: bias_of(scores["em"].to_numpy(), scores["f1"].to_numpy(), values, h) for h in names}
    human: dict[str, Any] | None = None
    n_three = int(sum(len(a["text"]) >= 3 for a in data["answers"]))
    if n_three >= 2 * search["sample_size"]:
        emit("the Human reference: three annotators as models")
        annotators = human_scores(data)
        per_annotator = []
        for scored in annotators:
            rows = values.loc[scored["id"].astype(str)]
            per_annotator.append({h: bias_of(scored["em"].to_numpy(), scored["f1"].to_numpy(), rows, h) for h in names})
        human = human_bias(per_annotator)
    rows = []
    for h in names:
        m = model_bias[h]
        hb = human[h]["prediction_bias"] if human else None
        rows.append(
            {
                "heuristic": h,
                "prediction_bias": m["prediction_bias"],
                "threshold": m["threshold"],
                "biased_group": m["biased_group"],
                "human_bias": hb,
                "flagged": verdict.qa_flagged(m["prediction_bias"], hb),
                "effect_size_class": verdict.effect_class(m["prediction_bias"]),
            }
        )
    return {
        "task": "qa",
        "n_examples": int(len(data)),
        "em": float(scores["em"].mean()),
        "f1": float(scores["f1"].mean()),
        "featurisation": {**featurisation, "from": featurisation_from},
        "heuristic_settings": {
            "names": names,
            "compat": compat,
            "variants": variants,
            "tfidf_contexts": tfidf_source or ("given" if tfidf_contexts is not None else "the evaluated data's"),
        },
        "bias_settings": search,
        "verdict_rule": verdict.rule_record("qa", **search),
        "bias": rows,
        "model_bias": model_bias,
        "human_bias": human,
        "human_reference": "annotators 0-2, each scored against the other two" if human else
        f"not computed: {n_three} questions have three gold answers, fewer than twice the sample size",
    }
