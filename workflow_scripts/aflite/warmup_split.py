"""Adapter: split the warm-up fraction off the training split; the rest is the pool AFLite filters."""

from typing import TYPE_CHECKING

from spurious.aflite import text as aflite_text
from spurious.core.data import classification
from spurious.workflow import runlog

if TYPE_CHECKING:
    from snakemake.iocontainers import snakemake

log = runlog.setup(snakemake)
p = snakemake.params
train = classification.read_parquet(snakemake.input[0])
pool, warmup = aflite_text.split_warmup(train, fraction=p.fraction, seed=p.seed)
for name, part in (("pool", pool), ("warmup", warmup)):
    log.info("%s: %d examples, label counts %s", name, len(part), part["label"].value_counts().sort_index().to_dict())
    meta = {"split_from": str(snakemake.input[0]), "warmup_fraction": p.fraction, "seed": p.seed, "part": name}
    classification.write_parquet(part, snakemake.output[name], metadata=meta)
