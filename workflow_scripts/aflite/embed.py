"""Adapter: Φ(X) of the pool and the dev set as .npy (rows in the parquet files' order), with a summary naming
the representation and the ids it covers."""

from typing import TYPE_CHECKING

import numpy as np
import torch

from spurious.core import io, provenance
from spurious.core.data import classification
from spurious.core.train import embeddings, logits
from spurious.workflow import runlog

if TYPE_CHECKING:
    from snakemake.iocontainers import snakemake

log = runlog.setup(snakemake)
torch.set_num_threads(snakemake.threads)
rep = snakemake.params.representation
summary = {"dataset": snakemake.wildcards.dataset, "source": rep["source"]}
for part in ("pool", "dev"):
    frame = classification.read_parquet(snakemake.input[part])
    if rep["source"] == "file":
        path = snakemake.params.features["train" if part == "pool" else "dev"]
        values = embeddings.read_features(path, frame["id"])
        summary[f"{part}_features"] = path
    else:
        encoder = snakemake.input.model if rep["source"] == "warmup" else rep["checkpoint"]
        log.info("embedding %d %s examples with %s (%s pooling)", len(frame), part, encoder, rep["pooling"])
        values = embeddings.embed(
            frame, encoder, pooling=rep["pooling"], max_length=rep["max_length"], batch_size=rep["batch_size"],
            device=rep["device"], log=log.info,
        )
        summary.update(encoder=str(encoder), pooling=rep["pooling"], max_length=rep["max_length"])
    if not np.isfinite(values).all():
        raise ValueError(f"{part}: the representations hold non-finite values; check the encoder or the features file")
    with io.atomic_path(snakemake.output[part]) as tmp:
        np.save(tmp, values.astype(np.float32))
    summary[part] = {
        "n": len(frame), "dim": int(values.shape[1]), "ids_sha256": logits.ids_sha256(frame["id"].astype(str).tolist())
    }
io.write_json(summary, snakemake.output.summary)
provenance.write_job(snakemake, checkpoint=rep.get("checkpoint") if rep["source"] == "pretrained" else None)
