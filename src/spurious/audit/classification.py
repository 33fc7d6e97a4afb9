"""The classification audit: a user's classifier on evaluation data (and, optionally, its training data).

Model behaviour:

* accuracy on the evaluation data;
* the Stubborn Lexical Bias exact permutation test (:func:`spurious.lexical.features.model_bias_test`) of which
  evaluation instances the model gets right, usual vs unusual label (the accuracy gap ACC(U) − ACC(N) in points,
  with its 95 % interval: :func:`spurious.audit.intervals.difference_interval`), with the ``top_k`` highest-z word
  types per label taken from the training data's z-scores when it is given, else from the evaluation data's (stated
  in the result: then the selection and the test read the same labels, a weaker test);
* the counterfactual feature-insertion test (:mod:`spurious.audit.insertion`).

Data (with training data): the z-score table's top types per label.

Models: a transformers sequence-classification folder or hub id, a prompt-based model folder of this package, or a
BiLSTM control folder of :mod:`spurious.lexical.bilstm`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from spurious.audit import insertion as ins
from spurious.audit import verdict
from spurious.audit.checks import AuditInputError, check_tokenizer_files, read_model_config
from spurious.audit.intervals import difference_interval
from spurious.core.errors import READ_ERRORS, unreadable

LogFn = Callable[[str], None]
_GENERIC_LABEL = re.compile(r"^label_?\d+$", re.IGNORECASE)


def model_label_names(model: str | os.PathLike) -> list[str]:
    """The label names a classifier predicts, in index order; AuditInputError when ``model`` is not one."""
    from spurious.lexical.bilstm import is_bilstm, read_description

    path = Path(os.fspath(model))
    if path.exists() and is_bilstm(path):
        return read_description(path)["label_names"]
    if path.exists() and (path / "prompt.json").is_file():
        from spurious.core import readers

        fix = "save the prompt-based model again"
        with unreadable(
            path / "prompt.json", "prompt-based model description", fix, READ_ERRORS + (KeyError, TypeError)
        ):
            return list(readers.read_json(path / "prompt.json", fix=fix)["label_names"])
    config = read_model_config(model)
    archs = [a for a in (config.architectures or []) if "SequenceClassification" in a]
    if not archs:
        raise AuditInputError(
            f"{model}: a {'/'.join(config.architectures or ['base'])} model, not a sequence classifier; a "
            "classification audit needs a fine-tuned classifier (for QA models use --task qa)"
        )
    check_tokenizer_files(model)
    return [config.id2label[i] for i in range(config.num_labels)]


def match_labels(model_names: Sequence[str], data_names: Sequence[str], *, model: str, data: str) -> str:
    """How the model's labels map to the data's: ``"by name"`` (case-insensitive), or ``"by index"`` when the model
    has generic names (``LABEL_0``…). AuditInputError when the counts differ or the names disagree."""
    if len(model_names) != len(data_names):
        raise AuditInputError(
            f"{model} predicts {len(model_names)} labels {list(model_names)}, but {data} has {len(data_names)} "
            f"{list(data_names)}: the model does not match the task; pass evaluation data of the model's task"
        )
    if [m.lower() for m in model_names] == [d.lower() for d in data_names]:
        return "by name"
    if all(_GENERIC_LABEL.match(m) for m in model_names):
        return "by index"
    raise AuditInputError(
        f"{model} predicts {list(model_names)}, but {data} has labels {list(data_names)}: name the data's labels "
        "in the model's order (--label-names)"
    )


def load_predictor(model: str | os.PathLike, label_names: Sequence[str], *, batch_size: int = 64,
                   max_length: int | None = None, device: str = "auto", log: LogFn | None = None
                   ) -> Callable[[pd.DataFrame], np.ndarray]:
    """A function frame → predicted label ids (the data's order, see :func:`match_labels`)."""
    from spurious.lexical.bilstm import is_bilstm, predict_bilstm

    quiet: LogFn = lambda message: None  # noqa: E731 - the audit reports progress itself

    def prepare(frame: pd.DataFrame) -> pd.DataFrame:
        frame = frame.copy()
        frame.attrs["label_names"] = list(label_names)
        if "label" not in frame:
            frame["label"] = 0
        return frame

    if is_bilstm(model):
        names = model_label_names(model)

        def predict(frame: pd.DataFrame) -> np.ndarray:
            framed = prepare(frame)
            framed.attrs["label_names"] = names
            return predict_bilstm(model, framed, device=device, log=quiet)["prediction"].to_numpy()

        return predict
    from spurious.core.train.classifier import load_trained_classifier, predict_classifier

    loaded = load_trained_classifier(model, max_length=max_length, device=device)  # once, for every prediction

    def predict(frame: pd.DataFrame) -> np.ndarray:
        out = predict_classifier(
            model, prepare(frame), batch_size=batch_size, log=quiet, check_labels=False, loaded=loaded
        )
        return out["prediction"].to_numpy()

    return predict


def training_predictability(
    model: str | os.PathLike,
    train: pd.DataFrame,
    *,
    m: int = 64,
    t_fraction: float = 0.1,
    tau: float = 0.75,
    seed: int = 0,
    max_length: int = 128,
    device: str = "auto",
    log: LogFn | None = None,
) -> dict[str, Any]:
    """AFLite's predictability scores (Le Bras et al. 2020, Algorithm 1's filtering phase) of the training data
    under the model's own pooled representations (the encoder's last hidden state at the first token): ``m`` linear
    probes, each fitted on a random ``t_fraction`` of the data (about the paper's t / |D|: QNLI 10K of 105K, SNLI 50K
    of 550K) and scored on the rest. Reports the share of instances with predictability ≥ ``tau`` (what one AFLite
    pass could remove) and the probes' held-out accuracy. A BiLSTM control has no pooled encoder: skipped, stated."""
    from spurious.lexical.bilstm import is_bilstm

    if is_bilstm(model):
        return {"computed": False, "reason": "a BiLSTM control has no pooled transformer representation"}
    from spurious.aflite.filtering import predictability_scores
    from spurious.core.train.embeddings import embed

    emit = log or (lambda message: None)
    n_classes = len(train.attrs["label_names"])
    t = max(2 * n_classes, int(round(t_fraction * len(train))))
    if not t < len(train):
        return {"computed": False, "reason": f"{len(train)} training instances are too few for linear probes"}
    emit(f"AFLite predictability: embedding {len(train)} training instances with the model's encoder")
    features = embed(train, model, pooling="cls", max_length=max_length, device=device, log=emit)
    emit(f"AFLite predictability: {m} linear probes on {t} instances each")
    scores = predictability_scores(features, train["label"].to_numpy(), m=m, t=t, seed=seed, device=device,
                                   n_classes=n_classes)
    p = scores.predictability[np.isfinite(scores.predictability)]
    return {
        "computed": True,
        "representation": "the model's encoder, last hidden state at the first token",
        "m": m,
        "t": t,
        "tau": tau,
        "seed": seed,
        "n_scored": int(len(p)),
        "share_predictable": float(np.mean(p >= tau)) if len(p) else float("nan"),
        "probe_accuracy": scores.mean_heldout_accuracy,
        "histogram": np.histogram(p, bins=10, range=(0.0, 1.0))[0].tolist(),
    }


def audit_classification(
    model: str | os.PathLike,
    data: pd.DataFrame,
    *,
    train: pd.DataFrame | None = None,
    features: Sequence[str] | None = None,
    tokens: Sequence[str] = (),
    segment: str = "auto",
    top_k: int = 50,
    counting: str = "types",
    stop_words: str = "nltk",
    alpha: float = 0.05,
    batch_size: int = 64,
    max_length: int | None = None,
    device: str = "auto",
    nlp: Any = None,
    log: LogFn | None = None,
) -> dict[str, Any]:
    """Every classification diagnostic of the module docstring; a JSON-ready dict (tables as lists of records)."""
    from spurious.lexical import features as lexical

    emit = log or (lambda message: None)
    source = data.attrs.get("source", "the evaluation data")
    if "label" not in data or data["label"].isna().any() or len(data) == 0:
        raise AuditInputError(
            f"{source}: has no labelled examples (unlabelled rows, label -1, are dropped); the audit needs gold labels"
        )
    names = list(data.attrs["label_names"])
    mapping = match_labels(model_label_names(model), names, model=str(model), data=source)
    if train is not None and list(train.attrs["label_names"]) != names:
        raise AuditInputError(
            f"{train.attrs.get('source', 'the training data')} has labels {train.attrs['label_names']}, the evaluation "
            f"data {names}; give both in one label order"
        )
    predict = load_predictor(model, names, batch_size=batch_size, max_length=max_length, device=device)
    emit(f"predicting {len(data)} evaluation examples")
    predicted = np.asarray(predict(data))
    labels = data["label"].to_numpy(dtype=np.int64)
    correct = predicted == labels

    emit("lexical z-scores and the permutation test")
    selection_frame = train if train is not None else data
    table, top = lexical.select_features(selection_frame, counting=counting, top_k=top_k, stop_words=stop_words)
    permutation = lexical.model_bias_test(
        table, top, data["text_a"], data["text_b"], labels, correct, counting=counting
    )
    permutation.pop("p", None)  # an exact big-number fraction; log10_p carries it
    permutation["features_from"] = "training data" if train is not None else "evaluation data (no --train given)"
    gap = verdict.accuracy_gap_points(permutation["acc_usual"], permutation["acc_unusual"])
    gap_ci = difference_interval(permutation["correct_usual"], permutation["n_usual"], permutation["correct_unusual"],
                                 permutation["n_unusual"])
    permutation.update(accuracy_gap_points=gap, accuracy_gap_ci_points=[100.0 * x for x in gap_ci],
                       flagged=verdict.permutation_flagged(permutation["log10_p"], alpha),
                       effect_size_class=verdict.effect_class(gap))

    table_ins = ins.insertion_table(
        data, predict, ins.insertions(features, tokens), n_labels=len(names), label_names=names, segment=segment,
        nlp=nlp, alpha=alpha, progress=emit, before=predicted,
    )
    result: dict[str, Any] = {
        "task": "classification",
        "label_names": names,
        "label_mapping": mapping,
        "n_examples": int(len(data)),
        "accuracy": float(correct.mean()),
        "permutation_test": permutation,
        "top_features": top.to_dict(orient="records"),
        "insertion": [
            dict(r, effect_size_class=verdict.effect_class(100.0 * r["net_shift"]) if "net_shift" in r else None)
            for r in table_ins.to_dict(orient="records")
        ],
        "alpha": alpha,
        "settings": {"alpha": alpha, "top_k": top_k, "counting": counting, "stop_words": stop_words,
                     "insertion_segment": segment, "features": list(features) if features is not None else "default",
                     "insert_tokens": list(tokens)},
        "verdict_rule": verdict.rule_record("classification", alpha=alpha),
    }
    if train is not None:
        result["n_train_examples"] = int(len(train))
        result["predictability"] = training_predictability(model, train, max_length=max_length or 128, device=device,
                                                           log=emit)
    return result
