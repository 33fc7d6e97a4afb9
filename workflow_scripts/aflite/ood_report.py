"""Adapter: Tables 1-2 of AFLite's out-of-distribution evaluation from the per-split metrics files, with the filtered
set each model was trained on and its realised size (the filters' summaries)."""

from typing import TYPE_CHECKING

from spurious.aflite import ood as aflite_ood
from spurious.core import io, provenance
from spurious.core.report.tables import write_table
from spurious.workflow import runlog

if TYPE_CHECKING:
    from snakemake.iocontainers import snakemake

log = runlog.setup(snakemake)
p = snakemake.params
records = [io.read_json(path) for path in snakemake.input.metrics]
training = {}
for name, spec in p.training_data.items():
    training[name] = aflite_ood.training_data(
        spec["dataset"], spec["filter"], spec["settings"], io.read_json(spec["summary"])
    )
    log.info("%s: models trained on %s; sizes %s", name, training[name]["label"]["aflite"], training[name]["size"])
table = aflite_ood.ood_table(
    records, set_names=p.set_names, paper_models=p.paper_models, paper_training_data=p.paper_training_data,
    training=training,
)
write_table(table, snakemake.output.table_csv, snakemake.output.table_md, digits=1)  # the paper's one decimal
log.info("%d rows from %d metrics files:\n%s", len(table), len(records), table.to_string())
provenance.write_job(snakemake)  # what produced it, beside the first output
