"""Adapter: a classifier's predictions on a feature's test set and dev set; the spurious gap and the ID accuracy."""

from typing import TYPE_CHECKING

import pandas as pd
import torch

from spurious.core import io, provenance
from spurious.core.train import classifier
from spurious.core.train.prediction_settings import classifier_prediction_arguments
from spurious.spuriousbench import construction as sb
from spurious.workflow import runlog

if TYPE_CHECKING:
    from snakemake.iocontainers import snakemake

log = runlog.setup(snakemake)
torch.set_num_threads(snakemake.threads)
w = snakemake.wildcards
s = snakemake.params.settings
feature = sb.feature_from_path(f"{w.category}/{w.fvalue}")
frames = {name: sb.read_split(snakemake.input[name]) for name in ("test", "dev")}
# one pass of the model over test and dev together: the checkpoint is loaded once
both = pd.concat([frames[name][["id", "text_a", "text_b", "label"]] for name in ("test", "dev")], ignore_index=True)
both.attrs["label_names"] = frames["test"].attrs["label_names"]
predicted = classifier.predict_classifier(
    snakemake.input.model,
    both,
    **classifier_prediction_arguments(s),
    log=log.info,
)
n_test = len(frames["test"])
test = predicted.iloc[:n_test].reset_index(drop=True)
test.attrs["label_names"] = predicted.attrs["label_names"]
dev_correct = predicted["correct"].to_numpy()[n_test:]
test["group"] = frames["test"]["group"].to_numpy()
test["has_feature"] = frames["test"]["has_feature"].to_numpy()
io.write_parquet(test, snakemake.output.predictions, metadata={"label_names": test.attrs["label_names"]})
gap = sb.spurious_gap(test["correct"].to_numpy(), test["group"].to_numpy())
spec = sb.FEATURES[feature]
metrics = {
    "dataset": w.dataset,
    "feature": feature,
    "category": spec.category,
    "kind": spec.kind,
    "model": w.model,
    "model_kind": "random" if snakemake.params.init == "scratch" else "pretrained",
    "method": w.sb_method,
    "seed": int(w.seed),
    "paper_name": snakemake.params.paper_name,
    **gap,
    "dev_accuracy": float(dev_correct.mean()),
    "n_dev": len(dev_correct),
    # a model that predicts one label everywhere has a gap of ±1 (or 0) that says nothing about the feature
    "predicted_target_rate": float(
        (test["prediction"] == frames["test"].attrs["spuriousbench"]["target_label"]).mean()
    ),
    "constant_prediction": bool(test["prediction"].nunique() == 1),
}
if metrics["constant_prediction"]:
    log.warning("%s: the model predicts label %d for every test example", feature, int(test["prediction"].iloc[0]))
log.info(
    "%s: gap %.4f (supporting %.4f, counter %.4f), dev accuracy %.4f",
    feature, metrics["gap"], metrics["acc_supporting"], metrics["acc_counter"], metrics["dev_accuracy"],
)
io.write_json(metrics, snakemake.output.metrics)
provenance.write_job(snakemake)  # what produced it, beside the first output
