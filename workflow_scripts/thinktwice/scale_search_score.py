"""Adapter: a scale-search candidate's in-distribution EM and F1 on (a seeded subset of) the validation split."""

from typing import TYPE_CHECKING

from spurious.core import io, metrics, provenance
from spurious.core.data import squad
from spurious.core.train import qa
from spurious.workflow import runlog

if TYPE_CHECKING:
    from snakemake.iocontainers import snakemake

log = runlog.setup(snakemake)
w = snakemake.wildcards
frame = qa.select_eval_subset(squad.read_qa_parquet(snakemake.input.data), snakemake.params.max_examples)
settings = dict(snakemake.params.settings, threads=snakemake.threads)
predictions = qa.predict_qa(snakemake.input.model, frame, settings=settings)
totals = metrics.evaluate(frame, predictions)
log.info(
    "%s scale %s: EM %.2f F1 %.2f on %d questions", w.method, w.scale, totals["exact_match"], totals["f1"], totals["n"]
)
io.write_json(
    dict(totals, method=w.method, heuristic=w.heuristic, scale=float(w.scale), seed=int(w.seed)), snakemake.output[0]
)
provenance.write_job(snakemake)  # what produced it, beside the first output
