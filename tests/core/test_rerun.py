"""Reruns compare a config by content: a config that differs only in key order, quoting or number formatting gives
every job the same params as Snakemake's params trigger compares them, for every shipped config (the four papers,
the demos and the embedded default). The same on a finished run, and a real change reruning exactly its stage and
what depends on it: tests/lexical/test_lexical_workflow.py; after a whole paper run: the rehearsal's last dry run
(tests/rehearse/run.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO, SHARED
from tests.rehearse.reordered import merged, reversed_mappings, write_reordered

SHIPPED = [
    ["configs/paper-squad.yaml"],
    ["configs/paper-aflite.yaml"],
    ["configs/paper-lexical.yaml"],
    ["configs/paper-spurious.yaml"],
    ["config.yaml"],
    ["configs/demo-debias.yaml"],
    ["configs/demo-aflite.yaml"],
    ["configs/demo-lexical.yaml"],
    ["configs/demo-spurious.yaml"],
    ["config.yaml", "configs/demo-audit.yaml"],
]


def trigger_params(configfiles: list[Path], workdir: Path) -> dict[tuple[str, tuple], list[str]]:
    """(rule, wildcards) → the job's params as Snakemake's params trigger records and compares them (its own
    serialisation: the repr of every param of a builtin type, sorted; other objects are skipped)."""
    from snakemake.persistence import UNREPRESENTABLE, PersistenceBase

    from spurious.workflow import plan

    _, jobs = plan.planned_jobs(configfiles, None, workdir, REPO)
    found = {}
    for job in jobs:
        serialised = (PersistenceBase._serialize_param_builtin(None, value) for value in job.params.values())
        found[(job.rule, tuple(sorted(job.wildcards.items())))] = sorted(
            s for s in serialised if s is not UNREPRESENTABLE
        )
    return found


def test_a_canonical_param_compares_by_content_and_keeps_the_configs_order() -> None:
    from spurious.core.config import canonical, unordered

    settings = canonical({"lr": 2e-5, "epochs": 3.0, "layers": [{"b": 1, "a": 2}]})
    again = canonical({"layers": [{"a": 2, "b": 1}], "epochs": 3, "lr": 0.00002})
    assert repr(settings) == repr(again) == "{'epochs': 3, 'layers': [{'a': 2, 'b': 1}], 'lr': 2e-05}"
    assert list(settings) == ["lr", "epochs", "layers"]  # what the script sees: the config's order
    assert repr(canonical({"epochs": 3.5})) != repr(canonical({"epochs": 3}))  # a real change still differs
    assert repr(canonical([1, 2])) != repr(canonical([2, 1]))  # a list's order means something
    assert repr(unordered(["b/seed0", "a/seed0"])) == repr(unordered(["a/seed0", "b/seed0"]))
    assert repr(canonical(1.0)) == "1" and canonical(1.0) == 1.0


def test_the_reordered_copy_reverses_every_mapping_and_keeps_the_content() -> None:
    config = merged([REPO / "configs" / "paper-squad.yaml"])
    assert list(reversed_mappings(config)) == list(reversed(list(config)))
    training = config["models"]["bert_base_cased"]["training"]
    assert list(reversed_mappings(config)["models"]["bert_base_cased"]["training"]) == list(reversed(list(training)))


@pytest.mark.parametrize("configs", SHIPPED, ids=["+".join(Path(c).stem for c in cs) for cs in SHIPPED])
def test_a_reordered_config_gives_every_job_the_same_params(configs: list[str], tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPURIOUS_DATA_MIRROR", str(SHARED / "data"))
    files = [REPO / c for c in configs]
    reordered = write_reordered(files, tmp_path / "reordered.yaml")
    original = trigger_params(files, tmp_path / "a")
    again = trigger_params([reordered], tmp_path / "b")
    assert set(again) == set(original)
    differ: dict[str, Any] = {}
    for key, params in original.items():
        if again[key] != params:
            differ.setdefault(key[0], (sorted(set(params) - set(again[key])), sorted(set(again[key]) - set(params))))
    assert not differ, differ
