"""Adapter: label balance of the evaluation features (top-k per label, present in the test split) under uniform
weights and under q (paper Fig. 2)."""

from typing import TYPE_CHECKING

from spurious.core import io, readers
from spurious.core.data import classification
from spurious.lexical import features as lexical
from spurious.lexical import reweight
from spurious.workflow import runlog

if TYPE_CHECKING:
    from snakemake.iocontainers import snakemake

log = runlog.setup(snakemake)
train = classification.read_parquet(snakemake.input.train)
n_labels = len(train.attrs["label_names"])
labels = train["label"].to_numpy()
weights = reweight.read_weights(snakemake.input.weights, train["id"])
top = readers.read_csv(snakemake.input.top, keep_default_na=False).drop_duplicates("feature")
features = top["feature"].tolist()
if hasattr(snakemake.input, "test"):
    test = classification.read_parquet(snakemake.input.test)
    counts, _ = lexical.feature_matrix(test["text_a"], test["text_b"], counting="types", vocabulary=features)
    occurs = counts.sum(axis=0).A1 > 0
    log.info("%d of %d selected features occur in the test split", int(occurs.sum()), len(features))
    features = [f for f, keep in zip(features, occurs, strict=True) if keep]
matrix, _ = lexical.feature_matrix(train["text_a"], train["text_b"], counting="types", vocabulary=features)
out = top.set_index("feature").loc[features, ["label", "z"]].reset_index()
out["balance_uniform"] = reweight.label_balance(matrix, labels, n_labels)
out["balance_q"] = reweight.label_balance(matrix, labels, n_labels, weights=weights)
improved = int((out["balance_q"] < out["balance_uniform"]).sum())
log.info("q improves the label balance of %d of %d evaluation features", improved, len(out))
with io.atomic_path(snakemake.output[0]) as tmp:
    out.to_csv(tmp, index=False)
