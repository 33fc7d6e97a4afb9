# What every track's rules use: the normalised split files, the derivations, the settings params, the all
# target and the index of the report files. Each track's own helpers are in rules/<track>_functions.smk (Think
# Twice: thinktwice_functions.smk).

import hashlib
import json
import os
import re

from snakemake.io import is_flagged

from spurious.core.data import hub
from spurious.core.config import RuleSettings, canonical, result_settings, unordered
from spurious.core.train.prediction_settings import CLASSIFIER_PREDICTION_KEYS


def split_file(dataset, split):
    """The normalised parquet of a (dataset, split); derived splits carry their derivation seed in the path and
    subsets their source, size and seed."""
    ds = config["datasets"][dataset]
    subset = ds.get("subsets", {}).get(split)
    if subset:
        source = split_file(dataset, subset["from"])
        return (
            source.removesuffix(".parquet")
            + f".n{subset['max_examples']}_s{subset['seed']}.parquet"
        )
    derive = ds.get("derive")
    if derive and split in ("train", "validation"):
        return f"results/data/{dataset}/derived_s{derive['seed']}/{split}.parquet"
    return f"results/data/{dataset}/{split}.parquet"


# Fetch records (spurious.core.data.hub): the local rules fetch_model, fetch_file and download write them; every job that
# loads a model takes its model's record as an input, and loads the fetched folder through it, offline.
# record file name -> {checkpoint, revision, where}
FETCHED_MODELS = hub.fetched_models(config)
# path -> {url, sha256, size, where}: the files splits are read from that the config says where to get
FETCHED_FILES = hub.file_fetches(config)
FETCHED_FILE = (
    "|".join(re.escape(p) for p, f in FETCHED_FILES.items() if f.get("url")) or "(?!)"
)


def model_record(entry):
    """The fetch record of a config model entry (a mapping with `checkpoint` and an optional `revision`); nothing
    for an entry without a checkpoint (the BiLSTM control)."""
    if not entry or not entry.get("checkpoint"):
        return []
    return hub.model_record_path(entry["checkpoint"], entry.get("revision"))


def download_inputs(wildcards):
    """A split read from a path that the config says how to fetch: the file (fetched by fetch_file when it has a
    url) and, for a fetched one, its fetch record; nothing for other splits."""
    source = config["datasets"][wildcards.dataset]["splits"][wildcards.split]
    path, fetch = source.get("path"), source.get("fetch")
    if not (path and fetch):
        return {}
    inputs = {"file": path}
    if fetch.get("url"):
        inputs["file_record"] = hub.file_record_path(path)
    return inputs


def derive_inputs(wildcards):
    """The split a derivation starts from and, for a QNLI split by SQuAD article, the SQuAD split it was built from."""
    derive = config["datasets"][wildcards.dataset]["derive"]
    inputs = {"source": split_file(wildcards.dataset, derive["from"])}
    if derive.get("by") == "squad_article":
        inputs["squad"] = split_file(
            derive["squad"]["dataset"], derive["squad"]["split"]
        )
    return inputs


# What a GPU job trains or runs, by the name of its rule (a function of the job's wildcards giving its model's config
# entry and where in the config that entry is). Each track adds its rules; profiles/slurm asks for such a job's
# GPUs, memory, runtime and partition by the model's size class (`by_size(...)`, docs/slurm.md).
MODEL_OF_RULE = {}


def all_targets():
    segments = segment_files() if config["models"] else []
    return report_targets() + segments + ["results/index.html"]


def report_targets():
    """Every table, figure and page the config's reports write (the index rule's inputs)."""
    targets = report_files() if config["models"] else []
    if LEXICAL:
        targets += lexical_report_files()
    if AFLITE:
        targets += aflite_report_files()
    if SPURIOUSBENCH:
        targets += spurious_report_files()
    if DEBIAS:
        targets += debias_report_files()
    if AUDIT:
        targets += audit_report_files()
    if FIGURE4:
        targets += expand("results/report/{name}", name=FIGURE4_REPORT)
    return targets


# results/index.html (rules/index.smk) lists the report files by paper: the paper of each report() category.
INDEX_PAPERS = {
    "Prediction bias": "Think Twice (Mikula et al., EACL 2024)",
    "Models": "Think Twice (Mikula et al., EACL 2024)",
    "Debiasing": "Think Twice (Mikula et al., EACL 2024)",
    "Lexical bias": "Stubborn Lexical Bias (Serrano, Dodge, Smith, ACL Findings 2023)",
    "AFLite": "AFLite (Le Bras et al., ICML 2020)",
    "SpuriousBench": "SpuriousBench (an anonymous ICLR 2023 submission)",
}


def index_entries():
    """Every output any rule registers for the report (``report()``, whatever the config), with its caption's text,
    its paper (INDEX_PAPERS; an unknown category is its own section) and the outputs of the same rule and name
    written with it (the Markdown beside a CSV, the SVG beside a PNG). Called when the DAG is built, when every
    rule exists."""
    entries = []
    for r in workflow.rules:
        outputs = [str(f) for f in r.output]
        for f in r.output:
            if not is_flagged(f, "report"):
                continue
            flag = f.flags["report"]
            # read as `snakemake --report` reads it (also when the workflow runs as a module from elsewhere)
            caption = (
                workflow.sourcecache.open(flag.caption).read() if flag.caption else ""
            )
            stem = os.path.splitext(str(f))[0]
            entries.append(
                {
                    "path": str(f),
                    "caption": caption,
                    "paper": INDEX_PAPERS.get(flag.category, flag.category or "Other"),
                    "siblings": [
                        o
                        for o in outputs
                        if o != str(f) and os.path.splitext(o)[0] == stem
                    ],
                }
            )
    return entries


def settings_key(settings):
    """The checkpoint folder's key: a hash of the result-changing settings only, so that a run whose device or
    checkpoint interval changed still resumes from its checkpoints."""
    payload = json.dumps(result_settings(settings), sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()[:12]


# Params compare by content: Snakemake's params rerun trigger compares each param's repr, so every param derived from
# the config goes through `canonical` (mappings in sorted key order, 3.0 as 3; spurious.core.config), and a list whose
# order only follows the config's mappings (a report's runs) through `unordered`. A config that differs only in key
# order, quoting or number formatting then reruns nothing (tests/core/test_rerun.py checks every shipped config).
#
# Settings params: `settings` is a RuleSettings (the script reads every key; Snakemake's params rerun trigger skips
# it), `result_settings` the result-changing part as a plain dict (compared by the trigger). Changing an execution
# setting (spurious.core.config.RUNTIME_SETTINGS: device, bf16, threads, checkpoint_every, eval_batch_size,
# pad_to_multiple_of, compile, ...) reruns no job.


def rule_settings(settings_of):
    return lambda w: RuleSettings(settings_of(w))


def rule_result_settings(settings_of):
    return lambda w: result_settings(settings_of(w))


def prediction_settings(settings, keys):
    """The subset of a model's training settings that its predictions read."""
    return {k: settings[k] for k in keys}


# One threshold search (rules bias, human_bias, bias_fixed_threshold): seconds of one core on a few thousand rows
# (a Python process with pandas and numpy, about 0.3 GB resident). On SLURM the searches of one run form a group
# job, which asks for these times the searches that run at once (at most the profile's `cores`, 8) and for the sum
# of the runtimes of its layers (docs/slurm.md).
BIAS_SEARCH_MEM_MB = 2000
BIAS_SEARCH_RUNTIME = 15
