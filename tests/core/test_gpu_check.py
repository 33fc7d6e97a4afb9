"""`make gpu-check --quick`: every GPU code path of the project runs, with tiny sizes and a small random BERT, on the
CPU (issue 28). The same script on a GPU node is `make gpu-check` (MiniLM); here it must end without an error and
report every check."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

from tests.conftest import REPO, SHARED, tiny_encoder

CHECKS = ["qa", "qa_cuda_defaults", "losses_vs_eager", "bias_model", "feature_logits", "resam", "lmix", "creg",
          "classifier", "prompt_classifier", "lexical_reweight", "weighted_classifier", "bilstm", "icl", "aflite",
          "bench_train_loop"]  # in this order
CUDA_ONLY = ("qa_cuda_defaults", "losses_vs_eager")


def test_the_quick_gpu_check_runs_every_path_on_the_cpu(tmp_path):
    env = dict(os.environ, SPURIOUS_DATA_MIRROR=str(SHARED / "data"), HF_HUB_OFFLINE="1",
               TOKENIZERS_PARALLELISM="false")
    # the paths, on a small random BERT (MiniLM's steps cost most of the run and check nothing more here)
    encoder = tiny_encoder(tmp_path)
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / "gpu_check.py"), "--quick",
                           "--out", str(tmp_path), "--model", str(encoder)],
                          capture_output=True, text=True, env=env, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    report = json.loads((tmp_path / "gpu_check.json").read_text())
    assert report["error"] is None and report["machine"]["device"] == "cpu"
    assert report["machine"]["model"] == str(encoder)
    assert f"; model {encoder}; " in (tmp_path / "gpu_check.md").read_text()
    rows = {r["check"]: r for r in report["checks"]}
    assert list(rows) == CHECKS
    assert rows["qa"]["steps"] == 3 and rows["qa"]["questions"] == 30 and 0 <= rows["qa"]["f1"] <= 100
    for name in ("resam", "lmix", "creg"):
        assert rows[name]["steps"] == 2 and math.isfinite(rows[name]["last_loss"]), rows[name]
    for name in ("classifier", "prompt_classifier", "weighted_classifier", "bilstm"):
        assert 0 <= rows[name]["dev_accuracy"] <= 1, rows[name]
    assert rows["lexical_reweight"]["converged"] and rows["icl"]["shots"] == 8 and rows["aflite"]["n"] == 80
    for name in CUDA_ONLY:  # skipped on the CPU, and said why
        assert rows[name]["skipped"] and rows[name]["reason"].startswith("CUDA only: "), rows[name]
        assert f"gpu-check: {name} skipped on cpu (CUDA only: " in proc.stdout
    assert all(not rows[name].get("skipped") for name in CHECKS if name not in CUDA_ONLY)
    table = (tmp_path / "gpu_check.md").read_text()
    assert table.startswith("# gpu-check on CPU") and all(f"| {name} |" in table for name in CHECKS)
    # the benchmark's whole report is kept beside it: its JSON, Markdown and printed text
    bench = json.loads((tmp_path / "bench_train_loop.json").read_text())
    assert [r["variant"] for r in bench["results"]] == ["ours_grouped"] and bench["device_type"] == "cpu"
    row = bench["results"][0]
    assert row["timed_steps"] == 1 and row["timed_features"] == 4 and row["mfu"] is None and row["features_per_s"] > 0
    text = (tmp_path / "bench_train_loop.txt").read_text()
    assert f"model {encoder} (bert, " in text and "peak: n/a on CPU" in text
    assert "Compile and capture" in text and "for reference only" in text
    assert (tmp_path / "bench_train_loop.md").read_text().startswith("# bench_train_loop on cpu")
    assert rows["bench_train_loop"]["ours_grouped"].endswith(" s/step")


def test_an_unknown_check_to_skip_is_refused(tmp_path):
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / "gpu_check.py"), "--quick", "--out", str(tmp_path),
                           "--skip", "bilstn"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "unknown checks ['bilstn']" in proc.stderr and "bilstm" in proc.stderr


def test_a_failing_check_fails_the_run_and_says_where(tmp_path):
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / "gpu_check.py"), "--quick", "--out", str(tmp_path),
                           "--data", str(tmp_path / "no_mirror")], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 1
    report = json.loads((tmp_path / "gpu_check.json").read_text())
    assert report["checks"] == [] and "no_mirror" in report["error"] and "Traceback" in proc.stderr
    assert "**FAILED**" in (tmp_path / "gpu_check.md").read_text()
