"""Adapter: a classifier on one feature's training split (standard, balanced, prompt-based or BitFit fine-tuning); the
checkpoint folder is removed only after success."""

import shutil
from typing import TYPE_CHECKING

from spurious.core import io, provenance
from spurious.core.train import classifier, launch, prompt
from spurious.spuriousbench import construction as sb
from spurious.workflow import runlog

if TYPE_CHECKING:
    from snakemake.iocontainers import snakemake

log = runlog.setup(snakemake)
w = snakemake.wildcards
train = sb.read_split(snakemake.input.train)
dev = sb.read_split(snakemake.input.dev)
settings = launch.job_settings(snakemake.params.settings, threads=snakemake.threads, resources=snakemake.resources)
if w.sb_method == "balanced":
    before = len(train)
    train = sb.balance_supporting_counter(train, target_label=snakemake.params.target_label, seed=int(w.seed))
    log.info("balanced training set: %d rows (from %d), supporting = counter", len(train), before)
spec = None
if snakemake.params.prompt is not None:
    p = snakemake.params.prompt
    spec = (
        prompt.PAPER_PROMPTS[p["paper"]] if "paper" in p else prompt.PromptSpec(p["template"], tuple(p["label_words"]))
    )
    log.info("prompt-based fine-tuning: template %r, label words %s", spec.template, spec.label_words)
summary = classifier.train_classifier(
    train,
    model_name_or_path=snakemake.params.checkpoint,
    output_dir=snakemake.output.model,
    checkpoint_dir=snakemake.params.checkpoint_dir,
    settings=settings,
    init=snakemake.params.init,
    eval_frame=dev if settings.get("eval_every") else None,
    prompt=spec,
    trainable="bitfit" if w.sb_method == "bitfit" else "all",
    log=log.info,
)
summary.update(
    dataset=w.dataset,
    feature=sb.feature_from_path(f"{w.category}/{w.fvalue}"),
    model=w.model,
    method=w.sb_method,
    seed=int(w.seed),
    n_train=len(train),
)
io.write_json(summary, snakemake.output.summary)
shutil.rmtree(snakemake.params.checkpoint_dir, ignore_errors=True)
provenance.write_job(snakemake)  # what produced it, beside the first output
