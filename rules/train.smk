# Stage 3: fine-tune a QA model. Resumable checkpoints live OUTSIDE the declared outputs (Snakemake deletes the
# outputs of a failed job), in results/_checkpoints/<model>/seed<seed>/<settings hash>; they are removed only
# after the job succeeds. GPU requests live in profiles/slurm, never here.


rule train:
    """Fine-tune an extractive QA model on the configured train split (early stopping on the validation split)."""
    input:
        unpack(train_inputs),
        fetched=lambda w: model_record(model_config(w)),
    output:
        model=directory("results/models/{model}/seed{seed}/model"),
        summary="results/models/{model}/seed{seed}/training.json",
    log:
        "results/logs/train/{model}_seed{seed}.log",
    benchmark:
        "results/benchmarks/train/{model}_seed{seed}.tsv"
    conda:
        "../envs/spurious.yaml"
    threads: 2
    resources:
        mem_mb=8000,
        runtime=120,
    params:
        checkpoint=lambda w: model_config(w)["checkpoint"],
        settings=rule_settings(training_settings),
        result_settings=rule_result_settings(training_settings),
        checkpoint_dir=lambda w: f"results/_checkpoints/{w.model}/seed{w.seed}/{settings_key(training_settings(w))}",
    script:
        "../workflow_scripts/thinktwice/train.py"
