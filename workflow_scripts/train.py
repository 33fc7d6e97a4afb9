"""Adapter: fine-tune a QA model; the resumable checkpoint folder is removed only after success."""

import shutil
from typing import TYPE_CHECKING

from spurious import data, io, qa, runlog

if TYPE_CHECKING:
    from snakemake.iocontainers import snakemake

log = runlog.setup(snakemake)
train = data.read_qa_parquet(snakemake.input.train)
validation = data.read_qa_parquet(snakemake.input.validation)
settings = dict(snakemake.params.settings, threads=snakemake.threads)
log.info("training %s on %d questions, settings %s", snakemake.params.checkpoint, len(train), settings)
summary = qa.train_qa(
    train,
    validation,
    model_name_or_path=snakemake.params.checkpoint,
    output_dir=snakemake.output.model,
    checkpoint_dir=snakemake.params.checkpoint_dir,
    settings=settings,
    log=log.info,
)
summary.update(model=snakemake.wildcards.model, checkpoint=snakemake.params.checkpoint)
io.write_json(summary, snakemake.output.summary)
shutil.rmtree(snakemake.params.checkpoint_dir, ignore_errors=True)
