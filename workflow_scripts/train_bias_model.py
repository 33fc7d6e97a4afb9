"""Adapter: a bias model, trained on the biased training segment; the kept checkpoint maximises the F1 gap between
the biased and unbiased validation segments (App. B.2.1). Checkpoints are removed only after success."""

import shutil
from typing import TYPE_CHECKING

from spurious import data, io, qa, runlog

if TYPE_CHECKING:
    from snakemake.iocontainers import snakemake

log = runlog.setup(snakemake)
w = snakemake.wildcards
params = snakemake.params
train = data.read_qa_parquet(snakemake.input.train)
validation = data.read_qa_parquet(snakemake.input.validation)
segments = {name: data.read_qa_parquet(snakemake.input[f"valid_{name}"]) for name in ("biased", "unbiased")}
settings = dict(params.settings, threads=snakemake.threads)
log.info(
    "bias model for %s: %d biased training questions; selection on %d biased / %d unbiased validation questions "
    "(at most %s each); init %s",
    w.heuristic,
    len(train),
    len(segments["biased"]),
    len(segments["unbiased"]),
    params.selection_max_examples,
    params.init,
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
        segments["biased"], segments["unbiased"], settings=settings, max_examples=params.selection_max_examples
    ),
    init=params.init,
)
run = f"{w.model}/biasmodel/{w.heuristic}/seed{w.seed}"
summary.update(model=w.model, run=run, method="biasmodel", addressed=w.heuristic, checkpoint=params.checkpoint)
io.write_json(summary, snakemake.output.summary)
shutil.rmtree(params.checkpoint_dir, ignore_errors=True)
