"""Adapter: a classifier's predictions on the test split, and its accuracy."""

from typing import TYPE_CHECKING

import torch

from spurious.core import io, provenance
from spurious.core.data import classification
from spurious.core.train import classifier
from spurious.core.train.prediction_settings import classifier_prediction_arguments
from spurious.lexical import bilstm
from spurious.workflow import runlog

if TYPE_CHECKING:
    from snakemake.iocontainers import snakemake

log = runlog.setup(snakemake)
torch.set_num_threads(snakemake.threads)
w = snakemake.wildcards
s = snakemake.params.settings
test = classification.read_parquet(snakemake.input.test)
if bilstm.is_bilstm(snakemake.input.model):
    predictions = bilstm.predict_bilstm(snakemake.input.model, test, log=log.info)
else:
    predictions = classifier.predict_classifier(
        snakemake.input.model,
        test,
        **classifier_prediction_arguments(s),
        log=log.info,
    )
io.write_parquet(predictions, snakemake.output.predictions, metadata={"label_names": predictions.attrs["label_names"]})
io.write_json(
    {"dataset": w.dataset, "model": w.model, "weighting": w.weighting, "seed": int(w.seed),
     "n": len(predictions), "accuracy": float(predictions["correct"].mean())},
    snakemake.output.metrics,
)
provenance.write_job(snakemake)  # what produced it, beside the first output
