"""Adapter: the prediction-bias and thresholds tables, the scores table and Figure 2."""

from typing import TYPE_CHECKING

from spurious.core import io, provenance
from spurious.thinktwice import report
from spurious.workflow import runlog

if TYPE_CHECKING:
    from snakemake.iocontainers import snakemake

log = runlog.setup(snakemake)
out = snakemake.output
results = [io.read_json(path) for path in snakemake.input.bias]
metrics = [io.read_json(path) for path in snakemake.input.metrics]
# A model trained with several seeds gets one row per seed.
seeds: dict[str, set[int]] = {}
for r in results:
    if "model_seed" in r:
        seeds.setdefault(r["model"], set()).add(r["model_seed"])
paper_names = {model: name for model, name in snakemake.params.paper_names.items() if name}
paper_run = {}
for r in results:
    base = r["model"]
    if len(seeds.get(base, ())) > 1:
        r["model"] = f"{base} (seed {r['model_seed']})"
    if base in paper_names:
        paper_run[r["model"]] = paper_names[base]
paper_run = paper_run or None
log.info("%d bias results, %d metrics files, paper runs %s", len(results), len(metrics), paper_run)

report.write_table(report.bias_table(results, paper_run=paper_run), out.bias_csv, out.bias_md)
report.write_table(report.thresholds_table(results, paper_run=paper_run), out.thresholds_csv, out.thresholds_md)
report.write_table(report.scores_table(metrics), out.scores_csv, out.scores_md)
report.figure2(results, out.figure_png, out.figure_svg, title=snakemake.params.title)
provenance.write_job(snakemake)  # what produced it, beside the first output
