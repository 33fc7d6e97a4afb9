"""Adapter (local rule): fetch one checkpoint a config names, at its revision, into the Hugging Face cache, and write
its fetch record; every job that loads the model takes the record as an input (spurious.core.data.hub)."""

import os
from typing import TYPE_CHECKING

from spurious.core.data import hub

hub.network_for_local_rule()  # before huggingface_hub is imported: the user's own HF_HUB_OFFLINE, not the jobs'

from spurious.workflow import runlog  # noqa: E402

if TYPE_CHECKING:
    from snakemake.iocontainers import snakemake

log = runlog.setup(snakemake)
checkpoint, revision = snakemake.params.checkpoint, snakemake.params.revision
log.info("fetching %s at revision %s (HF_HUB_OFFLINE=%s)", checkpoint, revision or "main (the hub's now)",
         os.environ.get("HF_HUB_OFFLINE"))
try:
    record = hub.fetch_model(checkpoint, revision)
except hub.FetchError as exc:
    runlog.fail(log, str(exc))
log.info("%s: %s at %s, %d files, %.1f MB in %s", checkpoint, record.source, record.revision, len(record.files),
         sum(record.files.values()) / 1e6, record.local_path)
hub.write_record(record, snakemake.output[0])
