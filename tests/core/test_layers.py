"""The package's layers (docs/ARCHITECTURE.md): the import contracts in pyproject.toml hold, and break when a
forbidden import is planted; core names no paper; the public names of docs/CONTRACTS.md import from where they are."""

from __future__ import annotations

import importlib
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "src" / "spurious"
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"
PAPERS = ("thinktwice", "aflite", "spuriousbench", "lexical")


def _contract_names() -> dict[str, str]:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]
    return {contract["id"]: contract["name"] for contract in config["contracts"]}


def _lint_copy(tmp_path: Path, plant: tuple[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """lint-imports with the repository's contracts on a copy of the package, with ``plant = (module file, line)``
    appended to one of its modules; the copy comes first on the path, so grimp analyses it, not the checkout."""
    shutil.copytree(PACKAGE, tmp_path / "spurious", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    if plant is not None:
        target = tmp_path / "spurious" / plant[0]
        target.write_text(target.read_text() + f"\n{plant[1]}\n")
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", "pyproject.toml"],
        cwd=tmp_path,
        env={"PYTHONPATH": str(tmp_path), "PATH": str(LINT_IMPORTS.parent)},
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_contracts_hold(tmp_path: Path) -> None:
    result = _lint_copy(tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    for name in _contract_names().values():
        assert f"{name} KEPT" in result.stdout


@pytest.mark.parametrize(
    ("contract", "plant", "evidence"),
    [
        # core importing a paper (what core.models did to register the overlap model)
        ("layers", ("core/io.py", "import spurious.thinktwice.bias"), "spurious.core.io -> spurious.thinktwice.bias"),
        # a paper importing another (what lexical.report did for a number formatter)
        ("papers", ("lexical/report.py", "import spurious.aflite.report"),
         "spurious.lexical.report -> spurious.aflite.report"),
        # the audit importing the CLI (a circle with cli.entry, which imports the audit's parser)
        ("layers", ("audit/insertion.py", "import spurious.cli"), "spurious.audit.insertion -> spurious.cli"),
        # the workflow layer sits above the papers and below the audit: neither a paper nor core may use it, and it
        # may not use the audit
        ("layers", ("lexical/report.py", "import spurious.workflow.plan"),
         "spurious.lexical.report -> spurious.workflow.plan"),
        ("layers", ("core/io.py", "import spurious.workflow.runlog"), "spurious.core.io -> spurious.workflow.runlog"),
        ("layers", ("workflow/plan.py", "import spurious.audit.qa"), "spurious.workflow.plan -> spurious.audit.qa"),
        # the QA audit importing the classification audit (for the input checks both use, now in audit.checks)
        ("audits", ("audit/qa.py", "import spurious.audit.classification"),
         "spurious.audit.qa -> spurious.audit.classification"),
        # core's floors: records below training and reports (data reading a training module would pull torch into
        # every reader of a parquet file)
        ("core-floors", ("core/data/squad.py", "import spurious.core.train.engine"),
         "spurious.core.data.squad -> spurious.core.train.engine"),
        ("core-floors", ("core/report/tables.py", "import spurious.core.train.logits"),
         "spurious.core.report.tables -> spurious.core.train.logits"),
        # two core modules importing each other (core.train.logits imported core.train.qa back)
        ("acyclic", ("core/io.py", "import spurious.core.train.logits"), "No cycles are allowed in spurious.core"),
    ],
)
def test_a_planted_forbidden_import_breaks_its_contract(
    tmp_path: Path, contract: str, plant: tuple[str, str], evidence: str
) -> None:
    result = _lint_copy(tmp_path, plant)
    assert result.returncode != 0
    assert f"{_contract_names()[contract]} BROKEN" in result.stdout, result.stdout + result.stderr
    assert evidence in result.stdout


def test_no_core_module_names_a_paper_package() -> None:
    # stricter than the layers contract: not even a lazy import inside a function or a name in a docstring
    pattern = re.compile(rf"\bspurious\.({'|'.join(PAPERS)})\b|from spurious import .*\b({'|'.join(PAPERS)})\b")
    named = [
        f"{path.relative_to(REPO)}:{number}: {line.strip()}"
        for path in sorted((PACKAGE / "core").rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if pattern.search(line)
    ]
    assert named == []


# The public names of docs/CONTRACTS.md, by the module users import them from (each must appear in the document).
CONTRACT_NAMES = {
    "spurious.core.data.squad": "load_squad_json load_flat_json read_qa_parquet write_qa_parquet",
    "spurious.core.data.classification": (
        "load_source validate_records split_random split_grouped write_parquet read_parquet"
    ),
    "spurious.core.io": "atomic_path write_json write_parquet",
    "spurious.core.metrics": "normalize_answer exact_match f1_score score_predictions evaluate",
    "spurious.core.resources": "load_spacy english_stopwords",
    "spurious.core.models": "resolve_model load_tokenizer load_qa_model load_config model_attention_mask",
    "spurious.core.train.settings": (
        "SHARED_DEFAULTS SHARED_KINDS NUMBER WHOLE FLAG NULL one_of task_defaults task_kinds ResolvedSettings"
    ),
    "spurious.core.train.qa": (
        "DEFAULT_SETTINGS KINDS resolve_settings train_qa predict_qa training_features infer_feature_logits qa_loss "
        "segment_gap_selection INIT_MODES"
    ),
    "spurious.core.train.logits": (
        "features_fingerprint FeatureWindows write_feature_logits load_feature_logits align_to_batch"
    ),
    "spurious.core.registry": (
        "register_model_type load_model_types model_types register_qa_init qa_init qa_inits "
        "register_config_check config_checks CONFIG_CHECK_STAGES"
    ),
    "spurious.core.report.tables": "write_table format_markdown fixed_decimals NA_TEXT",
    "spurious.core.report.figures": (
        "figure_function registered_figures figure_style TEXT_STYLE save_figure svg_text capture_figures CHECK_ENV "
        "check_figure assert_readable FigureCheckError MAX_WIDTH_IN PNG_DPI count_axis is_count_axis fill "
        "explain_empty rotate_crowded_ticklabels"
    ),
    "spurious.core.data.inputs": (
        "load_data load_predictions load_classification_file load_classification_predictions "
        "PREDICTION_FORMATS InputError check_output label_names"
    ),
    "spurious.core.train.training": (
        "epoch_order latest_checkpoint PreemptionGuard TrainingPreempted pick_device use_bf16 seed_everything "
        "param_groups save_model_dir pad_multiple padded_width to_device"
    ),
    "spurious.core.train.compiled": "check_setting decide Decision compile_function batched AUTO_MIN_PASSES",
    "spurious.core.train.packing": (
        "enable position_offset pack model_inputs unpack sequence_classification_logits row_length packed_length "
        "bucket_size PACKED_LENGTHS PackedAttentionUnavailable"
    ),
    "spurious.core.errors": "InputError UnreadableFileError unreadable MissingResourceError rebuild_advice",
    "spurious.core.readers": (
        "read_parquet read_parquet_table read_parquet_schema metadata_json read_json DuplicateKeyError read_csv "
        "read_json_lines read_npy read_npz load_torch read_with"
    ),
    "spurious.workflow.results_index": "index_html write_index",
    "spurious.core.data.hub": (
        "read_records read_record FetchRecord FetchError model_record_path dataset_record_path file_record_path "
        "fetch_model check_model_folder load_hub_dataset dataset_record offline_jobs network_for_local_rule "
        "startup_problems refuse_conda DeploymentRefused CONDA_REFUSED model_file_patterns"
    ),
    "spurious.core.data.urlfetch": "fetch_url ChecksumError FetchFailed",
    "spurious.core.data.mirror": "FILES build with_source_checksums",
    "spurious.core.config": "result_settings canonical RuleSettings unordered ConfigError available_splits",
    "spurious.workflow.config": "load_config_file validate_config method_training SCHEMA_PATH",
    "spurious.workflow.slurm": (
        "request_of pending_requests parse_sinfo unmet status_command_problem check_workflow SlurmRequestError "
        "apply_size_requests size_table"
    ),
    "spurious.workflow.sizes": "model_size ModelSize ModelSizeError KNOWN CLASS_LIMITS",
    "spurious.workflow.plan": "planned_jobs PlannedJob workflow_root PlanError estimate markdown as_json",
    "spurious.core.train.engine": "train TrainResult step_counts run_summary",
    "spurious.core.train.checkpoints": "TrainState save_checkpoint resume STATE_FILE MODEL_STATE_FILE",
    "spurious.core.train.launch": "launch needs_launch job_settings processes_setting",
    "spurious.core.train.classifier": "train_classifier predict_classifier bitfit",
    "spurious.core.train.prompt": (
        "PromptSpec PAPER_PROMPTS label_word_ids encode_prompts PromptClassifier load_masked_lm"
    ),
    "spurious.core.data.qnli": "split_qnli_by_article squad_to_qnli_pairs derive_by_article",
    "spurious.thinktwice.heuristics": "HEURISTICS compute_heuristics load_spacy read_heuristic_values",
    "spurious.thinktwice.config": "method_training config_problems",
    "spurious.thinktwice.bias": (
        "threshold_grid search_threshold search_thresholds split_by_threshold annotator_predictions human_scores "
        "human_skipped_count human_bias"
    ),
    "spurious.thinktwice.overlap_qa": "OverlapQAModel from_checkpoint",
    "spurious.thinktwice.report": (
        "load_results bias_table thresholds_table scores_table write_table figure2 figure4_table"
    ),
    "spurious.thinktwice.debias": (
        "learned_mixin_h_loss confidence_regularization_loss rescale_bias_probs LearnedMixinObjective "
        "ConfidenceRegularizationObjective gate_summary choose_scale resample_segments"
    ),
    "spurious.thinktwice.debias_report": (
        "table1 methods_bias_table figure5 cross_bias_matrix cross_bias_table figure_cross_bias figure6_table figure6 "
        "ood_performance_table figure3 figure_loss_curves bias_models_table runs_table quality_floors"
    ),
    "spurious.lexical.bilstm": "train_bilstm predict_bilstm is_bilstm",
    "spurious.lexical.features": (
        "feature_matrix zscore_table top_features associated_labels usual_unusual log_hypergeom_sf permutation_test "
        "correct_predictions model_bias_test bigram_matrix sample_bigrams"
    ),
    "spurious.lexical.reweight": (
        "select_features solve_weights ReweightResult ReweightCollapse err label_balance read_weights"
    ),
    "spurious.spuriousbench.icl": "draw_demonstrations ICLTemplate PAPER_TEMPLATES template_for predict_icl",
    "spurious.spuriousbench.construction": (
        "FEATURES SST2_FEATURES MNLI_FEATURES has_feature can_insert insert construct_split construct_test "
        "spurious_gap sst2_pools mnli_pools build_suite balance_supporting_counter write_split read_split"
    ),
    "spurious.spuriousbench.report": "gap_table category_table sizes_table summary_lines",
    "spurious.spuriousbench.gap_figures": "figure1 figure2 figure3",
    "spurious.spuriousbench.config": "config_problems",
    "spurious.aflite.config": "config_problems dataset_problems ood_problems",
    "spurious.aflite.filtering": (
        "fit_logistic_batched predictability_scores Scores select_greedy select_sample aflite AFLiteResult"
    ),
    "spurious.aflite.text": (
        "split_warmup filter_pool_and_dev attach_ids training_sets filtered_dev partial_input resolve_target_size"
    ),
    "spurious.aflite.report": "text_table accuracy_matrix iterations_figure paper_accuracy",
    "spurious.aflite.ood": "score_predictions pooled_accuracy ood_table training_data train_set_kind check_same_labels",
    "spurious.audit.insertion": "flip_test insertion_table",
    "spurious.audit.checks": "AuditInputError check_tokenizer_files read_model_config",
    "spurious.audit.classification": "audit_classification AuditInputError",
    "spurious.audit.qa": "audit_qa",
    "spurious.audit.command": "run_audit",
}
# Names this refactoring moved into core, importable from their old homes too.
MOVED_NAMES = {
    "spurious.thinktwice.report": "NA_TEXT fixed_decimals format_markdown write_table",
    "spurious.cli": (
        "CLIError load_data load_predictions load_classification_file load_classification_predictions "
        "PREDICTION_FORMATS _read_json_file _is_official_squad main build_parser"
    ),
    "spurious.cli.inputs": (
        "CLIError load_data load_predictions load_classification_file load_classification_predictions"
    ),
}


def _pairs(names: dict[str, str]) -> list[tuple[str, str]]:
    return [(module, name) for module, listed in names.items() for name in listed.split()]


@pytest.mark.parametrize(("module", "name"), _pairs(CONTRACT_NAMES) + _pairs(MOVED_NAMES))
def test_public_names_import_from_where_they_are(module: str, name: str) -> None:
    assert getattr(importlib.import_module(module), name) is not None


def test_the_public_names_are_those_of_contracts_md() -> None:
    text = (REPO / "docs" / "CONTRACTS.md").read_text()
    missing = [f"{module}.{name}" for module, name in _pairs(CONTRACT_NAMES) if not re.search(rf"\b{name}\b", text)]
    assert missing == []
    headings = set(re.findall(r"^## (spurious\.[\w.]+)", text, flags=re.MULTILINE))
    assert headings <= set(CONTRACT_NAMES) | {"spurious.audit"}, headings - set(CONTRACT_NAMES)
