"""Adapter: predict and score a model (original, debiased or bias model) on one split."""

from typing import TYPE_CHECKING

from spurious.core import io, metrics, provenance
from spurious.core.data import squad
from spurious.core.train import qa
from spurious.workflow import runlog

if TYPE_CHECKING:
    from snakemake.iocontainers import snakemake

log = runlog.setup(snakemake)
frame = squad.read_qa_parquet(snakemake.input.data)
settings = dict(snakemake.params.settings, threads=snakemake.threads)
predictions = qa.predict_qa(snakemake.input.model, frame, settings=settings)
scored = metrics.score_predictions(frame, predictions)
totals = metrics.evaluate(frame, predictions)
log.info("EM %.2f F1 %.2f on %d questions", totals["exact_match"], totals["f1"], totals["n"])
w = snakemake.wildcards
io.write_parquet(scored, snakemake.output.predictions)
io.write_json(
    dict(totals, **snakemake.params.run, run=w.run, dataset=w.dataset, split=w.split),
    snakemake.output.metrics,
)
provenance.write_job(snakemake)  # what produced it, beside the first output
