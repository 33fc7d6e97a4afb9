"""Adapter: fine-tune a classifier for AFLite's text experiments (the warm-up model, or a model on D, D_rand or
D(AFLite), on the full or the partial input); the checkpoint folder is removed only after success."""

import shutil
from typing import TYPE_CHECKING

from spurious.aflite import text as aflite_text
from spurious.core import io, provenance
from spurious.core.data import classification
from spurious.core.train import classifier, launch
from spurious.workflow import runlog

if TYPE_CHECKING:
    from snakemake.iocontainers import snakemake

log = runlog.setup(snakemake)
p = snakemake.params
train = classification.read_parquet(snakemake.input.train)
partial = getattr(p, "partial_input", None)
if partial:
    train = aflite_text.partial_input(train, partial)
summary = classifier.train_classifier(
    train,
    model_name_or_path=p.checkpoint,
    output_dir=snakemake.output.model,
    checkpoint_dir=p.checkpoint_dir,
    settings=launch.job_settings(p.settings, threads=snakemake.threads, resources=snakemake.resources),
    init=p.init,
    log=log.info,
)
summary.update(dict(snakemake.wildcards.items()), partial_input=partial, n_train=len(train))
io.write_json(summary, snakemake.output.summary)
shutil.rmtree(p.checkpoint_dir, ignore_errors=True)
provenance.write_job(snakemake)  # what produced it, beside the first output
