"""Adapter: z-scores of every (type, label) on the training split and the top-k types per label."""

from typing import TYPE_CHECKING

from spurious.core import io
from spurious.core.data import classification
from spurious.lexical import features as lexical
from spurious.workflow import runlog

if TYPE_CHECKING:
    from snakemake.iocontainers import snakemake

log = runlog.setup(snakemake)
p = snakemake.params
train = classification.read_parquet(snakemake.input.train)
names = train.attrs["label_names"]
matrix, vocabulary = lexical.feature_matrix(train["text_a"], train["text_b"], counting=p.counting)
table = lexical.zscore_table(matrix, vocabulary, train["label"].to_numpy(), len(names), names)
stop = lexical.feature_stop_words() if p.stop_words == "nltk" else frozenset()
top = lexical.top_features(table, k=p.top_k, stop_words=stop)
log.info(
    "%d instances, %d types (%s counts); top %d per label, %d stop words excluded",
    len(train), len(vocabulary), p.counting, p.top_k, len(stop),
)
for label, group in top.groupby("label", sort=False):
    log.info("%s: %s", label, ", ".join(group["feature"].head(15)))
io.write_parquet(table, snakemake.output.zscores, metadata={"counting": p.counting, "label_names": names})
with io.atomic_path(snakemake.output.top) as tmp:
    top.to_csv(tmp, index=False)
