"""Adapter: a classifier's predictions on the original dev set; accuracy on it and on its AFLite-filtered part."""

from typing import TYPE_CHECKING

import torch

from spurious.aflite import text as aflite_text
from spurious.core import io, provenance
from spurious.core.data import classification
from spurious.core.train import classifier
from spurious.core.train.prediction_settings import classifier_prediction_arguments
from spurious.workflow import runlog

if TYPE_CHECKING:
    from snakemake.iocontainers import snakemake

log = runlog.setup(snakemake)
torch.set_num_threads(snakemake.threads)
w, s, inp = snakemake.wildcards, snakemake.params.settings, snakemake.input
dev = classification.read_parquet(inp.dev)
if snakemake.params.partial_input:
    dev = aflite_text.partial_input(dev, snakemake.params.partial_input)
predictions = classifier.predict_classifier(inp.model, dev, **classifier_prediction_arguments(s), log=log.info)
io.write_parquet(predictions, snakemake.output.predictions, metadata={"label_names": predictions.attrs["label_names"]})
kept_ids = set(classification.read_parquet(inp.dev_filtered)["id"])
on_filtered = predictions["id"].isin(kept_ids)
metrics = {
    "dataset": w.dataset,
    "model": w.model,
    "train_set": w.train_set,
    "inputs": w.inputs,
    "seed": int(w.seed),
    "n_train": len(classification.read_parquet(inp.train)),
    "accuracy_original": float(predictions["correct"].mean()),
    "accuracy_filtered": float(predictions.loc[on_filtered, "correct"].mean()),
    "n_dev_original": len(predictions),
    "n_dev_filtered": int(on_filtered.sum()),
}
log.info("accuracy: original dev %.4f (%d), filtered dev %.4f (%d)", metrics["accuracy_original"],
         metrics["n_dev_original"], metrics["accuracy_filtered"], metrics["n_dev_filtered"])
io.write_json(metrics, snakemake.output.metrics)
provenance.write_job(snakemake)  # what produced it, beside the first output
