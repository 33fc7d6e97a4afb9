"""Adapter: one synthetic AFLite run (generate, score, filter, score again)."""

from typing import TYPE_CHECKING

import torch

from spurious.aflite import synthetic as aflite_synthetic
from spurious.core import io
from spurious.workflow import runlog

if TYPE_CHECKING:
    from snakemake.iocontainers import snakemake

log = runlog.setup(snakemake)
torch.set_num_threads(snakemake.threads)
w = snakemake.wildcards
settings = aflite_synthetic.SyntheticSettings(**snakemake.params.settings)
run = aflite_synthetic.run_one(float(w.separation), int(w.seed), settings, device="cpu", log_fn=log.info)
log.info(
    "separation %s seed %s: before %s, after %s; kept %d of %d (biased %d of %d, flipped %d of %d)",
    w.separation, w.seed, run["before"], run["after"], run["n_kept"], run["n"], run["biased_kept"],
    run["biased_total"], run["flipped_kept"], run["flipped_total"],
)
io.write_json(run, snakemake.output[0])
