# results/index.html: every table and figure in results/, by paper, with its caption and a thumbnail, and links to
# the HTML reports (spurious.workflow.results_index). Part of `all`; `make report*` reruns it after writing the
# Snakemake report, so that the index links it.


localrules:
    index,


rule index:
    """One page that lists every report table and figure written so far (by this config or another run in the same
    folder), with their captions, and links the HTML reports and audit pages."""
    input:
        report_targets(),
    output:
        "results/index.html",
    log:
        "results/logs/index.log",
    conda:
        "../envs/spurious.yaml"
    params:
        entries=lambda w: index_entries(),
    script:
        "../workflow_scripts/common/index.py"
