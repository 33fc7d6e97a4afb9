# Think Twice's helpers (rules data, heuristics, train, predict, bias, debias, report): its runs (original, the
# matched control, debiased and bias models, human annotators), their settings and files, and the debiasing inputs.
# Output paths encode the experiment: dataset, split, model, seed, heuristic.

import os

from spurious.thinktwice.config import method_training
from spurious.thinktwice.track import (
    BIAS_MODEL,
    CONTROL,
    DEBIAS_METHODS,
    HUMAN_ANNOTATORS,
    METHOD_OF,
    MODEL_RUN,
    QA_LOGIT_KEYS,
    QA_PREDICTION_KEYS,
    SCALED_METHOD_WILDCARD,
    STAGE_OF_METHOD,
)

HEURISTICS = config["heuristics"]["names"]


DEBIAS = config.get("debias")


def parse_run(run):
    """'<model>/seed<s>' (original), '<model>/plain/seed<s>' (the matched control), '<model>/<method>/<heuristic>/
    seed<s>' (debiased or bias model) or 'human/annotator<k>' -> its parts."""
    parts = run.split("/")
    if parts[0] == "human":
        return {"model": "human", "annotator": int(parts[1].removeprefix("annotator"))}
    seed = int(parts[-1].removeprefix("seed"))
    if len(parts) == 2:
        return {
            "model": parts[0],
            "method": "original",
            "addressed": None,
            "seed": seed,
        }
    if len(parts) == 3:
        return {"model": parts[0], "method": parts[1], "addressed": None, "seed": seed}
    return {"model": parts[0], "method": parts[1], "addressed": parts[2], "seed": seed}


def model_runs():
    """(model, seed) pairs to train."""
    return [(name, seed) for name, m in config["models"].items() for seed in m["seeds"]]


def debiased_runs():
    """'<model>/<method>/<heuristic>/seed<seed>' for every configured debiasing experiment, and
    '<model>/plain/seed<seed>' for the matched control (one per seed: it addresses no heuristic).
    """
    if not DEBIAS:
        return []
    model = DEBIAS["model"]
    runs = [
        f"{model}/{CONTROL}/seed{seed}"
        for seed in DEBIAS["seeds"]
        if CONTROL in DEBIAS["methods"]
    ]
    return runs + [
        f"{model}/{method}/{h}/seed{seed}"
        for method in DEBIAS["methods"]
        if method != CONTROL
        for h in DEBIAS["heuristics"]
        for seed in DEBIAS["seeds"]
    ]


def evaluated_runs():
    """Prediction runs on every evaluated split: the measured models ('<model>/seed<seed>') and the debiased ones."""
    return original_runs() + debiased_runs()


def human_splits():
    human = config.get("human")
    return [(human["dataset"], human["split"])] if human else []


FIGURE4 = config.get("figure4")


def original_runs():
    """The trained models measured on every evaluated split (Figure 4's models trained elsewhere are not)."""
    elsewhere = set(FIGURE4["models"]) if FIGURE4 else set()
    return [
        f"{name}/seed{seed}" for name, seed in model_runs() if name not in elsewhere
    ]


def figure4_reference_run():
    ref = FIGURE4["reference"]
    return f"{ref['model']}/seed{ref['seed']}"


def figure4_threshold_run():
    """'<model>/seed<seed>' of the run whose own search on figure4's split gives the thresholds (figure4.
    thresholds_from: reference or {model, seed}); None for appendix_c (the paper's published thresholds).
    """
    source = FIGURE4["thresholds_from"]
    if source == "appendix_c":
        return None
    if source == "reference":
        return figure4_reference_run()
    return f"{source['model']}/seed{source['seed']}"


def figure4_runs():
    """'<model>/seed<seed>' of the runs measured at figure4's thresholds on its split: the reference run unless the
    thresholds are its own search, then every seed of the models trained on other datasets (predicted on figure4's
    split only)."""
    own = figure4_threshold_run() == figure4_reference_run()
    return ([] if own else [figure4_reference_run()]) + [
        f"{name}/seed{seed}"
        for name in FIGURE4["models"]
        for seed in config["models"][name]["seeds"]
    ]


def figure4_threshold_input(wildcards):
    """bias_fixed_threshold's thresholds: the source run's search result for the heuristic, none for appendix_c."""
    run = figure4_threshold_run()
    if run is None:
        return []
    return f"results/bias/{run}/{wildcards.dataset}/{wildcards.split}/{wildcards.heuristic}.json"


def figure4_inputs(wildcards):
    """The reference's own search when it gives the thresholds, the runs at figure4's thresholds, and the Human row
    on figure4's split."""
    where = f"{FIGURE4['dataset']}/{FIGURE4['split']}"
    files = {
        "fixed": [
            f"results/bias_fixed/{run}/{where}/{h}.json"
            for run in figure4_runs()
            for h in HEURISTICS
        ],
    }
    if figure4_threshold_run() == figure4_reference_run():
        files["reference"] = [
            f"results/bias/{figure4_reference_run()}/{where}/{h}.json"
            for h in HEURISTICS
        ]
    if (FIGURE4["dataset"], FIGURE4["split"]) in human_splits():
        files["human"] = [f"results/bias/human/{where}/{h}.json" for h in HEURISTICS]
    return files


FIGURE4_REPORT = ["figure4.csv", "figure4.md", "figure4.png", "figure4.svg"]


def bias_results(runs=None, human=True):
    """Bias result files of the runs (default: the original models) on every evaluated split, plus the Human row."""
    files = []
    for ref in config["evaluate"]:
        for run in runs or original_runs():
            files += [
                f"results/bias/{run}/{ref['dataset']}/{ref['split']}/{h}.json"
                for h in HEURISTICS
            ]
    for dataset, split in human_splits() if human else []:
        files += [f"results/bias/human/{dataset}/{split}/{h}.json" for h in HEURISTICS]
    return files


def metrics_files(runs=None, human=True):
    files = [
        f"results/predictions/{run}/{ref['dataset']}/{ref['split']}.metrics.json"
        for ref in config["evaluate"]
        for run in runs or original_runs()
    ]
    if not human:
        return files
    for dataset, split in human_splits():
        files += [
            f"results/predictions/human/annotator{k}/{dataset}/{split}.metrics.json"
            for k in HUMAN_ANNOTATORS
        ]
    return files


def segments_dir(model, seed, dataset, split, heuristic, threshold_split):
    """Segments of a split at the threshold the model's bias search found on threshold_split (same dataset)."""
    return f"results/segments/{model}/seed{seed}/{dataset}/{split}/{heuristic}/by_{threshold_split}"


def segment_files():
    files = []
    for seg in config["segments"]:
        base = segments_dir(
            seg["model"],
            seg["seed"],
            seg["dataset"],
            seg["split"],
            seg["heuristic"],
            seg["threshold_split"] or seg["split"],
        )
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


def heuristic_definitions():
    """The heuristics' definitions: names, compat mode and paper-text variants. The heuristics rule computes the
    values with them and the QA audit (rules/audit.smk) takes the same dict, so the two cannot drift apart.
    """
    h = config["heuristics"]
    return {"names": h["names"], "compat": h["compat"], "variants": h["variants"]}


def bias_search_settings():
    """The threshold search's settings and its small-sample setting allow_too_few_rows. The bias rules pass them to
    the search, and the QA audit (rules/audit.smk) takes the same dict."""
    return {
        k: config["bias"][k]
        for k in (
            "sample_size",
            "iterations",
            "with_replacement",
            "seed",
            "allow_too_few_rows",
        )
    }


def tfidf_reference_input(wildcards):
    ref = config["heuristics"].get("tfidf_reference")
    return {"tfidf_reference": split_file(ref["dataset"], ref["split"])} if ref else {}


def model_name(wildcards):
    """The model that a job works on: its model wildcard, or the first part of its run."""
    return (
        wildcards.model
        if "model" in wildcards.keys()
        else parse_run(wildcards.run)["model"]
    )


def model_config(wildcards):
    """The config of the model that a job works on."""
    return config["models"][model_name(wildcards)]


def thinktwice_model_of(wildcards):
    """The QA model a job trains or runs, and its place in the config (MODEL_OF_RULE)."""
    return model_config(wildcards), f"models.{model_name(wildcards)}"


MODEL_OF_RULE.update(
    dict.fromkeys(
        (
            "train",
            "predict",
            "train_bias_model",
            "feature_logits",
            "train_plain",
            "train_debiased",
            "scale_search_train",
            "scale_search_score",
        ),
        thinktwice_model_of,
    )
)


def run_settings(run):
    """The training settings a run was trained (and is featurised for prediction) with."""
    r = parse_run(run)
    if r["method"] == "original":
        return config["models"][r["model"]]["training"]
    return method_training(config, STAGE_OF_METHOD[r["method"]])


def training_settings(wildcards):
    """The training settings of a model plus its seed (the checkpoint folder is keyed by their hash)."""
    return dict(model_config(wildcards)["training"], seed=int(wildcards.seed))


def qa_prediction_settings(wildcards):
    return prediction_settings(run_settings(wildcards.run), QA_PREDICTION_KEYS)


def qa_logit_settings(wildcards):
    return prediction_settings(run_settings(wildcards.run), QA_LOGIT_KEYS)


DEBIAS_REPORT = [
    "table1.csv",
    "table1.md",
    "runs.csv",
    "runs.md",
    "figure6.png",
    "figure6.svg",
    "methods_bias.csv",
    "methods_bias.md",
    "cross_bias.csv",
    "cross_bias.md",
    "bias_models.csv",
    "bias_models.md",
    "figure5.png",
    "figure5.svg",
    "cross_bias.png",
    "cross_bias.svg",
    "figure3.png",
    "figure3.svg",
    "loss_curves.png",
    "loss_curves.svg",
]


def debias_report_files():
    return expand("results/report/debias/{name}", name=DEBIAS_REPORT)


def bias_model_runs():
    return [
        f"{DEBIAS['model']}/{BIAS_MODEL}/{h}/seed{DEBIAS['original_seed']}"
        for h in DEBIAS["heuristics"]
    ]


# Debiasing (rules/debias.smk)


def debias_train_ref():
    model = config["models"][DEBIAS["model"]]
    return DEBIAS["train"] or model["train"]


def debias_threshold_ref():
    model = config["models"][DEBIAS["model"]]
    return DEBIAS["threshold_from"] or model["validation"]


def debias_segments(split, heuristic):
    """The biased/unbiased segments of a split of the training dataset at the original model's threshold (or at
    the one given in debias.fixed_thresholds)."""
    fixed = heuristic in DEBIAS["fixed_thresholds"]
    base = segments_dir(
        DEBIAS["model"],
        DEBIAS["original_seed"],
        debias_train_ref()["dataset"],
        split,
        heuristic,
        "fixed" if fixed else debias_threshold_ref()["split"],
    )
    return {"biased": f"{base}/biased.parquet", "unbiased": f"{base}/unbiased.parquet"}


def validation_inputs(model):
    """A model's validation split, plus every evaluated split of another dataset, whose validation-loss curves are
    logged during training (paper Figs. 8-9: the original and the debiased models alike).
    """
    model = config["models"][model]
    files = {
        "validation": split_file(
            model["validation"]["dataset"], model["validation"]["split"]
        )
    }
    for ref in config["evaluate"]:
        if ref["dataset"] != model["validation"]["dataset"]:
            files[f"curve__{ref['dataset']}__{ref['split']}"] = split_file(
                ref["dataset"], ref["split"]
            )
    return files


def train_inputs(wildcards):
    """The original model's training split and its validation inputs (validation_inputs)."""
    model = model_config(wildcards)
    files = {"train": split_file(model["train"]["dataset"], model["train"]["split"])}
    return {**files, **validation_inputs(wildcards.model)}


def debias_validation(wildcards):
    """The debiased models' validation inputs: the original model's (validation_inputs)."""
    return validation_inputs(DEBIAS["model"])


def feature_logits_file(run):
    ref = debias_train_ref()
    return f"results/logits/{run}/{ref['dataset']}/{ref['split']}.npy"


def debiased_inputs(wildcards):
    """What each method trains on: the training split (plain), or what its entry in the track's METHODS reads
    (segments, training split, bias and teacher logits); the chosen scale where a scale search covers the method.
    """
    ref = debias_train_ref()
    files = debias_validation(wildcards)
    method = getattr(wildcards, "method", CONTROL)
    if method == CONTROL:
        files["train"] = split_file(ref["dataset"], ref["split"])
        return files
    if method in searched_methods():
        files["scale_choice"] = scale_choice_file(method)
    reads = METHOD_OF[method].reads
    if "segments" in reads:
        segs = debias_segments(ref["split"], wildcards.heuristic)
        files.update(train_biased=segs["biased"], train_unbiased=segs["unbiased"])
    if "train" in reads:
        files["train"] = split_file(ref["dataset"], ref["split"])
    if "bias_logits" in reads:
        files["bias_logits"] = feature_logits_file(
            f"{DEBIAS['model']}/{BIAS_MODEL}/{wildcards.heuristic}/seed{DEBIAS['original_seed']}"
        )
    if "teacher_logits" in reads:
        files["teacher_logits"] = feature_logits_file(
            f"{DEBIAS['model']}/seed{DEBIAS['original_seed']}"
        )
    return files


def method_settings(wildcards, stage):
    """A debiasing stage's training settings with the run's seed."""
    return dict(method_training(config, stage), seed=int(wildcards.seed))


def debias_checkpoint_dir(wildcards, method):
    """Resumable checkpoints outside the declared outputs, keyed by the run and its settings (a searched scale adds
    its own level, in the adapter)."""
    stage = STAGE_OF_METHOD[method]
    settings = dict(method_training(config, stage), seed=int(wildcards.seed))
    parts = [wildcards.model, method]
    if method != CONTROL:
        parts.append(wildcards.heuristic)
    run = os.path.join(*parts, f"seed{wildcards.seed}")
    return f"results/_checkpoints/{run}/{settings_key(settings)}"


def original_matches_control():
    """Whether the original model trained on the debiased runs' data with their budget (the paper config: then the
    original model is itself a matched control); the report says so."""
    model = config["models"][DEBIAS["model"]]
    same_data = debias_train_ref() == model["train"]
    same_budget = method_training(config, CONTROL) == model["training"]
    return bool(same_data and same_budget)


def searched_methods():
    """The methods whose scale comes from the scale search (debias.scale_search.methods), else none."""
    search = DEBIAS.get("scale_search") if DEBIAS else None
    return list(search["methods"]) if search else []


def scale_choice_file(method):
    return f"results/scale_search/{DEBIAS['model']}/{method}/choice.json"


def scale_value(x):
    """A grid value as it appears in paths: 0.8 -> '0.8', 0.95 -> '0.95'."""
    return f"{float(x):g}"


def scale_search_inputs(wildcards):
    """A candidate's training inputs: the method's own, without a scale choice (it is one of the candidates)."""
    files = debiased_inputs(wildcards)
    files.pop("scale_choice", None)
    return files


def scale_search_scores(wildcards):
    search = DEBIAS["scale_search"]
    return [
        f"results/scale_search/{wildcards.model}/{wildcards.method}/{search['heuristic']}/scale{scale_value(x)}/"
        f"seed{DEBIAS['seeds'][0]}/score.json"
        for x in search["grid"]
    ]
