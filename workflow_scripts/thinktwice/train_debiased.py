"""Adapter: a model trained for the debiasing experiments: the matched control (plain), or a model debiased for one
heuristic by a method of ``spurious.thinktwice.track.METHODS`` (its training data and objective from its entry), at its
configured scale, the scale search's choice or a search candidate's grid value. Checkpoints are removed only after
success."""

import functools
import json
import shutil
from typing import TYPE_CHECKING

from spurious.core import io, provenance
from spurious.core.data import squad
from spurious.core.io import file_sha256
from spurious.core.train import launch, qa
from spurious.thinktwice import track
from spurious.workflow import runlog

if TYPE_CHECKING:
    from snakemake.iocontainers import snakemake

log = runlog.setup(snakemake)
w = snakemake.wildcards
params = snakemake.params
inp = snakemake.input
method, options = params.method, dict(params.method_config)
heuristic = getattr(w, "heuristic", None)
settings = launch.job_settings(params.settings, threads=snakemake.threads, resources=snakemake.resources)
checkpoint_dir = params.checkpoint_dir
if "scale" in options:
    # where the scale comes from is part of the run's record: the config, a search candidate or the search's choice
    if params.scale is not None:
        options["scale"], scale_source = float(params.scale), "scale search candidate"
    elif hasattr(inp, "scale_choice"):
        choice = io.read_json(inp.scale_choice)
        options["scale"], scale_source = float(choice["scale"]), f"scale search ({inp.scale_choice})"
        checkpoint_dir = f"{checkpoint_dir}/scale{options['scale']:g}"
    else:
        scale_source = "config"
    log.info("%s scale %s (%s)", method, options["scale"], scale_source)
validation = squad.read_qa_parquet(inp.validation)
curves = squad.validation_curves(inp)
spec = track.METHOD_OF.get(method)  # None for the matched control
method_run = track.MethodRun(inputs=inp, options=options, seed=settings["seed"], checkpoint=params.checkpoint,
                             mask_non_context=params.mask_non_context)
extra = {}
if spec is not None and spec.training_data is not None:
    train, extra = spec.training_data(method_run)
    log.info("%s training data: %s", method, extra)
else:
    train = squad.read_qa_parquet(inp.train)
objective_factory = None
if spec is not None and spec.objective is not None:
    objective_factory = functools.partial(spec.objective, method_run)

# The checkpoint folder is keyed by the settings; the logits' content goes into the run's fingerprint too, so a
# checkpoint trained against an older bias model's logits is never resumed against new ones.
stores = {key: file_sha256(inp[key]) for key in ("bias_logits", "teacher_logits") if hasattr(inp, key)}
log.info("%s for %s: %d training questions, settings %s, options %s", method, heuristic, len(train), settings, options)
summary = qa.train_qa(
    train,
    validation,
    model_name_or_path=params.checkpoint,
    output_dir=snakemake.output.model,
    checkpoint_dir=checkpoint_dir,
    settings=settings,
    log=log.info,
    objective_factory=objective_factory,
    objective_id=None
    if objective_factory is None
    else json.dumps({"method": method, **options, "mask": params.mask_non_context, "logits": stores}, sort_keys=True),
    extra_validation=curves,
)
middle = "" if heuristic is None else f"/{heuristic}"
run = f"{w.model}/{method}{middle}/seed{w.seed}"
if params.scale is not None:  # a search candidate, not the run of that name
    run = f"scale_search/{w.model}/{method}{middle}/scale{w.scale}/seed{w.seed}"
summary.update(model=w.model, run=run, method=method, addressed=heuristic, options=options, **extra)
if "scale" in options:
    summary.update(scale=options["scale"], scale_source=scale_source)
if spec is not None and spec.summary is not None:
    summary.update(spec.summary(summary))
io.write_json(summary, snakemake.output.summary)
shutil.rmtree(checkpoint_dir, ignore_errors=True)
provenance.write_job(snakemake)  # what produced it, beside the first output
