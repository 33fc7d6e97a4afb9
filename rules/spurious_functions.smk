# Helper functions of rules/spurious.smk (input functions, run lists, report targets); the Snakefile includes
# this file before the rules, and `all` calls its report-target function.

SPURIOUSBENCH = config.get("spuriousbench")
SPURIOUS_REPORT = [
    "gaps.csv",
    "gaps.md",
    "categories.csv",
    "categories.md",
    "sizes.csv",
    "sizes.md",
    "figure1.png",
    "figure1.svg",
    "figure2.png",
    "figure2.svg",
    "figure3.png",
    "figure3.svg",
]


def spurious_model_of(wildcards):
    """The model a job trains or prompts, and its place in the config (MODEL_OF_RULE)."""
    return (
        SPURIOUSBENCH["models"][wildcards.model],
        f"spuriousbench.models.{wildcards.model}",
    )


MODEL_OF_RULE.update(
    dict.fromkeys(
        ("spurious_train", "spurious_predict", "spurious_icl"), spurious_model_of
    )
)


def spurious_features(dataset, key="features"):
    """(category, value) path parts of a dataset's built ('features') or trained ('train_features') features."""
    return [
        tuple(name.split(":", 1)) for name in SPURIOUSBENCH["datasets"][dataset][key]
    ]


def spurious_runs():
    """(dataset, category, value, model, method, seed) of every model run of the track."""
    if not SPURIOUSBENCH:
        return []
    return [
        (dataset, category, value, model, method, seed)
        for dataset in SPURIOUSBENCH["datasets"]
        for category, value in spurious_features(dataset, "train_features")
        for model, spec in SPURIOUSBENCH["models"].items()
        if model in (SPURIOUSBENCH["datasets"][dataset]["models"] or [model])
        for method in spec["methods"]
        for seed in spec["seeds"]
    ]


def spurious_target_label(dataset):
    """y* of a SpuriousBench dataset: its own target_label, else the track's (App. D runs the negative label)."""
    own = SPURIOUSBENCH["datasets"][dataset]["target_label"]
    return SPURIOUSBENCH["target_label"] if own is None else own


def spurious_run_keys():
    """'<dataset>__<category>__<value>__<model>__<method>__seed<seed>': the report's input keys."""
    return [
        "__".join(map(str, run[:-1])) + f"__seed{run[-1]}" for run in spurious_runs()
    ]


def spurious_pool_inputs(wildcards):
    spec = SPURIOUSBENCH["datasets"][wildcards.dataset]
    source = spec["source"] or wildcards.dataset
    return {
        "train": split_file(source, spec["train"]),
        "test": split_file(source, spec["test"]),
    }


def spurious_training_settings(wildcards):
    """The model's training settings with the run's seed; BitFit trains at the model's bitfit_learning_rate."""
    model = SPURIOUSBENCH["models"][wildcards.model]
    settings = dict(model["training"], seed=int(wildcards.seed))
    if wildcards.sb_method == "bitfit":
        settings["learning_rate"] = model["bitfit_learning_rate"]
    return settings


def spurious_prediction_settings(wildcards):
    return prediction_settings(
        spurious_training_settings(wildcards), CLASSIFIER_PREDICTION_KEYS
    )


def spurious_prompt(wildcards):
    """The model's prompt (template, label words), or the paper's for the dataset's builder; None unless the
    method is prompt-based fine-tuning."""
    if wildcards.sb_method != "prompt":
        return None
    custom = SPURIOUSBENCH["models"][wildcards.model]["prompt"]
    if custom:
        return custom
    return {"paper": SPURIOUSBENCH["datasets"][wildcards.dataset]["builder"]}


def spurious_report_inputs(wildcards):
    files = {}
    for key, (dataset, category, value, model, method, seed) in zip(
        spurious_run_keys(), spurious_runs()
    ):
        files[f"metrics__{key}"] = (
            f"results/spurious/{dataset}/predictions/{category}/{value}/{model}/{method}/seed{seed}.metrics.json"
        )
    for dataset in SPURIOUSBENCH["datasets"]:
        for category, value in spurious_features(dataset):
            files[f"stats__{dataset}__{category}__{value}"] = (
                f"results/spurious/{dataset}/data/{category}/{value}/stats.json"
            )
    return files


def spurious_report_files():
    return [f"results/report/spurious/{name}" for name in SPURIOUS_REPORT]
