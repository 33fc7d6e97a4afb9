"""Adapter: compute the configured heuristics for one split."""

from typing import TYPE_CHECKING

from spurious.core import io
from spurious.core.data import squad
from spurious.thinktwice import heuristics
from spurious.workflow import runlog

if TYPE_CHECKING:
    from snakemake.iocontainers import snakemake

log = runlog.setup(snakemake)
frame = squad.read_qa_parquet(snakemake.input.data)
tfidf_contexts = None
if hasattr(snakemake.input, "tfidf_reference"):  # a Namedlist: "in" would test values
    # One context per question, as the reference fits TF-IDF (contexts repeat once per question).
    tfidf_contexts = squad.read_qa_parquet(snakemake.input.tfidf_reference)["context"].tolist()
log.info("%d questions; heuristics %s; compat %s", len(frame), snakemake.params.names, snakemake.params.compat)
values = heuristics.compute_heuristics(
    frame,
    snakemake.params.names,
    compat=snakemake.params.compat,
    variants=dict(snakemake.params.variants),
    tfidf_contexts=tfidf_contexts,
    threads=snakemake.threads,
)
io.write_parquet(
    values,
    snakemake.output[0],
    metadata={
        "heuristics": list(snakemake.params.names),
        "compat": snakemake.params.compat,
        "variants": dict(snakemake.params.variants),
        "tfidf_reference": str(getattr(snakemake.input, "tfidf_reference", "the split itself")),
    },
)
