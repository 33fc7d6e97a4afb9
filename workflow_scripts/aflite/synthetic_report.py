"""Adapter: Table 7 and Fig. 2 of the synthetic AFLite experiment."""

from typing import TYPE_CHECKING

from spurious.aflite import synthetic as aflite_synthetic
from spurious.core import io, provenance
from spurious.core.report.tables import write_table
from spurious.workflow import runlog

if TYPE_CHECKING:
    from snakemake.iocontainers import snakemake

log = runlog.setup(snakemake)
runs = [io.read_json(path) for path in snakemake.input]
table = aflite_synthetic.table7(runs)
table.attrs["caption"] = (
    "Table 7: dev accuracy (%) of SVM-RBF and logistic regression on the synthetic datasets before (D) and after "
    "AFLite, mean and standard deviation over seeds; the paper's means beside ours."
)
write_table(table, snakemake.output.table_csv, snakemake.output.table_md)
log.info("Table 7:\n%s", table.to_string())
aflite_synthetic.figure2(runs, snakemake.output.figure_png, snakemake.output.figure_svg)
provenance.write_job(snakemake)  # what produced it, beside the first output
