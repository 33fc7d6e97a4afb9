# SpuriousBench (an anonymous ICLR 2023 submission): per dataset, disjoint train / dev / test pools; per Table 1
# feature, a train and a dev split with the configured prevalence and strength and a test set in which the feature and
# the label are independent; per model, method and seed, a classifier and its spurious gap (acc supporting − acc
# counter) next to its in-distribution dev accuracy; Fig. 1, Fig. 2 and the App. E sizes. Outputs live under
# results/spurious/.


rule spurious_pools:
    """Disjoint train / dev / test pools (SST-2: whole sentences of GLUE train, detokenised; MNLI: 2-way)."""
    input:
        unpack(spurious_pool_inputs),
    output:
        train="results/spurious/{dataset}/pools/train.parquet",
        dev="results/spurious/{dataset}/pools/dev.parquet",
        test="results/spurious/{dataset}/pools/test.parquet",
        summary="results/spurious/{dataset}/pools/pools.json",
    log:
        "results/logs/spurious/pools_{dataset}.log",
    conda:
        "../envs/spurious.yaml"
    params:
        builder=lambda w: SPURIOUSBENCH["datasets"][w.dataset]["builder"],
        pools=lambda w: canonical(SPURIOUSBENCH["datasets"][w.dataset]["pools"]),
    script:
        "../workflow_scripts/spuriousbench/pools.py"


rule spurious_build:
    """One feature's train and dev splits (exact prevalence and strength) and its label-independent test set,
    with the measured prevalence, strength and sizes next to the configured ones."""
    input:
        train="results/spurious/{dataset}/pools/train.parquet",
        dev="results/spurious/{dataset}/pools/dev.parquet",
        test="results/spurious/{dataset}/pools/test.parquet",
    output:
        train="results/spurious/{dataset}/data/{category}/{fvalue}/train.parquet",
        dev="results/spurious/{dataset}/data/{category}/{fvalue}/dev.parquet",
        test="results/spurious/{dataset}/data/{category}/{fvalue}/test.parquet",
        stats="results/spurious/{dataset}/data/{category}/{fvalue}/stats.json",
    log:
        "results/logs/spurious/build_{dataset}_{category}_{fvalue}.log",
    benchmark:
        "results/benchmarks/spurious/build_{dataset}_{category}_{fvalue}.tsv"
    conda:
        "../envs/spurious.yaml"
    params:
        construction=lambda w: canonical(
            {
                key: SPURIOUSBENCH["datasets"][w.dataset][key]
                for key in ("train_size", "dev_size", "test_size", "test_feature_rate")
            }
            | {
                key: (
                    spurious_target_label(w.dataset)
                    if key == "target_label"
                    else SPURIOUSBENCH[key]
                )
                for key in ("prevalence", "strength", "target_label", "seed")
            }
        ),
    script:
        "../workflow_scripts/spuriousbench/build.py"


rule spurious_train:
    """A classifier on one feature's training split (finetune, balanced or prompt), the checkpoint of the best dev
    accuracy kept where eval_every is set. Resumable checkpoints live outside the outputs.
    """
    input:
        train="results/spurious/{dataset}/data/{category}/{fvalue}/train.parquet",
        dev="results/spurious/{dataset}/data/{category}/{fvalue}/dev.parquet",
        fetched=lambda w: model_record(SPURIOUSBENCH["models"][w.model]),
    output:
        model=directory(
            "results/spurious/{dataset}/models/{category}/{fvalue}/{model}/{sb_method}/seed{seed}/model"
        ),
        summary="results/spurious/{dataset}/models/{category}/{fvalue}/{model}/{sb_method}/seed{seed}/training.json",
    log:
        "results/logs/spurious/train_{dataset}_{category}_{fvalue}_{model}_{sb_method}_seed{seed}.log",
    benchmark:
        "results/benchmarks/spurious/train_{dataset}_{category}_{fvalue}_{model}_{sb_method}_seed{seed}.tsv"
    conda:
        "../envs/spurious.yaml"
    threads: 2
    resources:
        mem_mb=8000,
        runtime=240,
    params:
        checkpoint=lambda w: SPURIOUSBENCH["models"][w.model]["checkpoint"],
        init=lambda w: SPURIOUSBENCH["models"][w.model]["init"],
        target_label=lambda w: spurious_target_label(w.dataset),
        prompt=lambda w: canonical(spurious_prompt(w)),
        settings=rule_settings(spurious_training_settings),
        result_settings=rule_result_settings(spurious_training_settings),
        checkpoint_dir=lambda w: f"results/_checkpoints/spurious/{w.dataset}/{w.category}/{w.fvalue}/{w.model}/"
        + f"{w.sb_method}/seed{w.seed}/"
        + settings_key(spurious_training_settings(w)),
    script:
        "../workflow_scripts/spuriousbench/train.py"


rule spurious_predict:
    """Predictions on the test set and the dev set; the spurious gap, the accuracy per group and the ID accuracy."""
    input:
        model="results/spurious/{dataset}/models/{category}/{fvalue}/{model}/{sb_method}/seed{seed}/model",
        test="results/spurious/{dataset}/data/{category}/{fvalue}/test.parquet",
        dev="results/spurious/{dataset}/data/{category}/{fvalue}/dev.parquet",
    output:
        predictions="results/spurious/{dataset}/predictions/{category}/{fvalue}/{model}/{sb_method}/seed{seed}.parquet",
        metrics="results/spurious/{dataset}/predictions/{category}/{fvalue}/{model}/{sb_method}/seed{seed}.metrics.json",
    log:
        "results/logs/spurious/predict_{dataset}_{category}_{fvalue}_{model}_{sb_method}_seed{seed}.log",
    benchmark:
        "results/benchmarks/spurious/predict_{dataset}_{category}_{fvalue}_{model}_{sb_method}_seed{seed}.tsv"
    conda:
        "../envs/spurious.yaml"
    threads: 2
    resources:
        mem_mb=8000,
        runtime=60,
    params:
        settings=rule_settings(spurious_prediction_settings),
        result_settings=rule_result_settings(spurious_prediction_settings),
        init=lambda w: SPURIOUSBENCH["models"][w.model]["init"],
        paper_name=lambda w: SPURIOUSBENCH["models"][w.model]["paper_name"],
    script:
        "../workflow_scripts/spuriousbench/predict.py"


rule spurious_icl:
    """In-context learning (§5): a causal LM prompted with demonstrations drawn from the feature's training split at
    the model's icl prevalence and strength (a new draw per seed), predicting the test and dev sets; the same
    metrics as spurious_predict. No training."""
    input:
        train="results/spurious/{dataset}/data/{category}/{fvalue}/train.parquet",
        test="results/spurious/{dataset}/data/{category}/{fvalue}/test.parquet",
        dev="results/spurious/{dataset}/data/{category}/{fvalue}/dev.parquet",
        fetched=lambda w: model_record(SPURIOUSBENCH["models"][w.model]),
    output:
        predictions="results/spurious/{dataset}/predictions/{category}/{fvalue}/{model}/icl/seed{seed}.parquet",
        metrics="results/spurious/{dataset}/predictions/{category}/{fvalue}/{model}/icl/seed{seed}.metrics.json",
    log:
        "results/logs/spurious/icl_{dataset}_{category}_{fvalue}_{model}_seed{seed}.log",
    benchmark:
        "results/benchmarks/spurious/icl_{dataset}_{category}_{fvalue}_{model}_seed{seed}.tsv"
    conda:
        "../envs/spurious.yaml"
    threads: 2
    resources:
        mem_mb=16000,
        runtime=120,
    params:
        checkpoint=lambda w: SPURIOUSBENCH["models"][w.model]["checkpoint"],
        builder=lambda w: SPURIOUSBENCH["datasets"][w.dataset]["builder"],
        icl=lambda w: canonical(SPURIOUSBENCH["models"][w.model]["icl"]),
        target_label=lambda w: spurious_target_label(w.dataset),
        paper_name=lambda w: SPURIOUSBENCH["models"][w.model]["paper_name"],
    script:
        "../workflow_scripts/spuriousbench/icl.py"


rule spurious_report:
    """Spurious gaps per feature and per category (mean and spread over seeds), the App. E sizes, Figs. 1, 2 (the
    fine-tuning methods) and 3 (in-context learning)."""
    input:
        unpack(spurious_report_inputs),
    output:
        gaps_csv=report(
            "results/report/spurious/gaps.csv",
            caption="../report/spurious_gaps.rst",
            category="SpuriousBench",
        ),
        gaps_md="results/report/spurious/gaps.md",
        categories_csv=report(
            "results/report/spurious/categories.csv",
            caption="../report/spurious_categories.rst",
            category="SpuriousBench",
        ),
        categories_md="results/report/spurious/categories.md",
        sizes_csv=report(
            "results/report/spurious/sizes.csv",
            caption="../report/spurious_sizes.rst",
            category="SpuriousBench",
        ),
        sizes_md="results/report/spurious/sizes.md",
        figure1_png=report(
            "results/report/spurious/figure1.png",
            caption="../report/spurious_figure1.rst",
            category="SpuriousBench",
        ),
        figure1_svg="results/report/spurious/figure1.svg",
        figure2_png=report(
            "results/report/spurious/figure2.png",
            caption="../report/spurious_figure2.rst",
            category="SpuriousBench",
        ),
        figure2_svg="results/report/spurious/figure2.svg",
        figure3_png=report(
            "results/report/spurious/figure3.png",
            caption="../report/spurious_figure3.rst",
            category="SpuriousBench",
        ),
        figure3_svg="results/report/spurious/figure3.svg",
    log:
        "results/logs/spurious/report.log",
    conda:
        "../envs/spurious.yaml"
    params:
        runs=lambda w: unordered(spurious_run_keys()),
        datasets=canonical(SPURIOUSBENCH["datasets"]) if SPURIOUSBENCH else None,
    script:
        "../workflow_scripts/spuriousbench/report.py"
