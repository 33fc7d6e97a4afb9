"""Adapter: the scale search's choice (best in-distribution score; ties to the smaller scale) with every candidate."""

from typing import TYPE_CHECKING

from spurious.core import io
from spurious.thinktwice import debias
from spurious.workflow import runlog

if TYPE_CHECKING:
    from snakemake.iocontainers import snakemake

log = runlog.setup(snakemake)
candidates = [io.read_json(path) for path in snakemake.input]
choice = debias.choose_scale(candidates, metric=snakemake.params.metric)
choice.update(method=snakemake.wildcards.method, model=snakemake.wildcards.model, heuristic=snakemake.params.heuristic)
for c in choice["candidates"]:
    log.info("scale %g: %s %.2f", c["scale"], choice["metric"], c["score"])
log.info("chosen scale %g (%s %.2f)", choice["scale"], choice["metric"], choice["score"])
io.write_json(choice, snakemake.output[0])
