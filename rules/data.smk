# Stage 1: datasets. Download (or read from the offline mirror), validate and normalise each declared split;
# derive train/validation splits where the config asks for it (QA by article title, classification at random, by
# first segment, or QNLI by SQuAD article with QNLI-style pairs from the other SQuAD questions).


localrules:
    download,


rule download:
    """Load one declared split (mirror > local path > hub), validate every record, write the normalised parquet."""
    output:
        "results/data/{dataset}/{split}.parquet",
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
