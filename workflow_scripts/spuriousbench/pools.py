"""Adapter: a dataset's disjoint train / dev / test pools for SpuriousBench."""

from typing import TYPE_CHECKING

from spurious.core import io
from spurious.core.data import classification
from spurious.spuriousbench import construction as sb
from spurious.workflow import runlog

if TYPE_CHECKING:
    from snakemake.iocontainers import snakemake

log = runlog.setup(snakemake)
p = snakemake.params.pools
train = classification.read_parquet(snakemake.input.train)
test = classification.read_parquet(snakemake.input.test)
if snakemake.params.builder == "sst2":
    pools = sb.sst2_pools(
        train,
        test,
        seed=p["seed"],
        dev_fraction=p["dev_fraction"],
        test_fraction=p["test_fraction"],
        min_tokens=p["min_tokens"],
    )
else:
    pools = sb.mnli_pools(train, test, seed=p["seed"], dev_fraction=p["dev_fraction"])
summary = {"builder": snakemake.params.builder, "settings": p, "sources": {"train": len(train), "test": len(test)}}
for name, frame in pools.items():
    sb.write_split(frame, snakemake.output[name])
    counts = frame["label"].value_counts().sort_index()
    summary[name] = {"size": len(frame), "labels": {int(k): int(v) for k, v in counts.items()}}
    log.info("%s pool: %d rows, labels %s", name, len(frame), summary[name]["labels"])
io.write_json(summary, snakemake.output.summary)
