# Helper functions of rules/lexical.smk (input functions, run lists, report targets); the Snakefile includes
# this file before the rules, and `all` calls its report-target function.

LEXICAL = config.get("lexical")


def lexical_model_of(wildcards):
    """The classifier a job trains or runs, and its place in the config (MODEL_OF_RULE)."""
    return LEXICAL["models"][wildcards.model], f"lexical.models.{wildcards.model}"


MODEL_OF_RULE.update(
    dict.fromkeys(("lexical_train", "lexical_predict"), lexical_model_of)
)


def lexical_split(dataset, key):
    """The train or test split file of a lexical dataset."""
    return split_file(dataset, LEXICAL["datasets"][dataset][key])


def lexical_runs():
    """'<dataset>/<model>/<weighting>/seed<seed>' for every classifier to train and test (datasets with a test
    split only; the others are analysed as data, Table 1)."""
    return [
        f"{dataset}/{model}/{weighting}/seed{seed}"
        for dataset, spec in LEXICAL["datasets"].items()
        if spec["test"] is not None
        for model, m in LEXICAL["models"].items()
        for weighting in m["weightings"]
        for seed in m["seeds"]
    ]


def lexical_training_settings(wildcards):
    """The model's training settings (its bilstm settings for the BiLSTM control) with the run's seed."""
    model = LEXICAL["models"][wildcards.model]
    key = "bilstm" if model["init"] == "bilstm" else "training"
    return dict(model[key], seed=int(wildcards.seed))


def lexical_prediction_settings(wildcards):
    """What a lexical classifier's predictions read (nothing for the BiLSTM, whose settings travel with it)."""
    if LEXICAL["models"][wildcards.model]["init"] == "bilstm":
        return {}
    return prediction_settings(
        lexical_training_settings(wildcards), CLASSIFIER_PREDICTION_KEYS
    )


def lexical_train_inputs(wildcards):
    files = {"train": lexical_split(wildcards.dataset, "train")}
    if wildcards.weighting == "q":
        files["weights"] = (
            f"results/lexical/{wildcards.dataset}/reweight/weights.parquet"
        )
    return files


def lexical_balance_inputs(wildcards):
    files = {
        "train": lexical_split(wildcards.dataset, "train"),
        "weights": f"results/lexical/{wildcards.dataset}/reweight/weights.parquet",
        "top": f"results/lexical/{wildcards.dataset}/top_features.csv",
    }
    if LEXICAL["datasets"][wildcards.dataset]["test"] is not None:
        files["test"] = lexical_split(wildcards.dataset, "test")
    return files


def lexical_report_inputs(wildcards):
    datasets = list(LEXICAL["datasets"])
    files = {
        f"{kind}__{d}": f"results/lexical/{d}/{path}"
        for d in datasets
        for kind, path in (
            ("reweight", "reweight/summary.json"),
            ("bigrams", "bigrams.json"),
            ("balance", "balance.csv"),
            ("top", "top_features.csv"),
        )
    }
    for run in lexical_runs():
        dataset, rest = run.split("/", 1)
        files[f"permutation__{run}"] = (
            f"results/lexical/{dataset}/permutation/{rest}.json"
        )
        files[f"metrics__{run}"] = (
            f"results/lexical/{dataset}/predictions/{rest}.metrics.json"
        )
    return files


def lexical_report_files():
    names = ["table1", "table2", "table3", "appendix_a1"]
    return expand(
        "results/report/lexical/{name}.{ext}", name=names, ext=["csv", "md"]
    ) + expand("results/report/lexical/figure2.{ext}", ext=["png", "svg"])
