# AFLite (Le Bras et al. 2020). The synthetic experiment (§3, App. A.3): one job per separation and seed generates
# the concentric-circles data with bias features, scores SVM-RBF and logistic regression, filters with AFLite and
# scores again; the report collects Table 7 and Fig. 2.


rule aflite_synthetic:
    """One synthetic dataset: accuracies before and after AFLite, the kept points and the bias features removed."""
    output:
        "results/aflite/synthetic/sep{separation}/seed{seed}.json",
    log:
        "results/logs/aflite/synthetic_sep{separation}_seed{seed}.log",
    benchmark:
        "results/benchmarks/aflite/synthetic_sep{separation}_seed{seed}.tsv"
    wildcard_constraints:
        separation=r"0\.\d+",
    conda:
        "../envs/spurious.yaml"
    threads: 1
    params:
        settings=lambda w: {
            k: v
            for k, v in AFLITE["synthetic"].items()
            if k not in ("separations", "seeds")
        },
    script:
        "../workflow_scripts/aflite_synthetic.py"


rule aflite_synthetic_report:
    """Table 7 (mean ± std over seeds, the paper's values beside) and Fig. 2 (the first seed's data before and
    after filtering, per separation)."""
    input:
        lambda w: aflite_synthetic_files(),
    output:
        table_csv=report(
            "results/report/aflite/table7.csv",
            caption="../report/aflite_table7.rst",
            category="AFLite",
        ),
        table_md="results/report/aflite/table7.md",
        figure_png=report(
            "results/report/aflite/figure2.png",
            caption="../report/aflite_figure2.rst",
            category="AFLite",
        ),
        figure_svg="results/report/aflite/figure2.svg",
    log:
        "results/logs/aflite/synthetic_report.log",
    conda:
        "../envs/spurious.yaml"
    script:
        "../workflow_scripts/aflite_synthetic_report.py"
