"""Adapter: the exact permutation test of one classifier's test predictions (usual vs unusual instances)."""

from typing import TYPE_CHECKING

from spurious.core import io, readers
from spurious.core.data import classification
from spurious.lexical import features as lexical
from spurious.workflow import runlog

if TYPE_CHECKING:
    from snakemake.iocontainers import snakemake

log = runlog.setup(snakemake)
w = snakemake.wildcards
table = readers.read_parquet(snakemake.input.zscores)
top = readers.read_csv(snakemake.input.top, keep_default_na=False)
test = classification.read_parquet(snakemake.input.test)
predictions = readers.read_parquet(snakemake.input.predictions)
labels = test["label"].to_numpy()
correct = lexical.correct_predictions(
    predictions, test["id"].astype(str).tolist(), labels, test.attrs["label_names"], source=snakemake.input.predictions
)
result = lexical.model_bias_test(
    table, top, test["text_a"], test["text_b"], labels, correct, counting=snakemake.params.counting
)
log.info(
    "|U| %d ACC(U) %.4f, |N| %d ACC(N) %.4f, log10 p %.3f (%d of %d features in the test split)",
    result["n_usual"], result["acc_usual"], result["n_unusual"], result["acc_unusual"], result["log10_p"],
    result["n_features_present"], result["n_features_selected"],
)
io.write_json(
    dict(result, dataset=w.dataset, model=w.model, weighting=w.weighting, seed=int(w.seed)), snakemake.output[0]
)
