# Path helpers shared by the rules. Output paths encode the experiment: dataset, split, model, seed, heuristic.

import hashlib
import json

HEURISTICS = config["heuristics"]["names"]
HUMAN_ANNOTATORS = [0, 1, 2]


def split_file(dataset, split):
    """The normalised parquet of a (dataset, split); derived splits carry their derivation seed in the path."""
    derive = config["datasets"][dataset].get("derive")
    if derive and split in ("train", "validation"):
        return f"results/data/{dataset}/derived_s{derive['seed']}/{split}.parquet"
    return f"results/data/{dataset}/{split}.parquet"


def model_runs():
    """(model, seed) pairs to train."""
    return [(name, seed) for name, m in config["models"].items() for seed in m["seeds"]]


def evaluated_runs():
    """Prediction runs of the trained models: '<model>/seed<seed>'."""
    return [f"{name}/seed{seed}" for name, seed in model_runs()]


def human_splits():
    human = config.get("human")
    return [(human["dataset"], human["split"])] if human else []


def bias_results():
    files = []
    for ref in config["evaluate"]:
        for run in evaluated_runs():
            files += [
                f"results/bias/{run}/{ref['dataset']}/{ref['split']}/{h}.json"
                for h in HEURISTICS
            ]
    for dataset, split in human_splits():
        files += [f"results/bias/human/{dataset}/{split}/{h}.json" for h in HEURISTICS]
    return files


def metrics_files():
    files = [
        f"results/predictions/{run}/{ref['dataset']}/{ref['split']}.metrics.json"
        for ref in config["evaluate"]
        for run in evaluated_runs()
    ]
    for dataset, split in human_splits():
        files += [
            f"results/predictions/human/annotator{k}/{dataset}/{split}.metrics.json"
            for k in HUMAN_ANNOTATORS
        ]
    return files


def segment_files():
    files = []
    for seg in config["segments"]:
        base = f"results/segments/{seg['model']}/seed{seg['seed']}/{seg['dataset']}/{seg['split']}/{seg['heuristic']}"
        files += [f"{base}/biased.parquet", f"{base}/unbiased.parquet"]
    return files


def report_files():
    return expand(
        "results/report/{name}",
        name=[
            "bias_table.csv",
            "bias_table.md",
            "thresholds.csv",
            "thresholds.md",
            "scores.csv",
            "scores.md",
            "figure2.png",
            "figure2.svg",
        ],
    )


def all_targets():
    return report_files() + segment_files()


def tfidf_reference_input(wildcards):
    ref = config["heuristics"].get("tfidf_reference")
    return {"tfidf_reference": split_file(ref["dataset"], ref["split"])} if ref else {}


def model_config(wildcards):
    return config["models"][wildcards.model]


def training_settings(wildcards):
    """The training settings of a model plus its seed (the checkpoint folder is keyed by their hash)."""
    return dict(model_config(wildcards)["training"], seed=int(wildcards.seed))


def settings_key(settings):
    return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[
        :12
    ]
