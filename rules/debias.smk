# Stage 7: debiasing (paper §4.3, App. B.2). For every addressed heuristic: the original model's threshold cuts the
# training data into a biased and an unbiased segment; ReSam retrains on resampled segments; a bias model is trained
# on the biased segment only; its logits (and the original model's, as CReg's teacher) are inferred once per training
# window and reused by LearnedMixin+H and Confidence Regularization. Every (method, heuristic, seed) model is its own
# job with its own output directory; the debiased runs are then predicted and measured like any other run.


rule train_bias_model:
    """A bias model (App. B.2.1): trained on the biased training segment only; the checkpoint kept is the one with
    the largest F1 gap between the biased and unbiased validation segments (among those whose unbiased F1 stays
    below debias.bias_model.max_unbiased_f1, when set)."""
    input:
        train=lambda w: debias_segments(debias_train_ref()["split"], w.heuristic)[
            "biased"
        ],
        validation=lambda w: debias_validation(w)["validation"],
        valid_biased=lambda w: debias_segments(
            debias_threshold_ref()["split"], w.heuristic
        )["biased"],
        valid_unbiased=lambda w: debias_segments(
            debias_threshold_ref()["split"], w.heuristic
        )["unbiased"],
        fetched=lambda w: model_record(config["models"][w.model]),
    output:
        model=directory("results/models/{model}/biasmodel/{heuristic}/seed{seed}/model"),
        summary="results/models/{model}/biasmodel/{heuristic}/seed{seed}/training.json",
    log:
        "results/logs/train/{model}_biasmodel_{heuristic}_seed{seed}.log",
    benchmark:
        "results/benchmarks/train/{model}_biasmodel_{heuristic}_seed{seed}.tsv"
    conda:
        "../envs/spurious.yaml"
    threads: 2
    resources:
        mem_mb=8000,
        runtime=120,
    params:
        checkpoint=lambda w: config["models"][w.model]["checkpoint"],
        init=DEBIAS["bias_model"]["init"] if DEBIAS else None,
        trainable=DEBIAS["bias_model"]["trainable"] if DEBIAS else None,
        selection_max_examples=(
            DEBIAS["bias_model"]["selection_max_examples"] if DEBIAS else None
        ),
        max_unbiased_f1=(
            canonical(DEBIAS["bias_model"]["max_unbiased_f1"]) if DEBIAS else None
        ),
        settings=rule_settings(lambda w: method_settings(w, "bias_model")),
        result_settings=rule_result_settings(lambda w: method_settings(w, "bias_model")),
        checkpoint_dir=lambda w: debias_checkpoint_dir(w, "biasmodel"),
    script:
        "../workflow_scripts/thinktwice/train_bias_model.py"


rule feature_logits:
    """Start/end logits of a model (teacher or bias model) for every training window, featurised with the debiased
    models' tokenizer and settings; written once, memory-mapped by every run that needs them.
    """
    input:
        model="results/models/{run}/model",
        data=lambda w: split_file(w.dataset, w.split),
        fetched=lambda w: model_record(model_config(w)),
    output:
        logits="results/logits/{run}/{dataset}/{split}.npy",
        meta="results/logits/{run}/{dataset}/{split}.json",
    log:
        "results/logs/logits/{run}/{dataset}_{split}.log",
    benchmark:
        "results/benchmarks/logits/{run}/{dataset}_{split}.tsv"
    wildcard_constraints:
        run=MODEL_RUN,
    conda:
        "../envs/spurious.yaml"
    threads: 2
    resources:
        mem_mb=8000,
        runtime=60,
    params:
        tokenizer_from=lambda w: model_config(w)["checkpoint"],
        settings=rule_settings(qa_logit_settings),
        result_settings=rule_result_settings(qa_logit_settings),
    script:
        "../workflow_scripts/thinktwice/feature_logits.py"


rule train_plain:
    """The matched control: standard fine-tuning on the debiased runs' training split, with their training
    settings, initialisation and seed; it differs from them in the method only."""
    input:
        unpack(debiased_inputs),
        fetched=lambda w: model_record(config["models"][w.model]),
    output:
        model=directory("results/models/{model}/plain/seed{seed}/model"),
        summary="results/models/{model}/plain/seed{seed}/training.json",
    log:
        "results/logs/train/{model}_plain_seed{seed}.log",
    benchmark:
        "results/benchmarks/train/{model}_plain_seed{seed}.tsv"
    conda:
        "../envs/spurious.yaml"
    threads: 2
    resources:
        mem_mb=8000,
        runtime=120,
    params:
        method=CONTROL,
        checkpoint=lambda w: config["models"][w.model]["checkpoint"],
        settings=rule_settings(lambda w: method_settings(w, CONTROL)),
        result_settings=rule_result_settings(lambda w: method_settings(w, CONTROL)),
        method_config={},
        mask_non_context=None,
        scale=None,
        checkpoint_dir=lambda w: debias_checkpoint_dir(w, CONTROL),
    script:
        "../workflow_scripts/thinktwice/train_debiased.py"


rule train_debiased:
    """A model debiased for one heuristic by ReSam, LearnedMixin+H or Confidence Regularization (its scale from the
    scale search's choice where debias.scale_search covers the method)."""
    input:
        unpack(debiased_inputs),
        fetched=lambda w: model_record(config["models"][w.model]),
    output:
        model=directory("results/models/{model}/{method}/{heuristic}/seed{seed}/model"),
        summary="results/models/{model}/{method}/{heuristic}/seed{seed}/training.json",
    log:
        "results/logs/train/{model}_{method}_{heuristic}_seed{seed}.log",
    benchmark:
        "results/benchmarks/train/{model}_{method}_{heuristic}_seed{seed}.tsv"
    conda:
        "../envs/spurious.yaml"
    threads: 2
    resources:
        mem_mb=8000,
        runtime=120,
    params:
        method=lambda w: w.method,
        checkpoint=lambda w: config["models"][w.model]["checkpoint"],
        settings=rule_settings(lambda w: method_settings(w, w.method)),
        result_settings=rule_result_settings(lambda w: method_settings(w, w.method)),
        method_config=lambda w: canonical(
            {k: v for k, v in DEBIAS.get(w.method, {}).items() if k != "training"}
        ),
        mask_non_context=DEBIAS["mask_non_context"] if DEBIAS else None,
        scale=None,
        checkpoint_dir=lambda w: debias_checkpoint_dir(w, w.method),
    script:
        "../workflow_scripts/thinktwice/train_debiased.py"


# The paper's choice of the bias scale (App. B.2.4): one model per grid value addressing debias.scale_search's
# heuristic, scored in distribution on the original model's validation split; the best value is written to a file
# that every debiased run of the method reads.


rule scale_search_train:
    """A scale-search candidate: the method's debiased model for the search heuristic at one grid value."""
    input:
        unpack(scale_search_inputs),
        fetched=lambda w: model_record(config["models"][w.model]),
    output:
        model=directory(
            "results/scale_search/{model}/{method}/{heuristic}/scale{scale}/seed{seed}/model"
        ),
        summary="results/scale_search/{model}/{method}/{heuristic}/scale{scale}/seed{seed}/training.json",
    log:
        "results/logs/scale_search/{model}_{method}_{heuristic}_scale{scale}_seed{seed}.log",
    benchmark:
        "results/benchmarks/scale_search/{model}_{method}_{heuristic}_scale{scale}_seed{seed}.tsv"
    wildcard_constraints:
        method=SCALED_METHOD_WILDCARD,
    conda:
        "../envs/spurious.yaml"
    threads: 2
    resources:
        mem_mb=8000,
        runtime=120,
    params:
        method=lambda w: w.method,
        checkpoint=lambda w: config["models"][w.model]["checkpoint"],
        settings=rule_settings(lambda w: method_settings(w, w.method)),
        result_settings=rule_result_settings(lambda w: method_settings(w, w.method)),
        method_config=lambda w: canonical(
            {k: v for k, v in DEBIAS.get(w.method, {}).items() if k != "training"}
        ),
        mask_non_context=DEBIAS["mask_non_context"] if DEBIAS else None,
        scale=lambda w: float(w.scale),
        checkpoint_dir=lambda w: os.path.join(
            debias_checkpoint_dir(w, w.method).replace(
                "results/_checkpoints/", "results/_checkpoints/scale_search/", 1
            ),
            f"scale{w.scale}",
        ),
    script:
        "../workflow_scripts/thinktwice/train_debiased.py"


rule scale_search_score:
    """A candidate's in-distribution EM and F1 on the original model's validation split (a seeded subset of at most
    debias.scale_search.max_examples questions)."""
    input:
        model="results/scale_search/{model}/{method}/{heuristic}/scale{scale}/seed{seed}/model",
        data=lambda w: validation_inputs(w.model)["validation"],
    output:
        "results/scale_search/{model}/{method}/{heuristic}/scale{scale}/seed{seed}/score.json",
    log:
        "results/logs/scale_search/{model}_{method}_{heuristic}_scale{scale}_seed{seed}_score.log",
    benchmark:
        "results/benchmarks/scale_search/{model}_{method}_{heuristic}_scale{scale}_seed{seed}_score.tsv"
    wildcard_constraints:
        method=SCALED_METHOD_WILDCARD,
    conda:
        "../envs/spurious.yaml"
    threads: 2
    resources:
        mem_mb=8000,
        runtime=60,
    params:
        settings=rule_settings(
            lambda w: prediction_settings(
                method_training(config, w.method), QA_PREDICTION_KEYS
            )
        ),
        result_settings=rule_result_settings(
            lambda w: prediction_settings(
                method_training(config, w.method), QA_PREDICTION_KEYS
            )
        ),
        max_examples=lambda w: DEBIAS["scale_search"]["max_examples"],
    script:
        "../workflow_scripts/thinktwice/scale_search_score.py"


rule scale_search_choice:
    """The scale with the best in-distribution score (ties: the smaller one), with every candidate's score."""
    input:
        scale_search_scores,
    output:
        "results/scale_search/{model}/{method}/choice.json",
    log:
        "results/logs/scale_search/{model}_{method}_choice.log",
    wildcard_constraints:
        method=SCALED_METHOD_WILDCARD,
    conda:
        "../envs/spurious.yaml"
    params:
        metric=lambda w: DEBIAS["scale_search"]["metric"],
        heuristic=lambda w: DEBIAS["scale_search"]["heuristic"],
    script:
        "../workflow_scripts/thinktwice/scale_search_choice.py"


rule bias_fixed_threshold:
    """Prediction bias of a run on figure4's split at figure4's thresholds (paper §5.2, Fig. 4): App. C's published
    ones (BERT-base-cased on SQuAD validation) or those a run's own search found there (figure4.thresholds_from).
    """
    input:
        predictions="results/predictions/{run}/{dataset}/{split}.parquet",
        heuristics="results/heuristics/{dataset}/{split}.parquet",
        reference=figure4_threshold_input,
    output:
        "results/bias_fixed/{run}/{dataset}/{split}/{heuristic}.json",
    log:
        "results/logs/bias_fixed/{run}/{dataset}_{split}_{heuristic}.log",
    benchmark:
        "results/benchmarks/bias_fixed/{run}/{dataset}_{split}_{heuristic}.tsv"
    wildcard_constraints:
        run=MODEL_RUN,
    conda:
        "../envs/spurious.yaml"
    threads: 1
    resources:
        mem_mb=BIAS_SEARCH_MEM_MB,
        runtime=BIAS_SEARCH_RUNTIME,
    params:
        **bias_search_settings(),
        run=lambda w: parse_run(w.run),
        thresholds_from=lambda w: figure4_threshold_run() or "appendix_c",
    script:
        "../workflow_scripts/thinktwice/bias_fixed.py"
