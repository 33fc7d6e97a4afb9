"""Adapter: D, D_rand and D(AFLite) from the pool, and the AFLite-filtered dev set; the outputs the rule names (a
filters.<name> set: D_rand and D(AFLite) only, from the pool filtered alone)."""

from typing import TYPE_CHECKING

from spurious.aflite import text as aflite_text
from spurious.core import readers
from spurious.core.data import classification
from spurious.workflow import runlog

if TYPE_CHECKING:
    from snakemake.iocontainers import snakemake

log = runlog.setup(snakemake)
pool = classification.read_parquet(snakemake.input.pool)
table = readers.read_parquet(snakemake.input.instances)
sets = aflite_text.training_sets(pool, table, seed=snakemake.params.seed)
outputs = dict(snakemake.output.items())  # named outputs (a Namedlist's `in` looks at the paths)
if "dev_filtered" in outputs:
    dev = classification.read_parquet(snakemake.input.dev)
    sets["dev_filtered"] = aflite_text.filtered_dev(dev, table)
sets = {name: frame for name, frame in sets.items() if name in outputs}
for name, frame in sets.items():
    if name in ("aflite", "dev_filtered") and (len(frame) == 0 or frame["label"].nunique() < 2):
        raise ValueError(
            f"{snakemake.input.instances}: AFLite left {len(frame)} examples with {frame['label'].nunique()} label(s) "
            f"in {name}; raise the dataset's filter.tau or filter.n so that a trainable set remains"
        )
for name, frame in sets.items():
    log.info("%s: %d examples, label counts %s", name, len(frame), frame["label"].value_counts().sort_index().to_dict())
    meta = {"aflite_set": name, "from": str(snakemake.input.pool if name != "dev_filtered" else snakemake.input.dev)}
    if name == "random":
        meta["seed"] = snakemake.params.seed
    classification.write_parquet(frame, snakemake.output[name], metadata=meta)
