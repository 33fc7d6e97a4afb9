"""Adapter: AFLite over the pool and the dev set (or the pool alone: a filters.<name> set has no dev input);
per-instance outcome, p̃ per iteration, the iterations table. Saved iterations (params.state_dir) are removed only
after the outputs are written."""

import shutil
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import torch

from spurious.aflite import text as aflite_text
from spurious.core import io, readers
from spurious.core.data import classification
from spurious.workflow import runlog

if TYPE_CHECKING:
    from snakemake.iocontainers import snakemake

log = runlog.setup(snakemake)
torch.set_num_threads(snakemake.threads)
inp, p = snakemake.input, snakemake.params
pool = classification.read_parquet(inp.pool)
features = {"pool": readers.read_npy(inp.pool_features)}
if "dev" in dict(inp.items()):  # named inputs (a Namedlist's `in` looks at the paths)
    dev = classification.read_parquet(inp.dev)
    features["dev"] = readers.read_npy(inp.dev_features)
else:  # the pool filtered alone: an empty dev part
    dev = pool.iloc[:0]
    features["dev"] = np.zeros((0, features["pool"].shape[1]), dtype=features["pool"].dtype)
for part, frame in (("pool", pool), ("dev", dev)):
    if len(features[part]) != len(frame):
        raise ValueError(
            f"{inp[part + '_features']}: {len(features[part])} rows for {len(frame)} examples in {inp[part]}; "
            "rerun the aflite_embed rule for this dataset"
        )
table, result = aflite_text.filter_pool_and_dev(
    features["pool"], pool["label"].to_numpy(), features["dev"], dev["label"].to_numpy(),
    settings=p.settings, device=p.execution["device"], gather_memory_mb=p.execution["gather_memory_mb"],
    log_fn=log.info, state_dir=p.state_dir,
)
table = aflite_text.attach_ids(table, pool, dev)
io.write_parquet(table, snakemake.output.instances, metadata={"dataset": snakemake.wildcards.dataset})
scores = np.stack(result.scores) if result.scores else np.zeros((0, len(table)))
with io.atomic_path(snakemake.output.scores) as tmp:
    np.save(tmp, scores.astype(np.float32))
iterations = pd.DataFrame(
    [{k: v for k, v in r.items() if k != "removed_positions"} for r in result.iterations],
    columns=["iteration", "size_before", "removed", "size_after", "mean_heldout_accuracy", "n_above_tau", "seconds"],
)
with io.atomic_path(snakemake.output.iterations) as tmp:
    iterations.to_csv(tmp, index=False)
kept = {part: int(((table["part"] == part) & (table["removed_at"] < 0)).sum()) for part in ("pool", "dev")}
io.write_json(
    {
        "dataset": snakemake.wildcards.dataset,
        "settings": dict(p.settings),
        "n_pool": len(pool),
        "n_dev": len(dev),
        "n_pool_kept": kept["pool"],
        "n_dev_kept": kept["dev"],
        "n_iterations": len(result.iterations),
        "stopped": result.stopped,
        "label_counts_kept": {
            part: table[(table["part"] == part) & (table["removed_at"] < 0)]["label"]
            .value_counts()
            .sort_index()
            .to_dict()
            for part in ("pool", "dev")
        },
    },
    snakemake.output.summary,
)
log.info(
    "kept %d of %d pool and %d of %d dev examples (%s)", kept["pool"], len(pool), kept["dev"], len(dev), result.stopped
)
shutil.rmtree(p.state_dir, ignore_errors=True)
