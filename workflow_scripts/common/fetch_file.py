"""Adapter (local rule): download a file a config reads from a path (fetch.url), checked against its sha256 and size
(resumed when the connection drops), and write its fetch record."""

from typing import TYPE_CHECKING

from spurious.core.data import hub
from spurious.workflow import runlog

if TYPE_CHECKING:
    from snakemake.iocontainers import snakemake

log = runlog.setup(snakemake)
fetch = snakemake.params.fetch
log.info("fetching %s from %s (expected sha256 %s, %s bytes)", snakemake.output.file, fetch["url"],
         fetch.get("sha256") or "not given: recorded", fetch.get("size") or "not given")
try:
    record = hub.fetch_file(fetch["url"], snakemake.output.file, sha256=fetch.get("sha256"), size=fetch.get("size"),
                            log_fn=log.info)
except hub.FetchError as exc:
    runlog.fail(log, str(exc))
if not fetch.get("sha256"):
    log.warning("%s: no sha256 in the config; recorded the fetched file's, %s (%d bytes): later runs check it",
                snakemake.output.file, record.sha256, record.size)
hub.write_record(record, snakemake.output.record)
