"""The AFLite synthetic experiment as a workflow: the demo config's plan and a tiny run through the report."""

from __future__ import annotations

import json

import pandas as pd
import yaml

from tests.conftest import REPO
from tests.test_workflow import job_counts, snakemake


def test_demo_aflite_dry_run_plans_every_separation_and_seed(tmp_path):
    out = snakemake(tmp_path, "-n", "--configfile", str(REPO / "configs" / "demo-aflite.yaml")).stdout
    counts = job_counts(out)
    assert counts["aflite_synthetic"] == 4 * 10 and counts["aflite_synthetic_report"] == 1
    assert "results/aflite/synthetic/sep0.8/seed9.json" in out


def test_tiny_synthetic_run_writes_table7_and_figure2(tmp_path):
    cfg = {"run_name": "tiny-aflite", "aflite": {"synthetic": {"separations": [0.4], "seeds": [0, 1], "n_per_class": 200}}}
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(cfg))
    snakemake(tmp_path, "--cores", "2", "--configfile", str(path))
    run = json.loads((tmp_path / "results/aflite/synthetic/sep0.4/seed0.json").read_text())
    assert run["n"] == 400 and run["settings"]["m"] == 128 and run["settings"]["k"] == 10
    assert run["biased_kept"] < run["biased_total"]
    table = pd.read_csv(tmp_path / "results/report/aflite/table7.csv")
    assert list(table["model"]) == ["SVM-RBF", "Logistic Reg."] and (table["seeds"] == 2).all()
    assert table.loc[0, "D (paper)"] == 83.8
    assert (tmp_path / "results/report/aflite/figure2.svg").stat().st_size > 1000
