"""The rehearsal's own checks (tests/rehearse/run.py), on dry-run text in Snakemake's format: what makes
`make rehearse` fail before a job runs (a dropped rule, model or method) and after (a missing final output, a pending
job). The rehearsal itself runs in CI (`make rehearse`), not here."""

from __future__ import annotations

from tests.rehearse import run

DRY_RUN = """\
Building DAG of jobs...
Job stats:
job          count
---------  -------
train            2
[Thu Nov 26 20:20:02 2026]
rule train:
    input: results/data/squad/train.parquet, results/data/squad/validation.parquet
    output: results/models/bert_base_cased/seed0/model, results/models/bert_base_cased/seed0/training.json
    log: results/logs/train/bert_base_cased_seed0.log
    jobid: 3
    reason: Forced execution
    wildcards: model=bert_base_cased, seed=0
    resources: tmpdir=/tmp
[Thu Nov 26 20:20:02 2026]
rule train:
    output: results/models/roberta_base/seed1/model, results/models/roberta_base/seed1/training.json
    wildcards: model=roberta_base, seed=1
[Thu Nov 26 20:20:02 2026]
rule bias:
    output: results/bias/bert_base_cased/resam/ans-len/seed0/squad/validation/ans-len.json
    wildcards: run=bert_base_cased/resam/ans-len/seed0, dataset=squad, split=validation, heuristic=ans-len
[Thu Nov 26 20:20:02 2026]
rule report_tables:
    output: results/report/table.csv, results/report/figure.png
[Thu Nov 26 20:20:02 2026]
localrule all:
    input: results/report/table.csv
    jobid: 0
Job stats:
"""


def test_the_dry_run_is_read_job_by_job():
    plan = run.parse_dry_run(DRY_RUN)
    assert sorted(plan) == ["all", "bias", "report_tables", "train"]
    first, second = plan["train"]
    assert first.outputs == ["results/models/bert_base_cased/seed0/model",
                             "results/models/bert_base_cased/seed0/training.json"]
    assert first.wildcards == {"model": "bert_base_cased", "seed": "0"}
    assert second.wildcards == {"model": "roberta_base", "seed": "1"}
    assert plan["bias"][0].wildcards["run"] == "bert_base_cased/resam/ans-len/seed0"
    assert plan["all"][0].outputs == []
    assert run.final_outputs(plan) == ["results/report/figure.png", "results/report/table.csv"]
    assert run.kinds(plan) == {("train", "model", "bert_base_cased"), ("train", "model", "roberta_base"),
                               ("bias", "model", "bert_base_cased")}


def test_an_overlay_may_drop_seeds_but_no_rule_model_or_method():
    paper = run.parse_dry_run(DRY_RUN)
    fewer_seeds = {rule: [j for j in jobs if j.wildcards.get("seed") != "1"] or jobs for rule, jobs in paper.items()}
    fewer_seeds["train"].append(run.Job(["results/models/roberta_base/seed0/model"],
                                        {"model": "roberta_base", "seed": "0"}))
    assert run.plan_problems(paper, fewer_seeds) == []
    no_roberta = {rule: [j for j in jobs if j.wildcards.get("model") != "roberta_base"] for rule, jobs in paper.items()}
    assert run.plan_problems(paper, no_roberta) == [
        "the rehearsal overlay drops models/methods the paper config runs: train model=roberta_base"
    ]
    no_bias = {rule: jobs for rule, jobs in paper.items() if rule != "bias"}
    assert run.plan_problems(paper, no_bias) == ["the rehearsal overlay drops rules the paper config runs: ['bias']"]
    methods = {"sb_train": [run.Job([], {"model": "bert_base", "sb_method": m}) for m in ("finetune", "bitfit")]}
    assert run.plan_problems(methods, {"sb_train": methods["sb_train"][:1]}) == [
        "the rehearsal overlay drops models/methods the paper config runs: sb_train sb_method=bitfit"
    ]


def test_missing_or_empty_final_outputs_and_pending_jobs_are_reported(tmp_path):
    (tmp_path / "results" / "report").mkdir(parents=True)
    (tmp_path / "results" / "report" / "table.csv").write_text("a,b\n1,2\n")
    (tmp_path / "results" / "report" / "figure.png").write_bytes(b"")
    finals = ["results/report/figure.png", "results/report/table.csv", "results/report/table.md"]
    assert run.missing_outputs(tmp_path, finals) == ["results/report/figure.png", "results/report/table.md"]
    # a dry run after a complete rehearsal plans nothing but the target rule
    assert run.pending_jobs({"all": [run.Job()]}) == {}
    assert run.pending_jobs(run.parse_dry_run(DRY_RUN)) == {"train": 2, "bias": 1, "report_tables": 1}


def test_progress_is_the_last_snakemake_progress_line(tmp_path):
    log = tmp_path / "snakemake.log"
    assert run.last_progress(log) == "starting"
    log.write_text("Building DAG of jobs...\n3 of 79 steps (4%) done\nrule train:\n12 of 79 steps (15%) done\n")
    assert run.last_progress(log) == "12/79"
