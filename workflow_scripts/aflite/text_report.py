"""Adapter: Tables 3-4, the accuracy matrix and the iterations figure of AFLite's text experiments."""

from typing import TYPE_CHECKING

from spurious.aflite import report as aflite_text_report
from spurious.core import io, provenance, readers
from spurious.core.report.tables import write_table
from spurious.workflow import runlog

if TYPE_CHECKING:
    from snakemake.iocontainers import snakemake

log = runlog.setup(snakemake)
out = snakemake.output
files = dict(snakemake.input.items())  # named inputs: metrics__<run>, iterations__<dataset>, filter__<dataset>
metrics = [io.read_json(path) for key, path in files.items() if key.startswith("metrics__")]
iterations = {
    key.removeprefix("iterations__"): readers.read_csv(path)
    for key, path in files.items()
    if key.startswith("iterations__")
}
stopped = {}
for key, path in files.items():
    if key.startswith("filter__"):
        s = io.read_json(path)
        stopped[key.removeprefix("filter__")] = s["stopped"]
        log.info("%s: kept %d of %d pool and %d of %d dev examples in %d iterations (%s)", s["dataset"],
                 s["n_pool_kept"], s["n_pool"], s["n_dev_kept"], s["n_dev"], s["n_iterations"], s["stopped"])
tables = aflite_text_report.text_table(metrics, snakemake.params.paper_names)
# the paper prints accuracies at one decimal; the size rows are whole numbers
write_table(tables, out.tables_csv, out.tables_md, digits=1, whole_rows=aflite_text_report.size_rows(tables))
log.info("Tables 3-4:\n%s", tables.to_string())
matrix = aflite_text_report.accuracy_matrix(metrics)
write_table(matrix, out.accuracy_csv, out.accuracy_md, digits=1)
aflite_text_report.iterations_figure(iterations, out.iterations_png, out.iterations_svg, stopped=stopped)
provenance.write_job(snakemake)  # what produced it, beside the first output
