"""Adapter: the split step, writing a split's biased and unbiased segments at a found threshold."""

from typing import TYPE_CHECKING

from spurious.core import io
from spurious.core.data import squad
from spurious.thinktwice import bias, heuristics
from spurious.workflow import runlog

if TYPE_CHECKING:
    from snakemake.iocontainers import snakemake

log = runlog.setup(snakemake)
w = snakemake.wildcards
if snakemake.params.fixed:  # debias.fixed_thresholds: given, not searched
    result = dict(snakemake.params.fixed, found=True)
    threshold_from = "debias.fixed_thresholds"
else:
    result = io.read_json(snakemake.input.bias)
    threshold_from = str(snakemake.input.bias)
if not result["found"]:
    raise ValueError(
        f"{snakemake.input.bias}: no threshold separates the segments of {w.heuristic} for {w.model} seed {w.seed} "
        f"on {w.dataset}/{w.threshold_split}, so there are no biased/unbiased segments of {w.split} to write; remove "
        "this entry from the config's 'segments' (or the heuristic from debias.heuristics) or choose another heuristic"
    )
frame = squad.read_qa_parquet(snakemake.input.data)
values = heuristics.read_heuristic_values(snakemake.input.heuristics, w.heuristic, frame["id"])
biased, unbiased = bias.split_by_threshold(
    frame,
    values,
    result["threshold"],
    result["biased_group"],
    heuristic=w.heuristic,
    compat_sentinels_in_low=snakemake.params.split_sentinels == "low",
)
meta = {
    "heuristic": w.heuristic,
    "threshold": result["threshold"],
    "biased_group": result["biased_group"],
    "threshold_from": threshold_from,
    "split_sentinels": snakemake.params.split_sentinels,
    "n_biased": len(biased),
    "n_unbiased": len(unbiased),
    "n_excluded_sentinels": len(frame) - len(biased) - len(unbiased),
}
log.info("segments: %s", meta)
squad.write_qa_parquet(biased, snakemake.output.biased, metadata=dict(meta, segment="biased"))
squad.write_qa_parquet(unbiased, snakemake.output.unbiased, metadata=dict(meta, segment="unbiased"))
