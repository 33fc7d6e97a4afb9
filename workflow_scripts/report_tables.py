"""Adapter: the prediction-bias and thresholds tables, the scores table and Figure 2."""

from typing import TYPE_CHECKING

from spurious import io, report, runlog

if TYPE_CHECKING:
    from snakemake.iocontainers import snakemake

log = runlog.setup(snakemake)
out = snakemake.output
results = [io.read_json(path) for path in snakemake.input.bias]
metrics = [io.read_json(path) for path in snakemake.input.metrics]
paper_names = {k: v for k, v in snakemake.params.paper_names.items() if v}
paper_run = next(iter(paper_names.values()), None)
log.info("%d bias results, %d metrics files, paper run %s", len(results), len(metrics), paper_run)

bias_table = report.bias_table(results, paper_run=paper_run)
report.write_table(bias_table, out.bias_csv, out.bias_md, caption=report.bias_caption(results, snakemake.params.title))
thresholds = report.thresholds_table(results, paper_run=paper_run)
report.write_table(thresholds, out.thresholds_csv, out.thresholds_md, caption="Thresholds and segment sizes (App. C)")
scores = report.scores_table(metrics)
report.write_table(scores, out.scores_csv, out.scores_md, caption="SQuAD v1.1 EM / F1")
report.figure2(results, out.figure_png, out.figure_svg)
