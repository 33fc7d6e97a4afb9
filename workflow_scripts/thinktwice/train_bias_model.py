"""Adapter: a bias model, trained on the biased training segment; the kept checkpoint maximises the F1 gap between
the biased and unbiased validation segments (App. B.2.1). Checkpoints are removed only after success."""

import shutil
from typing import TYPE_CHECKING

from spurious.core import io, provenance
from spurious.core.data import squad
from spurious.core.train import launch, qa
from spurious.workflow import runlog

if TYPE_CHECKING:
    from snakemake.iocontainers import snakemake

log = runlog.setup(snakemake)
w = snakemake.wildcards
params = snakemake.params
train = squad.read_qa_parquet(snakemake.input.train)
validation = squad.read_qa_parquet(snakemake.input.validation)
segments = {name: squad.read_qa_parquet(snakemake.input[f"valid_{name}"]) for name in ("biased", "unbiased")}
settings = launch.job_settings(params.settings, threads=snakemake.threads, resources=snakemake.resources)
log.info(
    "bias model for %s: %d biased training questions; selection on %d biased / %d unbiased validation questions "
    "(at most %s each); init %s, trainable %s; unbiased-F1 cap %s",
    w.heuristic,
    len(train),
    len(segments["biased"]),
    len(segments["unbiased"]),
    params.selection_max_examples,
    params.init,
    params.trainable,
    params.max_unbiased_f1,
)
summary = qa.train_qa(
    train,
    validation,
    model_name_or_path=params.checkpoint,
    output_dir=snakemake.output.model,
    checkpoint_dir=params.checkpoint_dir,
    settings=settings,
    log=log.info,
    selection=qa.segment_gap_selection(
        segments["biased"],
        segments["unbiased"],
        settings=settings,
        max_examples=params.selection_max_examples,
        max_unbiased_f1=params.max_unbiased_f1,
    ),
    init=params.init,
    trainable=params.trainable,
)
if summary["best_step"] is None:
    raise RuntimeError(
        f"bias model for {w.heuristic}: no evaluated checkpoint had an F1 below {params.max_unbiased_f1} on the "
        "unbiased validation segment (debias.bias_model.max_unbiased_f1); evaluate earlier and more often "
        "(bias_model.training.eval_every), lower the learning rate, or raise the cap. History: "
        + "; ".join(
            f"step {h['step']}: unbiased F1 {h['f1_unbiased']:.1f}, gap {h['f1_gap']:.1f}"
            for h in summary["selection_history"]
        )
    )
run = f"{w.model}/biasmodel/{w.heuristic}/seed{w.seed}"
summary.update(model=w.model, run=run, method="biasmodel", addressed=w.heuristic, checkpoint=params.checkpoint)
io.write_json(summary, snakemake.output.summary)
shutil.rmtree(params.checkpoint_dir, ignore_errors=True)
provenance.write_job(snakemake)  # what produced it, beside the first output
