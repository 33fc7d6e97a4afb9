"""What the papers register with core (spurious.core.registry), and that importing any part of the package has
registered it: every entry point (the Snakefile, the CLI, the audit, the workflow adapters) imports some part."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from spurious.core import registry
from spurious.papers import PAPERS, load_papers

REPO = Path(__file__).resolve().parents[2]


def _python(code: str) -> subprocess.CompletedProcess[str]:
    """``code`` in a fresh interpreter: registrations are per process, and this one has them all."""
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=300)


def test_load_papers_registers_each_papers_additions() -> None:
    assert load_papers() == PAPERS == ("thinktwice", "aflite", "spuriousbench", "lexical")
    assert "spurious_overlap_qa" in registry.model_types()
    assert "overlap" in registry.qa_inits()
    assert "spuriousbench" in registry.config_checks()


def test_the_config_checks_stages_and_order() -> None:
    # the order is validate_config's order of reporting (tests/core/test_config.py checks the messages)
    assert registry.CONFIG_CHECK_STAGES == ("before_tasks", "with_tasks")
    assert tuple(registry.config_checks("before_tasks")) == ("debias",)
    assert tuple(registry.config_checks("with_tasks")) == ("aflite", "spuriousbench")
    # all stages together in registration order: load_papers imports thinktwice last
    assert tuple(registry.config_checks()) == ("aflite", "spuriousbench", "debias")
    with pytest.raises(ValueError, match="unknown stage 'early'; known: before_tasks, with_tasks"):
        registry.register_config_check("mypaper", lambda cfg, task, schema: [], stage="early")
    with pytest.raises(ValueError, match="'debias' is already registered at stage 'before_tasks'"):
        registry.register_config_check("debias", registry.config_checks()["debias"])
    assert "mypaper" not in registry.config_checks()


def test_the_overlap_model_type_is_the_modules() -> None:
    from spurious import thinktwice
    from spurious.thinktwice import overlap_qa

    assert thinktwice.OVERLAP_MODEL_TYPE == overlap_qa.MODEL_TYPE


def test_a_name_registered_twice_with_another_function_is_an_error() -> None:
    registry.register_qa_init("overlap", registry.qa_init("overlap"))  # the same function again: harmless
    with pytest.raises(ValueError, match="QA init 'overlap' is already registered"):
        registry.register_qa_init("overlap", lambda checkpoint: None)


def test_an_unknown_init_names_the_registered_ones() -> None:
    from spurious.core.train.qa.finetune import _initial_model

    with pytest.raises(ValueError, match="unknown init 'bogus'; known: pretrained, scratch, overlap"):
        _initial_model("embedded:all-MiniLM-L6-v2", "bogus")


def test_registering_imports_nothing_heavy() -> None:
    # every import of the package loads the papers (spurious/__init__.py): they register functions, which import
    # torch, transformers or pandas only when called
    result = _python(
        "import sys\nimport spurious\nfrom spurious.core import registry\n"
        "print(sorted(m for m in ('torch', 'transformers', 'pandas') if m in sys.modules), registry.qa_inits())"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[] ('overlap',)"


def test_validate_config_runs_the_registered_checks_whoever_imports_it() -> None:
    # the Snakefile imports only workflow.config: SpuriousBench's check must still run (it fills in the paper's sizes)
    result = _python(
        "import yaml\nfrom spurious.workflow.config import validate_config\n"
        "cfg = yaml.safe_load(open('configs/demo-spurious.yaml'))\n"
        "del cfg['spuriousbench']['datasets']['sst2']['train_size']\n"
        "print(validate_config(cfg)['spuriousbench']['datasets']['sst2']['train_size'])"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "3000"  # the paper's size, filled in by the check


@pytest.fixture(scope="module")
def overlap_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny saved overlap bias model: a model type only Think Twice's registration makes loadable."""
    from spurious.thinktwice.overlap_qa import OverlapQAConfig, OverlapQAModel

    path = tmp_path_factory.mktemp("overlap") / "model"
    OverlapQAModel(OverlapQAConfig(vocab_size=16, embedding_dim=4, hidden_size=4)).save_pretrained(path)
    return path


def test_a_paper_model_type_loads_through_core_alone(overlap_dir: Path) -> None:
    # what a workflow adapter does (it imports only spurious.core) with a bias model of Think Twice's overlap type
    result = _python(
        "import sys\nfrom spurious.core.models import load_qa_model\n"
        f"model = load_qa_model({str(overlap_dir)!r})\n"
        "print(type(model).__name__, 'spurious.thinktwice.overlap_qa' in sys.modules)"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "OverlapQAModel True"
