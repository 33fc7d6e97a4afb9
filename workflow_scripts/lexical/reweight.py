"""Adapter: instance weights q balancing the labels of every frequent type (paper §5.1), Err(uniform) and Err(q)."""

from typing import TYPE_CHECKING

import pandas as pd

from spurious.core import io
from spurious.core.data import classification
from spurious.lexical import features as lexical
from spurious.lexical import reweight
from spurious.workflow import runlog

if TYPE_CHECKING:
    from snakemake.iocontainers import snakemake

log = runlog.setup(snakemake)
settings = dict(snakemake.params.settings)
train = classification.read_parquet(snakemake.input.train)
names = train.attrs["label_names"]
labels = train["label"].to_numpy()
unit = settings["min_count_unit"]
# The reweighting features are presences (F_j: the type occurs in the instance), whatever the z-score counting mode;
# counting occurrences for min_count needs the counts (solve_weights and err read any count as "present").
matrix, vocabulary = lexical.feature_matrix(
    train["text_a"], train["text_b"], counting="tokens" if unit == "occurrences" else "types"
)
selection = reweight.select_features(matrix, labels, len(names), vocabulary, min_count=settings["min_count"], unit=unit)
if selection.dropped_missing_label:
    log.info(
        "dropped %d features that lack some label: %s",
        len(selection.dropped_missing_label), ", ".join(selection.dropped_missing_label),
    )
if len(selection.columns) == 0:
    raise ValueError(
        f"{snakemake.input.train}: no type has {settings['min_count']} {unit} and an instance of every label; lower "
        "lexical.reweight.min_count"
    )
features = matrix[:, selection.columns]
log.info(
    "%d instances, %d labels, %d features (types with >= %d %s)",
    len(train), len(names), features.shape[1], settings["min_count"], unit,
)
result = reweight.solve_weights(
    features, labels, len(names), max_steps=settings["max_steps"], tol=settings["tol"],
    min_ess_fraction=settings["min_ess_fraction"], device=settings["device"], log=log.info,
)
# Err under both targets (1/|Y|, the formula; the label distribution, the tables' captions): the report picks one
errs = {
    "uniform": reweight.err_both(features, labels, len(names)),
    "q": reweight.err_both(features, labels, len(names), weights=result.q),
}
err_uniform, err_q = errs["uniform"]["uniform"], errs["q"]["uniform"]
log.info(
    "Err(uniform) %.4f -> Err(q) %.4f, effective sample size %.1f of %d (%s; %s)",
    err_uniform, err_q, result.ess, len(train), result.selection, result.stopped,
)
final = result.history[-1]
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
        "err_vs_label_distribution": {
            "uniform": errs["uniform"]["label_distribution"], "q": errs["q"]["label_distribution"]
        },
        "effective_sample_size": result.ess,
        "min_effective_sample_size": result.min_ess,
        "chosen_step": result.chosen_step,
        "selection": result.selection,
        "stopped": result.stopped,
        "converged": result.converged,
        "steps": result.steps,
        "final_iterate": {
            "step": final["step"], "err": final["err"], "effective_sample_size": final["ess"],
            "objective": final["objective"],
        },
        "wall_time_s": result.wall_time_s,
        "device": result.device,
        "final_objective": final["objective"],
        "settings": settings,
    },
    snakemake.output.summary,
)
