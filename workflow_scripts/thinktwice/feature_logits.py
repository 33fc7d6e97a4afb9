"""Adapter: a model's start/end logits for every training window (bias model or CReg teacher), stored once."""

from typing import TYPE_CHECKING

from spurious.core import provenance
from spurious.core.data import squad
from spurious.core.train import qa
from spurious.workflow import runlog

if TYPE_CHECKING:
    from snakemake.iocontainers import snakemake

log = runlog.setup(snakemake)
frame = squad.read_qa_parquet(snakemake.input.data)
settings = dict(snakemake.params.settings, threads=snakemake.threads)
log.info(
    "logits of %s on %d questions (tokenizer of %s)", snakemake.input.model, len(frame), snakemake.params.tokenizer_from
)
fingerprint = qa.infer_feature_logits(
    snakemake.input.model,
    frame,
    tokenizer_from=snakemake.params.tokenizer_from,
    settings=settings,
    output_path=snakemake.output.logits,
    log=log.info,
)
log.info("wrote %s: %s", snakemake.output.logits, fingerprint)
provenance.write_job(snakemake)  # what produced it, beside the first output
