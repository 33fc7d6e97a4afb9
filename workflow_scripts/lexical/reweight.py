"""Adapter: instance weights q balancing the labels of every frequent type (paper §5.1), Err(uniform) and Err(q)."""

from typing import TYPE_CHECKING

import pandas as pd

from spurious.core import classification, io, runlog
from spurious.lexical import features as lexical
from spurious.lexical import reweight

if TYPE_CHECKING:
    from snakemake.iocontainers import snakemake

log = runlog.setup(snakemake)
settings = snakemake.params.reweight
train = classification.read_parquet(snakemake.input.train)
names = train.attrs["label_names"]
labels = train["label"].to_numpy()
# The reweighting features are presences (types), whatever the z-score counting mode.
matrix, vocabulary = lexical.feature_matrix(train["text_a"], train["text_b"], counting="types")
selection = reweight.select_features(matrix, labels, len(names), vocabulary, min_count=settings["min_count"])
if selection.dropped_missing_label:
    log.info("dropped %d features that lack some label: %s", len(selection.dropped_missing_label), ", ".join(selection.dropped_missing_label))
if len(selection.columns) == 0:
    raise ValueError(
        f"{snakemake.input.train}: no type occurs in {settings['min_count']} instances of every label; lower "
        "lexical.reweight.min_count"
    )
features = matrix[:, selection.columns]
log.info("%d instances, %d labels, %d features (types in >= %d instances)", len(train), len(names), features.shape[1], settings["min_count"])
result = reweight.solve_weights(
    features, labels, len(names), max_steps=settings["max_steps"], tol=settings["tol"], device=settings["device"], log=log.info
)
# Err under both targets (1/|Y|, the formula; the label distribution, the tables' captions): the report picks one
errs = {"uniform": reweight.err_both(features, labels, len(names)), "q": reweight.err_both(features, labels, len(names), weights=result.q)}
err_uniform, err_q = errs["uniform"]["uniform"], errs["q"]["uniform"]
log.info("Err(uniform) %.4f -> Err(q) %.4f (%d steps, converged %s, %.1fs)", err_uniform, err_q, result.steps, result.converged, result.wall_time_s)
n = len(train)
io.write_parquet(
    pd.DataFrame({"id": train["id"].astype(str), "label": labels, "q": result.q, "weight": result.q * n}),
    snakemake.output.weights,
    metadata={"label_names": names, "note": "weight = q * |D|: the multiplier of each example's loss"},
)
with io.atomic_path(snakemake.output.objective) as tmp:
    pd.DataFrame(result.history).to_csv(tmp, index=False)
io.write_json(
    {
        "dataset": snakemake.wildcards.dataset,
        "n_instances": n,
        "n_labels": len(names),
        "label_names": names,
        "n_features": int(features.shape[1]),
        "dropped_missing_label": selection.dropped_missing_label,
        "err_uniform": err_uniform,
        "err_q": err_q,
        "err_vs_label_distribution": {"uniform": errs["uniform"]["label_distribution"], "q": errs["q"]["label_distribution"]},
        "converged": result.converged,
        "steps": result.steps,
        "wall_time_s": result.wall_time_s,
        "device": result.device,
        "final_objective": result.history[-1]["objective"] if result.history else None,
        "settings": settings,
    },
    snakemake.output.summary,
)
