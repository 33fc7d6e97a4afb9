"""Adapter: fine-tune a QA model; the resumable checkpoint folder is removed only after success."""

import shutil
from typing import TYPE_CHECKING

from spurious.core import io, provenance
from spurious.core.data import squad
from spurious.core.train import launch, qa
from spurious.workflow import runlog

if TYPE_CHECKING:
    from snakemake.iocontainers import snakemake

log = runlog.setup(snakemake)
train = squad.read_qa_parquet(snakemake.input.train)
validation = squad.read_qa_parquet(snakemake.input.validation)
settings = launch.job_settings(snakemake.params.settings, threads=snakemake.threads, resources=snakemake.resources)
curves = squad.validation_curves(snakemake.input)
log.info(
    "training %s on %d questions, settings %s; validation-loss curves also on %s",
    snakemake.params.checkpoint,
    len(train),
    settings,
    sorted(curves) or "nothing else",
)
summary = qa.train_qa(
    train,
    validation,
    model_name_or_path=snakemake.params.checkpoint,
    output_dir=snakemake.output.model,
    checkpoint_dir=snakemake.params.checkpoint_dir,
    settings=settings,
    log=log.info,
    extra_validation=curves,
)
summary.update(model=snakemake.wildcards.model, checkpoint=snakemake.params.checkpoint)
io.write_json(summary, snakemake.output.summary)
shutil.rmtree(snakemake.params.checkpoint_dir, ignore_errors=True)
provenance.write_job(snakemake)  # what produced it, beside the first output
