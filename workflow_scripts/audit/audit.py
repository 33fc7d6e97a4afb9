"""Adapter: one `spurious audit` into results/audit/<name>/ (audit.json, report.html)."""

from pathlib import Path
from typing import TYPE_CHECKING

from spurious.audit.command import run_audit
from spurious.core import provenance
from spurious.workflow import runlog

if TYPE_CHECKING:
    from snakemake.iocontainers import snakemake

log = runlog.setup(snakemake)
spec = snakemake.params.spec
inputs = snakemake.input
run_audit(
    spec["model"],
    spec["task"],
    Path(snakemake.output.json).parent,
    data=inputs.get("data"),
    train=inputs.get("train"),
    tokens=tuple(spec["insert_tokens"]),
    features=spec["features"],
    tfidf_reference=inputs.get("tfidf_reference"),
    bias_settings=snakemake.params.bias,
    heuristic_settings=snakemake.params.heuristics,
    threads=snakemake.threads,
    log_fn=log.info,
)
provenance.write_job(snakemake)  # what produced it, beside the first output
