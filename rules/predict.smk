# Stage 4: per-example predictions and SQuAD v1.1 EM/F1 of every model on every evaluated split, and the three
# SQuAD annotators scored against each other (the Human reference).


rule predict:
    """Predict answers for every question of a split; score each (id, prediction_text, em, f1)."""
    input:
        model="results/models/{run}/model",
        data=lambda w: split_file(w.dataset, w.split),
    output:
        predictions="results/predictions/{run}/{dataset}/{split}.parquet",
        metrics="results/predictions/{run}/{dataset}/{split}.metrics.json",
    log:
        "results/logs/predict/{run}/{dataset}_{split}.log",
    benchmark:
        "results/benchmarks/predict/{run}/{dataset}_{split}.tsv"
    wildcard_constraints:
        run=MODEL_RUN,
    conda:
        "../envs/spurious.yaml"
    threads: 2
    resources:
        mem_mb=8000,
        runtime=60,
    params:
        settings=rule_settings(qa_prediction_settings),
        result_settings=rule_result_settings(qa_prediction_settings),
        run=lambda w: parse_run(w.run),
    script:
        "../workflow_scripts/thinktwice/predict.py"


rule human_predictions:
    """Annotator k's answer scored against the other two of the first three gold answers (questions with fewer
    than three answers are skipped and counted)."""
    input:
        data=lambda w: split_file(w.dataset, w.split),
    output:
        predictions="results/predictions/human/annotator{annotator}/{dataset}/{split}.parquet",
        metrics="results/predictions/human/annotator{annotator}/{dataset}/{split}.metrics.json",
    log:
        "results/logs/predict/human_annotator{annotator}_{dataset}_{split}.log",
    benchmark:
        "results/benchmarks/predict/human_annotator{annotator}_{dataset}_{split}.tsv"
    conda:
        "../envs/spurious.yaml"
    script:
        "../workflow_scripts/thinktwice/human_predictions.py"
