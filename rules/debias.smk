# Stage 7: debiasing (paper §4.3, App. B.2). For every addressed heuristic: the original model's threshold cuts the
# training data into a biased and an unbiased segment; ReSam retrains on resampled segments; a bias model is trained
# on the biased segment only; its logits (and the original model's, as CReg's teacher) are inferred once per training
# window and reused by LearnedMixin+H and Confidence Regularization. Every (method, heuristic, seed) model is its own
# job with its own output directory; the debiased runs are then predicted and measured like any other run.


rule train_bias_model:
    """A bias model (App. B.2.1): trained on the biased training segment only; the checkpoint kept is the one with
    the largest F1 gap between the biased and unbiased validation segments."""
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
        selection_max_examples=(
            DEBIAS["bias_model"]["selection_max_examples"] if DEBIAS else None
        ),
        settings=lambda w: dict(method_training(config, "bias_model"), seed=int(w.seed)),
        checkpoint_dir=lambda w: debias_checkpoint_dir(w, "biasmodel"),
    script:
        "../workflow_scripts/train_bias_model.py"


rule feature_logits:
    """Start/end logits of a model (teacher or bias model) for every training window, featurised with the debiased
    models' tokenizer and settings; written once, memory-mapped by every run that needs them.
    """
    input:
        model="results/models/{run}/model",
        data=lambda w: split_file(w.dataset, w.split),
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
        settings=lambda w: {
            k: run_settings(w.run)[k]
            for k in ("max_length", "stride", "eval_batch_size", "device", "bf16")
        },
    script:
        "../workflow_scripts/feature_logits.py"


rule train_debiased:
    """A model debiased for one heuristic by ReSam, LearnedMixin+H or Confidence Regularization."""
    input:
        unpack(debiased_inputs),
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
        checkpoint=lambda w: config["models"][w.model]["checkpoint"],
        settings=lambda w: dict(method_training(config, w.method), seed=int(w.seed)),
        method_config=lambda w: {
            k: v for k, v in DEBIAS[w.method].items() if k != "training"
        },
        mask_non_context=DEBIAS["mask_non_context"] if DEBIAS else None,
        checkpoint_dir=lambda w: debias_checkpoint_dir(w, w.method),
    script:
        "../workflow_scripts/train_debiased.py"


rule bias_fixed_threshold:
    """Prediction bias of a run at the thresholds its search found on bias.fixed_thresholds_from (paper §5.2)."""
    input:
        predictions="results/predictions/{run}/{dataset}/{split}.parquet",
        heuristics="results/heuristics/{dataset}/{split}.parquet",
        reference=lambda w: "results/bias/{run}/{dataset}/{split}/{heuristic}.json".format(
            run=w.run, heuristic=w.heuristic, **config["bias"]["fixed_thresholds_from"]
        ),
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
    params:
        sample_size=config["bias"]["sample_size"],
        iterations=config["bias"]["iterations"],
        with_replacement=config["bias"]["with_replacement"],
        seed=config["bias"]["seed"],
        run=lambda w: parse_run(w.run),
    script:
        "../workflow_scripts/bias_fixed.py"
