"""Adapter: load one declared dataset split, validate it, write the normalised parquet (QA or classification)."""

from typing import TYPE_CHECKING

from spurious.core import classification, data, errors, runlog

if TYPE_CHECKING:
    from snakemake.iocontainers import snakemake

log = runlog.setup(snakemake)
task = snakemake.params.task
loader = classification if task == "classification" else data
where = f"dataset {snakemake.wildcards.dataset}, split {snakemake.wildcards.split}"
try:
    frame = loader.load_source(snakemake.params.source)
    source = frame.attrs.get("source", str(snakemake.params.source))
    frame, summary = loader.validate_records(frame, source=source, on_invalid=snakemake.params.on_invalid)
except (data.DataValidationError, errors.InputError, FileNotFoundError) as exc:
    # the same one-line errors as the command line's, naming the file, the record and the fix
    runlog.fail(log, f"{where}: {exc}")
log.info("%s: %d records kept, %d dropped, %d unlabeled", source, len(frame), summary["n_dropped"], summary.get("n_unlabeled", 0))
meta = {"source": source, "validation": summary}
if frame.attrs.get("rare_labels"):
    meta["rare_labels"] = frame.attrs["rare_labels"]  # inferred labels in < 1 % of rows (warned about above)
if task == "classification":
    log.info("label names %s; label counts %s", frame.attrs["label_names"], frame["label"].value_counts().sort_index().to_dict())
    classification.write_parquet(frame, snakemake.output[0], metadata=meta)
else:
    data.write_qa_parquet(frame, snakemake.output[0], metadata=meta)
