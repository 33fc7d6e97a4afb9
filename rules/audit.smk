# `spurious audit` as a workflow target (src/spurious/audit): one audit per entry of the config's `audit:` section.


rule audit:
    """Every diagnostic of the four papers that fits the model's task, in audit.json and one report.html page."""
    input:
        unpack(audit_inputs),
    output:
        json="results/audit/{name}/audit.json",
        html="results/audit/{name}/report.html",
    log:
        "results/logs/audit/{name}.log",
    benchmark:
        "results/benchmarks/audit/{name}.tsv"
    wildcard_constraints:
        name=r"[a-z0-9_]+",
    conda:
        "../envs/spurious.yaml"
    threads: 2
    resources:
        mem_mb=8000,
        runtime=60,
    params:
        spec=lambda w: AUDIT[w.name],
        # QA: the workflow's own bias settings and heuristics, so the audit of a workflow model repeats its numbers
        bias={
            k: config["bias"][k]
            for k in ("sample_size", "iterations", "with_replacement", "seed")
        },
        heuristics=config["heuristics"]["names"],
    script:
        "../workflow_scripts/audit/audit.py"
