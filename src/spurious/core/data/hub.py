"""Where every model and dataset of a run came from: fetch records, written by local rules, read by every job.

On a cluster the compute nodes often have no network. So only local rules (run by Snakemake itself, on the machine it
runs on: the login node) touch the network, and every other job reads what they fetched:

* ``fetch_model`` fetches each checkpoint a config names with ``huggingface_hub.snapshot_download``, at the config's
  ``revision:`` or, without one, at the revision the hub resolves at fetch time, and writes its **fetch record**
  ``results/sources/models/<ref>.json``: the commit, the snapshot folder in the Hugging Face cache, every file's size.
  Later jobs take that record as an input and load the snapshot folder with ``local_files_only=True``
  (:func:`spurious.core.models.resolve_model`); the revision stays the recorded one until the record is fetched
  again. Checkpoints shipped in a pip package (``embedded:...``) and local folders are not downloaded, but get a
  record too (package version, folder, file sizes), and jobs load them through it in the same checked way.
* ``download`` (a dataset split) records the hub commit of the dataset it loaded, or the sha256 of the file it read,
  in ``results/sources/datasets/<dataset>/<split>.json``; ``fetch_file`` records a file fetched from a URL (checked
  against its sha256 and size) in ``results/sources/files/<path>.json``.

The Snakefile sets ``HF_HUB_OFFLINE=1`` (and the datasets and transformers switches) for every job
(:func:`offline_jobs`); the local rules that fetch put back the user's own values (:func:`network_for_local_rule`).
The record format and :func:`read_records`, the reader for provenance, are in docs/CONTRACTS.md.
"""

from __future__ import annotations

import datetime as _dt
import fnmatch
import hashlib
import json
import logging
import os
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, MutableMapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from spurious.core import models, readers
from spurious.core.data import urlfetch
from spurious.core.errors import InputError

log = logging.getLogger(__name__)

RECORD = "spurious fetch record 1"
RECORDS_DIR = "results/sources"
KINDS = ("model", "dataset", "file")
COMMIT = re.compile(r"[0-9a-f]{40}")

# The hub switches every non-local job runs with; the user's own values are kept in USER_ENV for the local rules.
OFFLINE_VARS = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE")
USER_ENV = "SPURIOUS_USER_HUB_ENV"

# The files of a checkpoint that loading it needs: configs, tokenizers and one format of weights (safetensors where
# the repository has them, else PyTorch's .bin), never the TensorFlow, Flax, Rust or ONNX copies that many repositories
# also hold (roberta-large: 1.4 GB of weights in each of five formats).
CONFIG_PATTERNS = ("*.json", "*.txt", "*.model", "*.tiktoken", "merges*", "vocab*", "tokenizer*")
WEIGHT_PATTERNS = {"safetensors": ("*.safetensors",), "bin": ("*.bin",)}


class FetchError(InputError):
    """A model, dataset or file could not be fetched or does not match its record: one line naming it and the fix."""


@dataclass(frozen=True)
class FetchRecord:
    """One fetch record (``results/sources/**.json``; docs/CONTRACTS.md).

    ``kind``: model, dataset or file. ``name``: what the config names (a checkpoint; ``<dataset>/<split>``; a file's
    path). ``source``: hub, package, local or url (a model or file) / hub or file (a dataset). ``repo_id``: the hub
    repository (hub sources only). ``requested_revision``: the config's ``revision:`` (null: none given). ``revision``:
    the commit the hub resolved (a package's version for a package; null for a local folder or file).
    ``local_path``: the absolute folder or file that jobs read. ``files``: relative path -> bytes of a model's files.
    ``sha256`` / ``size``: of a file. ``url``: where a file came from. ``details``: dataset config, split, subset,
    rows; for a fetched file, the sha256 and size the config expected. ``fetched_at``: ISO 8601, UTC."""

    kind: str
    name: str
    source: str
    local_path: str | None
    fetched_at: str
    repo_id: str | None = None
    requested_revision: str | None = None
    revision: str | None = None
    files: dict[str, int] = field(default_factory=dict)
    sha256: str | None = None
    size: int | None = None
    url: str | None = None
    details: dict[str, Any] = field(default_factory=dict)
    path: str | None = None  # where the record itself was read from (not written)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("path")
        return {"record": RECORD, **data}


def now() -> str:
    return _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# ---------------------------------------------------------------------------------------------------------------------
# Where the records go


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text.replace("/", "--")).strip("-") or "x"


def is_local_checkpoint(checkpoint: str) -> bool:
    """A folder on disk (as :func:`spurious.core.models.resolve_model` decides), not a hub id or a package model."""
    return not checkpoint.startswith(models.EMBEDDED_PREFIX) and Path(checkpoint).expanduser().exists()


def model_ref(checkpoint: str, revision: str | None = None) -> str:
    """The file name (without ``.json``) of a checkpoint's record: the hub id with ``/`` as ``--``
    (``EleutherAI--pythia-12b``), ``embedded--<name>``, or ``local--<folder>-<hash of its absolute path>``; a pinned
    revision is appended as ``@<revision>``, so that pinning another revision is another record."""
    if checkpoint.startswith(models.EMBEDDED_PREFIX):
        ref = "embedded--" + _slug(checkpoint[len(models.EMBEDDED_PREFIX) :])
    elif is_local_checkpoint(checkpoint):
        absolute = str(Path(checkpoint).expanduser().resolve())
        ref = f"local--{_slug(Path(absolute).name)}-{hashlib.sha1(absolute.encode()).hexdigest()[:10]}"
    else:
        ref = _slug(checkpoint)
    return f"{ref}@{_slug(revision)}" if revision else ref


def model_record_path(checkpoint: str, revision: str | None = None) -> str:
    return f"{RECORDS_DIR}/models/{model_ref(checkpoint, revision)}.json"


def dataset_record_path(dataset: str, split: str) -> str:
    return f"{RECORDS_DIR}/datasets/{dataset}/{split}.json"


def file_record_path(path: str) -> str:
    return f"{RECORDS_DIR}/files/{path}.json"


def config_models(cfg: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """Every model entry of a config (any mapping with a ``checkpoint`` string), with its place (``models.minilm``)."""

    def walk(node: Any, where: str) -> Iterator[tuple[str, Mapping[str, Any]]]:
        if isinstance(node, Mapping):
            if isinstance(node.get("checkpoint"), str):
                yield where, node
            for key, value in node.items():
                yield from walk(value, f"{where}.{key}" if where else str(key))

    yield from walk(cfg, "")


def audited_models(cfg: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The models of the config's ``audit`` section that the workflow does not build (not under ``results/``), as
    model entries: a hub id, a package model or a local folder, which a local rule fetches like any other."""
    return [(f"audit.{name}.model", {"checkpoint": spec["model"]})
            for name, spec in (cfg.get("audit") or {}).items() if not str(spec["model"]).startswith("results/")]


def fetched_models(cfg: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Record ref -> {checkpoint, revision, where} of every model a config names (one entry per checkpoint and
    revision, however many entries name it), the audited ones included."""
    found: dict[str, dict[str, Any]] = {}
    for where, entry in [*config_models(cfg), *audited_models(cfg)]:
        checkpoint, revision = entry["checkpoint"], entry.get("revision")
        found.setdefault(
            model_ref(checkpoint, revision), {"checkpoint": checkpoint, "revision": revision, "where": where}
        )
    return found


def revision_problems(cfg: Mapping[str, Any]) -> list[str]:
    """A ``revision:`` on a model that is no hub checkpoint (a package model or a local folder has none)."""
    return [
        f"{where}.revision: {entry['revision']!r} given for {entry['checkpoint']!r}, which is not a hub checkpoint "
        "(a package model or a local folder has no revision); remove it"
        for where, entry in config_models(cfg)
        if entry.get("revision") and (entry["checkpoint"].startswith(models.EMBEDDED_PREFIX)
                                     or is_local_checkpoint(entry["checkpoint"]))
    ]


# ---------------------------------------------------------------------------------------------------------------------
# Reading and writing records


def write_record(record: FetchRecord, path: str | os.PathLike) -> None:
    from spurious.core.io import write_json

    write_json(record.to_json(), path)


def read_record(path: str | os.PathLike) -> FetchRecord:
    """One fetch record; a file that is missing, not JSON, of another format or lacking a field is a
    :class:`FetchError` naming it."""
    path = Path(path)
    fix = "delete it and run the workflow again (its local rule writes it anew)"
    if not path.is_file():
        raise FetchError(f"{path}: no such fetch record; run the workflow (its local rules write it)")
    try:
        data = readers.read_json(path, kind="fetch record", fix=fix)
    except InputError as exc:
        raise FetchError(str(exc)) from None
    if not isinstance(data, dict) or data.get("record") != RECORD:
        found = data.get("record") if isinstance(data, dict) else type(data).__name__
        raise FetchError(f"{path}: not a fetch record of this version (record: {found!r}, expected {RECORD!r}); {fix}")
    data.pop("record")
    known = set(FetchRecord.__dataclass_fields__) - {"path"}
    missing = sorted({"kind", "name", "source", "local_path", "fetched_at"} - set(data))
    unknown = sorted(set(data) - known)
    if missing or unknown or data["kind"] not in KINDS:
        raise FetchError(f"{path}: a damaged fetch record (missing {missing}, unknown {unknown}, kind "
                         f"{data.get('kind')!r}); {fix}")
    return FetchRecord(**data, path=str(path))


def read_records(results: str | os.PathLike = "results") -> list[FetchRecord]:
    """Every fetch record under ``<results>/sources/`` (models, datasets, files), sorted by kind and name: where every
    model and dataset of the runs in ``results`` came from, at which revision. The reader for provenance."""
    root = Path(results) / "sources"
    records = [read_record(p) for p in sorted(root.rglob("*.json")) if not p.name.startswith(".")]
    return sorted(records, key=lambda r: (KINDS.index(r.kind), r.name, r.path or ""))


# ---------------------------------------------------------------------------------------------------------------------
# The environment of jobs and of the local rules that fetch


def offline_jobs(environ: MutableMapping[str, str] = os.environ) -> None:
    """Called by the Snakefile: every job Snakemake starts from this process (and every job the SLURM executor
    submits: it inherits this environment and parses the Snakefile again) runs with the hub offline. The user's own
    values are kept once, in ``SPURIOUS_USER_HUB_ENV``, for :func:`network_for_local_rule`."""
    if USER_ENV not in environ:
        environ[USER_ENV] = json.dumps({name: environ.get(name) for name in OFFLINE_VARS})
    for name in OFFLINE_VARS:
        environ[name] = "1"


def network_for_local_rule(environ: MutableMapping[str, str] = os.environ) -> None:
    """In a local rule that fetches, before ``huggingface_hub`` or ``datasets`` is imported (they read the switches
    once): the user's own values of the offline switches again (unset: the network may be used)."""
    loaded = sorted(m for m in ("huggingface_hub", "datasets", "transformers") if m in sys.modules)
    if loaded:
        raise RuntimeError(f"network_for_local_rule() must run before {loaded} are imported")
    saved = environ.get(USER_ENV)
    if saved is None:
        return
    for name, value in json.loads(saved).items():
        if value is None:
            environ.pop(name, None)
        else:
            environ[name] = value


def hub_offline() -> bool:
    from huggingface_hub import constants

    return bool(constants.HF_HUB_OFFLINE)


# ---------------------------------------------------------------------------------------------------------------------
# Models


def model_file_patterns(filenames: Iterable[str]) -> list[str]:
    """The files of a hub checkpoint to fetch (``allow_patterns``): configs and tokenizers, and the weights in
    safetensors where the repository has them, else in PyTorch's format."""
    names = list(filenames)
    weights = "safetensors" if any(fnmatch.fnmatch(n, "*.safetensors") for n in names) else "bin"
    return [*CONFIG_PATTERNS, *WEIGHT_PATTERNS[weights]]


def folder_files(folder: Path) -> dict[str, int]:
    """Relative path -> bytes of every file under ``folder`` (links followed: the hub cache links to its blobs)."""
    return {p.relative_to(folder).as_posix(): p.stat().st_size for p in sorted(folder.rglob("*")) if p.is_file()}


def _model_record(checkpoint: str, source: str, folder: Path, **fields: Any) -> FetchRecord:
    if not (folder / "config.json").is_file():
        raise FetchError(f"{checkpoint}: {folder} holds no config.json: not a transformers checkpoint")
    return FetchRecord(kind="model", name=checkpoint, source=source, local_path=str(folder), fetched_at=now(),
                       files=folder_files(folder), **fields)


def fetch_model(checkpoint: str, revision: str | None = None) -> FetchRecord:
    """Fetch a checkpoint (hub id at ``revision``, or at what the hub resolves now) or describe a package model or a
    local folder; the record that every later job loads it through. Needs the network for a hub checkpoint that the
    Hugging Face cache (``HF_HUB_CACHE``) does not hold at that revision."""
    try:
        if checkpoint.startswith(models.EMBEDDED_PREFIX):
            import importlib.metadata

            folder = Path(models.resolve_model(checkpoint, through_records=False))  # an unknown name fails here
            package = models.EMBEDDED_MODELS[checkpoint[len(models.EMBEDDED_PREFIX) :]][0].replace("_", "-")
            return _model_record(checkpoint, "package", folder, revision=importlib.metadata.version(package),
                                 details={"package": package})
        if is_local_checkpoint(checkpoint):
            return _model_record(checkpoint, "local", Path(models.resolve_model(checkpoint, through_records=False)))
    except models.ModelResolutionError as exc:  # an unknown package model, a folder that is no checkpoint
        raise FetchError(str(exc)) from exc
    return _fetch_hub_model(checkpoint, revision)


def _fetch_hub_model(repo_id: str, revision: str | None) -> FetchRecord:
    from huggingface_hub import HfApi, snapshot_download
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError

    patterns = None
    commit = revision
    try:
        if not hub_offline():
            try:
                info = HfApi().model_info(repo_id, revision=revision)
            except HfHubHTTPError:
                raise
            except Exception as exc:  # the hub cannot be reached: snapshot_download falls back to the cache
                log.warning("%s: the hub cannot be reached (%s: %s); looking in the cache", repo_id,
                            type(exc).__name__, exc)
            else:
                commit = info.sha
                patterns = model_file_patterns(s.rfilename for s in info.siblings or [])
                log.info("%s: revision %s resolves to commit %s; fetching %s", repo_id, revision or "main", commit,
                         patterns)
        folder = Path(snapshot_download(repo_id, revision=commit, allow_patterns=patterns))
    except LocalEntryNotFoundError as exc:
        raise FetchError(
            f"{repo_id}: not in the Hugging Face cache ({_cache()}) at revision {revision or 'main'}, and the hub "
            "cannot be reached (HF_HUB_OFFLINE set, or no network); fetch it where there is network: run Snakemake "
            "on the login node without HF_HUB_OFFLINE, or point HF_HOME at a cache that holds it"
        ) from exc
    except HfHubHTTPError as exc:
        raise FetchError(f"{repo_id}: the hub refused it at revision {revision or 'main'} ({exc}); check the "
                         "checkpoint's name and revision, and your token (HF_TOKEN) for gated models") from exc
    resolved = folder.name
    if revision and COMMIT.fullmatch(revision) and resolved != revision:
        raise FetchError(f"{repo_id}: asked for commit {revision}, the cache gave {resolved} ({folder})")
    return _model_record(repo_id, "hub", folder, repo_id=repo_id, requested_revision=revision, revision=resolved)


def _cache() -> str:
    from huggingface_hub import constants

    return f"HF_HUB_CACHE={constants.HF_HUB_CACHE}"


def check_model_folder(record: FetchRecord) -> Path:
    """The folder a model record names, after checking that it is still what was fetched: there, every recorded file
    present with its recorded size, and (from the hub) the snapshot of the recorded commit. A :class:`FetchError`
    naming the record and the fix otherwise."""
    where = record.path or record.name
    refetch = "fetch it again: snakemake --forcerun fetch_model (with the same HF_HOME as when it was fetched)"
    if record.kind != "model" or not record.local_path:
        raise FetchError(f"{where}: not a model record")
    folder = Path(record.local_path)
    if not folder.is_dir():
        raise FetchError(f"{where}: the fetched folder {folder} of {record.name} is gone; {refetch}")
    if record.source == "hub" and folder.name != record.revision:
        raise FetchError(f"{where}: {folder} is not the snapshot of the recorded commit {record.revision}; {refetch}")
    changed = []
    for rel, size in record.files.items():
        path = folder / rel
        now_size = path.stat().st_size if path.is_file() else None
        if now_size != size:
            changed.append(f"{rel}: {size} bytes recorded, {'missing' if now_size is None else now_size} now")
    if changed:
        raise FetchError(f"{where}: the files of {record.name} in {folder} changed since they were fetched "
                         f"({'; '.join(changed[:3])}); {refetch}")
    return folder


def use_job_records(paths: Iterable[str | os.PathLike]) -> list[FetchRecord]:
    """In a workflow job: load every model through its fetch record among ``paths`` (the job's inputs; others are
    ignored), and no hub model without one (:func:`spurious.core.models.require_fetched`)."""
    records = []
    for path in paths:
        parts = Path(path).parts
        if len(parts) >= 2 and parts[-2] == "models" and str(path).endswith(".json") and "sources" in parts:
            record = read_record(path)
            models.use_fetched(record.name, lambda r=record: str(check_model_folder(r)), revision=record.revision,
                               record=str(path))
            records.append(record)
    models.require_fetched()
    return records


# ---------------------------------------------------------------------------------------------------------------------
# Datasets and files


def load_hub_dataset(name: str, config_name: str | None, split: str, revision: str | None = None) -> tuple[Any, dict]:
    """``datasets.load_dataset(name, config_name, split=split, revision=revision)`` and what it loaded: the hub
    repository, config, split, the revision asked for and the commit loaded (the folder of the ``datasets`` cache
    that holds it: the commit's hash, for a hub dataset without a loading script), and that folder."""
    import datasets  # heavy import; only hub users pay for it

    ds = datasets.load_dataset(name, config_name, split=split, revision=revision)
    files = [f["filename"] for f in ds.cache_files]
    folder = Path(files[0]).parent if files else None
    commit = folder.name if folder is not None else None
    if revision and COMMIT.fullmatch(revision) and commit != revision:
        raise FetchError(f"hub dataset {name} ({config_name or 'default'}, {split}): asked for commit {revision}, "
                         f"the datasets cache gave {commit} ({folder}); clear that cache folder and download again")
    info = {"repo_id": name, "config": config_name, "split": split, "requested_revision": revision,
            "revision": commit, "cache": str(folder) if folder is not None else None}
    return ds, info


def dataset_record(name: str, attrs: Mapping[str, Any], source: str, *, rows: int, file_record: str | None = None,
                   expected: Mapping[str, Any] | None = None) -> FetchRecord:
    """The record of a dataset split that ``download`` loaded: from the hub (``attrs["hub"]``, set by the loaders)
    or from a file (``source``, its path), whose sha256 and size are recorded and checked against ``expected`` (the
    config's ``fetch`` checksum) or, for a fetched file, against its fetch record ``file_record``."""
    loaded = attrs.get("hub")
    if loaded:
        return FetchRecord(kind="dataset", name=name, source="hub", local_path=loaded["cache"], fetched_at=now(),
                           repo_id=loaded["repo_id"], requested_revision=loaded["requested_revision"],
                           revision=loaded["revision"],
                           details={k: loaded.get(k) for k in ("config", "split", "subset")} | {"rows": rows})
    path = Path(source)
    sha, size = urlfetch.sha256_of(path), path.stat().st_size
    want = dict(expected or {})
    url = None
    if file_record is not None:
        fetched = read_record(file_record)
        want.setdefault("sha256", fetched.sha256)
        want.setdefault("size", fetched.size)
        url = fetched.url
    if want.get("size") is not None and size != want["size"]:
        raise FetchError(f"{path}: {size} bytes, expected {want['size']} (sha256 {want.get('sha256')}); the file is "
                         "not the one the config names: delete it and fetch it again")
    if want.get("sha256") and sha != want["sha256"]:
        raise FetchError(f"{path}: sha256 {sha}, expected {want['sha256']}; the file is not the one the config "
                         "names: delete it and fetch it again")
    return FetchRecord(kind="dataset", name=name, source="file", local_path=str(path.resolve()), fetched_at=now(),
                       sha256=sha, size=size, url=url, details={"rows": rows})


def file_fetches(cfg: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """path -> the ``fetch`` entry of every split read from a path that a config says where to get."""
    found = {}
    for ds in (cfg.get("datasets") or {}).values():
        for source in (ds.get("splits") or {}).values():
            if source.get("fetch") and source.get("path"):
                found.setdefault(source["path"], dict(source["fetch"]))
    return found


def missing_file_problems(cfg: Mapping[str, Any], mirror: str | os.PathLike | None = None) -> list[str]:
    """The start-up check: every file a split is read from that is not there, cannot be fetched by a rule and has no
    other source (a mirror file, the hub), with where to get it and its checksum."""
    problems = []
    for dataset, ds in sorted((cfg.get("datasets") or {}).items()):
        for split, source in sorted((ds.get("splits") or {}).items()):
            path, fetch = source.get("path"), source.get("fetch") or {}
            if not path or Path(path).exists() or fetch.get("url") or source.get("hub"):
                continue
            if source.get("mirror_path") and mirror and (Path(mirror) / source["mirror_path"]).exists():
                continue
            where = fetch.get("where") or "its source (the config names none)"
            checksum = ", ".join(f"{k} {fetch[k]}" for k in ("sha256", "size") if fetch.get(k) is not None)
            problems.append(f"datasets.{dataset}.splits.{split}: {path} is missing; get it from {where} and put it "
                            f"there (relative to {Path.cwd()})" + (f"; its {checksum}" if checksum else ""))
    return problems


def fetch_file(url: str, dest: str | os.PathLike, *, sha256: str | None = None, size: int | None = None,
               log_fn: Callable[[str], None] | None = None) -> FetchRecord:
    """Download ``url`` to ``dest`` (resumed when interrupted; checked against ``sha256`` and ``size`` where given,
    else recorded) and return its record."""
    got_sha, got_size = urlfetch.fetch_url(url, dest, sha256=sha256, size=size, log=log_fn)
    return FetchRecord(kind="file", name=str(dest), source="url", local_path=str(Path(dest).resolve()),
                       fetched_at=now(), sha256=got_sha, size=got_size, url=url,
                       details={"expected_sha256": sha256, "expected_size": size})


# ---------------------------------------------------------------------------------------------------------------------
# Start-up checks (the Snakefile, before any job)

CONDA_REFUSED = (
    "this workflow does not run its rules in conda environments (--software-deployment-method conda, --use-conda, or "
    "software-deployment-method: conda in a profile): run Snakemake without it, inside the one environment made from "
    "the lock files with their hashes checked (make install, or pip install --require-hashes --no-deps -r "
    "requirements.lock; docs/running.md#installing), which every job inherits, on SLURM too (docs/slurm.md)"
)


class DeploymentRefused(Exception):
    """A software deployment method the workflow does not support: its one-line message names the supported way."""


def refuse_conda(deployment_methods: Iterable[Any]) -> None:
    """Refuse Snakemake's conda deployment: each rule would run in an environment resolved on the day it is built
    from envs/spurious.yaml's ranges, not in the tested, hash-checked one."""
    if any(str(getattr(m, "name", m)).lower() == "conda" for m in deployment_methods):
        raise DeploymentRefused(CONDA_REFUSED)


def startup_problems(cfg: Mapping[str, Any], mirror: str | os.PathLike | None = None) -> list[str]:
    """What the Snakefile checks before any job: revisions given for models that have none, files a split is read
    from that are missing and no rule can fetch."""
    return revision_problems(cfg) + missing_file_problems(cfg, mirror)
