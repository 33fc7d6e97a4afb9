"""Adapter: one model on one out-of-distribution split; predictions mapped to the split's labels, counts per group."""

from typing import TYPE_CHECKING

import torch

from spurious.aflite import ood as aflite_ood
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
frame = classification.read_parquet(inp.data)
predictions = classifier.predict_classifier(
    inp.model, frame, **classifier_prediction_arguments(s), log=log.info, check_labels=False
)
table, counts = aflite_ood.score_predictions(predictions, frame, source=inp.data, **snakemake.params.scoring)
io.write_parquet(table, snakemake.output.predictions)
for group, cell in counts.items():
    log.info(
        "%s: %d of %d correct (%.2f %%)", group, cell["correct"], cell["n"], 100.0 * cell["correct"] / max(cell["n"], 1)
    )
metrics = {
    "ood": w.ood,
    "split": w.split,
    "model": w.model,
    "train_set": w.train_set,
    "seed": int(w.seed),
    "model_dir": inp.model,
    "counts": counts,
}
io.write_json(metrics, snakemake.output.metrics)
provenance.write_job(snakemake)  # what produced it, beside the first output
