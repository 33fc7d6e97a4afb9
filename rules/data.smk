# Stage 1: datasets. Download (or read from the offline mirror), validate and normalise each declared split;
# derive train/validation splits where the config asks for it (QA by article title, classification at random, by
# first segment, or QNLI by SQuAD article with QNLI-style pairs from the other SQuAD questions).


# The local rules are the only jobs that touch the network (Snakemake runs them itself, on the machine it runs on: the
# login node of a cluster); every other job runs with the hub offline and reads what they fetched.
localrules:
    download,
    fetch_model,
    fetch_file,


rule fetch_model:
    """Fetch a checkpoint the config names into the Hugging Face cache at its revision (or record the revision the
    hub resolves now), or describe a package model or a local folder: its fetch record, which every job that loads
    the model takes as an input (spurious.core.data.hub)."""
    input:
        lambda w: (
            [FETCHED_MODELS[w.ref]["checkpoint"]]
            if hub.is_local_checkpoint(FETCHED_MODELS[w.ref]["checkpoint"])
            else []
        ),
    output:
        "results/sources/models/{ref}.json",
    log:
        "results/logs/sources/fetch_model_{ref}.log",
    wildcard_constraints:
        ref=r"[^/]+",
    conda:
        "../envs/spurious.yaml"
    params:
        checkpoint=lambda w: FETCHED_MODELS[w.ref]["checkpoint"],
        revision=lambda w: FETCHED_MODELS[w.ref]["revision"],
    script:
        "../workflow_scripts/common/fetch_model.py"


rule fetch_file:
    """Download a file a split is read from (its fetch.url), checked against the config's sha256 and size (or its
    checksum recorded, where the config gives none), and write its fetch record."""
    output:
        file="{fetched_file}",
        record="results/sources/files/{fetched_file}.json",
    log:
        "results/logs/sources/fetch_file_{fetched_file}.log",
    wildcard_constraints:
        fetched_file=FETCHED_FILE,
    conda:
        "../envs/spurious.yaml"
    params:
        fetch=lambda w: canonical(FETCHED_FILES[w.fetched_file]),
    script:
        "../workflow_scripts/common/fetch_file.py"


rule download:
    """Load one declared split (mirror > local path > hub), validate every record, write the normalised parquet and
    the split's fetch record (the hub commit loaded, or the file's sha256)."""
    input:
        unpack(download_inputs),
    output:
        "results/data/{dataset}/{split}.parquet",
        record="results/sources/datasets/{dataset}/{split}.json",
    log:
        "results/logs/data/download_{dataset}_{split}.log",
    conda:
        "../envs/spurious.yaml"
    params:
        source=lambda w: canonical(config["datasets"][w.dataset]["splits"][w.split]),
        task=lambda w: config["datasets"][w.dataset]["task"],
        on_invalid=lambda w: config["datasets"][w.dataset]["on_invalid"],
    script:
        "../workflow_scripts/common/download.py"


rule derive_splits:
    """Split one split into train/validation with a seed: QA by article title (no article on both sides),
    classification at random, stratified by label, (by: text_a) with every first segment on one side only, or (by:
    squad_article) QNLI by the SQuAD article of its questions, optionally with QNLI-style pairs built from the
    training articles' other SQuAD questions (spaCy sentence boundaries).
    """
    input:
        unpack(derive_inputs),
    output:
        train="results/data/{dataset}/derived_s{seed}/train.parquet",
        validation="results/data/{dataset}/derived_s{seed}/validation.parquet",
    log:
        "results/logs/data/derive_{dataset}_s{seed}.log",
    conda:
        "../envs/spurious.yaml"
    params:
        validation_fraction=lambda w: canonical(
            config["datasets"][w.dataset]["derive"]["validation_fraction"]
        ),
        task=lambda w: config["datasets"][w.dataset]["task"],
        by=lambda w: config["datasets"][w.dataset]["derive"]["by"],
        squad_pairs=lambda w: config["datasets"][w.dataset]["derive"].get(
            "squad_pairs", False
        ),
    script:
        "../workflow_scripts/common/derive_splits.py"


rule subset:
    """A seeded subset of a split (datasets.<name>.subsets), e.g. a smaller training set for a CPU demo."""
    input:
        "results/data/{dataset}/{source}.parquet",
    output:
        "results/data/{dataset}/{source}.n{n}_s{seed}.parquet",
    log:
        "results/logs/data/subset_{dataset}_{source}.n{n}_s{seed}.log",
    wildcard_constraints:
        source=r"(derived_s\d+/)?[a-z0-9_]+",
        n=r"\d+",
    conda:
        "../envs/spurious.yaml"
    params:
        task=lambda w: config["datasets"][w.dataset]["task"],
    script:
        "../workflow_scripts/common/subset.py"
