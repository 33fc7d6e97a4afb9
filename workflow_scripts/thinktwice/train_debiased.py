"""Adapter: a model trained for the debiasing experiments: the matched control (plain), or a model debiased for one
heuristic by ReSam, LearnedMixin+H or Confidence Regularization, at its configured scale, the scale search's choice
or a search candidate's grid value. Checkpoints are removed only after success."""

import json
import shutil
from typing import TYPE_CHECKING

from spurious.core import data, io, launch, logits, provenance, qa
from spurious.core.io import file_sha256
from spurious.core.models import load_config
from spurious.thinktwice import debias
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
validation = data.read_qa_parquet(inp.validation)
curves = data.validation_curves(inp)
extra = {}
objective_factory = None
if method == "resam":
    train, extra["resampling"] = debias.resample_segments(
        data.read_qa_parquet(inp.train_biased),
        data.read_qa_parquet(inp.train_unbiased),
        policy=options["policy"],
        ratio=options["ratio"],
        seed=settings["seed"],
    )
    log.info("ReSam: %s", extra["resampling"])
else:
    train = data.read_qa_parquet(inp.train)
if method in ("lmix", "creg"):
    hidden_size = load_config(params.checkpoint).hidden_size

    def objective_factory(features):
        """Bias (and teacher) logits of exactly these training windows; a mismatch fails loudly. train_qa records
        the configured checkpoint name, max_length and stride on the features, so they make the fingerprint."""
        fingerprint = logits.features_fingerprint(features)
        bias_logits = logits.load_feature_logits(inp.bias_logits, fingerprint)
        if method == "lmix":
            return debias.LearnedMixinObjective(
                bias_logits,
                hidden_size=hidden_size,
                entropy_weight=options["entropy_weight"],
                scale=options["scale"],
                compat=options["compat"],
                mask_non_context=params.mask_non_context,
                entropy_on=options["entropy_on"],
                gate_input=options["gate_input"],
            )
        return debias.ConfidenceRegularizationObjective(
            bias_logits,
            logits.load_feature_logits(inp.teacher_logits, fingerprint),
            scale=options["scale"],
            compat=options["compat"],
            mask_non_context=params.mask_non_context,
        )


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
if method == "lmix":
    summary["gate"] = debias.gate_summary(summary["train_losses"])
io.write_json(summary, snakemake.output.summary)
shutil.rmtree(checkpoint_dir, ignore_errors=True)
provenance.write_job(snakemake)  # what produced it, beside the first output
