"""Adapter: prediction bias of a run on one split at Figure 4's threshold (§5.2): the paper's published App. C one
(thresholds_from: appendix_c) or the one a run's own search found there."""

from typing import TYPE_CHECKING

from spurious.core import io, readers
from spurious.thinktwice import bias, heuristics, paper_values
from spurious.workflow import runlog

if TYPE_CHECKING:
    from snakemake.iocontainers import snakemake

log = runlog.setup(snakemake)
w = snakemake.wildcards
if snakemake.params.thresholds_from == "appendix_c":
    reference = paper_values.appendix_c_reference(w.heuristic)
    threshold_from = paper_values.APPENDIX_C_SOURCE
else:
    reference = io.read_json(snakemake.input.reference)
    threshold_from = f"{reference['run']} on {reference['dataset']}/{reference['split']}"
run = snakemake.params.run
identity = {"model": run["model"], "model_seed": run["seed"], "method": run["method"], "addressed": run["addressed"]}
meta = {
    **identity,
    "run": w.run,
    "dataset": w.dataset,
    "split": w.split,
    "threshold_from": threshold_from,
}
if not reference["found"]:
    # No threshold on the reference split: nothing to apply; reported as 0, as the paper reports a missing one.
    result = {**meta, "heuristic": w.heuristic, "found": False, "reason": "no_reference_threshold", "threshold": None,
              "prediction_bias": 0.0}
    log.info("%s: no threshold on %s", w.heuristic, meta["threshold_from"])
else:
    predictions = readers.read_parquet(snakemake.input.predictions, columns=["id", "em", "f1"])
    values = heuristics.read_heuristic_values(snakemake.input.heuristics, w.heuristic, predictions["id"])
    result = bias.measure_at_threshold(
        values,
        predictions["em"].to_numpy(),
        predictions["f1"].to_numpy(),
        reference["threshold"],
        heuristic=w.heuristic,
        sample_size=snakemake.params.sample_size,
        iterations=snakemake.params.iterations,
        seed=snakemake.params.seed,
        with_replacement=snakemake.params.with_replacement,
        allow_too_few_rows=snakemake.params.allow_too_few_rows,
    )
    result = {**meta, **result}
    log.info(
        "%s at %s's threshold %s: bias %.2f",
        w.heuristic, meta["threshold_from"], result["threshold"], result["prediction_bias"],
    )
io.write_json(result, snakemake.output[0])
