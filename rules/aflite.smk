# AFLite (Le Bras et al. 2020). The synthetic experiment (§3, App. A.3): one job per separation and seed generates
# the concentric-circles data with bias features, scores SVM-RBF and logistic regression, filters with AFLite and
# scores again; the report collects Table 7 and Fig. 2.
# The text experiments (§4): warm-up split -> warm-up fine-tune -> embeddings (.npy) -> AFLite over the training
# pool and the dev set (resumable per iteration) -> D, D_rand, D(AFLite) -> classifiers -> predictions on the
# original dev set (accuracy on it and on its filtered part) -> Tables 3-4 and the iterations figure. A dataset's
# `filters.<name>` sets filter the same pool representations again with other settings (App. A.5: n = 182K for
# SNLI's out-of-distribution models), pool alone, into filter_<name>/ and the train sets random_<name>, aflite_<name>.


rule aflite_synthetic:
    """One synthetic dataset: accuracies before and after AFLite, the kept points and the bias features removed."""
    output:
        "results/aflite/synthetic/sep{separation}/seed{seed}.json",
    log:
        "results/logs/aflite/synthetic_sep{separation}_seed{seed}.log",
    benchmark:
        "results/benchmarks/aflite/synthetic_sep{separation}_seed{seed}.tsv"
    wildcard_constraints:
        separation=SEPARATION_WILDCARD,
    conda:
        "../envs/spurious.yaml"
    threads: 1
    params:
        settings=lambda w: canonical(
            {
                k: v
                for k, v in AFLITE["synthetic"].items()
                if k not in ("separations", "seeds")
            }
        ),
    script:
        "../workflow_scripts/aflite/synthetic.py"


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
        "../workflow_scripts/aflite/synthetic_report.py"


rule aflite_warmup_split:
    """Take the warm-up fraction out of the training split (stratified by label); the rest is the pool D."""
    input:
        lambda w: aflite_train_split(w.dataset),
    output:
        pool="results/aflite/text/{dataset}/data/pool.parquet",
        warmup="results/aflite/text/{dataset}/data/warmup.parquet",
    log:
        "results/logs/aflite/warmup_split_{dataset}.log",
    conda:
        "../envs/spurious.yaml"
    params:
        fraction=lambda w: canonical(aflite_representation()["warmup"]["fraction"]),
        seed=lambda w: aflite_representation()["warmup"]["seed"],
    script:
        "../workflow_scripts/aflite/warmup_split.py"


rule aflite_warmup:
    """Fine-tune the encoder on the warm-up fraction; its representations are what AFLite filters on."""
    input:
        train="results/aflite/text/{dataset}/data/warmup.parquet",
        fetched=lambda w: model_record(aflite_representation()),
    output:
        model=directory("results/aflite/text/{dataset}/warmup/model"),
        summary="results/aflite/text/{dataset}/warmup/training.json",
    log:
        "results/logs/aflite/warmup_{dataset}.log",
    benchmark:
        "results/benchmarks/aflite/warmup_{dataset}.tsv"
    conda:
        "../envs/spurious.yaml"
    threads: 2
    resources:
        mem_mb=8000,
        runtime=240,
    params:
        checkpoint=lambda w: aflite_representation()["checkpoint"],
        init="pretrained",
        settings=rule_settings(aflite_warmup_settings),
        result_settings=rule_result_settings(aflite_warmup_settings),
        checkpoint_dir=lambda w: f"results/_checkpoints/aflite/{w.dataset}/warmup/"
        + settings_key(aflite_warmup_settings(w)),
    script:
        "../workflow_scripts/aflite/train.py"


rule aflite_embed:
    """Φ(X): pooled encoder representations of the pool and the dev set (row order = the parquet files'), or the
    user's features (representation.source file)."""
    input:
        unpack(aflite_embed_inputs),
        fetched=lambda w: (
            model_record(aflite_representation())
            if aflite_representation()["source"] == "frozen"
            else []
        ),
    output:
        pool="results/aflite/text/{dataset}/embeddings/pool.npy",
        dev="results/aflite/text/{dataset}/embeddings/dev.npy",
        summary="results/aflite/text/{dataset}/embeddings/summary.json",
    log:
        "results/logs/aflite/embed_{dataset}.log",
    benchmark:
        "results/benchmarks/aflite/embed_{dataset}.tsv"
    conda:
        "../envs/spurious.yaml"
    threads: 2
    resources:
        mem_mb=8000,
        runtime=120,
    params:
        representation=rule_settings(aflite_embedding_settings),
        result_settings=rule_result_settings(aflite_embedding_settings),
        features=lambda w: canonical(AFLITE_TEXT["datasets"][w.dataset]["features"]),
    script:
        "../workflow_scripts/aflite/embed.py"


rule aflite_filter:
    """Algorithm 1 over the pool and the dev set together (the dataset's own filter, variant ""), or over the pool
    alone (a filters.<name> set, variant "_<name>", same representations): which instances each iteration removed,
    p̃ per instance per iteration, |S| and the mean held-out accuracy per iteration. Finished iterations are saved
    outside the outputs, so a killed run resumes after the last one."""
    input:
        unpack(aflite_filter_inputs),
    output:
        instances="results/aflite/text/{dataset}/filter{variant}/instances.parquet",
        scores="results/aflite/text/{dataset}/filter{variant}/scores.npy",
        iterations="results/aflite/text/{dataset}/filter{variant}/iterations.csv",
        summary="results/aflite/text/{dataset}/filter{variant}/summary.json",
    log:
        "results/logs/aflite/filter_{dataset}{variant}.log",
    benchmark:
        "results/benchmarks/aflite/filter_{dataset}{variant}.tsv"
    wildcard_constraints:
        variant=VARIANT_WILDCARD,
    conda:
        "../envs/spurious.yaml"
    threads: 2
    resources:
        mem_mb=8000,
        runtime=240,
    params:
        settings=lambda w: canonical(aflite_filter_settings(w.dataset, w.variant)),
        execution=lambda w: RuleSettings(
            {
                "device": aflite_representation()["device"],
                "gather_memory_mb": aflite_representation()["gather_memory_mb"],
            }
        ),
        state_dir=lambda w: f"results/_checkpoints/aflite/{w.dataset}/filter{w.variant}/"
        + settings_key(aflite_filter_settings(w.dataset, w.variant)),
    script:
        "../workflow_scripts/aflite/filter.py"


rule aflite_training_sets:
    """D (the pool), D_rand (a seeded random subset of D of the filtered size), D(AFLite) and the filtered dev set."""
    input:
        pool=lambda w: aflite_pool(w.dataset),
        dev=lambda w: aflite_dev_split(w.dataset),
        instances="results/aflite/text/{dataset}/filter/instances.parquet",
    output:
        full="results/aflite/text/{dataset}/data/train_full.parquet",
        random="results/aflite/text/{dataset}/data/train_random.parquet",
        aflite="results/aflite/text/{dataset}/data/train_aflite.parquet",
        dev_filtered="results/aflite/text/{dataset}/data/dev_filtered.parquet",
    log:
        "results/logs/aflite/training_sets_{dataset}.log",
    conda:
        "../envs/spurious.yaml"
    params:
        seed=lambda w: AFLITE_TEXT["random_seed"],
    script:
        "../workflow_scripts/aflite/training_sets.py"


rule aflite_variant_training_sets:
    """D_rand and D(AFLite) of a filters.<name> set (the pool filtered alone; variant "_<name>"): the train sets
    random_<name> and aflite_<name>. D is the dataset's own train_full."""
    input:
        pool=lambda w: aflite_pool(w.dataset),
        instances="results/aflite/text/{dataset}/filter{variant}/instances.parquet",
    output:
        random="results/aflite/text/{dataset}/data/train_random{variant}.parquet",
        aflite="results/aflite/text/{dataset}/data/train_aflite{variant}.parquet",
    log:
        "results/logs/aflite/training_sets_{dataset}{variant}.log",
    wildcard_constraints:
        variant=FILTERS_VARIANT_WILDCARD,
    conda:
        "../envs/spurious.yaml"
    params:
        seed=lambda w: AFLITE_TEXT["random_seed"],
    script:
        "../workflow_scripts/aflite/training_sets.py"


rule aflite_train_classifier:
    """A classifier on D, D_rand or D(AFLite), on the full input or the partial input (hypothesis / answer only).
    Train sets random_<name> and aflite_<name>: a filters.<name> set's D_rand and D(AFLite), trained on the full
    input for the OOD sets."""
    input:
        train="results/aflite/text/{dataset}/data/train_{train_set}.parquet",
        fetched=lambda w: model_record(AFLITE_TEXT["models"][w.model]),
    output:
        model=directory(
            "results/aflite/text/{dataset}/models/{model}/{train_set}/{inputs}/seed{seed}/model"
        ),
        summary="results/aflite/text/{dataset}/models/{model}/{train_set}/{inputs}/seed{seed}/training.json",
    log:
        "results/logs/aflite/train_{dataset}_{model}_{train_set}_{inputs}_seed{seed}.log",
    benchmark:
        "results/benchmarks/aflite/train_{dataset}_{model}_{train_set}_{inputs}_seed{seed}.tsv"
    wildcard_constraints:
        train_set=TRAIN_SET_WILDCARD,
        inputs=INPUTS_WILDCARD,
    conda:
        "../envs/spurious.yaml"
    threads: 2
    resources:
        mem_mb=8000,
        runtime=600,
    params:
        checkpoint=lambda w: AFLITE_TEXT["models"][w.model]["checkpoint"],
        init=lambda w: AFLITE_TEXT["models"][w.model]["init"],
        settings=rule_settings(aflite_training_settings),
        result_settings=rule_result_settings(aflite_training_settings),
        partial_input=lambda w: (
            AFLITE_TEXT["datasets"][w.dataset]["partial_input"]
            if w.inputs == "partial"
            else None
        ),
        checkpoint_dir=lambda w: f"results/_checkpoints/aflite/{w.dataset}/{w.model}/{w.train_set}/{w.inputs}/seed{w.seed}/"
        + settings_key(aflite_training_settings(w)),
    script:
        "../workflow_scripts/aflite/train.py"


rule aflite_predict:
    """Predictions on the original dev set; accuracy on it and on its AFLite-filtered part."""
    input:
        model="results/aflite/text/{dataset}/models/{model}/{train_set}/{inputs}/seed{seed}/model",
        dev=lambda w: aflite_dev_split(w.dataset),
        dev_filtered="results/aflite/text/{dataset}/data/dev_filtered.parquet",
        train="results/aflite/text/{dataset}/data/train_{train_set}.parquet",
    output:
        predictions="results/aflite/text/{dataset}/predictions/{model}/{train_set}/{inputs}/seed{seed}.parquet",
        metrics="results/aflite/text/{dataset}/predictions/{model}/{train_set}/{inputs}/seed{seed}.metrics.json",
    log:
        "results/logs/aflite/predict_{dataset}_{model}_{train_set}_{inputs}_seed{seed}.log",
    benchmark:
        "results/benchmarks/aflite/predict_{dataset}_{model}_{train_set}_{inputs}_seed{seed}.tsv"
    wildcard_constraints:
        train_set=OWN_TRAIN_SET_WILDCARD,
        inputs=INPUTS_WILDCARD,
    conda:
        "../envs/spurious.yaml"
    threads: 2
    resources:
        mem_mb=8000,
        runtime=60,
    params:
        settings=rule_settings(aflite_prediction_settings),
        result_settings=rule_result_settings(aflite_prediction_settings),
        partial_input=lambda w: (
            AFLITE_TEXT["datasets"][w.dataset]["partial_input"]
            if w.inputs == "partial"
            else None
        ),
    script:
        "../workflow_scripts/aflite/predict.py"


rule aflite_text_report:
    """Tables 3-4 (D, D_rand, D(AFLite); the paper's values beside ours), every accuracy on both dev sets, and |S|
    and the mean held-out accuracy per AFLite iteration."""
    input:
        unpack(aflite_text_report_inputs),
    output:
        tables_csv=report(
            "results/report/aflite/text_tables.csv",
            caption="../report/aflite_text_tables.rst",
            category="AFLite",
        ),
        tables_md="results/report/aflite/text_tables.md",
        accuracy_csv=report(
            "results/report/aflite/text_accuracy.csv",
            caption="../report/aflite_text_accuracy.rst",
            category="AFLite",
        ),
        accuracy_md="results/report/aflite/text_accuracy.md",
        iterations_png=report(
            "results/report/aflite/text_iterations.png",
            caption="../report/aflite_text_iterations.rst",
            category="AFLite",
        ),
        iterations_svg="results/report/aflite/text_iterations.svg",
    log:
        "results/logs/aflite/text_report.log",
    conda:
        "../envs/spurious.yaml"
    params:
        paper_names=lambda w: canonical(
            {
                "datasets": {
                    d: spec["paper_name"]
                    for d, spec in AFLITE_TEXT["datasets"].items()
                },
                "models": {
                    m: spec["paper_name"] for m, spec in AFLITE_TEXT["models"].items()
                },
            }
        ),
    script:
        "../workflow_scripts/aflite/text_report.py"


# Out-of-distribution evaluation (§4.1, Tables 1-2; spurious.aflite.ood): every full-input model of one AFLite
# dataset (trained on D and on the D_rand and D(AFLite) of its filter, or of its filters.<models_filter> set) scored
# on other datasets' splits (HANS, the NLI Diagnostics, the stress tests), or first fine-tuned on an OOD training
# split (Adversarial NLI's rounds, Table 2).


rule aflite_ood_finetune:
    """Table 2's protocol: an AFLite text model (trained on D, D_rand or D(AFLite)) fine-tuned on an OOD set's
    training split (an Adversarial NLI round) before it is scored on the set's test split.
    """
    input:
        model=lambda w: f"results/aflite/text/{aflite_ood(w.ood)['models_from']}/models/{w.model}/{w.train_set}/full/seed{w.seed}/model",
        train=lambda w: split_file(
            aflite_ood(w.ood)["dataset"], aflite_ood(w.ood)["finetune"]["split"]
        ),
    output:
        model=directory(
            "results/aflite/ood/{ood}/finetuned/{model}/{train_set}/seed{seed}/model"
        ),
        summary="results/aflite/ood/{ood}/finetuned/{model}/{train_set}/seed{seed}/training.json",
    log:
        "results/logs/aflite/ood_finetune_{ood}_{model}_{train_set}_seed{seed}.log",
    benchmark:
        "results/benchmarks/aflite/ood_finetune_{ood}_{model}_{train_set}_seed{seed}.tsv"
    wildcard_constraints:
        ood=r"[a-z0-9_]+",
        train_set=TRAIN_SET_WILDCARD,
    conda:
        "../envs/spurious.yaml"
    threads: 2
    resources:
        mem_mb=8000,
        runtime=600,
    params:
        settings=rule_settings(aflite_ood_finetune_settings),
        result_settings=rule_result_settings(aflite_ood_finetune_settings),
        checkpoint_dir=lambda w: f"results/_checkpoints/aflite/ood/{w.ood}/{w.model}/{w.train_set}/seed{w.seed}/"
        + settings_key(aflite_ood_finetune_settings(w)),
    script:
        "../workflow_scripts/aflite/ood_finetune.py"


rule aflite_ood_predict:
    """One model on one OOD split: its predictions mapped to the split's labels, correct counts per group."""
    input:
        model=aflite_ood_model,
        data=lambda w: split_file(aflite_ood(w.ood)["dataset"], w.split),
    output:
        predictions="results/aflite/ood/{ood}/predictions/{model}/{train_set}/seed{seed}/{split}.parquet",
        metrics="results/aflite/ood/{ood}/predictions/{model}/{train_set}/seed{seed}/{split}.metrics.json",
    log:
        "results/logs/aflite/ood_predict_{ood}_{model}_{train_set}_seed{seed}_{split}.log",
    benchmark:
        "results/benchmarks/aflite/ood_predict_{ood}_{model}_{train_set}_seed{seed}_{split}.tsv"
    wildcard_constraints:
        ood=r"[a-z0-9_]+",
        train_set=TRAIN_SET_WILDCARD,
    conda:
        "../envs/spurious.yaml"
    threads: 2
    resources:
        mem_mb=8000,
        runtime=60,
    params:
        settings=rule_settings(aflite_prediction_settings),
        result_settings=rule_result_settings(aflite_prediction_settings),
        scoring=lambda w: canonical(
            {
                "prediction_map": aflite_ood(w.ood)["prediction_map"],
                "only_labels": aflite_ood(w.ood)["only_labels"],
                "split_group": aflite_ood(w.ood)["splits"][w.split],
                "group_names": aflite_ood(w.ood)["groups"],
            }
        ),
    script:
        "../workflow_scripts/aflite/ood_predict.py"


rule aflite_ood_report:
    """Tables 1-2: accuracy per OOD set, group, model and train set (mean ± std over seeds), the filtered set each
    model was trained on and its realised size, and the paper's values beside (for a filter with a target size
    n)."""
    input:
        unpack(aflite_ood_report_inputs),
    output:
        table_csv=report(
            "results/report/aflite/ood.csv",
            caption="../report/aflite_ood.rst",
            category="AFLite",
        ),
        table_md="results/report/aflite/ood.md",
    log:
        "results/logs/aflite/ood_report.log",
    conda:
        "../envs/spurious.yaml"
    params:
        set_names=lambda w: canonical(
            {name: spec["paper_name"] for name, spec in AFLITE_TEXT["ood"].items()}
        ),
        paper_models=lambda w: canonical(
            {m: spec["paper_name"] for m, spec in AFLITE_TEXT["models"].items()}
        ),
        paper_training_data=lambda w: canonical(
            {
                name: AFLITE_TEXT["datasets"][spec["models_from"]]["paper_name"]
                for name, spec in AFLITE_TEXT["ood"].items()
            }
        ),
        training_data=lambda w: canonical(
            {name: aflite_ood_training_data(name) for name in AFLITE_TEXT["ood"]}
        ),
    script:
        "../workflow_scripts/aflite/ood_report.py"
