"""Adapter: in-context learning on one feature (§5): demonstrations drawn from its training split, predictions on
its test and dev sets, the spurious gap and the ID (dev) accuracy, as spurious_predict writes them."""

from typing import TYPE_CHECKING

import pandas as pd
import torch

from spurious.core import io, provenance
from spurious.spuriousbench import construction as sb
from spurious.spuriousbench import icl
from spurious.workflow import runlog

if TYPE_CHECKING:
    from snakemake.iocontainers import snakemake

log = runlog.setup(snakemake)
torch.set_num_threads(snakemake.threads)
w = snakemake.wildcards
p = snakemake.params
settings = p.icl
seed = int(w.seed)
torch.manual_seed(seed)
feature = sb.feature_from_path(f"{w.category}/{w.fvalue}")
frames = {name: sb.read_split(snakemake.input[name]) for name in ("train", "test", "dev")}
template = icl.template_for(p.builder, settings["template"])
demos = icl.draw_demonstrations(
    frames["train"], shots=settings["shots"], prevalence=settings["prevalence"], strength=settings["strength"],
    target_label=p.target_label, seed=seed,
)
log.info(
    "%s: %d demonstrations (prevalence %.2f, strength %.2f, seed %d), template %r, label words %s",
    feature, len(demos), settings["prevalence"], settings["strength"], seed, template.example, template.label_words,
)
model, tokenizer = icl.load_causal_lm(p.checkpoint)
both = pd.concat([frames[name][["id", "text_a", "text_b", "label"]] for name in ("test", "dev")], ignore_index=True)
both.attrs["label_names"] = frames["test"].attrs["label_names"]
predicted, record = icl.predict_icl(
    model, tokenizer, demos, both, template, batch_size=settings["batch_size"], device=settings["device"],
    bf16=settings["bf16"], log=log.info,
)
n_test = len(frames["test"])
test = predicted.iloc[:n_test].reset_index(drop=True)
test.attrs["label_names"] = predicted.attrs["label_names"]
dev_correct = predicted["correct"].to_numpy()[n_test:]
test["group"] = frames["test"]["group"].to_numpy()
test["has_feature"] = frames["test"]["has_feature"].to_numpy()
io.write_parquet(test, snakemake.output.predictions, metadata={"label_names": test.attrs["label_names"]})
spec = sb.FEATURES[feature]
metrics = {
    "dataset": w.dataset,
    "feature": feature,
    "category": spec.category,
    "kind": spec.kind,
    "model": w.model,
    "model_kind": "pretrained",
    "method": "icl",
    "seed": seed,
    "paper_name": p.paper_name,
    **sb.spurious_gap(test["correct"].to_numpy(), test["group"].to_numpy()),
    "dev_accuracy": float(dev_correct.mean()),
    "n_dev": len(dev_correct),
    "predicted_target_rate": float((test["prediction"] == p.target_label).mean()),
    "constant_prediction": bool(test["prediction"].nunique() == 1),
    "icl": {**record, "prevalence": settings["prevalence"], "strength": settings["strength"],
            # what the draw realised (rounding at few shots)
            "realised_prevalence": float(demos["has_feature"].mean()),
            "realised_strength": float((demos.loc[demos["has_feature"], "label"] == p.target_label).mean())
            if demos["has_feature"].any() else None,
            "template": template.to_dict(), "demonstration_ids": demos["id"].astype(str).tolist()},
}
log.info("%s: gap %.4f, dev accuracy %.4f", feature, metrics["gap"], metrics["dev_accuracy"])
io.write_json(metrics, snakemake.output.metrics)
provenance.write_job(snakemake)  # what produced it, beside the first output
