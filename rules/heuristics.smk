# Stage 2: the seven Think Twice heuristics (paper §4.1), one column per heuristic, one file per split.


rule heuristics:
    """Annotate every question of a split with the configured heuristics."""
    input:
        unpack(tfidf_reference_input),
        data=lambda w: split_file(w.dataset, w.split),
    output:
        "results/heuristics/{dataset}/{split}.parquet",
    log:
        "results/logs/heuristics/{dataset}_{split}.log",
    benchmark:
        "results/benchmarks/heuristics/{dataset}_{split}.tsv"
    conda:
        "../envs/spurious.yaml"
    threads: config["heuristics"]["threads"]
    resources:
        mem_mb=4000,
    params:
        **heuristic_definitions(),
    script:
        "../workflow_scripts/thinktwice/heuristics.py"
