"""The config schema: defaults filled in, bad keys and values named, cross-references checked."""

from __future__ import annotations

import copy
import re

import pytest
import yaml

from spurious.core.config import ConfigError
from spurious.workflow.config import validate_config
from tests.conftest import REPO


def _default() -> dict:
    return yaml.safe_load((REPO / "config.yaml").read_text())


# configs meant to be given after another one (`--configfile config.yaml configs/demo-audit.yaml`), which Snakemake
# merges key by key
OVERLAYS = {"demo-audit.yaml": "config.yaml"}


def merged(base: dict, overlay: dict) -> dict:
    """Snakemake's merge of several --configfile files: nested mappings update key by key, the later file wins."""
    out = dict(base)
    for key, value in overlay.items():
        out[key] = merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


@pytest.mark.parametrize("path", [REPO / "config.yaml", *sorted((REPO / "configs").glob("*.yaml"))], ids=str)
def test_shipped_configs_validate(path):
    raw = yaml.safe_load(path.read_text())
    if path.name in OVERLAYS:
        raw = merged(yaml.safe_load((REPO / OVERLAYS[path.name]).read_text()), raw)
    cfg = validate_config(raw)
    assert cfg["heuristics"]["names"]


def test_defaults_are_filled_in():
    cfg = _default()
    del cfg["bias"]
    cfg["models"]["minilm"]["training"] = {}
    out = validate_config(cfg)
    assert out["bias"] == {
        "sample_size": 800, "iterations": 100, "with_replacement": False, "seed": 0,
        "split_sentinels": "exclude", "allow_too_few_rows": False,
    }
    # App. B.1 defaults.
    training = out["models"]["minilm"]["training"]
    assert (training["learning_rate"], training["batch_size"], training["epochs"]) == (2e-5, 16, 3)
    assert (training["eval_every"], training["early_stopping_patience"]) == (200, 10)
    assert cfg["models"]["minilm"]["training"] == {}, "the input config must not be modified"


def test_compile_is_an_execution_setting_that_yaml_may_spell_as_a_boolean():
    from spurious.core.config import RUNTIME_SETTINGS
    from spurious.core.train import classifier, qa

    cfg = _default()
    cfg["models"]["minilm"]["training"] = yaml.safe_load("compile: on")  # YAML reads an unquoted on as true
    training = validate_config(cfg)["models"]["minilm"]["training"]
    assert training["compile"] is True and qa.resolve_settings(training)["compile"] == "on"
    assert classifier.resolve_settings({"compile": False})["compile"] == "off"
    # off by default, on every device, until a GPU run has measured compiled training (docs/gpu.md)
    assert qa.resolve_settings({})["compile"] == classifier.resolve_settings({})["compile"] == "off"
    cfg["models"]["minilm"]["training"] = {}
    assert validate_config(cfg)["models"]["minilm"]["training"]["compile"] == "off"
    assert "compile" in RUNTIME_SETTINGS  # out of the fingerprints and of the rerun decisions
    cfg["models"]["minilm"]["training"] = {"compile": "yes"}
    with pytest.raises(ConfigError, match="compile"):
        validate_config(cfg)


def test_unknown_key_is_named_with_allowed_keys():
    cfg = _default()
    cfg["bias"]["samplesize"] = 5
    with pytest.raises(ConfigError) as err:
        validate_config(cfg)
    assert "'bias'" in str(err.value) and "samplesize" in str(err.value) and "sample_size" in str(err.value)


def test_bad_value_is_named_with_allowed_values():
    cfg = _default()
    cfg["heuristics"]["compat"] = "authors"
    with pytest.raises(ConfigError) as err:
        validate_config(cfg)
    assert "heuristics.compat" in str(err.value) and "isbiased" in str(err.value)
    cfg = _default()
    cfg["bias"]["sample_size"] = 0
    with pytest.raises(ConfigError, match="bias.sample_size"):
        validate_config(cfg)


def test_unknown_heuristic_and_bad_names():
    cfg = _default()
    cfg["heuristics"]["names"] = ["word-dist", "wordiness"]
    with pytest.raises(ConfigError, match=r"heuristics.names.1"):
        validate_config(cfg)
    cfg = _default()
    cfg["models"]["MiniLM"] = cfg["models"].pop("minilm")
    with pytest.raises(ConfigError, match="MiniLM"):
        validate_config(cfg)


def test_cross_references_are_checked():
    cfg = _default()
    cfg["evaluate"] = [{"dataset": "squad", "split": "test"}]
    cfg["segments"] = []
    with pytest.raises(ConfigError, match=r"evaluate.0.split.*available: \['dev', 'train', 'validation'\]"):
        validate_config(cfg)
    cfg = _default()
    cfg["models"]["minilm"]["train"] = {"dataset": "nq", "split": "train"}
    with pytest.raises(ConfigError, match="unknown dataset 'nq'"):
        validate_config(cfg)
    cfg = _default()
    cfg["datasets"]["squad"]["splits"]["train"] = copy.deepcopy(cfg["datasets"]["squad"]["splits"]["dev"])
    with pytest.raises(ConfigError, match="clash with the derived splits"):
        validate_config(cfg)
    cfg = _default()
    cfg["segments"][0]["heuristic"] = "cos-sim"
    cfg["heuristics"]["names"] = ["word-dist"]
    with pytest.raises(ConfigError, match="segments.0.heuristic"):
        validate_config(cfg)


def _lexical() -> dict:
    return yaml.safe_load((REPO / "configs" / "demo-lexical.yaml").read_text())


def test_lexical_defaults_and_a_config_without_qa_models():
    out = validate_config(_lexical())
    assert out["models"] == {} and out["evaluate"] == []
    lex = out["lexical"]
    assert (lex["counting"], lex["top_k"], lex["stop_words"]) == ("types", 50, "nltk")
    assert lex["reweight"]["min_count"] == 20 and lex["bigrams"] == {"n": 200, "seed": 0}
    assert lex["models"]["minilm"]["weightings"] == ["uniform", "q"]
    assert lex["models"]["minilm"]["training"]["max_length"] == 128


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda c: c["datasets"]["qnli"]["derive"].update(by="title"),
         "classification datasets derive splits by 'random' or 'text_a'"),
        (lambda c: c["lexical"]["datasets"]["qnli"].update(test="test"), "dataset 'qnli' has no split 'test'"),
        # the demo derives QNLI by SQuAD article with the extra pairs
        (lambda c: c["datasets"]["qnli"]["derive"].pop("squad"), "'datasets.qnli.derive.squad': give it"),
        (lambda c: c["datasets"]["qnli"]["derive"].update(by="text_a", squad_pairs=True), "derive.squad_pairs': needs"),
        (lambda c: c["datasets"].pop("squad"), "'datasets.qnli.derive.squad.dataset': 'squad' is not a declared QA"),
        (lambda c: c["datasets"]["qnli"]["derive"]["squad"].update(split="train"), "'squad' has no split 'train'"),
        (lambda c: c["lexical"]["datasets"].update(snli={}), "'lexical.datasets.snli': unknown dataset"),
        (lambda c: c.pop("lexical"), "nothing to run"),
        (lambda c: c["lexical"]["models"]["minilm"].update(weightings=["balanced"]), "'balanced' is not allowed"),
    ],
)
def test_lexical_config_errors_name_the_key(edit, message):
    cfg = _lexical()
    edit(cfg)
    with pytest.raises(ConfigError, match=message):
        validate_config(cfg)


def test_qa_parts_cannot_name_a_classification_dataset():
    cfg = _default()
    cfg["datasets"]["qnli"] = _lexical()["datasets"]["qnli"]
    cfg["evaluate"].append({"dataset": "qnli", "split": "validation"})
    with pytest.raises(ConfigError, match="'evaluate.1': dataset 'qnli' is a classification dataset, not QA"):
        validate_config(cfg)


def _aflite() -> dict:
    return yaml.safe_load((REPO / "configs" / "demo-aflite.yaml").read_text())


def test_aflite_text_defaults():
    text = validate_config(_aflite())["aflite"]["text"]
    assert text["representation"]["pooling"] == "cls" and text["representation"]["source"] == "warmup"
    assert text["datasets"]["sst2"]["filter"] == {
        "m": 64, "t": 2000, "k": 500, "tau": 0.75, "n": None, "selection": "greedy", "C": 1.0, "seed": 0,
    }
    assert text["datasets"]["sst2"]["partial_input"] is None and text["datasets"]["qnli"]["partial_input"] == "text_b"
    assert text["models"]["minilm"]["train_sets"] == ["full", "random", "aflite"] and text["random_seed"] == 0


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda c: c["aflite"]["text"]["datasets"]["qnli"].update(dev="test"),
         "'aflite.text.datasets.qnli.dev': dataset 'qnli' has no split 'test'"),
        (lambda c: c["aflite"]["text"]["datasets"]["qnli"].update(dev="train"), "train and dev are the same split"),
        (lambda c: c["aflite"]["text"]["datasets"]["qnli"]["filter"].update(n=1000),
         r"needs t < n, got t=1000, n=1000"),
        (lambda c: c["aflite"]["text"]["datasets"]["qnli"].update(filters={"sized": {"n": 1000}}),
         r"'aflite.text.datasets.qnli.filters.sized.n': Algorithm 1 needs t < n, got t=1000, n=1000"),
        (lambda c: c["aflite"]["text"]["datasets"]["qnli"].update(filters={"sized": {"size": 5000}}),
         "Additional properties are not allowed"),
        (lambda c: c["aflite"]["text"]["representation"].update(source="file"), "'aflite.text.datasets.sst2.features'"),
        (lambda c: c["aflite"]["text"]["datasets"].update(snli=c["aflite"]["text"]["datasets"]["qnli"]),
         "'aflite.text.datasets.snli': unknown dataset"),
        (lambda c: c["aflite"]["text"]["datasets"]["qnli"].update(partial_input="hypothesis"),
         "'aflite.text.datasets.qnli.partial_input': 'hypothesis' is not allowed"),
    ],
)
def test_aflite_text_config_errors_name_the_key(edit, message):
    cfg = _aflite()
    edit(cfg)
    with pytest.raises(ConfigError, match=message):
        validate_config(cfg)


def _ood(**edits) -> dict:
    cfg = _aflite()
    cfg["aflite"]["text"]["ood"] = {
        "qnli_again": dict({"dataset": "qnli", "splits": {"dev": None}, "models_from": "qnli"}, **edits)
    }
    return cfg


def test_aflite_ood_defaults_and_the_paper_sets():
    ood = validate_config(_ood())["aflite"]["text"]["ood"]["qnli_again"]
    assert ood["prediction_map"] == {} and ood["only_labels"] is None and ood["finetune"] is None
    paper_config = yaml.safe_load((REPO / "configs" / "paper-aflite.yaml").read_text())
    paper = validate_config(paper_config)["aflite"]["text"]["ood"]
    assert sorted(paper) == ["anli_r1", "anli_r2", "anli_r3", "hans", "nli_diagnostics", "stress"]
    # the YAML merge keeps the round's own split and fine-tuning split
    assert paper["anli_r3"]["splits"] == {"test_r3": "Rd3"} and paper["anli_r3"]["finetune"]["split"] == "train_r3"
    assert sorted(set(paper["stress"]["splits"].values())) == ["Comp.", "Distr.", "Noise"]
    # App. A.5: every OOD set's models come from SNLI filtered to n = 182K, Tables 3-4's filter keeps tau alone
    assert {spec["models_filter"] for spec in paper.values()} == {"n182k"} and ood["models_filter"] is None
    cfg = validate_config(yaml.safe_load((REPO / "configs" / "paper-aflite.yaml").read_text()))
    snli = cfg["aflite"]["text"]["datasets"]["snli"]
    assert snli["filters"] == {"n182k": {"n": 182000}} and snli["filter"]["n"] is None  # no defaults over the filter


@pytest.mark.parametrize(
    ("edits", "message"),
    [
        ({"models_from": "snli"}, "'aflite.text.ood.qnli_again.models_from': 'snli' is not in aflite.text.datasets"),
        ({"models_filter": "n182k"},
         "'aflite.text.ood.qnli_again.models_filter': 'n182k' is not in aflite.text.datasets.qnli.filters"),
        ({"dataset": "mnli"}, "'aflite.text.ood.qnli_again.dataset': unknown dataset 'mnli'"),
        ({"splits": {"test": None}}, "'aflite.text.ood.qnli_again.splits': dataset 'qnli' has no split 'test'"),
        ({"finetune": {"split": "dev"}}, "the fine-tuning split is also evaluated"),
        ({"paper_name": "MNLI-mm"}, "'aflite.text.ood.qnli_again.paper_name': 'MNLI-mm' is not allowed"),
    ],
)
def test_aflite_ood_config_errors_name_the_key(edits, message):
    with pytest.raises(ConfigError, match=message):
        validate_config(_ood(**edits))


def _spurious() -> dict:
    return yaml.safe_load((REPO / "configs" / "demo-spurious.yaml").read_text())


def test_spuriousbench_defaults_fill_the_paper_sizes_and_features():
    cfg = _spurious()
    del cfg["spuriousbench"]["datasets"]["sst2"]["train_size"], cfg["spuriousbench"]["datasets"]["sst2"]["features"]
    bench = validate_config(cfg)["spuriousbench"]
    sst2 = bench["datasets"]["sst2"]
    assert sst2["train_size"] == 3000 and sst2["dev_size"] == 200 and len(sst2["features"]) == 28
    assert bench["prevalence"] == 0.2 and bench["strength"] == 0.9 and bench["target_label"] == 1
    assert bench["models"]["minilm"]["training"]["eval_every"] == "epoch"
    random = bench["models"]["random"]["training"]
    assert random["learning_rate"] == 1.0e-4 and random["epochs"] == 3 and random["batch_size"] == 8
    assert random["max_length"] == 64 and random["eval_every"] == "epoch"  # the YAML merge key keeps the rest
    assert bench["models"]["minilm"]["training"]["epochs"] == 2 and bench["models"]["minilm"]["prompt"] is None


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda b: b["datasets"]["sst2"].update(train_size=999),
         "'spuriousbench.datasets.sst2.train_size': must be even"),
        (lambda b: b["datasets"]["sst2"].update(test="test"),
         "'spuriousbench.datasets.sst2.test': dataset 'sst2' has no split 'test'"),
        (lambda b: b["datasets"]["sst2"]["features"].append("overlap:lexical_overlap"),
         r"\['overlap:lexical_overlap'\] are not in Table 1's sst2 subset"),
        (lambda b: b["datasets"].update(mnli={"builder": "mnli"}), "'spuriousbench.datasets.mnli': unknown dataset"),
        (lambda b: b["models"]["minilm"].update(methods=["standard"]),
         "'spuriousbench.models.minilm.methods.0': 'standard' is not allowed"),
        (lambda b: b["datasets"]["sst2"].update(train_features=["noun:show"]),
         r"train_features': \['noun:show'\] are not in"),
        (lambda b: b.update(strength=1.5), "'spuriousbench.strength': 1.5 is greater than the maximum of 1"),
        (lambda b: b["datasets"].update(neg={"builder": "sst2", "source": "sst5"}),
         "'spuriousbench.datasets.neg': unknown dataset"),
        (lambda b: b["datasets"]["sst2"].update(models=["bert"]),
         r"'spuriousbench.datasets.sst2.models': \['bert'\] are not"),
        (lambda b: b["datasets"]["sst2"].update(target_label=2),
         "'spuriousbench.datasets.sst2.target_label': 2 is not allowed"),
    ],
)
def test_spuriousbench_config_errors_name_the_key(edit, message):
    cfg = _spurious()
    edit(cfg["spuriousbench"])
    with pytest.raises(ConfigError, match=message):
        validate_config(cfg)


def test_spuriousbench_dataset_built_twice_from_one_source():
    """App. D: a second suite from the same dataset with the negative target label, for the models it names."""
    cfg = _spurious()
    cfg["spuriousbench"]["datasets"]["sst2_negative"] = dict(
        cfg["spuriousbench"]["datasets"]["sst2"], source="sst2", target_label=0, models=["minilm"]
    )
    bench = validate_config(cfg)["spuriousbench"]
    assert bench["datasets"]["sst2_negative"]["target_label"] == 0 and bench["datasets"]["sst2"]["target_label"] is None
    assert bench["datasets"]["sst2"]["source"] is None and bench["datasets"]["sst2"]["models"] is None
    assert bench["models"]["minilm"]["bitfit_learning_rate"] == 1e-3


def _debias_config() -> dict:
    return yaml.safe_load((REPO / "configs" / "demo-debias.yaml").read_text())


def test_debias_defaults_include_the_control_and_no_scale_search():
    cfg = _debias_config()
    del cfg["debias"]["methods"]
    out = validate_config(cfg)
    assert out["debias"]["methods"] == ["plain", "resam", "lmix", "creg"]
    assert out["debias"]["scale_search"] is None and out["debias"]["lmix"]["entropy_on"] == "bias"
    assert out["debias"]["bias_model"]["trainable"] == "all" and out["figure4"] is None


def test_plain_control_rejects_per_method_training_overrides():
    cfg = _debias_config()
    cfg["debias"]["lmix"]["training"] = {"max_steps": 500}
    with pytest.raises(ConfigError, match=r"debias\.lmix\.training.*plain control differ from lmix"):
        validate_config(cfg)
    cfg["debias"]["methods"] = ["resam", "lmix", "creg"]  # without the control, a method may have its own budget
    assert validate_config(cfg)["debias"]["lmix"]["training"] == {"max_steps": 500}


def test_scale_search_is_checked_and_filled_in():
    cfg = _debias_config()
    cfg["debias"]["scale_search"] = {"grid": [0.2, 0.8], "methods": ["lmix"]}
    search = validate_config(copy.deepcopy(cfg))["debias"]["scale_search"]
    assert search == {"grid": [0.2, 0.8], "methods": ["lmix"], "heuristic": "word-dist", "metric": "f1",
                      "max_examples": None}
    bad = copy.deepcopy(cfg)
    bad["debias"]["methods"] = ["plain", "resam", "creg"]
    with pytest.raises(ConfigError, match=r"scale_search\.methods.*\['lmix'\] are not in debias\.methods"):
        validate_config(bad)
    bad = copy.deepcopy(cfg)
    bad["debias"]["scale_search"]["grid"] = [0.5]
    with pytest.raises(ConfigError, match="grid"):
        validate_config(bad)
    bad = copy.deepcopy(cfg)
    bad["heuristics"]["names"] = ["ans-len", "word-dist"]
    bad["debias"]["scale_search"]["heuristic"] = "cos-sim"
    with pytest.raises(ConfigError, match=r"scale_search\.heuristic.*'cos-sim' is not in heuristics\.names"):
        validate_config(bad)


def test_the_papers_checks_report_in_the_order_of_their_stages():
    # Think Twice's debias check (stage before_tasks) is reported on its own; AFLite's and SpuriousBench's (with_tasks)
    # with the task checks, after the lexical track's datasets and before the training stages' eval_every
    cfg = _debias_config()
    for other in (_lexical(), _aflite(), _spurious()):
        for name, spec in other.pop("datasets").items():
            cfg["datasets"].setdefault(name, spec)
        cfg.update({key: value for key, value in other.items() if key != "run_name"})
    cfg["lexical"]["datasets"]["nope"] = dict(cfg["lexical"]["datasets"]["qnli"])
    cfg["aflite"]["text"]["ood"] = {"again": {"dataset": "qnli", "splits": {"dev": None}, "models_from": "nope"}}
    cfg["spuriousbench"]["datasets"]["sst2"]["train_size"] = 3
    cfg["lexical"]["models"]["bilstm"].setdefault("training", {})["eval_every"] = 5
    cfg["debias"]["original_seed"] = 999
    with pytest.raises(ConfigError) as err:
        validate_config(copy.deepcopy(cfg))
    assert str(err.value) == (
        "invalid configuration:\n  config key 'debias.original_seed': model 'minilm' is not trained with seed 999"
    )
    cfg["debias"]["original_seed"] = 0
    with pytest.raises(ConfigError) as err:
        validate_config(cfg)
    assert re.findall(r"config key '([^']+)'", str(err.value)) == [
        "lexical.datasets.nope", "aflite.text.ood.again.models_from", "spuriousbench.datasets.sst2.train_size",
        "lexical.models.bilstm.training.eval_every",
    ]


def test_figure4_references_are_checked():
    cfg = _default()
    cfg["models"]["minilm_nq"] = copy.deepcopy(cfg["models"]["minilm"])
    cfg["figure4"] = {"reference": {"model": "minilm"}, "models": ["minilm_nq"], "dataset": "squad",
                      "split": "validation"}
    assert validate_config(copy.deepcopy(cfg))["figure4"]["reference"] == {"model": "minilm", "seed": 0}
    cfg["figure4"]["models"] = ["minilm_nq", "nope"]
    cfg["figure4"]["reference"]["seed"] = 3
    with pytest.raises(ConfigError) as err:
        validate_config(cfg)
    assert "figure4.models.1': unknown model 'nope'" in str(err.value)
    assert "figure4.reference.seed': model 'minilm' is not trained with that seed" in str(err.value)


def test_debias_report_loss_curve_limit():
    """Figs. 8-9 show the first 10,000 steps: the default; null draws every step; a non-positive limit is refused."""
    cfg = _default()
    cfg["debias"] = {"model": "minilm"}
    assert validate_config(copy.deepcopy(cfg))["debias"]["report"] == {"loss_curve_max_steps": 10000}
    cfg["debias"]["report"] = {"loss_curve_max_steps": None}
    assert validate_config(copy.deepcopy(cfg))["debias"]["report"]["loss_curve_max_steps"] is None
    cfg["debias"]["report"] = {"loss_curve_max_steps": 0}
    with pytest.raises(ConfigError, match="loss_curve_max_steps"):
        validate_config(cfg)


def test_figure4_thresholds_from():
    """Default: App. C's published thresholds (Fig. 4's caption); a run's search must exist on figure4's split."""
    cfg = _default()
    cfg["models"]["minilm_nq"] = copy.deepcopy(cfg["models"]["minilm"])
    cfg["models"]["other"] = copy.deepcopy(cfg["models"]["minilm"])
    cfg["figure4"] = {"reference": {"model": "minilm"}, "models": ["minilm_nq"], "dataset": "squad",
                      "split": "validation"}
    assert validate_config(copy.deepcopy(cfg))["figure4"]["thresholds_from"] == "appendix_c"
    for source in ("reference", "appendix_c"):
        assert validate_config({**cfg, "figure4": {**cfg["figure4"], "thresholds_from": source}})
    out = validate_config({**cfg, "figure4": {**cfg["figure4"], "thresholds_from": {"model": "other"}}})
    assert out["figure4"]["thresholds_from"] == {"model": "other", "seed": 0}

    def problems(source, **changes):
        bad = copy.deepcopy({**cfg, **changes})
        bad["figure4"]["thresholds_from"] = source
        with pytest.raises(ConfigError) as err:
            validate_config(bad)
        return str(err.value)

    assert "figure4.thresholds_from.model': unknown model 'nope'" in problems({"model": "nope"})
    assert "figure4.thresholds_from.seed': model 'other' is not trained with that seed" in problems(
        {"model": "other", "seed": 5}
    )
    assert "figure4.models are only measured at fixed thresholds" in problems({"model": "minilm_nq"})
    assert "figure4.thresholds_from" in problems("bert")  # neither a mode nor a run
    not_evaluated = problems("reference", evaluate=[e for e in cfg["evaluate"] if e["split"] != "validation"])
    assert "not an evaluated split" in not_evaluated


def test_a_config_without_datasets_names_every_dangling_reference():
    # issue 14: the embedded config without its datasets failed with KeyError 'squad' in the Snakefile
    cfg = _default()
    del cfg["datasets"]
    with pytest.raises(ConfigError) as info:
        validate_config(cfg)
    message = str(info.value)
    for key in ("models.minilm.train.dataset", "evaluate.0.dataset", "human.dataset", "segments.0.dataset"):
        assert f"config key '{key}': unknown dataset 'squad'; declared: []" in message, key


def test_no_yaml_file_of_the_repository_repeats_a_key():
    """PyYAML keeps the last of two equal keys without a word (the SLURM profile once held two `groups:` blocks)."""

    class StrictLoader(yaml.SafeLoader):
        pass

    def mapping(loader, node, deep=False):
        keys = [k.value for k, _ in node.value]
        repeated = sorted({k for k in keys if keys.count(k) > 1})
        assert not repeated, f"line {node.start_mark.line + 1}: repeated keys {repeated}"
        return yaml.SafeLoader.construct_mapping(loader, node, deep)

    StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, mapping)
    files = [REPO / "config.yaml", *REPO.glob("configs/*.yaml"), *REPO.glob("profiles/*/config.yaml")]
    assert len(files) > 8
    for path in files:
        try:
            yaml.load(path.read_text(), StrictLoader)
        except AssertionError as exc:
            raise AssertionError(f"{path.relative_to(REPO)}: {exc}") from None
