"""Adapter: a seeded subset of a split."""

from typing import TYPE_CHECKING

from spurious import data, runlog

if TYPE_CHECKING:
    from snakemake.iocontainers import snakemake

log = runlog.setup(snakemake)
w = snakemake.wildcards
frame = data.read_qa_parquet(snakemake.input[0])
subset = data.sample_questions(frame, max_examples=int(w.n), seed=int(w.seed))
log.info("%d of %d questions (seed %s)", len(subset), len(frame), w.seed)
data.write_qa_parquet(
    subset,
    snakemake.output[0],
    metadata={"subset_of": str(snakemake.input[0]), "max_examples": int(w.n), "seed": int(w.seed), "n_questions": len(subset)},
)
