"""Adapter: Figure 4 (§5.2), models trained elsewhere at the reference model's thresholds, as a table and a plot."""

from typing import TYPE_CHECKING

from spurious.core import io, runlog
from spurious.thinktwice import report

if TYPE_CHECKING:
    from snakemake.iocontainers import snakemake

log = runlog.setup(snakemake)
inp = snakemake.input
reference = [io.read_json(path) for path in inp.reference]
fixed = [io.read_json(path) for path in inp.fixed]
human = [io.read_json(path) for path in inp.human] if hasattr(inp, "human") else []
table = report.figure4_table(reference, fixed, human)
log.info("Figure 4: %d models at %s's thresholds", table["model"].nunique() - bool(human), snakemake.params.reference)
report.write_table(table, snakemake.output.csv, snakemake.output.md)
report.figure2(
    [*reference, *fixed, *human],
    snakemake.output.png,
    snakemake.output.svg,
    title=f"Prediction bias at {snakemake.params.reference}'s thresholds (Figure 4)",
)
