"""The QA audit takes the workflow's heuristic definitions and small-sample rule: the audit rule's params are the dicts
the heuristics and bias rules take theirs from (read from the parsed workflow), and with them the audit's heuristic
values, threshold searches and Human reference equal the workflow's library calls, under the authors' definitions
(compat isbiased, as configs/paper-squad.yaml) where word-dist's differ from the default's. The model's predictions
are stubbed: what is compared is everything after them."""

from __future__ import annotations

import json
import os
from types import SimpleNamespace

import numpy as np
import pytest
import yaml

from spurious.audit import verdict
from spurious.audit.checks import AuditInputError
from spurious.audit.command import read_qa, run_audit
from spurious.core.data.squad import write_qa_parquet
from spurious.core.io import read_parquet_metadata
from spurious.core.metrics import score_predictions
from spurious.thinktwice.bias import InsufficientRowsError, human_bias, human_scores, search_threshold
from spurious.thinktwice.heuristics import compute_heuristics
from tests.audit import browser
from tests.conftest import REPO, SQUAD_DEV

# paper-squad.yaml (compat isbiased) with four heuristics that need no spaCy parse and a sample size for 160 questions
OVERRIDES = {
    "heuristics": {"names": ["word-dist", "sim-word", "cos-sim", "ans-len"]},
    "debias": {"heuristics": ["word-dist", "ans-len"]},
    "bias": {"sample_size": 20, "iterations": 20},
    "audit": {
        "qa_user": {"model": "someone/squad-model", "task": "qa", "data": {"dataset": "squad", "split": "validation"}},
        "qa_own_reference": {"model": "someone/squad-model", "task": "qa",
                             "data": {"dataset": "squad", "split": "validation"},
                             "tfidf_reference": {"dataset": "squad", "split": "validation"}},
    },
}


@pytest.fixture(scope="module")
def workflow(tmp_path_factory):
    """The parsed workflow under paper-squad.yaml plus OVERRIDES (Snakemake's API, no job runs): the rules' params
    and the audit's input function, as Snakemake hands them to the scripts."""
    from snakemake.api import SnakemakeApi
    from snakemake.settings.types import ConfigSettings, OutputSettings, ResourceSettings

    work = tmp_path_factory.mktemp("parsed")
    extra = work / "overrides.yaml"
    extra.write_text(yaml.safe_dump(OVERRIDES))
    cwd = os.getcwd()
    try:
        with SnakemakeApi(OutputSettings()) as api:
            parsed = api.workflow(
                resource_settings=ResourceSettings(cores=1),
                config_settings=ConfigSettings(configfiles=[REPO / "configs" / "paper-squad.yaml", extra]),
                snakefile=REPO / "Snakefile",
                workdir=work,
            )._workflow
            params = {rule: dict(parsed.get_rule(rule).params.items()) for rule in ("heuristics", "bias", "audit")}
            params["bias_fixed_threshold"] = dict(parsed.get_rule("bias_fixed_threshold").params.items())
            inputs = {name: parsed.globals["audit_inputs"](SimpleNamespace(name=name)) for name in OVERRIDES["audit"]}
            inputs["heuristics rule"] = parsed.globals["tfidf_reference_input"](SimpleNamespace())
    finally:
        os.chdir(cwd)
    return params, inputs


def test_the_audit_rule_takes_the_heuristics_and_bias_rules_params(workflow):
    params, inputs = workflow
    audit, heuristics, bias = params["audit"], params["heuristics"], params["bias"]
    assert audit["heuristics"] == heuristics == {"names": OVERRIDES["heuristics"]["names"], "compat": "isbiased",
                                                 "variants": {}}
    searched = {k: v for k, v in bias.items() if k != "run"}
    assert audit["bias"] == searched == {"sample_size": 20, "iterations": 20, "with_replacement": False, "seed": 0,
                                         "allow_too_few_rows": False}
    assert {k: v for k, v in params["bias_fixed_threshold"].items() if k in searched} == searched
    # cos-sim's TF-IDF: the heuristics rule's reference (paper-squad: SQuAD train) unless the audit names its own
    assert inputs["qa_user"]["tfidf_reference"] == inputs["heuristics rule"]["tfidf_reference"]
    assert inputs["qa_own_reference"]["tfidf_reference"] == inputs["qa_own_reference"]["data"]
    assert inputs["qa_own_reference"]["tfidf_reference"] != inputs["heuristics rule"]["tfidf_reference"]


@pytest.fixture(scope="module")
def squad(tmp_path_factory):
    """160 SQuAD dev questions to audit and 300 others whose contexts fit cos-sim's TF-IDF, as parquet files."""
    work = tmp_path_factory.mktemp("squad")
    dev = read_qa(SQUAD_DEV)
    frame, reference = dev.iloc[:160].reset_index(drop=True), dev.iloc[160:460].reset_index(drop=True)
    write_qa_parquet(frame, work / "data.parquet")
    write_qa_parquet(reference, work / "reference.parquet")
    return work, frame, reference


def stub_model(monkeypatch, predictions: dict[str, str] | None) -> dict[str, int]:
    """The audit with ``predictions`` as its model's answers (None: predicting fails the test); returns a counter."""
    calls = {"predict": 0}

    def predict(model, data, settings=None, log=None):
        calls["predict"] += 1
        assert predictions is not None, "the audit predicted although it had to stop before"
        return {i: predictions[i] for i in data["id"]}

    monkeypatch.setattr("spurious.audit.qa.check_qa_model", lambda model: None)
    monkeypatch.setattr("spurious.core.train.qa.predict_qa", predict)
    return calls


def workflow_numbers(frame, reference, predictions, heuristics, bias):
    """What the workflow's adapters compute: heuristics (workflow_scripts/thinktwice/heuristics.py), the model's
    and each annotator's search (bias.py, human_predictions.py) and the Human row (human_bias.py)."""
    search = {k: v for k, v in bias.items() if k != "run"}
    values = compute_heuristics(frame, heuristics["names"], compat=heuristics["compat"],
                                variants=dict(heuristics["variants"]), tfidf_contexts=reference["context"].tolist())
    scores = score_predictions(frame, predictions)
    model = {h: search_threshold(values[h].to_numpy(), scores["em"].to_numpy(), scores["f1"].to_numpy(), heuristic=h,
                                 **search) for h in heuristics["names"]}
    by_id = values.set_index("id")
    annotators = [
        {h: search_threshold(by_id.loc[s["id"], h].to_numpy(), s["em"].to_numpy(), s["f1"].to_numpy(), heuristic=h,
                             **search) for h in heuristics["names"]}
        for s in human_scores(frame)
    ]
    return values, model, human_bias(annotators)


@pytest.fixture(scope="module")
def compat_audit(workflow, squad, tmp_path_factory):
    """The audit through run_audit with the audit rule's params (as workflow_scripts/audit/audit.py passes them),
    beside the workflow's numbers; the stub model answers right exactly where compat word-dist is at most its median
    (so that word-dist's definition decides its bias)."""
    params, _ = workflow
    work, frame, reference = squad
    names = params["heuristics"]["names"]
    compat_values = compute_heuristics(frame, names, compat="isbiased", tfidf_contexts=reference["context"].tolist())
    wd = compat_values["word-dist"]
    median = wd[wd >= 0].median()
    predictions = {i: (a["text"][0] if v <= median else "no such answer")
                   for i, a, v in zip(frame["id"], frame["answers"], wd, strict=True)}
    model_dir = tmp_path_factory.mktemp("model")
    with pytest.MonkeyPatch.context() as mp:
        stub_model(mp, predictions)
        result = run_audit(str(model_dir), "qa", work / "audit", data=str(work / "data.parquet"),
                           tfidf_reference=str(work / "reference.parquet"), bias_settings=params["audit"]["bias"],
                           heuristic_settings=params["audit"]["heuristics"])
    values, model, human = workflow_numbers(frame, reference, predictions, params["heuristics"], params["bias"])
    default = dict(params["heuristics"], compat=None)
    default_values, default_model, _ = workflow_numbers(frame, reference, predictions, default, params["bias"])
    return SimpleNamespace(result=result, out=work / "audit", values=values, model=model, human=human,
                           default_values=default_values, default_model=default_model)


def test_compat_audit_repeats_the_workflows_heuristics_bias_and_human_rows(compat_audit):
    c = compat_audit
    # the case is one where the definitions matter: compat's word-dist differs from the default's, values and bias
    assert (c.values["word-dist"] != c.default_values["word-dist"]).sum() > 0
    assert c.model["word-dist"]["prediction_bias"] != c.default_model["word-dist"]["prediction_bias"]
    result = c.result
    assert result["heuristic_settings"] == {"names": OVERRIDES["heuristics"]["names"], "compat": "isbiased",
                                            "variants": {}, "tfidf_contexts": str(c.out.parent / "reference.parquet")}
    assert result["bias_settings"]["allow_too_few_rows"] is False
    keys = ("found", "reason", "threshold", "prediction_bias", "distance_em", "biased_group", "n_evaluated",
            "n_dropped_negative")
    for h, ours in c.model.items():
        assert {k: result["model_bias"][h][k] for k in keys} == {k: ours[k] for k in keys}, h
        assert result["human_bias"][h]["prediction_bias"] == c.human[h]["prediction_bias"], h
        row = next(r for r in result["bias"] if r["heuristic"] == h)
        assert row["flagged"] == verdict.qa_flagged(ours["prediction_bias"], c.human[h]["prediction_bias"])
        assert row["effect_size_class"] == verdict.effect_class(ours["prediction_bias"])
    assert c.model["word-dist"]["found"] and c.result["model_bias"]["word-dist"]["prediction_bias"] > 0
    # the files hold the same, with the rule and the classes
    saved = json.loads((c.out / "audit.json").read_text())
    assert saved["verdict_rule"]["effect_size"]["negligible_below"] == 1.0
    assert [r["effect class"] for r in saved["summary"]] == [r["effect_size_class"] for r in result["bias"]]


def test_small_sample_rule_is_the_workflows(workflow, squad, tmp_path, monkeypatch):
    """Fewer than twice the sample size of questions: the workflow's search fails (bias.allow_too_few_rows false),
    and so does the audit, before predicting, naming the sizes and the fix; exactly twice the sample size passes
    both. With allow_too_few_rows both report every heuristic without a threshold (too_few_rows, bias 0)."""
    params, _ = workflow
    work, frame, reference = squad
    n = 2 * params["bias"]["sample_size"]
    names = params["heuristics"]["names"]
    search = {k: v for k, v in params["bias"].items() if k != "run"}
    for rows in (n - 1, n):  # the workflow's bias rule: fails below twice the sample size, searches from it on
        values, scores = np.arange(rows, dtype=float), np.full(rows, 100.0)
        if rows < n:
            with pytest.raises(InsufficientRowsError,
                               match=f"{rows} rows cannot give two segments of sample_size {n // 2}"):
                search_threshold(values, scores, scores, heuristic="ans-len", **search)
        else:
            assert search_threshold(values, scores, scores, heuristic="ans-len", **search)["reason"] != "too_few_rows"

    small = work / "small.parquet"
    write_qa_parquet(frame.iloc[: n - 1].reset_index(drop=True), small)
    calls = stub_model(monkeypatch, None)
    with pytest.raises(AuditInputError, match=f"{n - 1} questions cannot give two segments of sample_size {n // 2}"):
        run_audit(str(tmp_path), "qa", tmp_path / "out", data=str(small),
                  tfidf_reference=str(work / "reference.parquet"),
                  bias_settings=params["audit"]["bias"], heuristic_settings=params["audit"]["heuristics"])
    assert calls["predict"] == 0 and not (tmp_path / "out" / "audit.json").exists()

    predictions = {i: a["text"][0] for i, a in zip(frame["id"], frame["answers"], strict=True)}
    stub_model(monkeypatch, predictions)
    enough = work / "enough.parquet"
    write_qa_parquet(frame.iloc[:n].reset_index(drop=True), enough)
    at_boundary = run_audit(str(tmp_path), "qa", tmp_path / "boundary", data=str(enough),
                            tfidf_reference=str(work / "reference.parquet"), bias_settings=params["audit"]["bias"],
                            heuristic_settings=params["audit"]["heuristics"])
    _, model, _ = workflow_numbers(frame.iloc[:n].reset_index(drop=True), reference, predictions, params["heuristics"],
                                   params["bias"])
    assert {h: r["prediction_bias"] for h, r in at_boundary["model_bias"].items()} == {
        h: r["prediction_bias"] for h, r in model.items()}

    allowed = dict(params["audit"]["bias"], allow_too_few_rows=True)
    result = run_audit(str(tmp_path), "qa", tmp_path / "out", data=str(small),
                       tfidf_reference=str(work / "reference.parquet"),
                       bias_settings=allowed, heuristic_settings=params["audit"]["heuristics"])
    _, model, _ = workflow_numbers(frame.iloc[: n - 1].reset_index(drop=True), reference, predictions,
                                   params["heuristics"], allowed)
    for h in names:
        assert model[h]["found"] is False and model[h]["reason"] == "too_few_rows" and model[h]["prediction_bias"] == 0
        ours = result["model_bias"][h]
        assert (ours["found"], ours["reason"], ours["prediction_bias"]) == (False, "too_few_rows", 0.0), h
    # no Human reference below twice the sample size (stated); every verdict as the workflow's Human row of 0 gives
    assert result["human_bias"] is None and "fewer than twice the sample size" in result["human_reference"]
    for row in result["bias"]:
        assert row["flagged"] is False and row["flagged"] == verdict.qa_flagged(row["prediction_bias"], 0.0)
        assert row["effect_size_class"] == "none"


@pytest.mark.skipif(browser.chromium() is None,
                    reason="no Chromium on this machine (.ci/run installs Debian's chromium)")
def test_qa_report_states_the_rule_classes_and_settings_in_chromium(compat_audit, tmp_path):
    """The QA page as Chromium builds it: the verdict rule and the cut-offs in words, an effect class per summary
    row (the one audit.json holds), the classes' table, and the settings as key / value rows (no dict repr)."""
    out = compat_audit.out
    page = browser.parse(browser.dump_dom(out / "report.html", tmp_path / "profile"))
    result = json.loads((out / "audit.json").read_text())
    rule = page.texts["rule-verdict"]
    for words in ("Verdict rule.", "takes the shortcut", "no evidence", "do not overlap", "2.5 % and 97.5 %",
                  "20 random samples of 20 questions", "larger than the Human reference", "No p-value"):
        assert words in rule, words
    effect = page.texts["rule-effect"]
    for words in ("negligible above 0 and below 1 point", "small from 1 to below 5 points", "large from 5 points on",
                  "prediction bias in EM points", "0.74", "4.81"):
        assert words in effect, words
    assert page.rows("effect-classes") == [{"class": c, "effect in points": r} for c, r in
                                           (("none", "≤ 0"), ("negligible", "> 0 and < 1"), ("small", "≥ 1 and < 5"),
                                            ("large", "≥ 5"))]
    summary = page.rows("summary")
    assert [r["shortcut"] for r in summary] == [f"heuristic {r['heuristic']}" for r in result["bias"]]
    assert [r["effect class"] for r in summary] == [r["effect_size_class"] for r in result["bias"]]
    assert all(r["effect class"] in verdict.EFFECT_CLASSES for r in summary)
    assert [r["effect class"] for r in page.rows("bias")] == [r["effect_size_class"] for r in result["bias"]]
    assert [float(r["prediction bias (EM points)"]) for r in page.rows("bias")] == [
        round(r["prediction_bias"], 2) for r in result["bias"]]
    # the overview figure at the top (an image, loaded, whose alt text names every heuristic's bias), and no table
    # wider than the page at 1200 pixels
    layout = browser.measure(out / "report.html", tmp_path / "profile", 1200)
    (image,) = layout["images"]
    assert image["figure"] == "figure-overview" and image["complete"] and image["naturalWidth"] > 0
    for r in result["bias"]:
        words = f"heuristic {r['heuristic']}: {r['prediction_bias']:.2f} points, {verdict.verdict_text(r['flagged'])}"
        assert words in image["alt"], words
    assert layout["scrollWidth"] <= layout["clientWidth"]
    assert all(box["right"] <= layout["clientWidth"] for box in layout["boxes"])
    settings = {r["setting"]: r["value"] for r in page.rows("settings")}
    assert settings["bias search: sample_size"] == "20" and settings["bias search: iterations"] == "20"
    assert settings["bias search: allow_too_few_rows"] == "false"
    assert settings["heuristics: compat"] == "isbiased" and settings["heuristics: variants"] == "none"
    assert settings["heuristics: names"] == "word-dist, sim-word, cos-sim, ans-len"
    assert not any("{" in cell for row in page.tables["settings"] for cell in row)
    assert "'sample_size'" not in (out / "report.html").read_text()


def test_audit_job_repeats_the_workflows_human_rows_under_compat(tmp_path):
    """One workflow run (about a minute): the audit job of a small QA model beside the workflow's own Human rows,
    under compat isbiased and a tiny sample size. The Human rows need no trained model, only the heuristics and bias
    rules, so they check the audit job end to end: its heuristic definitions are those the heuristics rule wrote
    into its file, and its searches are the workflow's, on 126 questions where word-dist's default definition would
    give annotator 1 a different bias."""
    import gzip
    import subprocess
    import sys

    import torch
    from transformers import BertConfig, BertForQuestionAnswering

    from spurious.core.models import load_tokenizer

    with gzip.open(SQUAD_DEV, "rt") as fh:
        payload = json.load(fh)
    payload["data"] = [dict(a, paragraphs=a["paragraphs"][:4]) for a in payload["data"][:2]]
    (tmp_path / "small.json").write_text(json.dumps(payload))
    tokenizer = load_tokenizer("embedded:all-MiniLM-L6-v2")
    torch.manual_seed(0)
    model = tmp_path / "tiny_qa"
    BertForQuestionAnswering(BertConfig(
        vocab_size=tokenizer.vocab_size, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=16, max_position_embeddings=512, architectures=["BertForQuestionAnswering"],
    )).save_pretrained(model)  # fmt: skip
    tokenizer.save_pretrained(model)
    names = ["word-dist", "sim-word", "cos-sim", "ans-len"]
    dev = {"dataset": "squad", "split": "dev"}
    config = {
        "run_name": "audit_compat",
        "datasets": {"squad": {"task": "qa",
                               "splits": {"dev": {"format": "squad_json", "path": str(tmp_path / "small.json")}}}},
        "models": {"m": {"checkpoint": "embedded:all-MiniLM-L6-v2", "train": dev, "validation": dev}},
        "evaluate": [dev],
        "heuristics": {"names": names, "compat": "isbiased", "tfidf_reference": dev, "threads": 1},
        "bias": {"sample_size": 20, "iterations": 20},
        "human": dev,
        "audit": {"compat_qa": {"model": str(model), "task": "qa", "data": dev}},
    }
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    work = tmp_path / "work"
    targets = ["results/audit/compat_qa/audit.json", *(f"results/bias/human/squad/dev/{h}.json" for h in names)]
    env = dict(os.environ, SPURIOUS_DATA_MIRROR=str(SQUAD_DEV.parents[1]), HF_HUB_OFFLINE="1",
               TOKENIZERS_PARALLELISM="false")
    proc = subprocess.run([sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--directory", str(work),
                           "--cores", "1", *targets, "--configfile", str(tmp_path / "config.yaml")],
                          capture_output=True, text=True, env=env, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    audit = json.loads((work / "results/audit/compat_qa/audit.json").read_text())
    assert audit["heuristic_settings"]["compat"] == "isbiased" and audit["heuristic_settings"]["names"] == names
    assert audit["bias_settings"] == {"sample_size": 20, "iterations": 20, "with_replacement": False, "seed": 0,
                                      "allow_too_few_rows": False}
    written = read_parquet_metadata(work / "results/heuristics/squad/dev.parquet")
    assert {k: written[k] for k in ("compat", "variants")} == {k: audit["heuristic_settings"][k] for k in
                                                               ("compat", "variants")}
    assert written["heuristics"] == audit["heuristic_settings"]["names"]
    assert written["tfidf_reference"] == audit["heuristic_settings"]["tfidf_contexts"]
    assert audit["n_examples"] == 126 and audit["human_bias"] is not None
    for h in names:
        ours = json.loads((work / f"results/bias/human/squad/dev/{h}.json").read_text())
        theirs = audit["human_bias"][h]
        for key in ("prediction_bias", "threshold", "found", "n_evaluated", "annotator", "per_annotator_bias"):
            assert theirs[key] == ours[key], (h, key)
    # the case tells the definitions apart: with the default word-dist annotator 1's search finds a threshold
    frame = read_qa(work / "results/data/squad/dev.parquet")
    default = compute_heuristics(frame, ["word-dist"], tfidf_contexts=frame["context"].tolist()).set_index("id")
    per_annotator = [search_threshold(default.loc[s["id"], "word-dist"].to_numpy(), s["em"].to_numpy(),
                                      s["f1"].to_numpy(), heuristic="word-dist", **audit["bias_settings"])[
                                          "prediction_bias"]
                     for s in human_scores(frame)]
    assert per_annotator != audit["human_bias"]["word-dist"]["per_annotator_bias"]
