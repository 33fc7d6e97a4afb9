"""Adapter: load one declared dataset split, validate it, write the normalised parquet (QA or classification) and the
split's fetch record (the hub commit loaded, or the sha256 of the file read). A local rule: the only job besides the
other fetch rules that may use the network."""

from pathlib import Path
from typing import TYPE_CHECKING

from spurious.core.data import hub

hub.network_for_local_rule()  # before datasets is imported: the user's own HF_*_OFFLINE, not the jobs' offline ones

from spurious.core import errors  # noqa: E402
from spurious.core.data import classification, squad  # noqa: E402
from spurious.workflow import runlog  # noqa: E402

if TYPE_CHECKING:
    from snakemake.iocontainers import snakemake

log = runlog.setup(snakemake)
task = snakemake.params.task
loader = classification if task == "classification" else squad
where = f"dataset {snakemake.wildcards.dataset}, split {snakemake.wildcards.split}"
try:
    frame = loader.load_source(snakemake.params.source)
    attrs = dict(frame.attrs)
    source = attrs.get("source", str(snakemake.params.source))
    frame, summary = loader.validate_records(frame, source=source, on_invalid=snakemake.params.on_invalid)
    # the config's checksum (or the fetch record of a fetched file) applies to its path, not to a mirror file
    declared = snakemake.params.source.get("path")
    read_path = bool(declared) and not attrs.get("hub") and Path(source).resolve() == Path(declared).resolve()
    record = hub.dataset_record(
        f"{snakemake.wildcards.dataset}/{snakemake.wildcards.split}", attrs, source, rows=len(frame),
        file_record=snakemake.input.get("file_record") if read_path else None,
        expected=snakemake.params.source.get("fetch") if read_path else None,
    )
except (squad.DataValidationError, errors.InputError, FileNotFoundError) as exc:
    # the same one-line errors as the command line's, naming the file, the record and the fix
    runlog.fail(log, f"{where}: {exc}")
log.info("%s: %d records kept, %d dropped, %d unlabeled", source, len(frame), summary["n_dropped"],
         summary.get("n_unlabeled", 0))
log.info("source: %s at %s", record.repo_id or record.local_path, record.revision or f"sha256 {record.sha256}")
meta = {"source": source, "validation": summary}
if frame.attrs.get("rare_labels"):
    meta["rare_labels"] = frame.attrs["rare_labels"]  # inferred labels in < 1 % of rows (warned about above)
if task == "classification":
    log.info("label names %s; label counts %s", frame.attrs["label_names"],
             frame["label"].value_counts().sort_index().to_dict())
    classification.write_parquet(frame, snakemake.output[0], metadata=meta)
else:
    squad.write_qa_parquet(frame, snakemake.output[0], metadata=meta)
hub.write_record(record, snakemake.output.record)
