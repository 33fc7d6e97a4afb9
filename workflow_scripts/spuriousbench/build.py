"""Adapter: one feature's train / dev / test sets; fails naming the feature and the count its pool lacks."""

from typing import TYPE_CHECKING

from spurious.core import io
from spurious.spuriousbench import construction as sb
from spurious.workflow import runlog

if TYPE_CHECKING:
    from snakemake.iocontainers import snakemake

log = runlog.setup(snakemake)
w = snakemake.wildcards
c = snakemake.params.construction
feature = sb.feature_from_path(f"{w.category}/{w.fvalue}")
pools = {name: sb.read_split(snakemake.input[name]) for name in ("train", "dev", "test")}
suite = sb.build_suite(
    pools,
    [feature],
    train_size=c["train_size"],
    dev_size=c["dev_size"],
    test_size=c["test_size"],
    test_feature_rate=c["test_feature_rate"],
    prevalence=c["prevalence"],
    strength=c["strength"],
    target_label=c["target_label"],
    seed=c["seed"],
    errors="raise",
)
entry = suite["features"][feature]
spec = sb.FEATURES[feature]
stats = {"dataset": w.dataset, "feature": feature, "category": spec.category, "kind": spec.kind}
for split in ("train", "dev", "test"):
    frame, split_stats = entry[split]
    sb.write_split(frame, snakemake.output[split], split_stats)
    stats[split] = split_stats
    log.info("%s %s: %s", feature, split, split_stats)
stats["target_label"] = stats["train"]["target_label"]  # y*, the label the feature supports
stats["seconds"] = suite["seconds"]
io.write_json(stats, snakemake.output.stats)
