"""Adapter: Figure 4 (§5.2), the SQuAD model and the models trained elsewhere at one set of thresholds (figure4.
thresholds_from: App. C's published ones by default), as a table and a plot whose title names the source."""

from typing import TYPE_CHECKING

from spurious.core import io, provenance
from spurious.thinktwice import report
from spurious.workflow import runlog

if TYPE_CHECKING:
    from snakemake.iocontainers import snakemake

log = runlog.setup(snakemake)
inp = snakemake.input
reference = [io.read_json(path) for path in inp.reference] if hasattr(inp, "reference") else []
fixed = [io.read_json(path) for path in inp.fixed]
human = [io.read_json(path) for path in inp.human] if hasattr(inp, "human") else []
table = report.figure4_table(reference, fixed, human)
source = table.attrs["thresholds_from"]
log.info("Figure 4: %d models (reference %s), thresholds: %s", table["model"].nunique() - bool(human),
         snakemake.params.reference, source)
report.write_table(table, snakemake.output.csv, snakemake.output.md)
report.figure2(
    [*reference, *fixed, *human],
    snakemake.output.png,
    snakemake.output.svg,
    title=f"Figure 4: prediction bias at the thresholds of {source}",
)
provenance.write_job(snakemake)  # what produced it, beside the first output
