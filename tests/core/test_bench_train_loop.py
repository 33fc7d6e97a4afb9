"""The training benchmark (benchmarks/bench_train_loop.py) on the CPU: one variant's failure does not lose the others,
the report is rewritten after every variant, the headline rate is real tokens/s, and what was not steady is reported.

The GPU numbers themselves come from a GPU (docs/gpu.md); these check the benchmark's own logic with real runs where
they are cheap (a few steps of a small random BERT) and with rows built by hand where only a GPU makes the numbers
(CUDA graphs)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from benchmarks import bench_train_loop as bench
from tests.conftest import REPO, SHARED, tiny_encoder

TINY = ["--questions", "4", "--max-length", "64", "--stride", "32", "--batch-size", "2", "--steps", "3",
        "--warmup", "2", "--threads", "1"]  # fmt: skip


def test_a_failing_variant_keeps_the_others_and_the_report_is_written_after_each(tmp_path):
    """The Trainer with ``torch_compile=True`` fails for real (a torch.compile backend that does not exist) and runs
    first; the report on disk then already holds its error and names the variant still to run; the tuned fair
    Trainer (no NaN/inf filter, 2 loader workers) then runs and its row stands; the run exits non-zero."""
    env = dict(os.environ, SPURIOUS_DATA_MIRROR=str(SHARED / "data"), SPURIOUS_COMPILE_BACKEND="no_such_backend")
    json_path, md_path = tmp_path / "bench.json", tmp_path / "bench.md"
    command = [sys.executable, str(REPO / "benchmarks" / "bench_train_loop.py"), *TINY,
               "--model", str(tiny_encoder(tmp_path)),
               "--variants", "trainer_compiled,trainer_tuned", "--json", str(json_path), "--markdown", str(md_path)]
    partial = None
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) as proc:
        for line in proc.stdout:  # the line of each variant is printed once the report holds it
            if line.startswith("  trainer_compiled: FAILED"):
                partial = json.loads(json_path.read_text()), md_path.read_text()
        stderr = proc.stderr.read()
        status = proc.wait(timeout=600)
    assert partial is not None, stderr[-3000:]
    report, markdown = partial
    assert report["variants_pending"] == ["trainer_tuned"] and markdown.startswith("# bench_train_loop on cpu")
    assert "PARTIAL (written after every variant; still to run: trainer_tuned)" in markdown
    assert [r["variant"] for r in report["results"]] == ["trainer_compiled"]
    assert status == 1 and "1 variant(s) failed: trainer_compiled" in stderr
    report = json.loads(json_path.read_text())
    assert report["variants_pending"] == []
    rows = {r["variant"]: r for r in report["results"]}
    failed, tuned = rows["trainer_compiled"], rows["trainer_tuned"]
    assert "no_such_backend" in failed["error"].lower() and failed["error_tail"]
    assert tuned["logging_nan_inf_filter"] is False and tuned["dataloader_num_workers"] == 2
    # one step timed, 2 windows: its real tokens counted from what the training step received, in the main process
    assert tuned["timed_steps"] == 1 and tuned["timed_features"] == 2 and tuned["passes"] == 2
    assert tuned["real_tokens_per_s"] == pytest.approx(tuned["timed_real_tokens"] / tuned["timed_seconds"])
    assert 2 <= tuned["timed_real_tokens"] <= 2 * 64 and tuned["eager_steps_in_window"] == 1
    assert tuned["shapes_first_met_in_window"] == 0  # the steady pass met nothing its cold pass had not
    markdown = md_path.read_text()
    assert "PARTIAL" not in markdown and "| trainer_compiled | FAILED: exit status 1" in markdown
    torch_compile_target = next(c for c in report["targets"] if "torch_compile=True" in c["target"])
    assert torch_compile_target["verdict"].startswith("not measured: ") and "trainer_compiled failed" in (
        torch_compile_target["verdict"]
    )


def _row(features: int, tokens: int, seconds: float, **extra) -> dict:
    """A measured row: ``features`` windows of ``tokens`` real tokens in all in ``seconds``."""
    return {"name": extra.pop("name", "row"), "timed_seconds": seconds, "features_per_s": features / seconds,
            "timed_real_tokens": tokens, "timed_sum_sq_lengths": tokens * 100, "timed_computed_tokens": tokens,
            **extra}  # fmt: skip


def test_the_headline_is_real_tokens_and_model_flops():
    """Two loops at the same features/s whose windows differ in length (ours 190 real tokens a window, the Trainer's
    160, as on BERT-base): the targets compare real tokens/s (190 / 160 = 1.1875x), not features/s (1.0x); the model
    FLOP/s follow the formula by hand."""
    shape = bench.ModelShape(non_embedding_parameters=1000, layers=2, hidden=8, model_type="bert")
    rows = {"trainer_fair": _row(100, 16_000, 2.0), "ours_defaults": _row(100, 19_000, 2.0, name="ours")}
    bench.add_rates(rows, shape, peak=1e9)
    ours = rows["ours_defaults"]
    assert ours["real_tokens_per_s"] == 9_500 and ours["feature_ratio_vs_trainer"] == 1.0
    assert ours["ratio_vs_trainer"] == pytest.approx(19 / 16)
    # (6 x 1000 x 19,000 + 12 x 2 x 8 x 1,900,000) / 2 s = 57e6 + 182.4e6 = 239.4e6 FLOP/s; MFU against 1e9
    assert ours["model_flops_per_s"] == pytest.approx(239.4e6) and ours["mfu"] == pytest.approx(0.2394)
    target = bench.target_checks(rows, "n/a")[0]
    assert "the fair Trainer (real tokens/s" in target["target"] and target["value"] == pytest.approx(1.1875)


def test_shapes_first_met_and_eager_steps_inside_the_window():
    """By hand: the timed micro-batches are the last pass's from ``start`` on."""
    one = [(4, 8), (4, 16), (4, 24), (4, 16), (4, 8), (3, 8)]
    # our compiled loop, one pass, (4, 16) compiled and warmed before step 1: of the 4 shapes of the 5 timed
    # micro-batches, (4, 24) and (3, 8) are met first in the window ((4, 8) was met before it), and the micro-batches
    # of (4, 24), (4, 8) and (3, 8) run eagerly
    census = bench.shape_census([one], 1, ready=[(4, 16)])
    assert census == {"shapes_timed": 4, "shapes_first_met_in_window": 2, "eager_steps_in_window": 3,
                      "timed_micro_batches": 5}  # fmt: skip
    # an eager loop's steady pass after a cold pass of the same batches: nothing new, everything eager
    assert bench.shape_census([one, one], 1)["shapes_first_met_in_window"] == 0
    assert bench.shape_census([one, one], 1)["eager_steps_in_window"] == 5
    # the Trainer's torch.compile: no eager steps (its recompilations are counted apart)
    assert bench.shape_census([one, one], 1, compiled_model=True)["eager_steps_in_window"] == 0


def test_cuda_graph_fallbacks_recompilations_and_an_unreliable_profile_are_reported():
    """Rows as a GPU run would write them: a compiled row with graphs inductor left without CUDA graphs and a
    recompilation is marked NOT steady, and its profile (taken after its graphs were captured) unreliable."""
    record = {"enabled": True, "shapes": [[32, 384]], "passes": [20], "eager_passes": 0, "compile_s": 30.0,
              "capture_s": 0.2, "graph_breaks": 0, "backend": "inductor", "cudagraph_skips": 2, "recompiles": 1}
    row = _row(640, 120_000, 1.0, name="ours, CUDA defaults", device="cuda:0", compile=record, cudagraph_skips=2,
               recompiles=1, graphs_compiled_in_timed_window=0, graphs_compiled_per_pass=[3], s_per_step=0.05,
               mean_batch_width=190, pad_fraction=0.1, passes=1, shapes_timed=1, shapes_first_met_in_window=0,
               eager_steps_in_window=0, timed_micro_batches=20, timing_method="clock")  # fmt: skip
    row["profile"] = {"profiled_steps": 3, "wall_s_per_step": 0.06, "gpu_idle_share": 0.5, "file": "p.txt",
                      **bench.profile_caveat(row)}  # fmt: skip
    assert "captured before the profiler started" in row["profile"]["unreliable"]
    assert bench.profile_caveat({**row, "device": "cpu"}) == {}  # no CUDA graphs on a CPU
    rows = {"ours_defaults": row}
    bench.add_rates(rows, bench.ModelShape(1000, 2, 8, "bert"), peak=None)
    payload = {"rows": rows, "device": "NVIDIA H200 (cuda)", "device_type": "cuda", "bf16": True, "model": "m",
               "model_type": "bert", "batch_size": 32, "gradient_accumulation_steps": 1, "max_length": 384,
               "warmup_steps": 8, "steps": 40, "non_embedding_parameters": 1000, "layers": 2, "hidden": 8,
               "peak": "n/a", "defaults_attention": "packed", "defaults_attention_why": "varlen_attn",
               "compile_cache": "fresh", "targets": bench.target_checks(rows, "n/a"), "profile": "dir"}  # fmt: skip
    text = "\n".join(bench.report_lines(payload))
    assert ("dynamo and CUDA graphs, ours, CUDA defaults: cudagraph_skips 2, recompiles 1, graphs compiled per pass "
            "[3], in the timed steps 0; NOT steady: 2 graphs without CUDA graphs, 1 recompilations") in text
    assert "GPU idle 50.0 % of each step (UNRELIABLE: its CUDA graphs were captured before the profiler" in text
    assert ("- ours, CUDA defaults: 0 of the 1 timed shapes first met there, "
            "0 of the 20 timed micro-batches eager") in text
