"""Adapter: annotator k of the first three gold answers, scored against the other two."""

from typing import TYPE_CHECKING

from spurious.core import io
from spurious.core.data import squad
from spurious.thinktwice import bias
from spurious.workflow import runlog

if TYPE_CHECKING:
    from snakemake.iocontainers import snakemake

log = runlog.setup(snakemake)
frame = squad.read_qa_parquet(snakemake.input.data)
k = int(snakemake.wildcards.annotator)
scored, n_skipped = bias.human_scores(frame)[k], bias.human_skipped_count(frame)
log.info("annotator %d: %d questions scored, %d skipped (fewer than three gold answers)", k, len(scored), n_skipped)
w = snakemake.wildcards
io.write_parquet(scored, snakemake.output.predictions)
io.write_json(
    {
        "exact_match": float(scored["em"].mean()),
        "f1": float(scored["f1"].mean()),
        "n": len(scored),
        "n_skipped_fewer_than_3_answers": n_skipped,
        "model": "Human",
        "annotator": k,
        "dataset": w.dataset,
        "split": w.split,
    },
    snakemake.output.metrics,
)
