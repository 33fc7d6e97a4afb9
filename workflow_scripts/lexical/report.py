"""Adapter: Tables 1-3, App. A.1 and Figure 2 of the lexical track."""

from typing import TYPE_CHECKING

from spurious.core import io, provenance, readers
from spurious.core.report.tables import write_table
from spurious.lexical import report as lexical_report
from spurious.workflow import runlog

if TYPE_CHECKING:
    from snakemake.iocontainers import snakemake

log = runlog.setup(snakemake)
inp = snakemake.input
datasets = snakemake.params.datasets
paper_names = {name: spec["paper_name"] for name, spec in datasets.items()}
summaries = {d: io.read_json(inp[f"reweight__{d}"]) for d in datasets}
bigrams = {d: io.read_json(inp[f"bigrams__{d}"]) for d in datasets}
balances = {d: readers.read_csv(inp[f"balance__{d}"], keep_default_na=False) for d in datasets}
tops = {d: readers.read_csv(inp[f"top__{d}"], keep_default_na=False) for d in datasets}
results = [io.read_json(inp[f"permutation__{run}"]) for run in snakemake.params.runs]
metrics = [io.read_json(inp[f"metrics__{run}"]) for run in snakemake.params.runs]
log.info("%d datasets, %d model runs", len(datasets), len(results))

tables = {
    "table1": lexical_report.table1(summaries, paper_names, err_target=snakemake.params.err_target),
    "table2": lexical_report.table2(results, metrics, snakemake.params.models, paper_names),
    "table3": lexical_report.table3(bigrams, paper_names, err_target=snakemake.params.err_target),
    "appendix_a1": lexical_report.appendix_a1(tops, paper_names),
}
for name, table in tables.items():
    # Err values need three decimals
    write_table(table, snakemake.output[f"{name}_csv"], snakemake.output[f"{name}_md"], digits=3)
    log.info("%s:\n%s", name, table.to_string(max_colwidth=60))
lexical_report.figure2(balances, snakemake.output.figure2_png, snakemake.output.figure2_svg)
provenance.write_job(snakemake)  # what produced it, beside the first output
