"""Adapter: load one declared dataset split, validate it, write the normalised parquet."""

from typing import TYPE_CHECKING

from spurious import data, runlog

if TYPE_CHECKING:
    from snakemake.iocontainers import snakemake

log = runlog.setup(snakemake)
frame = data.load_source(snakemake.params.source)
source = frame.attrs.get("source", str(snakemake.params.source))
frame, summary = data.validate_records(frame, source=source, on_invalid=snakemake.params.on_invalid)
log.info("%s: %d records kept, %d dropped", source, len(frame), summary["n_dropped"])
data.write_qa_parquet(frame, snakemake.output[0], metadata={"source": source, "validation": summary})
