# Stage 6: the paper's tables and Figure 2, registered for `snakemake --report`.


localrules:
    report_tables,


rule report_tables:
    """Prediction-bias table (models and Human x heuristics), thresholds table (App. C), scores, Figure 2."""
    input:
        bias=bias_results(),
        metrics=metrics_files(),
    output:
        bias_csv=report(
            "results/report/bias_table.csv",
            caption="../report/bias_table.rst",
            category="Prediction bias",
        ),
        bias_md="results/report/bias_table.md",
        thresholds_csv=report(
            "results/report/thresholds.csv",
            caption="../report/thresholds.rst",
            category="Prediction bias",
        ),
        thresholds_md="results/report/thresholds.md",
        scores_csv=report(
            "results/report/scores.csv",
            caption="../report/scores.rst",
            category="Models",
        ),
        scores_md="results/report/scores.md",
        figure_png=report(
            "results/report/figure2.png",
            caption="../report/figure2.rst",
            category="Prediction bias",
        ),
        figure_svg="results/report/figure2.svg",
    log:
        "results/logs/report/tables.log",
    conda:
        "../envs/spurious.yaml"
    params:
        paper_names={name: m["paper_name"] for name, m in config["models"].items()},
        title=config["report"]["title"],
    script:
        "../workflow_scripts/report_tables.py"
