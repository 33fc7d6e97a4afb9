# Helper functions of rules/aflite.smk (input functions, run lists, report targets); the Snakefile includes
# this file before the rules, and `all` calls its report-target function. AFLite's names (training sets, inputs,
# wildcard patterns) are declared once in spurious.aflite.track.

from spurious.aflite.track import (
    FILTERS_VARIANT_WILDCARD,
    FULL,
    INPUTS,
    INPUTS_WILDCARD,
    OWN_TRAIN_SET_WILDCARD,
    SEPARATION_WILDCARD,
    TRAIN_SET_WILDCARD,
    VARIANT_WILDCARD,
)

AFLITE = config.get("aflite")


def aflite_synthetic_files():
    syn = AFLITE["synthetic"]
    return [
        f"results/aflite/synthetic/sep{separation}/seed{seed}.json"
        for separation in syn["separations"]
        for seed in syn["seeds"]
    ]


def aflite_report_files():
    files = []
    if AFLITE["synthetic"] is not None:
        files += expand(
            "results/report/aflite/{name}",
            name=["table7.csv", "table7.md", "figure2.png", "figure2.svg"],
        )
    if AFLITE_TEXT:
        files += expand(
            "results/report/aflite/{name}",
            name=AFLITE_TEXT_REPORT,
        )
        if AFLITE_TEXT["ood"]:
            files += ["results/report/aflite/ood.csv", "results/report/aflite/ood.md"]
    return files


# AFLite's text experiments (rules/aflite.smk): results/aflite/text/<dataset>/...

AFLITE_TEXT = (AFLITE or {}).get("text")
AFLITE_TEXT_REPORT = [
    "text_tables.csv",
    "text_tables.md",
    "text_accuracy.csv",
    "text_accuracy.md",
    "text_iterations.png",
    "text_iterations.svg",
]


def aflite_representation():
    return AFLITE_TEXT["representation"]


def aflite_model_of(wildcards):
    """The encoder or classifier a job trains or runs, and its place in the config (MODEL_OF_RULE): the warm-up and
    the embeddings use the representation's encoder, the other rules a classifier under aflite.text.models.
    """
    if "model" not in wildcards.keys():
        return aflite_representation(), "aflite.text.representation"
    return (
        AFLITE_TEXT["models"][wildcards.model],
        f"aflite.text.models.{wildcards.model}",
    )


MODEL_OF_RULE.update(
    dict.fromkeys(
        (
            "aflite_warmup",
            "aflite_embed",
            "aflite_train_classifier",
            "aflite_predict",
            "aflite_ood_finetune",
            "aflite_ood_predict",
        ),
        aflite_model_of,
    )
)


def aflite_train_split(dataset):
    return split_file(dataset, AFLITE_TEXT["datasets"][dataset]["train"])


def aflite_dev_split(dataset):
    return split_file(dataset, AFLITE_TEXT["datasets"][dataset]["dev"])


def aflite_pool(dataset):
    """D: the training split less the warm-up fraction (which is discarded), or all of it without a warm-up."""
    if aflite_representation()["source"] == "warmup":
        return f"results/aflite/text/{dataset}/data/pool.parquet"
    return aflite_train_split(dataset)


def aflite_embedding_settings(wildcards):
    # size_class only sizes the SLURM request (MODEL_OF_RULE)
    return {
        k: v
        for k, v in aflite_representation().items()
        if k not in ("warmup", "size_class")
    }


def aflite_warmup_settings(wildcards):
    warmup = aflite_representation()["warmup"]
    return dict(warmup["training"], seed=warmup["seed"])


# A dataset's filtered sets: its own filter (variant "", results/aflite/text/<dataset>/filter/, the pool and the dev set
# filtered together, Tables 3-4) and each `filters.<name>` entry (variant "_<name>", .../filter_<name>/: the pool
# filtered alone with the filter's settings overridden, e.g. App. A.5's n = 182K for the out-of-distribution models).
# Their D_rand and D(AFLite) are the train sets random_<name> and aflite_<name>; D (full) is the dataset's own
# (spurious.aflite.track.TRAIN_SET_WILDCARD).


def aflite_filter_settings(dataset, variant=""):
    """Algorithm 1's settings of one filtered set: the dataset's filter, with filters.<variant>'s keys over it."""
    spec = AFLITE_TEXT["datasets"][dataset]
    name = variant.removeprefix("_")
    return dict(spec["filter"], **spec["filters"][name]) if name else spec["filter"]


def aflite_filter_inputs(wildcards):
    """The pool and its representations; the dataset's own filter also takes the dev set (filtered with the pool),
    a filters.<name> set does not (its models are only scored out of distribution)."""
    d = wildcards.dataset
    files = {"pool": aflite_pool(d)}
    if not wildcards.variant:
        files["dev"] = aflite_dev_split(d)
    files["pool_features"] = f"results/aflite/text/{d}/embeddings/pool.npy"
    if not wildcards.variant:
        files["dev_features"] = f"results/aflite/text/{d}/embeddings/dev.npy"
    return files


def aflite_train_set_id(train_set, variant):
    """A model's train set on a filtered set: D (full) is the same for every filter; D_rand and D(AFLite) of a
    filters.<variant> set are <train_set>_<variant>."""
    return train_set if train_set == FULL or not variant else f"{train_set}_{variant}"


def aflite_embed_inputs(wildcards):
    files = {
        "pool": aflite_pool(wildcards.dataset),
        "dev": aflite_dev_split(wildcards.dataset),
    }
    if aflite_representation()["source"] == "warmup":
        files["model"] = f"results/aflite/text/{wildcards.dataset}/warmup/model"
    return files


def aflite_training_settings(wildcards):
    return dict(
        AFLITE_TEXT["models"][wildcards.model]["training"], seed=int(wildcards.seed)
    )


def aflite_prediction_settings(wildcards):
    return prediction_settings(
        aflite_training_settings(wildcards), CLASSIFIER_PREDICTION_KEYS
    )


def aflite_text_runs():
    """'<dataset>/<model>/<train_set>/<inputs>/seed<seed>' for every classifier of the text experiments."""
    runs = []
    for dataset, spec in AFLITE_TEXT["datasets"].items():
        inputs = INPUTS if spec["partial_input"] else INPUTS[:1]
        for model, m in AFLITE_TEXT["models"].items():
            for train_set in m["train_sets"]:
                for kind in inputs:
                    for seed in m["seeds"]:
                        runs.append(f"{dataset}/{model}/{train_set}/{kind}/seed{seed}")
    return runs


def aflite_text_report_inputs(wildcards):
    files = {}
    for run in aflite_text_runs():
        dataset, rest = run.split("/", 1)
        key = "metrics__" + "__".join(run.split("/"))
        files[key] = f"results/aflite/text/{dataset}/predictions/{rest}.metrics.json"
    for dataset in AFLITE_TEXT["datasets"]:
        files[f"iterations__{dataset}"] = (
            f"results/aflite/text/{dataset}/filter/iterations.csv"
        )
        files[f"filter__{dataset}"] = (
            f"results/aflite/text/{dataset}/filter/summary.json"
        )
    return files


# AFLite's out-of-distribution sets (rules/aflite.smk): results/aflite/ood/<set>/...


def aflite_ood(name):
    return AFLITE_TEXT["ood"][name]


def aflite_ood_training_data(name):
    """Which filtered set an OOD set's models were trained on: the dataset, the filters.<name> entry (None: the
    dataset's own filter), Algorithm 1's settings and the filter's summary (the realised sizes).
    """
    spec = aflite_ood(name)
    dataset, variant = spec["models_from"], spec["models_filter"]
    suffix = f"_{variant}" if variant else ""
    return {
        "dataset": dataset,
        "filter": variant,
        "settings": aflite_filter_settings(dataset, suffix),
        "summary": f"results/aflite/text/{dataset}/filter{suffix}/summary.json",
    }


def aflite_ood_model(wildcards):
    """The model an OOD set scores: fine-tuned on the set's training split, or the AFLite text model itself."""
    spec = aflite_ood(wildcards.ood)
    if spec["finetune"]:
        return f"results/aflite/ood/{wildcards.ood}/finetuned/{wildcards.model}/{wildcards.train_set}/seed{wildcards.seed}/model"
    return f"results/aflite/text/{spec['models_from']}/models/{wildcards.model}/{wildcards.train_set}/full/seed{wildcards.seed}/model"


def aflite_ood_finetune_settings(wildcards):
    spec = aflite_ood(wildcards.ood)["finetune"]
    return dict(aflite_training_settings(wildcards), **spec["training"])


def aflite_ood_metrics_files():
    """Every (OOD set, model, train set, seed, split) metrics file; the train sets of the set's filtered set
    (models_filter)."""
    files = []
    for name, spec in AFLITE_TEXT["ood"].items():
        for model, m in AFLITE_TEXT["models"].items():
            for kind in m["train_sets"]:
                train_set = aflite_train_set_id(kind, spec["models_filter"])
                for seed in m["seeds"]:
                    for split in spec["splits"]:
                        files.append(
                            f"results/aflite/ood/{name}/predictions/{model}/{train_set}/seed{seed}/{split}.metrics.json"
                        )
    return files


def aflite_ood_report_inputs(wildcards):
    """Every metrics file, and the summaries of the filters the OOD sets' models were trained on."""
    summaries = {
        aflite_ood_training_data(name)["summary"] for name in AFLITE_TEXT["ood"]
    }
    return {"metrics": aflite_ood_metrics_files(), "filters": sorted(summaries)}
