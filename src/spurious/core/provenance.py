"""What produced a result: the code, the environment, the hub revisions of the models and datasets, the settings.

Every job that trains, predicts or writes a report leaves a record beside its first output,
``<first output without its suffix>.provenance.json`` (``results/models/minilm/seed0/model.provenance.json``,
``results/report/bias_table.provenance.json``): the package version, the git commit of the checkout and whether its
tracked files differed from it, Python, torch, transformers, CUDA and cuDNN, the GPU's name and count, the hub
revision of every model and dataset the job used (its own, and those of the jobs whose outputs it read, from their
records) and the hash of the settings that decide its result. The record is a file of its own, not a declared output
and not a parameter: it changes with the commit, but nothing reruns because of it, and no table, metrics file or
``audit.json`` changes. The HTML pages show it in their footer (:func:`footer_html`), ``snakemake --report`` on its
landing page (``report/metadata.yaml``, :func:`report_metadata`).

Hub revisions are collected by one function, :func:`hub_revisions`, from the fetch records of the local rules
(``results/sources/``, :mod:`spurious.core.data.hub`): a model is the revision of the record its job loaded it through
(a hub commit; the embedded MiniLM its package's version), a dataset split read from the hub the commit its ``download``
record names, one read from a file ``sha256:<its checksum>``. Without a record (a command run outside the workflow)
a hub model or dataset is its snapshot's commit in the local Hugging Face cache, a local folder or file
``"local path"``. Where nothing is known the revision is ``None``.
"""

from __future__ import annotations

import hashlib
import html
import json
import os
import platform
import re
import subprocess
import sys
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any

from spurious.core.errors import InputError
from spurious.core.io import atomic_path

SUFFIX = ".provenance.json"
LOCAL = "local path"
# Every record has these keys (None where a value does not apply or is not known: no GPU, no git checkout).
FIELDS = (
    "rule", "wildcards", "outputs", "written", "package_version", "git_commit", "git_dirty", "python", "torch",
    "transformers", "cuda", "cudnn", "gpu_name", "gpu_count", "models", "datasets", "settings_hash",
)  # fmt: skip
ENVIRONMENT_FIELDS = FIELDS[4:14]
REPO_ROOT = Path(__file__).resolve().parents[3]


def git_state(root: str | os.PathLike = REPO_ROOT) -> tuple[str | None, bool | None]:
    """(commit, dirty) of the git checkout at ``root``: dirty when a tracked file differs from the commit (new
    untracked files, such as results, do not count); (None, None) outside a checkout or without git."""
    try:
        commit = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                                timeout=30, check=True).stdout.strip()  # fmt: skip
        status = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                                capture_output=True, text=True, timeout=60, check=True).stdout  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None, None
    return commit or None, bool(status.strip())


def _version(distribution: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(distribution)
    except PackageNotFoundError:
        return None


def _torch_build_cuda() -> str | None:
    """The CUDA version torch was built with, read from ``torch/version.py`` without importing torch (seconds)."""
    from importlib.util import find_spec

    spec = find_spec("torch")
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    for folder in folders:
        try:
            text = (Path(folder) / "version.py").read_text()
        except OSError:
            continue
        return cuda_of_version_py(text)
    return None


def cuda_of_version_py(text: str) -> str | None:
    """The ``cuda`` value of a ``torch/version.py`` (``cuda: Optional[str] = '12.8'``; None for a CPU build)."""
    found = re.search(r"^cuda(?:: [^=]+)? = (?:'([^']*)'|\"([^\"]*)\")", text, flags=re.MULTILINE)
    return (found.group(1) or found.group(2) or None) if found else None


def environment(root: str | os.PathLike = REPO_ROOT) -> dict[str, Any]:
    """The code and the machine: package version, git commit and dirty flag, Python, torch, transformers, CUDA,
    cuDNN, the GPUs this process used (name of the first, count). Call it after training: it initialises CUDA. A job
    that never imported torch (a table, a report) used no GPU: its record gives torch's version and build from the
    installed package, no cuDNN and 0 GPUs, without the seconds an import of torch takes."""
    commit, dirty = git_state(root)
    base = {
        "package_version": _version("spurious"),
        "git_commit": commit,
        "git_dirty": dirty,
        "python": platform.python_version(),
    }
    if "torch" not in sys.modules:
        return {**base, "torch": _version("torch"), "transformers": _version("transformers"),
                "cuda": _torch_build_cuda(), "cudnn": None, "gpu_name": None, "gpu_count": 0}
    import torch

    cuda = torch.version.cuda
    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    return {
        **base,
        "torch": str(torch.__version__),
        "transformers": _version("transformers"),
        "cuda": cuda,
        "cudnn": str(cudnn) if cudnn is not None else None,
        "gpu_name": torch.cuda.get_device_name(0) if count else None,
        "gpu_count": count,
    }


# ---------------------------------------------------------------------------------------------------- revisions


@cache
def _fetch_records(results: str) -> tuple[Any, ...]:
    """The fetch records under ``results`` (the working directory's ``results/`` in a workflow job); none where it has
    none or one cannot be read (the job that reads it reports that)."""
    from spurious.core.data import hub

    try:
        return tuple(hub.read_records(results))
    except Exception:  # noqa: BLE001 - provenance never fails a job; the record's reader does, with its advice
        return ()


def _hub_snapshot(repo_id: str, repo_type: str) -> str | None:
    """The commit of the newest snapshot of ``repo_id`` in the local Hugging Face cache, or None."""
    try:
        from huggingface_hub.constants import HF_HUB_CACHE
    except ImportError:
        return None
    folder = Path(HF_HUB_CACHE) / f"{repo_type}s--{repo_id.replace('/', '--')}"
    ref = folder / "refs" / "main"
    if ref.is_file():
        return ref.read_text().strip() or None
    snapshots = sorted((folder / "snapshots").glob("*"), key=lambda p: p.stat().st_mtime) if folder.is_dir() else []
    return snapshots[-1].name if snapshots else None


def model_revision(name: str, results: str = "results") -> str | None:
    """A model's revision: the revision of the fetch record the job loaded it through, else of the one fetch record
    of ``results`` for it, else the embedded MiniLM's package version, ``"local path"`` for a folder, or the hub
    snapshot's commit in the local cache (None when it is not cached)."""
    from spurious.core.models import EMBEDDED_MODELS, EMBEDDED_PREFIX, fetched_revision

    embedded = EMBEDDED_MODELS.get(name[len(EMBEDDED_PREFIX) :]) if name.startswith(EMBEDDED_PREFIX) else None
    distribution = embedded[0].replace("_", "-") if embedded else None
    revision = fetched_revision(name)
    if revision is None:
        records = _fetch_records(os.path.abspath(results))
        recorded = {r.revision for r in records if r.kind == "model" and r.name == name and r.revision}
        revision = recorded.pop() if len(recorded) == 1 else None
    if revision is None and distribution:
        revision = _version(distribution)
    if distribution:  # a package's version, said with the package's name
        return f"{distribution} {revision}" if revision else None
    if revision is not None:
        return revision
    if Path(name).exists():
        return LOCAL
    return _hub_snapshot(name, "model")


def dataset_revision(source: str, results: str = "results") -> str | None:
    """A dataset source's revision (``hub:<name>/<config>:<split>`` as the normalised splits record it, or a file):
    the commit (hub) or ``sha256:<checksum>`` (file) of its ``download`` record in ``results``, else the hub
    snapshot's commit in the local cache, ``"local path"`` for a file."""
    records = [r for r in _fetch_records(os.path.abspath(results)) if r.kind == "dataset"]
    if source.startswith("hub:"):
        repo_config, _, split = source[len("hub:"):].rpartition(":")
        repo_id, _, config = repo_config.rpartition("/")
        for r in records:
            details = r.details or {}
            if (r.source == "hub" and r.repo_id == repo_id and (details.get("config") or "") == config
                    and details.get("split") == split and r.revision):
                return r.revision
        return _hub_snapshot(repo_id, "dataset")
    where = os.path.realpath(source)
    for r in records:
        if r.source == "file" and r.local_path and os.path.realpath(r.local_path) == where and r.sha256:
            return f"sha256:{r.sha256}"
    return LOCAL


def hub_revisions(models: Iterable[str], datasets: Iterable[str]) -> dict[str, dict[str, str | None]]:
    """THE place where revisions are looked up: ``{"models": {name: revision}, "datasets": {source: revision}}`` for
    model names (hub ids, ``embedded:...``, folders) and dataset sources (``hub:...`` or file paths)."""
    return {
        "models": {name: model_revision(name) for name in sorted(set(models))},
        "datasets": {source: dataset_revision(source) for source in sorted(set(datasets))},
    }


# ---------------------------------------------------------------------------------------------------- settings


def _plain(value: Any) -> bool:
    """A value Snakemake's params rerun trigger compares (builtin types only; a RuleSettings is skipped)."""
    if isinstance(value, str | int | float | bool | type(None)):
        return True
    if isinstance(value, list | tuple):
        return all(_plain(v) for v in value)
    if type(value) is dict:
        return all(isinstance(k, str) and _plain(v) for k, v in value.items())
    return False


def settings_hash(params: Mapping[str, Any]) -> str:
    """sha256 of the params that decide a job's result: those Snakemake compares to decide a rerun (builtin values;
    a rule's ``result_settings`` among them, its RuleSettings not)."""
    chosen = {k: v for k, v in params.items() if _plain(v)}
    return hashlib.sha256(json.dumps(chosen, sort_keys=True, default=str).encode()).hexdigest()


# ---------------------------------------------------------------------------------------------------- records


def record_path(output: str | os.PathLike) -> Path:
    """Where the record of the job whose first output is ``output`` goes."""
    out = Path(output)
    return out.with_name(out.name.removesuffix(out.suffix) + SUFFIX) if out.suffix else out.with_name(out.name + SUFFIX)


def read(path: str | os.PathLike) -> dict[str, Any]:
    from spurious.core import readers

    return readers.read_json(path, kind="provenance record")


@cache
def _folder_records(folder: str) -> tuple[dict[str, Any], ...]:
    records = []
    for path in sorted(Path(folder).glob(f"*{SUFFIX}")):
        try:
            records.append(read(path))
        except (OSError, ValueError, InputError):
            continue  # a damaged record names nothing; the job that wrote it reruns it
    return tuple(records)


def record_of(path: str | os.PathLike) -> dict[str, Any] | None:
    """The record of the job that wrote ``path`` (a file or folder it declared as output), if any."""
    target = os.path.normpath(str(path))
    for record in _folder_records(os.path.normpath(str(Path(path).parent))):
        if target in {os.path.normpath(o) for o in record.get("outputs", ())}:
            return record
    return None


def _parquet_source(path: Path, depth: int = 0) -> str | None:
    """The dataset a normalised split comes from: its ``source``, followed through derivations and subsets."""
    from spurious.core.io import read_parquet_metadata

    try:
        meta = read_parquet_metadata(path)
    except Exception:  # noqa: BLE001 - not a parquet of ours: no dataset to name
        return None
    if meta.get("source"):
        return str(meta["source"])
    parent = meta.get("derived_from") or meta.get("subset_of")
    return _parquet_source(Path(parent), depth + 1) if parent and depth < 8 else None


def _inputs(smk: Any) -> list[str]:
    return [str(p) for p in smk.input]


SNAKEMAKE_METADATA = Path(".snakemake") / "metadata"
MAX_ANCESTORS = 20_000


def _metadata_inputs(path: str) -> list[str]:
    """The inputs of the job that wrote ``path``, from Snakemake's own record of it (``.snakemake/metadata``, in the
    working directory; none for a file Snakemake did not write)."""
    from base64 import urlsafe_b64encode

    name = urlsafe_b64encode(path.encode()).decode()
    parts = [name[i : i + 254] for i in range(0, len(name), 254)]
    record = SNAKEMAKE_METADATA.joinpath(*["@" + p for p in parts[:-1]], parts[-1])
    from spurious.core import readers

    if not record.is_file():
        return []
    try:
        return [str(i) for i in readers.read_json(record, kind="Snakemake metadata record").get("input") or []]
    except InputError:  # a damaged record of Snakemake's: its datasets stay unknown, the job goes on
        return []


def dataset_sources(inputs: Iterable[str]) -> set[str]:
    """The datasets behind a job's inputs: the ``source`` of each normalised split they come from, followed back
    through the jobs that made them (Snakemake's records) to the splits the workflow read."""
    found: set[str] = set()
    seen: set[str] = set()
    todo = [os.path.normpath(str(p)) for p in inputs]
    while todo and len(seen) < MAX_ANCESTORS:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        source = _parquet_source(Path(path)) if path.endswith(".parquet") and Path(path).is_file() else None
        if source:
            found.add(source)
        else:
            todo.extend(os.path.normpath(p) for p in _metadata_inputs(path))
    return found


def used_by(inputs: Iterable[str], checkpoint: str | None = None) -> tuple[set[str], set[str], dict[str, Any]]:
    """(models, datasets, revisions from upstream records) a job used: its ``checkpoint``, the datasets behind its
    inputs (``dataset_sources``) and, from the records of the jobs that wrote its inputs, their models and datasets."""
    inputs = list(inputs)
    models = {checkpoint} if checkpoint else set()
    datasets = dataset_sources(inputs)
    upstream: dict[str, dict[str, Any]] = {"models": {}, "datasets": {}}
    for name in inputs:
        path = Path(name)
        record = record_of(path)
        if record is not None:
            upstream["models"].update(record.get("models") or {})
            upstream["datasets"].update(record.get("datasets") or {})
        elif path.is_dir() and ((path / "config.json").is_file() or (path / "bilstm.json").is_file()):
            models.add(str(path))
    return models, datasets, upstream


def job_record(smk: Any, *, checkpoint: str | None = None, root: str | os.PathLike = REPO_ROOT) -> dict[str, Any]:
    """The record of a Snakemake ``script:`` job (its rule, wildcards, outputs, params and inputs)."""
    params = dict(smk.params.items())
    checkpoint = checkpoint or (params.get("checkpoint") if isinstance(params.get("checkpoint"), str) else None)
    models, datasets, upstream = used_by(_inputs(smk), checkpoint)
    revisions = hub_revisions(models, datasets)
    return {
        "rule": str(getattr(smk, "rule", "")),
        "wildcards": {k: str(v) for k, v in smk.wildcards.items()},
        "outputs": [str(o) for o in smk.output],
        "written": datetime.now(UTC).isoformat(timespec="seconds"),
        **environment(root),
        "models": {**upstream["models"], **revisions["models"]},
        "datasets": {**upstream["datasets"], **revisions["datasets"]},
        "settings_hash": settings_hash(params),
    }


def write(record: Mapping[str, Any], path: str | os.PathLike) -> Path:
    path = Path(path)
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(dict(record), indent=2, sort_keys=False) + "\n")
    return path


def write_job(smk: Any, *, checkpoint: str | None = None) -> Path:
    """Write the job's record beside its first output (call it last, once the outputs are written)."""
    return write(job_record(smk, checkpoint=checkpoint), record_path(smk.output[0]))


def find_records(folder: str | os.PathLike) -> list[tuple[Path, dict[str, Any]]]:
    """Every record under ``folder`` (damaged ones left out), in path order."""
    found = []
    for path in sorted(Path(folder).rglob(f"*{SUFFIX}")):
        try:
            found.append((path, read(path)))
        except (OSError, ValueError, InputError):
            continue
    return found


# ---------------------------------------------------------------------------------------------------- display


def _commit_text(record: Mapping[str, Any]) -> str:
    commit = record.get("git_commit")
    if not commit:
        return "no git checkout"
    return f"{commit[:12]}{' with uncommitted changes' if record.get('git_dirty') else ''}"


def summary_lines(record: Mapping[str, Any]) -> dict[str, str]:
    """A record as labelled lines of text (the footer's and the report's)."""
    gpu = f"{record['gpu_count']} × {record['gpu_name']}" if record.get("gpu_count") else "none"
    lines = {
        "spurious": f"{record.get('package_version') or 'unknown version'}, commit {_commit_text(record)}",
        "software": (f"Python {record.get('python')}, torch {record.get('torch')}, transformers "
                     f"{record.get('transformers')}, CUDA {record.get('cuda') or '–'}, "
                     f"cuDNN {record.get('cudnn') or '–'}"),
        "GPUs": gpu,
    }  # fmt: skip
    for key, label in (("models", "models"), ("datasets", "datasets")):
        items = record.get(key) or {}
        if items:
            lines[label] = "; ".join(f"{name} @ {rev or 'revision unknown'}" for name, rev in sorted(items.items()))
    if record.get("settings_hash"):
        lines["settings hash"] = record["settings_hash"][:16]
    return lines


def footer_html(record: Mapping[str, Any], results: Iterable[Mapping[str, Any]] = ()) -> str:
    """The provenance footer of an HTML page: ``record`` (the page's own job, or the command that wrote it) and, for
    a page over many results (``results/index.html``), which commits and environments made them."""
    rows = "".join(f"<li><strong>{html.escape(k)}</strong>: {html.escape(v)}</li>"
                   for k, v in summary_lines(record).items())  # fmt: skip
    parts = [f"<footer class='provenance'><h2>Provenance</h2><p>This page:</p><ul>{rows}</ul>"]
    results = list(results)
    if results:
        groups: dict[tuple, list[Mapping[str, Any]]] = {}
        for r in results:
            groups.setdefault(tuple(r.get(f) for f in ENVIRONMENT_FIELDS), []).append(r)
        parts.append(f"<p>The {len(results)} result folders' records (<code>*{SUFFIX}</code>) by code and "
                     "environment:</p><ul>")  # fmt: skip
        for members in groups.values():
            line = summary_lines(members[0])
            rules = sorted({str(m.get("rule")) for m in members})
            parts.append(f"<li>{len(members)} job(s) ({html.escape(', '.join(rules))}): spurious "
                         f"{html.escape(line['spurious'])}; {html.escape(line['software'])}; GPUs "
                         f"{html.escape(line['GPUs'])}</li>")  # fmt: skip
        parts.append("</ul>")
        if len({r.get("git_commit") for r in results}) > 1 or any(r.get("git_dirty") for r in results):
            parts.append("<p><strong>Not all results come from one clean commit</strong>: compare the records before "
                         "putting their numbers side by side.</p>")  # fmt: skip
        revisions = {"models": {}, "datasets": {}}
        for r in results:
            for key in revisions:
                revisions[key].update(r.get(key) or {})
        for key, items in revisions.items():
            if items:
                parts.append(f"<p>{key}: " + "; ".join(f"{html.escape(n)} @ {html.escape(str(v or 'revision unknown'))}"
                                                       for n, v in sorted(items.items())) + "</p>")  # fmt: skip
    parts.append("</footer>")
    return "".join(parts)


def page_record(root: str | os.PathLike = REPO_ROOT) -> dict[str, Any]:
    """The record of a page written outside a job (the command line's audit): the environment alone."""
    return {f: None for f in FIELDS} | environment(root) | {"written": datetime.now(UTC).isoformat(timespec="seconds")}


def report_metadata(results_dir: str | os.PathLike = "results") -> dict[str, str]:
    """What ``snakemake --report`` shows on its landing page (``--report-metadata report/metadata.yaml``): the
    environment of the report's writer and, by code and environment, the records of the results in ``results_dir``."""
    here = {f"provenance: {k}": v for k, v in summary_lines(page_record()).items()}
    records = [r for _, r in find_records(results_dir)]
    groups: dict[tuple, list[Mapping[str, Any]]] = {}
    for r in records:
        groups.setdefault(tuple(r.get(f) for f in ENVIRONMENT_FIELDS), []).append(r)
    for i, members in enumerate(groups.values(), 1):
        line = summary_lines(members[0])
        here[f"results made by ({i})"] = (f"{len(members)} job(s): spurious {line['spurious']}; {line['software']}; "
                                          f"GPUs {line['GPUs']}")  # fmt: skip
    models: dict[str, Any] = {}
    datasets: dict[str, Any] = {}
    for r in records:
        models.update(r.get("models") or {})
        datasets.update(r.get("datasets") or {})
    for key, items in (("models", models), ("datasets", datasets)):
        if items:
            here[f"results' {key}"] = "; ".join(f"{n} @ {v or 'revision unknown'}" for n, v in sorted(items.items()))
    return {k: v.replace("*", "\\*").replace("`", "'") for k, v in here.items()}
