"""Adapter: a seeded subset of a split (QA questions or classification examples)."""

from typing import TYPE_CHECKING

from spurious.core.data import classification, squad
from spurious.workflow import runlog

if TYPE_CHECKING:
    from snakemake.iocontainers import snakemake

log = runlog.setup(snakemake)
w = snakemake.wildcards
is_qa = snakemake.params.task == "qa"
frame = squad.read_qa_parquet(snakemake.input[0]) if is_qa else classification.read_parquet(snakemake.input[0])
subset = squad.sample_questions(frame, max_examples=int(w.n), seed=int(w.seed))
subset.attrs.update(frame.attrs)
log.info("%d of %d examples (seed %s)", len(subset), len(frame), w.seed)
meta = {"subset_of": str(snakemake.input[0]), "max_examples": int(w.n), "seed": int(w.seed)}
if is_qa:
    squad.write_qa_parquet(subset, snakemake.output[0], metadata={**meta, "n_questions": len(subset)})
else:
    classification.write_parquet(subset, snakemake.output[0], metadata={**meta, "n_examples": len(subset)})
