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
        spec=lambda w: canonical(AUDIT[w.name]),
        # QA: the dicts the heuristics and bias rules take their params from (rules/thinktwice_functions.smk): the
        # same heuristic definitions (names, compat, variants) and the same search settings and small-sample rule,
        # so the audit of a workflow model repeats the workflow's numbers
        bias=canonical(bias_search_settings()),
        heuristics=canonical(heuristic_definitions()),
    script:
        "../workflow_scripts/audit/audit.py"
