"""Adapter: the debiasing tables and figures (Table 1, Fig. 5, cross-bias matrix and Fig. 6, Fig. 3, loss curves with
the LMix gate, bias models, the runs with their scales)."""

from typing import TYPE_CHECKING

from spurious.core import io, provenance
from spurious.thinktwice import debias_report, report
from spurious.workflow import runlog

if TYPE_CHECKING:
    from snakemake.iocontainers import snakemake

log = runlog.setup(snakemake)
out = snakemake.output
inp = snakemake.input
metrics = [io.read_json(path) for path in inp.metrics]
bias_results = [io.read_json(path) for path in inp.bias]
# results/predictions/<run>/<dataset>/<split>.parquet
predictions = {}
for path in inp.predictions:
    *run, dataset, _split = str(path).removeprefix("results/predictions/").split("/")
    predictions["/".join(run), dataset] = path
runs_meta = list(
    {m["run"]: {k: m[k] for k in ("run", "model", "seed", "method", "addressed")} for m in metrics}.values()
)
id_ref = snakemake.params.id_dataset
ood = sorted({e["dataset"] for e in snakemake.params.evaluate if e["dataset"] != id_ref["dataset"]})
paper = snakemake.params.paper_name if snakemake.params.paper_name == "BERT-Base" else None
log.info("%d runs, OOD datasets %s, paper %s", len(runs_meta), ood, paper)

matches = snakemake.params.original_matches_control
if ood:
    table1 = debias_report.table1(
        predictions, runs_meta, datasets=ood, paper_name=paper, original_matches_control=matches
    )
else:  # no OOD set configured: the in-distribution differences, so the table is never silently empty
    table1 = debias_report.table1(
        predictions, runs_meta, datasets=[id_ref["dataset"]], paper_name=None, original_matches_control=matches
    )
debias_report.write_table1(table1, out.table1_csv, out.table1_md)

id_results = dict(dataset=id_ref["dataset"], split=id_ref["split"])
report.write_table(
    debias_report.methods_bias_table(bias_results, **id_results, paper_name=paper),
    out.methods_bias_csv,
    out.methods_bias_md,
)
debias_report.figure5(bias_results, out.figure5_png, out.figure5_svg, **id_results)
report.write_table(
    debias_report.cross_bias_table(bias_results, **id_results, paper_name=paper), out.cross_bias_csv, out.cross_bias_md
)
debias_report.figure_cross_bias(bias_results, out.cross_bias_png, out.cross_bias_svg, **id_results)
debias_report.figure6(bias_results, out.figure6_png, out.figure6_svg, **id_results)
originals = [m for m in metrics if m["method"] == "original"]
debias_report.figure3(originals, out.figure3_png, out.figure3_svg)

# training.json files: the runs' identity is in their path (results/models/<run>/training.json)
summaries = []
for path in inp.summaries:
    run = str(path).removeprefix("results/models/").removesuffix("/training.json")
    parts = run.split("/")
    summary = io.read_json(path)
    method = "original" if len(parts) == 2 else parts[1]
    addressed = parts[2] if len(parts) == 4 else None
    summaries.append(
        dict(
            summary, run=run, model=parts[0], seed=int(parts[-1].removeprefix("seed")), method=method,
            addressed=addressed,
        )
    )
# Figs. 8-9 show the first 10,000 steps: debias.report.loss_curve_max_steps (null = every step)
debias_report.figure_loss_curves(
    [s for s in summaries if s["method"] != "biasmodel"], out.loss_curves_png, out.loss_curves_svg,
    max_step=snakemake.params.loss_curve_max_steps,
)
runs = debias_report.runs_table(summaries, metrics, id_dataset=id_ref["dataset"], id_split=id_ref["split"])
for row in runs.itertuples():
    log.info(
        "%s: scale %s (%s), ID EM %.2f, EM / control %.3f",
        row.run, row.scale, row.scale_source, row.id_em, row.em_vs_control,
    )
report.write_table(runs, out.runs_csv, out.runs_md)
bias_models = debias_report.bias_models_table([s for s in summaries if s["method"] == "biasmodel"])
for row in bias_models.itertuples():
    log.info(
        "bias model %s: F1 biased %.2f, unbiased %.2f, gap %.2f", row.run, row.f1_biased, row.f1_unbiased, row.f1_gap
    )
report.write_table(bias_models, out.bias_models_csv, out.bias_models_md)
provenance.write_job(snakemake)  # what produced it, beside the first output
