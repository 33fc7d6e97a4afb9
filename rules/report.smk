# Stage 6: the paper's tables and figures, registered for `snakemake --report`.


localrules:
    report_tables,
    debias_report,
    figure4_report,


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
        paper_names=canonical(
            {name: m["paper_name"] for name, m in config["models"].items()}
        ),
        title=config["report"]["title"],
    script:
        "../workflow_scripts/thinktwice/report_tables.py"


rule debias_report:
    """The debiasing tables and figures: Table 1 (OOD differences), Fig. 5 (bias and worse-segment EM per method),
    the cross-bias matrix (Figs. 6/7), Fig. 3 (OOD scores), the loss curves (Figs. 8-9) and the bias models' gaps.
    """
    input:
        predictions=lambda w: [
            f"results/predictions/{run}/{e['dataset']}/{e['split']}.parquet"
            for run in evaluated_runs()
            for e in config["evaluate"]
        ],
        metrics=lambda w: metrics_files(evaluated_runs(), human=False),
        bias=lambda w: bias_results(evaluated_runs(), human=False),
        summaries=lambda w: [
            f"results/models/{run}/training.json"
            for run in evaluated_runs() + bias_model_runs()
        ],
    output:
        table1_csv=report(
            "results/report/debias/table1.csv",
            caption="../report/table1.rst",
            category="Debiasing",
        ),
        table1_md="results/report/debias/table1.md",
        methods_bias_csv=report(
            "results/report/debias/methods_bias.csv",
            caption="../report/methods_bias.rst",
            category="Debiasing",
        ),
        methods_bias_md="results/report/debias/methods_bias.md",
        cross_bias_csv="results/report/debias/cross_bias.csv",
        cross_bias_md="results/report/debias/cross_bias.md",
        bias_models_csv=report(
            "results/report/debias/bias_models.csv",
            caption="../report/bias_models.rst",
            category="Debiasing",
        ),
        bias_models_md="results/report/debias/bias_models.md",
        figure5_png=report(
            "results/report/debias/figure5.png",
            caption="../report/figure5.rst",
            category="Debiasing",
        ),
        figure5_svg="results/report/debias/figure5.svg",
        cross_bias_png=report(
            "results/report/debias/cross_bias.png",
            caption="../report/cross_bias.rst",
            category="Debiasing",
        ),
        cross_bias_svg="results/report/debias/cross_bias.svg",
        figure3_png=report(
            "results/report/debias/figure3.png",
            caption="../report/figure3.rst",
            category="Debiasing",
        ),
        figure3_svg="results/report/debias/figure3.svg",
        loss_curves_png=report(
            "results/report/debias/loss_curves.png",
            caption="../report/loss_curves.rst",
            category="Debiasing",
        ),
        loss_curves_svg="results/report/debias/loss_curves.svg",
        figure6_png=report(
            "results/report/debias/figure6.png",
            caption="../report/figure6.rst",
            category="Debiasing",
        ),
        figure6_svg="results/report/debias/figure6.svg",
        runs_csv=report(
            "results/report/debias/runs.csv",
            caption="../report/debias_runs.rst",
            category="Debiasing",
        ),
        runs_md="results/report/debias/runs.md",
    log:
        "results/logs/report/debias.log",
    conda:
        "../envs/spurious.yaml"
    params:
        paper_name=lambda w: config["models"][DEBIAS["model"]]["paper_name"],
        id_dataset=lambda w: canonical(config["models"][DEBIAS["model"]]["validation"]),
        evaluate=lambda w: canonical(config["evaluate"]),
        original_matches_control=lambda w: original_matches_control(),
        loss_curve_max_steps=lambda w: DEBIAS["report"]["loss_curve_max_steps"],
    script:
        "../workflow_scripts/thinktwice/debias_report.py"


rule figure4_report:
    """Figure 4 (§5.2): the models trained on other datasets against the reference model, on figure4's split at the
    reference's thresholds, beside the Human row."""
    input:
        unpack(figure4_inputs),
    output:
        csv=report(
            "results/report/figure4.csv",
            caption="../report/figure4.rst",
            category="Prediction bias",
        ),
        md="results/report/figure4.md",
        png=report(
            "results/report/figure4.png",
            caption="../report/figure4.rst",
            category="Prediction bias",
        ),
        svg="results/report/figure4.svg",
    log:
        "results/logs/report/figure4.log",
    conda:
        "../envs/spurious.yaml"
    params:
        reference=lambda w: FIGURE4["reference"]["model"],
    script:
        "../workflow_scripts/thinktwice/figure4_report.py"
