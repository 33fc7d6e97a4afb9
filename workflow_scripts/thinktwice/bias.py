"""Adapter: prediction bias of one run (a model seed or an annotator) on one split for one heuristic."""

from typing import TYPE_CHECKING

from spurious.core import io, readers
from spurious.thinktwice import bias, heuristics
from spurious.workflow import runlog

if TYPE_CHECKING:
    from snakemake.iocontainers import snakemake

log = runlog.setup(snakemake)
w = snakemake.wildcards
predictions = readers.read_parquet(snakemake.input.predictions, columns=["id", "em", "f1"])
values = heuristics.read_heuristic_values(snakemake.input.heuristics, w.heuristic, predictions["id"])
result = bias.search_threshold(
    values,
    predictions["em"].to_numpy(),
    predictions["f1"].to_numpy(),
    heuristic=w.heuristic,
    sample_size=snakemake.params.sample_size,
    iterations=snakemake.params.iterations,
    seed=snakemake.params.seed,
    with_replacement=snakemake.params.with_replacement,
    allow_too_few_rows=snakemake.params.allow_too_few_rows,
)
# "seed" in the result is the bootstrap's sampling seed; the model's training seed is "model_seed".
run = snakemake.params.run
if run["model"] == "human":
    identity = {"model": "Human", "annotator": run["annotator"]}
else:
    identity = {
        "model": run["model"], "model_seed": run["seed"], "method": run["method"], "addressed": run["addressed"]
    }
result = {**identity, "run": w.run, "dataset": w.dataset, "split": w.split, **result}
log.info(
    "%s: found %s, threshold %s, prediction bias %.2f%s", w.heuristic, result["found"], result["threshold"],
    result["prediction_bias"],
    "" if result["found"] else f" (no threshold: {bias.NOT_FOUND_REASONS[result['reason']]})",
)
io.write_json(result, snakemake.output[0])
