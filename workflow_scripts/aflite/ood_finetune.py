"""Adapter: fine-tune an AFLite text model on an out-of-distribution training split (Table 2's protocol); the
checkpoint folder is removed only after success."""

import shutil
from typing import TYPE_CHECKING

from spurious.aflite import ood as aflite_ood
from spurious.core import io, provenance
from spurious.core.data import classification
from spurious.core.train import classifier, launch
from spurious.workflow import runlog

if TYPE_CHECKING:
    from snakemake.iocontainers import snakemake

log = runlog.setup(snakemake)
p = snakemake.params
train = classification.read_parquet(snakemake.input.train)
aflite_ood.check_same_labels(snakemake.input.model, train.attrs["label_names"], source=snakemake.input.train)
summary = classifier.train_classifier(
    train,
    model_name_or_path=snakemake.input.model,
    output_dir=snakemake.output.model,
    checkpoint_dir=p.checkpoint_dir,
    settings=launch.job_settings(p.settings, threads=snakemake.threads, resources=snakemake.resources),
    init="pretrained",
    log=log.info,
)
summary.update(dict(snakemake.wildcards.items()), initial_model=snakemake.input.model, n_train=len(train))
io.write_json(summary, snakemake.output.summary)
shutil.rmtree(p.checkpoint_dir, ignore_errors=True)
provenance.write_job(snakemake)  # what produced it, beside the first output
