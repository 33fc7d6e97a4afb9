"""Adapter: the Human row, the minimum prediction bias over the three annotators."""

from typing import TYPE_CHECKING

from spurious.core import io
from spurious.thinktwice import bias
from spurious.workflow import runlog

if TYPE_CHECKING:
    from snakemake.iocontainers import snakemake

log = runlog.setup(snakemake)
per_annotator = [io.read_json(path) for path in snakemake.input]
result = bias.human_bias(per_annotator)
log.info("%s: Human prediction bias %.2f (annotator %s)", snakemake.wildcards.heuristic, result["prediction_bias"],
         result.get("annotator"))
io.write_json(result, snakemake.output[0])
