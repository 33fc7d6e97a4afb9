"""Adapter: results/index.html, the tables and figures of every report in results/ and links to the HTML reports."""

from glob import glob
from pathlib import Path
from typing import TYPE_CHECKING

from spurious.core import provenance
from spurious.workflow import results_index, runlog

if TYPE_CHECKING:
    from snakemake.iocontainers import snakemake

log = runlog.setup(snakemake)
reports = sorted(glob("results/report*.html")) + sorted(glob("results/audit/*/report.html"))
# the footer: what wrote this page, and which code and environments made the results it lists
record = provenance.job_record(snakemake)
results = [r for _, r in provenance.find_records(Path(snakemake.output[0]).parent) if r.get("rule") != "index"]
footer = provenance.footer_html(record, results)
listed = results_index.write_index(snakemake.params.entries, reports, snakemake.output[0], footer=footer)
provenance.write(record, provenance.record_path(snakemake.output[0]))
log.info("%d tables and figures and %d HTML reports listed in %s", listed, len(reports), snakemake.output[0])
