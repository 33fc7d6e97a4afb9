"""Adapter: Err of sampled bigrams under uniform weights and under the unigram-derived q (paper §6, Table 3)."""

from typing import TYPE_CHECKING

from spurious.core import io
from spurious.core.data import classification
from spurious.lexical import features as lexical
from spurious.lexical import reweight
from spurious.workflow import runlog

if TYPE_CHECKING:
    from snakemake.iocontainers import snakemake

log = runlog.setup(snakemake)
settings = snakemake.params.bigrams
train = classification.read_parquet(snakemake.input.train)
n_labels = len(train.attrs["label_names"])
labels = train["label"].to_numpy()
weights = reweight.read_weights(snakemake.input.weights, train["id"])
matrix, vocabulary = lexical.bigram_matrix(train["text_a"], train["text_b"])
sample = lexical.sample_bigrams(matrix, vocabulary, labels, n_labels, n=settings["n"], seed=settings["seed"])
column = {bigram: j for j, bigram in enumerate(vocabulary)}
sampled = matrix[:, [column[b] for b in sample]]  # the sample's columns: no second pass over the texts
errs = {
    "uniform": reweight.err_both(sampled, labels, n_labels),
    "q": reweight.err_both(sampled, labels, n_labels, weights=weights),
}
err_uniform, err_q = errs["uniform"]["uniform"], errs["q"]["uniform"]
log.info(
    "%d distinct bigrams; sampled %d present in every label (seed %d): Err(uniform) %.4f, Err(q) %.4f",
    len(vocabulary), len(sample), settings["seed"], err_uniform, err_q,
)
io.write_json(
    {"dataset": snakemake.wildcards.dataset, "n_bigrams": len(sample), "err_uniform": err_uniform, "err_q": err_q,
     "err_vs_label_distribution": {"uniform": errs["uniform"]["label_distribution"],
                                   "q": errs["q"]["label_distribution"]},
     "seed": settings["seed"], "bigrams": sample},
    snakemake.output[0],
)
