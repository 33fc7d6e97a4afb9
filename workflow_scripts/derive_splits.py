"""Adapter: derive train/validation from one split by article title."""

from typing import TYPE_CHECKING

from spurious import data, runlog

if TYPE_CHECKING:
    from snakemake.iocontainers import snakemake

log = runlog.setup(snakemake)
seed = int(snakemake.wildcards.seed)
frame = data.read_qa_parquet(snakemake.input[0])
train, validation = data.split_by_title(frame, validation_fraction=snakemake.params.validation_fraction, seed=seed)
for name, part in (("train", train), ("validation", validation)):
    meta = {
        "derived_from": str(snakemake.input[0]),
        "by": "title",
        "seed": seed,
        "validation_fraction": snakemake.params.validation_fraction,
        "n_questions": len(part),
        "n_titles": int(part["title"].nunique()),
    }
    log.info("%s: %d questions from %d articles", name, meta["n_questions"], meta["n_titles"])
    data.write_qa_parquet(part, snakemake.output[name], metadata=meta)
