# The Stubborn Lexical Bias track (Serrano, Dodge, Smith 2023) on classification datasets: z-scored lexical
# features, reweighting q (Table 1, Fig. 2), bigrams (Table 3), classifiers on uniform vs q weights and the exact
# permutation test on their predictions (Table 2). Outputs live under results/lexical/<dataset>/.


rule lexical_features:
    """z-scores of every (type, label) on the training split and the top-k types per label (stop words excluded)."""
    input:
        train=lambda w: lexical_split(w.dataset, "train"),
    output:
        zscores="results/lexical/{dataset}/zscores.parquet",
        top="results/lexical/{dataset}/top_features.csv",
    log:
        "results/logs/lexical/features_{dataset}.log",
    benchmark:
        "results/benchmarks/lexical/features_{dataset}.tsv"
    conda:
        "../envs/spurious.yaml"
    params:
        counting=config["lexical"]["counting"] if LEXICAL else None,
        top_k=config["lexical"]["top_k"] if LEXICAL else None,
        stop_words=config["lexical"]["stop_words"] if LEXICAL else None,
    script:
        "../workflow_scripts/lexical/features.py"


rule lexical_reweight:
    """Instance weights q = softmax(z) balancing every frequent type's labels (paper §5.1); Err(uniform), Err(q)."""
    input:
        train=lambda w: lexical_split(w.dataset, "train"),
    output:
        weights="results/lexical/{dataset}/reweight/weights.parquet",
        summary="results/lexical/{dataset}/reweight/summary.json",
        objective="results/lexical/{dataset}/reweight/objective.csv",
    log:
        "results/logs/lexical/reweight_{dataset}.log",
    benchmark:
        "results/benchmarks/lexical/reweight_{dataset}.tsv"
    # first when it can run: every q-weighted classifier waits on it
    priority: 10
    conda:
        "../envs/spurious.yaml"
    threads: 2
    resources:
        mem_mb=16000,
        runtime=60,
    params:
        settings=rule_settings(lambda w: LEXICAL["reweight"]),
        result_settings=rule_result_settings(lambda w: LEXICAL["reweight"]),
    script:
        "../workflow_scripts/lexical/reweight.py"


rule lexical_bigrams:
    """Err of sampled bigrams (present in every label) under uniform weights and under the unigram q (Table 3)."""
    input:
        train=lambda w: lexical_split(w.dataset, "train"),
        weights="results/lexical/{dataset}/reweight/weights.parquet",
    output:
        "results/lexical/{dataset}/bigrams.json",
    log:
        "results/logs/lexical/bigrams_{dataset}.log",
    benchmark:
        "results/benchmarks/lexical/bigrams_{dataset}.tsv"
    conda:
        "../envs/spurious.yaml"
    params:
        bigrams=canonical(config["lexical"]["bigrams"]) if LEXICAL else None,
    script:
        "../workflow_scripts/lexical/bigrams.py"


rule lexical_balance:
    """Label balance of the evaluation features under uniform weights and under q (Fig. 2)."""
    input:
        unpack(lexical_balance_inputs),
    output:
        "results/lexical/{dataset}/balance.csv",
    log:
        "results/logs/lexical/balance_{dataset}.log",
    benchmark:
        "results/benchmarks/lexical/balance_{dataset}.tsv"
    conda:
        "../envs/spurious.yaml"
    script:
        "../workflow_scripts/lexical/balance.py"


rule lexical_train:
    """Fine-tune a classifier on the training split, each example's loss multiplied by 1 (uniform) or q_i·|D| (q).
    Resumable checkpoints live outside the outputs, keyed by the settings."""
    input:
        unpack(lexical_train_inputs),
        fetched=lambda w: model_record(LEXICAL["models"][w.model]),
    output:
        model=directory(
            "results/lexical/{dataset}/models/{model}/{weighting}/seed{seed}/model"
        ),
        summary="results/lexical/{dataset}/models/{model}/{weighting}/seed{seed}/training.json",
    log:
        "results/logs/lexical/train_{dataset}_{model}_{weighting}_seed{seed}.log",
    benchmark:
        "results/benchmarks/lexical/train_{dataset}_{model}_{weighting}_seed{seed}.tsv"
    conda:
        "../envs/spurious.yaml"
    threads: 2
    resources:
        mem_mb=8000,
        runtime=600,
    params:
        checkpoint=lambda w: LEXICAL["models"][w.model].get("checkpoint"),
        init=lambda w: LEXICAL["models"][w.model]["init"],
        settings=rule_settings(lexical_training_settings),
        result_settings=rule_result_settings(lexical_training_settings),
        checkpoint_dir=lambda w: f"results/_checkpoints/lexical/{w.dataset}/{w.model}/{w.weighting}/seed{w.seed}/"
        + settings_key(lexical_training_settings(w)),
    script:
        "../workflow_scripts/lexical/train.py"


rule lexical_predict:
    """Predictions of a classifier on the test split: id, label, prediction, correct, probabilities."""
    input:
        model="results/lexical/{dataset}/models/{model}/{weighting}/seed{seed}/model",
        test=lambda w: lexical_split(w.dataset, "test"),
    output:
        predictions="results/lexical/{dataset}/predictions/{model}/{weighting}/seed{seed}.parquet",
        metrics="results/lexical/{dataset}/predictions/{model}/{weighting}/seed{seed}.metrics.json",
    log:
        "results/logs/lexical/predict_{dataset}_{model}_{weighting}_seed{seed}.log",
    benchmark:
        "results/benchmarks/lexical/predict_{dataset}_{model}_{weighting}_seed{seed}.tsv"
    conda:
        "../envs/spurious.yaml"
    threads: 2
    resources:
        mem_mb=8000,
        runtime=60,
    params:
        settings=rule_settings(lexical_prediction_settings),
        result_settings=rule_result_settings(lexical_prediction_settings),
    script:
        "../workflow_scripts/lexical/predict.py"


rule lexical_permutation:
    """The exact one-sided permutation test of a model's predictions on the usual vs unusual test instances."""
    input:
        zscores="results/lexical/{dataset}/zscores.parquet",
        top="results/lexical/{dataset}/top_features.csv",
        test=lambda w: lexical_split(w.dataset, "test"),
        predictions="results/lexical/{dataset}/predictions/{model}/{weighting}/seed{seed}.parquet",
    output:
        "results/lexical/{dataset}/permutation/{model}/{weighting}/seed{seed}.json",
    log:
        "results/logs/lexical/permutation_{dataset}_{model}_{weighting}_seed{seed}.log",
    benchmark:
        "results/benchmarks/lexical/permutation_{dataset}_{model}_{weighting}_seed{seed}.tsv"
    conda:
        "../envs/spurious.yaml"
    params:
        counting=config["lexical"]["counting"] if LEXICAL else None,
    script:
        "../workflow_scripts/lexical/permutation.py"


rule lexical_report:
    """Tables 1-3 and App. A.1 (CSV + Markdown, the paper's values beside ours for paper datasets), Fig. 2."""
    input:
        unpack(lexical_report_inputs),
    output:
        table1_csv=report(
            "results/report/lexical/table1.csv",
            caption="../report/lexical_table1.rst",
            category="Lexical bias",
        ),
        table1_md="results/report/lexical/table1.md",
        table2_csv=report(
            "results/report/lexical/table2.csv",
            caption="../report/lexical_table2.rst",
            category="Lexical bias",
        ),
        table2_md="results/report/lexical/table2.md",
        table3_csv=report(
            "results/report/lexical/table3.csv",
            caption="../report/lexical_table3.rst",
            category="Lexical bias",
        ),
        table3_md="results/report/lexical/table3.md",
        appendix_a1_csv=report(
            "results/report/lexical/appendix_a1.csv",
            caption="../report/lexical_appendix_a1.rst",
            category="Lexical bias",
        ),
        appendix_a1_md="results/report/lexical/appendix_a1.md",
        figure2_png=report(
            "results/report/lexical/figure2.png",
            caption="../report/lexical_figure2.rst",
            category="Lexical bias",
        ),
        figure2_svg="results/report/lexical/figure2.svg",
    log:
        "results/logs/lexical/report.log",
    conda:
        "../envs/spurious.yaml"
    params:
        datasets=lambda w: canonical(LEXICAL["datasets"]),
        models=lambda w: canonical(
            {
                name: {k: m[k] for k in ("init", "paper_name", "seeds", "weightings")}
                for name, m in LEXICAL["models"].items()
            }
        ),
        runs=lambda w: unordered(lexical_runs()),
        err_target=canonical(LEXICAL["err_target"]) if LEXICAL else None,
        run_name=config["run_name"],
    script:
        "../workflow_scripts/lexical/report.py"
