# Stage 5: prediction bias (paper §3, Algorithm 1, App. C): threshold search with bootstrapped intervals, per
# (run, dataset, split, heuristic); the Human row; and the reusable split step that writes a heuristic's
# biased and unbiased segments.


rule bias:
    """Search the heuristic's threshold maximising the EM-interval distance between its two segments."""
    input:
        predictions="results/predictions/{run}/{dataset}/{split}.parquet",
        heuristics="results/heuristics/{dataset}/{split}.parquet",
    output:
        "results/bias/{run}/{dataset}/{split}/{heuristic}.json",
    log:
        "results/logs/bias/{run}/{dataset}_{split}_{heuristic}.log",
    benchmark:
        "results/benchmarks/bias/{run}/{dataset}_{split}_{heuristic}.tsv"
    conda:
        "../envs/spurious.yaml"
    threads: 1
    resources:
        mem_mb=BIAS_SEARCH_MEM_MB,
        runtime=BIAS_SEARCH_RUNTIME,
    params:
        **bias_search_settings(),
        run=lambda w: parse_run(w.run),
    script:
        "../workflow_scripts/thinktwice/bias.py"


rule human_bias:
    """Natural (Human) prediction bias: the minimum over the three annotators (paper §3, Interpretation)."""
    input:
        expand(
            "results/bias/human/annotator{annotator}/{{dataset}}/{{split}}/{{heuristic}}.json",
            annotator=HUMAN_ANNOTATORS,
        ),
    output:
        "results/bias/human/{dataset}/{split}/{heuristic}.json",
    log:
        "results/logs/bias/human/{dataset}_{split}_{heuristic}.log",
    conda:
        "../envs/spurious.yaml"
    threads: 1
    resources:
        mem_mb=BIAS_SEARCH_MEM_MB,
        runtime=BIAS_SEARCH_RUNTIME,
    script:
        "../workflow_scripts/thinktwice/human_bias.py"


rule segments:
    """The split step: a split's biased and unbiased segments at the threshold that a model's bias search found on
    threshold_split (the split itself, or e.g. validation for cutting the training data, paper App. C).
    """
    input:
        bias=lambda w: (
            []
            if w.threshold_split == "fixed"
            else f"results/bias/{w.model}/seed{w.seed}/{w.dataset}/{w.threshold_split}/{w.heuristic}.json"
        ),
        heuristics="results/heuristics/{dataset}/{split}.parquet",
        data=lambda w: split_file(w.dataset, w.split),
    output:
        biased="results/segments/{model}/seed{seed}/{dataset}/{split}/{heuristic}/by_{threshold_split}/biased.parquet",
        unbiased="results/segments/{model}/seed{seed}/{dataset}/{split}/{heuristic}/by_{threshold_split}/unbiased.parquet",
    log:
        "results/logs/segments/{model}_seed{seed}_{dataset}_{split}_{heuristic}_by_{threshold_split}.log",
    conda:
        "../envs/spurious.yaml"
    params:
        split_sentinels=config["bias"]["split_sentinels"],
        fixed=lambda w: canonical(
            DEBIAS["fixed_thresholds"].get(w.heuristic)
            if DEBIAS and w.threshold_split == "fixed"
            else None
        ),
    script:
        "../workflow_scripts/thinktwice/segments.py"
