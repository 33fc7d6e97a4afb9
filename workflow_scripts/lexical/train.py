"""Adapter: fine-tune a classifier (or train the BiLSTM control) on uniform or q weights; the checkpoint folder is
removed only after success."""

import shutil
from typing import TYPE_CHECKING

from spurious.core import io, provenance
from spurious.core.data import classification
from spurious.core.train import classifier, launch
from spurious.lexical import bilstm, reweight
from spurious.workflow import runlog

if TYPE_CHECKING:
    from snakemake.iocontainers import snakemake

log = runlog.setup(snakemake)
w = snakemake.wildcards
train = classification.read_parquet(snakemake.input.train)
weights = None
if w.weighting == "q":
    # the paper multiplies each example's loss by q_i * |D| (mean 1)
    weights = reweight.read_weights(snakemake.input.weights, train["id"]) * len(train)
if snakemake.params.init == "bilstm":  # the paper's no-pretraining control: CBOW + BiLSTM on this data only
    settings = dict(snakemake.params.settings, threads=snakemake.threads)
    summary = bilstm.train_bilstm(
        train, output_dir=snakemake.output.model, settings=settings, weights=weights, log=log.info
    )
    summary["init"] = "bilstm"
else:
    summary = classifier.train_classifier(
        train,
        model_name_or_path=snakemake.params.checkpoint,
        output_dir=snakemake.output.model,
        checkpoint_dir=snakemake.params.checkpoint_dir,
        settings=launch.job_settings(
            snakemake.params.settings, threads=snakemake.threads, resources=snakemake.resources
        ),
        weights=weights,
        init=snakemake.params.init,
        log=log.info,
    )
summary.update(dataset=w.dataset, model=w.model, weighting=w.weighting, seed=int(w.seed))
io.write_json(summary, snakemake.output.summary)
shutil.rmtree(snakemake.params.checkpoint_dir, ignore_errors=True)
provenance.write_job(snakemake)  # what produced it, beside the first output
