"""The workflow as a user runs it: dry-runs of the shipped configs, the SLURM profile's GPU declarations, a tiny
end-to-end run through every rule on real SQuAD records, partial reruns, and resumption after a kill."""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
import pytest
import yaml

from spurious.core import provenance
from spurious.core.data import hub
from tests.conftest import REPO, SHARED, SQUAD_DEV, WORKFLOW_CORES, tiny_encoder

SNAKEMAKE = [sys.executable, "-m", "snakemake"]
TINY_ARTICLES = range(1, 8)  # Warsaw .. Southern_California: 207 questions in their first 6 paragraphs


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        SPURIOUS_DATA_MIRROR=str(SHARED / "data"),
        NLTK_DATA=str(SHARED / "nltk_data"),
        HF_HUB_OFFLINE="1",
        HF_DATASETS_OFFLINE="1",
        TOKENIZERS_PARALLELISM="false",
    )
    return env


def snakemake(workdir: Path, *args: str, check: bool = True, timeout: int = 1200) -> subprocess.CompletedProcess:
    cmd = [*SNAKEMAKE, "-s", str(REPO / "Snakefile"), "--directory", str(workdir), *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=_env(), timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n"
                             f"{proc.stderr[-6000:]}")
    return proc


def job_counts(output: str) -> dict[str, int]:
    """The 'Job stats' table of a dry-run, as {rule: count}."""
    block = output.split("Job stats:")[-1]
    counts = {}
    for line in block.splitlines():
        m = re.match(r"^([a-z0-9_]+)\s+(\d+)$", line.strip())
        if m and m.group(1) != "total":
            counts[m.group(1)] = int(m.group(2))
    return counts


def tiny_config(tmp: Path, paragraphs: int = 6, encoder: Path | None = None, **training) -> Path:
    """A small SQuAD-format file built from real dev records (the first ``paragraphs`` paragraphs of each of the
    ``TINY_ARTICLES``), and a config running every rule on it: its model is ``encoder`` under the name "tiny" (see
    ``tiny_encoder``), else MiniLM under the name "minilm"."""
    with gzip.open(SQUAD_DEV, "rt") as fh:
        payload = json.load(fh)
    payload["data"] = [
        dict(article, paragraphs=article["paragraphs"][:paragraphs])
        for i, article in enumerate(payload["data"]) if i in TINY_ARTICLES
    ]
    data_file = tmp / "tiny_squad.json"
    data_file.write_text(json.dumps(payload))
    settings = {
        "learning_rate": 1e-4,
        "batch_size": 4,
        "max_steps": 6,
        "max_length": 128,
        "stride": 64,
        "eval_every": 3,
        "eval_max_examples": 16,
        "checkpoint_every": 2,
        "eval_batch_size": 32,
        "device": "cpu",
    }
    settings.update(training)
    model = "minilm" if encoder is None else "tiny"
    cfg = {
        "run_name": "tiny",
        "datasets": {
            "squad": {
                "task": "qa",
                "splits": {"dev": {"format": "squad_json", "path": str(data_file)}},
                "derive": {"from": "dev", "validation_fraction": 0.5, "seed": 0},
            }
        },
        "models": {
            model: {
                "checkpoint": "embedded:all-MiniLM-L6-v2" if encoder is None else str(encoder),
                "train": {"dataset": "squad", "split": "train"},
                "validation": {"dataset": "squad", "split": "validation"},
                "seeds": [0],
                "training": settings,
            }
        },
        "evaluate": [{"dataset": "squad", "split": "validation"}],
        "heuristics": {"tfidf_reference": {"dataset": "squad", "split": "train"}, "threads": 1},
        "bias": {"sample_size": 10, "iterations": 20, "seed": 0},
        "human": {"dataset": "squad", "split": "validation"},
        "segments": [{"model": model, "seed": 0, "dataset": "squad", "split": "validation", "heuristic": "ans-len"}],
    }
    path = tmp / "tiny.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def test_default_config_dry_run_plans_every_stage(tmp_path):
    out = snakemake(tmp_path, "-n", "--configfile", str(REPO / "config.yaml")).stdout
    counts = job_counts(out)
    # 1 model x 7 heuristics + 3 annotators x 7 heuristics; the Human row per heuristic.
    assert counts["bias"] == 28 and counts["human_bias"] == 7
    assert counts["train"] == 1 and counts["predict"] == 1 and counts["human_predictions"] == 3
    assert counts["download"] == 1 and counts["derive_splits"] == 1 and counts["heuristics"] == 1
    assert counts["report_tables"] == 1 and counts["segments"] == 1


def test_demo_debias_dry_run_plans_the_debiasing_chain(tmp_path):
    out = snakemake(tmp_path, "-n", "--configfile", str(REPO / "configs" / "demo-debias.yaml")).stdout
    counts = job_counts(out)
    assert counts["train"] == 1 and counts["train_bias_model"] == 1 and counts["feature_logits"] == 2
    assert counts["train_debiased"] == 3 and counts["subset"] == 2 and counts["debias_report"] == 1
    assert counts["train_plain"] == 1  # the matched control
    # original + plain + ReSam/LMix/CReg for word-dist, each on SQuAD validation and NQ; the Human annotators
    assert counts["predict"] == 10 and counts["bias"] == 5 * 2 * 7 + 3 * 7
    assert "scale_search_train" not in counts  # the demo uses fixed scales (docs/think-twice.md)
    # the training subset's and the validation split's segments, both at the validation threshold
    assert counts["segments"] == 2
    assert "results/segments/minilm/seed0/squad/train_small/word-dist/by_validation/biased.parquet" in out
    assert "results/logits/minilm/biasmodel/word-dist/seed0/squad/train_small.npy" in out


def _resources_by_rule(output: str) -> dict[str, dict[str, str]]:
    resources: dict[str, dict[str, str]] = {}
    rule = None
    for line in output.splitlines():
        m = re.match(r"^(?:local)?rule (\w+):", line.strip())
        if m:
            rule = m.group(1)
        elif rule and line.strip().startswith("resources:"):
            pairs = dict(p.split("=", 1) for p in line.split(":", 1)[1].strip().split(", ") if "=" in p)
            resources[rule] = pairs
    return resources


def assert_no_gpu_without_the_profile(workdir: Path, config: Path, profiled_dry_run: str) -> None:
    """GPU requests live only in the profile: the first job of every rule that asked for a GPU in
    ``profiled_dry_run`` is planned again without the profile, and none of those jobs asks for one. (Targeting one job
    per rule, not the whole config, keeps the DAG to their inputs: seconds, not the ten a paper config's full plan
    takes.)"""
    gpu_rules: dict[str, str] = {}
    for job in re.split(r"\n(?=\s*(?:local)?rule \w+:)", profiled_dry_run):
        head = re.match(r"\s*(?:local)?rule (\w+):", job)
        resources = re.search(r"^\s*resources: (.*)$", job, re.M)
        output = re.search(r"^\s*output: ([^,\n]+)", job, re.M)
        if head and resources and output and re.search(r"\bgpu=[1-9]", resources.group(1)):
            gpu_rules.setdefault(head.group(1), output.group(1).strip())
    assert gpu_rules, "the profiled dry run requested no GPU"
    plain = snakemake(workdir, "-n", *gpu_rules.values(), "--configfile", str(config)).stdout
    assert set(gpu_rules) <= set(job_counts(plain)), (sorted(gpu_rules), job_counts(plain))
    assert "gpu=" not in plain


@pytest.mark.parametrize(
    ("source", "fixed_runs", "threshold_file"),
    [
        # App. C's published thresholds (the default): no search is an input, the SQuAD model is measured at them too
        ("appendix_c", 4, None),
        # the workflow's own BERT-base-cased search on SQuAD validation
        ({"model": "bert_base_cased", "seed": 0}, 4,
         "results/bias/bert_base_cased/seed0/squad/validation/word-dist.json"),
        # RoBERTa-large's own search: its row shows that search, only the three others at fixed thresholds
        ("reference", 3, "results/bias/roberta_large/seed0/squad/validation/word-dist.json"),
    ],
)
def test_figure4_threshold_sources_plan(tmp_path, source, fixed_runs, threshold_file):
    cfg = yaml.safe_load((REPO / "configs" / "paper-squad.yaml").read_text())
    cfg["figure4"]["thresholds_from"] = source
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(cfg))
    proc = snakemake(tmp_path, "-n", "--configfile", str(path), "--forcerun", "figure4_report")
    assert job_counts(proc.stdout)["bias_fixed_threshold"] == fixed_runs * 7
    jobs = proc.stdout.split("\nrule ")
    fixed = [j for j in jobs if j.startswith("bias_fixed_threshold:") and "heuristic=word-dist" in j]
    assert len(fixed) == fixed_runs
    inputs = fixed[0].split("input: ", 1)[1].split("\n", 1)[0].split(", ")
    assert inputs[2:] == ([threshold_file] if threshold_file else [])
    figure4 = next(j for j in jobs if j.startswith("figure4_report:"))
    own_search = "results/bias/roberta_large/seed0/squad/validation/word-dist.json"
    assert (own_search in figure4) == (source == "reference")
    assert ("results/bias_fixed/roberta_large/seed0/" in figure4) == (source != "reference")


def test_paper_config_dry_runs_with_slurm_gpu_declarations(tmp_path):
    proc = snakemake(
        tmp_path, "-n", "--workflow-profile", str(REPO / "profiles" / "slurm"), "--configfile",
        str(REPO / "configs" / "paper-squad.yaml"),
    )
    resources = _resources_by_rule(proc.stdout)
    gpu_rules = ("train", "predict", "train_bias_model", "train_debiased", "train_plain", "feature_logits")
    for rule in (*gpu_rules, "scale_search_train", "scale_search_score"):
        assert resources[rule]["gpu"] == "1", resources[rule]
        assert resources[rule]["slurm_partition"] == "gpu"
        assert int(resources[rule]["cpus_per_gpu"]) >= 1
        assert int(resources[rule]["mem_mb"]) >= 16000 and int(resources[rule]["runtime"]) >= 60
    for rule in ("heuristics", "bias", "bias_fixed_threshold", "segments"):
        assert "gpu" not in resources[rule], f"{rule} must not request a GPU"
    # The paper grid: 6 heuristics x 3 methods and the plain control, a bias model per heuristic, teacher + bias
    # logits; the four pretrained models (Figs. 2-3) and the debiased models predicted on SQuAD and the three OOD
    # sets; Figure 4's three RoBERTa-large models (trained elsewhere) on SQuAD validation only, with the SQuAD one at
    # App. C's thresholds (4 x 7); the App. B.2.3-4 scale search (8 values x LMix and CReg on word-dist) and its two
    # choices.
    counts = job_counts(proc.stdout)
    assert counts["train_debiased"] == 18 and counts["train_plain"] == 1 and counts["train_bias_model"] == 6
    assert counts["feature_logits"] == 7 and counts["train"] == 4 + 3
    assert counts["predict"] == (4 + 1 + 18) * 4 + 3 and counts["debias_report"] == 1
    assert counts["bias_fixed_threshold"] == 4 * 7 and counts["figure4_report"] == 1
    assert counts["scale_search_train"] == counts["scale_search_score"] == 16 and counts["scale_search_choice"] == 2
    assert int(resources["train_debiased"]["runtime"]) >= 1440  # LMix: 60-100k steps (App. D)
    for model in ("bert_base_cased", "roberta_base", "roberta_large", "electra_base", "roberta_large_triviaqa"):
        assert f"results/models/{model}/seed0/training.json" in proc.stdout
    assert "results/bias_fixed/roberta_large_nq/seed0/squad/validation/word-dist.json" in proc.stdout
    # every checkpoint fetched once, by a local rule (on the login node), before the GPU jobs that load it
    assert counts["fetch_model"] == 4 and "gpu" not in resources["fetch_model"]
    for ref in ("bert-base-cased", "roberta-base", "roberta-large", "google--electra-base-discriminator"):
        assert f"results/sources/models/{ref}.json" in proc.stdout
    # issue 14: the 700 threshold searches (665 + 28 at fixed thresholds + 7 Human rows) run as one SLURM job per
    # model run: 23 runs, the three annotators, the Human rows and Figure 4's four models at fixed thresholds
    groups = re.findall(r"Group job (\S+) ", proc.stdout)
    assert len(groups) == 31 and len(set(groups)) == 31
    assert {"bias_roberta_large/seed0", "bias_bert_base_cased/lmix/word-dist/seed0", "bias_human"} <= set(groups)
    assert {"bias_fixed_roberta_large_nq/seed0", "bias_fixed_roberta_large/seed0"} <= set(groups)
    # The embedded default's model is not merged in.
    assert "minilm" not in proc.stdout
    # GPU requests live only in the profile: without it no job asks for a GPU.
    assert_no_gpu_without_the_profile(tmp_path, REPO / "configs" / "paper-squad.yaml", proc.stdout)


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """One end-to-end run of the tiny config through every rule (a few minutes on 2 cores)."""
    work = tmp_path_factory.mktemp("tiny")
    cfg = tiny_config(work, encoder=tiny_encoder(work))
    # --keep-going: the split step fails by design when the tiny model's search finds no threshold (checked below).
    proc = snakemake(work, "--cores", WORKFLOW_CORES, "--keep-going", "--configfile", str(cfg), check=False)
    bias = json.loads((work / "results/bias/tiny/seed0/squad/validation/ans-len.json").read_text())
    if bias["found"]:
        assert proc.returncode == 0, proc.stderr[-6000:]
    else:
        log = (work / "results/logs/segments/tiny_seed0_squad_validation_ans-len_by_validation.log").read_text()
        assert "no threshold separates the segments of ans-len" in log and "config's 'segments'" in log
        assert not (work / "results/segments/tiny/seed0/squad/validation/ans-len/"
                           "by_validation/biased.parquet").exists()
    return work, cfg


def test_tiny_run_outputs_exist_parse_and_agree(tiny_run):
    work, _ = tiny_run
    res = work / "results"
    train = pd.read_parquet(res / "data/squad/derived_s0/train.parquet")
    valid = pd.read_parquet(res / "data/squad/derived_s0/validation.parquet")
    assert len(train) + len(valid) == 207 and set(train["title"]).isdisjoint(valid["title"])

    heur = pd.read_parquet(res / "heuristics/squad/validation.parquet")
    assert list(heur.columns) == ["id", "word-dist", "sim-word", "ans-pos", "cos-sim", "ans-len", "sim-ents",
                                  "subj-pos"]
    assert heur["id"].tolist() == valid["id"].tolist()

    preds = pd.read_parquet(res / "predictions/tiny/seed0/squad/validation.parquet")
    assert list(preds.columns) == ["id", "prediction_text", "em", "f1"] and len(preds) == len(valid)
    metrics = json.loads((res / "predictions/tiny/seed0/squad/validation.metrics.json").read_text())
    assert metrics["exact_match"] == pytest.approx(preds["em"].mean())

    summary = json.loads((res / "models/tiny/seed0/training.json").read_text())
    assert summary["steps"] == 6

    # where the data and the model came from: the file's sha256, the model folder loaded through its record
    records = {(r.kind, r.name): r for r in hub.read_records(res)}
    dev = records[("dataset", "squad/dev")]
    assert dev.source == "file" and dev.sha256 == hashlib.sha256(Path(dev.local_path).read_bytes()).hexdigest()
    # a local folder (MiniLM's record, from its package: tests/core/test_minimal_configs.py, the lexical model)
    encoder = records[("model", str(work / "tiny_encoder"))]
    assert encoder.source == "local" and summary["resolved_model"] == encoder.local_path and encoder.revision is None
    assert set(encoder.files) == {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"}
    load = '"source": "fetched", "revision": null, "record": "results/sources/models/local--tiny_encoder-'
    assert load in (res / "logs/train/tiny_seed0.log").read_text()
    assert not (res / "_checkpoints/tiny/seed0").exists() or not any((res / "_checkpoints/tiny/seed0").iterdir())

    n_human = sum(len(a["text"]) >= 3 for a in valid["answers"])  # annotators need three gold answers
    for run in ["tiny/seed0", "human/annotator0", "human/annotator1", "human/annotator2"]:
        for h in heur.columns[1:]:
            r = json.loads((res / f"bias/{run}/squad/validation/{h}.json").read_text())
            n = r["n_evaluated"]  # the rows searched, after the -1 sentinels were dropped
            assert n + r["n_dropped_negative"] == (n_human if run.startswith("human") else len(valid))
            grid = [g["threshold"] for g in r["grid"]]
            for g in r["grid"]:
                assert g["size_low"] + g["size_high"] == n
            if r["found"]:
                assert r["threshold"] in grid
                assert r["groups"]["low"]["size"] + r["groups"]["high"]["size"] == n
                assert min(r["groups"]["low"]["size"], r["groups"]["high"]["size"]) >= 10
                assert r["prediction_bias"] == r["distance_em"] > 0
            else:
                assert r["prediction_bias"] == 0
    human = [json.loads((res / f"bias/human/annotator{k}/squad/validation/ans-len.json").read_text()) for k in range(3)]
    combined = json.loads((res / "bias/human/squad/validation/ans-len.json").read_text())
    assert combined["prediction_bias"] == min(h["prediction_bias"] for h in human)

    seg = res / "segments/tiny/seed0/squad/validation/ans-len/by_validation"
    bias_ans_len = json.loads((res / "bias/tiny/seed0/squad/validation/ans-len.json").read_text())
    if bias_ans_len["found"]:
        biased, unbiased = pd.read_parquet(seg / "biased.parquet"), pd.read_parquet(seg / "unbiased.parquet")
        assert len(biased) + len(unbiased) == len(valid)

    table = pd.read_csv(res / "report/bias_table.csv")
    assert len(table) == 2  # the model and the Human row
    for name in ["bias_table.md", "thresholds.csv", "thresholds.md", "scores.csv", "figure2.png", "figure2.svg"]:
        assert (res / "report" / name).stat().st_size > 0
    for log in (res / "logs").rglob("*.log"):
        assert log.stat().st_size > 0, f"{log} is empty"


def test_tiny_run_leaves_a_provenance_record_beside_each_result(tiny_run):
    """The jobs that train, predict and report record what made them (spurious.core.provenance), every field."""
    work, cfg = tiny_run
    res = work / "results"
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    data_file = yaml.safe_load(cfg.read_text())["datasets"]["squad"]["splits"]["dev"]["path"]
    for name, rule in (("models/tiny/seed0/model", "train"), ("predictions/tiny/seed0/squad/validation", "predict"),
                       ("report/bias_table", "report_tables"), ("index", "index")):  # fmt: skip
        record = json.loads((res / f"{name}.provenance.json").read_text())
        assert list(record) == list(provenance.FIELDS) and record["rule"] == rule, name
        assert record["git_commit"] == head and isinstance(record["git_dirty"], bool), name
        # the model and the dataset reach every later job through the records of the jobs before it
        assert record["models"] == {str(work / "tiny_encoder"): "local path"}, name
        # the file behind the split, by the sha256 its download record holds (docs/running.md, provenance)
        assert record["datasets"] == {data_file: "sha256:" + hashlib.sha256(Path(data_file).read_bytes()).hexdigest()}
        assert len(record["settings_hash"]) == 64


class _Links(HTMLParser):
    """Every link target and image source of a page, and its text."""

    def __init__(self) -> None:
        super().__init__()
        self.hrefs: set[str] = set()
        self.images: dict[str, str] = {}
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "a":
            self.hrefs.add(attrs["href"])
        if tag == "img":
            self.images[attrs["src"]] = attrs["alt"]

    def handle_data(self, data):
        self.text.append(data)


def test_tiny_run_report_html_and_the_index(tiny_run):
    """The Snakemake report, and results/index.html: written by the run itself (the index is part of `all`), then
    once more after the report as `make report` does, so that it links the report. Every figure and table the run
    wrote is listed, each figure with a thumbnail and the caption of its report entry."""
    work, cfg = tiny_run
    res = work / "results"
    assert "No HTML report yet" in (res / "index.html").read_text()
    snakemake(work, "--cores", "1", "--configfile", str(cfg), "--report", str(res / "report.html"),
              "--report-metadata", str(REPO / "report" / "metadata.yaml"))  # as the profiles set it
    html = (res / "report.html").read_text(errors="ignore")
    assert "bias_table.csv" in html and "figure2.png" in html
    assert "provenance: spurious" in html and "results made by" in html  # the landing page's provenance
    proc = snakemake(work, "results/index.html", "--cores", "1", "--forcerun", "index", "--configfile", str(cfg))
    assert job_counts(proc.stdout + proc.stderr) == {"index": 1}
    page = _Links()
    page.feed((res / "index.html").read_text())
    text = " ".join(" ".join(page.text).split())
    assert "report.html" in page.hrefs
    figures = sorted(p.relative_to(res).as_posix() for p in res.rglob("*") if p.suffix in (".png", ".svg"))
    tables = sorted(p.relative_to(res / "report").as_posix() for p in (res / "report").rglob("*")
                    if p.suffix in (".csv", ".md"))
    assert figures == ["report/figure2.png", "report/figure2.svg"]
    assert tables == ["bias_table.csv", "bias_table.md", "scores.csv", "scores.md", "thresholds.csv", "thresholds.md"]
    assert set(figures) | {f"report/{t}" for t in tables} <= page.hrefs
    assert set(page.images) == {p for p in figures if p.endswith(".png")}  # a thumbnail per figure
    captions = {name: " ".join((REPO / "report" / f"{name}.rst").read_text().split())
                for name in ("figure2", "bias_table", "thresholds", "scores")}
    for name, caption in captions.items():
        assert caption.replace("``", "") in text.replace("``", ""), name
    assert page.images["report/figure2.png"].endswith(captions["figure2"])
    assert "Think Twice (Mikula et al., EACL 2024)" in text
    assert "Provenance" in text and "result folders' records" in text  # the footer


def test_changing_a_heuristic_parameter_reruns_heuristics_and_bias_but_not_training(tiny_run):
    work, cfg = tiny_run
    pending = job_counts(snakemake(work, "-n", "--configfile", str(cfg)).stdout)
    assert set(pending) <= {"segments", "all"}, f"the run should be complete except a failed split step: {pending}"
    changed = yaml.safe_load(cfg.read_text())
    changed["heuristics"]["variants"] = {"word-dist": "between"}
    cfg2 = cfg.with_name("tiny_changed.yaml")
    cfg2.write_text(yaml.safe_dump(changed, sort_keys=False))
    counts = job_counts(snakemake(work, "-n", "--configfile", str(cfg2)).stdout)
    assert counts.get("heuristics") == 1 and counts.get("bias") == 28 and counts.get("report_tables") == 1
    assert counts.get("human_bias") == 7
    assert "train" not in counts and "predict" not in counts and "download" not in counts


def workflow_copy(tmp: Path) -> Path:
    """The workflow's files (Snakefile, rules, adapters, schema, package) copied to ``tmp``, to run an edited copy."""
    for name in ("Snakefile", "rules", "workflow_scripts", "schemas", "envs", "report", "src/spurious"):
        source, target = REPO / name, tmp / name
        if source.is_dir():
            shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    return tmp


def insert_before(path: Path, marker: str, text: str) -> None:
    source = path.read_text()
    assert source.count(marker) == 1, f"{path}: {marker!r} is not where the edit expects it"
    path.write_text(source.replace(marker, text + marker))


def test_a_heuristic_added_by_one_catalog_entry_runs_through_the_workflow(tiny_run, tmp_path):
    """docs/ARCHITECTURE.md's recipe: a value function and one entry in the heuristics catalog; no other file edited
    (the Snakefile's wildcard, the schema's lists and the annotation job read the catalog)."""
    work, cfg = tiny_run
    code = workflow_copy(tmp_path / "code")
    catalog = code / "src/spurious/thinktwice/heuristics/catalog.py"
    insert_before(catalog, "HEURISTIC_SPECS: tuple[Heuristic, ...] = (", textwrap.dedent('''\
        def _question_words_values(q: Questions, variant: str | None) -> list[float]:
            return [float(len(question.split())) for question in q.questions]


        '''))
    insert_before(catalog, ")\n\"\"\"All heuristics, in the paper's order.\"\"\"",
                  '    Heuristic("question-words", "question_words", _question_words_values),\n')
    copied = tmp_path / "work"
    shutil.copytree(work, copied, symlinks=True)
    config = yaml.safe_load(cfg.read_text())
    # the new heuristic alone: the annotation job then parses nothing (the seven others are tested elsewhere)
    config["heuristics"]["names"] = ["question-words"]
    config["segments"] = []
    config_file = tmp_path / "toy.yaml"
    config_file.write_text(yaml.safe_dump(config, sort_keys=False))
    target = "results/bias/tiny/seed0/squad/validation/question-words.json"
    env = dict(_env(), PYTHONPATH=str(code / "src"))
    cmd = [*SNAKEMAKE, "-s", str(code / "Snakefile"), "--directory", str(copied), "--cores", WORKFLOW_CORES, target,
           "--configfile", str(config_file)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-6000:]
    assert job_counts(proc.stderr) == {"heuristics": 1, "bias": 1}, proc.stderr[-3000:]

    annotated = pd.read_parquet(copied / "results/heuristics/squad/validation.parquet")
    assert list(annotated.columns) == ["id", "question-words"]
    frame = pd.read_parquet(copied / "results/data/squad/derived_s0/validation.parquet")
    assert annotated["id"].tolist() == frame["id"].tolist()
    expected = [float(len(question.split())) for question in frame["question"]]  # the function the edit added
    assert annotated["question-words"].tolist() == expected and min(expected) >= 1.0
    bias = json.loads((copied / target).read_text())
    assert bias["heuristic"] == "question-words" and bias["run"] == "tiny/seed0"
    assert bias["n_evaluated"] + bias["n_dropped_negative"] == len(annotated)


def _planned_with(work, cfg, name, edit) -> dict[str, int]:
    changed = yaml.safe_load(cfg.read_text())
    edit(changed["models"]["tiny"]["training"])
    path = cfg.with_name(f"tiny_{name}.yaml")
    path.write_text(yaml.safe_dump(changed, sort_keys=False))
    counts = job_counts(snakemake(work, "-n", "--configfile", str(path)).stdout)
    return {k: v for k, v in counts.items() if k not in ("segments", "all")}  # the tiny split step may be pending


def test_execution_settings_rerun_nothing_and_result_settings_rerun_training(tiny_run):
    # issue 14: changing checkpoint_every, eval_batch_size or device reran training, prediction and every bias job
    work, cfg = tiny_run
    for key, value in (("checkpoint_every", 3), ("eval_batch_size", 7), ("device", "auto"), ("bf16", False),
                       ("pad_to_multiple_of", 8), ("compile", "on"), ("tracker", "tensorboard")):
        assert _planned_with(work, cfg, key, lambda t, k=key, v=value: t.update({k: v})) == {}, key
    # packed windows train without dropout on the attention probabilities (docs/gpu.md): a result setting
    counts = _planned_with(work, cfg, "packed", lambda t: t.update(attention="packed"))
    assert counts["train"] == 1 and counts["predict"] == 1
    # a result setting reruns the model and everything downstream of it, not the data or the heuristics
    counts = _planned_with(work, cfg, "lr", lambda t: t.update(learning_rate=2e-4))
    assert counts["train"] == 1 and counts["predict"] == 1 and counts["bias"] == 7 and counts["report_tables"] == 1
    assert "download" not in counts and "heuristics" not in counts and "human_bias" not in counts
    counts = _planned_with(work, cfg, "max_answer_length", lambda t: t.update(max_answer_length=12))
    assert counts["train"] == 1 and counts["predict"] == 1  # read by training's validation and by prediction


def _live_members(group: int) -> list[int]:
    """The processes of a process group that still run (not zombies, which only wait to be reaped)."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError):
            fields = stat.read_bytes().rsplit(b")", 1)[1].split()
            if int(fields[2]) == group and fields[0] != b"Z":
                members.append(int(stat.parent.name))
    return members


def test_a_job_stops_when_snakemake_is_killed_and_training_resumes_with_rerun_incomplete(tmp_path):
    """Issue: `kill -9` of the snakemake process left its running training job alive, which wrote its outputs after
    snakemake died. Now the job watches the process that started it (spurious.workflow.runlog.watch_snakemake): with
    snakemake killed (SIGKILL, only its own process) the job gets SIGTERM, saves a checkpoint and ends without
    writing its outputs, and --rerun-incomplete resumes from that checkpoint."""
    # MiniLM, whose steps (about 0.6 s each here) leave the job 16 steps of running after its first checkpoint, while
    # snakemake is killed and the job's watch (every 2 s) stops it
    cfg = tiny_config(tmp_path, max_steps=20, checkpoint_every=4, eval_every=None, batch_size=4)
    ckpt_root = tmp_path / "results" / "_checkpoints" / "minilm" / "seed0"
    target = "results/models/minilm/seed0/training.json"
    # The target comes before --configfile, which takes several values and would swallow it.
    cmd = [*SNAKEMAKE, "-s", str(REPO / "Snakefile"), "--directory", str(tmp_path), "--cores", WORKFLOW_CORES, target,
           "--configfile", str(cfg)]
    proc = subprocess.Popen(cmd, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    deadline = time.time() + 600
    try:
        while time.time() < deadline:
            # a whole checkpoint: not one still being written (.tmp-step-*), which a kill would leave unusable
            if ckpt_root.exists() and any(not p.parent.name.startswith(".tmp-") for p in ckpt_root.rglob("state.json")):
                break
            assert proc.poll() is None, "training finished or failed before a checkpoint was seen"
            time.sleep(0.5)
        else:
            raise AssertionError("no checkpoint within 10 minutes")
        os.kill(proc.pid, signal.SIGKILL)  # snakemake alone, as `kill -9 <its PID>` or the OOM killer does
        proc.wait()
        stopped_by = time.time() + 60
        while _live_members(proc.pid) and time.time() < stopped_by:
            time.sleep(0.5)
        assert not _live_members(proc.pid), "the training job kept running after snakemake was killed"
    finally:
        with contextlib.suppress(ProcessLookupError):  # what is left of the run (nothing, unless the test failed)
            os.killpg(proc.pid, signal.SIGKILL)
    log = (tmp_path / "results/logs/train/minilm_seed0.log").read_text()
    assert f"Snakemake (PID {proc.pid}) is gone: stopping this job (SIGTERM)" in log
    assert not (tmp_path / target).exists()
    # The stopped job's outputs were never written, so Snakemake plans the training again (a job killed while
    # writing them would be flagged incomplete instead; --rerun-incomplete covers both).
    assert job_counts(snakemake(tmp_path, "-n", target, "--configfile", str(cfg)).stdout).get("train") == 1
    snakemake(tmp_path, "--unlock", target, "--configfile", str(cfg))
    snakemake(tmp_path, "--cores", WORKFLOW_CORES, "--rerun-incomplete", target, "--configfile", str(cfg))
    summary = json.loads((tmp_path / target).read_text())
    assert summary["resumed_from_step"] >= 4  # the SIGTERM's checkpoint: at the step the job had reached
    assert summary["steps"] == 20
    assert not any(ckpt_root.rglob("state.json")), "checkpoints are removed after success"


def _broken_files(tmp: Path) -> dict[str, tuple[Path, str]]:
    """Files a user might point the workflow at by mistake, and the words the error must contain."""
    packed = SQUAD_DEV.read_bytes()
    truncated = tmp / "truncated.json.gz"
    truncated.write_bytes(packed[: len(packed) // 2])  # a download cut off mid-stream
    empty = tmp / "empty.json"
    empty.write_text("")
    record = {"id": "q1", "title": "t", "context": "Paris is in France.", "question": "Where is Paris?",
              "answers": {"text": ["France"], "answer_start": [12]}}
    no_question = tmp / "no_question.json"
    no_question.write_text(json.dumps([record, {k: v for k, v in record.items() if k != "question"} | {"id": "q2"}]))
    string_answers = tmp / "string_answers.json"
    string_answers.write_text(json.dumps([dict(record, answers="France")]))
    return {
        "truncated": (truncated, "not a readable gzip-compressed JSON file (EOFError"),
        "empty": (empty, "the file is empty"),
        "no_question": (no_question, "record 1 (id q2): no field 'question'"),
        "string_answers": (string_answers, "record 0 (id q1): answers is str 'France'"),
    }


def test_broken_data_files_fail_with_one_line_naming_the_file_and_record(tmp_path):
    # issue 14: these ended in a bare EOFError / JSONDecodeError / KeyError / TypeError in the job's log
    for name, (path, words) in _broken_files(tmp_path).items():
        fmt = "squad_json" if name == "truncated" else "squad_flat_json"
        dev = {"dataset": "squad", "split": "dev"}
        cfg = {"run_name": name,
               "datasets": {"squad": {"task": "qa", "splits": {"dev": {"format": fmt, "path": str(path)}}}},
               "models": {"m": {"checkpoint": "embedded:all-MiniLM-L6-v2", "train": dev, "validation": dev}},
               "evaluate": [dev]}
        config = tmp_path / f"{name}.yaml"
        config.write_text(yaml.safe_dump(cfg))
        work = tmp_path / name
        # the target before --configfile: after it, Snakemake reads it as another config file
        proc = snakemake(work, "--cores", "1", "results/data/squad/dev.parquet", "--configfile", str(config),
                         check=False)
        assert proc.returncode != 0, name
        line = next(ln for ln in proc.stderr.splitlines() if ln.startswith("spurious: error: "))
        assert f"dataset squad, split dev: {path}" in line and words in line, (name, line)
        log = (work / "results/logs/data/download_squad_dev.log").read_text()
        assert words in log and "Traceback" not in log, (name, log[-2000:])
        assert not (work / "results/data/squad/dev.parquet").exists()


def test_audit_target_of_the_tiny_qa_model_repeats_the_workflows_numbers(tiny_run):
    """The config's `audit:` section as a workflow target: only the audit job runs, and its EM/F1, per-heuristic
    prediction bias and Human bias equal the workflow's own files for the same model and split."""
    work, cfg = tiny_run
    config = yaml.safe_load(cfg.read_text())
    config["audit"] = {
        "tiny_qa": {
            "model": "results/models/tiny/seed0/model",
            "task": "qa",
            "data": {"dataset": "squad", "split": "validation"},
            "tfidf_reference": {"dataset": "squad", "split": "train"},
        }
    }
    audit_cfg = work / "tiny-audit.yaml"
    audit_cfg.write_text(yaml.safe_dump(config, sort_keys=False))
    proc = snakemake(work, "results/audit/tiny_qa/audit.json", "--cores", WORKFLOW_CORES,
                     "--configfile", str(audit_cfg))
    assert job_counts(proc.stderr + proc.stdout).get("audit") == 1
    res = work / "results"
    audit = json.loads((res / "audit/tiny_qa/audit.json").read_text())
    metrics = json.loads((res / "predictions/tiny/seed0/squad/validation.metrics.json").read_text())
    assert audit["em"] == pytest.approx(metrics["exact_match"]) and audit["f1"] == pytest.approx(metrics["f1"])
    for row in audit["bias"]:
        h = row["heuristic"]
        ours = json.loads((res / f"bias/tiny/seed0/squad/validation/{h}.json").read_text())
        human = json.loads((res / f"bias/human/squad/validation/{h}.json").read_text())
        assert row["prediction_bias"] == pytest.approx(ours["prediction_bias"]), h
        if audit["human_bias"] is not None:
            assert row["human_bias"] == pytest.approx(human["prediction_bias"]), h
    page = (res / "audit/tiny_qa/report.html").read_text()
    assert 'id="summary"' in page and "figure-bias" in page
