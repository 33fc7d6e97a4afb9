"""Adapter: results/index.html, the tables and figures of every report in results/ and links to the HTML reports."""

from glob import glob
from typing import TYPE_CHECKING

from spurious.core import results_index, runlog

if TYPE_CHECKING:
    from snakemake.iocontainers import snakemake

log = runlog.setup(snakemake)
reports = sorted(glob("results/report*.html")) + sorted(glob("results/audit/*/report.html"))
listed = results_index.write_index(snakemake.params.entries, reports, snakemake.output[0])
log.info("%d tables and figures and %d HTML reports listed in %s", listed, len(reports), snakemake.output[0])
