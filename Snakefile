"""spurious: measure and remove prediction shortcuts in NLP models.

Run `snakemake --cores 2` (the embedded config.yaml) or `snakemake --configfile configs/<name>.yaml`.
"""

import os
from pathlib import Path

from snakemake.exceptions import WorkflowError
from snakemake.utils import min_version

from spurious.core.data import hub
from spurious.lexical.track import WEIGHTING_WILDCARD
from spurious.spuriousbench.track import (
    CATEGORY_WILDCARD,
    FEATURE_VALUE_WILDCARD,
    SB_METHOD_WILDCARD,
)
from spurious.thinktwice.track import HEURISTIC_WILDCARD, METHOD_WILDCARD, RUN_WILDCARD
from spurious.workflow.config import validate_config
from spurious.workflow.slurm import (
    apply_size_requests,
    check_workflow,
    is_slurm_run,
    survive_time_limit_warning,
)

min_version("9.27")

# Inside a SLURM job Snakemake lives through SLURM's SIGUSR1 before the time limit, which the training process turns
# into a checkpoint and a failed job that the retry resumes (profiles/slurm: --signal=USR1@600; docs/slurm.md).
survive_time_limit_warning()


# No silent environment: conda deployment would run every rule in an environment resolved from envs/spurious.yaml's
# ranges on the day it is built, not in the tested one made from the lock files; it is refused at once, in one line.
try:
    hub.refuse_conda(workflow.deployment_settings.deployment_method)
except hub.DeploymentRefused as exc:
    raise WorkflowError(str(exc)) from None

# No job but the local rules (fetch_model, fetch_file, download) touches the network: every other job runs with the
# hub offline (jobs on SLURM inherit this environment) and loads what the local rules fetched (spurious.core.data.hub).
hub.offline_jobs()


# config.yaml is the embedded default; a --configfile REPLACES it (Snakemake would merge the two otherwise,
# mixing the demo's models into a paper run). --config key=value still overrides either.
if not workflow.overwrite_configfiles:

    configfile: "config.yaml"


# Validate against schemas/config.schema.yaml (defaults filled in); a bad key fails naming it.
config = validate_config(
    config, Path(workflow.basedir) / "schemas" / "config.schema.yaml"
)

# Before any job: a revision on a model that has none, a file a split is read from that is missing and that no rule
# can fetch (named with where to get it and its checksum), so that `snakemake -n` and `spurious plan` fail too.
_problems = hub.startup_problems(config, os.environ.get("SPURIOUS_DATA_MIRROR"))
if _problems:
    raise WorkflowError(
        "this config cannot run as it is:\n" + "\n".join(f"- {p}" for p in _problems)
    )


wildcard_constraints:
    dataset=r"[a-z0-9_]+",
    split=r"[a-z0-9_]+",
    model=r"[a-z0-9_]+",
    seed=r"\d+",
    annotator=r"[0-2]",
    heuristic=HEURISTIC_WILDCARD,
    run=RUN_WILDCARD,
    method=METHOD_WILDCARD,
    scale=r"\d+(\.\d+)?",
    threshold_split=r"[a-z0-9_]+",
    weighting=WEIGHTING_WILDCARD,
    category=CATEGORY_WILDCARD,
    fvalue=FEATURE_VALUE_WILDCARD,
    sb_method=SB_METHOD_WILDCARD,


include: "rules/common.smk"
include: "rules/thinktwice_functions.smk"
include: "rules/data.smk"
include: "rules/heuristics.smk"
include: "rules/train.smk"
include: "rules/predict.smk"
include: "rules/bias.smk"
include: "rules/debias.smk"
include: "rules/lexical_functions.smk"
include: "rules/lexical.smk"
include: "rules/aflite_functions.smk"
include: "rules/aflite.smk"
include: "rules/spurious_functions.smk"
include: "rules/spurious.smk"
include: "rules/audit_functions.smk"
include: "rules/audit.smk"
include: "rules/report.smk"
include: "rules/index.smk"


report: "report/workflow.rst"


# A resource the profile gives per size class, `by_size(small=..., large=...)` (profiles/slurm), becomes the value for
# the model each job trains or runs (MODEL_OF_RULE, spurious.workflow.sizes): a BiLSTM and RoBERTa-large ask differently.
apply_size_requests(workflow, MODEL_OF_RULE)


# Under the slurm executor, before the first submission: every job's CPUs, memory, GPUs and runtime against the
# largest node of its partition (sinfo). SLURM keeps a request no node can meet PENDING forever; this fails at once,
# naming the rule and the profile setting to change (spurious.workflow.slurm, docs/slurm.md).
onstart:
    if is_slurm_run(workflow):
        check_workflow(workflow)


rule all:
    default_target: True
    input:
        all_targets(),
