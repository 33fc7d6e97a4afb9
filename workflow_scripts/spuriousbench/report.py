"""Adapter: SpuriousBench tables (gaps per feature and per category, App. E sizes) and Figs. 1, 2 and 3."""

from typing import TYPE_CHECKING

from spurious.core import io, provenance
from spurious.core.report.tables import write_table
from spurious.spuriousbench import gap_figures
from spurious.spuriousbench import report as rep
from spurious.workflow import runlog

if TYPE_CHECKING:
    from snakemake.iocontainers import snakemake

log = runlog.setup(snakemake)
inp = snakemake.input
metrics = [io.read_json(inp[f"metrics__{key}"]) for key in snakemake.params.runs]
sizes = []
for dataset, spec in snakemake.params.datasets.items():
    for feature in spec["features"]:
        category, value = feature.split(":", 1)
        stats = io.read_json(inp[f"stats__{dataset}__{category}__{value}"])
        sizes.append(
            {
                "dataset": dataset,
                "feature": feature,
                "category": stats["category"],
                "kind": stats["kind"],
                "train": stats["train"]["size"],
                "dev": stats["dev"]["size"],
                "test_supporting": stats["test"]["n_supporting"],
                "test_counter": stats["test"]["n_counter"],
                "test_without": stats["test"]["n_without"],
                "train_prevalence": stats["train"]["prevalence"],
                "train_strength": stats["train"]["strength"],
                "dev_prevalence": stats["dev"]["prevalence"],
                "dev_strength": stats["dev"]["strength"],
            }
        )
log.info("%d model runs, %d features", len(metrics), len(sizes))
tables = {
    "gaps": rep.gap_table(metrics),
    "categories": rep.category_table(metrics),
    "sizes": rep.sizes_table(sizes),
}
for name, table in tables.items():
    write_table(table, snakemake.output[f"{name}_csv"], snakemake.output[f"{name}_md"], digits=rep.DIGITS)
    log.info("%s:\n%s", name, table.to_string(max_colwidth=40))
for line in rep.summary_lines(metrics):
    log.info("%s", line)
gap_figures.figure1(metrics, snakemake.output.figure1_png, snakemake.output.figure1_svg)
gap_figures.figure2(metrics, snakemake.output.figure2_png, snakemake.output.figure2_svg)
gap_figures.figure3(metrics, snakemake.output.figure3_png, snakemake.output.figure3_svg)
provenance.write_job(snakemake)  # what produced it, beside the first output
