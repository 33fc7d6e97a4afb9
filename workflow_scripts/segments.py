"""Adapter: the split step, writing a split's biased and unbiased segments at a found threshold."""

from typing import TYPE_CHECKING

from spurious import bias, data, io, runlog

if TYPE_CHECKING:
    from snakemake.iocontainers import snakemake

log = runlog.setup(snakemake)
w = snakemake.wildcards
result = io.read_json(snakemake.input.bias)
if not result["found"]:
    raise ValueError(
        f"{snakemake.input.bias}: no threshold separates the segments of {w.heuristic} for {w.model} seed {w.seed} "
        f"on {w.dataset}/{w.split}, so there are no biased/unbiased segments to write; remove this entry from the "
        "config's 'segments' or choose another heuristic"
    )
frame = data.read_qa_parquet(snakemake.input.data)
values = data.read_heuristic_values(snakemake.input.heuristics, w.heuristic, frame["id"])
biased, unbiased = bias.split_by_threshold(frame, values, result["threshold"], result["biased_group"])
meta = {
    "heuristic": w.heuristic,
    "threshold": result["threshold"],
    "biased_group": result["biased_group"],
    "threshold_from": str(snakemake.input.bias),
    "n_biased": len(biased),
    "n_unbiased": len(unbiased),
    "n_excluded_sentinels": len(frame) - len(biased) - len(unbiased),
}
log.info("segments: %s", meta)
data.write_qa_parquet(biased, snakemake.output.biased, metadata=dict(meta, segment="biased"))
data.write_qa_parquet(unbiased, snakemake.output.unbiased, metadata=dict(meta, segment="unbiased"))
